"""The built book in a real browser: every page of ``_build/html`` in headless Chromium.

For every page: no console errors (but the allow-list of site_helpers.CONSOLE_ALLOW, empty),
math typeset by the local MathJax 3 (no raw ``$$``, no TeX errors, no raw LaTeX commands, no
raw MyST directives or roles, no raw ``|---|`` pipe tables), no glyph drawn as an empty box
(a character none of the page's fonts has, such as an emoji), every image loaded, every
internal link (and its #fragment) resolves, theorem/definition/proof and exercise blocks
rendered, folded solutions open on click, saved widgets rendered, launch and download
buttons on notebook pages (Colab and download open the plain export in ``plain/``), one search
box; code cells that fit their column (no horizontal scrolling, test_code_cells_fit), the
pages read on a 390 x 844 phone screen (test_phone), only JavaScript that pages use is shipped
(test_no_unused_javascript); display math and inline code fit their column at 1366 x 768
and 390 x 844 and block titles have no doubled brackets or double spaces
(test_math_code_and_titles_fit, test_display_math_fits_phone); a screenshot of each page
goes to ``_build/screenshots/``.
Runs after a build (``make test`` builds first); skipped without one (failed with CI=true).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from site_helpers import (  # noqa: F401  (browser, served_site: pytest fixtures)
    ACTIONS,
    READERS,
    ROOT,
    SCREENSHOTS,
    SITE,
    SIZES,
    Action,
    browser,
    console_errors,
    open_page,
    page_paths,
    require_site,
    screenshot,
    served_site,
    toc_files,
    visit,
    visited,
)

pytestmark = pytest.mark.browser

PAGES = page_paths()


@functools.cache
def _ids(path: Path) -> frozenset[str]:
    """Every element id of a page of the site (for #fragment links)."""
    return frozenset(re.findall(r'\sid="([^"]+)"', path.read_text(encoding="utf-8")))




def test_every_toc_page_is_built():
    """Each page of _toc.yml became an HTML page, and index.html leads to the preface."""
    require_site()
    missing = [f for f in toc_files() if not (SITE / f"{f}.html").is_file()]
    assert not missing, f"pages in _toc.yml without an HTML page: {missing}"
    root = toc_files()[0]
    assert f"{root}.html" in (SITE / "index.html").read_text(), \
        "index.html must redirect to the root page"


# JavaScript collecting, in one round trip, what the checks below need from the open page.
_INSPECT = r"""
const skip = new Set(['SCRIPT', 'STYLE', 'PRE', 'CODE', 'TEXTAREA', 'MJX-CONTAINER', 'NOSCRIPT',
                      'BUTTON']);  // (a player's pause button reads '||')
// raw math, MyST directives/roles, LaTeX commands and pipe tables left in the text
const RAW = new RegExp([String.raw`\$\$`, String.raw`\\\(`, String.raw`\\\[`,
  String.raw`\{(prf:|exercise|solution|doc\}|ref\}|cite|numref\}|eq\}|math\})`, '```\\{',
  String.raw`\\(frac|mathrm|mathbf|mathcal|top|alpha|gamma|lambda|sum|le|ge|star|begin|end)\b`,
  String.raw`\|\s*:?-{3,}`, String.raw`^\s*\|.*\|\s*$`].join('|'), 'm');
const raw = [];
const chars = new Map();
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
  acceptNode(node) {
    for (let e = node.parentElement; e; e = e.parentElement) {
      if (skip.has(e.tagName)) return NodeFilter.FILTER_REJECT;
    }
    return NodeFilter.FILTER_ACCEPT;
  }});
for (let n; (n = walker.nextNode()); ) {
  const t = n.textContent;
  if (RAW.test(t)) raw.push(t.trim().slice(0, 80));
  for (const ch of t) {
    if (ch.codePointAt(0) > 0x2000 && !chars.has(ch)) chars.set(ch, n.parentElement);
  }
}
// a glyph box: the character draws exactly like an unassigned code point (.notdef) in its font
const canvas = document.createElement('canvas');
canvas.width = 64; canvas.height = 64;
const ctx = canvas.getContext('2d', {willReadFrequently: true});
const draw = (ch, font) => {
  ctx.clearRect(0, 0, 64, 64); ctx.font = font; ctx.fillStyle = '#000';
  ctx.fillText(ch, 4, 48);
  return ctx.getImageData(0, 0, 64, 64).data.join(',');
};
const boxes = [];
const isBox = (ch, cs) => {
  const font = `${cs.fontStyle} ${cs.fontWeight} 40px ${cs.fontFamily}`;
  return draw(ch, font) === draw('\u0378', font);
};
for (const [ch, el] of chars) {
  if (isBox(ch, getComputedStyle(el))) boxes.push(ch);
}
// icons drawn by CSS (::before/::after content) of the visible elements, in their own font
for (const el of document.querySelectorAll('body *')) {
  if (!el.getClientRects().length) continue;
  for (const pseudo of ['::before', '::after']) {
    const cs = getComputedStyle(el, pseudo);
    const m = /^"(.*)"$/.exec(cs.content || '');
    if (!m || cs.display === 'none') continue;
    for (const ch of m[1]) {
      if (ch.codePointAt(0) > 0x2000 && isBox(ch, cs)) {
        boxes.push(`${ch} in ${el.tagName.toLowerCase()}.${el.className}${pseudo}`);
      }
    }
  }
}
const maths = Array.from(document.querySelectorAll('.math'));
const visible = e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length);
return {
  mathjax: window.MathJax && MathJax.version ? MathJax.version : null,
  math: maths.length,
  untypeset: maths.filter(e => !e.querySelector('mjx-container')).length,
  mjx: document.querySelectorAll('mjx-container').length,
  merror: Array.from(document.querySelectorAll('mjx-merror')).map(e => e.textContent).slice(0, 5),
  raw: raw.slice(0, 5),
  boxes: boxes.map(c => `${c} (U+${c.codePointAt(0).toString(16).toUpperCase()})`).slice(0, 5),
  search_boxes: Array.from(document.querySelectorAll('.search-button-field, form.bd-search'))
      .filter(e => visible(e) && !e.closest('.bd-search-container')).length,  // (search.html)
  broken_images: Array.from(document.images)
      .filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  blocks: Array.from(document.querySelectorAll('div.proof, div.exercise, div.solution')).map(b => ({
      id: b.id, cls: b.className, visible: visible(b),
      title: (b.querySelector('.admonition-title') || {textContent: ''}).textContent.trim()})),
  widget_views: document.querySelectorAll(
      'script[type="application/vnd.jupyter.widget-view+json"]').length,
  widgets_rendered:
      document.querySelectorAll('.jupyter-widgets, .widget-box, .widget-slider').length,
};
"""


def _link_problems(links: list[str], base: str, page: str) -> list[str]:
    problems = []
    for href in sorted(set(links)):
        if not href.startswith(base + "/"):
            continue  # external (Colab, Binder, GitHub, ...) or mailto: not followed offline
        parts = urlsplit(href)
        rel = unquote(parts.path).lstrip("/")
        target = SITE / rel
        if rel == "" or target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            problems.append(f"link to a missing file: {href}")
        elif (parts.fragment and target.suffix == ".html"
              and unquote(parts.fragment) not in _ids(target)):
            problems.append(f"link to a missing anchor: {href}")
    return problems


def _check_dropdowns(driver) -> list[str]:
    """Each folded (dropdown) solution is closed, and opens when its title is clicked."""
    from selenium.webdriver.common.by import By

    problems = []
    for block in driver.find_elements(By.CSS_SELECTOR, "div.solution.dropdown, details.solution"):
        name = block.get_attribute("id") or block.text[:40]
        body = [e for e in block.find_elements(By.XPATH, "./*")
                if "admonition-title" not in (e.get_attribute("class") or "")
                and e.tag_name not in ("summary", "button")]
        if not body:
            problems.append(f"solution {name!r} has no content")
            continue
        if any(e.is_displayed() for e in body):
            problems.append(f"solution {name!r} is not folded")
            continue
        title = block.find_elements(By.CSS_SELECTOR,
                                    "summary, .admonition-title, button.toggle-button")
        if not title:
            problems.append(f"solution {name!r} has no title to click")
            continue
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", title[0])
        driver.execute_script("arguments[0].click();", title[0])
        driver.implicitly_wait(0)
        for _ in range(20):
            if any(e.is_displayed() for e in body):
                break
            driver.execute_script("return new Promise(r => setTimeout(r, 100));")
        else:
            problems.append(f"solution {name!r} does not open on click")
    return problems


@pytest.mark.parametrize("page", PAGES or [pytest.param(None, marks=pytest.mark.skip(
    reason="no built site in _build/html: run `make book` (`make test` builds it)"))])
def test_page(page, browser, served_site):  # noqa: F811 (fixtures imported above)
    source = (SITE / page).read_text(encoding="utf-8")
    redirect = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', source)
    if redirect:  # index.html only redirects to the root page
        assert (SITE / page).parent.joinpath(redirect.group(1)).is_file(), redirect.group(1)
        return
    seen = _info(browser, served_site, page, "1366x768")
    info = seen["inspect"]
    problems = [f"console error: {m}" for m in seen["console"]]

    # math: MathJax 3 typeset every formula; no TeX left raw, no TeX error
    if info["math"]:
        if not (info["mathjax"] or "").startswith("3."):
            problems.append(f"MathJax 3 not loaded (MathJax.version={info['mathjax']})")
        if info["untypeset"]:
            problems.append(f"{info['untypeset']} of {info['math']} formulas not typeset")
    problems += [f"raw markup in the text: {t!r}" for t in info["raw"]]
    problems += [f"MathJax error: {t!r}" for t in info["merror"]]
    problems += [f"glyph drawn as an empty box (no font has it): {c}" for c in info["boxes"]]
    if info["search_boxes"] > 1:
        problems.append(f"{info['search_boxes']} search boxes visible (one is enough)")

    problems += [f"image not loaded: {src}" for src in info["broken_images"]]
    problems += _link_problems(info["links"], served_site, page)

    # theorem / definition / proof and exercise / solution blocks
    for b in info["blocks"]:
        folded = "dropdown" in b["cls"]
        if not folded and not b["visible"]:
            problems.append(f"block {b['id'] or b['cls']!r} is not displayed")
        plain_proof = set(b["cls"].split()) <= {"proof", "admonition"}  # "Proof." is inline
        if not plain_proof and not b["title"]:
            problems.append(f"block {b['id'] or b['cls']!r} has no title (e.g. 'Theorem 2.1')")
    for directive, css in (("prf:", "div.proof"), ("exercise-start", "div.exercise"),
                           ("solution-start", "div.solution")):
        src = SITE / "_sources" / page.replace(".html", ".ipynb")
        if not src.exists():
            src = SITE / "_sources" / page.replace(".html", ".md")
        # a block opens with a fence (```{prf:theorem}, :::{exercise-start}); a role such as
        # {prf:ref}`...` or a mention in inline code is no block
        opens = re.compile(r"(?:`{3,}|:{3,})\{" + re.escape(directive) + r"(?!ref\})")
        if src.exists() and opens.search(src.read_text(encoding="utf-8")) \
                and not any(css.split(".")[1] in b["cls"].split() for b in info["blocks"]):
            problems.append(f"the source has {{{directive}...}} blocks but no {css} was rendered")
    problems += seen["dropdowns"]

    # saved ipywidgets render offline through the local RequireJS + embed-amd.js
    if info["widget_views"] and not info["widgets_rendered"]:
        problems.append(f"{info['widget_views']} saved widget view(s) not rendered")

    # pages from a .ipynb: Colab and Binder launch buttons and the .ipynb download; download
    # opens the plain export of the chapter (scripts/export_plain.py), Colab the plain export
    # of its student edition (no solutions), both shipped with the site
    if (ROOT / page.replace(".html", ".ipynb")).is_file():
        nb_path = page.replace(".html", ".ipynb")
        for host in ("colab.research.google.com", "mybinder.org"):
            if not re.search(rf'href="https://{re.escape(host)}/[^"]*{re.escape(nb_path)}', source):
                problems.append(f"no {host} launch button for {nb_path}")
        if not re.search(rf'href="https://colab[^"]*/plain-student/{re.escape(nb_path)}"',
                         source):
            problems.append("the Colab button does not open the plain student edition")
        student = SITE / "plain-student" / nb_path
        if not student.is_file():
            problems.append(f"the site has no student export plain-student/{nb_path}")
        elif any("solution" in c.get("metadata", {}).get("tags", []) for c in
                 json.loads(student.read_text())["cells"]):
            problems.append(f"plain-student/{nb_path} contains a solution cell")
        if f"plain/{nb_path}" not in re.sub(r'href="https://[^"]*"', "", source):
            problems.append("no download button for the plain .ipynb export")
        if not (SITE / "plain" / nb_path).is_file():
            problems.append(f"the site has no plain export plain/{nb_path}")

    assert not problems, f"{page}:\n  " + "\n  ".join(problems)


def test_site_works_from_disk(browser):  # noqa: F811 (fixture imported above)
    """Opened as file:// with the network off, the preface still typesets its math."""
    pages = [p for p in PAGES if p.startswith("book/intro")] or PAGES[:1]
    entries = open_page(browser, (SITE / pages[0]).as_uri())
    info = browser.execute_script(_INSPECT)
    errors = console_errors(entries)
    assert not errors, errors
    assert info["math"] > 0 and info["untypeset"] == 0, info


def _chapter_pages() -> list[str]:
    return [p for p in PAGES if (ROOT / p.replace(".html", ".ipynb")).is_file()]


# JavaScript: each code cell whose box scrolls sideways (a line longer than the column), with
# its longest line; and what overflows the window on a phone
_OVERFLOW = r"""
const cells = Array.from(document.querySelectorAll('div.cell'));
const wide = [];
cells.forEach((cell, k) => {
  const pre = cell.querySelector('.cell_input pre');
  if (!pre || pre.closest('details:not([open])')) return;
  if (pre.scrollWidth > pre.clientWidth + 1) {
    const lines = pre.textContent.split('\n');
    const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
    wide.push({cell: k + 1, chars: longest.length, line: longest.slice(0, 100)});
  }
});
const vw = document.documentElement.clientWidth;
// (inside a box that scrolls sideways on its own, such as a wide table, is fine)
const scrolls = e => {
  for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
    if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) return true;
  }
  return false;
};
const sticking = Array.from(document.querySelectorAll('article img, article table, .bd-article p'))
  .filter(e => e.getBoundingClientRect().right > vw + 1 && !scrolls(e))
  .map(e => e.tagName + ' ' + (e.getAttribute('src') || e.textContent.slice(0, 40)));
return {wide, page_width: document.documentElement.scrollWidth, vw, sticking,
        sidebar_visible: !!document.querySelector('.bd-sidebar-primary')
            && document.querySelector('.bd-sidebar-primary').getBoundingClientRect().right > 0
            && getComputedStyle(document.querySelector('.bd-sidebar-primary')).visibility
               !== 'hidden'};
"""

# JavaScript: the visible search button opens a visible, focused search field
_SEARCH = r"""
const done = arguments[arguments.length - 1];
const button = Array.from(document.querySelectorAll('.search-button__button'))
  .find(e => e.offsetWidth > 0);
if (!button) { done('no visible search button'); }
else {
  button.click();
  setTimeout(() => {
    const a = document.activeElement;
    done(a && a.matches('input[type=search]') && a.offsetWidth > 0
         ? true : `focus on ${a ? a.outerHTML.slice(0, 80) : null}`);
    document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}));
  }, 500);
}
"""

#: Chapters whose code cells are being shortened to <= 80 characters per line by their owners
#: (stop 19): their overflow is expected until then.  Remove a page once its cells fit.
CODE_OVERFLOW_PENDING: set[str] = set()


@pytest.mark.parametrize("page", _chapter_pages() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no built site in _build/html: run `make book` (`make test` builds it)"))])
def test_code_cells_fit(page, browser, served_site, request):  # noqa: F811
    """No code cell scrolls sideways at 1366 x 768: its comments stay readable."""
    if page in CODE_OVERFLOW_PENDING:
        request.applymarker(pytest.mark.xfail(
            strict=False, reason="chapter owners are shortening code lines to <= 80 characters "
                                 "(requests in the stop-19 notes)"))
    info = _info(browser, served_site, page, "1366x768")["overflow"]
    wide = [f"cell {w['cell']}: a line of {w['chars']} characters: {w['line']!r}"
            for w in info["wide"]]
    assert not wide, f"{page}: code cells wider than their box:\n  " + "\n  ".join(wide)


@pytest.mark.parametrize("page", _chapter_pages()[:1] + [p for p in _chapter_pages()
                                                         if "05_" in p or "10_" in p]
                         or [pytest.param(None, marks=pytest.mark.skip(reason="no built site"))])
def test_phone(page, browser, served_site):  # noqa: F811
    """On a 390 x 844 phone screen the page does not scroll sideways, the sidebar is folded
    away, images and tables fit, and there is one search button; a screenshot is saved."""
    seen = _info(browser, served_site, page, "390x844")
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


def test_no_unused_javascript():
    """Ship what pages use: no icon script (the theme's CSS draws the icons from web fonts), no
    thebe (it is off), the ipywidgets manager only if a page loads it."""
    require_site()
    pages = [SITE / p for p in PAGES]
    html = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    problems = []
    for name in ("fontawesome.js", "sphinx-thebe.js", "THEBE_JS_URL"):
        if name in html:
            problems.append(f"a page loads {name}")
    shipped = [p.relative_to(SITE).as_posix() for p in SITE.rglob("*.js")]
    problems += [f"shipped but never loaded: {s}" for s in shipped
                 if Path(s).name in ("fontawesome.js", "sphinx-thebe.js")]
    if (SITE / "widgets").exists() and "embed-amd.js" not in html:
        size = sum(f.stat().st_size for f in (SITE / "widgets").rglob("*")) / 1e6
        problems.append(f"widgets/ ({size:.1f} MB) is shipped but no page loads it")
    assert not problems, problems


# JavaScript: display math and inline code wider than their box, and block titles (issue 13).
# A display equation is measured by its typeset content (mjx-math), not by its box: a box that
# scrolls sideways (book-site.css, the last resort) still fails, as does one that clips.
_FIT = r"""
const px = x => Math.round(x);
const math = [];
document.querySelectorAll('.bd-article mjx-container[display="true"]').forEach(c => {
  if (c.closest('details:not([open])') || c.offsetParent === null) return;
  const box = c.parentElement.getBoundingClientRect();
  const inner = (c.querySelector('mjx-math') || c).getBoundingClientRect();
  const tex = (c.closest('.math') || c).textContent || '';
  if (c.scrollWidth > c.clientWidth + 1 || inner.width > box.width + 1
      || inner.right > box.right + 1) {
    math.push(`${px(inner.width)} px in a ${px(Math.min(box.width, c.clientWidth))} px box: `
              + (c.getAttribute('aria-label') || tex).slice(0, 70));
  }
});
const code = [];
document.querySelectorAll('.bd-article code.literal').forEach(c => {
  if (c.closest('details:not([open])') || c.offsetParent === null || c.closest('pre')) return;
  const block = c.closest('p, li, td, dd, .admonition, section');
  if (!block || ['auto', 'scroll'].includes(getComputedStyle(block).overflowX)) return;
  const b = block.getBoundingClientRect();
  const rects = Array.from(c.getClientRects());
  if (rects.some(r => r.right > b.right + 1 || r.left < b.left - 1)) {
    code.push(`${c.textContent.slice(0, 60)} (${px(Math.max(...rects.map(r => r.right)))} > `
              + `${px(b.right)} px)`);
  }
});
const titles = Array.from(document.querySelectorAll('.bd-article .admonition-title'))
  .map(t => t.textContent.trim());
return {math, code, titles};
"""

def _phone_search(driver, page: str, size: str, seen: dict):
    """On the phone: a screenshot of the screen, then the search button pressed (the result of
    ``_SEARCH``: True or what has the focus instead)."""
    if size != "390x844":
        return None
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"phone_{Path(page).stem}.png"))
    return driver.execute_async_script(_SEARCH)


