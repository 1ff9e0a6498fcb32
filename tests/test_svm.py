"""Tests of attnlib.svm: constraints, optimality against independent formulations, closed forms."""

import cvxpy as cp
import numpy as np
import pytest
import scipy.optimize
import torch

from attnlib import svm
from attnlib.data import AttentionData, random_data
from attnlib.metrics import numerical_rank
from attnlib.svm import InfeasibleError, SolveConfig, engine
from attnlib.tokens import optimal_tokens, token_margins

SEEDS = (0, 1, 2)
TIGHT = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def _rank(W, rtol=1e-6):
    return int(numerical_rank(torch.as_tensor(W), rtol=rtol))


def _rows(data, alpha):
    """One row vec((x_{i a_i} - x_it) z_i^T) per (i, t != a_i), built with plain loops."""
    X, z = data.X.numpy(), data.z.numpy()
    n, T, d = X.shape
    return np.array([np.outer(X[i, alpha[i]] - X[i, t], z[i]).ravel()
                     for i in range(n) for t in range(T) if t != alpha[i]])


def _loop_problem(data, alpha, norm):
    """The official notebooks' formulation: one cvxpy constraint per token, W a matrix."""
    X, z = data.X.numpy(), data.z.numpy()
    n, T, d = X.shape
    W = cp.Variable((d, d))
    cons = [(X[i, t] - X[i, alpha[i]]) @ W @ z[i] <= -1
            for i in range(n) for t in range(T) if t != alpha[i]]
    prob = cp.Problem(cp.Minimize(cp.norm(W, norm)), cons)
    prob.solve(**TIGHT)
    return prob.value, W.value


# ----------------------------------------------------------------------------- closed forms
def _three_token(g3):
    X = torch.tensor([[[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [0.0, 0.0, g3]]], dtype=torch.float64)
    return AttentionData(X, torch.tensor([1.0]), v=torch.tensor([0.0, 0.0, 1.0]))


PROMPT_W = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))


def test_three_token_example_closed_forms():
    data = _three_token(0.9)
    p0 = svm.prompt_svm(data, alpha=[0], W=PROMPT_W)  # E1, alpha = token 1 (1-based)
    torch.testing.assert_close(p0, torch.tensor([-0.09901, 0.99010, 0.0], dtype=torch.float64),
                               atol=1e-5, rtol=0)
    assert abs(0.5 * float(p0 @ p0) - 0.49505) < 1e-5  # the notebook's cvxopt objective
    p1 = svm.prompt_svm(data, alpha=[1], W=PROMPT_W)
    torch.testing.assert_close(p1, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64),
                               atol=1e-6, rtol=0)
    p2 = svm.prompt_svm(data, alpha=[2], W=PROMPT_W)
    torch.testing.assert_close(p2, torch.tensor([-1.0, -1.1, 0.0], dtype=torch.float64),
                               atol=1e-6, rtol=0)


def _joint(third):
    X = torch.tensor([[[0, 0], [1, 1]], [[0, 0], [1, -1]], [[0, 0], third]], dtype=torch.float64)
    return AttentionData(X, torch.tensor([1.0, -1.0, 1.0]))


