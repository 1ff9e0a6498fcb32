"""The built book in a real browser: every page of ``_build/html`` in headless Chromium.

For every page: no console errors (but the allow-list of site_helpers.CONSOLE_ALLOW), math
typeset by the local MathJax 3 (no raw ``$$``, no TeX errors), every image loaded, every
internal link (and its #fragment) resolves, theorem/definition/proof and exercise blocks
rendered, folded solutions open on click, saved widgets rendered, launch and download
buttons on notebook pages; a screenshot of each page goes to ``_build/screenshots/``.
Runs after a build (``make test`` builds first); skipped without one (failed with CI=true).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from site_helpers import (  # noqa: F401  (browser, served_site: pytest fixtures)
    ROOT,
    SITE,
    browser,
    console_errors,
    open_page,
    page_paths,
    require_site,
    screenshot,
    served_site,
    toc_files,
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
const skip = new Set(['SCRIPT', 'STYLE', 'PRE', 'CODE', 'TEXTAREA', 'MJX-CONTAINER', 'NOSCRIPT']);
const raw = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
  acceptNode(node) {
    for (let e = node.parentElement; e; e = e.parentElement) {
      if (skip.has(e.tagName)) return NodeFilter.FILTER_REJECT;
    }
    return NodeFilter.FILTER_ACCEPT;
  }});
for (let n; (n = walker.nextNode()); ) {
  const t = n.textContent;
  if (/\$\$|\\\(|\\\[|\{prf:|\{exercise|\{solution|```\{/.test(t)) raw.push(t.trim().slice(0, 80));
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
    entries = open_page(browser, f"{served_site}/{page}")
    info = browser.execute_script(_INSPECT)
    problems = [f"console error: {m}" for m in console_errors(entries)]

    # math: MathJax 3 typeset every formula; no TeX left raw, no TeX error
    if info["math"]:
        if not (info["mathjax"] or "").startswith("3."):
            problems.append(f"MathJax 3 not loaded (MathJax.version={info['mathjax']})")
        if info["untypeset"]:
            problems.append(f"{info['untypeset']} of {info['math']} formulas not typeset")
    problems += [f"raw markup in the text: {t!r}" for t in info["raw"]]
    problems += [f"MathJax error: {t!r}" for t in info["merror"]]

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
    problems += _check_dropdowns(browser)

    # saved ipywidgets render offline through the local RequireJS + embed-amd.js
    if info["widget_views"] and not info["widgets_rendered"]:
        problems.append(f"{info['widget_views']} saved widget view(s) not rendered")

    # pages from a .ipynb: Colab and Binder launch buttons and the .ipynb download
    if (ROOT / page.replace(".html", ".ipynb")).is_file():
        nb_path = page.replace(".html", ".ipynb")
        for host in ("colab.research.google.com", "mybinder.org"):
            if not re.search(rf'href="https://{re.escape(host)}/[^"]*{re.escape(nb_path)}', source):
                problems.append(f"no {host} launch button for {nb_path}")
        if f"_sources/{nb_path}" not in source:
            problems.append("no download button for the .ipynb")

    screenshot(browser, page)
    assert not problems, f"{page}:\n  " + "\n  ".join(problems)


def test_site_works_from_disk(browser):  # noqa: F811 (fixture imported above)
    """Opened as file:// with the network off, the preface still typesets its math."""
    pages = [p for p in PAGES if p.startswith("book/intro")] or PAGES[:1]
    entries = open_page(browser, (SITE / pages[0]).as_uri())
    info = browser.execute_script(_INSPECT)
    errors = console_errors(entries)
    assert not errors, errors
    assert info["math"] > 0 and info["untypeset"] == 0, info
