"""The instructor guide's course-kit part keeps up with the kit: every check of
``attnlib.check`` is named in its tables, and the options of ``assignments.py grade`` that
the guide shows exist."""

import re
import runpy
import sys
from pathlib import Path

import pytest

import attnlib.check

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "book" / "instructor_guide.md").read_text()


def test_guide_names_every_check():
    checks = [f for f in attnlib.check.__all__ if f.startswith("check_")]
    missing = [f for f in checks if f"`{f}(" not in GUIDE]
    assert checks and not missing, f"add these checks to the instructor guide: {missing}"
    named = set(re.findall(r"`(check_\w+)\(", GUIDE))
    assert named <= set(checks), f"the guide names checks that do not exist: {named - set(checks)}"


def test_guide_grade_options_exist(monkeypatch, capsys):
    shown = set(re.findall(r"(--[a-z]+)", GUIDE[GUIDE.index("## Grading"):
                                                 GUIDE.index("### How it grades")]))
    # the script run as a program, in this process (a new Python spent 6 s importing attnlib)
    script = ROOT / "scripts" / "assignments.py"
    monkeypatch.setattr(sys, "argv", [str(script), "grade", "--help"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(script), run_name="__main__")
    assert done.value.code in (0, None)
    help_text = capsys.readouterr().out
    assert shown and not [o for o in shown if o not in help_text], shown
