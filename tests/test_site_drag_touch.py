"""The drag explorer of chapter 2 on a phone and from the keyboard (headless Chromium,
network off): a vertical swipe over the plots scrolls the page as over text, a finger on a
token drags it, the hit targets are large enough for a finger, the explorer fits a 1366 x 768
and a 390 x 844 screen, and the arrow keys move the focused token; each moved configuration
against attnlib's own numbers (tests/site_drag_helpers.py).  The tests on one screen follow
each other and share its load of the page (site_drag_helpers.drag_page: the explorer put
back in the state it opened in between two tests); the browser is turned back to a desktop
window at the end of the module.  Screenshots at 1366 x 768 and 390 x 844 go to
``_build/screenshots/``.
"""

from __future__ import annotations

import pytest
from site_drag_helpers import (  # noqa: F401  (page: a pytest fixture)
    EX,
    PAGE,
    PHONE,
    attnlib_answer,
    compare,
    drag_page,
    emulate,
    numbers,
    page,
)
from site_helpers import SCREENSHOTS, SITE, console_errors

pytestmark = pytest.mark.browser


# ------------------------------------------------------------------ phone first (touch, keys)
# A phone: 390 x 844, touch input emulated through the Chrome DevTools Protocol
# (site_drag_helpers.PHONE, emulate). A vertical swipe over the plots must scroll the page as
# over text; only the handles laid over the tokens (and p(0)) take the finger.
_SCROLL = "return (document.scrollingElement || document.documentElement).scrollTop;"


@pytest.fixture(scope="module", autouse=True)
def _desktop_at_the_end(chromium):
    """The session's browser back to a desktop window of 1280 x 1000 after this module (its
    tests leave the screen they need to the next, drag_page)."""
    yield
    emulate(chromium, False)
    chromium.set_window_size(1280, 1000)


@pytest.fixture
def phone(browser, served_site):
    if not (SITE / PAGE).is_file():
        pytest.skip(f"{PAGE} is not built")
    drag_page(browser, served_site, *PHONE, touch=True)
    return browser


