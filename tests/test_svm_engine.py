"""The SVM solve path on tiny instances (n, T, d <= 3: each solve takes milliseconds).

Every answer is compared with an oracle that shares no code with attnlib.svm.engine: the
Lawson-Hanson least-distance program (one scipy NNLS, exact up to rounding) for the Frobenius
problems, the per-constraint cvxpy primal (attnlib.svm.primal, or written out here) for the
nuclear and lp ones, closed forms of hand-made instances, and Farkas certificates checked by
hand. Fast enough to be the mutation-testing selection of attnlib/svm (benchmarks/mutation.py).
"""

import re

import cvxpy as cp
import numpy as np
import pytest
import scipy.optimize
import torch

from attnlib import svm
from attnlib.data import AttentionData
from attnlib.svm import InfeasibleError, SolveConfig, UncertifiedError, engine
from attnlib.svm.engine import Rows, certify, farkas
from attnlib.svm.primal import att_svm_primal, head_svm_primal, prompt_svm_primal
from attnlib.svm.rows import matrix_rows, row_basis

F64 = dict(dtype=torch.float64)
TIGHT = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
CONIC = SolveConfig(fast=False)  # the cvxpy path (chunks, compiled problems), not svm.fast


def _tiny(seed, n=2, T=3, d=2, B=None):
    g = np.random.default_rng(seed)
    shape = (n, T, d) if B is None else (B, n, T, d)
    X = g.standard_normal(shape)
    z = g.standard_normal(shape[:-2] + (d,))
    return torch.tensor(X, **F64), torch.tensor(z, **F64)


def _att_rows(X, z, alpha, mask=None):
    """Rows vec((x_{i a_i} - x_it) z_i^T), one per visible (i, t != a_i), with plain loops."""
    n, T, _ = X.shape
    keep = [(i, t) for i in range(n) for t in range(T)
            if t != alpha[i] and (mask is None or mask[i][t])]
    return np.array([np.outer(X[i, alpha[i]] - X[i, t], z[i]).ravel() for i, t in keep]), keep


def _ldp(A, b):
    """min ||w|| s.t. Aw >= b by one NNLS (Lawson & Hanson, ch. 23): (w, lam) or None if
    infeasible. E = [A'; b'], u = argmin_{u>=0} ||Eu - e||, r = Eu - e; w = -r[:D] / r[D],
    lam = u / (1 - b'u) (so that w = A'lam)."""
    D = A.shape[1]
    E = np.vstack([A.T, b[None, :]])
    f = np.zeros(D + 1)
    f[-1] = 1.0
    u, _ = scipy.optimize.nnls(E, f)
    r = E @ u - f
    if np.linalg.norm(r) < 1e-10:
        return None
    return -r[:D] / r[D], u / (1.0 - b @ u)


