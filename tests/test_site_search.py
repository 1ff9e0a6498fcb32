"""The search page of the built book (headless Chromium, network off): its snippets have no
raw TeX (``\\(p\\)``), searching "exercise 2.1" logs no console error, and chapters rank above
the API page for the book's own terms (book/_ext/book_site.py, book/_static/book-search.js,
book/_ext/search_scorer.js).
"""

from __future__ import annotations

import re

import pytest
from site_helpers import SITE, SIZES, console_errors

pytestmark = pytest.mark.browser

_SEARCH = r"""
const done = arguments[arguments.length - 1];
const t0 = Date.now();
let finishedAt = null;
const poll = () => {
  const status = document.querySelector('#search-results p.search-summary');
  const items = Array.from(document.querySelectorAll('#search-results ul.search li'));
  if (finishedAt === null && status && status.textContent.trim()) finishedAt = Date.now();
  // each result's snippet is fetched after the list is shown: wait for them (or 5 s)
  const pending = items.some(li => !li.querySelector('p.context, span'));
  if ((finishedAt !== null && (!pending || Date.now() - finishedAt > 5000))
      || Date.now() - t0 > 30000) {
    done(items.map(li => ({href: li.querySelector('a').getAttribute('href'),
                           title: li.querySelector('a').textContent,
                           score: Number(li.querySelector('a').dataset.score),
                           context: (li.querySelector('p.context') || {textContent: ''})
                                      .textContent})));
  } else setTimeout(poll, 50);
};
poll();
"""


def search(browser, served_site, query: str) -> tuple[list[dict], list[str]]:
    """The results (in order) and console errors of ``query`` on the site's search page."""
    from urllib.parse import quote

    old = browser.get_window_size()
    browser.set_window_size(*SIZES["1366x768"])
    try:
        browser.get_log("browser")
        browser.get(f"{served_site}/search.html?q={quote(query)}")
        results = browser.execute_async_script(_SEARCH)
        return results, console_errors(browser.get_log("browser"))
    finally:
        browser.set_window_size(old["width"], old["height"])


_RAW_TEX = re.compile(r"\\[()\[\]]|\$\$|\\[A-Za-z]+")


def _need_search_page():
    if not (SITE / "search.html").is_file():
        pytest.skip(f"no search page in {SITE}")


@pytest.mark.parametrize("query", ["margin", "attention", "token"])
def test_search_snippets_without_raw_tex(query, browser, served_site):
    """Search snippets show text, not TeX source (``\\(p\\)``, ``\\mathbf``)."""
    _need_search_page()
    results, errors = search(browser, served_site, query)
    assert results, f"no search results for {query!r}"
    raw = [f"{r['href']}: {r['context'][:120]!r}" for r in results
           if _RAW_TEX.search(r["context"])]
    assert not raw, (f"search {query!r}: {len(raw)} snippets with raw TeX:\n  "
                     + "\n  ".join(raw[:10]))
    assert not errors, f"search {query!r}: console errors: {errors}"


def test_search_exercise_without_console_error(browser, served_site):
    """Searching "exercise 2.1" finds the exercise and logs no error (an anchor such as
    ``#book/02_att_svm-solution-5`` is no CSS selector)."""
    _need_search_page()
    results, errors = search(browser, served_site, "exercise 2.1")
    assert not errors, "search 'exercise 2.1': console errors:\n  " + "\n  ".join(errors)
    assert any("02_att_svm" in r["href"] for r in results), \
        f"search 'exercise 2.1' does not find chapter 2: {[r['href'] for r in results[:5]]}"


@pytest.mark.parametrize("query,chapter", [("Att-SVM", "02_att_svm"),
                                           ("max-margin token", "01_token_selection"),
                                           ("mirror descent", "09_mirror_descent")])
def test_search_ranks_chapters_above_api(query, chapter, browser, served_site):
    """For the book's own terms the chapter that teaches them comes before the API page."""
    _need_search_page()
    results, _ = search(browser, served_site, query)
    hrefs = [r["href"] for r in results]
    first_chapter = next((k for k, h in enumerate(hrefs) if chapter in h), None)
    first_api = next((k for k, h in enumerate(hrefs) if "api.html" in h), None)
    assert first_chapter is not None, f"search {query!r} does not find {chapter}: {hrefs[:8]}"
    assert first_api is None or first_chapter < first_api, (
        f"search {query!r}: the API page (result {first_api + 1}) ranks above {chapter} "
        f"(result {first_chapter + 1}): {hrefs[:8]}")
