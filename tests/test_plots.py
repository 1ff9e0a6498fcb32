"""attnlib.plots: every figure function draws the data it is given, and rejects bad input."""

import numpy as np
import pytest
import torch
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from attnlib import plots

X3 = np.array([[-0.1, 1.0], [1.0, 0.0], [0.0, 0.0]])  # the 3-token example's key plane


def _offsets(ax):
    """All scatter points of an axes, stacked (k, 2)."""
    pts = [c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)]
    return np.concatenate([np.asarray(p) for p in pts if len(p)], axis=0)


def test_token_scatter_draws_every_token_with_score_colours():
    fig = plots.token_scatter(X3, [1.0, 0.9, 0.0], support=[[False, False, True]], selected=[0])
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    pts = _offsets(ax)
    for x in X3:  # every token is drawn
        assert np.isclose(pts, x).all(-1).any()
    first = ax.collections[0]
    np.testing.assert_allclose(first.get_array(), [1.0, 0.9, 0.0])  # colours = scores
    assert len(fig.axes) == 1  # three distinct scores: a discrete legend, no colour bar
    key = ax.get_legend()  # beside the axes
    assert key.get_gid() == "score key"
    labels = [t.get_text() for t in key.get_texts()]
    assert labels == ["γ = 1", "γ = 0.9", "γ = 0", "optimal token"]
    fig = plots.token_scatter(X3, [1.0, 0.9, 0.0], vmin=0.0, vmax=1.0)  # fixed scale: a bar
    assert len(fig.axes) == 2


def test_token_scatter_accepts_torch_and_several_inputs():
    X = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    g = torch.rand(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    fig = plots.token_scatter(X, g, colorbar=False)
    ax = fig.axes[0]
    keys = [c for c in ax.collections if c.get_label().startswith("input")]
    assert [c.get_label() for c in keys] == ["input 1", "input 2", "input 3"]
    inputs = [c for c in ax.collections if c.get_array() is not None]  # the drawn tokens
    assert len(inputs) == 3
    for i, c in enumerate(inputs):  # each input's tokens, coloured by its scores
        np.testing.assert_allclose(c.get_offsets(), X[i].numpy())
        np.testing.assert_allclose(c.get_array(), g[i].numpy())
    stars = [c.get_offsets()[0] for c in ax.collections
             if c.get_array() is None and len(c.get_offsets())]
    np.testing.assert_allclose(stars, X[torch.arange(3), g.argmax(-1)].numpy())  # optimal
    assert len(fig.axes) == 1 and len({c.get_paths()[0].vertices.shape for c in inputs}) >= 2


def test_token_scatter_marks_selected_and_support_tokens():
    X = np.array([[[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]], [[3.0, 0.0], [0.0, 3.0], [1.0, 1.0]]])
    sup = np.array([[False, True, True], [True, False, False]])
    fig = plots.token_scatter(X, np.ones((2, 3)), selected=[2, 1], support=sup, annotate=False,
                              colorbar=False)
    cols = {c.get_label(): c for c in fig.axes[0].collections}
    np.testing.assert_allclose(cols["support tokens"].get_offsets(), X[sup])
    (ring,) = [c for c in fig.axes[0].collections if c.get_linewidths()[0] == 2.0]  # selection
    np.testing.assert_allclose(ring.get_offsets(), [[2.0, 2.0], [0.0, 3.0]])  # X[i, alpha_i]
    np.testing.assert_allclose(ring.get_edgecolor()[0], [0, 0, 0, 1])


@pytest.mark.parametrize("bad", [np.zeros((3, 3)), np.zeros((2, 2, 3, 2))])
def test_token_scatter_rejects_bad_shapes(bad):
    with pytest.raises(ValueError, match="X"):
        plots.token_scatter(bad)


def test_token_scatter_rejects_mismatched_scores():
    with pytest.raises(ValueError, match="scores"):
        plots.token_scatter(np.zeros((2, 3, 2)), np.zeros((3, 3)))


def test_square_view_is_a_square_around_the_points():
    fig, ax = plots.new_figure()
    pts = np.array([[0.0, 0.0], [4.0, 1.0], [2.0, -1.0]])
    plots.square_view(ax, pts, pad=0.5)
    r = 4.0 / 2 * 1.5 + 0.3  # half the larger side, padded, plus the margin
    np.testing.assert_allclose(ax.get_xlim(), (2.0 - r, 2.0 + r))
    np.testing.assert_allclose(ax.get_ylim(), (0.0 - r, 0.0 + r))
    assert ax.get_aspect() == 1.0
    with pytest.raises(ValueError, match="pts"):
        plots.square_view(ax, np.zeros((3, 3)))


@pytest.mark.parametrize("top", [3.7e14, 2.0e5, 8.0e3, 40.0])
def test_scaled_labels_put_the_power_of_ten_in_the_label_not_over_the_title(top):
    fig, ax = plots.new_figure()
    ax.plot([-top, 0.0], [0.0, top / 2])
    plots.square_view(ax, np.array([[-top, 0.0], [0.0, top / 2]]))
    plots.scaled_labels(ax, "W[1,2]", "W[3,4]")
    fig.canvas.draw()
    for axis, label in ((ax.xaxis, "W[1,2]"), (ax.yaxis, "W[3,4]")):
        e = int(np.floor(np.log10(np.abs(axis.get_view_interval()).max())))
        ticks = axis.get_majorticklocs()
        shown = [float(t.get_text().replace("\u2212", "-")) for t in axis.get_ticklabels()]
        if e > 4:  # the label names the power; each tick times it is the tick's place
            assert axis.label.get_text() == label + " (×10" + str(e).translate(
                str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")) + ")"
            np.testing.assert_allclose(np.array(shown) * 10.0 ** e, ticks, rtol=1e-5,
                                       atol=1e-9 * 10.0 ** e)
        else:
            assert axis.label.get_text() == label
        assert axis.get_offset_text().get_text() == ""  # nothing drawn at the axes' corner


def test_title_and_log_axis_labels():
    fig, ax = plots.new_figure()
    plots.title(ax, "corr")
    assert ax.get_title() == "corr" and ax.title.get_position()[1] == 1.0
    plots.log_y(ax)
    fmt = ax.yaxis.get_major_formatter()
    assert ax.get_yscale() == "log"
    assert [fmt(y) for y in (1e-3, 1.0, 100.0, 0.5, 0.0)] == ["10⁻³", "1", "10²", "0.5", ""]


def test_arrays_must_be_numeric():
    with pytest.raises(ValueError, match="steps must be numeric"):
        plots.curves(["a", "b"], {"x": [1, 2]})


def test_rays_are_unit_directions_scaled_to_length():
    fig = plots.rays([[3.0, 4.0], [0.0, -2.0]], length=2.0, labels=["a", "b"])
    lines = fig.axes[0].get_lines()
    np.testing.assert_allclose(lines[0].get_xydata()[-1], [1.2, 1.6])
    np.testing.assert_allclose(lines[1].get_xydata()[-1], [0.0, -2.0])


def test_trajectories_draw_each_path_and_highlight():
    P = np.cumsum(np.ones((3, 20, 2)), axis=1) * np.array([1, 2, 3])[:, None, None]
    fig = plots.trajectories(P, highlight=1)
    ax = fig.axes[0]
    paths = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 20]
    assert len(paths) == 3
    np.testing.assert_allclose(paths[2].get_xydata(), P[2])
    assert paths[1].get_color() == plots.PALETTE["target"]
    from matplotlib.quiver import Quiver

    heads = [c for c in ax.collections if isinstance(c, Quiver)]
    assert len(heads) == 1 and heads[0].N == 3 * 6  # every 20 // 6 = 3 points: k = 3..18


