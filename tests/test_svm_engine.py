"""The SVM solve path on tiny instances (n, T, d <= 3: each solve takes milliseconds).

Every answer is compared with an oracle that shares no code with attnlib.svm.engine
(tests/svm_oracles.py): the Lawson-Hanson least-distance program (one scipy NNLS, exact up to
rounding) for the Frobenius problems, the per-constraint cvxpy primal (attnlib.svm.primal, or
written out here) for the nuclear and lp ones, closed forms of hand-made instances, and Farkas
certificates checked by hand. Fast enough to be the mutation-testing selection of attnlib/svm
(benchmarks/mutation.py). The prompt, head, relaxed, sequence and equivalence problems and
solve_each: test_svm_problems.py."""


import numpy as np
import pytest
import torch
from svm_oracles import CONIC, F64, att_oracle, att_rows, close, ldp, tiny

from attnlib import svm
from attnlib.svm import InfeasibleError, SolveConfig, UncertifiedError, engine
from attnlib.svm.certificate import certify, farkas
from attnlib.svm.engine import Rows
from attnlib.svm.primal import att_svm_primal
from attnlib.svm.rows import matrix_rows, row_basis


# ----------------------------------------------------------------------------- Frobenius
@pytest.mark.parametrize("seed", range(4))
def test_frobenius_equals_the_nnls_least_distance_oracle(seed):
    X, z = tiny(seed)
    alpha = [seed % 3, (seed + 1) % 3]
    W, lam = svm.att_svm(X, z=z, alpha=alpha, return_dual=True)
    W_ref, lam_ref = att_oracle(X, z, alpha)
    assert W.shape == (2, 2) and lam.shape == (2, 3) and W.dtype == torch.float64
    close(W, W_ref, 1e-6)
    close(lam, lam_ref, 1e-5)


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
    X, z = tiny(10, B=11)  # one chunk of 8, then 3 instances alone
    alpha = torch.tensor([[b % 3, (b + 2) % 3] for b in range(11)])
    W, lam = svm.att_svm(X, z=z, alpha=alpha, return_dual=True, config=config)
    assert W.shape == (11, 2, 2) and lam.shape == (11, 2, 3)
    for b in range(11):
        W_ref, lam_ref = att_oracle(X[b], z[b], alpha[b].tolist())
        close(W[b], W_ref, 1e-6)
        close(lam[b], lam_ref, 1e-5)


def test_a_chunk_member_that_fails_is_resolved_alone():
    # trial 3's rows are scaled by 1e-6: outside rescale_outside, so its chunk goes one by one
    X, z = tiny(11, B=8)
    c = torch.tensor([1, 1, 1, 1e-3, 1, 1, 1, 1], **F64)
    alpha = torch.zeros(8, 2, dtype=torch.long)
    W = svm.att_svm(X * c[:, None, None, None], z=z * c[:, None, None], alpha=alpha,
                    config=CONIC)
    for b in range(8):
        W_ref, _ = att_oracle(X[b], z[b], [0, 0])  # W(cX, cz) = W(X, z) / c^2
        close(W[b] * c[b] ** 2, W_ref, 1e-5)


@pytest.mark.parametrize("config", [CONIC, SolveConfig()])
def test_infeasible_member_of_a_chunk_is_named(config):
    X, z = tiny(12, n=1, T=3, d=2, B=9)
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
    X, z = tiny(13, n=2, T=3, d=2)
    mask = torch.tensor([[True, False, True], [True, True, True]])
    W, lam = svm.att_svm(X, z=z, alpha=[0, 2], mask=mask, return_dual=True)
    W_ref, lam_ref = att_oracle(X, z, [0, 2], mask.tolist())
    close(W, W_ref, 1e-6)
    assert lam[0, 1] == 0 and lam[0, 0] == 0 and lam[1, 2] == 0
    close(lam, lam_ref, 1e-5)
    with pytest.raises(InfeasibleError, match=r"over the other visible tokens"):
        Xi = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]], **F64)
        svm.att_svm(Xi, z=torch.tensor([[1.0, 0.0]], **F64), alpha=[1],
                    mask=torch.tensor([[True, True, True]]))


