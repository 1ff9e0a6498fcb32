"""Figures of "Transformers as SVMs" (chapters 5-8): a Result's arrays in, a Figure out.

Each figure is drawn from small synthetic arrays, and what it shows (bar heights, curve
values, panel count) is compared with those arrays: nothing is trained or solved here.
"""

from types import SimpleNamespace

import numpy as np

from attnlib.figures import tf_svm as F


def _res(**arrays):
    return SimpleNamespace(arrays=arrays)


def test_feasibility_bars_are_the_shares():
    cells = np.array([[5, 5, 5], [15, 5, 4]])
    fig = F.plot_feasibility(_res(cells=cells, feasible_opt=np.array([1.0, 0.25]),
                                  feasible_random=np.array([0.75, np.nan])))
    (ax,) = fig.axes
    heights = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(heights, [1.0, 0.25, 0.75, np.nan])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["(5,5,5)", "(15,5,4)"]


def test_global_bars_stack_to_the_three_shares():
    fig = F.plot_global(_res(ds=np.array([2, 4]), **{"global": np.array([[0.1, 0.5]]),
                                                       "local_only": np.array([[0.6, 0.3]]),
                                                       "other": np.array([[0.3, 0.2]])}))
    (ax,) = fig.axes
    tops = [p.get_y() + p.get_height() for p in ax.patches]
    np.testing.assert_allclose(tops, [0.1, 0.5, 0.7, 0.8, 1.0, 1.0])


def test_rank_panels_split_cells_by_n_and_T():
    A = dict(ds=np.array([1, 2, 3]), cells=np.array([[5, 5], [10, 5], [5, 10]]),
             fro_mean=np.arange(9.0).reshape(3, 3), nuc_mean=np.arange(9.0).reshape(3, 3) / 2)
    fig = F.plot_rank(_res(**A))
    left, right = fig.axes[:2]
    ys_left = [tuple(ln.get_ydata()) for ln in left.lines]
    ys_right = [tuple(ln.get_ydata()) for ln in right.lines]
    assert tuple(A["fro_mean"][1]) in ys_left and tuple(A["fro_mean"][1]) not in ys_right
    assert tuple(A["nuc_mean"][2]) in ys_right and tuple(A["nuc_mean"][2]) not in ys_left


def test_lambda_bars_are_the_optimal_and_final_attention():
    s_opt, s_fin = np.array([0.7, 0.3, 0.0, 0.0]), np.array([0.69, 0.31, 0.0, 0.0])
    c = np.linspace(0.5, 0.99, 5)
    fig = F.plot_lambda(_res(steps=np.arange(5), corr_eq=c, corr_dir=c, corr_one=c,
                             fin_gap=1 - c, perp_err=1 - c, s_opt=s_opt, s_final=s_fin))
    heights = [p.get_height() for p in fig.axes[2].patches]
    np.testing.assert_allclose(heights, np.concatenate([s_opt, s_fin]))
    # (plot_causal: test_figures_book.test_causal_pairs_keep_their_colour_in_both_panels)


def test_multi_draws_one_panel_per_d():
    # (plot_visualization: test_visualization_colours_..., plot_local: test_local_and_multi_...)
    rng = np.random.default_rng(0)
    S = np.arange(0, 50, 10)
    M = dict(ds=np.array([4, 6]), run_d=np.array([4, 4, 6]), steps=S,
             corr_eq=rng.uniform(0.9, 1, size=(3, 5)), corr_dir=rng.uniform(0.9, 1, size=(3, 5)),
             corr_one=rng.uniform(0.8, 1, size=(3, 5)), max_masked=np.array([1e-9, 1e-7, 0.0]))
    fig = F.plot_multi(_res(**M))
    assert len(fig.axes) == 2  # the curves of d = 4 and d = 6
    fig = F.plot_multi_errors(_res(**M))
    assert len(fig.axes) == 2  # the errors of d = 4 and d = 6
    errors_d4 = fig.axes[0]  # the runs of d = 4 only
    np.testing.assert_allclose(errors_d4.lines[0].get_ydata(), 1 - M["corr_eq"][:2, -1])


def _lines_along(ax, direction):
    """The drawn lines from the origin along ``direction`` (the rays)."""
    u = np.asarray(direction, dtype=float) / np.linalg.norm(direction)
    out = []
    for ln in ax.lines:
        xy = ln.get_xydata()
        if len(xy) == 2 and np.allclose(xy[0], 0) and np.linalg.norm(xy[1]) > 0:
            if np.allclose(xy[1] / np.linalg.norm(xy[1]), u, atol=1e-9):
                out.append(ln)
    return out


