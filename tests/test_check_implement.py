"""attnlib.check.implement: the checks of the exercises where the learner implements the idea.

The oracles are written here, independent of the checks' own (finite differences, NNLS,
vectorised softmax): the risk by a loop over samples and tokens, the gradients by
attnlib.models' analytic formulas, Att-SVM solutions solved by hand (one or two constraints)
or by the library's solvers, causal attention by a loop over queries. On random instances the
right answer passes in any layout and up to the documented tolerance, and each documented
mistake fails with a message that names it, never showing the expected value.
"""

import math
import re

import numpy as np
import pytest
import torch
from check_helpers import assert_no_leak

import attnlib as al
from attnlib import models as M
from attnlib.check.implement import (
    check_att_svm,
    check_causal_attention,
    check_gd_step,
    check_kq_step,
    risk_oracle,
)

F64 = dict(dtype=torch.float64)
INSTANCES = [(4, 3, 3, 2), (4, 2, 3, 2), (3, 5, 2, 0)]  # (n, T, d, seed): T = d and T != d


def instance(n, T, d, seed):
    return al.random_data(n=n, T=T, d=d, seed=seed)


def risk_loop(X, Y, z, v, W):
    X, Y, z, v, W = (np.asarray(a, float) for a in (X, Y, z, v, W))
    total = 0.0
    for i in range(len(Y)):
        a = [X[i, t] @ W @ z[i] for t in range(X.shape[1])]
        e = [math.exp(x - max(a)) for x in a]
        f = sum(e[t] / sum(e) * (X[i, t] @ v) for t in range(len(e)))
        total += math.log1p(math.exp(-Y[i] * f)) if -Y[i] * f < 30 else -Y[i] * f
    return total / len(Y)


def tol(x, rtol, atol):
    return atol + rtol * np.abs(np.asarray(x))


def reads_as_feedback(fb, title, right=(), own=()):
    """A failed verdict: its title, a sentence, and no entry of the right answer in it (at
    any precision; a number of the learner's own answer ``own`` may show)."""
    assert not fb and fb.title == title and fb.message.endswith("."), fb
    assert_no_leak(fb.message, right, own)


def test_assert_no_leak_reads_each_number_at_its_own_precision():
    for message, expected in (("mass near 0.19.", 0.19278), ("W[0, 0] is -1.234", -1.23412),
                              ("about 1.23e-02", [5.0, 0.012345]), ("is −0.50", [0.4961])):
        with pytest.raises(AssertionError, match="shows the expected"):
            assert_no_leak(message, expected)
    assert_no_leak("yours 0.1928 is off", 0.19278, own=[0.19281])  # the learner's own number
    assert_no_leak("3 of 9 entries, X[0, 1]: 0.5 or 2e-06", [3.0, 9.0, 0.52, 2.04e-6])
    assert_no_leak("0.194 and 1.2346", [0.19278, 1.23412])  # rounded, not equal


def test_risk_oracle_is_the_definition_even_with_huge_logits():
    data = instance(4, 3, 3, 2)
    X, Y, z, v = data.X, data.Y, data.z, data.v
    g = torch.Generator().manual_seed(0)
    X0 = X.clone()
    X0[0] *= 1e-3  # sample 0's logits ~1e-3, the others' ~1e3: each shifted by its own max
    for Xs, scale in ((X, 0.3), (X, 400.0), (X0, 400.0)):  # 400: exp overflows unshifted
        W = scale * torch.randn(3, 3, generator=g, **F64)
        r = risk_oracle(Xs, Y, z, v, W)
        assert np.isfinite(r) and r == pytest.approx(risk_loop(Xs, Y, z, v, W), rel=1e-10)
    W = 0.3 * torch.randn(3, 3, generator=g, **F64)
    L = float(M.risk(X, Y, M.softmax(M.logits(X, W, z)), v))
    assert risk_oracle(X, Y, z, v, W) == pytest.approx(L, rel=1e-12)
    f32 = [a.float() for a in (X, Y, z, v, W)]  # float32 inputs computed in float64
    r = risk_oracle(*f32)
    assert r.dtype == np.float64 and r == pytest.approx(risk_loop(*f32), rel=1e-13)
    Ws = torch.randn(2, 5, 3, 3, generator=g, **F64)  # batched over leading dims of W
    r = risk_oracle(X, Y, z, v, Ws)
    assert r.shape == (2, 5) and r[1, 3] == pytest.approx(risk_loop(X, Y, z, v, Ws[1, 3]),
                                                          rel=1e-10)


