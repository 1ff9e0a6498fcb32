"""The static explorers of the built book respond in a real browser (headless Chromium).

For every page of ``_build/html`` that holds a static explorer (``attnlib.explorers`` in static
mode, ``div.attnlib-explorer``), as a reader would (tests/explorer_checks.py): the explorer
opens on its default frame (the chapter's settings); every control, moved with the keyboard
(sliders) or clicked (buttons) to each of its values, shows exactly the frame precomputed for
that setting with the value written beside it, and at least one value changes the figure (a
control that changes nothing fails). On a 390 x 844 phone screen the explorer does not
overflow and its panels stack. Screenshots of each explorer at 1366 x 768 and 390 x 844 go to
``_build/screenshots/``. Skipped without a built site (failed with CI=true), like the other
browser tests.
"""

from __future__ import annotations

import re

import pytest
from explorer_checks import check_explorer, check_fits, check_play
from site_helpers import (  # noqa: F401  (pytest fixtures)
    ACTIONS,
    SCREENSHOTS,
    SITE,
    SIZES,
    Action,
    console_errors,
    open_page,
    page_paths,
    require_site,
    visited,
)

pytestmark = pytest.mark.browser

MARKER = 'class="attnlib-explorer"'


def _explorer_pages() -> list[str]:
    return [p for p in page_paths() if MARKER in (SITE / p).read_text(encoding="utf-8")]


PAGES = _explorer_pages()


def test_the_site_has_static_explorers():
    """The book build renders its explorers statically (ATTNLIB_EXPLORER=static)."""
    require_site()
    assert PAGES, ("no page of _build/html contains a static explorer: build the book with "
                   "ATTNLIB_EXPLORER=static and explorer cells in the chapters")


#: Page weight: an explorer stays below its ``max_bytes`` (2.5 MB by default: the frame
#: resolution is lowered to fit), a page with explorers below PAGE_BUDGET bytes in all.
PAGE_BUDGET = 4.5e6


@pytest.mark.parametrize("page", PAGES or ["(no explorer pages)"])
def test_explorer_pages_keep_their_weight(page):
    require_site()
    if page not in PAGES:
        pytest.skip("no page with a static explorer in the built site")
    size = (SITE / page).stat().st_size
    assert size < PAGE_BUDGET, f"{page}: {size / 1e6:.2f} MB"


def _shot(driver, element, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)
    path = SCREENSHOTS / name
    driver.save_screenshot(str(path))
    return path


#: Smallest ratio of a frame's pixels to its displayed CSS pixels (the default static_dpi,
#: ``max(160, 1800 / width)``). At 1366 px a panel of an 11.5-inch figure is shown about 340
#: CSS px wide (the panels' minimum width: 1.3 px per point): 1.7 pixels per CSS pixel at
#: 160 dpi (110 dpi gave 1.2); full 2x there needs about 190 dpi (page weight). Phones: >= 1.5.
SHARP = {1366: 1.6, 390: 1.5}


def _check_sharp(driver, root, tag):
    """Every panel's natural width is at least SHARP times its displayed width."""
    width = int(tag.rsplit("_", 1)[1])
    panels = driver.execute_script(  # (one round trip for every panel)
        "return Array.from(arguments[0].querySelectorAll('img.attnlib-panel'))"
        ".map(i => [i.naturalWidth, i.getBoundingClientRect().width])", root)
    assert panels, f"{tag}: no panel"
    for natural, shown in panels:
        assert natural >= SHARP[width] * shown - 1, (
            f"{tag}: a panel of {natural} px is shown {shown:.0f} px wide (soft on 2x screens)")


def _explore(driver, page: str, size: str, seen: dict) -> int | None:
    """On a page with explorers (at either size): none of its console errors comes from an
    explorer; every explorer fits the screen, is sharp, and (at 1366 px) every control and
    every value changes its picture, and an iteration slider plays.  Returns how many
    explorers were checked (None on other pages)."""
    from selenium.webdriver.common.by import By

    if page not in PAGES:
        return None
    stem = re.sub(r"[^A-Za-z0-9]+", "_", page.removesuffix(".html"))
    width = SIZES[size][0]
    # the page's other console errors are the site tests' business; none may come from an
    # explorer
    mine = [m for m in console_errors(seen["entries"])
            if re.search(r"attnlib|explorer", m)]
    assert not mine, mine
    explorers = driver.find_elements(By.CSS_SELECTOR, "div.attnlib-explorer")
    assert explorers, f"{page}: no explorer rendered"
    for e, ex in enumerate(explorers):
        tag = f"{stem}_{e}_{ex.get_attribute('data-explorer')}_{width}"
        check_fits(driver, ex, tag, width)
        _shot(driver, ex, f"explorer_{tag}.png")
        if width == 1366:  # every control, every value (the phone: same script)
            changed = check_explorer(driver, ex, tag)
            assert all(n >= 1 for n in changed.values()), changed
            if ex.find_elements(By.CSS_SELECTOR, "button.attnlib-play"):
                check_play(driver, ex, tag)  # an iteration slider plays
        _check_sharp(driver, ex, tag)
    driver.execute_script("window.scrollTo(0, 0);")
    return len(explorers)


# (run on the one visit per page and size that the browser tests share, site_helpers.visit:
# after the reader's screenshots, before the site test's clicks)
ACTIONS["explorers"] = Action(20, _explore)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("page", PAGES or ["(no explorer pages)"])
def test_static_explorers_respond(browser, served_site, page, size):
    require_site()
    if page not in PAGES:
        pytest.skip("no page with a static explorer in the built site")
    assert visited(browser, served_site, page, size, "explorers") >= 1
