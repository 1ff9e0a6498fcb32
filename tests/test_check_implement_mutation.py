"""attnlib.check.implement: every branch, tolerance and message (mutation testing, issue 12).

The oracles are written here: the risk by a Python loop over samples and tokens, the gradients
by attnlib.models' analytic formulas (not the check's finite differences), Att-SVM solutions
solved by hand (one or two constraints), causal attention by a loop over queries.
"""

import math
import re

import numpy as np
import pytest
import torch

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


def _exact(msg):
    return "^" + re.escape(msg) + "$"


@pytest.fixture
def data():
    return al.random_data(n=4, T=3, d=3, seed=2)


def _risk_loop(X, Y, z, v, W):
    X, Y, z, v, W = (np.asarray(a, float) for a in (X, Y, z, v, W))
    total = 0.0
    for i in range(len(Y)):
        a = [X[i, t] @ W @ z[i] for t in range(X.shape[1])]
        e = [math.exp(x - max(a)) for x in a]
        f = sum(e[t] / sum(e) * (X[i, t] @ v) for t in range(len(e)))
        total += math.log1p(math.exp(-Y[i] * f)) if -Y[i] * f < 30 else -Y[i] * f
    return total / len(Y)


def test_risk_oracle_from_its_definition_also_with_huge_logits(data):
    g = torch.Generator().manual_seed(0)
    X, Y, z, v = data.X, data.Y, data.z, data.v
    for scale in (0.3, 400.0):  # 400: logits ~1e3, exp overflows without the max shift
        W = scale * torch.randn(3, 3, generator=g, **F64)
        r = risk_oracle(X, Y, z, v, W)
        assert np.isfinite(r) and r == pytest.approx(_risk_loop(X, Y, z, v, W), rel=1e-10)
    X0 = X.clone()
    X0[0] *= 1e-3  # sample 0's logits ~1e-3, the others' ~1e3: shift each sample by its own max
    W = 400.0 * torch.randn(3, 3, generator=g, **F64)
    r = risk_oracle(X0, Y, z, v, W)
    assert np.isfinite(r) and r == pytest.approx(_risk_loop(X0, Y, z, v, W), rel=1e-10)
    # float32 inputs are computed in float64 (the loop reads the same float32 values)
    W32, X32 = (0.7 * torch.randn(3, 3, generator=g)), X.float()
    r = risk_oracle(X32, Y.float(), z.float(), v.float(), W32)
    assert r.dtype == np.float64
    assert r == pytest.approx(_risk_loop(X32, Y.float(), z.float(), v.float(), W32), rel=1e-13)
    Ws = torch.randn(2, 5, 3, 3, generator=g, **F64)
    r = risk_oracle(X, Y, z, v, Ws)
    assert r.shape == (2, 5)
    assert r[1, 3] == pytest.approx(_risk_loop(X, Y, z, v, Ws[1, 3]), rel=1e-10)