def test_joint_example_tight_and_relaxed():
    alpha = [1, 1, 1]
    tight, loose = _joint([0.5, 1.0]), _joint([0.5, 1.5])
    f64 = dict(dtype=torch.float64)
    for data in (tight, loose):
        v, lam = svm.head_svm(data, alpha=alpha, return_dual=True)
        torch.testing.assert_close(v, torch.tensor([0.0, 1.0], **f64), atol=1e-6, rtol=0)
    _, lam_loose = svm.head_svm(loose, alpha=alpha, return_dual=True)
    assert lam_loose[2] < 1e-6 < min(lam_loose[0], lam_loose[1])  # input 3 is no support vector
    torch.testing.assert_close(svm.prompt_svm(tight, alpha=alpha),
                               torch.tensor([4 / 3, 1 / 3], **f64), atol=1e-6, rtol=0)
    torch.testing.assert_close(svm.relaxed_prompt_svm(tight, alpha=alpha),
                               torch.tensor([4 / 3, 1 / 3], **f64), atol=1e-6, rtol=0)
    torch.testing.assert_close(svm.prompt_svm(loose, alpha=alpha),
                               torch.tensor([1.25, 0.25], **f64), atol=1e-6, rtol=0)
    torch.testing.assert_close(svm.relaxed_prompt_svm(loose, alpha=alpha),
                               torch.tensor([1.0, 0.0], **f64), atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------- Att-SVM
@pytest.mark.parametrize("norm", ["fro", "nuc", 1.1, 1.5, 3.0])
def test_constraints_hold_and_are_tight(norm):
    data = random_data(6, 8, 10, trials=2, seed=0, device="cpu")
    W = svm.att_svm(data, norm=norm)
    marg = token_margins(data, W, optimal_tokens(data))  # (B, n, T), 0 at the selected token
    other = marg.abs() > 0
    assert marg[other].min() > 1 - 1e-7
    assert (marg.masked_fill(~other, np.inf).amin((-2, -1)) < 1 + 1e-6).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_frobenius_matches_scipy_dual_and_kkt(seed):
    data = random_data(5, 6, 8, seed=seed, device="cpu")
    alpha = optimal_tokens(data)
    W, lam = svm.att_svm(data, alpha=alpha, return_dual=True)
    A = _rows(data, alpha.numpy())
    # dual QP  min 1/2 l'(AA')l - 1'l over l >= 0; with AA' = LL' it is the NNLS problem
    # min ||L'l - L^{-1} 1|| (an exact active-set method); the primal is w = A'l
    L = np.linalg.cholesky(A @ A.T)
    lam_nnls, _ = scipy.optimize.nnls(L.T, np.linalg.solve(L, np.ones(len(A))))
    W_dual = (A.T @ lam_nnls).reshape(W.shape)
    assert np.abs(W.numpy() - W_dual).max() < 1e-6
    # KKT: lam >= 0, W = sum lam_it (x_a - x_t) z_i^T, complementary slackness
    lam_rows = lam.numpy()[np.arange(lam.shape[1]) != alpha.numpy()[:, None]]
    assert lam.min() >= -1e-9
    assert np.abs((A.T @ lam_rows).reshape(W.shape) - W.numpy()).max() < 1e-6
    marg = A @ W.numpy().ravel()
    assert np.abs(lam_rows * (marg - 1)).max() < 1e-7


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_nuclear_matches_primal_sdp_and_is_low_rank(seed):
    data = random_data(4, 6, 8, seed=seed, device="cpu")
    alpha = optimal_tokens(data)
    W = svm.att_svm(data, alpha=alpha, norm="nuc")
    value, W_loop = _loop_problem(data, alpha.numpy(), "nuc")
    nuc = float(torch.linalg.svdvals(W).sum())
    assert abs(nuc - value) < 1e-6 * value
    assert _rank(W) <= data.n and _rank(torch.as_tensor(W_loop)) <= data.n
    P = data.z.T @ torch.linalg.pinv(data.z.T)  # projector onto span{z_i}
    assert (W - W @ P).norm() < 1e-8 * W.norm()  # row space in span{z_i}


@pytest.mark.parametrize("lp", [1.25, 3.0])
def test_lp_matches_scipy_dual(lp):
    data = random_data(4, 5, 6, seed=3, device="cpu")
    alpha = optimal_tokens(data)
    W = svm.att_svm(data, alpha=alpha, norm=lp)
    A = _rows(data, alpha.numpy())
    q = lp / (lp - 1)

    def fun(lm):  # dual of min (1/p)||w||_p^p s.t. Aw >= 1
        u = A.T @ lm
        w = np.sign(u) * np.abs(u) ** (q - 1)
        return np.sum(np.abs(u) ** q) / q - lm.sum(), A @ w - 1

    res = scipy.optimize.minimize(fun, np.full(len(A), 0.1), jac=True, method="L-BFGS-B",
                                  bounds=[(0, None)] * len(A),
                                  options=dict(ftol=1e-15, gtol=1e-12, maxiter=20000))
    u = A.T @ res.x
    W_dual = (np.sign(u) * np.abs(u) ** (q - 1)).reshape(W.shape)
    assert np.abs(W.numpy() - W_dual).max() < 1e-4 * np.abs(W_dual).max()


def test_lp_two_equals_frobenius():
    data = random_data(6, 8, 10, seed=1, device="cpu")
    # the l_p problem goes through a power cone, solved to ~1e-6 relative accuracy
    W2, Wf = svm.att_svm(data, norm=2.0), svm.att_svm(data, norm="fro")
    assert (W2 - Wf).abs().max() < 2e-5 * Wf.abs().max()


def test_frobenius_rank_is_min_n_d():
    data = random_data(4, 5, 8, trials=2, seed=0, device="cpu")
    for W in svm.att_svm(data, norm="fro"):
        assert _rank(W) == 4


def test_batched_equals_looped_and_one_vectorized_constraint():
    data = random_data(5, 6, 7, trials=3, seed=4, device="cpu")
    conic = SolveConfig(fast=False)  # the compiled cvxpy problems (the fast solvers compile none)
    Wb = svm.att_svm(data, norm="fro", config=conic)
    for b in range(3):
        torch.testing.assert_close(Wb[b], svm.att_svm(data.trial(b), norm="fro", config=conic),
                                   atol=1e-10, rtol=0)
    info = engine.compiled.cache_info()
    svm.att_svm(data.trial(0), norm="fro", config=conic)
    assert engine.compiled.cache_info().hits == info.hits + 1  # same shape: compiled once
    # one matrix constraint: none (Frobenius dual, lam >= 0), the LMI (nuclear), the margins
    # and one vectorized power cone (lp)
    for norm, count in [("fro", 0), ("nuc", 1), (1.5, 2)]:
        svm.att_svm(data.trial(0), norm=norm, config=conic)
        assert len(engine.compiled(5 * 6, 0, (7, 5) if norm != 1.5 else (7, 7), norm)
                   .prob.constraints) == count


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_batch_equals_single_solves(norm, fast):
    data = random_data(4, 5, 6, trials=10, seed=8, device="cpu")  # one chunk of 8 + 2 singles
    cfg = SolveConfig(fast=fast)
    Wb, lamb = svm.att_svm(data, norm=norm, return_dual=True, config=cfg)
    for b in (0, 5, 9):
        W1, lam1 = svm.att_svm(data.trial(b), norm=norm, return_dual=True, config=cfg)
        tol = 1e-6 if norm == "fro" else 1e-5  # an SDP's W is ~1e-6 accurate
        torch.testing.assert_close(Wb[b], W1, atol=tol, rtol=0)
        torch.testing.assert_close(lamb[b], lam1, atol=10 * tol, rtol=0)


def test_infeasible_trial_in_a_chunk_is_named():
    X = torch.nn.functional.normalize(
        torch.randn(10, 1, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)),
        dim=-1)
    X[5, 0] = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])  # token 2 between the others
    z = torch.tensor([[[1.0, 0.0]]], dtype=torch.float64).expand(10, 1, 2)
    alpha = torch.ones(10, 1, dtype=torch.long)  # on the unit circle every token is separable
    alpha[5] = 1  # the middle token of trial 5 is not
    with pytest.raises(InfeasibleError, match=r"alpha=\[1\] \(trial 5\)"):
        svm.att_svm(X, z=z, alpha=alpha, norm="fro")


