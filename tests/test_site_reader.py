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
- ``test_figures_numbered_with_alt_text``: every image in a cell output (explorer panels and
  widgets aside) is inside a numbered ``<figure>`` with a ``<figcaption>``, and its alt text
  says what it shows (not empty, not a file name, not a hash; :func:`alt_problem`).
- ``test_page_fits_phone``: no page of the site (chapters, report, API, preface, guide, ...)
  is wider than a 390 px screen; names the elements that stick out.
- ``test_no_console_errors``: no console error on any page at 1366 x 768 and at 390 x 844.
- ``test_figure_text_readable_on_phone``: at 390 px the smallest text of every figure is
  drawn at least :data:`MIN_TEXT_PX` (9) CSS px tall.  How this is measured: a figure's PNG
  records its resolution (matplotlib writes the figure's dpi into the pHYs chunk) and
  attnlib's ``BookFigure`` writes the smallest font size of the figure's drawn text in points
  (tEXt key :data:`FONT_KEY`); for an image without that key the smallest font size set
  anywhere in attnlib's code is assumed (:func:`smallest_font_pt`).  The text's natural
  height is ``pt * dpi / 72`` image pixels; the image is drawn at ``scale = displayed width
  / natural width``, so the text is ``scale * pt * dpi / 72`` CSS px.  book-site.css keeps
  figures at their natural size on a phone (a wider one scrolls inside its own box).
- ``test_search_*``: the search page's snippets have no raw TeX (``\\(p\\)``), searching
  "exercise 2.1" logs no console error, and chapters rank above the API page for the book's
  own terms (book/_ext/book_site.py, book/_static/book-search.js, book/_ext/search_scorer.js).

The site is read from ``ATTNLIB_SITE`` (default ``_build/html``): ``ATTNLIB_SITE=/some/build
pytest tests/test_site_reader.py`` checks another build.  Each page is opened once per size
and what every test needs is collected in one pass (``_COLLECT``).
"""

from __future__ import annotations

import base64
import io
import re
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
    served_site,
    visit,
    visited,
)

pytestmark = pytest.mark.browser

PAGES = [p for p in page_paths() if p != "index.html"]  # (index.html only redirects)
CHAPTERS = [p for p in PAGES if re.fullmatch(r"book/(0[1-9]|10)_\w+\.html", p)]
NO_SITE = [pytest.param(None, marks=pytest.mark.skip(
    reason="no built site: run `make book` (`make test` builds it) or set ATTNLIB_SITE"))]

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
MIN_TEXT_PX = 9.0
#: tEXt key of a figure's PNG with the smallest font size of its text, in points (written by
#: attnlib.plots.BookFigure)
try:
    from attnlib.plots import FONT_KEY
except ImportError:  # an attnlib without it: the same key
    FONT_KEY = "attnlib:min_font_pt"


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


_HASHLIKE = re.compile(r"[0-9a-f]{12,}|[0-9A-Za-z_-]{24,}")
_FILENAME = re.compile(r"\S+\.(png|jpe?g|svg|gif|webp|pdf)$", re.IGNORECASE)


def alt_problem(alt: str | None) -> str | None:
    """What is wrong with a figure's alt text (``None``: it says something)."""
    alt = (alt or "").strip()
    if not alt:
        return "empty alt text"
    if _FILENAME.search(alt) or "_images/" in alt:
        return f"alt text is a file name: {alt[:60]!r}"
    if " " not in alt and _HASHLIKE.search(alt):
        return f"alt text is a hash: {alt[:60]!r}"
    if len(alt.split()) < 3:
        return f"alt text does not say what the figure shows: {alt!r}"
    return None


def smallest_font_pt() -> float:
    """The smallest font size (points) that attnlib's plotting code sets anywhere
    (``fontsize=``, ``labelsize=``, ``title_fontsize=`` with a number); matplotlib's default
    10 pt if none is smaller."""
    sizes = [10.0]
    for path in (ROOT / "attnlib").rglob("*.py"):
        for m in re.finditer(r"\b(?:fontsize|labelsize|title_fontsize)\s*=\s*(\d+(?:\.\d+)?)\b",
                             path.read_text(encoding="utf-8")):
            sizes.append(float(m.group(1)))
    return min(sizes)


def png_font_px(data: bytes) -> tuple[float, float, str]:
    """``(dpi, font pt, where the pt comes from)`` of a figure's PNG (see the module text)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        dpi = im.info.get("dpi", (72.0, 72.0))[0] if im.format == "PNG" else 72.0
        text = getattr(im, "text", {}) or {}
    if FONT_KEY in text:
        return float(dpi), float(text[FONT_KEY]), "its PNG"
    return float(dpi), smallest_font_pt(), "attnlib's smallest font"


def _image_bytes(src: str) -> bytes | None:
    if src.startswith("data:"):
        head, _, body = src.partition(",")
        return base64.b64decode(body) if ";base64" in head else None
    rel = unquote(urlsplit(src).path).lstrip("/")
    path = SITE / rel
    return path.read_bytes() if path.is_file() else None


def test_classifiers_catch_the_defects():
    """The classifiers find each defect of issue 24 and pass the house style."""
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
    assert alt_problem("") and alt_problem("3f9a0c1d2b4e5f60718293a4b5c6d7e8.png")
    assert alt_problem("0d4c2a9f7e31b8c5a6d2") and alt_problem("figure")
    assert alt_problem("_images/abc.png")
    assert alt_problem("Four tokens in the plane; the path turns to the max-margin "
                       "direction.") is None


# ---------------------------------------------------------------------------------------------
# One pass over an open page

_COLLECT = r"""
const article = document.querySelector('article.bd-article') || document.querySelector('main')
                || document.body;
const shownCache = new Map();
// shown: has a box, is not hidden, and is not inside a closed <details> (but in its summary)
const shown = el => {
  if (shownCache.has(el)) return shownCache.get(el);
  let ok = el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  for (let d = el.closest('details:not([open])'); ok && d;
       d = d.parentElement && d.parentElement.closest('details:not([open])')) {
    const s = d.querySelector(':scope > summary');
    if (!(s && s.contains(el))) ok = false;
  }
  shownCache.set(el, ok);
  return ok;
};
const cells = Array.from(article.querySelectorAll('div.cell'));
const heading = el => {
  for (let s = el.closest('section'); s;
       s = s.parentElement && s.parentElement.closest('section')) {
    const h = s.querySelector(':scope > h1, :scope > h2, :scope > h3, :scope > h4');
    if (h) return h.textContent.replace(/[#¶]\s*$/, '').trim().slice(0, 60);
  }
  return '';
};
const where = el => {
  const c = el.closest('div.cell');
  const part = c ? `cell ${cells.indexOf(c) + 1}` + (el.closest('.cell_input') ? ' (code)'
      : el.closest('.cell_output') ? ' (output)' : '') : el.tagName.toLowerCase();
  const h = heading(el);
  return h ? `${part} in "${h}"` : part;
};
// visible text, grouped by block (a paragraph, a list item, a table cell, a code block, ...)
const BLOCK = 'p, li, td, th, pre, h1, h2, h3, h4, h5, h6, dt, dd, figcaption, summary, caption, '
            + 'div.cell_output > div, blockquote';
const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'MJX-CONTAINER', 'TEMPLATE']);
const blocks = new Map();
const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT, {
  acceptNode(node) {
    for (let e = node.parentElement; e && e !== article; e = e.parentElement) {
      if (SKIP.has(e.tagName)) return NodeFilter.FILTER_REJECT;
    }
    return node.textContent.trim() ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
  }});
