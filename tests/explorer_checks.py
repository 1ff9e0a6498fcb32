"""Drive a static explorer (``attnlib.explorers.StaticExplorer``) in a real browser, as a reader.

:func:`check_explorer` is used by tests/test_site_explorers.py (every explorer of the built
book) and tests/test_explorers_static.py (a toy page): the page must open on the explorer's
default frame, and every control must show, for each of its values, exactly the frame
precomputed for that setting, with the value written beside the control; at least one value
of each control must change the figure (a control that changes nothing fails).

What the page shows after each key press or click is recorded by the page itself (a listener
on the explorer, :data:`_RECORD`), so that a control's whole walk costs a few WebDriver round
trips, not two per value; an image is reported by its index in the explorer's data (not as
its base64 text), and compared in Python with the frame that :func:`attnlib.explorers.frame_key`
gives for the setting.
"""

from __future__ import annotations

import math

from attnlib.explorers import frame_key

#: JavaScript: the explorer ``arguments[0]``'s data without its images (for each image the
#: index of the image it equals, the last of equal ones: what ``shown()`` reports), its frame
#: attributes, what it shows, and each page control (its element, slider, value buttons);
#: installs ``root._attn.shown()`` (the panels' images, as such indices; the text of a src
#: that is none of the explorer's images) and a recorder of what the explorer shows after
#: every key released and every click inside it (``root._attn.rec``: [event type, images,
#: the value written beside the control that took the event]).
_RECORD = """
const root = arguments[0];
const D = JSON.parse(root.querySelector('script.attnlib-data').textContent);
const PNG = 'data:image/png;base64,';
const index = new Map();
D.images.forEach((s, j) => index.set(PNG + s, j));
const imgs = Array.from(root.querySelectorAll('img.attnlib-panel'));
const shown = () => imgs.map(i => {
  const s = i.getAttribute('src') || '';
  return index.has(s) ? index.get(s) : 'not an image of the explorer: ' + s.slice(0, 40);
});
if (root._attn) {
  root.removeEventListener('keyup', root._attn.record);
  root.removeEventListener('click', root._attn.record);
}
const rec = [];
const record = e => {  // (on the explorer: after the control's own listener has run)
  const c = e.target.closest && e.target.closest('.attnlib-control');
  const v = c && c.querySelector('.attnlib-value');
  rec.push([e.type, shown(), v ? v.innerText.trim() : null]);
};
root._attn = {shown, rec, record};
root.addEventListener('keyup', record);
root.addEventListener('click', record);
return {
  sizes: D.sizes, start: D.start, labels: D.labels, frames: D.frames,
  canon: D.images.map(s => index.get(PNG + s)),
  frame: root.getAttribute('data-frame'), default_frame: root.getAttribute('data-default-frame'),
  shown: shown(),
  controls: Array.from(root.querySelectorAll('div.attnlib-control')).map(c => ({
    index: +c.getAttribute('data-index'), name: c.getAttribute('data-control'),
    label: c.querySelector('.attnlib-value').innerText.trim(),
    slider: c.querySelector('input[type=range]'),
    buttons: Array.from(c.querySelectorAll('button:not(.attnlib-play)'))})),
};
"""

#: JavaScript: the control ``arguments[1]`` in view (its slider focused, if any), the
#: recorder of ``arguments[0]`` emptied
_READY = """
const [root, el, slider] = [arguments[0], arguments[1], arguments[2]];
el.scrollIntoView({block: 'center'});
if (slider) slider.focus();
root._attn.rec.length = 0;
"""