def test_gd_step_tolerance_messages_and_arguments(data):
    W = 0.3 * torch.randn(3, 3, generator=torch.Generator().manual_seed(1), **F64)
    G = M.grad_W(data.X, data.Y, data.z, W, data.v)
    lr = 0.5
    right = W - lr * G
    fb = check_gd_step(right, W, data, lr)
    assert fb.ok is True and fb.title == "W after one GD step"
    assert fb.message == "all 9 entries within tolerance (rtol=1e-06, atol=1e-08)."
    assert check_gd_step(right + 5e-9, W, data, "0.5")  # within atol; lr read as a number
    assert not check_gd_step(right + 3e-6 * right.abs().max(), W, data, lr)
    hints = {
        "You moved up the gradient: a descent step subtracts η∇L.": W + lr * G,
        "Your gradient is transposed: ∂a_it/∂W = x_it z_iᵀ (keys in rows, queries in "
        "columns).": W - lr * G.T,
        "Your gradient is a sum over samples: the risk is a mean, so divide by n.":
            W - lr * 4 * G,
        "The step size η is missing: the step is W - η∇L.": W - G,
    }
    for hint, wrong in hints.items():
        fb = check_gd_step(wrong, W, data, lr)
        assert not fb and fb.message.endswith(" " + hint), fb.message
    for bad in (0, -1, math.inf, math.nan):
        with pytest.raises(ValueError, match=_exact(
                f"lr must be a positive number, got {float(bad)}")):
            check_gd_step(right, W, data, bad)
    with pytest.raises(ValueError, match=_exact(
            "W must have shape (d, d) = (3, 3), got (3, 2)")):
        check_gd_step(right, W[:, :2], data, lr)
    wide = al.random_data(n=4, T=2, d=3, seed=2)  # T != d: the shape is (d, d), not (T, T)
    G2 = M.grad_W(wide.X, wide.Y, wide.z, W, wide.v)
    assert check_gd_step(W - lr * G2, W, wide, lr)
    with pytest.raises(ValueError, match=_exact(
            "W must have shape (d, d) = (3, 3), got (2, 2)")):
        check_gd_step(W[:2, :2], W[:2, :2], wide, lr)
    for d in (al.AttentionData(data.X, data.Y, z=None, v=data.v),
              al.AttentionData(data.X, data.Y, z=data.z, v=None)):
        with pytest.raises(ValueError, match=_exact(
                "data must carry the queries z and the head v (AttentionData with z and v)")):
            check_gd_step(right, W, d, lr)
    with pytest.raises(ValueError, match="one instance"):
        check_gd_step(right, W, al.random_data(n=4, T=3, d=3, trials=2, seed=2), lr)


def test_kq_step_tolerance_messages_and_arguments(data):
    g = torch.Generator().manual_seed(3)
    K = 0.5 * torch.randn(3, 2, generator=g, **F64)
    Q = 0.5 * torch.randn(3, 2, generator=g, **F64)
    lr = 0.7
    gK, gQ = M.grad_KQ(data.X, data.Y, data.z, K, Q, data.v)
    right = (K - lr * gK, Q - lr * gQ)
    title = "(K, Q) after one GD step"
    fb = check_kq_step(right, K, Q, data, lr)
    assert (fb.ok, fb.title) == (True, title)
    assert fb.message == "all 12 entries within tolerance (rtol=1e-06, atol=1e-08)."
    fb = check_kq_step((right[0], right[1] + 1e-3), K, Q, data, lr)
    assert (fb.ok, fb.title, fb.details) == (False, title, {"entries_off": 6})
    assert fb.message.startswith("6 of 12 entries of (K_next, Q_next) stacked are off;")
    K1 = K - lr * gK
    gQ1 = M.grad_KQ(data.X, data.Y, data.z, K1, Q, data.v)[1]
    G = M.grad_W(data.X, data.Y, data.z, K @ Q.T, data.v)
    hints = {
        "You moved up the gradient: a descent step subtracts η times each gradient.":
            (K + lr * gK, Q + lr * gQ),
        "Your Q step used the updated K: take both gradients at the current (K, Q), then "
        "step.": (K1, Q - lr * gQ1),
        "Your gradients of K and Q are swapped: with W = KQᵀ, ∇_K L = G Q and ∇_Q L = Gᵀ K "
        "(G = ∇_W L).": (K - lr * G.T @ Q, Q - lr * G @ K),
        "The step size η is missing.": (K - gK, Q - gQ),
        "Your gradients are of the summed loss: the risk is a mean over the n samples, so "
        "divide by n.": (K - lr * data.n * gK, Q - lr * data.n * gQ),
        "A transpose is missing in ∇_Q L: with W = KQᵀ, ∇_Q L = Gᵀ K, not G K "
        "(G = ∇_W L).": (K - lr * gK, Q - lr * G @ K),
        "∇_K L has a transpose too many: with W = KQᵀ, ∇_K L = G Q, not Gᵀ Q "
        "(G = ∇_W L).": (K - lr * G.T @ Q, Q - lr * gQ),
    }
    for hint, wrong in hints.items():
        fb = check_kq_step(wrong, K, Q, data, lr)
        assert not fb and fb.message.endswith(" " + hint), fb.message
    for answer, msg in (
            (None, "KQ_next is None: you have not answered yet (replace the stub above)."),
            (right[0], "answer with the pair (K_next, Q_next)."),
            ((right[0],), "answer with the pair (K_next, Q_next)."),
            ((*right, right[0]), "answer with the pair (K_next, Q_next)."),
            ((right[0], None),
             "Q_next is None: you have not answered yet (replace the stub above)."),
            ((None, right[1]),
             "K_next is None: you have not answered yet (replace the stub above)."),
            ((right[0], right[1][:2]), "K_next and Q_next must have shape (3, 2), yours have "
                                       "(3, 2) and (2, 2)."),
            ((right[0].T, right[1]), "K_next and Q_next must have shape (3, 2), yours have "
                                     "(2, 3) and (3, 2).")):
        fb = check_kq_step(answer, K, Q, data, lr)
        assert (fb.ok, fb.title, fb.message) == (False, title, msg)
    assert check_kq_step([right[0].tolist(), right[1].numpy()], K, Q, data, lr)
    for K_, Q_ in ((K[:, 0], Q[:, 0]), (K, Q[:, :1]), (K[:2], Q[:2])):
        with pytest.raises(ValueError, match=_exact(
                f"K and Q must both have shape (d, m) with d = 3, got {tuple(K_.shape)} and "
                f"{tuple(Q_.shape)}")):
            check_kq_step(right, K_, Q_, data, lr)
    with pytest.raises(ValueError, match="lr must be a positive number, got 0.0"):
        check_kq_step(right, K, Q, data, 0.0)
    wide = al.random_data(n=4, T=2, d=3, seed=2)  # T != d: K and Q are (d, m)
    gK2, gQ2 = M.grad_KQ(wide.X, wide.Y, wide.z, K, Q, wide.v)
    assert check_kq_step((K - lr * gK2, Q - lr * gQ2), K, Q, wide, lr)


