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


def test_lambda_bars_and_causal_panels():
    s_opt, s_fin = np.array([0.7, 0.3, 0.0, 0.0]), np.array([0.69, 0.31, 0.0, 0.0])
    c = np.linspace(0.5, 0.99, 5)
    fig = F.plot_lambda(_res(steps=np.arange(5), corr_eq=c, corr_dir=c, corr_one=c,
                             fin_gap=1 - c, perp_err=1 - c, s_opt=s_opt, s_final=s_fin))
    heights = [p.get_height() for p in fig.axes[2].patches]
    np.testing.assert_allclose(heights, np.concatenate([s_opt, s_fin]))
    C = np.tile(c, (2, 1))
    fig = F.plot_causal(_res(steps=np.arange(5), corr_causal=C, corr_causal_vs_full=C,
                             corr_full=C))
    assert len(fig.axes) == 2


def test_visualization_local_and_multi_draw():
    rng = np.random.default_rng(0)
    A = dict(X=rng.normal(size=(2, 5, 2)), scores=rng.normal(size=(2, 5)),
             path_W=rng.normal(size=(2, 4, 2)), path_KQ=rng.normal(size=(2, 4, 2)),
             ray_fro=rng.normal(size=(2, 2)), ray_nuc=rng.normal(size=(2, 2)))
    assert len(F.plot_visualization(_res(**A)).axes) >= 2
    S = np.arange(0, 50, 10)
    curves = {k: rng.uniform(0.5, 1, size=(3, 5)) for k in
              ("corr_W_fro", "corr_KQ_nuc", "corr_W_nuc", "corr_KQ_fro", "prob_W", "prob_KQ")}
    assert len(F.plot_local(_res(steps=S, norm_W=rng.uniform(size=(3, 5)), **curves)).axes) == 3
    M = dict(ds=np.array([4, 6]), run_d=np.array([4, 4, 6]), steps=S,
             corr_eq=rng.uniform(0.9, 1, size=(3, 5)), corr_dir=rng.uniform(0.9, 1, size=(3, 5)),
             corr_one=rng.uniform(0.8, 1, size=(3, 5)), max_masked=np.array([1e-9, 1e-7, 0.0]))
    fig = F.plot_multi(_res(**M))
    assert len(fig.axes) == 2  # the curves of d = 4 and d = 6
    fig = F.plot_multi_errors(_res(**M))
    assert len(fig.axes) == 2  # the errors of d = 4 and d = 6
    errors_d4 = fig.axes[0]  # the runs of d = 4 only
    np.testing.assert_allclose(errors_d4.lines[0].get_ydata(), 1 - M["corr_eq"][:2, -1])
