"""Chapter 5 checks that could fail: independent oracles for the E1 figure, the
full-space Att-SVM solve and its dual rank certificate, and the nuclear non-uniqueness example.

Oracles: the per-constraint cvxpy problems of :mod:`attnlib.svm.primal` (not the reduced
engine), a plain NumPy normalised gradient descent written from the digest's gradient formula,
and closed-form SVM solutions.
"""

import numpy as np
import pytest
import torch

import attnlib as al
from attnlib.examples import EPS, visualization_example
from attnlib.experiments.tf_svm_rank import dual_matrix, full_space_svm
from attnlib.figures import tf_svm as F
from attnlib.svm.primal import att_svm_primal


def _numpy_gd_W(X, z, v, Y, steps, lr=0.1, eps=EPS):
    """Normalised GD on W from 0 with the logistic loss, NumPy, the digest's gradient."""
    n, T, d = X.shape
    W = np.zeros((d, d))
    g_tok = X @ v  # (n, T)
    for _ in range(steps):
        a = np.einsum("ntd,de,ne->nt", X, W, z)
        s = np.exp(a - a.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        f = (s * g_tok).sum(-1)
        lp = -1.0 / (1.0 + np.exp(Y * f))  # d/du log(1 + e^{-u}) at u = Y f
        r = np.einsum("nt,ntd->nd", s * (g_tok - f[:, None]), X)  # sum_t s_t (g_t - f) x_t
        G = np.einsum("n,nd,ne->de", lp * Y, r, z) / n
        W = W - lr * G / (np.linalg.norm(G) + eps)
    return W


@pytest.fixture(scope="module")
def vis():
    # chapter 5 runs this experiment at the same (default) settings: through the experiment
    # cache it is computed once, here or there (the random layouts leave the example's runs,
    # the figure's, as they are)
    return al.experiments.run("tf_visualization")


def _rays(ax):
    """(label, unit direction) of each ray drawn from the origin (two-point lines)."""
    out = []
    for ln in ax.lines:
        xy = np.asarray(ln.get_xydata(), dtype=float)
        label = str(ln.get_label()).lstrip("$")  # mathtext: "$W^{mm}\\, z_1$"
        if len(xy) == 2 and np.allclose(xy[0], 0) and label.startswith("W^{mm}"):
            out.append((ln.get_label(), (xy[1] - xy[0]) / np.linalg.norm(xy[1] - xy[0])))
    return out


@pytest.mark.slow
def test_visualization_panels_show_the_right_svm(vis):
    """Left panel: the Frobenius rays W^mm z_i; right: the nuclear W^mm_⋆ z_i, each compared
    with the per-constraint cvxpy solution of the example (an oracle independent of the
    engine). The two SVMs differ on this example, so swapped panels would fail."""
    ex = visualization_example(2)
    X, z = ex.data.X.double().numpy(), ex.data.z.double().numpy()
    alpha = al.optimal_tokens(ex.data).numpy()
    np.testing.assert_array_equal(np.asarray(vis.arrays["alpha_W"]), alpha)
    np.testing.assert_array_equal(np.asarray(vis.arrays["alpha_KQ"]), alpha)
    _, Wf = att_svm_primal(X, z, alpha, "fro")
    _, Wn = att_svm_primal(X, z, alpha, "nuc")
    unit = lambda M: (M @ z.T).T / np.linalg.norm((M @ z.T).T, axis=-1, keepdims=True)  # noqa
    fro, nuc = unit(Wf), unit(Wn)
    assert np.min(np.sum(fro * nuc, -1)) < 0.99  # the swap is visible: rays differ
    fig = vis.figure()
    for ax, want in zip(fig.axes[:2], (fro, nuc), strict=True):
        got = np.array([u for _, u in _rays(ax)])
        assert got.shape == (2, 2)
        np.testing.assert_allclose(got, want, atol=1e-3)  # nuclear: SDP accuracy
    assert "Att-SVM⋆" in fig.axes[1].get_title() and "Att-SVM⋆" not in fig.axes[0].get_title()


def test_visualization_mid_margin_lines_and_zoom(vis):
    """Each dotted line is {x : p^T x = p^T x_opt - 1/2}, p = W^mm z_i of its panel's SVM
    (oracle solution), and the axes are the official zoom [-2, 10] x [-5, 5]."""
    ex = visualization_example(2)
    X, z = ex.data.X.double().numpy(), ex.data.z.double().numpy()
    alpha = al.optimal_tokens(ex.data).numpy()
    fig = vis.figure()
    for ax, norm in zip(fig.axes[:2], ("fro", "nuc"), strict=True):
        _, Wm = att_svm_primal(X, z, alpha, norm)
        dotted = [ln for ln in ax.lines if ln.get_linestyle() == ":"]
        assert len(dotted) == 2
        for i, ln in enumerate(dotted):
            p = Wm @ z[i]
            xy = np.asarray(ln.get_xydata(), dtype=float)
            u = (xy[1] - xy[0]) / np.linalg.norm(xy[1] - xy[0])
            assert abs(u @ p) / np.linalg.norm(p) < 1e-4  # perpendicular to W^mm z_i
            np.testing.assert_allclose(xy.mean(0) @ p, p @ X[i, alpha[i]] - 0.5, atol=1e-4)
            # the selected token is beyond the line, every other token of input i before it
            others = np.delete(X[i], alpha[i], axis=0)
            assert p @ X[i, alpha[i]] > p @ X[i, alpha[i]] - 0.5 > np.max(others @ p)
        assert ax.get_xlim() == (-2.0, 10.0) and ax.get_ylim() == (-5.0, 5.0)


def test_visualization_left_path_is_plain_gd_on_W(vis):
    """The left panel's paths pass through W(300) z_i of a NumPy normalised GD from W = 0
    (early, while the gradient is far above the normalisation's eps: later the steps
    depend on rounding)."""
    ex = visualization_example(2)
    D = ex.data
    X, z, v, Y = (t.double().numpy() for t in (D.X, D.z, D.v, D.Y))
    k = 300
    W = _numpy_gd_W(X, z, v, Y, steps=k)
    j = int(np.nonzero(np.asarray(vis.arrays["steps"]) == k)[0][0])
    paths = [np.asarray(ln.get_xydata()) for ln in vis.figure().axes[0].lines
             if len(ln.get_xydata()) > 2]
    assert len(paths) == 2
    np.testing.assert_allclose([P[j] for P in paths], (W @ z.T).T, rtol=1e-6, atol=1e-8)


def test_mid_margin_line_geometry():
    p, x = np.array([2.0, 1.0]), np.array([1.0, 0.5])
    seg = F.mid_margin_line(p, x)
    np.testing.assert_allclose(seg @ p, [p @ x - 0.5] * 2)
    assert np.linalg.norm(seg[1] - seg[0]) > 100


def test_full_space_solution_lies_in_the_query_span_and_matches():
    """Solved without the span reduction, both norms' solutions still have rows in
    span{z_i}, and their optimal values equal the reduced solver's."""
    data = al.random_data(3, 4, 7, seed=5, device="cpu")
    X, z = data.X.double().numpy(), data.z.double().numpy()
    a = al.optimal_tokens(data).numpy()
    P = np.linalg.pinv(z) @ z
    for norm, val in (("fro", np.linalg.norm), ("nuc", lambda M: np.linalg.norm(M, "nuc"))):
        W, lam = full_space_svm(X, z, a, norm)
        assert np.linalg.norm(W - W @ P) / np.linalg.norm(W) < 1e-6
        Wr = al.att_svm(data, alpha=torch.as_tensor(a), norm=norm).double().numpy()
        assert abs(val(W) - val(Wr)) / val(Wr) < 1e-6
        assert (lam >= -1e-9).all() and (lam[np.arange(3), a] == 0).all()
    # Frobenius KKT: W = sum_it lam_it (x_{i a_i} - x_it) z_i^T (duals of ||W||_F, scaled)
    W, lam = full_space_svm(X, z, a, "fro")
    Y = dual_matrix(torch.as_tensor(X)[None], torch.as_tensor(z)[None],
                    torch.as_tensor(a)[None], torch.as_tensor(lam)[None])[0].numpy()
    np.testing.assert_allclose(Y / np.linalg.norm(Y), W / np.linalg.norm(W), atol=1e-6)


def test_dual_rank_certificate_can_fail():
    """The nuclear dual Y = sum lam (x_sel - x_t) z^T has ||Y||_2 = 1 and bounds the rank of
    every optimum by #{sigma_j(Y) = 1}. The full-space solution meets the bound; a feasible
    W with an extra rank-one component (not optimal) exceeds it."""
    data = al.random_data(4, 5, 8, seed=2, device="cpu")
    X, z = data.X.double().numpy(), data.z.double().numpy()
    a = al.optimal_tokens(data).numpy()
    W, lam = full_space_svm(X, z, a, "nuc")
    Y = dual_matrix(torch.as_tensor(X)[None], torch.as_tensor(z)[None],
                    torch.as_tensor(a)[None], torch.as_tensor(lam)[None])[0].numpy()
    sy = np.linalg.svd(Y, compute_uv=False)
    assert abs(sy[0] - 1) < 1e-6
    units = int((sy >= 1 - 1e-5).sum())
    sw = np.linalg.svd(W, compute_uv=False)
    assert int((sw > 1e-4 * sw[0]).sum()) <= units
    np.testing.assert_allclose(np.sum(W * Y), sw.sum(), rtol=1e-6)  # <W, Y> = ||W||_*
    # a planted non-optimal W: the same margins plus a component off span{z_i}
    u = np.linalg.svd(z)[2][-1]  # orthogonal to every z_i (d = 8 > n = 4)
    bad = W + sw[0] * np.outer(np.linalg.svd(W)[0][:, -1], u)
    assert int((np.linalg.svd(bad, compute_uv=False) > 1e-4 * sw[0]).sum()) > units
    assert np.sum(bad * Y) < np.linalg.norm(bad, "nuc") - 1e-3  # the certificate rejects it


# ----------------------------------------------------------------------------- new experiments
def _run(name, **settings):
    return al.experiments.run(name, cache=False, device="cpu", **settings)


def test_nonunique_example_has_a_face_of_nuclear_solutions():
    """Oracle: the per-constraint cvxpy problem. The identity and the rank-one all-ones
    matrix are both feasible with the optimal nuclear norm 2; the Frobenius solution is I."""
    from attnlib.experiments.tf_svm_rank import nonunique_example

    D = nonunique_example()
    X, z = D.X[0].numpy(), D.z[0].numpy()
    a = al.optimal_tokens(D)[0].numpy()
    val, _ = att_svm_primal(X, z, a, "nuc")
    assert abs(val - 2) < 1e-6
    _, Wf = att_svm_primal(X, z, a, "fro")
    np.testing.assert_allclose(Wf, np.eye(2), atol=1e-6)
    for W in (np.eye(2), np.ones((2, 2)), np.array([[1, -0.3], [-0.3, 1]])):
        margins = [(X[i, a[i]] - X[i, 1 - a[i]]) @ W @ z[i] for i in range(2)]
        assert min(margins) >= 1 - 1e-12
        assert abs(np.linalg.norm(W, "nuc") - 2) < 1e-12


def test_nonunique_experiment_numbers_match_its_arrays():
    res = _run("tf_nuclear_nonunique", trials=4, steps=300)
    W = np.asarray(res.arrays["W_KQ"], dtype=float)  # unit-margin KQ^T of each run
    gap = (np.linalg.svd(W, compute_uv=False).sum(-1) - 2) / 2
    assert res.numbers["nuc_gap_max"] == pytest.approx(gap.max(), abs=1e-12)
    c = (W[:, 0, 1] + W[:, 1, 0]) / 2
    assert res.numbers["c_spread"] == pytest.approx(c.max() - c.min(), abs=1e-12)
    np.testing.assert_allclose(np.minimum(W[:, 0, 0], W[:, 1, 1]), 1.0)
    cos = np.einsum("bij,ij->b", W, np.eye(2)) / (np.linalg.norm(W, axis=(1, 2)) * np.sqrt(2))
    assert res.numbers["corr_solver_min"] == pytest.approx(cos.min(), abs=1e-6)


def test_equal_scores_moves_tokens_along_v_only():
    from attnlib.experiments.tf_svm_overparam import equal_scores

    D = al.random_data(3, 5, 6, trials=2, seed=4, device="cpu")
    E = equal_scores(D, gap=0.5)
    X, Xe, v, Y = (t.double().numpy() for t in (D.X, E.X, D.v, D.Y))
    u = v / np.linalg.norm(v, axis=-1, keepdims=True)
    opt = np.argmax(Y[..., None] * np.einsum("bntd,bd->bnt", X, v), -1)
    g = Y[..., None] * np.einsum("bntd,bd->bnt", Xe, v)  # scores after
    for b in range(2):
        for i in range(3):
            others = np.delete(g[b, i], opt[b, i])
            np.testing.assert_allclose(others, g[b, i, opt[b, i]] - 0.5 * np.linalg.norm(v[b]))
            np.testing.assert_allclose(Xe[b, i, opt[b, i]], X[b, i, opt[b, i]])
        diff = Xe[b] - X[b]  # only along u
        np.testing.assert_allclose(diff - np.einsum("ntd,d->nt", diff, u[b])[..., None] * u[b],
                                   0, atol=1e-12)
    np.testing.assert_array_equal(al.optimal_tokens(E).numpy(), opt)


def test_local_convergence_spectra_numbers_match_their_arrays():
    res = _run("tf_local_convergence", trials=3, steps=200, record_every=100)
    A, num = res.arrays, res.numbers
    sv = {k: np.asarray(A[f"sv_{k}"], dtype=float) for k in ("W", "KQ", "fro", "nuc")}
    for k in sv:
        np.testing.assert_allclose(sv[k][:, 0], 1.0)
    assert num["rank_W_final"] == pytest.approx((sv["W"] > 1e-2).sum(-1).mean())
    assert num["rank_KQ_final"] == pytest.approx((sv["KQ"] > 1e-2).sum(-1).mean()
                                                 - (sv["nuc"] > 1e-2).sum(-1).mean())
    assert num["rank_KQ_final_fine"] == pytest.approx((sv["KQ"] > 1e-6).sum(-1).mean()
                                                      - (sv["nuc"] > 1e-6).sum(-1).mean())
    cos = (sv["KQ"] * sv["nuc"]).sum(-1) / (np.linalg.norm(sv["KQ"], axis=-1)
                                             * np.linalg.norm(sv["nuc"], axis=-1))
    assert num["spectrum_KQ_nuc"] == pytest.approx(cos.mean(), abs=1e-9)
    c = np.asarray(A["corr_W_fro"], dtype=float)[:, -1]  # k = 200 = min(1000, steps)
    assert num["corr_W_fro_median_k1000"] == pytest.approx(np.sort(c)[1], abs=1e-12)


def test_capped_svm_against_the_convex_nuclear_svm():
    """Oracle: the per-constraint convex nuclear SVM (cvxpy). With m at least the convex
    solution's rank the cap is inactive and the values agree; with m = 1 the answer has rank
    one, meets every margin, and costs at least the convex optimum."""
    from attnlib.experiments.tf_svm_rankcap import capped_svm

    data = al.random_data(3, 4, 5, seed=1, device="cpu")
    X, z = data.X.double().numpy(), data.z.double().numpy()
    a = al.optimal_tokens(data).numpy()
    val, Wn = att_svm_primal(X, z, a, "nuc")
    r = int((np.linalg.svd(Wn, compute_uv=False) > 1e-6 * np.linalg.norm(Wn, 2)).sum())
    W, v = capped_svm(X, z, a, m=r, W0=Wn)
    assert abs(v - val) / val < 1e-5
    W1, v1 = capped_svm(X, z, a, m=1, W0=Wn)
    s = np.linalg.svd(W1, compute_uv=False)
    assert s[1] < 1e-8 * s[0]
    D = X[np.arange(3), a][:, None, :] - X
    marg = np.einsum("ntd,de,ne->nt", D, W1, z)
    marg[np.arange(3), a] = np.inf
    assert marg.min() > 1 - 1e-6
    assert v1 >= val * (1 - 1e-6) and abs(v1 - s.sum()) / v1 < 1e-5
