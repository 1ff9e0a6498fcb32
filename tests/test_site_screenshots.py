"""Screenshots of every chapter as a reader sees it: a laptop (1366 x 768) and a phone
(390 x 844), the top of the page and a section in the middle, saved to
``_build/screenshots/reader/`` to be looked at (``make test`` leaves them there).

The test also checks what a screenshot can show: the window really had the width asked for
(no page forced it wider), and each image has content (not one flat colour, e.g. a blank page
or a page that failed to load).
"""

from __future__ import annotations

import pytest
from site_helpers import SCREENSHOTS, browser, open_page, served_site, toc_files  # noqa: F401

pytestmark = pytest.mark.browser

CHAPTERS = [f for f in toc_files() if f.split("/")[-1][:2].isdigit()]
SIZES = {"laptop": (1366, 768), "phone": (390, 844)}


def _distinct_colours(path) -> int:
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").resize((64, 64))
        return len(set(small.getdata()))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_screenshots(browser, served_site, page, size):  # noqa: F811
    width, height = SIZES[size]
    folder = SCREENSHOTS / "reader"
    folder.mkdir(parents=True, exist_ok=True)
    old = browser.get_window_size()
    try:
        browser.set_window_size(width, height)
        open_page(browser, f"{served_site}/{page}.html")
        inner = browser.execute_script("return window.innerWidth")
        total = browser.execute_script("return document.documentElement.scrollHeight")
        name = page.split("/")[-1]
        shots = {}
        for where, y in (("top", 0), ("middle", max(0, total // 2 - height // 2))):
            browser.execute_script("window.scrollTo(0, arguments[0]);", y)
            path = folder / f"{name}-{size}-{where}.png"
            browser.save_screenshot(str(path))
            shots[where] = path
    finally:
        browser.set_window_size(old["width"], old["height"])
    assert abs(inner - width) <= 20, f"{page}: the window is {inner} px wide, asked {width}"
    for where, path in shots.items():
        assert _distinct_colours(path) > 8, f"{page} ({size}, {where}): the screenshot is blank"
