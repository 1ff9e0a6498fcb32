"""The drag explorer of chapter 2 in a real browser (headless Chromium, network off).

The page computes p^mm, its support tokens and the gradient-descent path of p in JavaScript
(scripts/js/token-drag.js, drawn with plotly.js); these tests read those numbers back and
compare them with attnlib's own:

- the answers the build exported (``attnlib.explorers.token_drag``: ``prompt_svm``,
  ``support_tokens``, ``train``) for the chapter's default and the moved configurations;
- a token and the start p(0) dragged with the mouse (Selenium ActionChains), against attnlib
  computed here, in the test, for the coordinates the page then reports;
- a token of each input chosen in the "p^mm selects" menus (chapter 3's selections of E2:
  feasible but not locally optimal, infeasible), with the readout's words;
- the dotted margin lines of every input, read from the plot: input i's two lines are the
  levels k.p^mm = k_{i alpha_i}.p^mm and one less, attnlib's p^mm, its support tokens on
  the second.

Tolerances: p^mm relative 1e-6 (the solver's certificate is tighter); the GD end point
relative 1e-5 (late normalised steps divide a gradient of the size of eps by its norm, so
rounding moves p(200) by about 1e-7 between two correct implementations). Every control must
change the figure. On a phone (touch, the keyboard) and the screen sizes it fits:
test_site_drag_touch.py; the page's helpers: tests/site_drag_helpers.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from site_drag_helpers import (  # noqa: F401  (page: a pytest fixture)
    EX,
    PAGE,
    attnlib_answer,
    compare,
    drag_data,
    numbers,
    page,
    set_state,
)
from site_helpers import (  # noqa: F401  (pytest fixtures)
    SITE,
    console_errors,
    page_paths,
)

pytestmark = pytest.mark.browser

# what the reader sees: both plots' traces, the readout and the controls' state
_PICTURE = EX + """
return JSON.stringify([ex.keysDiv.data, ex.pathDiv.data, ex.readout.textContent]);
"""


def _margins(driver, keys, alpha, want):
    """The margin lines in the key plot are, for every input i, the level lines of attnlib's
    p^mm through its selected key and one below (where its support tokens lie); none when
    the selection is infeasible."""
    traces = driver.execute_script(EX + "return ex.keysDiv.data.filter(t => t.meta && "
                                   "t.meta.margin !== undefined).map(t => [t.meta, t.x, t.y]);")
    if not want["feasible"]:
        assert traces == [], "margin lines drawn for an infeasible selection"
        return
    p = np.asarray(want["p_mm"])
    K = np.asarray(keys)
    assert sorted((m["margin"], m["level"]) for m, _, _ in traces) == sorted(
        (i, lv) for i in range(len(K)) for lv in ("selected", "support")), traces
    for meta, x, y in traces:
        i = meta["margin"]
        level = K[i, alpha[i]] @ p - (meta["level"] == "support")
        on = np.stack([x, y], 1) @ p  # every point of the drawn line, projected on p^mm
        np.testing.assert_allclose(on, level, atol=1e-6, err_msg=f"input {i + 1} {meta}")
        if meta["level"] == "support":
            for t in np.flatnonzero(want["support"][i]):  # the support tokens on it
                np.testing.assert_allclose(K[i, t] @ p, on[0], atol=1e-6)
    names = driver.execute_script(EX + "return ex.keysDiv.data.filter(t => t.name === "
                                  "'margin' && t.showlegend !== false).length;")
    assert names == 1  # one legend entry, "margin"


def test_plotly_is_loaded_by_chapter_2_only(page, browser):  # noqa: F811 (the page fixture)
    assert not console_errors(page)
    assert browser.execute_script("return typeof window.Plotly.react") == "function"
    fallback = browser.find_elements("css selector", ".attnlib-drag-fallback")
    assert not any(f.is_displayed() for f in fallback)  # replaced by the explorer
    others = [p for p in page_paths() if p != PAGE
              and ("plotly" in (SITE / p).read_text(encoding="utf-8")
                   or "token-drag.js" in (SITE / p).read_text(encoding="utf-8"))]
    assert not others, f"pages other than {PAGE} load plotly: {others}"
    assert (SITE / "plotly" / "plotly-basic.min.js").is_file()
    assert (SITE / "explorers" / "token-drag.js").is_file()


def test_opens_on_the_chapters_default(page, browser):  # noqa: F811 (the page fixture)
    got = numbers(browser)
    st, data = got["state"], drag_data(browser)
    assert st["example"] == "e2" and st["lr"] == 0.1 and st["normalized"] is True
    assert st["loss"] == "logistic" and st["iterations"] == 200
    default = next(r for r in data["references"] if r["example"] == "e2")
    compare(got["res"], default["attnlib"], "default")
    text = browser.find_element("css selector", ".attnlib-drag .ad-readout").text
    assert "After 200 steps" in text and "support tokens" in text


def test_browser_numbers_match_attnlib(page, browser):  # noqa: F811 (the page fixture)
    """Every configuration the build exported (default of each example and the moves)."""
    data = drag_data(browser)
    assert len(data["references"]) >= 8
    for r in data["references"]:
        set_state(browser, example=r["example"], keys=r["keys"], alpha=r["alpha"], p0=r["p0"],
             lr=r["lr"], normalized=r["normalized"], loss=r["loss"],
             iterations=r["iterations"])
        got = numbers(browser)
        assert got["state"]["keys"] == r["keys"]
        compare(got["res"], r["attnlib"], json.dumps({k: r[k] for k in (
            "example", "alpha", "p0", "lr", "normalized", "loss", "iterations")}))
        _margins(browser, r["keys"], r["alpha"], r["attnlib"])


def test_choose_each_inputs_token(page, browser):  # noqa: F811 (the page fixture)
    """E2 (three inputs): the menus choose a token per input; the page's p^mm, support tokens,
    local optimality, infeasibility and margin lines are attnlib's for that selection."""
    from selenium.webdriver.support.ui import Select

    data = drag_data(browser)
    opt = data["examples"]["e2"]["optimal"]
    refs = [r for r in data["references"] if r["example"] == "e2" and r["alpha"] != opt
            and r["keys"] == data["examples"]["e2"]["keys"]]
    kinds = {(r["attnlib"]["feasible"], r["attnlib"]["locally_optimal"]) for r in refs}
    assert {(True, False), (False, False)} <= kinds, kinds
    browser.find_element("css selector",
                         '.ad-control[data-control=example] button[data-value=\'"e2"\']').click()
    for r in refs:
        browser.find_element("css selector", ".attnlib-drag button[data-control=reset]").click()
        menus = browser.find_elements("css selector",
                                      ".attnlib-drag .ad-control[data-control=alpha] select")
        assert len(menus) == 3 and all(m.is_enabled() and m.is_displayed() for m in menus)
        before = numbers(browser)["renders"]
        for menu, a in zip(menus, r["alpha"]):
            Select(menu).select_by_value(str(a))
        got = numbers(browser)
        assert got["state"]["alpha"] == r["alpha"] and got["renders"] > before
        what = f"e2 selecting {r['alpha']}"
        # the exported GD settings are the default's, so the whole readout is comparable
        compare(got["res"], r["attnlib"], what)
        _margins(browser, r["keys"], r["alpha"], r["attnlib"])
        text = browser.find_element("css selector", ".attnlib-drag .ad-readout").text
        names = ", ".join(f"x{i + 1},{a + 1}" for i, a in enumerate(r["alpha"]))
        if r["attnlib"]["feasible"]:
            assert f"selecting {names}" in text and "locally optimal: no" in text, text
        else:
            assert "infeasible" in text and "Locally optimal: no" in text, text
            alone = [i for i, a in enumerate(r["alpha"])
                     if not _attnlib_alone(r["keys"], data["examples"]["e2"]["gamma"], i, a)]
            if alone:  # the page names the token that no direction separates
                assert all(f"x{i + 1},{r['alpha'][i] + 1} ahead" in text
                           or f"x{i + 1},{r['alpha'][i] + 1}," in text for i in alone), text
            else:
                assert "no single direction" in text, text


