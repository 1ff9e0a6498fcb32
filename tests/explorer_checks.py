"""Drive a static explorer (``attnlib.explorers.StaticExplorer``) in a real browser, as a reader.

:func:`check_explorer` is used by tests/test_site_explorers.py (every explorer of the built
book) and tests/test_explorers_static.py (a toy page): the page must open on the explorer's
default frame, and every control must show, for each of its values, exactly the frame
precomputed for that setting, with the value written beside the control; at least one value
of each control must change the figure (a control that changes nothing fails).
"""

from __future__ import annotations

import json
import math

from attnlib.explorers import frame_key

PNG = "data:image/png;base64,"


def _srcs(driver, imgs):
    # (one round trip for all panels)
    return driver.execute_script("return arguments[0].map(i => i.getAttribute('src') || '')",
                                 list(imgs))


#: JavaScript: what the explorer shows after a move, in one round trip: every panel's image
#: and the value written beside the control ``arguments[1]`` (as Selenium's ``.text`` reads it)
_SHOWN = """
const [imgs, value] = [arguments[0], arguments[1]];
return [imgs.map(i => i.getAttribute('src') || ''), value.innerText.trim()];
"""


def _set(driver, control, value: int, start: int):
    """Move one control to the value index ``value`` as a reader would (keys or a click)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    ranges = control.find_elements(By.CSS_SELECTOR, "input[type=range]")
    if ranges:
        r = ranges[0]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'}); "
                              "arguments[0].focus()", r)
        r.send_keys(Keys.HOME, *[Keys.ARROW_RIGHT] * value)  # (typed in one round trip)
        return
    button = control.find_elements(By.TAG_NAME, "button")[value]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()


def check_explorer(driver, root, tag: str) -> dict:
    """Exercise every control of the static explorer ``root`` (a ``div.attnlib-explorer``).

    Asserts what the module docstring says; returns ``{control name: number of values that
    changed the figure}``. (Each value costs two round trips: the move, typed or clicked, and
    one script reading every panel and the value's label; a slider walks its values one right
    arrow at a time, as a reader holding the key does.)
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    data = json.loads(driver.execute_script(
        "return arguments[0].querySelector('script.attnlib-data').textContent", root))
    sizes, start = tuple(data["sizes"]), tuple(data["start"])
    imgs = root.find_elements(By.CSS_SELECTOR, "img.attnlib-panel")
    assert imgs, f"{tag}: no figure"

    def expected(idx):
        return [PNG + data["images"][j] for j in data["frames"][frame_key(tuple(idx), sizes)]]

    # it opens on the default: the frame of the declared defaults, shown before any move
    assert root.get_attribute("data-frame") == root.get_attribute("data-default-frame") == \
        str(frame_key(start, sizes)), f"{tag}: does not open on the default frame"
    default = expected(start)
    assert _srcs(driver, imgs) == default, f"{tag}: the images shown are not the default frame"
    controls = root.find_elements(By.CSS_SELECTOR, "div.attnlib-control")
    varying = [i for i, n in enumerate(sizes) if n > 1]
    assert sorted(int(c.get_attribute("data-index")) for c in controls) == varying, \
        f"{tag}: a page control for every control with several values"
    changed = {}
    for c in controls:
        i, name = int(c.get_attribute("data-index")), c.get_attribute("data-control")
        value = c.find_element(By.CSS_SELECTOR, ".attnlib-value")
        assert value.text == data["labels"][i][start[i]], f"{tag}/{name}: default value label"
        changed[name] = 0
        slider = c.find_elements(By.CSS_SELECTOR, "input[type=range]")
        for v in range(sizes[i]):
            if slider and v > 0:  # focused, one value below: one right arrow on
                slider[0].send_keys(Keys.ARROW_RIGHT)
            else:  # the first value (Home), a button
                _set(driver, c, v, start[i])
            idx = list(start)
            idx[i] = v
            now, label = driver.execute_script(_SHOWN, list(imgs), value)
            assert now == expected(idx), f"{tag}/{name}: value {v} shows another frame"
            assert label == data["labels"][i][v], f"{tag}/{name}: label not updated"
            changed[name] += now != default
        assert changed[name] >= 1, f"{tag}: moving {name!r} does not change the figure"
        _set(driver, c, start[i], start[i])
        assert _srcs(driver, imgs) == default, f"{tag}/{name}: back to the default"
    return changed