def _swipe(driver, x, y, dy, steps: int = 15) -> float:
    """A one-finger swipe from (x, y) (viewport pixels) by dy pixels (negative: the finger
    moves up, the page scrolls down), as touch events through the Chrome DevTools Protocol
    (the browser applies touch-action to them as to a real finger); returns how far the page
    scrolled."""
    touch = "Input.dispatchTouchEvent"
    before = driver.execute_script(_SCROLL)
    driver.execute_cdp_cmd(touch, {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
    for k in range(1, steps + 1):
        driver.execute_cdp_cmd(touch, {"type": "touchMove",
                                       "touchPoints": [{"x": x, "y": y + dy * k / steps}]})
    driver.execute_cdp_cmd(touch, {"type": "touchEnd", "touchPoints": []})
    driver.execute_async_script("const d = arguments[0]; setTimeout(() => requestAnimationFrame("
                                "() => d(true)), 400);")  # the fling, if any, settles
    return driver.execute_script(_SCROLL) - before


def _place(driver, element_js: str, at: float = 0.75):
    """Scroll so that the element's top is at ``at`` of the viewport's height; its box."""
    return driver.execute_script(EX + f"const e = {element_js};" + """
        const top = e.getBoundingClientRect().top + window.scrollY;
        window.scrollTo(0, top - arguments[0] * window.innerHeight);
        const b = e.getBoundingClientRect();
        return {left: b.left, top: b.top, width: b.width, height: b.height,
                vh: window.innerHeight};""", at)


def _free_point(driver, div: str):
    """A point of the plot ``div`` (viewport pixels) at least 40 px from every token and p(0):
    where a finger that means to scroll lands."""
    return driver.execute_script(EX + f"const d = ex.{div};" + """
        const b = d.getBoundingClientRect();
        const pts = ex.state.keys.flat().concat([ex.state.p0]).map(p => ex.toPixel(d, p));
        let best = null;
        for (let y = 0.3; y <= 0.7; y += 0.05) for (let x = 0.2; x <= 0.8; x += 0.05) {
          const px = [x * b.width, y * b.height];
          const far = Math.min(...pts.map(q => Math.hypot(q[0] - px[0], q[1] - px[1])));
          if (far >= 40 && (best === null || y < best[1])) best = [px[0], px[1], far];
        }
        return best && [b.left + best[0], b.top + best[1]];""")


def test_vertical_swipe_over_the_plots_scrolls_the_page(phone):
    """A 300 px swipe scrolls the page at least 240 px over either plot, as over text."""
    box = _place(phone, "ex.root.previousElementSibling || ex.root.parentNode", 0.7)
    text = _swipe(phone, box["left"] + 0.5 * box["width"], 0.7 * box["vh"], -300)
    assert text > 150, f"the swipe over text scrolled {text} px"
    for div in ("keysDiv", "pathDiv"):
        _place(phone, f"ex.{div}", 0.35)
        x, y = _free_point(phone, div)
        moved = _swipe(phone, x, y, -300)
        print(f"swipe over {div}: {moved} px (over text: {text} px)")
        # the page follows the finger (300 px; a fling may add some, over text as over plots)
        assert moved >= 240, \
            f"a vertical swipe over {div} scrolled {moved} px, over text {text} px"


def test_a_finger_on_a_token_drags_it(phone):
    """A swipe that starts on a token moves the token, not the page."""
    phone.find_element("css selector",
                       '.ad-control[data-control=example] button[data-value=\'"e1-global"\']'
                       ).click()
    box = _place(phone, "ex.keysDiv", 0.3)
    before = numbers(phone)
    x3 = before["state"]["keys"][0][2]
    px = phone.execute_script(EX + "return ex.toPixel(ex.keysDiv, arguments[0]);", x3)
    scrolled = _swipe(phone, box["left"] + px[0], box["top"] + px[1], 60)  # finger down
    after = numbers(phone)
    moved = after["state"]["keys"][0][2]
    assert moved[1] < x3[1] - 0.1, (x3, moved)  # dragged down the plane
    assert abs(scrolled) <= 2, f"the page scrolled {scrolled} px under a token drag"
    gamma = after["state"]["examples"]["e1-global"]["gamma"]
    compare(after["res"], attnlib_answer(after["state"], gamma), f"x3 dragged to {moved}")


def _handles(driver):
    return driver.execute_script(EX + """
        return Array.from(ex.root.querySelectorAll('[data-handle]')).map(h => {
          const b = h.getBoundingClientRect();
          return {id: h.dataset.handle, w: b.width, h: b.height, x: b.left + b.width / 2,
                  y: b.top + b.height / 2, label: h.getAttribute('aria-label'),
                  tab: h.tabIndex, touch: getComputedStyle(h).touchAction};
        });""")


def _token_centres(driver):
    return driver.execute_script(EX + """
        const at = (d, p) => { const b = d.getBoundingClientRect(), q = ex.toPixel(d, p);
                               return [b.left + q[0], b.top + q[1]]; };
        const out = {};
        ex.state.keys.forEach((K, i) => K.forEach((k, t) => {
          out[i + ',' + t] = at(ex.keysDiv, k); }));
        out.p0 = at(ex.pathDiv, ex.state.p0);
        return out;""")


@pytest.mark.parametrize("touch", [True, False])  # (the phone first: the swipes' screen)
def test_hit_targets_are_large_enough(browser, served_site, touch):
    """Every token and p(0) has a focusable handle centred on it, at least 24 x 24 px (at
    least 40 px on a touch screen), that alone takes the pointer (touch-action: none) while
    the plots let the page scroll (touch-action: pan-y)."""
    if not (SITE / PAGE).is_file():
        pytest.skip(f"{PAGE} is not built")
    drag_page(browser, served_site, *(PHONE if touch else (1366, 768)), touch=touch)
    handles, centres = _handles(browser), _token_centres(browser)
    plots = browser.execute_script(EX + "return [ex.keysDiv, ex.pathDiv].map("
                                   "d => getComputedStyle(d).touchAction);")
    coarse = browser.execute_script("return matchMedia('(pointer: coarse)').matches;")
    print(f"touch={touch} (pointer: coarse {coarse}): handles "
          f"{sorted({(h['w'], h['h']) for h in handles})}, plots {plots}")
    assert sorted(h["id"] for h in handles) == sorted(centres), (handles, centres)
    least = 40 if coarse else 24
    for h in handles:
        assert min(h["w"], h["h"]) >= least, h
        assert abs(h["x"] - centres[h["id"]][0]) <= 1 and abs(h["y"] - centres[h["id"]][1]) <= 1
        assert h["tab"] == 0 and h["label"] and "arrow keys" in h["label"], h
        assert h["touch"] == "none", h
    assert all("pan-y" in t for t in plots), plots


@pytest.mark.parametrize("width, height", [(1366, 768), (390, 844)])
def test_fits_the_screen(browser, served_site, width, height):
    if not (SITE / PAGE).is_file():
        pytest.skip(f"{PAGE} is not built")
    entries = drag_page(browser, served_site, width, height)
    assert not console_errors(entries)
    # a selection of chapter 3 on E2: a token per input, feasible, not locally optimal
    browser.execute_script(EX + "ex.set({alpha: [0, 2, 0]});")
    info = browser.execute_script(EX + """
        ex.root.scrollIntoView({block: 'start'});
        const vw = document.documentElement.clientWidth;
        const boxes = [ex.root, ex.keysDiv, ex.pathDiv, ex.controls].map(
          e => e.getBoundingClientRect());
        return {vw: vw, page: document.documentElement.scrollWidth,
                right: Math.max(...boxes.map(b => b.right)),
                left: Math.min(...boxes.map(b => b.left)),
                inner: ex.root.scrollWidth - ex.root.clientWidth,
                font: parseFloat(getComputedStyle(ex.readout).fontSize)};""")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / f"drag_explorer_{width}x{height}.png"))
    assert info["page"] <= info["vw"] + 1, info
    assert info["left"] >= -1 and info["right"] <= info["vw"] + 1, info
    assert info["inner"] <= 1, info
    assert info["font"] >= 14, info  # readable numbers


