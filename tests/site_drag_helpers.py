"""The drag explorer of chapter 2 as the browser tests read it (tests/test_site_drag*.py): the
page, opening it until the explorer is ready (the ``page`` fixture), the page's numbers and
state, and attnlib's answer for the state the page reports."""

from __future__ import annotations

import json
import secrets

import numpy as np
import pytest
from site_helpers import SITE, open_page

PAGE = "book/02_att_svm.html"
EX = "const m = window.attnTokenDrag; const ex = m && Object.values(m.instances)[0];"
WAIT = EX + """
const done = arguments[arguments.length - 1];
(async () => {
  for (let i = 0; i < 500 && !document.querySelector('.attnlib-drag[data-ready=true]'); i++) {
    await new Promise(r => setTimeout(r, 20));
  }
  done(!!document.querySelector('.attnlib-drag[data-ready=true]'));
})();
"""


def open_drag(driver, site, width=1280, height=1000):
    """Chapter 2 loaded afresh at ``width`` x ``height``, its drag explorer started; the console
    entries of the load."""
    driver.set_window_size(width, height)
    entries = open_page(driver, f"{site}/{PAGE}")
    assert driver.execute_async_script(WAIT), "the drag explorer did not start"
    return entries


#: A phone: 390 x 844, two device pixels per px, touch input emulated through the Chrome
#: DevTools Protocol (:func:`emulate`).
PHONE = (390, 844)


def emulate(driver, touch: bool, width: int = PHONE[0], height: int = PHONE[1]):
    """The browser as a ``width`` x ``height`` phone with touch input (``touch``), or as a
    desktop browser (no emulation)."""
    if touch:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 2, "mobile": True})
        driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled",
                               {"enabled": True, "maxTouchPoints": 5})
    else:
        driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": False})
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


#: JavaScript: what the explorer shows (both plots' traces and axes, the readout, the
#: controls' state) and how it is laid out (the plots' and the explorer's sizes, the window's,
#: its device pixels, a touch screen's coarse pointer), to compare the page after a restore
#: with the page as it was loaded
PICTURE = EX + """
const axes = d => ['xaxis', 'yaxis'].map(a => d.layout && d.layout[a] && d.layout[a].range);
const controls = Array.from(ex.root.querySelectorAll('button[aria-pressed], select, input'))
  .map(c => [c.getAttribute('aria-pressed'), c.value, c.disabled]);
const boxes = [ex.root, ex.keysDiv, ex.pathDiv].map(e => [e.offsetWidth, e.offsetHeight]);
return JSON.stringify([ex.keysDiv.data, ex.pathDiv.data, axes(ex.keysDiv), axes(ex.pathDiv),
                       ex.readout.textContent, ex.state, controls, boxes, window.innerWidth,
                       window.innerHeight, window.devicePixelRatio,
                       matchMedia('(pointer: coarse)').matches]);
"""

#: JavaScript: the explorer back to the state it opened in (the chapter's default example at
#: its defaults, as the constructor sets it), the page scrolled to the top, nothing focused
_RESTORE = EX + """
ex.dragging = false;
ex.state = ex.initial(ex.data.defaults.example);
ex.pathRange = null;
ex.syncControls();
ex.render();
if (document.activeElement && document.activeElement !== document.body) {
  document.activeElement.blur();
}
window.scrollTo(0, 0);
"""

_OPEN: dict = {}


def drag_page(driver, site, width=1280, height=1000, touch=False) -> list[dict]:
    """Chapter 2 at ``width`` x ``height`` (on a phone with touch input: ``touch``,
    :func:`emulate`) with its drag explorer started, as loaded: the console entries of its
    load. Loaded once for the tests that follow each other on it: a later call with the same
    screen puts the explorer back in the state it opened in (:data:`_RESTORE`) and keeps the
    page only if what it shows is then exactly what it showed when loaded, laid out alike
    (:data:`PICTURE`: traces, axes, readout, state, controls, sizes), at the same window size,
    in the same document (another test that opened any page, this one included, reloads it);
    else it loads the page again."""
    emulate(driver, touch, width, height)
    screen = (width, height, touch)
    if _OPEN.get("screen") == screen and driver.get_window_size() == _OPEN["size"] \
            and driver.execute_script("return window.__attnDragLoad === arguments[0]",
                                      _OPEN["token"]):
        driver.execute_script(_RESTORE)
        if driver.execute_script(PICTURE) == _OPEN["picture"]:
            return _OPEN["entries"]
    _OPEN.clear()
    entries = open_drag(driver, site, width, height)
    token = secrets.token_hex(8)
    driver.execute_script("window.__attnDragLoad = arguments[0]", token)
    _OPEN.update(screen=screen, size=driver.get_window_size(), token=token, entries=entries,
                 picture=driver.execute_script(PICTURE))
    return entries


@pytest.fixture
def page(browser, served_site):
    """Chapter 2 at 1280 x 1000 with its drag explorer started and in the state it opened in
    (:func:`drag_page`: loaded once, restored between the tests); its console entries."""
    if not (SITE / PAGE).is_file():
        pytest.skip(f"{PAGE} is not built")
    entries = drag_page(browser, served_site)
    yield entries
    browser.set_window_size(1280, 1000)


def drag_data(driver) -> dict:
    """The exported data of the page (attnlib's answers included)."""
    return json.loads(driver.execute_script(
        "return document.querySelector('script[id^=attnlib-drag][id$=-data]').textContent;"))


def numbers(driver) -> dict:
    return driver.execute_script(EX + "return {state: ex.state, res: ex.numbers(), "
                                 "renders: ex.renders};")


def set_state(driver, **patch):
    driver.execute_script(EX + "ex.set({example: arguments[0].example}); ex.set(arguments[0]);",
                          patch)


def compare(js: dict, want: dict, what: str):
    assert js["feasible"] == want["feasible"], what
    assert js["locally_optimal"] == want["locally_optimal"], what
    if want["feasible"]:
        np.testing.assert_allclose(js["p_mm"], want["p_mm"], rtol=1e-6, atol=1e-9, err_msg=what)
        assert js["support"] == want["support"], what
    np.testing.assert_allclose(js["p_end"], want["p_end"], rtol=1e-5, atol=1e-8, err_msg=what)


def attnlib_answer(state, gamma):
    from attnlib.explorers.token_drag import reference

    return reference(state["keys"], gamma, state["alpha"], state["p0"], lr=state["lr"],
                     normalized=state["normalized"], loss=state["loss"],
                     iterations=state["iterations"], eps=state["examples"][
                         state["example"]]["eps"])
