"""The play button of a static explorer (attnlib.explorers.framework.static): an iteration
slider gets a play/pause button that steps through its frames and stops at the last one; other
sliders get none. In a real browser (headless Chromium): clicking play advances the shown
frame to the precomputed frame of the next iterations, it stops at the end, and the keyboard
(Space on the focused button) starts it again from the first value.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from attnlib.explorers import Control, Explorer, frame_key

ITS = (0, 10, 20, 30, 40)


def _toy(**kw):
    def draw(fig, iterations, style):
        ax = fig.subplots()
        ax.plot([0, 1], [0, iterations], style)
        ax.set_ylim(0, 45)

    controls = [Control("style", ("-", "--"), static=("-", "--")),
                Control("iterations", ITS, default=0)]
    return Explorer(draw, controls, name="toy-play", slider="iterations", figsize=(3, 2),
                    static_dpi=40, fps=8.0, **kw)


def _data(html):
    return json.loads(re.search(r'class="attnlib-data">(.*?)</script>', html, re.S).group(1))


@pytest.mark.slow
def test_only_an_iteration_slider_gets_a_play_button():
    html = _toy().static().html
    assert html.count('class="attnlib-play"') == 1
    assert re.search(r'data-control="iterations"[^>]*>.*?class="attnlib-play"', html, re.S)
    assert _data(html)["interval"] == 125  # 1000 / fps
    assert 'class="attnlib-play"' not in _toy(play="").static().html

    def draw(fig, d):
        fig.subplots().plot([0, d])

    other = Explorer(draw, [Control("d", (1, 2, 3))], name="sweep", static_dpi=30)
    assert other.play == "" and 'class="attnlib-play"' not in other.static().html
    with pytest.raises(ValueError, match="play must name"):
        _toy(play="nope")


@pytest.mark.browser
def test_play_steps_through_the_frames_and_stops_at_the_end(chromium, tmp_path):
    # (chromium: the session's headless Chromium, tests/site_helpers.py, a fixture of conftest)
    from explorer_checks import check_play
    from selenium.webdriver.common.by import By

    st = _toy().static()
    page = tmp_path / "play.html"
    page.write_text("<!doctype html><html><body>" + st.html + "</body></html>")
    chromium.get(page.as_uri())
    root = chromium.find_element(By.CSS_SELECTOR, "div.attnlib-explorer")
    seen = check_play(chromium, root, "toy")
    # every iteration was shown, in order, each the frame precomputed for it (style "-")
    assert seen == [frame_key((0, j), st.sizes) for j in range(len(ITS))]
    assert len({tuple(st.frames[k]) for k in seen}) == len(ITS)  # each a different image
    assert np.all(np.diff(seen) == 1)