def test_keyboard_moves_a_token(page, browser):  # noqa: F811 (the page fixture)
    """Tab reaches the handles; the arrow keys move the focused token (not the page) and the
    picture and its label follow."""
    from selenium.webdriver.common.keys import Keys

    browser.find_element("css selector",
                         '.ad-control[data-control=example] button[data-value=\'"e1-global"\']'
                         ).click()
    handle = browser.find_element("css selector", ".attnlib-drag [data-handle='0,2']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", handle)
    before, label = numbers(browser), handle.get_attribute("aria-label")
    y0 = browser.execute_script(_SCROLL)
    handle.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_DOWN)
    after = numbers(browser)
    k0, k1 = before["state"]["keys"][0][2], after["state"]["keys"][0][2]
    assert k1[0] > k0[0] and k1[1] < k0[1], (k0, k1)
    assert after["state"]["keys"][0][:2] == before["state"]["keys"][0][:2]  # only x3
    assert browser.execute_script(_SCROLL) == y0  # the arrows did not scroll the page
    assert browser.execute_script("return document.activeElement.dataset.handle") == "0,2"
    assert handle.get_attribute("aria-label") != label
    gamma = after["state"]["examples"]["e1-global"]["gamma"]
    compare(after["res"], attnlib_answer(after["state"], gamma), f"x3 moved by keys to {k1}")
    # Tab order: the handles are reachable from the keyboard
    handle.send_keys(Keys.TAB)
    assert browser.execute_script("return document.activeElement.dataset.handle") is not None