def test_result_follows_input_dtype_and_device_arguments():
    data = random_data(3, 4, 5, seed=0, device="cpu")
    W = svm.att_svm(data.X.float(), z=data.z.float(), alpha=optimal_tokens(data))
    assert W.dtype == torch.float32 and W.shape == (5, 5)
    W64 = svm.att_svm(data.X.numpy(), z=data.z.numpy(), alpha=optimal_tokens(data),
                      dtype=torch.float64)
    assert W64.dtype == torch.float64 and W64.device.type == "cpu"


# ----------------------------------------------------------------------------- sequences
def test_sequence_svm_matches_loop_formulation():
    torch.manual_seed(0)
    X = torch.nn.functional.normalize(torch.randn(2, 3, 5, dtype=torch.float64), dim=-1)
    alpha = torch.tensor([[0, 1, 0], [0, 0, 2]])  # causal: query k selects a token <= k
    W, lam = svm.sequence_svm(X, alpha, causal=True, return_dual=True)
    assert lam.shape == (2, 3, 3)
    Wv = cp.Variable((5, 5))
    cons = [(X[i, alpha[i, k]] - X[i, t]).numpy() @ Wv @ X[i, k].numpy() >= 1
            for i in range(2) for k in range(3) for t in range(k + 1) if t != alpha[i, k]]
    cp.Problem(cp.Minimize(cp.sum_squares(Wv)), cons).solve(**TIGHT)
    assert np.abs(W.numpy() - Wv.value).max() < 1e-6
    full = svm.sequence_svm(X, torch.tensor([[0, 1, 2], [2, 0, 1]]), causal=False)
    a = torch.einsum("itd,de,ike->ikt", X, full, X)  # logits of every query
    assert (a.argmax(-1) == torch.tensor([[0, 1, 2], [2, 0, 1]])).all()
    with pytest.raises(ValueError, match="causal"):
        svm.sequence_svm(X, torch.tensor([[1, 1, 0], [0, 0, 2]]), causal=True)