def check_fits(driver, root, tag: str, width: int):
    """At a viewport ``width`` px wide the explorer does not overflow, and below 640 px its
    panels stack, each as wide as the figure (readable on a phone)."""
    from selenium.webdriver.common.by import By

    over = driver.execute_script(
        "var r=arguments[0]; return [r.scrollWidth, r.clientWidth, "
        "r.getBoundingClientRect().right, window.innerWidth]", root)
    assert over[0] <= over[1] + 1 and over[2] <= over[3] + 1, f"{tag}: overflows {over}"
    fig = root.find_element(By.CSS_SELECTOR, ".attnlib-figure")
    full = fig.size["width"]
    for img in root.find_elements(By.CSS_SELECTOR, "img.attnlib-panel"):
        w = img.size["width"]
        assert w <= full + 1, f"{tag}: a panel wider than the figure"
        if width < 640:
            assert w >= full - 2, f"{tag}: panels do not stack on a {width} px screen"


def check_play(driver, root, tag: str, timeout: float = 20.0) -> list[int]:
    """Press the play button of ``root`` (a click) and follow it to the end: the frame must
    advance along the played control only, stop at its last value (the button back to
    "not pressed"), and the keyboard (Space on the focused button) must start it again from
    the first value. Returns the frames shown during the first play, in order."""
    import time

    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    data = json.loads(driver.execute_script(
        "return arguments[0].querySelector('script.attnlib-data').textContent", root))
    sizes = tuple(data["sizes"])
    button = root.find_element(By.CSS_SELECTOR, "button.attnlib-play")
    i = int(button.get_attribute("data-index"))
    slider = root.find_element(By.CSS_SELECTOR, f'.attnlib-control[data-index="{i}"] input')
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'}); "
                          "arguments[0].focus()", slider)
    slider.send_keys(Keys.HOME)  # from the first value
    first = int(root.get_attribute("data-frame"))
    stride = math.prod(sizes[i + 1:])
    # every frame shown is recorded by the page itself (no frame lost between two polls)
    driver.execute_script(
        "var r=arguments[0];r._shown=[+r.getAttribute('data-frame')];"
        "new MutationObserver(function(){r._shown.push(+r.getAttribute('data-frame'));})"
        ".observe(r,{attributes:true,attributeFilter:['data-frame']});", root)
    t0 = time.time()
    button.click()
    assert button.get_attribute("aria-pressed") == "true", f"{tag}: play did not start"
    while time.time() - t0 < timeout and button.get_attribute("aria-pressed") == "true":
        time.sleep(0.05)
    shown = driver.execute_script("return arguments[0]._shown", root)
    seen = [k for j, k in enumerate(shown) if j == 0 or k != shown[j - 1]]
    assert len(seen) > 1, f"{tag}: play did not advance the frame"
    assert seen[-1] == first + (sizes[i] - 1) * stride, f"{tag}: play did not reach the end"
    assert button.get_attribute("aria-pressed") == "false", f"{tag}: play did not stop"
    assert all(b - a == stride for a, b in zip(seen, seen[1:])), f"{tag}: {seen}"
    driver.execute_script("arguments[0].focus()", button)
    button.send_keys(Keys.SPACE)  # the keyboard: from the end it starts again at the first
    assert button.get_attribute("aria-pressed") == "true", f"{tag}: Space did not play"
    button.send_keys(Keys.SPACE)  # and pauses
    assert button.get_attribute("aria-pressed") == "false", f"{tag}: Space did not pause"
    assert int(root.get_attribute("data-frame")) < seen[-1], f"{tag}: not restarted"
    return seen