for (let n; (n = walker.nextNode()); ) {
  if (!shown(n.parentElement)) continue;
  const b = n.parentElement.closest(BLOCK) || n.parentElement;
  blocks.set(b, (blocks.get(b) || '') + n.textContent);
}
const text = Array.from(blocks, ([b, t]) => ({where: where(b), pre: b.tagName === 'PRE', text: t}));
// code cells: is the source in view (not removed, not folded), and what is it
const code = cells.map((c, k) => {
  const pre = c.querySelector('.cell_input pre');
  return pre ? {where: where(pre), shown: shown(pre), source: pre.textContent} : null;
}).filter(x => x);
const plain = Array.from(article.querySelectorAll('.output.text_plain'))
  .map(o => ({where: where(o), shown: shown(o),
              text: (o.querySelector('pre') || o).textContent.trim().slice(0, 80)}));
// figures: images in cell outputs, explorers and widgets aside
const figures = Array.from(article.querySelectorAll('.cell_output img'))
  .filter(i => !i.closest('.attnlib-explorer, .attnlib-drag, .jupyter-widgets, .widget-area'))
  .map(i => {
    const fig = i.closest('figure');
    const cap = fig && fig.querySelector('figcaption');
    const r = i.getBoundingClientRect();
    return {where: where(i), src: i.currentSrc || i.src,
            file: (i.getAttribute('src') || '').slice(0, 80), alt: i.getAttribute('alt'),
            in_figure: !!fig, caption: cap ? cap.textContent.trim() : null,
            numbered: !!(cap && cap.querySelector('.caption-number')), shown: shown(i),
            width: r.width, natural: i.naturalWidth};
  });
