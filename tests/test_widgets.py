"""attnlib.widgets: the Explorer mechanism (live and static) and every explorer of the book."""

import re

import numpy as np
import pytest

from attnlib import widgets
from attnlib.widgets import Control, Explorer, LiveExplorer, StaticExplorer


def _toy(**kw):
    """A cheap explorer: a line whose slope and phase are controls."""

    def draw(fig, slope, phase, style):
        ax = fig.subplots()
        x = np.linspace(0, 1, 20)
        ax.plot(x, slope * x + phase, style)

    controls = [Control("slope", (0.0, 1.0, 2.0, 3.0), default=1.0, continuous=True),
                Control("phase", (0.0, 0.5), static=(0.0, 0.5)),
                Control("style", ("-", "--"))]
    return Explorer(draw, controls, name="toy", figsize=(3, 2), max_bytes=4e5, **kw)


def _line(fig):
    return fig.axes[0].get_lines()[0].get_ydata()


# -- mode -------------------------------------------------------------------------------------
def test_mode_env_default_and_override(monkeypatch):
    monkeypatch.delenv(widgets.ENV_VAR, raising=False)
    assert widgets.explorer_mode() == "live"
    monkeypatch.setenv(widgets.ENV_VAR, "static")
    assert widgets.explorer_mode() == "static"
    assert widgets.explorer_mode("live") == "live"
    assert isinstance(_toy().show(), StaticExplorer)
    assert isinstance(_toy().show(mode="live"), LiveExplorer)
    monkeypatch.setenv(widgets.ENV_VAR, "movie")
    with pytest.raises(ValueError, match=widgets.ENV_VAR):
        widgets.explorer_mode()
    with pytest.raises(ValueError, match="mode"):
        widgets.explorer_mode("html")


# -- controls ---------------------------------------------------------------------------------
def test_control_validation():
    c = Control("lr", (0.01, 0.1, 1.0), default=0.1)
    assert c.check(0.1 + 1e-15) == 0.1
    with pytest.raises(ValueError, match="lr"):
        c.check(0.5)
    with pytest.raises(ValueError, match="values"):
        Control("x", ())
    with pytest.raises(ValueError, match="default"):
        Control("x", (1, 2), default=3)
    with pytest.raises(ValueError, match="static"):
        Control("x", (1, 2), static=(4,))


def test_control_widgets_by_value_type():
    import ipywidgets as w

    assert isinstance(Control("a", (1, 2, 3)).widget(), w.SelectionSlider)
    assert isinstance(Control("b", ("x", "y")).widget(), w.ToggleButtons)
    assert isinstance(Control("c", tuple("abcdef")).widget(), w.Dropdown)
    assert isinstance(Control("d", (False, True)).widget(), w.Checkbox)


def test_explorer_rejects_unknown_controls_and_bad_slider():
    ex = _toy()
    with pytest.raises(ValueError, match="unknown control"):
        ex.figure(speed=1)
    with pytest.raises(ValueError, match="slider"):
        _toy(slider="nope")


# -- live -------------------------------------------------------------------------------------
def test_live_update_redraws_with_new_values():
    live = _toy().live()
    np.testing.assert_allclose(_line(live.figure)[-1], 1.0)  # default slope 1, phase 0
    png0 = live.png
    fig = live.update(slope=3.0, phase=0.5)
    np.testing.assert_allclose(_line(fig)[-1], 3.5)
    assert live.png != png0 and live.image.value == live.png
    assert live.widgets["slope"].value == 3.0  # widgets follow update()
    assert "drawn in" in live.status.value
    with pytest.raises(ValueError, match="slope"):
        live.update(slope=7.0)


def test_live_widget_change_triggers_redraw_and_errors_are_shown():
    live = _toy().live()
    live.widgets["phase"].value = 0.5  # as a reader moving the control
    np.testing.assert_allclose(_line(live.figure)[0], 0.5)

    def broken(fig, k):
        if k == 2:
            raise RuntimeError("no data for k=2")
        fig.subplots().plot([0, k])

    live = Explorer(broken, [Control("k", (1, 2))]).live()
    live.widgets["k"].value = 2
    assert "no data for k=2" in live.status.value
    bundle = live._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