def _attnlib_alone(keys, gamma, i, a) -> bool:
    """Whether attnlib finds input i's token a separable from its input on its own."""
    from attnlib.explorers.token_drag import reference

    return reference([keys[i]], [gamma[i]], [a], (0, 0), iterations=0)["feasible"]


def _drag(browser, div: str, point, by):
    """Drag with the mouse from a point of the plane (data coordinates) by ``by`` pixels."""
    from selenium.webdriver.common.action_chains import ActionChains

    el = browser.execute_script(EX + f"return ex.{div};")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", el)
    px = browser.execute_script(EX + f"return ex.toPixel(ex.{div}, arguments[0]);", point)
    size = el.size
    chain = ActionChains(browser).move_to_element_with_offset(
        el, int(round(px[0] - size["width"] / 2)), int(round(px[1] - size["height"] / 2)))
    chain.click_and_hold()
    for _ in range(4):  # several moves: the picture follows the pointer, not only the drop
        chain.move_by_offset(by[0] // 4, by[1] // 4)
    chain.release().perform()


def test_drag_a_token_with_the_mouse(page, browser):  # noqa: F811 (the page fixture)
    browser.find_element("css selector",
                         '.ad-control[data-control=example] button[data-value=\'"e1-global"\']'
                         ).click()
    before = numbers(browser)
    x3 = before["state"]["keys"][0][2]
    _drag(browser, "keysDiv", x3, (60, 48))
    after = numbers(browser)
    moved = after["state"]["keys"][0][2]
    assert moved[0] > x3[0] + 0.1 and moved[1] < x3[1] - 0.1, (x3, moved)  # right and down
    assert after["state"]["keys"][0][:2] == before["state"]["keys"][0][:2]  # only x3
    assert after["renders"] - before["renders"] >= 3  # live while dragging
    gamma = after["state"]["examples"]["e1-global"]["gamma"]
    compare(after["res"], attnlib_answer(after["state"], gamma), f"x3 dragged to {moved}")
    assert after["res"]["p_mm"] != before["res"]["p_mm"]


def test_drag_the_start_with_the_mouse(page, browser):  # noqa: F811 (the page fixture)
    browser.find_element("css selector",
                         '.ad-control[data-control=example] button[data-value=\'"e1-local"\']'
                         ).click()
    before = numbers(browser)
    _drag(browser, "pathDiv", before["state"]["p0"], (0, 120))  # down the vertical axis
    after = numbers(browser)
    assert after["state"]["p0"][1] < before["state"]["p0"][1] - 1, after["state"]["p0"]
    gamma = after["state"]["examples"]["e1-local"]["gamma"]
    compare(after["res"], attnlib_answer(after["state"], gamma), f"p(0) = {after['state']['p0']}")
    assert after["res"]["p_end"] != before["res"]["p_end"]


def test_every_control_changes_the_picture(page, browser):  # noqa: F811 (the page fixture)
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    def picture():
        return browser.execute_script(_PICTURE)

    def changes(what, act):
        old = picture()
        act()
        assert picture() != old, f"the control {what} does not change the picture"

    css = ".attnlib-drag .ad-control[data-control={}] button[aria-pressed=false]"
    for name in ("example", "lr", "normalized", "loss"):
        n = len(browser.find_elements("css selector", css.format(name)))
        assert n >= 1, name
        for k in range(n):
            button = browser.find_elements("css selector", css.format(name))[k]
            value = button.get_attribute("data-value")
            changes(f"{name} = {value}", button.click)
    browser.find_element("css selector", css.format("example").replace(
        "[aria-pressed=false]", "[data-value='\"e1-global\"']")).click()
    select = Select(browser.find_element("css selector", ".attnlib-drag select"))
    changes("selected token x2", lambda: select.select_by_value("1"))
    slider = browser.find_element("css selector", ".attnlib-drag input[type=range]")
    changes("iterations", lambda: slider.send_keys(Keys.ARROW_LEFT * 3))
    assert numbers(browser)["state"]["iterations"] == 170  # step 10
    reset = browser.find_element("css selector", ".attnlib-drag button[data-control=reset]")
    changes("reset", reset.click)


_DRAG_FOR = EX + """
const [seconds, done] = [arguments[0], arguments[arguments.length - 1]];
const h = ex.root.querySelector("[data-handle='0,0']");
const b = h.getBoundingClientRect(), x = b.left + b.width / 2, y = b.top + b.height / 2;
const fire = (type, dx, dy) => h.dispatchEvent(new PointerEvent(type, {pointerId: 1,
  pointerType: 'mouse', isPrimary: true, bubbles: true, cancelable: true, button: 0,
  buttons: type === 'pointerup' ? 0 : 1, clientX: x + dx, clientY: y + dy}));
let frames = 0, counting = true;
(function f() { if (counting) { frames++; requestAnimationFrame(f); } })();
fire('pointerdown', 0, 0);
const r0 = ex.renders, d0 = ex.drawMs.length, t0 = performance.now();
let moves = 0;
const step = () => {  // pointer moves as fast as the event loop takes them (~4 ms apart)
  const t = performance.now() - t0;
  if (t < seconds * 1000) {
    moves++;
    fire('pointermove', 30 * Math.sin(t / 150), 30 * Math.cos(t / 150));
    setTimeout(step, 0);
    return;
  }
  const r1 = ex.renders, t1 = performance.now();
  counting = false;
  fire('pointerup', 0, 0);
  const ms = ex.drawMs.slice(d0).sort((a, b) => a - b);
  done({moves: moves, drawings: r1 - r0, frames: frames, seconds: (t1 - t0) / 1000,
        median_ms: ms.length ? ms[Math.floor(ms.length / 2)] : null});
};
setTimeout(step, 0);
"""


def test_drag_redraws_at_least_30_frames_per_second(page, browser):  # noqa: F811 (the page fixture)
    """A drag of 2 s (pointer moves every few milliseconds): the page draws at most once per
    animation frame (requestAnimationFrame), and it draws at least 30 times a second where the
    browser gives 60 animation frames a second (a machine loaded by other jobs gives fewer: then
    at least every other frame). The median time of one drawing is printed."""
    browser.find_element("css selector",
                         '.ad-control[data-control=example] button[data-value=\'"e2"\']').click()
    handle = browser.find_element("css selector", ".attnlib-drag [data-handle='0,0']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", handle)
    m = browser.execute_async_script(_DRAG_FOR, 2.0)
    fps, raf = m["drawings"] / m["seconds"], m["frames"] / m["seconds"]
    print(f"drag: {m['moves']} pointer moves, {m['drawings']} drawings, {m['frames']} animation "
          f"frames in {m['seconds']:.2f} s: {fps:.1f} drawings per second (the browser's frame "
          f"rate {raf:.1f}), median drawing {m['median_ms']:.1f} ms")
    assert m["moves"] >= m["drawings"], m  # moves between two frames make one drawing
    assert m["drawings"] <= m["frames"] + 2, f"more drawings than animation frames: {m}"
    assert fps >= min(30, 0.5 * raf), f"{fps:.1f} drawings per second, frame rate {raf:.1f}"