// what sticks out of the window (outermost elements only; inside a box that scrolls sideways
// on its own is fine)
const vw = document.documentElement.clientWidth;
const scrolls = e => {
  for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
    if (['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(a).overflowX)
        && a.getBoundingClientRect().right <= vw + 1) return true;
  }
  return false;
};
// (a drawer off screen, such as the phone's table of contents, is fixed and widens nothing)
const fixed = e => {
  for (let a = e; a && a !== document.body; a = a.parentElement) {
    if (getComputedStyle(a).position === 'fixed') return true;
  }
  return false;
};
const sticking = [];
for (const e of document.querySelectorAll('body *')) {
  if (sticking.length >= 8) break;
  if (sticking.some(s => s.contains(e))) continue;
  const r = e.getBoundingClientRect();
  if (r.width && r.right > vw + 1 && getComputedStyle(e).visibility !== 'hidden'
      && !scrolls(e) && !fixed(e)) {
    sticking.push(e);
  }
}
const describe = e => {
  const cls = (typeof e.className === 'string' && e.className.trim())
      ? '.' + e.className.trim().split(/\s+/).slice(0, 3).join('.') : '';
  const id = e.id ? '#' + e.id : '';
  return `${e.tagName.toLowerCase()}${id}${cls} (${Math.round(e.getBoundingClientRect().right)} px`
         + `, ${where(e)}): ${(e.textContent || e.getAttribute('src') || '').trim().slice(0, 50)}`;
};
return {text, code, plain, figures, vw, inner: window.innerWidth,
        page_width: document.documentElement.scrollWidth, sticking: sticking.map(describe)};
"""

def collect(browser, served_site, page: str, size: str) -> dict:  # noqa: F811
    """What the tests need from ``page`` at ``size``: ``_COLLECT``'s result and the console
    errors, from the one visit per page and size that the browser tests share
    (site_helpers.visit); on a chapter, the reader's screenshots are taken on that visit."""
    seen = visit(browser, served_site, page, size)
    visited(browser, served_site, page, size, "reader_screenshots")
    return {**seen["collect"], "console": seen["console"]}