# -- static -----------------------------------------------------------------------------------
def test_static_html_has_players_frames_and_panels():
    st = _toy().static()
    html = st.html
    # slider = slope (4 values), panels = phase (2 static values); style stays at its default
    assert len(st.panels) == 2 and all(p.frames == 4 for p in st.panels)
    assert html.count('class="anim-slider"') == 2
    assert html.count("data:image/png;base64,") == 8
    assert html.count("<details") == 2 and html.count("<details class=\"attnlib-panel\" open>") == 1
    assert "phase = 0.5" in html
    assert html.count("new Array(4)") == 2  # each player holds the 4 frames of its slider
    assert st.nbytes < 4e5


def test_static_html_is_offline_and_deterministic():
    st = _toy().static()
    assert "font-awesome" not in st.html and "<link" not in st.html
    assert "https://" not in st.html and 'class="fa' not in st.html
    ids = set(re.findall(r"_anim_img([0-9a-f]{32})", st.html))
    assert len(ids) == 2  # one id per player, derived from name + counter (no uuid4)
    one = widgets._sanitize('<img id="_anim_img' + "ab" * 16 + '"> anim' + "ab" * 16, "c" * 32)
    assert one.count("c" * 32) == 2 and "ab" * 16 not in one and 'alt="explorer figure"' in one
    assert 'alt="toy explorer, phase = 0.5"' in st.html


def test_static_frames_differ_between_slider_values():
    st = _toy().static()
    frames = re.findall(r'frames\[(\d+)\] = "data:image/png;base64,([^"]+)"', st.panels[0].html)
    assert len(frames) == 4
    assert len({f for _, f in frames}) == 4  # each slider position shows another image


def test_static_respects_size_budget_by_lowering_dpi():
    ex = _toy()
    ex.max_bytes = 6e4
    st = ex.static()
    assert st.dpi < ex.static_dpi
    assert st.nbytes < 1.3 * ex.max_bytes


# -- the book's explorers -----------------------------------------------------------------------
def _paths(fig):
    """Lines of the token-plane axes that are trajectories (more than 2 points)."""
    return [ln.get_xydata() for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) > 2]


def test_token_plane_live_follows_its_controls():
    live = widgets.token_plane("e1-local", mode="live")
    full = _paths(live.figure)
    assert len(full) == 6 and all(len(p) == 200 // 5 + 1 for p in full)  # 6 runs, 200 its
    few = _paths(live.update(iterations=20))
    assert all(len(p) == 5 for p in few)
    np.testing.assert_allclose(few[0], full[0][:5])  # the same runs, cut shorter
    fig = live.update(init=5)
    widths = [ln.get_linewidth() for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) > 2]
    assert widths[4] > widths[0]  # run 5 highlighted
    # the local example: runs 5, 6 (c = -1, -1.5) end on the local ray (1, 0), the others on p^mm
    fig = live.update(iterations=1000, init="all")
    ends = np.array([p[-1] for p in _paths(fig)])
    assert (ends[4:, 0] > 10 * np.abs(ends[4:, 1])).all()
    assert (ends[:4, 1] > 5 * np.abs(ends[:4, 0])).all()
    other = _paths(live.update(loss="correlation", iterations=200))
    assert not np.allclose(other[0], full[0])  # another loss retrains: other paths


def test_token_plane_static_plays_the_iterations():
    st = widgets.token_plane("e1-local", mode="static", static={"iterations": (0, 100, 200)})
    assert len(st.panels) == 1 and st.panels[0].frames == 3
    assert "iterations" in st.html and st.html.count("data:image/png;base64,") == 3
    # the multi-input example: one ray, the global selection, which every run approaches
    fig = widgets.token_plane("e2", mode="live").figure
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][-1] == \
        "pᵐᵐ(α=1,1,1), global"
    assert all(ln.get_ydata()[-1] < 0.01 for ln in fig.axes[1].get_lines())  # 1 - cos at 200
    with pytest.raises(ValueError, match="static"):
        widgets.token_plane(static={"speed": (1,)})
    with pytest.raises(ValueError, match="example"):
        widgets.token_plane("e9")


def test_parameterisation_each_parameterisation_meets_its_own_svm():
    live = widgets.parameterisation(mode="live", iterations=1000)
    fig = live.figure
    ax1 = fig.axes[1]
    final = {ln.get_label(): ln.get_ydata()[-1] for ln in ax1.get_lines()}  # 1 - corr at 1000
    assert final["W vs Frobenius"] < 0.01 and final["KQᵀ vs nuclear"] < 0.01
    assert final["W vs nuclear"] > final["W vs Frobenius"]
    assert final["KQᵀ vs Frobenius"] > final["KQᵀ vs nuclear"]
    n_all = len(fig.axes[0].get_lines())
    fig = live.update(param="W", iterations=50)
    labels = [ln.get_label() for ln in fig.axes[1].get_lines()]
    assert labels == ["W vs Frobenius", "W vs nuclear"]
    assert len(fig.axes[0].get_lines()) < n_all  # only W's paths and rays
    assert all(len(ln.get_xdata()) == 6 for ln in fig.axes[1].get_lines())  # k = 0..50


