"""Course kit: student and instructor editions of every chapter, zipped for an LMS or Colab.

Usage (with the project's Python, ``.venv/bin/python``, which ``make setup`` makes)::

    python scripts/assignments.py                    # every chapter of book/ -> assignments/
    python scripts/assignments.py 02_att_svm         # some chapters
    python scripts/assignments.py --verify           # also execute each student edition
    python scripts/assignments.py grade sub*.ipynb --out grades  # grades.csv + feedback

(``make assignments`` runs the first.) The kit is the package ``attnlib.course``; this file
is its command line (:func:`attnlib.course.cli.main`).
"""

import os
import sys
from pathlib import Path

try:
    from attnlib.course.cli import main
except ModuleNotFoundError as e:  # not the project's Python: use it if `make setup` made it
    venv = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python"
    if venv.is_file() and not os.environ.get("ATTNLIB_VENV_TRIED"):
        os.environ["ATTNLIB_VENV_TRIED"] = "1"
        os.execv(venv, [str(venv), __file__, *sys.argv[1:]])
    raise SystemExit(f"{e}: run the course kit with the project's Python (`make setup` makes "
                     ".venv)") from None

if __name__ == "__main__":
    sys.exit(main())
