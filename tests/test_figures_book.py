"""The book's figures read well: the official zoom of ch5 E1 with its dotted margin lines,
named tokens and labelled axes, discrete legends for discrete values, quantile bands that stay
on a log axis, one colour scheme (attnlib.plots.style) and panels readable at column width.

Each test draws a figure from small arrays and reads back what matplotlib drew; each could
fail (a std band, a colour bar for three values, a literal colour, the ±35 autoscaled view).
"""

import ast
import pathlib
import re
from types import SimpleNamespace

import numpy as np
import pytest
from matplotlib.colors import to_hex

import attnlib.experiments as E
from attnlib import plots
from attnlib.figures import tf_svm as F
from attnlib.figures import tf_svm_heads as H

ROOT = pathlib.Path(__file__).resolve().parents[1] / "attnlib"


def _res(params=None, **arrays):
    return SimpleNamespace(arrays=arrays, params=params or {})


@pytest.fixture(scope="module")
def e1():
    return E.run("tf_visualization", cache=False, steps=300, layouts=0, example=2)


def test_ch5_e1_is_drawn_in_the_official_view_with_dotted_margin_lines(e1):
    fig = F.plot_visualization(e1)
    X, A = e1.arrays["X"], e1.arrays
    panels = [ax for ax in fig.axes if ax.get_title()]  # not the colour bars
    assert len(panels) == 2
    for ax, svm, key in zip(panels, ("fro", "nuc"), ("W", "KQ")):
        assert ax.get_xlim() == (-2.0, 10.0) and ax.get_ylim() == (-5.0, 5.0)
        dotted = [ln for ln in ax.lines if ln.get_linestyle() == ":"]
        assert len(dotted) == 2  # one mid-margin line per query
        for i, ln in enumerate(dotted):  # {x : p^T x = p^T x_sel - 1/2}, p = W^mm z_i
            p = np.asarray(A[f"ray_{svm}"][i], dtype=float)
            x_sel = X[i, int(np.asarray(A[f"alpha_{key}"]).reshape(-1)[i])]
            np.testing.assert_allclose(ln.get_xydata() @ p, p @ x_sel - 0.5, atol=1e-6)
            assert to_hex(ln.get_color()) == plots.PALETTE[key]  # the parameterisation's
        for i in range(2):  # each query's path in its parameterisation's colour
            path = A[f"path_{key}"][i]
            (drawn,) = [ln for ln in ax.lines if ln.get_xydata().shape == path.shape
                        and np.allclose(ln.get_xydata(), path)]
            assert to_hex(drawn.get_color()) == plots.PALETTE[key]
        inside = ((X[..., 0] > -2) & (X[..., 0] < 10) & (X[..., 1] > -5) & (X[..., 1] < 5))
        assert inside.all()  # every token is in the view (they collapsed at ±35)
        names = {t.get_text().split(" ")[0] for t in ax.texts}
        assert {"$x_{11}$", "$x_{21}$"} <= names  # the selected tokens are named
        assert ax.get_xlabel() and ax.get_ylabel()


def test_token_plane_names_tokens_and_labels_axes():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [-0.1, 1.0]])
    fig = plots.token_plane(X, [0.9, 0.9, 1.0])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["$x_{1}$ 0.9", "$x_{2}$ 0.9", "$x_{3}$ 1"]
    assert ax.get_xlabel() == "first coordinate of x"
    assert ax.get_ylabel() == "second coordinate of x"
    two = plots.token_names(2, 3)
    assert two[1][2] == "$x_{23}$" and np.shape(two) == (2, 3)
    with pytest.raises(ValueError, match="names"):
        plots.token_scatter(X, names=[["a", "b"]])


def test_discrete_scores_get_a_discrete_legend_continuous_ones_a_colour_bar():
    X = np.random.default_rng(0).normal(size=(2, 5, 2))
    fig = plots.token_plane(X, np.tile([1.0, 0.5, 0.5, 0.5, 0.5], (2, 1)))
    assert len(fig.axes) == 1  # no colour bar for two values
    ax = fig.axes[0]
    key = ax.get_legend()
    assert key.get_gid() == "score key"
    labels = [t.get_text() for t in key.get_texts()]
    assert labels == ["γ = 1", "γ = 0.5", "optimal token"]
    handles = dict(zip(labels, key.legend_handles))
    tokens = ax.collections[0]  # the entry's colour is the tokens' colour
    np.testing.assert_allclose(handles["γ = 1"].get_markerfacecolor(),
                               tokens.to_rgba(tokens.get_array()[0]))  # token 1: score 1
    assert key.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1  # beside, not over, data
    assert "input 1" in ax.get_legend_handles_labels()[1]  # the inputs stay in the axes
    fig = plots.token_plane(X, np.random.default_rng(1).normal(size=(2, 5)))
    assert len(fig.axes) == 2  # ten distinct scores: a colour bar