def test_rank_deficient_queries_use_their_span():
    # both queries on one line: W = M U^T with U the unit vector of that line
    X, _ = tiny(14, n=2, T=3, d=3)
    z = torch.tensor([[1.0, 2.0, 0.0], [-2.0, -4.0, 0.0]], **F64)
    W = svm.att_svm(X, z=z, alpha=[0, 1])
    W_ref, _ = att_oracle(X, z, [0, 1])
    close(W, W_ref, 1e-6)
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
    X, z = tiny(20 + seed, n=2, T=3, d=2)
    alpha = [1, 2]
    W, lam = svm.att_svm(X, z=z, alpha=alpha, norm=norm, return_dual=True)
    value, W_ref = att_svm_primal(X.numpy(), z.numpy(), np.array(alpha), norm)
    close(W, W_ref, 1e-4)
    A, keep = att_rows(X.numpy(), z.numpy(), alpha)
    lv = np.array([float(lam[i, t]) for i, t in keep])
    w = W.numpy().ravel()
    assert lv.min() >= -1e-9 and lam[0, 1] == 0 and lam[1, 2] == 0
    assert np.abs(lv * (A @ w - 1)).max() < 1e-6  # complementary slackness
    if norm == "nuc":  # dual: sum lam = ||W||_*, ||mat(A'lam)||_2 = 1
        assert abs(lv.sum() - value) < 1e-6 * value
        assert abs(np.linalg.norm((A.T @ lv).reshape(2, 2), 2) - 1) < 1e-6
    else:  # gradient of sum |w|^p = A'lam
        close(A.T @ lv, norm * np.sign(w) * np.abs(w) ** (norm - 1), 1e-4)
        assert abs(np.linalg.norm(w, norm) - value) < 1e-6 * value


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.5])
@pytest.mark.parametrize("c", [1e-3, 1e3])
def test_badly_scaled_tiny_data_scale_back_exactly(norm, c):
    # rows scale by c^2 (outside rescale_outside): W(cX, cz) = W / c^2 and the multipliers by
    # 1/c^4 (fro), 1/c^2 (nuc), 1/c^(2p) (lp)
    X, z = tiny(30, n=2, T=3, d=2)
    W1, lam1 = svm.att_svm(X, z=z, alpha=[0, 1], norm=norm, return_dual=True)
    Wc, lamc = svm.att_svm(X * c, z=z * c, alpha=[0, 1], norm=norm, return_dual=True)
    k = {"fro": 4.0, "nuc": 2.0}.get(norm, 2 * 1.5)
    lp = not isinstance(norm, str)  # lp answers depend on the warm start (~1e-5 relative)
    close(Wc * c**2, W1, 1e-4 if lp else 1e-5)
    close(lamc * c**k, lam1, 1e-3 if lp else 1e-4)


def test_rescaling_after_an_uncertified_raw_attempt():
    # with no rescaling up front, the raw attempt at scale 1e4 is tried first; the answer is
    # certified either way and equals the oracle
    X, z = tiny(31, n=2, T=3, d=2)
    cfg = SolveConfig(rescale_outside=(1e-30, 1e30))
    W_ref, _ = att_oracle(X, z, [2, 0])
    for c in (1e-4, 1e4):
        W = svm.att_svm(X * c, z=z * c, alpha=[2, 0], config=cfg)
        close(W * c**2, W_ref, 1e-5)


# ----------------------------------------------------------------------------- infeasible
def _collinear():
    X = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]], **F64)
    return X, torch.tensor([[1.0, 0.0]], **F64)


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.5])
def test_infeasible_confirmed_at_every_scale(norm):
    X, z = _collinear()
    # the oracle agrees: a zero NNLS residual is a Farkas certificate
    A, _ = att_rows(X.numpy(), z.numpy(), [1])
    assert ldp(A, np.ones(2)) is None
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
    X, z = tiny(40, n=2, T=3, d=2)
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
    W_ref, _ = att_oracle(X, z, [0, 1])
    assert np.abs(W.numpy() - W_ref).max() < 1e-2 * np.abs(W_ref).max()


def test_uncertified_error_names_the_instance_and_tolerance():
    X, z = tiny(41, n=2, T=3, d=2)
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
    X, z = tiny(50, n=2, T=3, d=2)
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
    X, z = tiny(51, n=2, T=3, d=2)
    Xn, zn = X.numpy(), z.numpy()
    alpha = np.array([1, 0])
    D = Xn[np.arange(2), alpha][:, None, :] - Xn
    active = np.ones((2, 3), dtype=bool)
    active[np.arange(2), alpha] = False
    r = matrix_rows(D, zn, active, 1.5)
    A, keep = att_rows(Xn, zn, alpha)
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


def test_fresh_start_makes_an_answer_independent_of_the_one_before():
    """A warm-started Clarabel answer depends on the instance solved before it (here by about
    5e-6 of W, inside its certified tolerance); after ``fresh_start`` the next solve is the one
    of a new process. ``attnlib.experiments.run`` starts each experiment so, and its numbers do
    not depend on what ran before it."""
    from attnlib.data import random_data
    from attnlib.svm.engine import fresh_start

    A, B = (random_data(4, 3, 6, trials=1, seed=s, device="cpu") for s in (1, 2))
    fresh_start()
    first = svm.att_svm(B, norm=1.5)
    svm.att_svm(A, norm=1.5)
    warm = svm.att_svm(B, norm=1.5)
    svm.att_svm(A, norm=1.5)
    fresh_start()
    cold = svm.att_svm(B, norm=1.5)
    assert not torch.equal(warm, first)  # the dependence removed (else this test shows nothing)
    assert torch.equal(cold, first)


def test_each_experiment_starts_its_solvers_cold(monkeypatch, tmp_path):
    import attnlib.experiments.result as result

    calls = []
    monkeypatch.setattr(result, "fresh_start", lambda: calls.append(1))
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    result.run("mm_ray_risk", cache=False)
    assert calls == [1]