# ------------------------------------------------------------------------- one GD step on W
GD_MISTAKES = {"up the gradient": lambda W, G, lr, n: W + lr * G,
               "transposed": lambda W, G, lr, n: W - lr * G.T,
               "divide by n": lambda W, G, lr, n: W - lr * n * G,
               "step size η is missing": lambda W, G, lr, n: W - G}


@pytest.mark.parametrize("inst", INSTANCES)
def test_gd_step_passes_the_analytic_step_and_names_each_mistake(inst):
    data = instance(*inst)
    d = data.X.shape[-1]
    W = 0.3 * torch.randn(d, d, generator=torch.Generator().manual_seed(inst[-1]), **F64)
    lr = 0.5
    right = W - lr * M.grad_W(data.X, data.Y, data.z, W, data.v)
    G = M.grad_W(data.X, data.Y, data.z, W, data.v)
    for answer, step in ((right, lr), (right.numpy(), "0.5"), (right.tolist(), np.float32(lr)),
                         (right.reshape(-1), lr)):
        fb = check_gd_step(answer, W, data, step)
        assert fb and fb.title == "W after one GD step" and f"all {d * d} entries" in fb.message
    # the tolerance, |answer - right| <= 1e-8 + 1e-6 |right| entrywise
    t = torch.as_tensor(tol(right, 1e-6, 1e-8))
    assert check_gd_step(right + 0.9 * t, W, data, lr)
    near = right - 1.1 * t * (torch.arange(d * d).reshape(d, d) % 2)
    fb = check_gd_step(near, W, data, lr)
    reads_as_feedback(fb, "W after one GD step", right, own=near)
    half = d * d // 2
    assert f"{half} of {d * d} entries" in fb.message and fb.details["entries_off"] == half
    for hint, mistake in GD_MISTAKES.items():
        wrong = mistake(W, G, lr, data.n)
        fb = check_gd_step(wrong, W, data, lr)
        reads_as_feedback(fb, "W after one GD step", right, own=wrong)
        assert hint in fb.message, (hint, fb.message)


def test_gd_step_reads_its_arguments():
    data = instance(4, 2, 3, 2)
    W = torch.eye(3, **F64)
    assert "W after one GD step is None" in check_gd_step(None, W, data, 0.1).message
    for bad in (0, -1, math.inf, math.nan):
        with pytest.raises(ValueError, match=f"lr must be a positive number, got {float(bad)}"):
            check_gd_step(W, W, data, bad)
    for Wb in (W[:, :2], W[:2, :2]):  # (d, d), not (T, T): T = 2 here
        with pytest.raises(ValueError, match=re.escape(
                f"W must have shape (d, d) = (3, 3), got {tuple(Wb.shape)}")):
            check_gd_step(W, Wb, data, 0.1)
    for part in (dict(z=None, v=data.v), dict(z=data.z, v=None)):
        with pytest.raises(ValueError, match="must carry the queries z and the head v"):
            check_gd_step(W, W, al.AttentionData(data.X, data.Y, **part), 0.1)
    with pytest.raises(ValueError, match="one instance"):
        check_gd_step(W, W, al.random_data(n=4, T=3, d=3, trials=2, seed=2), 0.1)


# ------------------------------------------------------------------- one GD step on (K, Q)
def kq_mistakes(data, K, Q, lr):
    gK, gQ = M.grad_KQ(data.X, data.Y, data.z, K, Q, data.v)
    K1, n = K - lr * gK, data.n
    gQ1 = M.grad_KQ(data.X, data.Y, data.z, K1, Q, data.v)[1]
    G = M.grad_W(data.X, data.Y, data.z, K @ Q.T, data.v)
    return (K1, Q - lr * gQ), {
        "up the gradient": (K + lr * gK, Q + lr * gQ),
        "used the updated K": (K1, Q - lr * gQ1),
        "swapped": (K - lr * G.T @ Q, Q - lr * G @ K),
        "step size η is missing": (K - gK, Q - gQ),
        "summed loss": (K - lr * n * gK, Q - lr * n * gQ),
        "transpose is missing in ∇_Q L": (K1, Q - lr * G @ K),
        "∇_K L has a transpose too many": (K - lr * G.T @ Q, Q - lr * gQ)}


