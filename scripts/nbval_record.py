"""A pytest plugin for nbval: keep what the notebooks' test run executed, for the build.

``scripts/nbval.sh`` runs every notebook of the book top to bottom under nbval, with the
explorers in ``ATTNLIB_EXPLORER=both`` mode (the live widgets built and drawn, the static page
returned). With ``NBVAL_RECORD=<folder>`` this plugin (``-p nbval_record``, ``scripts/`` on
``PYTHONPATH``) writes each notebook whose every code cell ran and passed, with the outputs
nbval received from the kernel, to ``<folder>/<notebook path>``, stamped with the notebook's
and the library's fingerprints. ``scripts/prerun.py`` caches such a record for the build
instead of executing the notebook again, when both fingerprints still match: in ``make test``
each notebook is executed once.

A notebook with a failed, skipped or unrun cell is not written, and an older record of it is
removed: the build then executes it itself.

Each notebook whose last code cell has been reported (passed or not) is also listed, as an
empty file named after it, in ``<folder>/.finished/``, where ``scripts/nbval.sh`` writes the
number of notebooks of the run to ``expected``: ``scripts/test.sh`` starts the unit tests on the
core that the run leaves free once a single notebook is left (usually the reproduction report).

Widget views are left out of a record. nbval keeps no widget state, so the page could not
render them, and the only ones a ``both`` run makes are the progress bars that a live
explorer's redraw sends to its own output area (a frontend shows them inside the explorer;
nbval, which has none, receives them as outputs of the cell). The build's own execution, with
static explorers, shows no widgets.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The modes of the explorers whose output is the static page the website shows.
RECORDED_MODES = ("both", "static")
#: The MIME type of a widget view (its model lives in the kernel's widget state).
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: The ``language_info`` a Python 3 IPython kernel reports (nbval does not keep it).
LANGUAGE_INFO = {
    "name": "python", "version": sys.version.split()[0], "mimetype": "text/x-python",
    "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
    "nbconvert_exporter": "python", "pygments_lexer": "ipython3"}


def file_sha(path: Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def library_sha(root: Path = ROOT) -> str:
    """sha256 over every file of the package ``attnlib`` (its path and bytes, in path order):
    a record made with another version of the library is not used."""
    h = hashlib.sha256()
    for f in sorted((root / "attnlib").rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def record_path(folder: Path, notebook: Path, root: Path = ROOT) -> Path:
    """Where the record of ``notebook`` goes: its path in the project, under ``folder``."""
    path = Path(notebook).resolve()
    try:
        rel = path.relative_to(Path(root).resolve())
    except ValueError:  # a notebook outside the project: its absolute path, under ``folder``
        rel = Path(*path.parts[1:])
    return Path(folder) / rel


class _Run:
    """One notebook's cells as nbval ran them."""

    def __init__(self, nbfile):
        self.nbfile = nbfile
        self.path = Path(str(nbfile.fspath))
        self.sha = file_sha(self.path)
        self.ok = 0          # code cells that ran and passed
        self.bad = False     # a cell failed or was skipped
        self.count = 0       # the kernel's execution count
        self.seconds = 0.0   # time in the cells


_RUNS: dict[str, _Run] = {}


def _folder() -> Path | None:
    value = os.environ.get("NBVAL_RECORD", "").strip()
    return Path(value) if value else None


def _finished(folder: Path, nbfile, item, call, report) -> None:
    """List the notebook in ``<folder>/.finished/`` once its last code cell has a report."""
    last = next((c for c in reversed(nbfile.nb.cells) if c.cell_type == "code"), None)
    if item.cell is last and (call.when == "call" or report.failed or report.skipped):
        rel = record_path(Path("."), Path(str(nbfile.fspath)))
        done = folder / ".finished"
        done.mkdir(parents=True, exist_ok=True)
        (done / "__".join(rel.parts)).touch()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    nbfile = getattr(item, "parent", None)
    if _folder() is None or not hasattr(item, "cell") or not hasattr(nbfile, "nb"):
        return
    report = outcome.get_result()
    if call.when != "teardown":
        _finished(_folder(), nbfile, item, call, report)
    run = _RUNS.get(str(nbfile.fspath))
    if run is None:
        run = _RUNS[str(nbfile.fspath)] = _Run(nbfile)
    if call.when != "call" or report.failed or report.skipped:
        run.bad = run.bad or report.failed or report.skipped
        return
    run.seconds += report.duration
    cell = item.cell
    outputs = [nbformat.from_dict(dict(o)) for o in (getattr(item, "test_outputs", None) or [])
               if WIDGET_VIEW not in o.get("data", {})]
    if cell.source.strip():
        run.count += 1
        cell.execution_count = run.count
        for out in outputs:
            if out.output_type == "execute_result":
                out.execution_count = run.count
    else:  # an empty cell: the kernel runs nothing, the notebook keeps no count
        cell.execution_count = None
    for out in outputs:
        if out.output_type in ("display_data", "execute_result"):
            out.setdefault("metadata", {})
    cell.outputs = outputs
    run.ok += 1


def pytest_sessionfinish(session):
    folder = _folder()
    if folder is None:
        return
    mode = os.environ.get("ATTNLIB_EXPLORER", "").strip().lower() or "live"
    library = library_sha() if _RUNS else ""
    for run in _RUNS.values():
        target = record_path(folder, run.path)
        nb = run.nbfile.nb
        cells = sum(c.cell_type == "code" for c in nb.cells)
        complete = (not run.bad and run.ok == cells and mode in RECORDED_MODES
                    and file_sha(run.path) == run.sha)
        if not complete:
            target.unlink(missing_ok=True)
            continue
        nb.metadata["language_info"] = dict(LANGUAGE_INFO)
        nb.metadata["nbval_record"] = {"notebook_sha256": run.sha, "attnlib_sha256": library,
                                       "explorer_mode": mode,
                                       "seconds": round(run.seconds, 1)}
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
        tmp.replace(target)
