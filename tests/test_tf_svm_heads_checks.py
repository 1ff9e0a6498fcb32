"""Chapter 7's informative checks: the identity behind "SVM-eq beats W^dir", the
part-wise checks that replace it, the acceptance rate's interval, and chapter 8's minima.

Oracles: a plain-numpy least-squares projection, the defining equation of the Wilson interval,
and numpy recomputations from stored arrays.
"""

import math

import numpy as np
import pytest
import torch

import attnlib as al
from attnlib import experiments as E
from attnlib.experiments import tf_svm_heads as H
from attnlib.experiments.registry import get
from attnlib.metrics import correlation
from attnlib.svm import Equivalence


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))


def _targets(name):
    return {t.key: t for t in get(name).targets}


@pytest.mark.parametrize("k,m", [(40, 193), (500, 2353), (0, 10), (10, 10), (1, 3)])
def test_wilson_solves_its_defining_equation(k, m):
    # the Wilson bounds are the p with (p_hat - p)^2 = z^2 p (1 - p) / m
    lo, hi = H.wilson(k, m)
    z, ph = 1.96, k / m
    for p in (lo, hi):
        assert (ph - p) ** 2 == pytest.approx(z * z * p * (1 - p) / m, abs=1e-12)
    assert 0 <= lo <= ph <= hi <= 1
    assert math.isnan(H.wilson(0, 0)[0])


def _instance(seed=0, n=3, T=4, d=6):
    g = np.random.default_rng(seed)
    X = torch.tensor(g.normal(size=(n, T, d)))
    z = torch.tensor(g.normal(size=(n, d)))
    O = torch.tensor([[True, True, False, False], [True, False, False, False],
                      [False, True, True, True]])
    return X, z, O


def test_project_fin_against_numpy_lstsq():
    X, z, O = _instance()
    C = H.fin_rows(X, z, O)
    assert C.shape == (1 + 0 + 2, 36)
    W = torch.tensor(np.random.default_rng(1).normal(size=(2, 6, 6)))
    P = H.project_fin(W, C)
    # oracle: least squares in the basis of the pair matrices (x_it - x_iτ) z_i^T, all pairs
    basis = [np.outer(X[i, t] - X[i, u], z[i]).ravel() for i in range(3) for t in range(4)
             for u in range(4) if O[i, t] and O[i, u] and t < u]
    B = np.array(basis).T
    for b in range(2):
        coef = np.linalg.lstsq(B, W[b].numpy().ravel(), rcond=None)[0]
        np.testing.assert_allclose(P[b].numpy().ravel(), B @ coef, atol=1e-10)
    assert torch.equal(H.project_fin(W, C[:0]), torch.zeros_like(W))


def test_w_fin_is_the_projection_and_eq_beats_dir_for_any_matrix():
    """The identity the book marks 'by construction': with s the softmax of W itself, W_fin is
    the projection of W on S_fin, and the fitted W^eq is at least as correlated with W as
    W^dir, for a W that has nothing to do with gradient descent."""
    X, z, O = _instance()
    data = al.AttentionData(X[None], torch.ones(1, 3, dtype=X.dtype), z[None],
                            torch.ones(1, 6, dtype=X.dtype))
    W = torch.tensor(np.random.default_rng(2).normal(size=(1, 6, 6)))
    s = torch.softmax(torch.einsum("bntd,bde,bne->bnt", X[None], W, z[None]), -1)
    eq = al.svm_equivalence(data, O[None], s)
    P = H.project_fin(W, H.fin_rows(X, z, O))
    np.testing.assert_allclose(eq.W_fin.numpy(), P.numpy(), atol=1e-9)
    W_eq = Equivalence(eq.W_fin, eq.W_dir).fit(W)
    assert correlation(W, W_eq, dims=2) >= correlation(W, eq.W_dir, dims=2) - 1e-12
    # and the diverging-part check is not an identity: for this W it is far from 1
    assert 1 - correlation(W - P, eq.W_dir, dims=2) > 0.1


