"""The static renderer's shortcuts draw the same pixels as a plain clear-and-redraw.

Oracles: a fresh matplotlib render of the same setting (a new figure, draw function called,
no update, titles placed by matplotlib), compared pixel for pixel; the pages' decoded images.
"""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from attnlib import explorers
from attnlib.explorers import Control, Explorer
from attnlib.explorers.framework import static as static_mod
from attnlib.plots import BookFigure


def _rgb(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)


def _pixels(fig) -> np.ndarray:
    # a figure drawn again keeps its canvas (and renderer), as on the static renderer's pages
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def _frames(st) -> list[list[np.ndarray]]:
    return [[_rgb(st.images[j]) for j in f] for f in st.frames]


def _toy(with_update: bool, calls: list):
    """Two panels; ``phase`` (the slider) moves the line, the bar and both titles."""

    def draw(fig, slope, phase):
        ax0, ax1 = fig.subplots(1, 2)
        x = np.linspace(0, 1, 20)
        (line,) = ax0.plot(x, slope * x + phase)
        ax0.set_ylim(-1, 4)
        ax0.set_title(f"phase {phase:g}")
        bars = ax1.bar([0, 1], [slope, phase], label=f"phase {phase:g}")
        ax1.set_ylim(0, 3)
        ax1.set_title("bars")
        legend = ax1.legend(loc="upper left")

        def update(slope2, phase2):
            if slope2 != slope:
                return False
            calls.append(phase2)
            line.set_ydata(slope * x + phase2)
            bars[1].set_height(phase2)
            ax0.set_title(f"phase {phase2:g}")
            legend.get_texts()[0].set_text(f"phase {phase2:g}")
            return True

        return (lambda slope, phase: update(slope, phase)) if with_update else None

    controls = [Control("slope", (1.0, 2.0), default=1.0, static=(1.0, 2.0)),
                Control("phase", (0.0, 0.5, 1.0, 2.0), default=0.5)]
    return Explorer(draw, controls, name="toy-update", slider="phase", figsize=(5, 2),
                    static_dpi=50)


@pytest.fixture(scope="module")
def plain():
    """The toy's static page drawn without its update: every frame cleared and redrawn."""
    return _toy(False, []).static()


def test_an_update_draws_the_pixels_of_a_fresh_draw(plain):
    calls = []
    fast = _toy(True, calls).static()
    assert calls, "the update was not used"
    assert fast.frames == plain.frames and len(fast.images) == len(plain.images)
    for a, b in zip(_frames(plain), _frames(fast)):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)


def test_titles_are_pinned_only_where_matplotlib_leaves_them():
    def figure():
        fig = BookFigure(figsize=(6, 2.5), dpi=60)
        ax0, ax1, ax2 = fig.subplots(1, 3)
        ax0.plot([0, 1], [0, 1])
        ax0.set_title("plain")
        ax1.plot([0, 1], [1e6, 1e6 + 1])  # a y offset text ("+1e6") beside the title
        ax1.set_title("offset", loc="left")
        ax2.plot([0, 1], [0, 1])
        ax2.xaxis.tick_top()  # tick labels on top: the title moves above them
        ax2.set_title("top")
        return fig

    fig = figure()
    ref = _pixels(fig)
    pinned = figure()
    static_mod._fix_titles(pinned)
    assert [ax._autotitlepos for ax in pinned.axes][0] is False
    assert [ax._autotitlepos for ax in pinned.axes][1:] == [True, True]
    assert np.array_equal(_pixels(pinned), ref)