# ----------------------------------------------------------------------------- SVM equivalence
def test_svm_equivalence_parts():
    data = random_data(3, 4, 6, seed=2, device="cpu")
    O = torch.tensor([[1, 1, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]], dtype=torch.bool)
    s = torch.tensor([[0.7, 0.3, 0, 0], [0, 1.0, 0, 0], [0, 0, 0.4, 0.6]], dtype=torch.float64)
    W_fin, W_dir = svm.svm_equivalence(data, O, s)
    a_dir = torch.einsum("ntd,de,ne->nt", data.X, W_dir, data.z)
    a_fin = torch.einsum("ntd,de,ne->nt", data.X, W_fin, data.z)
    assert abs(a_dir[0, 0] - a_dir[0, 1]) < 1e-7 and abs(a_dir[2, 2] - a_dir[2, 3]) < 1e-7
    for i, (inside, outside) in enumerate([([0, 1], [2, 3]), ([1], [0, 2, 3]), ([2, 3], [0, 1])]):
        assert (a_dir[i, inside].min() - a_dir[i, outside].max()) > 1 - 1e-7
    assert abs(float(a_fin[0, 1] - a_fin[0, 0]) - np.log(0.3 / 0.7)) < 1e-9
    assert abs(float(a_fin[2, 3] - a_fin[2, 2]) - np.log(0.6 / 0.4)) < 1e-9
    assert abs(float((W_fin * W_dir).sum())) < 1e-7 * float(W_fin.norm() * W_dir.norm())
    eq = svm.Equivalence(W_fin, W_dir)
    torch.testing.assert_close(eq.fit(W_fin + 7 * W_dir), W_fin + 7 * W_dir)
    # singleton sets: W_fin = 0 and W_dir is the Att-SVM of that selection
    alpha = torch.tensor([1, 0, 3])
    single = torch.nn.functional.one_hot(alpha, 4).bool()
    W_fin1, W_dir1 = svm.svm_equivalence(data, single, single.double())
    assert W_fin1.abs().max() == 0
    torch.testing.assert_close(W_dir1, svm.att_svm(data, alpha=alpha), atol=1e-6, rtol=0)


def test_svm_equivalence_nuclear_constraints():
    data = random_data(3, 4, 6, seed=2, device="cpu")
    O = torch.tensor([[1, 1, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]], dtype=torch.bool)
    s = torch.tensor([[0.7, 0.3, 0, 0], [0, 1.0, 0, 0], [0, 0, 0.4, 0.6]], dtype=torch.float64)
    W_fin, W_dir = svm.svm_equivalence(data, O, s, norm="nuc")
    a_dir = torch.einsum("ntd,de,ne->nt", data.X, W_dir, data.z)
    a_fin = torch.einsum("ntd,de,ne->nt", data.X, W_fin, data.z)
    assert abs(a_dir[0, 0] - a_dir[0, 1]) < 1e-7 and abs(a_dir[2, 2] - a_dir[2, 3]) < 1e-7
    assert (a_dir[0, :2].min() - a_dir[0, 2:].max()) > 1 - 1e-7
    assert abs(float(a_fin[2, 3] - a_fin[2, 2]) - np.log(0.6 / 0.4)) < 1e-7
    fro = svm.svm_equivalence(data, O, s, norm="fro")
    assert torch.linalg.svdvals(W_dir).sum() <= torch.linalg.svdvals(fro.W_dir).sum() + 1e-7


