"""In ``make test`` each notebook is executed once: nbval's run is recorded and the build caches it.

``scripts/nbval_record.py`` (a pytest plugin) writes what nbval executed; ``scripts/prerun.py``
caches that record for the build when it is of the same notebook, library and explorer mode.
The oracle for the record is the build's own executor (jupyter-cache's ``single_nb_execution``,
nbclient): a notebook recorded by nbval must carry the outputs the build would have produced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

pytestmark = pytest.mark.slow  # kernels start

CELLS = [
    "x = 6 * 7\nprint('forty-two:', x)",
    "from IPython.display import Markdown\nMarkdown(f'**{x}** is the answer')",
    "",
    "import sys\nprint('to stderr', file=sys.stderr)\nprint('a'); print('b')",
    "from IPython.display import HTML, display\ndisplay(HTML('<b>shown</b>'))\nx + 1",
    "import base64\nfrom IPython.display import Image\n"
    "Image(base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
    "z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='))",
]


def _notebook(folder: Path, cells=CELLS, name="tiny.ipynb") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A tiny chapter")]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = folder / name
    nbformat.write(nb, path)
    return path


def _nbval(paths, records: Path, mode: str = "both") -> subprocess.CompletedProcess:
    """nbval with the record plugin over ``paths`` (one notebook or several: one pytest, one
    kernel each), as scripts/nbval.sh runs it."""
    paths = [paths] if isinstance(paths, Path) else list(paths)
    env = {**os.environ, "NBVAL_RECORD": str(records), "ATTNLIB_EXPLORER": mode,
           "PYTHONPATH": os.pathsep.join([str(SCRIPTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
         "-p", "nbval_record", "-p", "no:cacheprovider", "-q", *map(str, paths)],
        cwd=paths[0].parent, env=env, capture_output=True, text=True, timeout=300)


WIDGET_CELLS = ["import ipywidgets as w\nfrom IPython.display import display\n"
                "display(w.IntProgress(value=3, max=10))\nprint('after the bar')\n'done'"]


@pytest.fixture(scope="module")
def both_run(tmp_path_factory):
    """One nbval run in ``both`` mode (what ``make test`` records) over three notebooks: the
    tiny chapter, one that shows a widget, and the tiny one with a failing cell, whose old
    record (left by an earlier run) the run must remove; one pytest start for the three (each
    costs seconds)."""
    folder = tmp_path_factory.mktemp("both")
    paths = {"tiny": _notebook(folder), "widget": _notebook(folder, WIDGET_CELLS, "widget.ipynb"),
             "broken": _notebook(folder, [*CELLS[:2], "1 / 0", *CELLS[2:]], "broken.ipynb")}
    records = folder / "records"
    sys.path.insert(0, str(SCRIPTS))
    try:
        import nbval_record
    finally:
        sys.path.remove(str(SCRIPTS))
    old = nbval_record.record_path(records, paths["broken"])
    old.parent.mkdir(parents=True)
    nbformat.write(nbformat.read(paths["tiny"], as_version=4), old)  # a record of before
    run = _nbval(paths.values(), records)
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAILED")]
    assert run.returncode == 1 and failed, run.stdout + run.stderr
    assert all("broken.ipynb" in line for line in failed), run.stdout + run.stderr
    return paths, records


@pytest.fixture()
def scripts(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import nbval_record
    import prerun
    return nbval_record, prerun


def _outputs(nb) -> list:
    """Per code cell: its execution count and outputs (type, stream name, text, data)."""
    return [(c.execution_count,
             [(o.output_type, o.get("name"), o.get("text"), dict(o.get("data", {})))
              for o in c.outputs])
            for c in nb.cells if c.cell_type == "code"]


def test_the_record_carries_what_the_builds_executor_produces(both_run, scripts):
    nbval_record, _ = scripts
    from jupyter_cache.executors.utils import single_nb_execution

    paths, records = both_run
    path = paths["tiny"]
    record = nbformat.read(nbval_record.record_path(records, path), as_version=4)

    built = nbformat.read(path, as_version=4)
    result = single_nb_execution(built, cwd=str(path.parent), timeout=120, allow_errors=False)
    assert result.err is None
    assert _outputs(record) == _outputs(built)
    stamp = record.metadata["nbval_record"]
    assert stamp["notebook_sha256"] == nbval_record.file_sha(path)
    assert stamp["explorer_mode"] == "both"
    assert record.metadata["language_info"]["pygments_lexer"] == "ipython3"


def test_widget_views_are_left_out_of_the_record(both_run, scripts):
    """A widget's view reaches nbval without its state (a live explorer's progress bar, sent to
    its output area): the record keeps the cell's other outputs and no widget view."""
    nbval_record, _ = scripts
    paths, records = both_run
    record = nbformat.read(nbval_record.record_path(records, paths["widget"]), as_version=4)
    (count, outputs), = _outputs(record)
    assert [(kind, name, text) for kind, name, text, _ in outputs] == [
        ("stream", "stdout", "after the bar\n"), ("execute_result", None, None)]
    assert outputs[1][3]["text/plain"] == "'done'"