def test_token_plane_combines_tokens_paths_and_rays():
    P = np.linspace([0, 0], [-1, 8], 30)
    fig = plots.token_plane(X3, [1, 0.9, 0.9], paths=P, directions=[[-0.1, 1.0]],
                            direction_labels=[r"$p^{mm}$"], title="E1")
    ax = fig.axes[0]
    assert ax.get_title() == "E1"
    (inside,) = ax.artists  # the rays' legend in the axes; the score key is beside them
    assert r"$p^{mm}$" in [t.get_text() for t in inside.get_texts()]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == \
        ["γ = 1", "γ = 0.9", "optimal token"]
    (path,) = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 30]
    np.testing.assert_allclose(path.get_xydata(), P)
    ray = ax.get_lines()[-1].get_xydata()  # from 0 along the unit direction of (-0.1, 1)
    np.testing.assert_allclose(ray[1, 0] * 1.0 - ray[1, 1] * -0.1, 0.0, atol=1e-12)
    assert ray[1] @ [-0.1, 1.0] > 0 and np.allclose(ray[0], 0)


def test_curves_median_and_quantile_band_and_one_minus():
    steps = np.arange(5)
    vals = np.array([[0.5, 0.6, 0.7, 0.8, 0.99], [0.7, 0.8, 0.9, 0.9, 0.99],
                     [0.6, 0.7, 0.8, 0.85, 0.5]])
    fig = plots.correlation_curves(steps, {"W": vals}, one_minus=True, mark=3)
    ax = fig.axes[0]
    e = np.sort(1 - vals, axis=0)  # 3 trials: median = the middle one
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), e[1])
    assert ax.get_yscale() == "log"
    assert ax.get_ylabel() == "1 - correlation"
    assert ax.get_legend().get_title().get_text() == "median over runs, band 10-90%"
    assert len(ax.collections) == 1  # the band: 10% and 90% quantiles of 1 - corr
    band = ax.collections[0].get_paths()[0].vertices
    for k in range(5):  # linear interpolation between order statistics (numpy's default)
        lo, hi = e[0, k] + 0.2 * (e[1, k] - e[0, k]), e[1, k] + 0.8 * (e[2, k] - e[1, k])
        ys = band[np.isclose(band[:, 0], k), 1]
        np.testing.assert_allclose([ys.min(), ys.max()], [lo, hi])
    assert ax.get_lines()[-1].get_xdata()[0] == 3  # the marked iteration


