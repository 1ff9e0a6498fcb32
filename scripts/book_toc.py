"""The book's pages in the order of ``_toc.yml``, for the build scripts (``prerun.py``, run
with ``scripts/`` on ``sys.path``) and the tests (``tests/site_helpers.py``): the one reader
of the table of contents is ``attnlib.course.repo.toc_files``. And the order in which the
notebooks are executed two at a time (:func:`execution_order`), for ``nbval.sh`` and
``prerun.py``.

Usage: python scripts/book_toc.py --order report-last|report-first NOTEBOOK...
(prints the notebooks in that order, one per line)
"""

from __future__ import annotations

import sys
from pathlib import Path

from attnlib.course.repo import ROOT, toc_files  # noqa: F401  (the one reader of _toc.yml)

#: The chapters (file-name prefixes) from the costliest to execute to the cheapest: their
#: usual run times on two cores, 110 s down to 15 s (update it when a chapter's cost changes).
#: The slowest first, so that no core is left idle while the other runs a long chapter at the
#: end; then any other notebook in name order.
SLOWEST_FIRST = ("10", "07", "09", "05", "02", "03", "06", "08", "04", "01")
#: The reproduction report: it runs every experiment at its defaults.
REPORT = "reproduction.ipynb"


def execution_order(paths, report: str = "last") -> list[str]:
    """``paths`` (notebooks) in the order to execute them two at a time.

    ``report="last"`` (the notebooks' test run): the chapters slowest first
    (:data:`SLOWEST_FIRST`, then any other notebook by name), and the reproduction report
    last, reusing the results the chapters have cached while the run's unit tests take the
    other core. ``report="first"`` (the book's build): the report first, its experiments
    computed in the chapters' order while the other core runs the chapters from the last to
    the first, so the two meet only at the end, where the chapters find the report's results
    cached (a result that one process is computing, another waits for:
    ``attnlib.experiments.store.entry_lock``; a chapter that met the report mid-way would wait
    for it with its core idle).
    """
    if report not in ("first", "last"):
        raise ValueError(f"report: expected 'first' or 'last', got {report!r}")
    paths = [str(p) for p in paths]
    reports = [p for p in paths if Path(p).name == REPORT]
    rest = [p for p in paths if p not in reports]
    if report == "first":
        return reports + sorted(rest, key=lambda p: Path(p).name, reverse=True)
    rank = {k: i for i, k in enumerate(SLOWEST_FIRST)}
    return sorted(rest, key=lambda p: (rank.get(Path(p).name.split("_")[0], len(rank)), p)) \
        + reports


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "--order":
        sys.exit(__doc__)
    print("\n".join(execution_order(sys.argv[3:], report=sys.argv[2].removeprefix("report-"))))