def _one_constraint(z=(1.0, 0.0)):
    # n=1, T=2, d=2: (x_0 - x_1)^T W z >= 1 with x_0 - x_1 = (2, 0): W = (1/2) e1 z^T / |z|^2
    X = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]], **F64)
    return al.AttentionData(X, torch.tensor([1.0], **F64), z=torch.tensor([z], **F64),
                            v=torch.tensor([1.0, 0.0], **F64))


def test_att_svm_tolerances_and_messages_on_hand_solved_cases():
    data = _one_constraint()
    W = torch.tensor([[0.5, 0.0], [0.0, 0.0]], **F64)
    fb = check_att_svm(W, data, [0])
    assert (fb.ok, fb.title, fb.details) == (True, "Att-SVM (W)", {"support": 1})
    assert fb.message == "all 1 margins ≥ 1 and the KKT conditions hold (1 support constraints)."
    # feasibility tolerance 1e-6 (1 + max|A| max|w|) = 2e-6, activity 1e-5 (1 + max m) ~ 2e-5
    assert check_att_svm(W * (1 - 1.5e-6), data, [0])
    fb = check_att_svm(W * (1 - 2.5e-6), data, [0])
    assert (fb.ok, fb.title, fb.details) == (False, "Att-SVM (W)", {"violated": 1})
    assert check_att_svm(W * (1 + 1.5e-5), data, [0])
    fb = check_att_svm(W * (1 + 2.5e-5), data, [0])
    assert (fb.ok, fb.title) == (False, "Att-SVM (W)") and "every margin is above 1" in fb.message
    assert not check_att_svm(W * (1 - 1e-5), data, [0])
    fb = check_att_svm(W * (1 - 1e-3), data, np.array([0]))
    assert (fb.ok, fb.title, fb.details) == (False, "Att-SVM (W)", {"violated": 1})
    assert fb.message == ("1 of 1 margin constraints are violated; the worst is at sample 1, "
                          "token 2 (Python index [0, 1]) (margin 0.999 < 1).")
    fb = check_att_svm(W * (1 + 1e-3), data, torch.tensor([0]))
    assert (fb.ok, fb.title) == (False, "Att-SVM (W)")
    assert fb.message == ("every margin is above 1: a smaller multiple of your answer is still "
                          "feasible, so it is not the minimum-norm solution (a normalisation "
                          "is missing).") and fb.details == {}
    off = W + torch.tensor([[0.0, 0.1], [0.0, 0.0]], **F64)  # feasible, active, not minimal
    fb = check_att_svm(off, data, [0])
    rel = 0.1 / math.hypot(0.5, 0.1)
    assert fb.details == {"residual": pytest.approx(rel, rel=1e-9)} and fb.title == "Att-SVM (W)"
    assert fb.message == ("feasible, but not the minimum-norm solution: it is not a "
                          "non-negative combination of its 1 active constraints (relative "
                          f"residual {rel:.2g}); a smaller feasible answer exists.")
    fb = check_att_svm(W[0], data, [0])
    assert (fb.ok, fb.title, fb.message) == (False, "Att-SVM (W)",
                                             "W must have 4 entries, yours has 2.")
    assert check_att_svm(W.reshape(-1).tolist(), data, [0])  # read as the flattened W
    assert check_att_svm(W * 0.5, _one_constraint((2.0, 0.0)), [0])
    fb = check_att_svm(None, data, [0])
    assert (fb.ok, fb.title, fb.message) == (
        False, "Att-SVM (W)", "W is None: you have not answered yet (replace the stub above).")
    assert check_att_svm(W, data, [[0]])  # a selection of any shape holding n indices
    assert check_att_svm(W, data, torch.tensor([0.0]))  # integral floats are indices
    for alpha in ([2], [-1], [0, 1]):
        with pytest.raises(ValueError, match=_exact(
                f"alpha must hold n = 1 token indices in 0..1, got {np.array(alpha)}")):
            check_att_svm(W, data, alpha)
    with pytest.raises(ValueError, match=_exact("param must be 'W' or 'p', got 'K'")):
        check_att_svm(W, data, [0], param="K")
    with pytest.raises(ValueError, match=_exact(
            "data must carry the queries z for the W-SVM")):
        check_att_svm(W, al.AttentionData(data.X, data.Y), [0])


