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
    assert len(fig.axes) == 2  # axes + colour bar


def test_token_scatter_accepts_torch_and_several_inputs():
    X = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    fig = plots.token_scatter(X, torch.rand(3, 4, dtype=torch.float64), colorbar=False)
    markers = {c.get_paths()[0].vertices.shape for c in fig.axes[0].collections[:12:2]}
    assert len(fig.axes) == 1 and len(markers) >= 2  # one marker shape per input


@pytest.mark.parametrize("bad", [np.zeros((3, 3)), np.zeros((2, 2, 3, 2))])
def test_token_scatter_rejects_bad_shapes(bad):
    with pytest.raises(ValueError, match="X"):
        plots.token_scatter(bad)


def test_token_scatter_rejects_mismatched_scores():
    with pytest.raises(ValueError, match="scores"):
        plots.token_scatter(np.zeros((2, 3, 2)), np.zeros((3, 3)))


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
    assert paths[1].get_color() == "tab:red"
    from matplotlib.quiver import Quiver

    heads = [c for c in ax.collections if isinstance(c, Quiver)]
    assert len(heads) == 1 and heads[0].N == 3 * 6  # every 20 // 6 = 3 points: k = 3..18


def test_token_plane_combines_tokens_paths_and_rays():
    P = np.linspace([0, 0], [-1, 8], 30)
    fig = plots.token_plane(X3, [1, 0.9, 0.9], paths=P, directions=[[-0.1, 1.0]],
                            direction_labels=[r"$p^{mm}$"], title="E1")
    ax = fig.axes[0]
    assert ax.get_title() == "E1"
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert r"$p^{mm}$" in texts
    assert any(len(ln.get_xdata()) == 30 for ln in ax.get_lines())


def test_curves_mean_and_band_and_one_minus():
    steps = np.arange(5)
    vals = np.array([[0.5, 0.6, 0.7, 0.8, 0.9], [0.7, 0.8, 0.9, 1.0, 1.0]])
    fig = plots.correlation_curves(steps, {"W": vals}, one_minus=True, mark=3)
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), 1 - vals.mean(0))
    assert ax.get_yscale() == "log"
    assert len(ax.collections) == 1  # the std band
    assert ax.get_ylabel() == "1 - correlation"


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
    heights = [p.get_height() for p in ax.patches]
    assert sum(heights) == 200


def test_sweep_curves_mark_the_current_point():
    fig = plots.sweep_curves([2, 4, 6], {"fro": [2, 4, 5], "nuc": [2, 3.5, 4.5]},
                             current=("nuc", 4), styles={"nuc": "--"})
    ax = fig.axes[0]
    marked = ax.collections[-1].get_offsets()[0]
    np.testing.assert_allclose(marked, [4, 3.5])
    assert ax.get_lines()[1].get_linestyle() == "--"
    with pytest.raises(ValueError, match="points"):
        plots.sweep_curves([1, 2], {"a": [1, 2, 3]})


def test_matrix_image_symmetric_scale_and_png():
    W = np.array([[1.0, -3.0], [0.5, 2.0]])
    fig = plots.matrix_image(W, title="W")
    im = fig.axes[0].images[0]
    assert im.get_clim() == (-3.0, 3.0)
    assert fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="W"):
        plots.matrix_image(np.zeros(3))
