"""Export the book's notebooks as plain Jupyter notebooks (no MyST), for Colab and downloads.

    python scripts/export_plain.py [--student] [--out DIR] [--ref REF] [NOTEBOOK ...]

Default: every notebook of _toc.yml, into ``_build/plain/book/``; ``--student`` writes the
student editions (stubs, no solutions); ``--ref`` pins the Colab install cell to a release
(default: the tag of the checked-out commit, else the commit). The build
(book/_ext/book_site.py) writes the exports into the site, whose Colab and download buttons
open them. The export is :mod:`attnlib.course.plain`; this file is its command line
(:func:`attnlib.course.cli.export_main`).
"""

import sys

try:
    from attnlib.course.cli import export_main
except ModuleNotFoundError as e:  # not the project's Python: use it if `make setup` made it
    from project_python import rerun_with_project_python  # (scripts/, this file's folder)

    rerun_with_project_python(__file__, e, "the export")

if __name__ == "__main__":
    sys.exit(export_main())
