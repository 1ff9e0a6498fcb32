"""Execute the book's notebooks in parallel into the build's execution cache.

The build (myst-nb, ``execute_notebooks: cache``) executes notebooks one after another. This
script, run by scripts/build.sh just before ``jupyter-book build``, executes the notebooks of
_toc.yml that have no cached result yet in parallel (one process per CPU core; the
reproduction report first, then the chapters from the last: ``book_toc.execution_order``) as
myst-nb would (same reader, timeout, working directory and environment, e.g.
ATTNLIB_EXPLORER=static), and stores the results in the same jupyter-cache the way myst-nb
does, from this one process (jupyter-cache's own parallel executor races on its database).
The build then finds them cached. A notebook that fails here is simply not cached: the build
executes it again and reports the failing cell as usual.

A notebook that the test run's nbval has just executed and recorded (scripts/nbval.sh with
scripts/nbval_record.py: explorers in ``both`` mode, the static page included) is cached from
that record instead, when the record is of this very notebook and this version of attnlib:
in ``make test`` every notebook is executed once.

Usage: python scripts/prerun.py   (exits 0 unless the cache cannot be used at all)
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat
import yaml
from book_toc import execution_order, toc_files  # scripts/ is on sys.path: this script's own folder
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution
from nbval_record import RECORDED_MODES, file_sha, library_sha, record_path

ROOT = Path(__file__).resolve().parents[1]
#: Where scripts/nbval.sh has nbval record the notebooks it ran (scripts/nbval_record.py).
RECORDS = ROOT / "_build" / "nbval_exec"


def toc_notebooks() -> list[Path]:
    """The .ipynb files listed in _toc.yml (MyST-markdown notebooks run in the build)."""
    return [ROOT / f"{f}.ipynb" for f in toc_files(ROOT) if (ROOT / f"{f}.ipynb").is_file()]


def _as_the_build_reads(path: str):
    """The notebook as the build reads it: book/_ext/book_site.py folds the answer cells at
    read time, and the execution cache hashes cell metadata, so the cached execution must be
    of the folded notebook, or the build does not find it and executes the notebook again."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("book_site",
                                                  ROOT / "book" / "_ext" / "book_site.py")
    site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site)
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    site.fold_solution_cells(raw)
    return nbformat.reads(json.dumps(raw), as_version=4)


def recorded(path: str, library: str, records: Path = RECORDS, root: Path = ROOT):
    """The execution of the notebook ``path`` that nbval recorded (scripts/nbval_record.py),
    as the build reads the notebook, and its seconds; ``(None, why)`` when there is no record
    of this very notebook, library and explorer mode, or its code cells differ."""
    rec_file = record_path(records, Path(path), root)
    if not rec_file.is_file():
        return None, "no record"
    rec = nbformat.read(rec_file, as_version=4)
    stamp = rec.metadata.get("nbval_record", {})
    if stamp.get("notebook_sha256") != file_sha(Path(path)):
        return None, "the notebook changed since its record"
    if stamp.get("attnlib_sha256") != library:
        return None, "attnlib changed since the record"
    if stamp.get("explorer_mode") not in RECORDED_MODES:
        return None, f"recorded with live explorers ({stamp.get('explorer_mode')})"
    nb = _as_the_build_reads(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    ran = [c for c in rec.cells if c.cell_type == "code"]
    if len(code) != len(ran) or any(a.source != b.source for a, b in zip(code, ran)):
        return None, "its code cells differ from the record's"
    for cell, done in zip(code, ran):
        cell.outputs = done.outputs
        cell.execution_count = done.execution_count
    nb.metadata["language_info"] = rec.metadata.get("language_info", {})
    return nb, float(stamp.get("seconds", 0.0))


def execute(path: str, timeout: int, allow_errors: bool):
    """Execute one notebook in its folder; return (path, notebook or None, seconds, error)."""
    nb = _as_the_build_reads(path)
    result = single_nb_execution(nb, cwd=str(Path(path).parent), timeout=timeout,
                                 allow_errors=allow_errors, meta_override=True)
    if result.err is not None:
        return path, None, result.time, f"{type(result.err).__name__}"
    return path, nb, result.time, None


def main() -> int:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]
    if config.get("execute_notebooks") != "cache" or config.get("run_in_temp"):
        print("[prerun] execution mode is not 'cache' in the notebooks' folder: skipped")
        return 0
    cache = get_cache(str(ROOT / config["cache"]))
    records = {str(nb): cache.add_nb_to_project(str(nb)) for nb in toc_notebooks()}

    def cached(uri: str) -> bool:  # the notebook as the build reads it has an execution
        try:
            cache.match_cache_notebook(_as_the_build_reads(uri))
            return True
        except KeyError:
            return False

    todo = [r.uri for r in records.values() if not cached(r.uri)]
    # what the notebooks' test run (nbval) executed and recorded is cached, not executed again
    library = library_sha(ROOT) if todo else ""
    for uri in list(todo):
        nb, seconds = recorded(uri, library)
        if nb is None:
            if RECORDS.is_dir():
                print(f"[prerun] {Path(uri).name}: not recorded by nbval ({seconds})", flush=True)
            continue
        cache.cache_notebook_bundle(
            CacheBundleIn(nb, uri, data={"execution_seconds": seconds}),
            check_validity=False, overwrite=True)
        todo.remove(uri)
        print(f"[prerun] {Path(uri).name}: cached as nbval executed it ({seconds:.0f} s)",
              flush=True)
    # the report first, its experiments computed while the chapters run (each result once),
    # the chapters from the last: both cores busy to the end (scripts/book_toc.py)
    todo = execution_order(todo, report="first")
    workers = min(len(todo), os.cpu_count() or 1)
    if workers < 2:
        print(f"[prerun] {len(todo)} notebook(s) to execute: left to the build")
        return 0
    t0 = time.time()
    print(f"[prerun] executing {len(todo)} notebook(s), {workers} at a time", flush=True)
    failed = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        jobs = [pool.submit(execute, uri, config.get("timeout", 30),
                            config.get("allow_errors", False)) for uri in todo]
        for job in as_completed(jobs):
            uri, nb, seconds, error = job.result()
            name = Path(uri).name
            if error:
                failed.append(name)
                print(f"[prerun] {name}: {error} after {seconds:.0f} s (left to the build)",
                      flush=True)
                continue
            cache.cache_notebook_bundle(
                CacheBundleIn(nb, uri, data={"execution_seconds": seconds}),
                check_validity=False, overwrite=True)
            print(f"[prerun] {name}: executed in {seconds:.0f} s, cached", flush=True)
    print(f"[prerun] done in {time.time() - t0:.0f} s; {len(failed)} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