def test_a_failing_cell_leaves_no_record_and_removes_an_old_one(both_run, scripts):
    nbval_record, _ = scripts
    paths, records = both_run
    assert nbval_record.record_path(records, paths["tiny"]).is_file()
    assert not nbval_record.record_path(records, paths["broken"]).exists()  # the old one gone
    # each notebook is listed as finished once its last cell has run, failed or not (what
    # scripts/test.sh counts to start the unit tests beside the last notebook)
    for path in (paths["tiny"], paths["broken"]):
        rel = nbval_record.record_path(Path("."), path)
        assert (records / ".finished" / "__".join(rel.parts)).is_file(), path.name


def test_live_explorers_are_not_recorded(tmp_path, scripts):
    nbval_record, _ = scripts
    path = _notebook(tmp_path)
    assert _nbval(path, tmp_path / "records", mode="live").returncode == 0
    assert not nbval_record.record_path(tmp_path / "records", path).exists()


def test_the_prerun_takes_a_record_only_of_this_notebook_and_library(tmp_path, scripts):
    nbval_record, prerun = scripts
    book = tmp_path / "book"
    book.mkdir()
    path = _notebook(book)
    records = tmp_path / "records"
    target = nbval_record.record_path(records, path, tmp_path)
    target.parent.mkdir(parents=True)
    done = nbformat.read(path, as_version=4)
    for k, cell in enumerate(c for c in done.cells if c.cell_type == "code"):
        cell.execution_count = k + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"cell {k}\n")]
    done.metadata["language_info"] = {"name": "python"}
    stamp = {"notebook_sha256": nbval_record.file_sha(path), "attnlib_sha256": "lib-1",
             "explorer_mode": "both", "seconds": 3.0}

    def write(**changes):
        done.metadata["nbval_record"] = {**stamp, **changes}
        target.write_text(json.dumps(done))

    def recorded(nb_path, library):
        return prerun.recorded(str(nb_path), library, records, tmp_path)

    write()
    nb, seconds = recorded(path, "lib-1")
    assert seconds == 3.0
    assert _outputs(nb) == _outputs(done)
    assert recorded(path, "lib-2")[0] is None            # another library
    write(explorer_mode="live")
    assert recorded(path, "lib-1")[0] is None            # live explorers
    write(notebook_sha256="0" * 64)
    assert recorded(path, "lib-1")[0] is None            # another notebook
    write()
    code = next(c for c in done.cells if c.cell_type == "code")
    code.source += "\n"                                               # its cells differ
    target.write_text(json.dumps(done))
    assert recorded(path, "lib-1")[0] is None
    target.unlink()
    assert recorded(path, "lib-1") == (None, "no record")


def test_the_library_fingerprint_sees_every_file_of_the_package(tmp_path, scripts):
    nbval_record, _ = scripts
    pkg = tmp_path / "attnlib"
    (pkg / "data").mkdir(parents=True)
    (pkg / "core.py").write_text("x = 1\n")
    (pkg / "data" / "table.json").write_text("[1]")
    first = nbval_record.library_sha(tmp_path)
    (pkg / "data" / "table.json").write_text("[2]")                   # package data counts
    second = nbval_record.library_sha(tmp_path)
    (pkg / "data" / "table.json").rename(pkg / "table.json")         # so does a file's place
    assert len({first, second, nbval_record.library_sha(tmp_path)}) == 3


def test_both_mode_builds_the_live_explorer_and_returns_the_static_one(monkeypatch):
    from attnlib import explorers
    from attnlib.explorers.framework import explorer as module

    built = []
    monkeypatch.setattr(module.Explorer, "live", lambda self: built.append(self.name))
    monkeypatch.setattr(module.Explorer, "static", lambda self: ("static", self.name))
    ex = explorers.Explorer(lambda fig, a: None, [explorers.Control("a", (1, 2))], name="e")
    monkeypatch.setenv(module.ENV_VAR, "both")
    assert ex.show() == ("static", "e") and built == ["e"]
    assert ex.show("static") == ("static", "e") and built == ["e"]
