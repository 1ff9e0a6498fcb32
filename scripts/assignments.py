"""Course kit: student and instructor editions of every chapter, zipped for an LMS or Colab.

Usage (with the project's Python, ``.venv/bin/python``, which ``make setup`` makes)::

    python scripts/assignments.py                    # every chapter of book/ -> assignments/
    python scripts/assignments.py 02_att_svm         # some chapters
    python scripts/assignments.py --verify           # also execute each student edition
    python scripts/assignments.py grade sub*.ipynb --out grades  # grades.csv + feedback

(``make assignments`` runs the first.) The kit is the package ``attnlib.course``; this file
is its command line (:func:`attnlib.course.cli.main`).
"""

import sys

try:
    from attnlib.course.cli import main
except ModuleNotFoundError as e:  # not the project's Python: use it if `make setup` made it
    from project_python import rerun_with_project_python  # (scripts/, this file's folder)

    rerun_with_project_python(__file__, e, "the course kit")

if __name__ == "__main__":
    sys.exit(main())