def test_att_svm_two_supports_and_the_p_svm_with_its_key_matrix():
    # two samples, z_1 = e1, z_2 = e2, x_0 - x_1 = (2, 0) and (0, 4): W = diag(1/2, 1/4),
    # both constraints active and both support the solution
    X = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]], [[0.0, 2.0], [0.0, -2.0]]], **F64)
    data = al.AttentionData(X, torch.ones(2, **F64), z=torch.eye(2, **F64),
                            v=torch.tensor([1.0, 0.0], **F64))
    W = torch.diag(torch.tensor([0.5, 0.25], **F64))
    fb = check_att_svm(W, data, [0, 0])
    assert fb.details == {"support": 2} and "all 2 margins ≥ 1" in fb.message
    fb = check_att_svm(W, data, [1, 0])
    assert fb.message.startswith("1 of 2 margin constraints are violated; the worst is at "
                                 "sample 1, token 1 (Python index [0, 0]) (margin -1 < 1)")
    # p-SVM: (x_0 - x_1)^T W p >= 1 per sample; W = I: p = (1/2, 1/4); W = 2 I: p / 2
    p = torch.tensor([0.5, 0.25], **F64)
    fb = check_att_svm(p, data, [0, 0], param="p")
    assert fb and fb.title == "Att-SVM (p)" and fb.details == {"support": 2}
    assert check_att_svm(p / 2, data, [0, 0], param="p", W=2 * torch.eye(2, **F64))
    assert not check_att_svm(p, data, [0, 0], param="p", W=2 * torch.eye(2, **F64))
    assert check_att_svm(p, al.AttentionData(X, torch.ones(2, **F64)), [0, 0], param="p")
    assert check_att_svm(torch.tensor([0.25, 0.5], **F64), data, [0, 0], param="p",
                         W=torch.tensor([[0.0, 1.0], [1.0, 0.0]], **F64))  # k = W^T x