def test_curves_lines_draws_every_trial():
    vals = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    fig = plots.curves(np.arange(3), {"runs": vals}, band="lines")
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2 and not fig.axes[0].collections
    np.testing.assert_allclose(lines[1].get_ydata(), vals[1])


def test_curves_reject_bad_values():
    with pytest.raises(ValueError, match="values"):
        plots.curves(np.arange(3), {})
    with pytest.raises(ValueError, match="points"):
        plots.probability_curves(np.arange(3), {"a": np.zeros(4)})


def test_norm_and_probability_curves_draw_on_given_axes():
    fig, (a, b) = plots.new_figure(1, 2)
    assert plots.norm_curves(np.arange(4), {"p": [0, 1, 2, 3]}, ax=a) is fig
    assert plots.probability_curves(np.arange(4), {"p": [0.2, 0.5, 0.9, 1.0]}, ax=b) is fig
    np.testing.assert_allclose(a.get_lines()[0].get_ydata(), [0, 1, 2, 3])
    assert b.get_ylim()[1] == pytest.approx(1.02)


def test_histogram_counts_every_value():
    v = np.abs(np.random.default_rng(0).normal(size=(10, 10)))
    fig = plots.histogram({"lp=1.1": v, "lp=2": v / 2}, bins=10)
    ax = fig.axes[0]
    heights = np.array([p.get_height() for p in ax.patches]).reshape(2, 10)
    lo, hi = v.min() / 2, v.max()  # the common range of both histograms
    np.testing.assert_array_equal(heights[0], np.histogram(v, bins=10, range=(lo, hi))[0])
    np.testing.assert_array_equal(heights[1], np.histogram(v / 2, bins=10, range=(lo, hi))[0])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["lp=1.1", "lp=2"]


def test_sweep_curves_mark_the_current_point():
    fig = plots.sweep_curves([2, 4, 6], {"fro": [2, 4, 5], "nuc": [2, 3.5, 4.5]},
                             current=("nuc", 4), styles={"nuc": "--"})
    ax = fig.axes[0]
    marked = ax.collections[-1].get_offsets()[0]
    np.testing.assert_allclose(marked, [4, 3.5])
    assert ax.get_lines()[1].get_linestyle() == "--"
    with pytest.raises(ValueError, match="points"):
        plots.sweep_curves([1, 2], {"a": [1, 2, 3]})
    every = plots.sweep_curves([2, 4, 6], {"fro": [2, 4, 5], "nuc": [2, 3.5, 4.5]}, current=5.1)
    np.testing.assert_allclose(every.axes[0].collections[-1].get_offsets(), [[6, 5], [6, 4.5]])


def test_matrix_image_symmetric_scale_and_png():
    W = np.array([[1.0, -3.0], [0.5, 2.0]])
    fig = plots.matrix_image(W, title="W")
    im = fig.axes[0].images[0]
    assert im.get_clim() == (-3.0, 3.0)
    assert fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="W"):
        plots.matrix_image(np.zeros(3))


def test_book_figure_png_records_its_smallest_font():
    """The PNG of a BookFigure carries the smallest font size of its visible text (points),
    read back with an independent PNG reader (Pillow): the site's phone test relies on it."""
    import io

    from PIL import Image

    from attnlib.plots.style import FONT_KEY, new_figure

    fig, ax = new_figure()
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=7.5)
    ax.set_title("a title", fontsize=13)
    ax.text(0.5, 0.5, "", fontsize=3)  # empty text does not count
    ax.text(0.5, 0.5, "hidden", fontsize=4).set_visible(False)  # nor does hidden text
    image = Image.open(io.BytesIO(fig._repr_png_()))
    image.load()
    assert image.text[FONT_KEY] == "7.5"
    ax.set_xlabel("x", fontsize=6)
    image = Image.open(io.BytesIO(fig._repr_png_()))
    image.load()
    assert image.text[FONT_KEY] == "6"


def test_readable_raises_every_text_and_keeps_larger_ones():
    """readable(): titles, labels, ticks (inset axes too), legends and annotations reach
    READABLE_PT; text already larger keeps its size."""
    from matplotlib.text import Text

    from attnlib.plots.style import READABLE_PT, new_figure, readable

    fig, ax = new_figure()
    ax.plot([0, 1], [0, 1], label="a line")
    ax.legend(fontsize=6)
    ax.set_title("big", fontsize=15)
    ax.annotate("note", (0.5, 0.5), fontsize=5)
    inset = ax.inset_axes([0.6, 0.6, 0.3, 0.3])
    inset.plot([0, 1], [1, 0])
    inset.tick_params(labelsize=4)
    assert readable(fig) is fig
    fig.canvas.draw()
    sizes = {t.get_text(): t.get_fontsize() for t in fig.findobj(Text) if t.get_text()}
    assert min(sizes.values()) >= READABLE_PT
    assert sizes["big"] == 15 and sizes["note"] == READABLE_PT
    assert all(t.get_fontsize() >= READABLE_PT for t in inset.get_xticklabels())