def test_band_is_a_quantile_band_positive_on_a_log_axis_where_std_exceeds_mean():
    rng = np.random.default_rng(0)
    y = np.exp(rng.normal(0.0, 3.0, size=(200, 6)))  # log-normal: std >> mean
    assert (y.mean(0) - y.std(0) < 0).all()  # a mean - std band would leave a log axis
    fig = plots.curves(np.arange(6), {"err": y}, logy=True)
    ax = fig.axes[0]
    band = ax.collections[0].get_paths()[0].vertices
    assert (band[:, 1] > 0).all()
    for k in range(6):
        ys = band[np.isclose(band[:, 0], k), 1]
        np.testing.assert_allclose([ys.min(), ys.max()], np.quantile(y[:, k], [0.1, 0.9]))
    np.testing.assert_allclose(ax.lines[0].get_ydata(), np.median(y, 0))
    assert ax.get_legend().get_title().get_text() == "median over runs, band 10-90%"
    lo, med, hi = plots.quantile_band(y)
    assert (lo <= med).all() and (med <= hi).all()
    with pytest.raises(ValueError, match="band"):
        plots.curves(np.arange(6), {"err": y}, band="std")


def _colour_literals(path):
    """Colour strings written in a module ("tab:red", "#d62728", "C0", "0.8", color="k")."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            v = node.value
            if v.startswith("tab:") or (v.startswith("#") and len(v) == 7) or \
                    (len(v) == 2 and v[0] == "C" and v[1].isdigit()) or \
                    re.fullmatch(r"0\.\d+", v):  # a grey level
                found.append(v)
        if isinstance(node, ast.keyword) and node.arg in ("color", "c", "mfc", "mec", "fc") \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) \
                and node.value.value not in ("none", "white", "black"):
            found.append(node.value.value)
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "figures").glob("*.py"))
                         + [ROOT / "plots" / "plane.py", ROOT / "plots" / "charts.py"],
                         ids=lambda p: p.name)
def test_figures_take_their_colours_from_the_style(path):
    assert _colour_literals(path) == []


def test_palette_is_used_by_the_figures():
    pal = plots.PALETTE
    assert set(plots.palette_hex()["roles"]) == set(pal)
    assert all(c.startswith("#") and len(c) == 7 for c in plots.palette_hex()["cycle"])
    steps = np.arange(4)
    fig = F.plot_local(_res(steps=steps, norm_W=np.ones((3, 4)), **{
        k: np.full((3, 4), 0.5) for k in ("prob_W", "prob_KQ", "corr_W_fro", "corr_KQ_nuc",
                                           "corr_W_nuc", "corr_KQ_fro")}))
    curves = [ln for ln in fig.axes[0].lines if ln.get_marker() != "o"]
    first = {ln.get_label().split(" (")[0]: to_hex(ln.get_color()) for ln in curves}
    assert first == {"W": pal["W"], "(K,Q)": pal["KQ"]}
    # the means over runs (open circles) in the colours of their curves
    means = [to_hex(ln.get_markeredgecolor()) for ln in fig.axes[0].lines
             if ln.get_marker() == "o"]
    assert means == [pal["W"], pal["KQ"]]
    fig = F.plot_global(_res(ds=np.array([2]), **{"global": np.array([0.5]),
                                                   "local_only": np.array([0.3]),
                                                   "other": np.array([0.2])}))
    assert [to_hex(p.get_facecolor()) for p in fig.axes[0].patches] == \
        [pal["target"], pal["other"], pal["neutral"]]
    with pytest.raises(ValueError, match="role"):
        plots.color_of("nope")


def test_causal_pairs_keep_their_colour_in_both_panels():
    c = np.tile(np.linspace(0.5, 0.99, 5), (2, 1))
    fig = F.plot_causal(_res(steps=np.arange(5), corr_causal=c, corr_causal_vs_full=c,
                             corr_full=c))
    colours = [{ln.get_label().split(" (")[0]: to_hex(ln.get_color()) for ln in ax.lines
                if not ln.get_label().startswith("_")} for ax in fig.axes]
    assert len(colours) == 2  # two panels
    for label in ("causal GD vs causal SVM", "full GD vs full SVM"):
        assert colours[0][label] == colours[1][label]


def test_eight_panel_figure_is_split_into_two_readable_figures():
    rng = np.random.default_rng(0)
    ds = np.array([4, 6, 8, 10])
    run_d = np.repeat(ds, 3)
    M = dict(ds=ds, run_d=run_d, steps=np.arange(0, 50, 10),
             corr_eq=rng.uniform(0.9, 1, size=(12, 5)), corr_dir=rng.uniform(0.9, 1, (12, 5)),
             corr_one=rng.uniform(0.8, 1, size=(12, 5)), max_masked=np.full(12, 1e-9))
    for f in (H.plot_multi, H.plot_multi_errors):
        fig = f(_res(**M))
        shown = [ax for ax in fig.axes if ax.get_visible()]
        assert len(shown) == 4
        width = fig.get_size_inches()[0]
        assert width <= 8.0  # two panels a row: each at least 3.5 in at column width
        titles = [ax.get_title() for ax in shown]
        assert all(f"d = {d}" in t for d, t in zip(ds, titles))


def test_rank_figure_gives_each_cell_one_colour_for_both_svms():
    A = dict(ds=np.array([1, 2, 3]), cells=np.array([[5, 5], [10, 5], [5, 10]]),
             fro_mean=np.arange(9.0).reshape(3, 3), nuc_mean=np.arange(9.0).reshape(3, 3) / 2)
    fig = F.plot_rank(_res(**A))
    for ax in fig.axes[:2]:
        col = {ln.get_label(): to_hex(ln.get_color()) for ln in ax.lines
               if not ln.get_label().startswith("_")}
        cells = {lab.rsplit(" ", 1)[0] for lab in col}
        assert len(cells) == 2
        for c in cells:  # the same colour, solid for Frobenius, dashed for nuclear
            assert col[f"{c} Frobenius"] == col[f"{c} nuclear"]
        assert len({col[f"{c} Frobenius"] for c in cells}) == 2


def test_log_iteration_axis_starts_at_the_first_step():
    steps = np.array([5, 10, 100, 1000])
    fig = plots.curves(steps, {"a": np.ones((3, 4))}, logx=True)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlim()[0] == 5  # no empty negative decades
    fig = plots.curves(np.array([0, 10, 100]), {"a": np.ones((3, 3))}, logx=True)
    assert fig.axes[0].get_xscale() == "symlog" and fig.axes[0].get_xlim()[0] == 0


def test_e4_key_names_the_discrete_C_values_and_draws_losses_solid():
    from attnlib.figures import max_margin as MM

    C = np.array([1.0, 5.0, 10.0, 100.0])
    paths = np.random.default_rng(0).normal(size=(2, 4, 6, 2))
    fig = MM.plot_e4(_res(C=C, paths=paths, steps=np.arange(6)), steps=5)
    leg = fig.axes[0].get_legend()
    labels = [t.get_text() for t in leg.get_texts()]
    assert labels[:2] == ["ℓ(u) = −u", "logistic"]
    assert "C = 1 (faint)" in labels and "C = 10 (opaque)" in labels
    assert "C = 100 (dashed)" in labels
    assert [h.get_linestyle() for h in leg.legend_handles[:2]] == ["-", "-"]


def test_sentence_figure_has_a_key_for_its_box_colours():
    from attnlib.figures import mirror_text as MT

    att = np.array([[[0.2, 0.7, 0.1]]])  # (seeds, sentences, T)
    res = _res(vocab=np.array(["good", "bad", "the"]), words=np.array([[2, 0, 1]]),
               label=np.array([1.0]), relevant=np.array([1]), distractor=np.array([[2]]),
               **{f"attention_{k}": att for k in MT.TEXT_NAMES})
    fig = MT.plot_sentences(res, sentences=1)
    (key,) = fig.legends
    labels = [t.get_text() for t in key.get_texts()]
    assert labels[:2] == ["planted word", "distractor"]
    edges = [to_hex(h.get_edgecolor()) for h in key.legend_handles[:2]]
    assert edges == [plots.PALETTE["target"], plots.PALETTE["support"]]