@pytest.mark.parametrize("inst", INSTANCES)
def test_kq_step_passes_the_analytic_step_and_names_each_mistake(inst):
    data, d, m = instance(*inst), inst[2], 2
    g = torch.Generator().manual_seed(3 + inst[-1])
    K, Q = (0.5 * torch.randn(d, m, generator=g, **F64) for _ in "KQ")
    lr, title = 0.7, "(K, Q) after one GD step"
    right, mistakes = kq_mistakes(data, K, Q, lr)
    for answer in (right, list(right), [right[0].tolist(), right[1].numpy()]):
        fb = check_kq_step(answer, K, Q, data, lr)
        assert fb and fb.title == title and f"all {2 * d * m} entries" in fb.message
    t = torch.as_tensor(tol(right[1], 1e-6, 1e-8))
    assert check_kq_step((right[0], right[1] + 0.9 * t), K, Q, data, lr)
    fb = check_kq_step((right[0], right[1] - 1.1 * t), K, Q, data, lr)
    reads_as_feedback(fb, title, right, own=(right[0], right[1] - 1.1 * t))
    assert f"{d * m} of {2 * d * m} entries of (K_next, Q_next) stacked" in fb.message
    assert fb.details == {"entries_off": d * m}
    for hint, wrong in mistakes.items():
        fb = check_kq_step(wrong, K, Q, data, lr)
        reads_as_feedback(fb, title, right, own=wrong)
        assert hint in fb.message, (hint, fb.message)


def test_kq_step_reads_its_arguments():
    data = instance(4, 3, 3, 2)
    K, Q = torch.ones(3, 2, **F64), torch.zeros(3, 2, **F64)
    right = (K, Q)
    for answer, facts in (
            (None, ["KQ_next is None"]), (K, ["the pair (K_next, Q_next)"]),
            ((K,), ["the pair"]), ((K, Q, K), ["the pair"]), ((K, None), ["Q_next is None"]),
            ((None, Q), ["K_next is None"]), ((K, Q[:2]), ["shape (3, 2)", "(3, 2) and (2, 2)"]),
            ((K.T, Q), ["shape (3, 2)", "(2, 3) and (3, 2)"])):
        fb = check_kq_step(answer, K, Q, data, 0.1)
        reads_as_feedback(fb, "(K, Q) after one GD step")
        assert all(f in fb.message for f in facts), (facts, fb.message)
    for K_, Q_ in ((K[:, 0], Q[:, 0]), (K, Q[:, :1]), (K[:2], Q[:2])):
        with pytest.raises(ValueError, match=re.escape(
                f"K and Q must both have shape (d, m) with d = 3, got {tuple(K_.shape)} and "
                f"{tuple(Q_.shape)}")):
            check_kq_step(right, K_, Q_, data, 0.1)
    with pytest.raises(ValueError, match="lr must be a positive number, got 0.0"):
        check_kq_step(right, K, Q, data, 0.0)


# ---------------------------------------------------------------------------------- Att-SVM
def one_constraint(z=(1.0, 0.0)):
    """n = 1, T = 2, d = 2, x_0 − x_1 = (2, 0): (x_0 − x_1)ᵀ W z ≥ 1 has the minimum-norm
    solution W = e1 zᵀ / (2 |z|²)."""
    X = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]], **F64)
    return al.AttentionData(X, torch.tensor([1.0], **F64), z=torch.tensor([z], **F64),
                            v=torch.tensor([1.0, 0.0], **F64))


