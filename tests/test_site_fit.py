"""The built book fits its screens (headless Chromium): code cells that fit their column (no
horizontal scrolling, test_code_cells_fit), the pages read on a 390 x 844 phone screen
(test_phone), display math and inline code that fit their column at 1366 x 768 and 390 x 844,
and block titles without doubled brackets or double spaces (test_math_code_and_titles_fit,
test_display_math_fits_phone). What is read from each page: tests/site_page_helpers.py.
"""

from __future__ import annotations

import re

import pytest
from site_helpers import SIZES
from site_page_helpers import chapter_pages, page_info

pytestmark = pytest.mark.browser


#: Chapters whose code cells are being shortened to <= 80 characters per line by their owners
#: (stop 19): their overflow is expected until then.  Remove a page once its cells fit.
CODE_OVERFLOW_PENDING: set[str] = set()


@pytest.mark.parametrize("page", chapter_pages() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no built site in _build/html: run `make book` (`make test` builds it)"))])
def test_code_cells_fit(page, browser, served_site, request):
    """No code cell scrolls sideways at 1366 x 768: its comments stay readable."""
    if page in CODE_OVERFLOW_PENDING:
        request.applymarker(pytest.mark.xfail(
            strict=False, reason="chapter owners are shortening code lines to <= 80 characters "
                                 "(requests in the stop-19 notes)"))
    info = page_info(browser, served_site, page, "1366x768")["overflow"]
    wide = [f"cell {w['cell']}: a line of {w['chars']} characters: {w['line']!r}"
            for w in info["wide"]]
    assert not wide, f"{page}: code cells wider than their box:\n  " + "\n  ".join(wide)


@pytest.mark.parametrize("page", chapter_pages()[:1] + [p for p in chapter_pages()
                                                         if "05_" in p or "10_" in p]
                         or [pytest.param(None, marks=pytest.mark.skip(reason="no built site"))])
def test_phone(page, browser, served_site):
    """On a 390 x 844 phone screen the page does not scroll sideways, the sidebar is folded
    away, images and tables fit, and there is one search button; a screenshot is saved."""
    seen = page_info(browser, served_site, page, "390x844")
    info, inspect, search = seen["overflow"], seen["inspect"], seen["search"]
    problems = [f"console error: {m}" for m in seen["console"]]
    if info["page_width"] > info["vw"] + 1:
        problems.append(f"the page is {info['page_width']} px wide on a {info['vw']} px screen")
    problems += [f"sticks out of the screen: {e}" for e in info["sticking"]]
    if info["sidebar_visible"]:
        problems.append("the primary sidebar covers the page on a phone")
    if inspect["search_boxes"] > 1:
        problems.append(f"{inspect['search_boxes']} search boxes visible")
    if search is not True:
        problems.append(f"the search button does not open a search field: {search}")
    assert not problems, f"{page} at 390 x 844:\n  " + "\n  ".join(problems)


def title_problems(titles: list[str]) -> list[str]:
    """Doubled brackets (``((``, ``))``: sphinx-proof's parentheses around a title that ends in
    its own) and runs of white space in the text of block titles."""
    out = []
    for t in titles:
        if re.search(r"\(\s*\(|\)\s*\)", t):
            out.append(f"doubled brackets: {t!r}")
        if re.search(r"\s\s", t):
            out.append(f"double space: {t!r}")
    return out


def test_title_problems_catch_the_defects():
    """The checker of test_math_code_and_titles_fit finds both kinds of title defect: a
    bracket inside a bracket, and a double space."""
    assert title_problems(["Theorem 2.1 (Regularisation path (informally))"])
    assert title_problems(["Solution to  Exercise 2.1"])
    assert title_problems(["Definition 2.1  (Att-SVM for a prompt)"])
    assert not title_problems(["Theorem 2.1 (Regularisation path, informally)",
                               "Solution to Exercise 2.1", "Exercise 2.1"])


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("page", chapter_pages() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no built site in _build/html: run `make book` (`make test` builds it)"))])
def test_math_code_and_titles_fit(page, size, browser, served_site):
    """At 1366 x 768 and on a 390 x 844 phone every display equation and every inline code
    fits its column (no sideways scrolling, nothing clipped), and no theorem/exercise title has
    doubled brackets or a double space."""
    info = page_info(browser, served_site, page, size)["fit"]
    # (display math on the phone: test_display_math_fits_phone)
    problems = ([f"display math wider than its column: {m}" for m in info["math"]]
                if size == "1366x768" else [])
    problems += [f"inline code sticks out of its block: {c}" for c in info["code"]]
    problems += title_problems(info["titles"])
    assert not problems, f"{page} at {size}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("page", chapter_pages() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no built site in _build/html: run `make book` (`make test` builds it)"))])
def test_display_math_fits_phone(page, browser, served_site):
    """On a 390 x 844 phone every display equation fits its column (long equations are broken
    into aligned lines in the notebooks; the sideways scroll of book-site.css is a last resort
    that this test still fails)."""
    info = page_info(browser, served_site, page, "390x844")["fit"]
    assert not info["math"], (f"{page} at 390x844: display math wider than its column:\n  "
                              + "\n  ".join(info["math"]))