def test_visualization_colours_carry_the_parameterisation_not_the_query():
    """W (Frobenius) is PALETTE["W"] everywhere, (K,Q) (nuclear) PALETTE["KQ"]: paths, rays
    and margin lines of both queries; swapping W and (K,Q) or colouring by query fails."""
    from matplotlib.colors import to_hex

    from attnlib import plots

    assert to_hex(plots.PALETTE["W"]) != to_hex(plots.PALETTE["KQ"])
    rng = np.random.default_rng(1)
    X = rng.uniform(0.5, 4.0, size=(2, 5, 2))
    A = dict(X=X, scores=rng.normal(size=(2, 5)), path_W=rng.uniform(size=(2, 6, 2)),
             path_KQ=rng.uniform(size=(2, 6, 2)), ray_fro=np.array([[1.0, 0.3], [0.8, -0.5]]),
             ray_nuc=np.array([[1.0, 0.6], [0.9, -0.1]]), alpha_W=np.array([0, 1]),
             alpha_KQ=np.array([0, 1]))
    fig = F.plot_visualization(_res(**A))
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert "W" in panels[0].get_title() and "Frobenius" in panels[0].get_title()
    assert "(K,Q)" in panels[1].get_title() and "nuclear" in panels[1].get_title()
    for ax, key, svm in zip(panels, ("W", "KQ"), ("fro", "nuc")):
        want = to_hex(plots.PALETTE[key])
        for i in range(2):
            path = A[f"path_{key}"][i]
            drawn = [ln for ln in ax.lines if ln.get_xydata().shape == path.shape
                     and np.allclose(ln.get_xydata(), path)]
            assert [to_hex(ln.get_color()) for ln in drawn] == [want]
            (ray,) = _lines_along(ax, A[f"ray_{svm}"][i])
            assert to_hex(ray.get_color()) == want
            assert ray.get_label().endswith(f"z_{i + 1}$")  # the query is in the label
        dotted = [ln for ln in ax.lines if ln.get_linestyle() == ":"]
        assert len(dotted) == 2 and {to_hex(ln.get_color()) for ln in dotted} == {want}
        named = {t.get_text(): to_hex(t.get_color()) for t in ax.texts}
        assert named.get("$z_{1}$") == want and named.get("$z_{2}$") == want


def _mean_markers(ax):
    return [ln for ln in ax.lines if ln.get_marker() == "o" and ln.get_linestyle() == "None"]


def test_local_and_multi_overlay_the_mean_over_runs():
    """The official E2 and E4 figures plot means: the book's median curves carry the mean over
    the runs as open circles, whose values are the arrays' means at the marked steps."""
    rng = np.random.default_rng(1)
    S = np.arange(0, 60, 10)
    curves = {k: rng.uniform(0.5, 1, size=(4, 6)) for k in
              ("corr_W_fro", "corr_KQ_nuc", "corr_W_nuc", "corr_KQ_fro", "prob_W", "prob_KQ")}
    fig = F.plot_local(_res(steps=S, norm_W=rng.uniform(size=(4, 6)), **curves))
    assert len(fig.axes) == 3
    for ax, keys in ((fig.axes[0], ("prob_W", "prob_KQ")),
                     (fig.axes[1], ("corr_W_fro", "corr_KQ_nuc"))):
        marks = _mean_markers(ax)
        assert len(marks) == 2
        for ln, key in zip(marks, keys):
            at = np.searchsorted(S, ln.get_xdata())
            np.testing.assert_allclose(ln.get_ydata(), curves[key].mean(0)[at])
    M = dict(ds=np.array([4]), run_d=np.array([4, 4, 4]), steps=S,
             corr_eq=rng.uniform(0.9, 1, size=(3, 6)), corr_dir=rng.uniform(0.9, 1, size=(3, 6)),
             corr_one=rng.uniform(0.8, 1, size=(3, 6)), max_masked=np.zeros(3))
    marks = _mean_markers(F.plot_multi(_res(**M)).axes[0])
    assert len(marks) == 3
    at = np.searchsorted(S, marks[1].get_xdata())
    np.testing.assert_allclose(marks[1].get_ydata(), (1 - M["corr_dir"]).mean(0)[at])