def _open_dropdowns(driver, page: str, size: str, seen: dict):
    """At 1366 x 768: every folded block opened (the problems found), then a full-page
    screenshot."""
    if size != "1366x768":
        return None
    problems = _check_dropdowns(driver)
    screenshot(driver, page)
    return problems


# What this module reads from a page, on the one visit per page and size that all browser
# tests share (site_helpers.visit): three read-only scripts, then two actions that change the
# page, last (after the reader's screenshots and the explorers' controls).
READERS.update(inspect=_INSPECT, overflow=_OVERFLOW, fit=_FIT)
ACTIONS.update(search=Action(90, _phone_search), dropdowns=Action(91, _open_dropdowns))


def _info(browser, served_site, page: str, size: str) -> dict:  # noqa: F811
    """Everything the tests of this module read from ``page`` at ``size``: its console errors
    and the results of ``_INSPECT``, ``_OVERFLOW`` and ``_FIT``, and of the clicks that change
    it: every folded block opened (1366 x 768, and a full-page screenshot) or the search
    button pressed (390 x 844, and a screenshot of the phone's screen)."""
    seen = visit(browser, served_site, page, size)
    action = "dropdowns" if size == "1366x768" else "search"
    return {**seen, action: visited(browser, served_site, page, size, action)}


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
    """The checker of test_math_code_and_titles_fit finds both title defects of issue 13."""
    assert title_problems(["Theorem 2.1 (Regularisation path (informally))"])
    assert title_problems(["Solution to  Exercise 2.1"])
    assert title_problems(["Definition 2.1  (Att-SVM for a prompt)"])
    assert not title_problems(["Theorem 2.1 (Regularisation path, informally)",
                               "Solution to Exercise 2.1", "Exercise 2.1"])


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("page", _chapter_pages() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no built site in _build/html: run `make book` (`make test` builds it)"))])
def test_math_code_and_titles_fit(page, size, browser, served_site):  # noqa: F811
    """At 1366 x 768 and on a 390 x 844 phone every display equation and every inline code
    fits its column (no sideways scrolling, nothing clipped), and no theorem/exercise title has
    doubled brackets or a double space."""
    info = _info(browser, served_site, page, size)["fit"]
    # (display math on the phone: test_display_math_fits_phone)
    problems = ([f"display math wider than its column: {m}" for m in info["math"]]
                if size == "1366x768" else [])
    problems += [f"inline code sticks out of its block: {c}" for c in info["code"]]
    problems += title_problems(info["titles"])
    assert not problems, f"{page} at {size}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("page", _chapter_pages() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no built site in _build/html: run `make book` (`make test` builds it)"))])
def test_display_math_fits_phone(page, browser, served_site):  # noqa: F811
    """On a 390 x 844 phone every display equation fits its column (long equations are broken
    into aligned lines in the notebooks; the sideways scroll of book-site.css is a last resort
    that this test still fails)."""
    info = _info(browser, served_site, page, "390x844")["fit"]
    assert not info["math"], (f"{page} at 390x844: display math wider than its column:\n  "
                              + "\n  ".join(info["math"]))