def test_att_svm_on_a_hand_solved_case_up_to_its_tolerances():
    """Feasibility up to 1e-6 (1 + max|A| max|w|) = 2e-6 here, activity up to 1e-5 (1 + max
    margin) ≈ 2e-5; a selection or alpha of any layout holding n indices."""
    data, title = one_constraint(), "Att-SVM (W)"
    W = torch.tensor([[0.5, 0.0], [0.0, 0.0]], **F64)
    for answer, dat, alpha in ((W, data, [0]), (W.reshape(-1).tolist(), data, [[0]]),
                               (W.numpy(), data, torch.tensor([0.0])),
                               (W * 0.5, one_constraint((2.0, 0.0)), [0])):
        fb = check_att_svm(answer, dat, alpha)
        assert fb and fb.title == title and fb.details == {"support": 1}
        assert "all 1 margins ≥ 1" in fb.message and "(1 support constraints)" in fb.message
    for f, verdict in ((1 - 1.5e-6, True), (1 - 2.5e-6, "violated"), (1 - 1e-3, "violated"),
                       (1 + 1.5e-5, True), (1 + 2.5e-5, "every margin is above 1"),
                       (1 + 1e-3, "every margin is above 1")):
        fb = check_att_svm(W * f, data, np.array([0]))
        assert fb if verdict is True else verdict in fb.message, (f, fb)
        if verdict == "violated":
            reads_as_feedback(fb, title, W, own=W * f)
            assert "1 of 1 margin constraints" in fb.message and fb.details == {"violated": 1}
            assert "sample 1, token 2 (Python index [0, 1])" in fb.message
            assert f"(margin {f:.4g} < 1)" in fb.message
        elif verdict is not True:
            reads_as_feedback(fb, title, W, own=W * f)
            assert "normalisation is missing" in fb.message and fb.details == {}
    off = W + torch.tensor([[0.0, 0.1], [0.0, 0.0]], **F64)  # feasible, active, not minimal
    fb = check_att_svm(off, data, [0])
    rel = 0.1 / math.hypot(0.5, 0.1)  # the part of W orthogonal to the one constraint
    reads_as_feedback(fb, title, W, own=off)
    assert "not the minimum-norm solution" in fb.message and "1 active constraints" in fb.message
    assert f"relative residual {rel:.2g}" in fb.message
    assert fb.details == {"residual": pytest.approx(rel, rel=1e-9)}
    assert not check_att_svm(W, data, [1])  # the other selection: W violates it


def test_att_svm_two_supports_and_the_p_svm_with_its_key_matrix():
    """z_i = e_i, x_0 − x_1 = (2, 0) and (0, 4): W = diag(1/2, 1/4), both constraints
    supporting; the p-SVM (x_0 − x_1)ᵀ W p ≥ 1: p = (1/2, 1/4) for W = I, p / 2 for 2 I."""
    X = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]], [[0.0, 2.0], [0.0, -2.0]]], **F64)
    data = al.AttentionData(X, torch.ones(2, **F64), z=torch.eye(2, **F64),
                            v=torch.tensor([1.0, 0.0], **F64))
    W = torch.diag(torch.tensor([0.5, 0.25], **F64))
    fb = check_att_svm(W, data, [0, 0])
    assert fb.details == {"support": 2} and "all 2 margins ≥ 1" in fb.message
    fb = check_att_svm(W, data, [1, 0])
    assert "1 of 2 margin constraints" in fb.message and "(margin -1 < 1)" in fb.message
    assert "sample 1, token 1 (Python index [0, 0])" in fb.message
    p = torch.tensor([0.5, 0.25], **F64)
    fb = check_att_svm(p, data, [0, 0], param="p")
    assert fb and fb.title == "Att-SVM (p)" and fb.details == {"support": 2}
    assert check_att_svm(p / 2, data, [0, 0], param="p", W=2 * torch.eye(2, **F64))
    assert not check_att_svm(p, data, [0, 0], param="p", W=2 * torch.eye(2, **F64))
    assert check_att_svm(p, al.AttentionData(X, torch.ones(2, **F64)), [0, 0], param="p")
    assert check_att_svm(torch.tensor([0.25, 0.5], **F64), data, [0, 0], param="p",
                         W=torch.tensor([[0.0, 1.0], [1.0, 0.0]], **F64))  # k = Wᵀ x


