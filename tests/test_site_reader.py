"""The reader's layer of the built book: what a reader sees at 1366 x 768 and on a 390 x 844 phone.

Each test fails on one class of reader problem and names the page and the offending element
(a cell by its number on the page and its section, a figure by its file, a line by its text):

- ``test_no_process_words``: no words about how the book was made in a chapter's visible text
  (a digest, issue numbers, an expert or second reading, "no GPU was lent", the experiment's
  owner, reviewers, "not yet aligned"; :data:`PROCESS_WORDS`).
- ``test_no_raw_check_lines``: no raw check lines in view (``✓ key = value  target ...``,
  ``[live; ...]``, ``target in [``; :data:`CHECK_LINES`): checks run in hidden cells and are
  listed in the folded "What this chapter verified" block.
- ``test_no_bookkeeping_cells_in_view``: no visible code cell whose source only calls
  ``.require(``, ``al.verify(``, ``al.verified(``, ``Markdown(``, ``print(`` or ``assert``
  (:func:`bookkeeping_only`); a cell folded by ``hide-input`` (closed ``<details>``) or
  removed is not in view.
- ``test_no_stray_outputs``: no execute_result shown as plain text (myst-nb's
  ``.output.text_plain``: "1.0", "(1.0, 1.0)") in a chapter.
- ``test_page_fits_phone``: no page of the site (chapters, report, API, preface, guide, ...)
  is wider than a 390 px screen; names the elements that stick out.
- ``test_no_console_errors``: no console error on any page at 1366 x 768 and at 390 x 844.

The figures (numbered, with alt text, readable on a phone): test_site_figures.py; the search
page: test_site_search.py; the one pass over a page that these tests share:
tests/site_reader_helpers.py.

The site is read from ``ATTNLIB_SITE`` (default ``_build/html``): ``ATTNLIB_SITE=/some/build
pytest tests/test_site_reader.py`` checks another build.  Each page is opened once per size
and what every test needs is collected in one pass (``COLLECT``).
"""

from __future__ import annotations

import re

import pytest
from site_helpers import SIZES
from site_reader_helpers import CHAPTERS, NO_SITE, PAGES, collect, params, report

pytestmark = pytest.mark.browser

#: Words about how the book was made, not about its subject (name -> regular expression).
PROCESS_WORDS = {
    "digest": r"\bdigests?\b",
    "issue number": r"\bissues?\s+#?\d+",
    "expert reading": r"\bexpert\s+(reading|review)",
    "second reading": r"\bsecond\s+reading",
    "no GPU was lent": r"\bGPU\b[^.\n]{0,30}\blent\b",
    "experiment's owner": r"\bexperiment['’]s\s+owner",
    "reviewer": r"\breviewers?\b",
    "reviewed by": r"\breview(ed)?\s+by\b",
    "not yet aligned": r"\bnot\s+yet\s+aligned\b",
}
#: Raw check lines (the old closing notes printed one per target).
CHECK_LINES = {
    "a ✓/✗ key = value line": r"^\s*[✓✗✔✘]\s*[\w.\-\[\]()]+\s*=\s*\S",
    "[live; ...]": r"\[live;",
    "target in [": r"\btarget\s+in\s+\[",
}
#: the smallest drawn text a reader can read on a phone, in CSS px


# ---------------------------------------------------------------------------------------------
# Classifiers (plain Python, tested on known defects below)

def process_words(text: str) -> list[str]:
    """The process words in ``text``, each as ``'name: ...context...'``."""
    out = []
    for name, pattern in PROCESS_WORDS.items():
        for m in re.finditer(pattern, text, flags=re.IGNORECASE):
            a, b = max(m.start() - 40, 0), min(m.end() + 40, len(text))
            out.append(f"{name}: {' '.join(text[a:b].split())!r}")
    return out


def check_lines(text: str) -> list[str]:
    """The raw check lines in ``text`` (split at newlines), each as ``'kind: line'``."""
    out = []
    for line in text.splitlines():
        for name, pattern in CHECK_LINES.items():
            if re.search(pattern, line):
                out.append(f"{name}: {line.strip()[:110]!r}")
                break
    return out


_BOOKKEEPING = re.compile(
    r"""(assert\b
        |print\(
        |(display\()?(IPython\.display\.)?Markdown\(
        |(\w+\s*=\s*)?(al|attnlib)\.verif(y|ied)\(
        |verif(y|ied)\(
        |(\w+\s*=\s*)?[\w.\[\]'"]+\.require\(
        |pass\b)""", re.VERBOSE)
_COMPOUND = re.compile(r"(for|if|elif|else|with|try|except|finally|while)\b.*:\s*$")


