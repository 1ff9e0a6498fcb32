"""The book's pages in the order of ``_toc.yml``, for the build scripts (``prerun.py``, run
with ``scripts/`` on ``sys.path``) and the tests (``tests/site_helpers.py``): the one reader
of the table of contents is ``attnlib.course.repo.toc_files``.
"""

from attnlib.course.repo import ROOT, toc_files  # noqa: F401  (the one reader of _toc.yml)
