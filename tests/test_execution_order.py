"""scripts/book_toc.py: the order in which nbval and the build's pre-execution run the
notebooks two at a time (the slowest chapters first, the reproduction report first or last)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import book_toc  # noqa: E402

BOOK = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("*.ipynb"))


def _given(extra):
    given = BOOK + extra
    random.Random(0).shuffle(given)
    return given


def test_nbval_order_slowest_chapters_first_then_the_report():
    extra = ["book/99_extra.ipynb", "book/00_extra.ipynb"]
    given = _given(extra)
    order = book_toc.execution_order(given, report="last")
    assert sorted(order) == sorted(given) and order[-1] == "book/reproduction.ipynb"
    chapters = order[:-1]
    ranks = [book_toc.SLOWEST_FIRST.index(Path(p).name[:2]) for p in chapters[:-2]]
    assert ranks == sorted(ranks)  # the ranked chapters in the order of SLOWEST_FIRST
    assert chapters[-2:] == sorted(extra)  # then the others, by name


def test_build_order_the_report_then_the_chapters_from_the_last():
    given = _given(["book/99_extra.ipynb"])
    order = book_toc.execution_order(given, report="first")
    assert sorted(order) == sorted(given) and order[0] == "book/reproduction.ipynb"
    assert order[1:] == sorted(order[1:], key=lambda p: Path(p).name, reverse=True)


def test_every_chapter_of_the_book_has_its_rank():
    chapters = {Path(f).name[:2] for f in book_toc.toc_files(ROOT) if Path(f).name[:2].isdigit()}
    assert chapters and chapters <= set(book_toc.SLOWEST_FIRST)


def test_the_command_line_prints_the_same_order_and_refuses_a_bad_choice():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "book_toc.py"), "--order",
                          "report-last", *BOOK], capture_output=True, text=True, check=True)
    assert out.stdout.split() == book_toc.execution_order(BOOK, report="last")
    with pytest.raises(ValueError, match="report"):
        book_toc.execution_order(BOOK, report="middle")