def bookkeeping_only(source: str) -> bool:
    """Whether a code cell only does bookkeeping: every statement is an ``assert``, a
    ``print(``, a ``Markdown(`` (or ``display(Markdown(``), an ``al.verify(`` /
    ``al.verified(`` or a ``<result>.require(`` call, possibly inside ``for``/``if`` blocks.
    Comments and blank lines do not count; an empty cell is not bookkeeping."""
    lines = [ln for ln in source.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if not lines:
        return False
    statements, depth = [], 0
    for ln in lines:
        if depth == 0:
            statements.append(ln.strip())
        depth += sum(ln.count(c) for c in "([{") - sum(ln.count(c) for c in ")]}")
        depth = max(depth, 0)
    return all(_BOOKKEEPING.match(s) or _COMPOUND.match(s) for s in statements) \
        and any(_BOOKKEEPING.match(s) for s in statements)


def test_classifiers_catch_the_defects():
    """The classifiers find each defect and pass the house style."""
    assert process_words("Expert reading (issue 17): see digest T11.")
    assert process_words("no GPU was lent to this build") and process_words(
        "left to the experiment's owner") and process_words("paper not yet aligned")
    assert not process_words("The gradient aligns with the max-margin direction (Theorem 2.1).")
    assert check_lines("✓ e2_err_R1 = 17.0532  target in [5, 180]  paper not yet aligned")
    assert check_lines("[live; suggested, sec. 3]")
    assert not check_lines("The error falls from 20° at R = 1 to 0.1° at R = 256.")
    assert bookkeeping_only('res.require("a", "b")\nal.verify(x < 1, "small", value=x)')
    assert bookkeeping_only("Markdown(f'The error is {e:.1f}.')")
    assert bookkeeping_only("for k in keys:\n    print(k, res[k])\nassert ok  # all fine")
    assert bookkeeping_only("display(Markdown(\n    'a'\n))")
    assert not bookkeeping_only("p = al.svm.solve(X, y)\nprint(p)")
    assert not bookkeeping_only("al.explore_gd(X)")
    assert not bookkeeping_only("# only a comment")


# ---------------------------------------------------------------------------------------------
# The tests

@pytest.mark.parametrize("page,size", params(CHAPTERS, SIZES))
def test_no_process_words(page, size, browser, served_site):
    """A chapter's visible text speaks of its subject, not of how the book was made."""
    info = collect(browser, served_site, page, size)
    problems = [f"{t['where']}: {w}" for t in info["text"] for w in process_words(t["text"])]
    assert not problems, report(page, size, "process words in view", problems)


@pytest.mark.parametrize("page,size", params(CHAPTERS, SIZES))
def test_no_raw_check_lines(page, size, browser, served_site):
    """No raw check line (``✓ key = value  target in [...]``, ``[live; ...]``) in view."""
    info = collect(browser, served_site, page, size)
    problems = [f"{t['where']}: {c}" for t in info["text"] for c in check_lines(t["text"])]
    assert not problems, report(page, size, "raw check lines in view", problems)


@pytest.mark.parametrize("page,size", params(CHAPTERS, SIZES))
def test_no_bookkeeping_cells_in_view(page, size, browser, served_site):
    """No visible code cell that only records checks or prints (require, verify, Markdown,
    print, assert): such cells are removed (``remove-cell``/``remove-input``)."""
    info = collect(browser, served_site, page, size)
    problems = [f"{c['where']}: {' / '.join(c['source'].strip().splitlines())[:110]!r}"
                for c in info["code"] if c["shown"] and bookkeeping_only(c["source"])]
    assert not problems, report(page, size, "bookkeeping-only code cells in view", problems)


@pytest.mark.parametrize("page", CHAPTERS or NO_SITE)
def test_no_stray_outputs(page, browser, served_site):
    """No return value shown as plain text (a cell ending in a bare expression)."""
    info = collect(browser, served_site, page, "1366x768")
    problems = [f"{o['where']}: {o['text']!r}" for o in info["plain"]]
    assert not problems, report(page, "1366x768", "stray plain-text outputs", problems)




@pytest.mark.parametrize("page", PAGES or NO_SITE)
def test_page_fits_phone(page, browser, served_site):
    """At 390 x 844 the page is no wider than the screen (no sideways scrolling)."""
    info = collect(browser, served_site, page, "390x844")
    if info["page_width"] > info["vw"] + 1:
        pytest.fail(f"{page} at 390x844: the page is {info['page_width']} px wide on a "
                    f"{info['vw']} px screen; sticking out:\n  " + "\n  ".join(info["sticking"]))


@pytest.mark.parametrize("page,size", params(PAGES, SIZES))
def test_no_console_errors(page, size, browser, served_site):
    """No console error (site_helpers.CONSOLE_ALLOW is empty) at either size."""
    info = collect(browser, served_site, page, size)
    assert not info["console"], report(page, size, "console errors", info["console"])
