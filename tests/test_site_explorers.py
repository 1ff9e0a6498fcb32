"""The static explorers of the built book respond in a real browser (headless Chromium).

For every page of ``_build/html`` that holds a static explorer (``attnlib.explore`` in static
mode, ``div.attnlib-explorer``): every player's slider is moved with the keyboard, as a reader
would, and the displayed frame must change (another image); the "next frame" button must move
it again; a closed panel (``<details>``) opens on click and its player works too. A screenshot
of each explorer before and after goes to ``_build/screenshots/``. Skipped without a built
site (failed with CI=true), like the other browser tests.
"""

from __future__ import annotations

import re

import pytest
from site_helpers import (  # noqa: F401  (pytest fixtures)
    SCREENSHOTS,
    SITE,
    browser,
    console_errors,
    open_page,
    page_paths,
    require_site,
    served_site,
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


def _src(driver, img):
    return driver.execute_script("return arguments[0].getAttribute('src') || ''", img)


def _shot(driver, element, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    path = SCREENSHOTS / name
    element.screenshot(str(path))
    return path


def _move(driver, player, tag):
    """Move one player's slider and press "next frame"; assert the image changes each time."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    img = player.find_element(By.CSS_SELECTOR, "img[id^=_anim_img]")
    slider = player.find_element(By.CSS_SELECTOR, "input.anim-slider")
    n_frames = int(slider.get_attribute("max")) + 1
    assert n_frames >= 2, f"{tag}: a static explorer needs at least two frames"
    before = _src(driver, img)
    assert before.startswith("data:image/png;base64,"), f"{tag}: no frame shown"
    _shot(driver, player, f"explorer_{tag}_before.png")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", slider)
    slider.click()
    slider.send_keys(Keys.HOME)
    first = _src(driver, img)
    slider.send_keys(Keys.END)  # the reader drags the slider to the end
    last = _src(driver, img)
    assert slider.get_attribute("value") == str(n_frames - 1)
    assert last != first, f"{tag}: moving the slider did not change the figure"
    _shot(driver, player, f"explorer_{tag}_after.png")
    player.find_element(By.CSS_SELECTOR, "button[title='First frame']").click()
    player.find_element(By.CSS_SELECTOR, "button[title='Next frame']").click()
    assert slider.get_attribute("value") == "1"
    assert _src(driver, img) not in ("", last), f"{tag}: 'next frame' did not change it"


@pytest.mark.parametrize("page", PAGES or ["(no explorer pages)"])
def test_static_explorers_respond(browser, served_site, page):  # noqa: F811
    from selenium.webdriver.common.by import By

    require_site()
    if page not in PAGES:
        pytest.skip("no page with a static explorer in the built site")
    log = open_page(browser, f"{served_site}/{page}")
    # the page's other console errors are test_site.py's business; none may come from a player
    mine = [m for m in console_errors(log) if re.search(r"anim|Animation|attnlib", m)]
    assert not mine, mine
    stem = re.sub(r"[^A-Za-z0-9]+", "_", page.removesuffix(".html"))
    explorers = browser.find_elements(By.CSS_SELECTOR, "div.attnlib-explorer")
    assert explorers
    for e, ex in enumerate(explorers):
        name = ex.get_attribute("data-explorer")
        for d in ex.find_elements(By.CSS_SELECTOR, "details.attnlib-panel:not([open])")[:1]:
            d.find_element(By.TAG_NAME, "summary").click()  # a reader opens another panel
            assert d.get_attribute("open") is not None
        players = [p for p in ex.find_elements(By.CSS_SELECTOR, "div.animation")
                   if p.is_displayed()]
        assert players, f"{page}: explorer {name} shows no player"
        for j, player in enumerate(players[:2]):
            _move(browser, player, f"{stem}_{e}_{name}_{j}")
