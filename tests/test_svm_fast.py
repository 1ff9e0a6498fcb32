"""The fast solvers (attnlib.svm.fast) inside the certified path: their answers equal the
per-constraint cvxpy primal (an independent oracle), infeasibility is proved, and a planted
error is caught by the certification."""

import numpy as np
import pytest
import torch

from attnlib import svm
from attnlib.data import random_data
from attnlib.svm import InfeasibleError, SolveConfig, engine, fast
from attnlib.svm.certificate import certify
from attnlib.svm.primal import att_svm_primal
from attnlib.tokens import optimal_tokens, token_margins

FAST, CONIC = SolveConfig(), SolveConfig(fast=False)


def _rows(data, b, norm):
    """The engine's rows of trial b."""
    items, *_ = svm.problems.att_rows(data, None, optimal_tokens(data), norm, None)
    return items[b]


# (n, T, d, trials): some infeasible at d < max(T-1, n), the papers' (6, 8, 10), a wide
# (15, 5, 20), every trial feasible, whose nuclear primal (a 400-unknown SDP) costs about 1 s a
# trial: two trials there
CASES = [(5, 5, 2, 4), (10, 5, 3, 4), (5, 5, 5, 4), (6, 8, 10, 4), (5, 15, 4, 4),
         (15, 5, 20, 2)]


@pytest.mark.slow
@pytest.mark.parametrize("n,T,d,trials", CASES)
@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_fast_answers_equal_the_per_constraint_primal(n, T, d, trials, norm):
    data = random_data(n, T, d, trials=4, seed=n + T + d, device="cpu")
    alpha = optimal_tokens(data)
    sol = svm.solve_each(data, alpha, norm)
    X, z, a = data.X.numpy(), data.z.numpy(), alpha.numpy()
    for b in range(trials):
        value, W = att_svm_primal(X[b], z[b], a[b], norm)
        if W is None:  # the oracle finds no point: the fast path must say infeasible
            assert not sol.feasible[b] and not sol.failed[b]
            continue
        assert sol.feasible[b]
        Wb = sol.W[b].numpy()
        got = np.linalg.norm(Wb, "nuc" if norm == "nuc" else "fro")
        assert got == pytest.approx(value, rel=1e-6)
        if norm == "fro":  # unique optimum
            np.testing.assert_allclose(Wb, W, atol=1e-5 * np.abs(W).max())
        m = token_margins(data.trial(b), torch.as_tensor(Wb), alpha[b])
        assert float(m.masked_fill(m == 0, np.inf).min()) >= 1 - 1e-6


def test_the_fast_path_and_the_conic_path_agree_on_a_mixed_batch():
    data = random_data(10, 5, 4, trials=12, seed=3, device="cpu")  # about 1 in 5 infeasible
    alpha = optimal_tokens(data)
    for norm in ("fro", "nuc"):
        f = svm.solve_each(data, alpha, norm, config=FAST)
        c = svm.solve_each(data, alpha, norm, config=CONIC)
        assert f.feasible.tolist() == c.feasible.tolist() and (~f.feasible).any()
        nf = torch.linalg.matrix_norm(f.W[f.feasible], "nuc" if norm == "nuc" else "fro")
        nc = torch.linalg.matrix_norm(c.W[c.feasible], "nuc" if norm == "nuc" else "fro")
        torch.testing.assert_close(nf, nc, rtol=1e-6, atol=0)


def test_infeasible_instance_is_proved_by_a_verified_farkas_certificate():
    X = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]], dtype=torch.float64)
    z = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    for norm in ("fro", "nuc"):
        with pytest.raises(InfeasibleError, match="infeasible"):
            svm.att_svm(X, z=z, alpha=torch.tensor([1]), norm=norm, config=FAST)
    r = engine.Rows(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, 1.0]), None, None, (2,))
    status, u = fast.ldp(r.A, r.b)
    assert status == "infeasible" and fast.farkas_check(r.A, r.b, u, 1e6)
    # a multiplier that is not a certificate is rejected
    assert not fast.farkas_check(r.A, r.b, np.array([1.0, 0.0]), 1e6)


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_a_planted_error_is_caught_by_the_certification(norm):
    data = random_data(6, 8, 10, trials=1, seed=0, device="cpu")
    r = _rows(data, 0, norm)
    done = engine._fast([r], [0], norm, FAST)
    w, lam = done[0]
    assert certify(r, w, lam, np.zeros(0), norm, 1e-6).ok
    # violate the margin of one support row by 1e-3 (A_k w = 1 - 1e-3)
    k = int(np.argmax(lam))
    bad = w - 1e-3 * r.A[k] / (r.A[k] @ r.A[k])
    cert = certify(r, bad, lam, np.zeros(0), norm, 1e-6)
    assert not cert.ok and cert.margin == pytest.approx(1e-3, rel=1e-6)
    # a multiplier that is not optimal (scaled) fails the duality gap
    assert not certify(r, w, 0.9 * lam, np.zeros(0), norm, 1e-6).ok