def check_explorer(driver, root, tag: str) -> dict:
    """Exercise every control of the static explorer ``root`` (a ``div.attnlib-explorer``).

    Asserts what the module docstring says; returns ``{control name: number of values that
    changed the figure}``. A slider walks its values one right arrow at a time, as a reader
    holding the key does (Home first, then back to its default: all typed in one round trip);
    a button is clicked. What each value showed is read back from the page's record at the
    end of the control's walk."""
    from selenium.webdriver.common.keys import Keys

    data = driver.execute_script(_RECORD, root)
    sizes, start = tuple(data["sizes"]), tuple(data["start"])
    canon = data["canon"]
    assert data["shown"], f"{tag}: no figure"

    def expected(idx):
        return [canon[j] for j in data["frames"][frame_key(tuple(idx), sizes)]]

    # it opens on the default: the frame of the declared defaults, shown before any move
    assert data["frame"] == data["default_frame"] == str(frame_key(start, sizes)), \
        f"{tag}: does not open on the default frame"
    default = expected(start)
    assert data["shown"] == default, f"{tag}: the images shown are not the default frame"
    controls = data["controls"]
    varying = [i for i, n in enumerate(sizes) if n > 1]
    assert sorted(c["index"] for c in controls) == varying, \
        f"{tag}: a page control for every control with several values"
    changed = {}
    for c in controls:
        i, name = c["index"], c["name"]
        assert c["label"] == data["labels"][i][start[i]], f"{tag}/{name}: default value label"
        changed[name] = 0
        slider = c["slider"]
        driver.execute_script(_READY, root, slider or c["buttons"][0], slider)
        if slider:  # Home, one right arrow per further value, back to the default
            slider.send_keys(Keys.HOME, *[Keys.ARROW_RIGHT] * (sizes[i] - 1),
                             Keys.HOME, *[Keys.ARROW_RIGHT] * start[i])
            moves = sizes[i] + 1 + start[i]
        else:  # each button, then the default's
            for v in range(sizes[i]):
                c["buttons"][v].click()
            c["buttons"][start[i]].click()
            moves = sizes[i] + 1
        rec = driver.execute_script("return arguments[0]._attn.rec", root)
        assert len(rec) == moves, f"{tag}/{name}: {len(rec)} of {moves} moves seen by the page"
        for v in range(sizes[i]):
            idx = list(start)
            idx[i] = v
            _, now, label = rec[v]
            assert now == expected(idx), f"{tag}/{name}: value {v} shows another frame"
            assert label == data["labels"][i][v], f"{tag}/{name}: label not updated"
            changed[name] += now != default
        assert changed[name] >= 1, f"{tag}: moving {name!r} does not change the figure"
        assert rec[-1][1] == default, f"{tag}/{name}: back to the default"
    driver.execute_script("const a = arguments[0]._attn; arguments[0].removeEventListener("
                          "'keyup', a.record); arguments[0].removeEventListener('click', "
                          "a.record);", root)
    return changed


def check_fits(driver, root, tag: str, width: int):
    """At a viewport ``width`` px wide the explorer does not overflow, and below 640 px its
    panels stack, each as wide as the figure (readable on a phone)."""
    over, full, panels = driver.execute_script(  # (one round trip)
        "const r = arguments[0], w = e => e.getBoundingClientRect().width;"
        "return [[r.scrollWidth, r.clientWidth, r.getBoundingClientRect().right, "
        "window.innerWidth], w(r.querySelector('.attnlib-figure')), "
        "Array.from(r.querySelectorAll('img.attnlib-panel')).map(w)]", root)
    assert over[0] <= over[1] + 1 and over[2] <= over[3] + 1, f"{tag}: overflows {over}"
    for w in panels:
        assert w <= full + 1, f"{tag}: a panel wider than the figure"
        if width < 640:
            assert w >= full - 2, f"{tag}: panels do not stack on a {width} px screen"


