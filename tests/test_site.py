"""The built book in a real browser: every page of ``_build/html`` in headless Chromium.

For every page: no console errors (but the allow-list of site_helpers.CONSOLE_ALLOW, empty),
math typeset by the local MathJax 3 (no raw ``$$``, no TeX errors, no raw LaTeX commands, no
raw MyST directives or roles, no raw ``|---|`` pipe tables), no glyph drawn as an empty box
(a character none of the page's fonts has, such as an emoji), every image loaded, every
internal link (and its #fragment) resolves, theorem/definition/proof and exercise blocks
rendered, folded solutions open on click, saved widgets rendered, launch and download
buttons on notebook pages (Colab and download open the plain export in ``plain/``), one search
box; only JavaScript that pages use is shipped (test_no_unused_javascript); with
``ATTNLIB_SCREENSHOTS=1`` a full-page screenshot of each page goes to ``_build/screenshots/``.
What fits its column and the phone's screen:
test_site_fit.py; what is read from each page: tests/site_page_helpers.py.
Runs after a build (``make test`` builds first); skipped without one (failed with CI=true).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from site_helpers import (
    ROOT,
    SITE,
    console_errors,
    open_page,
    require_site,
    toc_files,
)
from site_page_helpers import INSPECT, PAGES, page_info

pytestmark = pytest.mark.browser


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


@pytest.mark.parametrize("page", PAGES or [pytest.param(None, marks=pytest.mark.skip(
    reason="no built site in _build/html: run `make book` (`make test` builds it)"))])
def test_page(page, browser, served_site):
    source = (SITE / page).read_text(encoding="utf-8")
    redirect = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', source)
    if redirect:  # index.html only redirects to the root page
        assert (SITE / page).parent.joinpath(redirect.group(1)).is_file(), redirect.group(1)
        return
    seen = page_info(browser, served_site, page, "1366x768")
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


def test_site_works_from_disk(browser):
    """Opened as file:// with the network off, the preface still typesets its math."""
    pages = [p for p in PAGES if p.startswith("book/intro")] or PAGES[:1]
    entries = open_page(browser, (SITE / pages[0]).as_uri())
    info = browser.execute_script(INSPECT)
    errors = console_errors(entries)
    assert not errors, errors
    assert info["math"] > 0 and info["untypeset"] == 0, info


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