def test_targets_carry_their_evidence():
    lam, multi = _targets("tf_lambda_head"), _targets("tf_multi_token")
    assert lam["eq_le_dir"].evidence == "by construction"
    assert multi["eq_le_dir"].evidence == "by construction"
    for key in ("fin_gap", "perp_err", "s_gap", "err_one_over_eq", "err_one_over_dir"):
        assert lam[key].evidence == "live"
    assert "err_eq" not in lam  # passed with W^dir alone: no longer a target
    for key in ("dir_lt_one", "perp_median", "multi_share_pos", "rate_d4", "dir_mean_d10"):
        assert multi[key].evidence == "live"
    # the rate bands are the re-simulation's 95% Wilson intervals
    lo, hi = H.wilson(40, 193)
    assert (multi["rate_d4"].lo, multi["rate_d4"].hi) == (lo, hi)
    assert lo < 0.21 < hi and hi < 0.3


def test_lambda_head_parts_against_s_star():
    res = E.run("tf_lambda_head", cache=False, device="cpu", steps=2000, record_every=100)
    num, A = res.numbers, res.arrays
    assert num["eq_le_dir"] == 1 and num["err_eq"] <= num["err_dir"]
    assert num["fin_gap"] == pytest.approx(float(A["fin_gap"][-1]))
    assert num["perp_err"] == pytest.approx(float(A["perp_err"][-1]))
    # the finite part of GD sits within one step of W_fin(s*) ...
    assert num["fin_gap"] <= num["lr"]
    # ... and a wrong best attention would miss it: W_fin of s = (0.6, 0.4) is > 1 step away
    ex = al.examples.lambda_head_example(lam=0.25)
    s_right = torch.tensor([[0.7, 0.3, 0.0, 0.0]], dtype=torch.float64)
    s_wrong = torch.tensor([[0.6, 0.4, 0.0, 0.0]], dtype=torch.float64)
    W_r, W_w = (al.svm_equivalence(ex.data, s > 0, s.clamp_min(1e-300)).W_fin
                for s in (s_right, s_wrong))
    assert float((W_r - W_w).norm()) > 2 * num["lr"]
    assert (W_r.norm() - num["fin_norm"]).abs() < 1e-9
    # the 1-token direction is far from the diverging part: the check can fail
    assert num["err_one"] > 0.1 and num["perp_err"] < 0.01
    res.require("s_gap", "fin_gap", "perp_err", "err_one_over_eq", "eq_le_dir")
    # the nothing-fitted comparison, recomputed from the numbers it is built from
    assert num["err_one_over_dir"] == pytest.approx(num["err_one"] / num["err_dir"])
    res.require("err_one_over_dir")


def test_multi_token_new_numbers_small():
    num, A = H.tf_multi_token(accepted=12, ds=(4,), progress=False, device="cpu")
    assert A["perp"].shape == (12,)
    assert num["perp_median"] == pytest.approx(float(np.median(A["perp"])))
    assert num["rate_lo_d4"] <= num["rate_d4"] <= num["rate_hi_d4"]
    assert (num["rate_lo_d4"], num["rate_hi_d4"]) == H.wilson(12, num["tried_d4"])
    assert num["eq_le_dir"] == 1
    err_eq, err_dir = 1 - A["corr_eq"][:, -1], 1 - A["corr_dir"][:, -1]
    assert (err_eq <= err_dir + 1e-12).all()
    # the diverging part is at least as aligned with W^dir as the whole W is
    assert (A["perp"] <= err_dir + 1e-12).all()
    assert num["dir_lt_one"] == float(num["dir_mean_d4"] < num["one_mean_d4"])
    assert 0 <= num["multi_share_pos"] <= 1 and 0 <= num["multi_share_neg"] <= 1
    assert math.isnan(num["rate_d10"])


def test_causal_minima_declared():
    t = _targets("tf_causal")
    assert t["corr_causal_min"].lo == 0.99 and t["corr_full_min"].lo == 0.98
    res = E.run("tf_causal", cache=False, device="cpu", trials=2, n=2, T=4, d=10, steps=300)
    num, A = res.numbers, res.arrays
    assert num["corr_causal_min"] == pytest.approx(float(A["corr_causal"][:, -1].min()))
    assert num["corr_full_min"] == pytest.approx(float(A["corr_full"][:, -1].min()))


