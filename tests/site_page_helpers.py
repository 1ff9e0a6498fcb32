"""What the page tests of the built book (tests/test_site.py, tests/test_site_fit.py) read
from each page, on the one visit per page and size that all browser tests share
(site_helpers.visit): three read-only scripts (:data:`INSPECT`, :data:`OVERFLOW`,
:data:`FIT`), then two actions that change the page, each at the size it checks: the search
button pressed at the end of the phone pass, every folded block opened last of all at
1366 x 768 (after the reader's screenshots and the explorers' controls). Importing this module
registers them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from site_helpers import (
    ACTIONS,
    READERS,
    ROOT,
    SCREENSHOTS,
    Action,
    page_paths,
    screenshot,
    visit,
    visited,
)

PAGES = page_paths()


def chapter_pages() -> list[str]:
    """The pages built from a notebook."""
    return [p for p in PAGES if (ROOT / p.replace(".html", ".ipynb")).is_file()]


# JavaScript collecting, in one round trip, what the checks below need from the open page (on
# the phone, arguments[0] === '390x844', only what test_phone reads there: the text, glyph and
# link checks are the laptop's).
INSPECT = r"""
const full = arguments[0] !== '390x844';
const skip = new Set(['SCRIPT', 'STYLE', 'PRE', 'CODE', 'TEXTAREA', 'MJX-CONTAINER', 'NOSCRIPT',
                      'BUTTON']);  // (a player's pause button reads '||')
// raw math, MyST directives/roles, LaTeX commands and pipe tables left in the text
const RAW = new RegExp([String.raw`\$\$`, String.raw`\\\(`, String.raw`\\\[`,
  String.raw`\{(prf:|exercise|solution|doc\}|ref\}|cite|numref\}|eq\}|math\})`, '```\\{',
  String.raw`\\(frac|mathrm|mathbf|mathcal|top|alpha|gamma|lambda|sum|le|ge|star|begin|end)\b`,
  String.raw`\|\s*:?-{3,}`, String.raw`^\s*\|.*\|\s*$`].join('|'), 'm');
const raw = [];
const chars = new Map();
// (the text nodes outside the skipped elements: a skipped element is rejected with its whole
// subtree, so no text node walks up its ancestors)
const walker = document.createTreeWalker(document.body,
  NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT, {
  acceptNode(node) {
    if (node.nodeType === Node.TEXT_NODE) return NodeFilter.FILTER_ACCEPT;
    return skip.has(node.tagName) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_SKIP;
  }});
