"""attnlib.explorers (the framework): the Explorer mechanism, its controls and its two
renderers (live, static)."""


import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from attnlib import explorers
from attnlib.explorers import Control, Explorer, LiveExplorer, StaticExplorer


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
    monkeypatch.delenv(explorers.ENV_VAR, raising=False)
    assert explorers.explorer_mode() == "live"
    monkeypatch.setenv(explorers.ENV_VAR, "static")
    assert explorers.explorer_mode() == "static"
    assert explorers.explorer_mode("live") == "live"
    assert isinstance(_toy(static_dpi=30).show(), StaticExplorer)  # (8 small frames)
    assert isinstance(_toy().show(mode="live"), LiveExplorer)
    monkeypatch.setenv(explorers.ENV_VAR, "movie")
    with pytest.raises(ValueError, match=explorers.ENV_VAR):
        explorers.explorer_mode()
    with pytest.raises(ValueError, match="mode"):
        explorers.explorer_mode("html")


# -- controls ---------------------------------------------------------------------------------
def test_control_validation():
    c = Control("lr", (0.01, 0.1, 1.0), default=0.1)
    assert c.resolve(0.1 + 1e-15) == 0.1
    with pytest.raises(ValueError, match="lr"):
        c.resolve(0.5)
    with pytest.raises(ValueError, match="values"):
        Control("x", ())
    with pytest.raises(ValueError, match="distinct"):
        Control("x", (1, 2, 1.0))
    with pytest.raises(ValueError, match="default"):
        Control("x", (1, 2), default=3)
    with pytest.raises(ValueError, match="static"):
        Control("x", (1, 2), static=(4,))


def test_values_compare_and_format_as_shown():
    assert explorers.same_value(0.1, 0.1 + 1e-15) and explorers.same_value(np.int64(2), 2.0)
    assert not explorers.same_value(True, 1) and not explorers.same_value("1", 1)
    assert not explorers.same_value(0.1, 0.1001)
    assert [explorers.format_value(v) for v in (np.float64(0.123456), np.int32(7), True, "a")] == \
        ["0.1235", "7", "True", "a"]


@settings(database=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=8, unique=True),
       st.floats(-1e6, 1e6, allow_nan=False))
def test_check_returns_the_declared_value_or_refuses(values, x):
    distinct = all(not explorers.same_value(u, v) for j, u in enumerate(values)
                   for v in values[:j])
    if not distinct:  # e.g. 0.0 and 1e-144: check() could not tell them apart
        with pytest.raises(ValueError, match="distinct"):
            Control("x", values)
    assume(distinct)
    c = Control("x", values)
    for v in values:  # a declared value, also as numpy, comes back as the declared object
        assert c.resolve(np.float64(v)) is v
    close = [v for v in values if abs(x - v) <= max(1e-9 * max(abs(x), abs(v)), 1e-12)]
    if close:
        assert c.resolve(x) is close[0]
    else:
        with pytest.raises(ValueError, match="x \\(value\\) must be one of"):
            c.resolve(x)


def test_static_values_default_and_with_static():
    c = Control("k", (1, 2, 3), default=2)
    assert c.static_values(as_slider=True) == (1, 2, 3) and c.static_values(False) == (2,)
    got = explorers.with_static([c, Control("s", ("a", "b"))], {"k": [1, 3]})
    assert got[0].static == (1, 3) and got[0].static_values(False) == (1, 3)
    assert got[1].static is None
    with pytest.raises(ValueError, match="unknown control"):
        explorers.with_static([c], {"speed": (1,)})
    with pytest.raises(ValueError, match="static"):
        explorers.with_static([c], {"k": (4,)})
    with pytest.raises(ValueError, match="dict"):
        explorers.with_static([c], [("k", (1,))])


def test_control_widgets_by_value_type():
    import ipywidgets as w

    assert isinstance(Control("a", (1, 2, 3)).widget(), w.SelectionSlider)
    assert isinstance(Control("b", ("x", "y")).widget(), w.ToggleButtons)
    assert isinstance(Control("c", tuple("abcdef")).widget(), w.Dropdown)
    assert isinstance(Control("d", (False, True)).widget(), w.Checkbox)


def test_explorer_values_label_and_default_slider():
    ex = _toy()
    assert ex.slider == ["slope"]  # the first control with several static values
    assert ex.values(phase=0.5 + 1e-14) == dict(slope=1.0, phase=0.5, style="-")
    assert ex.label(ex.values(slope=2)) == "slope = 2   phase = 0   style = -"
    with pytest.raises(ValueError, match="distinct"):
        Explorer(lambda fig, a: None, [Control("a", (1,)), Control("a", (2,))])
    with pytest.raises(ValueError, match="callable"):
        Explorer("draw", [Control("a", (1,))])


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


def test_show_progress_only_inside_a_live_redraw_in_a_kernel(monkeypatch):
    import IPython

    class Kernel:
        kernel = object()

    monkeypatch.setattr(IPython, "get_ipython", lambda: Kernel())
    seen = []

    def draw(fig, k):
        seen.append(explorers.show_progress())
        fig.subplots()

    ex = Explorer(draw, [Control("k", (1, 2))])
    ex.figure()
    ex.live().update(k=2)
    assert seen == [False, True, True]  # figure(): no; the first redraw and the update: yes
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    ex.live()
    assert seen[-1] is False  # no kernel: no bar on stderr


# the static renderer: tests/test_explorers_static.py