def _table(fig):
    """The selection table as rows of strings."""
    cells = fig.axes[1].tables[0].get_celld()
    rows = 1 + max(r for r, _ in cells)
    return [[cells[r, c].get_text().get_text() for c in range(6)] for r in range(1, rows)]


def test_selection_labels_the_papers_example_and_follows_the_score():
    live = widgets.selection(mode="live")  # x3 = (0, 0) with score 0: the "local" example
    rows = _table(live.figure)
    assert [r[4] for r in rows] == ["yes", "yes", "no"]  # alpha = 1, 2 locally optimal
    assert rows[0][2] == "0.995" and rows[1][3] == "x3" and rows[2][3] == "x1, x2"
    rows = _table(live.update(score=0.9))  # the "global" example: a tie with the support x3
    assert [r[4] for r in rows] == ["yes", "no", "no"]
    rows = _table(live.update(position="(0.45, 0.5)", score=0.95))  # x3 between x1 and x2
    assert rows[2][1] == "no"  # selecting x3 is infeasible
    st = widgets.selection(mode="static", static={"score": (0.0, 0.9)})
    assert st.panels[0].frames == 2 and "score of x3" in st.html


def test_mirror_descent_explorer_sparsity_and_matching_svm():
    live = widgets.mirror_descent(lp=2.0, mode="live")
    ax2 = live.figure.axes[2]
    div = {ln.get_label(): ln.get_ydata() for ln in ax2.get_lines()}
    assert div["to ℓ2-AttSVM"][-1] < 0.01  # GD: the Frobenius SVM direction
    hist2 = [p.get_height() for p in live.figure.axes[1].patches][:20]
    fig = live.update(lp=1.5)
    div = {ln.get_label(): ln.get_ydata() for ln in fig.axes[2].get_lines()}
    assert div["to ℓ1.5-AttSVM"][-1] < div["to ℓ2-AttSVM"][-1]  # the matching SVM is closer
    hist15 = [p.get_height() for p in fig.axes[1].patches][:20]
    assert hist15[0] > hist2[0]  # more near-zero entries for lp < 2


def test_sweep_explorer_marks_the_current_point():
    arr = dict(ds=np.array([2, 4, 6]), cells=np.array([[4, 5], [6, 5]]),
               fro_mean=np.array([[2.0, 4, 4], [2, 4, 6]]),
               nuc_mean=np.array([[2.0, 3.5, 4], [2, 3.9, 5.5]]),
               infeasible=np.array([[0.5, 0.1, 0], [0.8, 0.3, 0]]))
    live = widgets.sweep(arr, mode="live")
    marked = live.figure.axes[0].collections[-1].get_offsets()
    np.testing.assert_allclose(marked, [[4, 4], [4, 3.5]])
    fig = live.update(cell="n=6, T=5", d=6)
    np.testing.assert_allclose(fig.axes[0].collections[-1].get_offsets(), [[6, 6], [6, 5.5]])
    np.testing.assert_allclose(fig.axes[1].collections[-1].get_offsets(), [[6, 0]])
    st = widgets.sweep(arr, mode="static")
    assert len(st.panels) == 2 and st.panels[0].frames == 3
    with pytest.raises(ValueError, match="no array"):
        widgets.sweep(arr, curves={"x": "missing"})
    one = dict(ds=np.array([2, 4]), cells=np.array([[6, 8]]), glob=np.array([[0.1, 0.4]]))
    fig = widgets.sweep(one, curves={"global": "glob"}, aside=None, mode="live").figure
    assert len(fig.axes) == 1 and fig.axes[0].get_title() == "n=6, T=8"


@pytest.mark.parametrize("make", [
    lambda: widgets.parameterisation(mode="static", static={"iterations": (0, 1000)}),
    lambda: widgets.mirror_descent(lp=2.0, mode="static", static={"lp": (1.5, 2.0)}),
])
def test_every_explorer_renders_static(make):
    st = make()
    html = st.html
    assert 'class="anim-slider"' in html and "new Array(2)" in html
    assert len(set(re.findall(r'frames\[\d+\] = "([^"]{200})', html))) == 2  # two frames differ
    assert st.nbytes < 2.5e6