for (let n; full && (n = walker.nextNode()); ) {
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
// (each character is drawn once per font, and each font's .notdef once: MathJax draws every
// glyph of every formula as a ::before of its own element, mostly the same few characters)
const notdef = new Map(), verdict = new Map();
const isBox = (ch, cs) => {
  const font = `${cs.fontStyle} ${cs.fontWeight} 40px ${cs.fontFamily}`;
  const key = ch + '\u0000' + font;
  if (!verdict.has(key)) {
    if (!notdef.has(font)) notdef.set(font, draw('\u0378', font));
    verdict.set(key, draw(ch, font) === notdef.get(font));
  }
  return verdict.get(key);
};
for (const [ch, el] of chars) {
  if (isBox(ch, getComputedStyle(el))) boxes.push(ch);
}
// icons drawn by CSS (::before/::after content) of the visible elements, in their own font
for (const el of full ? document.querySelectorAll('body *') : []) {
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


# JavaScript: each folded (dropdown) solution is closed, and opens when its title is clicked
# (clicked one after the other, each awaited for at most 2 s, in one round trip); the problems
DROPDOWNS = r"""
const done = arguments[arguments.length - 1];
// displayed as Selenium's is_displayed() reads it: a box, not hidden, no transparent ancestor
const shown = e => {
  if (!e.getClientRects().length) return false;
  if (['hidden', 'collapse'].includes(getComputedStyle(e).visibility)) return false;
  for (let a = e; a; a = a.parentElement) {
    if (getComputedStyle(a).opacity === '0') return false;
  }
  return true;
};
const frame = () => new Promise(r => requestAnimationFrame(r));
(async () => {
  const problems = [];
  for (const block of document.querySelectorAll('div.solution.dropdown, details.solution')) {
    const name = block.id || (block.innerText || '').slice(0, 40);
    const body = Array.from(block.children).filter(e =>
        !e.classList.contains('admonition-title') && !['SUMMARY', 'BUTTON'].includes(e.tagName));
    if (!body.length) { problems.push(`solution '${name}' has no content`); continue; }
    if (body.some(shown)) { problems.push(`solution '${name}' is not folded`); continue; }
    const title = block.querySelector('summary, .admonition-title, button.toggle-button');
    if (!title) { problems.push(`solution '${name}' has no title to click`); continue; }
    title.scrollIntoView({block: 'center'});
    title.click();
    const end = performance.now() + 2000;
    while (!body.some(shown) && performance.now() < end) await frame();
    if (!body.some(shown)) problems.push(`solution '${name}' does not open on click`);
  }
  return problems;
})().then(done, e => done([`the dropdown check failed: ${e}`]));
"""


# JavaScript: each code cell whose box scrolls sideways (a line longer than the column), with
# its longest line; and what overflows the window on a phone
OVERFLOW = r"""
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

# JavaScript: the visible search button opens a visible, focused search field (within 500 ms)
SEARCH = r"""
const done = arguments[arguments.length - 1];
const button = Array.from(document.querySelectorAll('.search-button__button'))
  .find(e => e.offsetWidth > 0);
if (!button) { done('no visible search button'); }
else {
  button.click();
  const end = performance.now() + 500;
  const check = () => {  // every frame, for at most 500 ms
    const a = document.activeElement;
    const ok = a && a.matches('input[type=search]') && a.offsetWidth > 0;
    if (!ok && performance.now() < end) { requestAnimationFrame(check); return; }
    done(ok ? true : `focus on ${a ? a.outerHTML.slice(0, 80) : null}`);
    document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}));
  };
  requestAnimationFrame(check);
}
"""


# JavaScript: display math and inline code wider than their box, and block titles.
# A display equation is measured by its typeset content (mjx-math), not by its box: a box that
# scrolls sideways (book-site.css, the last resort) still fails, as does one that clips.
FIT = r"""
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
    ``SEARCH``: True or what has the focus instead).  On a chapter the reader's pass took the
    same picture already (the top of the page at 390 x 844, site_reader_helpers): it is copied,
    not taken again."""
    if size != "390x844":
        return None
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"phone_{Path(page).stem}.png"
    shots = seen.get("reader_screenshots")
    top = shots.get("top") if isinstance(shots, dict) else None
    if top and driver.execute_script("return window.scrollY") == 0:
        shutil.copyfile(top, path)
    else:
        driver.execute_script("window.scrollTo(0, 0);")
        driver.save_screenshot(str(path))
    return driver.execute_async_script(SEARCH)


def _open_dropdowns(driver, page: str, size: str, seen: dict):
    """At 1366 x 768: every folded block opened (the problems found)."""
    if size != "1366x768":
        return None
    return driver.execute_async_script(DROPDOWNS)


def _page_screenshot(driver, page: str, size: str, seen: dict):
    """At 1366 x 768, after every folded block was opened: a full-page screenshot, to be
    looked at, with ``ATTNLIB_SCREENSHOTS=1`` (no test reads it; the window grown to the
    page's height and the picture cost about 30 s of a browser run)."""
    if size != "1366x768" or os.environ.get("ATTNLIB_SCREENSHOTS") != "1":
        return None
    return screenshot(driver, page)


# What this module reads from a page, on the one visit per page and size that all browser
# tests share (site_helpers.visit): three read-only scripts, then two actions that change the
# page, each at the one size it checks and after that size's readers: the search button
# pressed at the end of the phone pass (it closes the search again with Escape, so the laptop
# pass, which counts the visible search boxes, finds one), every folded block opened last of
# all at 1366 x 768 (after the reader's screenshots and the explorers' controls); then the
# full-page screenshot, an action of its own (ATTNLIB_VISIT_TIMES times it apart).
READERS.update(inspect=INSPECT, overflow=OVERFLOW, fit=FIT)
ACTIONS.update(search=Action(80, _phone_search, sizes=("390x844",)),
               dropdowns=Action(91, _open_dropdowns, sizes=("1366x768",)),
               page_screenshot=Action(92, _page_screenshot, sizes=("1366x768",)))


def page_info(browser, served_site, page: str, size: str) -> dict:  # noqa: F811
    """Everything the tests of this module read from ``page`` at ``size``: its console errors
    and the results of ``INSPECT``, ``OVERFLOW`` and ``FIT``, and of the clicks that change
    it: every folded block opened (1366 x 768, and a full-page screenshot) or the search
    button pressed (390 x 844, and a screenshot of the phone's screen)."""
    seen = visit(browser, served_site, page, size)
    action = "dropdowns" if size == "1366x768" else "search"
    return {**seen, action: visited(browser, served_site, page, size, action)}