def test_prompt_and_relaxed_batched_equal_single():
    data = random_data(3, 4, 8, trials=3, seed=6, device="cpu")
    p = svm.prompt_svm(data)
    v_mm = svm.head_svm(data)
    pr = svm.relaxed_prompt_svm(data, v_mm=v_mm)
    for b in range(3):
        torch.testing.assert_close(p[b], svm.prompt_svm(data.trial(b)), atol=1e-8, rtol=0)
        torch.testing.assert_close(v_mm[b], svm.head_svm(data.trial(b)), atol=1e-8, rtol=0)
        torch.testing.assert_close(pr[b], svm.relaxed_prompt_svm(data.trial(b)), atol=1e-7,
                                   rtol=0)


def test_sequence_svm_default_selection_is_optimal():
    torch.manual_seed(1)
    X = torch.nn.functional.normalize(torch.randn(2, 3, 8, dtype=torch.float64), dim=-1)
    Y = torch.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]])
    v = torch.nn.functional.normalize(torch.randn(8, dtype=torch.float64), dim=0)
    gam = Y[..., None] * (X @ v)[:, None, :]  # (n, query k, token t)
    for causal in (False, True):
        W = svm.sequence_svm(X, Y=Y, v=v, causal=causal)
        a = torch.einsum("itd,de,ike->ikt", X, W, X)  # logits of every query
        if causal:
            hide = ~torch.tril(torch.ones(3, 3, dtype=torch.bool))
            a, g = a.masked_fill(hide, -np.inf), gam.masked_fill(hide, -np.inf)
        else:
            g = gam
        assert (a.argmax(-1) == g.argmax(-1)).all()


# ----------------------------------------------------------------------------- errors
def _infeasible_data():
    X = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]], dtype=torch.float64)  # x_2 between
    return AttentionData(X, torch.tensor([1.0]), z=torch.tensor([[1.0, 0.0]]),
                         v=torch.tensor([1.0, 0.0]))


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.5])
def test_infeasible_raises(norm):
    data = _infeasible_data()
    with pytest.raises(InfeasibleError, match=r"alpha=\[1\].*max\(T-1, n\)"):
        svm.att_svm(data, alpha=[1], norm=norm)
    assert issubclass(InfeasibleError, ValueError)


def test_infeasible_prompt_and_head():
    data = _infeasible_data()
    with pytest.raises(InfeasibleError, match=r"alpha=\[1\]"):
        svm.prompt_svm(data, alpha=[1])
    X = torch.tensor([[[1.0, 0.0]], [[1.0, 0.0]]], dtype=torch.float64)  # same token, both labels
    with pytest.raises(InfeasibleError, match="separable"):
        svm.head_svm(X, Y=[1, -1], alpha=[0, 0])


def test_bad_inputs():
    data = random_data(3, 4, 5, seed=0, device="cpu")
    for norm, msg in [("l1", "norm"), (1.0, "lp > 1"), (0.5, "lp > 1"), (True, "norm")]:
        with pytest.raises(ValueError, match=msg):
            svm.att_svm(data, norm=norm)
    with pytest.raises(ValueError, match="norm"):
        svm.prompt_svm(data, norm="nuc")
    with pytest.raises(ValueError, match="alpha"):
        svm.att_svm(data, alpha=[0, 1, 4])
    with pytest.raises(ValueError, match="alpha"):
        svm.att_svm(data, alpha=[0, 1])
    with pytest.raises(ValueError, match="alpha"):
        svm.att_svm(data.X, z=data.z)  # raw X: no head, so no default selection
    with pytest.raises(ValueError, match="z"):
        svm.att_svm(data.X, z=data.z[:2], alpha=[0, 0, 0])
    bad = data.X.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        svm.att_svm(bad, z=data.z, alpha=[0, 0, 0])
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[0, 0] = False
    with pytest.raises(ValueError, match="visible"):
        svm.att_svm(data, alpha=[0, 0, 0], mask=mask)
    with pytest.raises(ValueError, match="Y"):
        svm.head_svm(data, Y=[1, 2, 1])
    O = torch.zeros(3, 4, dtype=torch.bool)
    O[:2, 0] = True
    with pytest.raises(ValueError, match="O"):
        svm.svm_equivalence(data, O, torch.full((3, 4), 0.25))
    O[2, 1] = True
    with pytest.raises(ValueError, match="s"):
        svm.svm_equivalence(data, O, torch.zeros(3, 4))
