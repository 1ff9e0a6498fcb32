"""The reader's pass over a page of the built book, shared by the reader's browser tests
(tests/test_site_reader.py, tests/test_site_figures.py): the pages and chapters of the site,
the one script (:data:`COLLECT`, registered in site_helpers.READERS) that collects what every
test reads, and the reader's screenshots of a chapter (an action of the same visit).
Importing this module registers both, so every test of a page shares one visit per size."""

from __future__ import annotations

import re

import pytest
from site_helpers import ACTIONS, READERS, SCREENSHOTS, Action, page_paths, visit, visited

PAGES = [p for p in page_paths() if p != "index.html"]  # (index.html only redirects)
CHAPTERS = [p for p in PAGES if re.fullmatch(r"book/(0[1-9]|10)_\w+\.html", p)]
NO_SITE = [pytest.param(None, marks=pytest.mark.skip(
    reason="no built site: run `make book` (`make test` builds it) or set ATTNLIB_SITE"))]


COLLECT = r"""
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
    """What the tests need from ``page`` at ``size``: ``COLLECT``'s result and the console
    errors, from the one visit per page and size that the browser tests share
    (site_helpers.visit); on a chapter, the reader's screenshots are taken on that visit."""
    seen = visit(browser, served_site, page, size)
    visited(browser, served_site, page, size, "reader_screenshots")
    return {**seen["collect"], "console": seen["console"]}


def _screenshots(browser, page: str, size: str) -> dict:  # noqa: F811
    """A chapter as a reader sees it, the top of the page and a section in the middle, saved
    to ``_build/screenshots/reader/`` to be looked at. The page must be one of the book's (not a
    server's error page) and each image must have content (not one flat colour)."""
    from PIL import Image

    folder = SCREENSHOTS / "reader"
    folder.mkdir(parents=True, exist_ok=True)
    # a page of the book (a server's error page has no article and no book title)
    book, height, total = browser.execute_script(  # (one round trip)
        "return [!!document.querySelector('article, .bd-article'), window.innerHeight, "
        "document.documentElement.scrollHeight]")
    assert book, f"{page} at {size}: not a page of the book (it did not load)"
    name = page.split("/")[-1].removesuffix(".html")
    paths = {}
    for where, y in (("top", 0), ("middle", max(0, total // 2 - height // 2))):
        browser.execute_script("window.scrollTo(0, arguments[0]);", y)
        path = folder / f"{name}-{size}-{where}.png"
        browser.save_screenshot(str(path))
        with Image.open(path) as im:
            colours = len(set(im.convert("RGB").resize((64, 64)).get_flattened_data()))
        assert colours > 8, f"{page} at {size} ({where}): the screenshot is blank"
        paths[where] = path
    browser.execute_script("window.scrollTo(0, 0);")
    return paths


def _reader_screenshots(driver, page: str, size: str, seen: dict) -> dict | None:
    """On a chapter: the reader's screenshots (:func:`_screenshots`), their paths by place."""
    return _screenshots(driver, page, size) if page in CHAPTERS else None


READERS["collect"] = COLLECT
ACTIONS["reader_screenshots"] = Action(10, _reader_screenshots)


def report(page: str, size: str, what: str, problems: list[str]) -> str:
    return f"{page} at {size}: {len(problems)} {what}:\n  " + "\n  ".join(problems[:40]) + (
        f"\n  ... and {len(problems) - 40} more" if len(problems) > 40 else "")


def params(pages, sizes):
    return [(p, s) for p in pages for s in sizes] or [pytest.param(
        None, None, marks=NO_SITE[0].marks)]