@pytest.mark.parametrize("param", ["W", "p"])
def test_att_svm_certifies_the_solvers_answer_and_rejects_others(param):
    """The library's cvxpy solution passes; scaled down it violates, scaled up it lacks the
    normalisation, moved at random (then scaled to feasibility) it is not minimum-norm."""
    if param == "W":
        data, alpha = al.random_data(n=4, T=3, d=3, seed=2), torch.tensor([0, 1, 2, 0])
        sol = al.att_svm(data, alpha=alpha)
    else:  # the p-SVM is feasible for every selection when d >= n(T-1)
        data, alpha = al.random_data(n=2, T=3, d=5, seed=2), torch.tensor([2, 1])
        sol = al.prompt_svm(data, alpha=alpha)
    title = f"Att-SVM ({param})"
    assert check_att_svm(sol, data, alpha, param=param)
    for wrong, hint in ((0.5 * sol, "violated"), (1.01 * sol, "normalisation"),
                        (2 * (sol + 0.3 * torch.as_tensor(np.random.default_rng(0).standard_normal(
                            tuple(sol.shape)))), "minimum-norm"),
                        (sol.reshape(-1)[:2], f"must have {sol.numel()} entries, yours has 2")):
        fb = check_att_svm(wrong, data, alpha, param=param)
        reads_as_feedback(fb, title, sol, own=wrong)
        assert hint in fb.message, (hint, fb.message)
    fb = check_att_svm(None, data, alpha, param=param)
    reads_as_feedback(fb, title)
    assert f"{param} is None" in fb.message


def test_att_svm_reads_its_arguments():
    data, W = one_constraint(), torch.eye(2, **F64)
    for alpha in ([2], [-1], [0, 1]):
        with pytest.raises(ValueError, match=r"alpha must hold n = 1 token indices in 0\.\.1"):
            check_att_svm(W, data, alpha)
    with pytest.raises(ValueError, match="param must be 'W' or 'p', got 'K'"):
        check_att_svm(W, data, [0], param="K")
    with pytest.raises(ValueError, match="must carry the queries z for the W-SVM"):
        check_att_svm(W, al.AttentionData(data.X, data.Y), [0])


# ------------------------------------------------------------------------- causal attention
def causal_loop(X, W, causal=True):
    X, W = np.asarray(X, float), np.asarray(W, float)
    T = X.shape[-2]
    S = np.zeros(X.shape[:-2] + (T, T))
    for idx in np.ndindex(X.shape[:-2]):
        for k in range(T):
            seen = k + 1 if causal else T
            a = np.array([X[idx][t] @ W @ X[idx][k] for t in range(seen)])
            S[idx + (k, slice(0, seen))] = np.exp(a - a.max()) / np.exp(a - a.max()).sum()
    return S


@pytest.mark.parametrize("seed", range(3))
def test_causal_attention_passes_the_definition_and_names_each_mistake(seed):
    """Logits ~1e3 (exp overflows unshifted) and query 0's ~1e-3 (a shift by the largest
    logit of all rows would underflow its row); a sequence or a batch, any layout."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(2, 4, 3, generator=g, **F64)
    W = 300 * torch.randn(3, 3, generator=g, **F64)
    X[:, 0] *= 1e-3
    S, title = causal_loop(X, W), "causal attention"
    for answer, Xs in ((S, X), (torch.tensor(S), X.numpy()), (S[1].tolist(), X[1])):
        fb = check_causal_attention(answer, Xs, W)
        assert fb and f"all {np.asarray(answer).size} entries" in fb.message
    t = tol(S, 1e-6, 1e-9) * (S > 0)  # the past entries only: a future one must stay 0
    assert check_causal_attention(S + 0.9 * t, X, W)
    assert not check_causal_attention(S + 1.1 * t, X, W)
    ST, full = np.swapaxes(S, -1, -2), causal_loop(X, W, causal=False)
    wrong = S.copy()
    wrong[0, 3, 0] += 0.5  # off, no known mistake
    for answer, hint in ((ST, "transposed"), ((1 + 5e-6) * ST, "future token"),
                         (ST + 5e-9 * (ST == 0), "future token"), (full, "future token"),
                         (np.tril(full), "masked after the softmax"),
                         (wrong, "1 of 32 entries of S are off")):
        fb = check_causal_attention(answer, X, W)
        reads_as_feedback(fb, "S" if hint in ("masked after the softmax", "1 of 32 entries "
                                              "of S are off") else title, S, own=answer)
        assert hint in fb.message, (hint, fb.message)
    assert "future" not in fb.message and "masked" not in fb.message
    fb = check_causal_attention(None, X, W)
    reads_as_feedback(fb, title)
    assert "S is None" in fb.message
    for X_, W_ in ((X[0, 0], W), (X[None], W), (X, W[:2]), (X, W[None])):
        with pytest.raises(ValueError, match=r"X must be \(T,d\) or \(n,T,d\) and W \(d,d\); got "
                                             + rf"\({', '.join(map(str, X_.shape))}"):
            check_causal_attention(S, X_, W_)