def _causal_loop(X, W):
    X, W = np.asarray(X, float), np.asarray(W, float)
    T = X.shape[-2]
    S = np.zeros(X.shape[:-2] + (T, T))
    for idx in np.ndindex(X.shape[:-2]):
        x = X[idx]
        for k in range(T):
            a = [x[t] @ W @ x[k] for t in range(k + 1)]
            e = np.exp(np.array(a) - max(a))
            S[idx + (k, slice(0, k + 1))] = e / e.sum()
    return S


def test_causal_attention_messages_and_shapes():
    g = torch.Generator().manual_seed(4)
    X = torch.randn(2, 4, 3, generator=g, **F64)
    W = 300 * torch.randn(3, 3, generator=g, **F64)  # logits ~1e3: exp overflows unshifted
    X[:, 0] *= 1e-3  # query 0's logits ~1e-3: a shift by the largest logit of all rows
    #                  would underflow its whole row
    S = _causal_loop(X, W)
    title = "causal attention"
    fb = check_causal_attention(S, X, W)
    assert (fb.ok, fb.title) == (True, "S")  # check_value's title: the name of the value
    assert fb.message == "all 32 entries within tolerance (rtol=1e-06, atol=1e-09)."
    assert check_causal_attention(S[1].tolist(), X[1], W)
    assert not check_causal_attention(S + 1e-6 * (S > 0), X, W)
    for almost in (1 + 5e-6, 1.5):  # near the transposed matrix, but beyond rtol 1e-6
        fb = check_causal_attention(almost * np.swapaxes(S, -1, -2), X, W)
        assert not fb and "future token" in fb.message
    ST = np.swapaxes(S, -1, -2)
    fb = check_causal_attention(ST + 5e-9 * (ST == 0), X, W)  # beyond atol 1e-9 where 0
    assert not fb and "future token" in fb.message
    fb = check_causal_attention(np.swapaxes(S, -1, -2), X, W)
    assert (fb.ok, fb.title) == (False, title)
    assert fb.message == ("your matrix is transposed: row k must be the attention of query k "
                          "over the tokens t ≤ k (a[k, t] = x_tᵀ W x_k).")
    full = np.exp(np.einsum("ntd,de,nke->nkt", X, W, X)
                  - np.einsum("ntd,de,nke->nkt", X, W, X).max(-1, keepdims=True))
    full /= full.sum(-1, keepdims=True)
    fb = check_causal_attention(full, X, W)
    assert (fb.ok, fb.title) == (False, title)
    assert fb.message == ("some query attends to a future token (S[k, t] ≠ 0 for t > k): in "
                          "causal attention query k sees only tokens t ≤ k.")
    late = np.tril(full)
    fb = check_causal_attention(late, X, W)
    assert not fb and fb.message.endswith(
        " You masked after the softmax, so the rows no longer sum to 1: set the future logits "
        "to -∞ before normalising.")
    wrong = S.copy()
    wrong[0, 3, 0] += 0.5  # off, no known mistake
    fb = check_causal_attention(wrong, X, W)
    assert not fb and "masked after" not in fb.message and "future" not in fb.message
    fb = check_causal_attention(None, X, W)
    assert (fb.ok, fb.title) == (False, title) and "S is None" in fb.message
    for X_, W_ in ((X[0, 0], W), (X[None], W), (X, W[:2]), (X, W[None])):
        with pytest.raises(ValueError, match=_exact(
                f"X must be (T,d) or (n,T,d) and W (d,d); got {tuple(X_.shape)}, "
                f"{tuple(W_.shape)}")):
            check_causal_attention(S, X_, W_)
