"""Run a command-line script of scripts/ with the project's Python.

The course kit's scripts (``assignments.py``, ``export_plain.py``) import ``attnlib.course``,
which only the project's Python (``.venv/bin/python``, made by ``make setup``) has: run with
another Python, they start again with that one, once, with the same arguments.
"""

import os
import sys
from pathlib import Path


def rerun_with_project_python(script: str, error: ModuleNotFoundError, what: str):
    """Replace this process by ``.venv/bin/python script ARGS...`` (once: the second failure
    exits with ``error`` and what to do)."""
    venv = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python"
    if venv.is_file() and not os.environ.get("ATTNLIB_VENV_TRIED"):
        os.environ["ATTNLIB_VENV_TRIED"] = "1"
        os.execv(venv, [str(venv), script, *sys.argv[1:]])
    raise SystemExit(f"{error}: run {what} with the project's Python (`make setup` makes "
                     ".venv)") from None
