"""attnlib.explorers.framework.static: every setting precomputed, every control a control on
the page.

Oracles: a fresh matplotlib render of the same setting (pixels, after the 64-colour
quantisation: close, and farther from every other frame), ``itertools.product`` for the frame
order, and a real browser (headless Chromium) clicking the toy page's controls.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from attnlib import explorers
from attnlib.explorers import Control, Explorer, frame_key, png_panels
from attnlib.plots import BookFigure


def _toy(note=None, **kw):
    """Two side-by-side axes; slope (numbers), phase (numbers), style (strings)."""

    def draw(fig, slope, phase, style):
        ax0, ax1 = fig.subplots(1, 2)
        x = np.linspace(0, 1, 20)
        ax0.plot(x, slope * x + phase, style)
        ax0.set_ylim(-1, 4)
        ax1.bar([0, 1], [slope, phase])
        ax1.set_ylim(0, 3)

    controls = [Control("slope", (0.0, 1.0, 2.0, 3.0), default=1.0),
                Control("phase", (0.0, 0.5, 1.0), default=0.5, static=(1.0, 0.0)),
                Control("style", ("-", "--"), static=("-", "--"), label="line")]
    return Explorer(draw, controls, name="toy", figsize=(6, 2.5), max_bytes=4e5, note=note,
                    static_dpi=60, **kw)


def _data(st):
    return json.loads(re.search(r'<script type="application/json" class="attnlib-data">(.*?)'
                                r"</script>", st.html, re.S).group(1))


def _rgb(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float)


@pytest.fixture(scope="module")
def toy():
    """The toy explorer (with a note per setting) and its static page (24 frames), built
    once for the tests that only read them."""
    ex = _toy(note=_note)
    return ex, ex.static()


def _note(slope, phase, style):
    return f"slope {slope:g}, phase {phase:g}"


@pytest.fixture(scope="module")
def fixed():
    """The toy with slope not on the slider (its default only): 6 frames, not 24."""
    return _toy(slider=["phase"]).static()


@pytest.mark.slow
def test_every_setting_is_a_frame_in_product_order_opening_on_the_default(toy):
    st = toy[1]
    # slope is the slider (all 4 values); phase: its static values, the default 0.5 added
    # and numbers sorted; style: both
    assert st.values == [(0.0, 1.0, 2.0, 3.0), (0.0, 0.5, 1.0), ("-", "--")]
    assert st.sizes == (4, 3, 2) and len(st.frames) == 24
    assert st.start == (1, 1, 0)  # slope 1.0, phase 0.5, style "-"
    settings = list(st.settings())
    assert settings == [dict(slope=a, phase=b, style=c) for a, b, c in
                        itertools.product(*st.values)]
    for idx in itertools.product(*(range(n) for n in st.sizes)):
        k = frame_key(idx, st.sizes)
        assert settings[k] == {n: v[i] for n, v, i in zip(st.names, st.values, idx)}
    with pytest.raises(ValueError, match="index"):
        frame_key((4, 0, 0), st.sizes)


@pytest.mark.slow
def test_each_frame_is_the_figure_of_its_setting(toy):
    ex, st = toy
    assert all(len(f) == 2 for f in st.frames)  # two side-by-side axes: two panels
    fresh = {}
    for k, vals in enumerate(st.settings()):
        fig = BookFigure(figsize=ex.figsize, dpi=st.dpi)
        ex.draw_into(fig, vals, names=[])
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        fresh[k] = np.asarray(canvas.buffer_rgba())[..., :3].astype(float)
    for k in range(len(st.frames)):
        shown = np.concatenate([_rgb(st.images[j]) for j in st.frames[k]], axis=1)
        ref = fresh[k]
        # the panels are strips of the figure: find the offset of the first strip
        h, w = shown.shape[:2]
        assert h == ref.shape[0] and w <= ref.shape[1]
        errs = [np.abs(ref[:, o:o + w] - shown).mean() for o in range(ref.shape[1] - w + 1)]
        best = int(np.argmin(errs))
        assert errs[best] < 4.0, (k, errs[best])  # the 64-colour quantisation only
        for other in fresh:  # and farther from any other setting's figure
            if other != k and not np.array_equal(fresh[other], ref):
                assert np.abs(fresh[other][:, best:best + w] - shown).mean() > errs[best]


@pytest.mark.slow
def test_identical_panels_are_stored_once(toy):
    st = toy[1]
    # the bar panel does not depend on the line style: half as many bar images as frames
    assert len(st.images) < 2 * len(st.frames)
    bars = {f[1] for f in st.frames}
    assert len(bars) == len(st.frames) // 2
    assert len(set(st.images)) == len(st.images)


@pytest.mark.slow
def test_page_controls_labels_and_default_images(toy):
    st = toy[1]
    html, data = st.html, _data(st)
    assert html.count('class="attnlib-control"') == 3
    assert html.count('type="range"') == 2  # slope and phase: sliders over numbers
    assert html.count("<button") == 2 and 'aria-pressed="true">-</button>' in html  # style
    assert '<span class="attnlib-control-name">line</span>' in html  # the control's label
    for i, name in enumerate(st.names):  # each current value written beside its control
        now = data["labels"][i][st.start[i]]
        assert re.search(rf'data-control="{name}".*?<output class="attnlib-value">'
                         rf"{re.escape(now)}</output>", html, re.S)
    k0 = frame_key(st.start, st.sizes)
    shown = re.findall(r'<img class="attnlib-panel"[^>]*src="data:image/png;base64,([^"]+)"',
                       html)
    assert [base64.b64decode(s) for s in shown] == [st.images[j] for j in st.frames[k0]]
    assert f'data-default-frame="{k0}"' in html
    assert '<p class="attnlib-note">slope 1, phase 0.5</p>' in html  # the default's note
    assert data["notes"][data["note_of"][0]] == "slope 0, phase 0"
    assert "https://" not in html and "<link" not in html  # offline


def test_fixed_controls_show_their_value_and_bad_static_is_refused(fixed):
    st = fixed  # slope not on the slider: its default only
    assert st.sizes == (1, 3, 2)
    assert re.search(r'class="attnlib-fixed"><span class="attnlib-control-name">slope</span> '
                     r'<span class="attnlib-value">1</span>', st.html)
    ex = _toy()
    ex.max_frames = 10
    with pytest.raises(ValueError, match="max_frames"):
        ex.static()
    with pytest.raises(ValueError, match="note"):
        _toy(note="not callable")


@pytest.mark.slow
def test_ids_are_deterministic_and_the_budget_lowers_the_dpi(fixed, monkeypatch):
    def small():  # as ``fixed``: slope at its default, 6 frames (two pages built here)
        return _toy(slider=["phase"])

    def ids(html):
        return set(re.findall(r"attnlib-[0-9a-f]{12}\b", html))

    # the counter where it stood when ``fixed`` was built: the page rebuilt is identical
    monkeypatch.setattr(explorers.framework.static, "_COUNTER", itertools.count(fixed._uid))
    assert small().static().html == fixed.html
    ex = small()
    ex.max_bytes = 0.75 * fixed.nbytes
    st = ex.static()
    assert st.dpi < ex.static_dpi and st.nbytes < 1.3 * ex.max_bytes
    # the next explorer on the page (this one): another id
    assert len(ids(fixed.html)) == len(ids(st.html)) == 1 and ids(st.html) != ids(fixed.html)


def test_png_panels_cut_between_axes_and_keep_one_image_for_rows():
    fig = BookFigure(figsize=(6, 2), dpi=50)
    fig.subplots(1, 3)
    assert len(png_panels(fig)) == 3
    fig = BookFigure(figsize=(6, 4), dpi=50)
    fig.subplots(2, 1)
    assert len(png_panels(fig)) == 1  # axes above each other: one image


# -- in a browser -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    from site_helpers import CHROMEDRIVER, CHROMIUM, make_driver

    if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
        if os.environ.get("CI") == "true":
            pytest.fail("headless Chromium not installed")
        pytest.skip("headless Chromium not installed")
    driver = make_driver(tmp_path_factory.mktemp("chromium-toy"))
    yield driver
    driver.quit()


@pytest.mark.browser
@pytest.mark.parametrize("width", [1366, 390])
def test_the_page_responds_to_every_control(chromium, tmp_path, width):
    from explorer_checks import check_explorer, check_fits
    from selenium.webdriver.common.by import By

    st = _toy().static()
    page = tmp_path / "toy.html"
    page.write_text("<!doctype html><html><head><meta name='viewport' "
                    "content='width=device-width'></head><body>" + st.html + "</body></html>")
    chromium.set_window_size(width, 844)
    chromium.get(page.as_uri())
    root = chromium.find_element(By.CSS_SELECTOR, "div.attnlib-explorer")
    changed = check_explorer(chromium, root, "toy")
    assert changed == {"slope": 3, "phase": 2, "style": 1}
    check_fits(chromium, root, "toy", width)


@pytest.mark.browser
def test_the_check_fails_on_a_control_that_changes_nothing(chromium, tmp_path):
    from explorer_checks import check_explorer
    from selenium.webdriver.common.by import By

    def draw(fig, slope, unused):
        ax = fig.subplots()
        ax.plot([0, 1], [0, slope])
        ax.set_ylim(0, 2.5)

    st = Explorer(draw, [Control("slope", (1.0, 2.0)), Control("unused", ("a", "b"),
                                                                 static=("a", "b"))],
                  name="dead", figsize=(3, 2), static_dpi=40).static()
    page = tmp_path / "dead.html"
    page.write_text("<!doctype html><html><body>" + st.html + "</body></html>")
    chromium.get(page.as_uri())
    root = chromium.find_element(By.CSS_SELECTOR, "div.attnlib-explorer")
    with pytest.raises(AssertionError, match="'unused' does not change the figure"):
        check_explorer(chromium, root, "dead")


def test_value_names_are_shown_on_the_page_and_live():
    c = Control("opt", ("md", "gd"), names={"md": "ℓ1.1-MD"}, static=("md", "gd"))
    assert c.show("md") == "ℓ1.1-MD" and c.show("gd") == "gd"
    st = Explorer(lambda fig, opt: fig.subplots().set_title(opt), [c], name="names",
                  figsize=(2, 1.5), static_dpi=30).static()
    assert 'aria-pressed="true">ℓ1.1-MD</button>' in st.html
    assert _data(st)["labels"] == [["ℓ1.1-MD", "gd"]]
    assert [o[0] for o in c.widget().options] == ["ℓ1.1-MD", "gd"]