def _close(got, want, rel):
    """max |got - want| <= rel * max |want| (the certified accuracy is relative)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    err = np.abs(got - want).max()
    assert err <= rel * np.abs(want).max(), f"error {err:.3e}, scale {np.abs(want).max():.3e}"


def _att_oracle(X, z, alpha, mask=None):
    A, keep = _att_rows(X.numpy(), z.numpy(), np.asarray(alpha), mask)
    w, lam = _ldp(A, np.ones(len(A)))
    d = X.shape[-1]
    L = np.zeros(X.shape[:2])
    for (i, t), v in zip(keep, lam):
        L[i, t] = v
    return w.reshape(d, d), L


# ----------------------------------------------------------------------------- Frobenius
@pytest.mark.parametrize("seed", range(4))
def test_frobenius_equals_the_nnls_least_distance_oracle(seed):
    X, z = _tiny(seed)
    alpha = [seed % 3, (seed + 1) % 3]
    W, lam = svm.att_svm(X, z=z, alpha=alpha, return_dual=True)
    W_ref, lam_ref = _att_oracle(X, z, alpha)
    assert W.shape == (2, 2) and lam.shape == (2, 3) and W.dtype == torch.float64
    _close(W, W_ref, 1e-6)
    _close(lam, lam_ref, 1e-5)


def test_closed_form_one_constraint():
    # one constraint (x_0 - x_1)^T W z >= 1 with x_0 - x_1 = (3, 0), z = (0, 2): W = e1 e2^T/6,
    # ||W|| = 1/6, lam = ||W||^2 = 1/36 (W = lam * 6 e1 e2^T)
    X = torch.tensor([[[4.0, 1.0], [1.0, 1.0]]], **F64)
    z = torch.tensor([[0.0, 2.0]], **F64)
    for norm in ("fro", "nuc", 1.5, 3.0):
        W, lam = svm.att_svm(X, z=z, alpha=[0], norm=norm, return_dual=True)
        torch.testing.assert_close(W, torch.tensor([[0.0, 1 / 6], [0.0, 0.0]], **F64),
                                   atol=1e-7, rtol=0)
        # fro: lam = ||W||^2; nuc: sum lam = ||W||_*; lp: sum lam = p ||W||_p^p
        want = {"fro": 1 / 36, "nuc": 1 / 6}[norm] if isinstance(norm, str) \
            else norm * (1 / 6) ** norm
        # (the lp multipliers come from a power cone: ~1e-5 relative)
        torch.testing.assert_close(lam, torch.tensor([[0.0, want]], **F64), atol=1e-9,
                                   rtol=1e-6 if isinstance(norm, str) else 2e-4)


@pytest.mark.parametrize("config", [CONIC, SolveConfig()])
def test_chunks_of_eight_and_the_rest_equal_the_oracle(config):
    X, z = _tiny(10, B=11)  # one chunk of 8, then 3 instances alone
    alpha = torch.tensor([[b % 3, (b + 2) % 3] for b in range(11)])
    W, lam = svm.att_svm(X, z=z, alpha=alpha, return_dual=True, config=config)
    assert W.shape == (11, 2, 2) and lam.shape == (11, 2, 3)
    for b in range(11):
        W_ref, lam_ref = _att_oracle(X[b], z[b], alpha[b].tolist())
        _close(W[b], W_ref, 1e-6)
        _close(lam[b], lam_ref, 1e-5)


def test_a_chunk_member_that_fails_is_resolved_alone():
    # trial 3's rows are scaled by 1e-6: outside rescale_outside, so its chunk goes one by one
    X, z = _tiny(11, B=8)
    c = torch.tensor([1, 1, 1, 1e-3, 1, 1, 1, 1], **F64)
    alpha = torch.zeros(8, 2, dtype=torch.long)
    W = svm.att_svm(X * c[:, None, None, None], z=z * c[:, None, None], alpha=alpha,
                    config=CONIC)
    for b in range(8):
        W_ref, _ = _att_oracle(X[b], z[b], [0, 0])  # W(cX, cz) = W(X, z) / c^2
        _close(W[b] * c[b] ** 2, W_ref, 1e-5)


@pytest.mark.parametrize("config", [CONIC, SolveConfig()])
def test_infeasible_member_of_a_chunk_is_named(config):
    X, z = _tiny(12, n=1, T=3, d=2, B=9)
    X[6, 0] = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])  # token 1 between the others
    z[6, 0] = torch.tensor([1.0, 0.5])
    alpha = torch.zeros(9, 1, dtype=torch.long)
    alpha[6] = 1
    with pytest.raises(InfeasibleError, match=r"^Att-SVM \(fro\) is infeasible for the "
                       r"selection alpha=\[1\] \(trial 6\): no W gives each selected token a "
                       r"logit margin >= 1 over the other tokens of its input\. For data in "
                       r"general position Att-SVM is feasible for every selection when d >= "
                       r"max\(T-1, n\) \(here n=1, T=3, d=2\)\.$"):
        svm.att_svm(X, z=z, alpha=alpha, config=config)


def test_masked_tokens_get_no_constraint():
    X, z = _tiny(13, n=2, T=3, d=2)
    mask = torch.tensor([[True, False, True], [True, True, True]])
    W, lam = svm.att_svm(X, z=z, alpha=[0, 2], mask=mask, return_dual=True)
    W_ref, lam_ref = _att_oracle(X, z, [0, 2], mask.tolist())
    _close(W, W_ref, 1e-6)
    assert lam[0, 1] == 0 and lam[0, 0] == 0 and lam[1, 2] == 0
    _close(lam, lam_ref, 1e-5)
    with pytest.raises(InfeasibleError, match=r"over the other visible tokens"):
        Xi = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]], **F64)
        svm.att_svm(Xi, z=torch.tensor([[1.0, 0.0]], **F64), alpha=[1],
                    mask=torch.tensor([[True, True, True]]))


def test_rank_deficient_queries_use_their_span():
    # both queries on one line: W = M U^T with U the unit vector of that line
    X, _ = _tiny(14, n=2, T=3, d=3)
    z = torch.tensor([[1.0, 2.0, 0.0], [-2.0, -4.0, 0.0]], **F64)
    W = svm.att_svm(X, z=z, alpha=[0, 1])
    W_ref, _ = _att_oracle(X, z, [0, 1])
    _close(W, W_ref, 1e-6)
    U = row_basis(z.numpy())
    assert U.shape == (3, 1) and abs(abs(U[:, 0] @ np.array([1, 2, 0])) - 5**0.5) < 1e-12
    assert row_basis(np.zeros((2, 3))).shape == (3, 1)
    assert row_basis(np.eye(3)[:2] * 1e-20).shape == (3, 2)  # rank is relative to the scale
    # a singular value counts when it is above rtol * the largest, not at it
    assert row_basis(np.diag([1.0, 1e-12])).shape == (2, 1)
    assert row_basis(np.diag([1.0, 1e-12]), rtol=0.99e-12).shape == (2, 2)


# ----------------------------------------------------------------------------- nuclear, lp
@pytest.mark.parametrize("norm", ["nuc", 1.5, 3.0])
@pytest.mark.parametrize("seed", range(2))
def test_nuclear_and_lp_equal_the_per_constraint_primal(norm, seed):
    X, z = _tiny(20 + seed, n=2, T=3, d=2)
    alpha = [1, 2]
    W, lam = svm.att_svm(X, z=z, alpha=alpha, norm=norm, return_dual=True)
    value, W_ref = att_svm_primal(X.numpy(), z.numpy(), np.array(alpha), norm)
    _close(W, W_ref, 1e-4)
    A, keep = _att_rows(X.numpy(), z.numpy(), alpha)
    lv = np.array([float(lam[i, t]) for i, t in keep])
    w = W.numpy().ravel()
    assert lv.min() >= -1e-9 and lam[0, 1] == 0 and lam[1, 2] == 0
    assert np.abs(lv * (A @ w - 1)).max() < 1e-6  # complementary slackness
    if norm == "nuc":  # dual: sum lam = ||W||_*, ||mat(A'lam)||_2 = 1
        assert abs(lv.sum() - value) < 1e-6 * value
        assert abs(np.linalg.norm((A.T @ lv).reshape(2, 2), 2) - 1) < 1e-6
    else:  # gradient of sum |w|^p = A'lam
        _close(A.T @ lv, norm * np.sign(w) * np.abs(w) ** (norm - 1), 1e-4)
        assert abs(np.linalg.norm(w, norm) - value) < 1e-6 * value


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.5])
@pytest.mark.parametrize("c", [1e-3, 1e3])
def test_badly_scaled_tiny_data_scale_back_exactly(norm, c):
    # rows scale by c^2 (outside rescale_outside): W(cX, cz) = W / c^2 and the multipliers by
    # 1/c^4 (fro), 1/c^2 (nuc), 1/c^(2p) (lp)
    X, z = _tiny(30, n=2, T=3, d=2)
    W1, lam1 = svm.att_svm(X, z=z, alpha=[0, 1], norm=norm, return_dual=True)
    Wc, lamc = svm.att_svm(X * c, z=z * c, alpha=[0, 1], norm=norm, return_dual=True)
    k = {"fro": 4.0, "nuc": 2.0}.get(norm, 2 * 1.5)
    lp = not isinstance(norm, str)  # lp answers depend on the warm start (~1e-5 relative)
    _close(Wc * c**2, W1, 1e-4 if lp else 1e-5)
    _close(lamc * c**k, lam1, 1e-3 if lp else 1e-4)


def test_rescaling_after_an_uncertified_raw_attempt():
    # with no rescaling up front, the raw attempt at scale 1e4 is tried first; the answer is
    # certified either way and equals the oracle
    X, z = _tiny(31, n=2, T=3, d=2)
    cfg = SolveConfig(rescale_outside=(1e-30, 1e30))
    W_ref, _ = _att_oracle(X, z, [2, 0])
    for c in (1e-4, 1e4):
        W = svm.att_svm(X * c, z=z * c, alpha=[2, 0], config=cfg)
        _close(W * c**2, W_ref, 1e-5)


# ----------------------------------------------------------------------------- infeasible
def _collinear():
    X = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]], **F64)
    return X, torch.tensor([[1.0, 0.0]], **F64)


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.5])
def test_infeasible_confirmed_at_every_scale(norm):
    X, z = _collinear()
    # the oracle agrees: a zero NNLS residual is a Farkas certificate
    A, _ = _att_rows(X.numpy(), z.numpy(), [1])
    assert _ldp(A, np.ones(2)) is None
    for c in (1.0, 1e-4, 1e4):
        with pytest.raises(InfeasibleError, match=rf"^Att-SVM \({norm}\) is infeasible for "
                           r"the selection alpha=\[1\]: no W gives"):
            svm.att_svm(X * c, z=z * c, alpha=[1], norm=norm)
    # other selections of the same tokens are feasible
    W = svm.att_svm(X, z=z, alpha=[2], norm=norm)
    assert W.shape == (2, 2)


def test_farkas_certificates_checked_by_hand():
    # w1 >= 1 and -w1 >= 1: lam = (1, 1) has A'lam = 0, b'lam = 2 > 0
    inf = Rows(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.ones(2), None, None, (2,))
    assert farkas(inf, 1e6)
    assert farkas(inf._replace(A=inf.A * 1e-8), 1e6) and farkas(inf._replace(A=inf.A * 1e8),
                                                                1e6)
    # w1 >= 1 and -w1 >= -2 (1 <= w1 <= 2): feasible; lam = (1, 1) gives b'lam = -1 < 0
    assert not farkas(inf._replace(b=np.array([1.0, -2.0])), 1e6)
    # the boundary case 1 <= w1 <= 1 is feasible: b'lam = 0 is no certificate
    assert not farkas(inf._replace(b=np.array([1.0, -1.0])), 1e6)
    # a zero row with a positive right-hand side: 0 >= 1
    zero = Rows(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([1.0, 1.0]), None, None, (2,))
    assert farkas(zero, 1e6)
    # a zero row with b <= 0 is always true; homogeneous rows (b = 0): w = 0 is feasible
    assert not farkas(zero._replace(b=np.array([-1.0, 1.0])), 1e6)
    assert not farkas(zero._replace(b=np.array([0.0, 1.0])), 1e6)
    assert not farkas(Rows(np.eye(2), np.zeros(2), None, None, (2,)), 1e6)
    # equalities: w1 = 1 and w1 = 2 (mu = (1, -1): C'mu = 0, c'mu = -1) -> infeasible
    C = np.array([[1.0, 0.0], [1.0, 0.0]])
    eq = Rows(np.zeros((0, 2)), np.zeros(0), C, np.array([1.0, 2.0]), (2,))
    assert farkas(eq, 1e6)
    assert not farkas(eq._replace(c=np.array([2.0, 2.0])), 1e6)
    # a zero equality row with c != 0 (0 = 1); with c = 0 it is harmless
    zeq = Rows(np.array([[1.0, 0.0]]), np.ones(1), np.zeros((1, 2)), np.ones(1), (2,))
    assert farkas(zeq, 1e6) and not farkas(zeq._replace(c=np.zeros(1)), 1e6)
    # inequality and equality together: w1 >= 1, w1 = -1
    mix = Rows(np.array([[1.0, 0.0]]), np.ones(1), np.array([[1.0, 0.0]]), -np.ones(1), (2,))
    assert farkas(mix, 1e6) and not farkas(mix._replace(c=np.full(1, 3.0)), 1e6)
    # rows within a hair of infeasible: w1 + eps w2 >= 1, -w1 + eps w2 >= 1 (||w|| >= 1/eps)
    eps = 1e-3
    near = Rows(np.array([[1.0, eps], [-1.0, eps]]), np.ones(2), None, None, (2,))
    assert not farkas(near, 1e6)


def test_infeasible_reported_by_the_solver_needs_a_certificate(monkeypatch):
    # a solver that says "infeasible" for a feasible instance is not believed
    X, z = _tiny(40, n=2, T=3, d=2)
    real = engine._run

    def lying(comp, items, solver, opts, warm):
        if solver == "CLARABEL":
            return "infeasible", None
        return real(comp, items, solver, opts, warm)

    monkeypatch.setattr(engine, "_run", lying)
    with pytest.raises(UncertifiedError, match="reported infeasible, but no Farkas"):
        svm.att_svm(X, z=z, alpha=[0, 1], config=CONIC)
    W = svm.att_svm(X, z=z, alpha=[0, 1], config=SolveConfig(solvers=("CLARABEL", "SCS"),
                                                              first_order_tol=1e-3, fast=False))
    W_ref, _ = _att_oracle(X, z, [0, 1])
    assert np.abs(W.numpy() - W_ref).max() < 1e-2 * np.abs(W_ref).max()


def test_uncertified_error_names_the_instance_and_tolerance():
    X, z = _tiny(41, n=2, T=3, d=2)
    for scale in (1.0, 1e3):  # solved as given, or rescaled first
        with pytest.raises(UncertifiedError) as err:
            svm.att_svm(X * scale, z=z * scale, alpha=[0, 1],
                        config=SolveConfig(max_iters=1, tol=1e-7))
        msg = str(err.value)
        assert "instance 0" in msg and "tol=1e-07" in msg and "CLARABEL" in msg
    # an infeasible instance whose solves all fail is still confirmed infeasible
    Xi, zi = _collinear()
    with pytest.raises(InfeasibleError):
        svm.att_svm(Xi, z=zi, alpha=[1], config=SolveConfig(max_iters=1))


# ----------------------------------------------------------------------------- certify
def test_certify_equality_rows_and_zero_right_hand_sides():
    # min ||w|| s.t. w1 + w2 = 2 (mu = 1), w1 >= 0 (b = 0, inactive): w = (1, 1)
    r = Rows(np.array([[1.0, 0.0]]), np.zeros(1), np.array([[1.0, 1.0]]), np.array([2.0]),
             (2,))
    w = np.array([1.0, 1.0])
    c = certify(r, w, np.zeros(1), np.ones(1), "fro", 1e-9)
    assert c.ok and c.margin == 0 and c.gap < 1e-12 and c.dual < 1e-12
    off = certify(r, np.array([1.0, 1.1]), np.zeros(1), np.ones(1), "fro", 1e-6)
    # |C w - c| / max(|c|, ||C|| ||w||) = 0.1 / (sqrt(2) * ||(1, 1.1)||)
    assert off.margin == pytest.approx(0.1 / (2**0.5 * np.linalg.norm([1.0, 1.1])))
    assert not off.ok
    # a zero right-hand side is measured against ||A_k|| ||w||: w1 >= 0 violated by 0.5
    neg = certify(r, np.array([-0.5, 2.5]), np.zeros(1), np.ones(1), "fro", 1e-6)
    assert neg.margin == pytest.approx(0.5 / np.linalg.norm([-0.5, 2.5]))
    # fro: w must equal A'lam + C'mu
    bad = certify(r, w, np.zeros(1), np.full(1, 0.5), "fro", 1e-6)
    assert bad.dual == pytest.approx(np.linalg.norm([0.5, 0.5]) / 2**0.5)
    assert not bad.ok
    # nuc and lp: the same point, their own multipliers
    rn = Rows(np.zeros((0, 4)), np.zeros(0), np.array([[1.0, 0.0, 0.0, 0.0]]), np.ones(1),
              (2, 2))
    assert certify(rn, np.array([1.0, 0, 0, 0]), np.zeros(0), np.ones(1), "nuc", 1e-9).ok
    half = certify(rn, np.array([1.0, 0, 0, 0]), np.zeros(0), np.full(1, 0.5), "nuc", 1e-6)
    assert half.gap == pytest.approx(0.5) and not half.ok
    over = certify(rn, np.array([1.0, 0, 0, 0]), np.zeros(0), np.full(1, 1.5), "nuc", 1e-6)
    assert over.dual == pytest.approx(0.5) and not over.ok
    rp = Rows(np.zeros((0, 2)), np.zeros(0), np.array([[1.0, 1.0]]), np.array([2.0]), (2,))
    # min sum |w|^3 s.t. w1 + w2 = 2: w = (1, 1), grad 3 w^2 = mu (1, 1): mu = 3
    assert certify(rp, np.ones(2), np.zeros(0), np.full(1, 3.0), 3.0, 1e-9).ok
    assert certify(rp, np.ones(2), np.zeros(0), np.full(1, 3.3), 3.0, 1e-9).gap > 1e-3


def test_certify_fro_gap_and_relative_margins():
    # min ||w|| s.t. 2 w1 >= 4: w = (2, 0), lam = 1 (w = A'lam), ||w||^2 = b'lam = 4
    r = Rows(np.array([[2.0, 0.0]]), np.array([4.0]), None, None, (2,))
    assert certify(r, np.array([2.0, 0.0]), np.ones(1), np.zeros(0), "fro", 1e-12).ok
    low = certify(r, np.array([1.9, 0.0]), np.full(1, 0.95), np.zeros(0), "fro", 1e-6)
    assert low.margin == pytest.approx(0.05)  # (4 - 3.8) / 4
    # gap of the fro dual: primal ||w||^2 = 4 vs b'lam = 4.8; w - A'lam = (-0.4, 0)
    g = certify(r, np.array([2.0, 0.0]), np.full(1, 1.2), np.zeros(0), "fro", 1e-6)
    assert g.gap == pytest.approx(0.8 / 4.8) and g.dual == pytest.approx(0.2)
    # negative multipliers are dual infeasible, relative to the largest one
    rr = Rows(np.array([[2.0, 0.0], [0.0, 1.0]]), np.array([4.0, -1.0]), None, None, (2,))
    neg = certify(rr, np.array([2.0, 0.0]), np.array([1.0, -0.1]), np.zeros(0), "fro", 1e-6)
    assert neg.dual == pytest.approx(0.1) and not neg.ok  # -(-0.1) / 1
    inf = certify(r, np.array([2.0, 0.0]), np.array([np.inf]), np.zeros(0), "fro", 1e-6)
    assert not inf.ok and inf.margin == inf.gap == inf.dual == np.inf
    assert not certify(r, np.array([2.0, 0.0]), np.ones(1), np.array([np.nan]), "fro", 1e-6).ok


# ----------------------------------------------------------------------------- engine pieces
def test_compiled_once_per_shape_and_solved_with_parameters():
    X, z = _tiny(50, n=2, T=3, d=2)
    engine.compiled.cache_clear()
    svm.att_svm(X, z=z, alpha=[0, 1], config=CONIC)
    svm.att_svm(X + 1, z=z, alpha=[2, 1], config=CONIC)
    info = engine.compiled.cache_info()
    assert info.misses == 1 and info.hits == 1
    comp = engine.compiled(6, 0, (2, 2), "fro", 1)
    assert comp.prob.is_dpp() and comp.status_infeasible == ("unbounded", "unbounded_inaccurate")
    assert engine.compiled(6, 0, (2, 2), 1.5).status_infeasible == ("infeasible",
                                                                    "infeasible_inaccurate")
    assert engine.compiled(6, 0, (2, 2), "nuc").clarabel == {}
    assert engine.compiled(6, 0, (12, 12), "nuc").clarabel == dict(direct_solve_method="faer")
    assert engine.compiled(6, 0, (12, 11), "nuc").clarabel == {}


def test_attempts_and_iteration_caps():
    comp = engine.compiled(6, 0, (2, 2), "fro", 1)
    tries = engine._attempts(comp, "CLARABEL", SolveConfig())
    assert [w for _, w in tries] == [True, False, False]
    assert tries[0][0] == engine.CLARABEL_TIGHT == tries[1][0] and tries[2][0] == {}
    capped = engine._attempts(comp, "CLARABEL", SolveConfig(max_iters=7))
    assert all(o["max_iter"] == 7 for o, _ in capped)
    assert engine._attempts(comp, "SCS", SolveConfig(max_iters=7)) == [({"max_iters": 7}, False)]
    assert engine._attempts(comp, "SCS", SolveConfig()) == [({}, False)]
    assert engine._attempts(comp, "GLPK", SolveConfig(max_iters=7)) == [({}, False)]


def test_row_scale_and_unscale():
    r = Rows(np.array([[3.0, 4.0], [0.0, 1.0]]), np.ones(2), np.array([[0.0, 6.0]]),
             np.ones(1), (2,))
    assert engine._row_scale(r) == 6.0
    assert engine._row_scale(r._replace(C=None)) == 5.0
    assert engine._row_scale(r._replace(A=np.zeros((2, 2)), C=None)) == 1.0
    assert engine._scaled(r, 1.0) is r
    s = engine._scaled(r, 2.0)
    np.testing.assert_array_equal(s.A, r.A / 2)
    np.testing.assert_array_equal(s.C, r.C / 2)
    np.testing.assert_array_equal(s.b, r.b)
    w, lam, mu = np.array([2.0]), np.array([16.0]), np.array([8.0])
    for norm, k in (("fro", 2), ("nuc", 1), (3.0, 3)):
        out = engine._unscale((w, lam, mu), 2.0, norm)
        np.testing.assert_array_equal(out[0], w / 2)
        np.testing.assert_array_equal(out[1], lam / 2**k)
        np.testing.assert_array_equal(out[2], mu / 2**k)
    assert engine._unscale((w, lam, mu), 1.0, "fro")[1] is lam


def test_matrix_rows_against_loops():
    X, z = _tiny(51, n=2, T=3, d=2)
    Xn, zn = X.numpy(), z.numpy()
    alpha = np.array([1, 0])
    D = Xn[np.arange(2), alpha][:, None, :] - Xn
    active = np.ones((2, 3), dtype=bool)
    active[np.arange(2), alpha] = False
    r = matrix_rows(D, zn, active, 1.5)
    A, keep = _att_rows(Xn, zn, alpha)
    rows = [i * 3 + t for i, t in keep]
    np.testing.assert_allclose(r.A[rows], A, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(r.b, np.where(active.reshape(-1), 1.0, -1.0))
    assert not r.A[[0 * 3 + 1, 1 * 3 + 0]].any() and r.U is None and r.shape == (2, 2)
    rf = matrix_rows(D, zn, active, "fro")
    # W = M U^T: the row of M is vec(D zq^T) with zq = z U, and vec(D zq^T) U^T = vec(D z^T)
    assert rf.U.shape == (2, 2) and rf.shape == (2, 2)
    np.testing.assert_allclose((rf.A.reshape(6, 2, -1) @ rf.U.T).reshape(6, -1), r.A, rtol=0,
                               atol=1e-14)
    eq = matrix_rows(D, zn, active, 1.5, eq=(D[0, 2:], zn[:1], np.array([0.7])))
    np.testing.assert_allclose(eq.C, np.outer(D[0, 2], zn[0]).reshape(1, -1))
    assert eq.c.tolist() == [0.7]
    none = matrix_rows(D, zn, active, 1.5, eq=(np.zeros((0, 2)), np.zeros((0, 2)), []))
    assert none.C is None and none.c is None


# ----------------------------------------------------------------------------- other problems
@pytest.mark.parametrize("norm", ["fro", 1.5])
def test_prompt_svm_equals_the_primal(norm):
    X, _ = _tiny(60, n=2, T=3, d=4)  # n(T-1) = 4 rows in d = 4: feasible for any selection
    Wk = torch.eye(4, **F64) + torch.tensor(np.triu(np.full((4, 4), 0.3), 1))
    for W in (None, Wk):
        p, lam = svm.prompt_svm(X, alpha=[0, 2], W=W, norm=norm, return_dual=True)
        _, p_ref = prompt_svm_primal(X.numpy(), np.array([0, 2]),
                                     None if W is None else W.numpy(), norm)
        _close(p, p_ref, 1e-6 if norm == "fro" else 1e-4)
        assert lam.shape == (2, 3) and lam[0, 0] == 0 and lam[1, 2] == 0
    # the batched W of a batch of trials
    Xb, _ = _tiny(61, n=2, T=3, d=4, B=2)
    Wb = torch.stack([Wk, Wk.T])
    pb = svm.prompt_svm(Xb, alpha=[[0, 1], [2, 2]], W=Wb, norm=norm)
    for b, a in enumerate(([0, 1], [2, 2])):
        _, p_ref = prompt_svm_primal(Xb[b].numpy(), np.array(a), Wb[b].numpy(), norm)
        _close(pb[b], p_ref, 1e-6 if norm == "fro" else 1e-4)


def test_prompt_svm_frobenius_dual_is_the_oracle():
    X, _ = _tiny(62, n=2, T=3, d=4)
    alpha = [1, 0]
    p, lam = svm.prompt_svm(X, alpha=alpha, return_dual=True)
    Xn = X.numpy()
    keep = [(i, t) for i in range(2) for t in range(3) if t != alpha[i]]
    A = np.array([Xn[i, alpha[i]] - Xn[i, t] for i, t in keep])
    w, lv = _ldp(A, np.ones(len(A)))
    _close(p, w, 1e-6)
    _close([float(lam[i, t]) for i, t in keep], lv, 1e-5)


def test_head_svm_closed_form_and_primal():
    # Y_i v^T x_i >= 1 with x = (2, 0) (Y = 1) and (0, -4) (Y = -1): v = (1/2, 1/4)
    X = torch.tensor([[[2.0, 0.0], [9.0, 9.0]], [[5.0, 5.0], [0.0, -4.0]]], **F64)
    for norm in ("fro", 3.0):
        v, lam = svm.head_svm(X, Y=[1, -1], alpha=[0, 1], norm=norm, return_dual=True)
        _close(v, [0.5, 0.25], 1e-6)
        _, v_ref = head_svm_primal(X.numpy(), np.array([1.0, -1.0]), np.array([0, 1]), norm)
        _close(v, v_ref, 1e-6)
        # fro: v = sum lam_i Y_i x_i -> lam = (1/4, 1/16); lp: p |v|^(p-1) = that sum
        want = [0.25, 1 / 16] if norm == "fro" else [3 * 0.25 / 2, 3 * 0.0625 / 4]
        _close(lam, want, 1e-5)
    data = AttentionData(X, torch.tensor([1.0, -1.0]), v=torch.tensor([1.0, -1.0]))
    # the default selection: Y_i v^T x_it is largest at token 0 of both inputs
    torch.testing.assert_close(svm.head_svm(data), svm.head_svm(X, Y=[1, -1], alpha=[0, 0]))
    with pytest.raises(InfeasibleError, match=r"^v-SVM \(fro\) is infeasible for the selection "
                       r"alpha=\[0, 0\]: the selected tokens are not linearly separable by "
                       r"their labels through the origin\. For tokens in general position it "
                       r"is feasible when d >= n \(here n=2, d=2\)\.$"):
        svm.head_svm(torch.tensor([[[1.0, 0.0]], [[2.0, 0.0]]], **F64), Y=[1, -1],
                     alpha=[0, 0])


def test_relaxed_prompt_svm_closed_form():
    # v-SVM: x_1 = (1, 0) (Y=1), x_2 = (2, 0) (Y=1): v = (1, 0), only input 1 is a support
    # vector; p must beat input 1's other token by 1 and input 2's by 0
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [3.0, 0.0]]], **F64)
    data = AttentionData(X, torch.tensor([1.0, 1.0]))
    p = svm.relaxed_prompt_svm(data, alpha=[0, 0])
    # rows (1, -1) p >= 1, (-1, 0) p >= 0: p = (0, -1)
    torch.testing.assert_close(p, torch.tensor([0.0, -1.0], **F64), atol=1e-7, rtol=0)
    _, p_ref = prompt_svm_primal(X.numpy(), np.array([0, 0]), rhs=np.array([1.0, 0.0]))
    np.testing.assert_allclose(p.numpy(), p_ref, atol=1e-7)
    # v_mm = (1/2, 0): margins 1/2 and 1, both count: the p-SVM, (1,-1)p >= 1, -p1 >= 1
    p2 = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=torch.tensor([0.5, 0.0], **F64))
    torch.testing.assert_close(p2, torch.tensor([-1.0, -2.0], **F64), atol=1e-7, rtol=0)
    # tol: a margin within 1 + tol counts as a support vector, one above it does not
    one = torch.tensor([1.0, 0.0], **F64)
    p3 = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=one * (1 + 0.5e-6), tol=1e-6)
    torch.testing.assert_close(p3, torch.tensor([0.0, -1.0], **F64), atol=1e-7, rtol=0)
    p4 = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=one * (1 + 2e-6), tol=1e-6)
    assert p4.abs().max() < 1e-7  # no margin required: p = 0
    p5 = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=one * (1 + 2e-6), tol=1e-5)
    torch.testing.assert_close(p5, torch.tensor([0.0, -1.0], **F64), atol=1e-7, rtol=0)


def test_sequence_svm_is_att_svm_on_every_query():
    X, _ = _tiny(70, n=1, T=3, d=3)
    X = X / X.norm(dim=-1, keepdim=True)
    alpha = torch.tensor([[0, 0, 2]])
    for causal in (False, True):
        W, lam = svm.sequence_svm(X, alpha, causal=causal, return_dual=True)
        assert lam.shape == (1, 3, 3)
        Wv = cp.Variable((3, 3))
        cons = [(X[0, alpha[0, k]] - X[0, t]).numpy() @ Wv @ X[0, k].numpy() >= 1
                for k in range(3) for t in range(3)
                if t != alpha[0, k] and (t <= k or not causal)]
        cp.Problem(cp.Minimize(cp.sum_squares(Wv)), cons).solve(**TIGHT)
        np.testing.assert_allclose(W.numpy(), Wv.value, atol=1e-6 * np.abs(Wv.value).max())
        if causal:
            assert lam[0, 0].abs().max() == 0 and lam[0, 1, 2] == 0
    # query x_0 = (1, 0) selects x_1: W11 >= 1; query x_1 = (2, 0) selects x_0: -2 W11 >= 1
    Xc = torch.tensor([[[1.0, 0.0], [2.0, 0.0]]], **F64)
    with pytest.raises(InfeasibleError, match=r"^SAtt-SVM \(fro, causal=False\) is infeasible "
                       r"for the selection alpha=\[\[1, 0\]\]: no W separates"):
        svm.sequence_svm(Xc, torch.tensor([[1, 0]]))
    svm.sequence_svm(Xc, torch.tensor([[1, 1]]))  # both select x_1: feasible


def test_svm_equivalence_against_the_primal():
    X, z = _tiny(80, n=2, T=3, d=2)
    O = torch.tensor([[True, True, False], [False, False, True]])
    s = torch.tensor([[0.6, 0.4, 0.0], [0.0, 0.0, 1.0]], **F64)
    Xn, zn = X.numpy(), z.numpy()
    for norm in ("fro", "nuc", 1.5):
        eq = svm.svm_equivalence(X, O, s, norm=norm, z=z)
        Wd = cp.Variable((2, 2))
        cons = [(Xn[0, 0] - Xn[0, 2]) @ Wd @ zn[0] >= 1, (Xn[0, 1] - Xn[0, 2]) @ Wd @ zn[0] >= 1,
                (Xn[0, 1] - Xn[0, 0]) @ Wd @ zn[0] == 0,
                (Xn[1, 2] - Xn[1, 0]) @ Wd @ zn[1] >= 1, (Xn[1, 2] - Xn[1, 1]) @ Wd @ zn[1] >= 1]
        nrm = {"fro": lambda W: cp.norm(W, "fro"), "nuc": cp.normNuc}.get(
            norm, lambda W: cp.pnorm(cp.vec(W, order="C"), 1.5))
        cp.Problem(cp.Minimize(nrm(Wd)), cons).solve(**TIGHT)
        _close(eq.W_dir, Wd.value, 1e-4)
        Wf = cp.Variable((2, 2))
        cp.Problem(cp.Minimize(nrm(Wf)), [(Xn[0, 1] - Xn[0, 0]) @ Wf @ zn[0]
                                          == np.log(0.4 / 0.6)]).solve(**TIGHT)
        _close(eq.W_fin, Wf.value, 1e-4)
    single = svm.svm_equivalence(X, O & torch.tensor([True, False, True]), s.clamp(min=0.1), z=z)
    assert single.W_fin.abs().max() == 0
    with pytest.raises(ValueError, match="selects every token"):
        svm.svm_equivalence(X, torch.ones(2, 3, dtype=torch.bool), s + 0.1, z=z)


# ----------------------------------------------------------------------------- solve_each
def _trials(B=2):
    X, z = _tiny(90, n=2, T=3, d=2, B=B)
    return AttentionData(X, torch.ones(B, 2, **F64), z=z), torch.zeros(B, 2, dtype=torch.long)


def test_solve_each_types_defaults_and_messages(capsys):
    data, alpha = _trials()
    sol = svm.solve_each(data, alpha)
    assert capsys.readouterr().err == ""  # no progress bar by default
    assert sol.W.dtype == sol.lam.dtype == torch.float64
    assert sol.feasible.dtype == sol.failed.dtype == sol.fallback.dtype == torch.bool
    assert sol.feasible.tolist() == [True, True] and not sol.fallback.any()
    for b in range(2):
        W_ref, lam_ref = _att_oracle(data.X[b], data.z[b], [0, 0])
        _close(sol.W[b], W_ref, 1e-6)
        _close(sol.lam[b], lam_ref, 1e-5)
    svm.solve_each(data, alpha, progress=True)
    assert re.search(r"(^|[\r\n])SVM: ", capsys.readouterr().err)  # the bar's label
    svm.solve_each(data, alpha, progress=True, desc="my trials")
    assert "my trials" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^data: solve_each needs data with a trials dimension "
                       r"\(B,n,T,d\)$"):
        svm.solve_each(data.trial(0), alpha)
    with pytest.raises(ValueError, match=r"^alpha: expected shape \(B,n\) with B=2, got "
                       r"\(3, 2\)$"):
        svm.solve_each(data, torch.zeros(3, 2, dtype=torch.long))


def test_solve_each_falls_back_to_scs_by_default(monkeypatch):
    # Clarabel fails on every lp instance: the default config's SCS answers, certified at 1e-3
    data, alpha = _trials()
    real = engine._run

    def clarabel_fails(comp, items, solver, opts, warm):
        if solver == "CLARABEL":
            return "failed", "planted"
        return real(comp, items, solver, opts, warm)

    monkeypatch.setattr(engine, "_run", clarabel_fails)
    sol = svm.solve_each(data, alpha, 1.5)
    assert sol.feasible.tolist() == [True, True] and sol.fallback.tolist() == [True, True]
    assert not sol.failed.any()
    for b in range(2):
        _, W_ref = att_svm_primal(data.X[b].numpy(), data.z[b].numpy(), np.zeros(2, int), 1.5)
        _close(sol.W[b], W_ref, 1e-2)
    sol = svm.solve_each(data, alpha, 1.5, config=SolveConfig())  # Clarabel only
    assert sol.failed.tolist() == [True, True] and not sol.feasible.any()


def test_fast_solvers_answer_fro_and_nuc_and_agree_with_the_oracles():
    # the fast path (svm.fast) certifies its own answers: "fast" is recorded as the solver
    # (an answer it dropped would be re-solved by Clarabel and tagged "CLARABEL")
    X, z = _tiny(95, n=2, T=3, d=2, B=3)
    items = []
    for b in range(3):
        Xn, zn = X[b].numpy(), z[b].numpy()
        D = Xn[:, :1, :] - Xn  # alpha = 0
        active = np.ones((2, 3), dtype=bool)
        active[:, 0] = False
        items.append((b, D, zn, active))
    for norm in ("fro", "nuc"):
        outs = engine.solve_many([matrix_rows(D, zn, ac, norm) for _, D, zn, ac in items],
                                 norm, SolveConfig())
        assert [o[2] for o in outs] == ["fast"] * 3
        for b, (W, lam, _) in enumerate(outs):
            if norm == "fro":
                W_ref, _ = _att_oracle(X[b], z[b], [0, 0])
            else:
                _, W_ref = att_svm_primal(X[b].numpy(), z[b].numpy(), np.zeros(2, int), "nuc")
            _close(W, W_ref, 1e-6 if norm == "fro" else 1e-4)
            assert lam.shape == (6,) and lam.min() >= 0 and lam[[0, 3]].max() == 0