@pytest.mark.parametrize("name, kw, pairs, other", [
    ("lambda_head", dict(lam=0.25, T=4),
     [(dict(lam=0.25, T=4, iterations=100), 500), (dict(lam=1.0, T=8, iterations=0), 2000)],
     dict(lam=0.0)),
    ("causal_explorer", dict(),
     [(dict(iterations=0), 1000), (dict(attention="bidirectional", sequence=1,
                                        iterations=2000), 300)],
     dict(attention="causal", sequence=0)),
    # token_plane: another iteration, and another step size or loss of the same run (the
    # chapters' static frames); the run reruns (its highlight and curves change)
    ("token_plane", dict(example="e2"),
     [(dict(iterations=10), 1000), (dict(iterations=1000, loss="exp"),
                                    dict(iterations=10, loss="logistic", lr=1.0)),
      (dict(init=3, iterations=0), dict(iterations=200))],
     dict(init=2)),
    # parameterisation: another iteration and step size; another run shown reruns
    ("parameterisation", dict(),
     [(dict(iterations=0), 1000), (dict(iterations=1000, lr=0.5), dict(iterations=10, lr=0.01))],
     dict(param="W")),
    # softmax: another norm along the same angle; another angle redraws
    ("softmax_explorer", dict(),
     [(dict(angle=96, norm=1.0), dict(norm=8.0)), (dict(angle=270, norm=16.0), dict(norm=0.0))],
     dict(angle=45)),
    # global_share: another d at the same (n, T); another n redraws
    ("global_share", dict(n=6, T=8, d=10),
     [(dict(d=2), dict(d=20)), (dict(n=3, T=4, d=10), dict(d=3))],
     dict(n=4)),
    # mirror_descent: more or fewer steps of the same run (from none: no arrowheads yet);
    # another exponent, seed or ε redraws
    ("mirror_descent", dict(lp=1.75),
     [(dict(iterations=0), 500), (dict(iterations=1500, eps="2⁻⁵² (official)"), 100)],
     dict(lp=2.0)),
])
def test_an_explorer_update_is_a_fresh_draw(unshown, name, kw, pairs, other):
    """Moved from one iteration to another in place, the figure has the pixels of a new
    figure drawn at that iteration; another value of a control that reruns: no update."""
    ex = getattr(explorers, name)(**kw)
    for start, k1 in pairs:
        moved = BookFigure(figsize=ex.figsize, dpi=50)
        vals = ex.values(**start)
        ex.draw_into(moved, vals, names=[])
        _pixels(moved)
        new = {**vals, **(k1 if isinstance(k1, dict) else {"iterations": k1})}
        assert moved.attnlib_update(**new)
        if any(vals[c] != v for c, v in other.items()):
            assert not moved.attnlib_update(**{**new, **other})
        fresh = BookFigure(figsize=ex.figsize, dpi=50)
        ex.draw_into(fresh, new, names=[])
        assert np.array_equal(_pixels(moved), _pixels(fresh))


def test_recompressing_keeps_the_pixels(plain):
    st = copy.copy(plain)  # (recompressing replaces its images, html and size)
    before = _frames(st)
    nbytes = st.nbytes
    st._recompress(9)
    assert st.nbytes <= nbytes
    for a, b in zip(before, _frames(st)):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)


def test_a_strip_drawn_before_is_not_encoded_again():
    fig = BookFigure(figsize=(4, 2), dpi=40)
    ax0, ax1 = fig.subplots(1, 2)
    ax0.plot([0, 1], [0, 1])
    (line,) = ax1.plot([0, 1], [1, 0])
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    cuts = static_mod._cuts(fig, canvas.get_renderer())
    known = {}
    first = static_mod._strips(canvas, cuts, known=known)
    assert first == static_mod._strips(canvas, cuts) and len(known) == 2
    line.set_color("r")  # the right panel changes, the left one does not
    canvas.draw()
    again = static_mod._strips(canvas, cuts, known=known)
    assert again[0] is first[0] and again[1] != first[1] and len(known) == 3
    assert again == static_mod._strips(canvas, cuts)


class _TextResult:
    """The arrays of ``md_text`` that the word-attention explorer reads, made up (3 sentences
    of 7 words, 2 seeds)."""

    def __init__(self):
        rng = np.random.default_rng(0)
        att = {f"attention_{k}": rng.dirichlet(np.ones(7), size=(2, 3))
               for k in ("md", "gd", "md3", "adam")}
        self.arrays = dict(vocab=np.array([f"w{j}" for j in range(12)]),
                           words=np.array([[-1, 3, 4, 5, 6, 7, 8], [-1, 1, 2, 9, 10, 11, 0],
                                           [-1, 0, 1, 2, 3, 4, 5]]),
                           relevant=np.array([2, 4, 1]), distractor=np.array([[3], [5], [6]]),
                           label=np.array([1, -1, 1]), **att)