def _screenshots(browser, page: str, size: str) -> None:  # noqa: F811
    """A chapter as a reader sees it, the top of the page and a section in the middle, saved
    to ``_build/screenshots/reader/`` to be looked at. The page must be one of the book's (not a
    server's error page) and each image must have content (not one flat colour)."""
    from PIL import Image

    folder = SCREENSHOTS / "reader"
    folder.mkdir(parents=True, exist_ok=True)
    # a page of the book (a server's error page has no article and no book title)
    assert browser.execute_script("return !!document.querySelector('article, .bd-article')"), \
        f"{page} at {size}: not a page of the book (it did not load)"
    height = browser.execute_script("return window.innerHeight")
    total = browser.execute_script("return document.documentElement.scrollHeight")
    name = page.split("/")[-1].removesuffix(".html")
    for where, y in (("top", 0), ("middle", max(0, total // 2 - height // 2))):
        browser.execute_script("window.scrollTo(0, arguments[0]);", y)
        path = folder / f"{name}-{size}-{where}.png"
        browser.save_screenshot(str(path))
        with Image.open(path) as im:
            colours = len(set(im.convert("RGB").resize((64, 64)).getdata()))
        assert colours > 8, f"{page} at {size} ({where}): the screenshot is blank"
    browser.execute_script("window.scrollTo(0, 0);")


def _reader_screenshots(driver, page: str, size: str, seen: dict) -> None:
    if page in CHAPTERS:
        _screenshots(driver, page, size)


READERS["collect"] = _COLLECT
ACTIONS["reader_screenshots"] = Action(10, _reader_screenshots)


def _report(page: str, size: str, what: str, problems: list[str]) -> str:
    return f"{page} at {size}: {len(problems)} {what}:\n  " + "\n  ".join(problems[:40]) + (
        f"\n  ... and {len(problems) - 40} more" if len(problems) > 40 else "")


def _params(pages, sizes):
    return [(p, s) for p in pages for s in sizes] or [pytest.param(
        None, None, marks=NO_SITE[0].marks)]


# ---------------------------------------------------------------------------------------------
# The tests

@pytest.mark.parametrize("page,size", _params(CHAPTERS, SIZES))
def test_no_process_words(page, size, browser, served_site):  # noqa: F811
    """A chapter's visible text speaks of its subject, not of how the book was made."""
    info = collect(browser, served_site, page, size)
    problems = [f"{t['where']}: {w}" for t in info["text"] for w in process_words(t["text"])]
    assert not problems, _report(page, size, "process words in view", problems)


@pytest.mark.parametrize("page,size", _params(CHAPTERS, SIZES))
def test_no_raw_check_lines(page, size, browser, served_site):  # noqa: F811
    """No raw check line (``✓ key = value  target in [...]``, ``[live; ...]``) in view."""
    info = collect(browser, served_site, page, size)
    problems = [f"{t['where']}: {c}" for t in info["text"] for c in check_lines(t["text"])]
    assert not problems, _report(page, size, "raw check lines in view", problems)


@pytest.mark.parametrize("page,size", _params(CHAPTERS, SIZES))
def test_no_bookkeeping_cells_in_view(page, size, browser, served_site):  # noqa: F811
    """No visible code cell that only records checks or prints (require, verify, Markdown,
    print, assert): such cells are removed (``remove-cell``/``remove-input``)."""
    info = collect(browser, served_site, page, size)
    problems = [f"{c['where']}: {' / '.join(c['source'].strip().splitlines())[:110]!r}"
                for c in info["code"] if c["shown"] and bookkeeping_only(c["source"])]
    assert not problems, _report(page, size, "bookkeeping-only code cells in view", problems)


@pytest.mark.parametrize("page", CHAPTERS or NO_SITE)
def test_no_stray_outputs(page, browser, served_site):  # noqa: F811
    """No return value shown as plain text (a cell ending in a bare expression)."""
    info = collect(browser, served_site, page, "1366x768")
    problems = [f"{o['where']}: {o['text']!r}" for o in info["plain"]]
    assert not problems, _report(page, "1366x768", "stray plain-text outputs", problems)


@pytest.mark.parametrize("page", CHAPTERS or NO_SITE)
def test_figures_numbered_with_alt_text(page, browser, served_site):  # noqa: F811
    """Every figure is numbered and captioned (``<figure>`` + ``<figcaption>`` with
    "Fig. N.k") and its alt text says what it shows."""
    info = collect(browser, served_site, page, "1366x768")
    problems = []
    for f in info["figures"]:
        name = f"{f['where']}: image {f['file']!r}"
        if not f["in_figure"]:
            problems.append(f"{name} is not in a <figure>")
        elif f["caption"] is None:
            problems.append(f"{name} has no <figcaption>")
        elif not f["numbered"]:
            problems.append(f"{name} has an unnumbered caption {f['caption'][:50]!r}")
        bad = alt_problem(f["alt"])
        if bad:
            problems.append(f"{name}: {bad}")
    assert not problems, _report(page, "1366x768", "figure problems", problems)


@pytest.mark.parametrize("page", PAGES or NO_SITE)
def test_page_fits_phone(page, browser, served_site):  # noqa: F811
    """At 390 x 844 the page is no wider than the screen (no sideways scrolling)."""
    info = collect(browser, served_site, page, "390x844")
    if info["page_width"] > info["vw"] + 1:
        pytest.fail(f"{page} at 390x844: the page is {info['page_width']} px wide on a "
                    f"{info['vw']} px screen; sticking out:\n  " + "\n  ".join(info["sticking"]))


@pytest.mark.parametrize("page,size", _params(PAGES, SIZES))
def test_no_console_errors(page, size, browser, served_site):  # noqa: F811
    """No console error (site_helpers.CONSOLE_ALLOW is empty) at either size."""
    info = collect(browser, served_site, page, size)
    assert not info["console"], _report(page, size, "console errors", info["console"])


@pytest.mark.parametrize("page", CHAPTERS or NO_SITE)
def test_figure_text_readable_on_phone(page, browser, served_site):  # noqa: F811
    """At 390 px the smallest text of each figure is drawn >= 9 CSS px tall (see the module
    text for the measurement)."""
    info = collect(browser, served_site, page, "390x844")
    problems = []
    for f in info["figures"]:
        data = _image_bytes(f["src"])
        if not data or not f["natural"] or not f["shown"]:
            continue
        dpi, pt, origin = png_font_px(data)
        scale = f["width"] / f["natural"]
        px = scale * pt * dpi / 72
        if px < MIN_TEXT_PX - 0.05:
            problems.append(
                f"{f['where']}: image {f['file']!r} drawn {f['width']:.0f} of {f['natural']} px "
                f"wide: {pt:g} pt text ({origin}) at {dpi:.0f} dpi is {px:.1f} px")
    assert not problems, _report(page, "390x844", "figures with text under 9 px", problems)


# ---------------------------------------------------------------------------------------------
# Search

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
  } else setTimeout(poll, 200);
};
poll();
"""


def search(browser, served_site, query: str) -> tuple[list[dict], list[str]]:  # noqa: F811
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
def test_search_snippets_without_raw_tex(query, browser, served_site):  # noqa: F811
    """Search snippets show text, not TeX source (``\\(p\\)``, ``\\mathbf``)."""
    _need_search_page()
    results, errors = search(browser, served_site, query)
    assert results, f"no search results for {query!r}"
    raw = [f"{r['href']}: {r['context'][:120]!r}" for r in results
           if _RAW_TEX.search(r["context"])]
    assert not raw, (f"search {query!r}: {len(raw)} snippets with raw TeX:\n  "
                     + "\n  ".join(raw[:10]))
    assert not errors, f"search {query!r}: console errors: {errors}"


def test_search_exercise_without_console_error(browser, served_site):  # noqa: F811
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
def test_search_ranks_chapters_above_api(query, chapter, browser, served_site):  # noqa: F811
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