def test_nonlinear_path_small_against_numpy():
    res = E.run("tf_nonlinear_path", cache=False, device="cpu", trials=2, restarts=4,
                radii=(1.0, 8.0), steps=300)
    num, A = res.numbers, res.arrays
    X = al.random_data(2, 3, 4, trials=2, seed=0, device="cpu").X.numpy()
    g = torch.Generator().manual_seed(0)  # the folded design, rebuilt in numpy
    w = torch.randn(4, generator=g, dtype=torch.float64).numpy()
    U = torch.randn(4, 2, generator=g, dtype=torch.float64).numpy()
    V = np.concatenate([w[:, None], -w[:, None], 0.1 * np.linalg.norm(w) * U / np.linalg.norm(U)],
                       1)
    V = V * (3.0 / np.linalg.norm(V))
    psi = np.maximum(X @ V, 0).sum(-1)  # oracle: 1^T ReLU(V^T x), numpy
    # the fold: ReLU(a) + ReLU(-a) = |a|, so psi = |c w^T x| + the small ReLU block
    assert np.allclose(psi, np.abs(X @ V[:, 0]) + np.maximum(X @ V[:, 2:], 0).sum(-1))
    np.testing.assert_allclose(A["psi"], psi, atol=1e-12)
    np.testing.assert_array_equal(A["alpha"], psi.argmax(-1))
    corr = np.asarray(A["corr"])
    assert corr.shape == (2, 2)
    assert num["corr_final"] == pytest.approx(corr[:, -1].mean())
    assert num["corr_min_final"] == pytest.approx(corr[:, -1].min())
    assert num["corr_gain"] == pytest.approx(corr[:, -1].mean() - corr[:, 0].mean())
    assert num["single_start_ok"] == pytest.approx(float(A["single_ok"][-1]))
    assert np.asarray(A["loss"]).shape == (2, 4, 2)
    lin = (X @ (V @ np.ones(4))).argmax(-1)
    assert num["differ_share"] == pytest.approx((psi.argmax(-1) != lin).mean())
    assert set(_targets("tf_nonlinear_path")) == {"sel_ok", "corr_final", "corr_min_final",
                                                  "corr_gain", "differ_share", "lin_gap"}
    differ = (psi.argmax(-1) != lin).any(-1)
    if differ.any():  # the control: corr with the linear head's SVM, where the two differ
        assert num["lin_gap"] == pytest.approx(corr[differ, -1].mean() - num["corr_lin_final"])


def test_causal_local_optimality_can_fail():
    """The locally-optimal share is informative: the worst visible token of every query is
    rejected, the optimal one accepted (chapter 3's definition on the nT query pairs)."""
    from attnlib import sequences as SQ
    from attnlib.experiments import tf_svm_causal as C

    data = SQ.random_sequences(2, 4, 10, trials=2, seed=3, device="cpu")
    best = SQ.sequence_optimal_tokens(data, causal=True)
    gam = data.Y.unsqueeze(-1) * torch.einsum("bitd,bd->bit", data.X, data.v).unsqueeze(-2)
    vis = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    worst = gam.masked_fill(~vis, math.inf).argmin(-1)
    for alpha, want in ((best, True), (worst, False)):
        W = al.svm.sequence_svm(data, alpha=alpha, causal=True)
        ok = C._locally_optimal(data, W, alpha, True)
        assert ok.shape == (2,) and bool(ok.all()) == want
    t = _targets("tf_causal")["local_share_causal"]
    assert (t.lo, t.evidence) == (0.95, "live")


def test_mean_z_is_the_two_sample_statistic():
    e = np.random.default_rng(3).lognormal(-4, 1.5, size=500)
    z = H.mean_z(torch.tensor(e), 0.015)
    se = e.std(ddof=1) / np.sqrt(len(e))  # numpy oracle, the sample standard deviation
    assert z == pytest.approx((e.mean() - 0.015) / (np.sqrt(2) * se), rel=1e-12)
    assert math.isnan(H.mean_z(torch.tensor(e), None)) and math.isnan(H.mean_z(e[:1], 0.1))
    t = _targets("tf_multi_token")["mean_z_max"]
    assert (t.lo, t.hi, t.evidence) == (0.0, 2.87, "live")
    assert _targets("tf_causal")["corr_full_min"].evidence == "regression guard"