#: JavaScript, before the play button of ``arguments[0]`` is clicked: every frame it shows from
#: now on is recorded in order (each change of ``data-frame``, by a MutationObserver: none is
#: lost between two polls), and so is every state of the button (``aria-pressed``); the page's
#: timer is its own (the ``setInterval`` its click starts, at the explorer's ``interval``) but
#: runs ``arguments[1]`` times faster: the frames and where the play stops do not depend on
#: the pace.  (:data:`_PLAYED` puts ``setInterval`` back right after the click.)
_PLAY = """
const [root, faster] = [arguments[0], arguments[1]];
const button = root.querySelector('button.attnlib-play');
const play = {shown: [+root.getAttribute('data-frame')], pressed: [], setInterval};
play.obs = new MutationObserver(ms => ms.forEach(m => (m.target === root
  ? play.shown.push(+root.getAttribute('data-frame'))
  : play.pressed.push(button.getAttribute('aria-pressed')))));
play.obs.observe(root, {attributes: true, attributeFilter: ['data-frame']});
play.obs.observe(button, {attributes: true, attributeFilter: ['aria-pressed']});
window.setInterval = (f, ms, ...rest) => play.setInterval.call(window, f, ms / faster, ...rest);
root._attnPlay = play;
"""

#: JavaScript, after the click: ``setInterval`` back, the play followed to its end (at most
#: ``arguments[1]`` s); every frame shown (the first: the frame before the click), every state
#: the button took, and its state at the end
_PLAYED = """
const [root, seconds, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const play = root._attnPlay, button = root.querySelector('button.attnlib-play');
window.setInterval = play.setInterval;
const end = performance.now() + 1000 * seconds;
const poll = () => {
  if (button.getAttribute('aria-pressed') === 'true' && performance.now() < end) {
    setTimeout(poll, 20);
    return;
  }
  play.obs.disconnect();
  done([play.shown, play.pressed, button.getAttribute('aria-pressed')]);
};
poll();
"""


def check_play(driver, root, tag: str, timeout: float = 20.0, faster: float = 5.0) -> list[int]:
    """Press the play button of ``root`` (a click) and follow it to the end: the frame must
    advance along the played control only, stop at its last value (the button back to
    "not pressed"), and the keyboard (Space on the focused button) must start it again from
    the first value. Returns the frames shown during the first play, in order. (The page's
    own timer runs ``faster`` times faster during the first play: :data:`_PLAY`.)"""
    from selenium.webdriver.common.keys import Keys

    sizes, button, slider = driver.execute_script(
        "const r = arguments[0], b = r.querySelector('button.attnlib-play');"
        "return [JSON.parse(r.querySelector('script.attnlib-data').textContent).sizes, b, "
        "b && r.querySelector(`.attnlib-control[data-index='${b.dataset.index}'] input`)]",
        root)
    assert button and slider, f"{tag}: no play button beside a slider"
    i = int(button.get_attribute("data-index"))
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'}); "
                          "arguments[0].focus()", slider)
    slider.send_keys(Keys.HOME)  # from the first value
    first = int(root.get_attribute("data-frame"))
    stride = math.prod(sizes[i + 1:])
    driver.execute_script(_PLAY, root, faster)
    button.click()
    shown, states, pressed = driver.execute_async_script(_PLAYED, root, timeout)
    assert states[:1] == ["true"], f"{tag}: play did not start"
    seen = [k for j, k in enumerate(shown) if j == 0 or k != shown[j - 1]]
    assert seen[0] == first, f"{tag}: {seen}"
    assert len(seen) > 1, f"{tag}: play did not advance the frame"
    assert seen[-1] == first + (sizes[i] - 1) * stride, f"{tag}: play did not reach the end"
    assert pressed == "false", f"{tag}: play did not stop"
    assert all(b - a == stride for a, b in zip(seen, seen[1:])), f"{tag}: {seen}"
    driver.execute_script("arguments[0].focus()", button)
    button.send_keys(Keys.SPACE)  # the keyboard: from the end it starts again at the first
    assert button.get_attribute("aria-pressed") == "true", f"{tag}: Space did not play"
    button.send_keys(Keys.SPACE)  # and pauses
    pressed, frame = driver.execute_script(
        "return [arguments[1].getAttribute('aria-pressed'), "
        "+arguments[0].getAttribute('data-frame')]", root, button)
    assert pressed == "false", f"{tag}: Space did not pause"
    assert frame < seen[-1], f"{tag}: not restarted"
    return seen