def test_joint_update_is_a_fresh_draw(unshown):
    from attnlib.experiments import run

    res = run("mm_e3_joint", cache=False, steps=60)
    ex = explorers.joint_explorer(res)
    for start, new in [(dict(example="tight", iterations=10), dict(iterations=50)),
                       (dict(example="non-tight", iterations=50), dict(iterations=20))]:
        moved = BookFigure(figsize=ex.figsize, dpi=50)
        vals = ex.values(**start)
        ex.draw_into(moved, vals, names=[])
        _pixels(moved)
        assert moved.attnlib_update(**{**vals, **new})
        fresh = BookFigure(figsize=ex.figsize, dpi=50)
        ex.draw_into(fresh, {**vals, **new}, names=[])
        assert np.array_equal(_pixels(moved), _pixels(fresh))
    # no paths before (iteration 0), a mark beyond the run's steps, another example: redraw
    for start, new in [(dict(iterations=0), dict(iterations=50)),
                       (dict(iterations=50), dict(iterations=200)),
                       (dict(iterations=50), dict(example="tight"))]:
        fig = BookFigure(figsize=ex.figsize, dpi=50)
        vals = ex.values(**start)
        ex.draw_into(fig, vals, names=[])
        assert not fig.attnlib_update(**{**vals, **new})


def test_word_attention_update_is_a_fresh_draw(unshown):
    ex = explorers.word_attention(_TextResult(), sentence=1)
    assert ex.fast == "optimizer"
    for start, new in [(dict(optimizer="md", seed=0), dict(optimizer="adam", seed=1)),
                       (dict(optimizer="gd", seed=1), dict(optimizer="md3", seed=1))]:
        moved = BookFigure(figsize=ex.figsize, dpi=50)
        vals = ex.values(**start)
        ex.draw_into(moved, vals, names=[])
        _pixels(moved)
        assert moved.attnlib_update(**{**vals, **new})
        assert not moved.attnlib_update(**{**vals, **new, "sentence": 2})
        fresh = BookFigure(figsize=ex.figsize, dpi=50)
        ex.draw_into(fresh, {**vals, **new}, names=[])
        assert np.array_equal(_pixels(moved), _pixels(fresh))


def test_the_glyph_cache_draws_the_pixels_of_text_drawn_afresh(monkeypatch):
    """A page rendered with the static renderer's glyph cache against the same page with text
    laid out and rasterised on every draw: text that repeats at one place (ticks, a fixed
    title), moves (the same string at another height), changes colour, is rotated, mathtext
    (with and without a fraction's rule), at two sizes; every frame's pixels equal."""
    def draw(fig, shift, color):
        ax0, ax1 = fig.subplots(1, 2)
        ax0.plot([0, 1], [0, shift])
        ax0.set_title(r"fixed $\alpha_t$ title", fontsize=9)
        ax0.set_ylabel(r"$\frac{1}{2}\|W\|^2$", rotation=90)
        ax0.text(0.1, 0.2 + 0.25 * shift, "moving", color=color, fontsize=7)
        ax1.text(0.5, 0.5, "tilted", rotation=30 + 10 * shift, color=color)
        ax1.set_title("same words", color=color)
        ax1.set_xlabel(f"shift {shift:g}")

    def page():
        ex = Explorer(draw, [Control("shift", (0.0, 1.0, 2.0), default=0.0,
                                     static=(0.0, 1.0, 2.0)),
                             Control("color", ("k", "tab:red"), default="k",
                                     static=("k", "tab:red"))],
                      name="glyphs", figsize=(5, 2), static_dpi=60)
        return static_mod.StaticExplorer(ex)

    cached = page()
    assert sum(len(f) for f in cached.frames) > 0

    class NoCache:  # what the renderer drew before the cache: Agg's own draw_text
        def __init__(self, renderer):
            self.renderer = renderer

    monkeypatch.setattr(static_mod, "GlyphCache", NoCache)
    plain = page()
    assert len(cached.frames) == len(plain.frames) == 6
    for a, b in zip(_frames(cached), _frames(plain)):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)