def test_an_uncertified_fast_answer_goes_to_the_conic_solvers(monkeypatch):
    data = random_data(6, 8, 10, trials=3, seed=1, device="cpu")
    alpha = optimal_tokens(data)
    ref = svm.att_svm(data, alpha=alpha, norm="fro", config=CONIC)
    real = fast.ldp

    def planted(A, b):  # every fast answer violates its margins by 1%
        status, *rest = real(A, b)
        return (status, 0.99 * rest[0], rest[1]) if status == "solved" else (status, *rest)

    monkeypatch.setattr(engine, "ldp", planted)
    sol = svm.solve_each(data, alpha, "fro", config=FAST)
    assert sol.feasible.all() and not sol.fallback.any()
    torch.testing.assert_close(sol.W, ref.double(), atol=1e-6 * float(ref.abs().max()), rtol=0)


def test_rank_one_factors_and_the_dual_rank_bound():
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal((7, 4)), rng.standard_normal((7, 3))
    A = np.einsum("kj,kl->kjl", u, v).reshape(7, -1)
    fu, fv = fast.rank_one(A, (4, 3))
    np.testing.assert_allclose(np.einsum("kj,kl->kjl", fu, fv).reshape(7, -1), A, atol=1e-14)
    A[0, 0] += 1.0  # no longer rank one
    assert fast.rank_one(A, (4, 3)) is None


def test_dual_bound_on_the_nuclear_rank_against_the_conic_solution():
    from attnlib.experiments.tf_svm_rank import DUAL_ONE, dual_matrix

    data = random_data(5, 5, 5, trials=8, seed=2, device="cpu")
    alpha = optimal_tokens(data)
    f = svm.solve_each(data, alpha, "nuc", config=FAST)
    c = svm.solve_each(data, alpha, "nuc", config=CONIC)  # Clarabel: an independent optimum
    ok = f.feasible & c.feasible
    sy = torch.linalg.svdvals(dual_matrix(data.X[ok], data.z[ok], alpha[ok], f.lam[ok]))
    assert float(sy.max()) <= 1 + 1e-6  # dual feasible
    bound = (sy >= 1 - DUAL_ONE).sum(-1)
    for W in (f.W[ok], c.W[ok]):  # every optimum obeys the bound
        assert (torch.linalg.matrix_rank(W, rtol=1e-6) <= bound).all()
    assert (bound < 5).any()  # the bound is informative (below n = d = 5) somewhere


def _equality_rows():
    """Rows of the directional SVM of the generalised equivalence (chapter 7): each input
    ties the tokens of its selected set (equality rows) and beats the others by 1."""
    g = np.random.default_rng(5)
    X = torch.tensor(g.standard_normal((6, 3, 4, 5)))  # B=6, n=3, T=4, d=5
    z = torch.tensor(g.standard_normal((6, 3, 5)))
    O = torch.zeros(6, 3, 4, dtype=torch.bool)
    O[:, :, 0] = True
    O[:, 0, 2] = True  # input 0 keeps two tokens
    O[:, 1, 1:3] = True  # input 1 keeps three
    return X, z, O, torch.full((6, 3, 4), 0.25, dtype=torch.float64)


def test_equality_rows_take_the_fast_path_and_agree_with_the_conic_path(monkeypatch):
    X, z, O, s = _equality_rows()
    ref = svm.svm_equivalence(X, O, s, z=z, config=CONIC)
    seen = []
    real = engine.solve_many

    def spy(items, norm, config, *a, **k):
        out = real(items, norm, config, *a, **k)
        seen.extend(o[2] for o in out if not isinstance(o, Exception))
        return out

    monkeypatch.setattr(engine, "solve_many", spy)
    got = svm.svm_equivalence(X, O, s, z=z, config=FAST)
    assert seen and set(seen) == {"fast"}, seen  # no instance left to the conic solvers
    scale = float(ref.W_dir.abs().max())
    torch.testing.assert_close(got.W_dir, ref.W_dir, atol=1e-7 * scale, rtol=0)
    # the answer meets its equalities and margins: each selected set tied, beaten by 1
    logit = torch.einsum("bntd,bde,bne->bnt", X, got.W_dir, z)
    top = logit.masked_fill(~O, -np.inf).amax(-1, keepdim=True)
    low = logit.masked_fill(~O, np.inf).amin(-1, keepdim=True)
    assert float((top - low).abs().max()) <= 1e-9 * scale
    assert float((low - logit.masked_fill(O, -np.inf)).amin()) >= 1 - 1e-9


def test_ldp_eq_eliminates_the_equalities():
    g = np.random.default_rng(2)
    A, C = g.standard_normal((6, 5)), g.standard_normal((2, 5))
    b, c = np.ones(6), g.standard_normal(2)
    status, w, lam, mu = fast.ldp_eq(A, b, C, c)
    assert status == "solved"
    r = engine.Rows(A, b, C, c, (5,))
    assert certify(r, w, lam, mu, "fro", 1e-9).ok
    # the KKT point of min |w|^2/2: w = A'lam + C'mu, lam >= 0, complementary slackness
    np.testing.assert_allclose(w, A.T @ lam + C.T @ mu, atol=1e-10)
    assert (lam >= 0).all() and np.abs(lam * (A @ w - b)).max() <= 1e-10
    # equalities that fix w entirely, or inconsistent ones: left to the conic solvers
    assert fast.ldp_eq(A, b, g.standard_normal((5, 5)), c[:1].repeat(5))[0] == "failed"
