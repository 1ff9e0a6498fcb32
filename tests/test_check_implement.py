"""attnlib.check.implement: checks of exercises where the learner implements the idea.

Each check's oracle (NumPy finite differences, KKT by NNLS, causal softmax by definition) is
compared here with attnlib's own analytic computations (torch gradients, cvxpy solves,
sequence attention): a third computation, so both sides are tested. Every mistake the checks
diagnose is fed in and must fail with its hint, and the hint never shows the expected value.
"""

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
from attnlib.sequences import sequence_softmax


@pytest.fixture
def data():
    return al.random_data(n=4, T=3, d=3, seed=2)


def test_risk_oracle_matches_the_models_risk(data):
    W = torch.randn(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    s = M.softmax(M.logits(data.X, W, data.z))
    L = float(M.risk(data.X, data.Y, s, data.v))
    assert risk_oracle(data.X, data.Y, data.z, data.v, W.numpy()) == pytest.approx(L, rel=1e-12)
    # batched over leading dims of W
    Ws = np.stack([W.numpy(), 2 * W.numpy()])
    assert risk_oracle(data.X, data.Y, data.z, data.v, Ws).shape == (2,)


def test_gd_step_accepts_the_analytic_step_and_diagnoses_mistakes(data):
    W = 0.3 * torch.randn(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    G = M.grad_W(data.X, data.Y, data.z, W, data.v)
    lr = 0.5
    assert check_gd_step(W - lr * G, W, data, lr)
    assert check_gd_step((W - lr * G).tolist(), W, data, lr)  # lists are read as float64
    cases = {"up the gradient": W + lr * G, "transposed": W - lr * G.T,
             "divide by n": W - lr * 4 * G, "step size": W - G}
    for hint, wrong in cases.items():
        fb = check_gd_step(wrong, W, data, lr)
        assert not fb and hint in fb.message, (hint, fb.message)
        assert f"{float((W - lr * G)[0, 0]):.6g}" not in fb.message  # never the answer
    assert not check_gd_step(W - lr * G + 1e-4, W, data, lr)
    assert "None" in check_gd_step(None, W, data, lr).message
    with pytest.raises(ValueError, match="lr"):
        check_gd_step(W, W, data, -1)
    with pytest.raises(ValueError, match="shape"):
        check_gd_step(W, torch.zeros(2, 2), data, lr)


def test_kq_step_accepts_the_analytic_step_and_diagnoses_mistakes(data):
    g = torch.Generator().manual_seed(3)
    K = 0.5 * torch.randn(3, 2, dtype=torch.float64, generator=g)
    Q = 0.5 * torch.randn(3, 2, dtype=torch.float64, generator=g)
    lr = 0.7
    gK, gQ = M.grad_KQ(data.X, data.Y, data.z, K, Q, data.v)
    right = (K - lr * gK, Q - lr * gQ)
    assert check_kq_step(right, K, Q, data, lr)
    assert check_kq_step([t.numpy() for t in right], K, Q, data, lr)
    K1 = K - lr * gK
    _, gQ1 = M.grad_KQ(data.X, data.Y, data.z, K1, Q, data.v)
    G = M.grad_W(data.X, data.Y, data.z, K @ Q.T, data.v)
    cases = {"up the gradient": (K + lr * gK, Q + lr * gQ),
             "updated K": (K1, Q - lr * gQ1),
             "swapped": (K - lr * G.T @ Q, Q - lr * G @ K),
             "step size": (K - gK, Q - gQ)}
    for hint, wrong in cases.items():
        fb = check_kq_step(wrong, K, Q, data, lr)
        assert not fb and hint in fb.message, (hint, fb.message)
    assert not check_kq_step(right[0], K, Q, data, lr)  # not a pair
    assert not check_kq_step((right[0], right[1][:2]), K, Q, data, lr)  # wrong shape


@pytest.mark.parametrize("param", ["W", "p"])
def test_att_svm_certifies_the_solvers_answer_and_rejects_others(data, param):
    alpha = torch.tensor([0, 1, 2, 0])
    if param == "W":
        sol = al.att_svm(data, alpha=alpha)
    else:  # the p-SVM is feasible for every selection when d >= n(T-1)
        data, alpha = al.random_data(n=2, T=3, d=5, seed=2), torch.tensor([2, 1])
        sol = al.prompt_svm(data, alpha=alpha)
    fb = check_att_svm(sol, data, alpha, param=param)
    assert fb, fb.message
    assert "violated" in check_att_svm(0.5 * sol, data, alpha, param=param).message
    assert "normalisation" in check_att_svm(1.01 * sol, data, alpha, param=param).message
    # a feasible point that is not the minimum-norm one (a random move, then scaled up)
    rng = np.random.default_rng(0)
    worse = sol + 0.3 * torch.as_tensor(rng.standard_normal(tuple(sol.shape)))
    worse = worse * 2.0
    fb = check_att_svm(worse, data, alpha, param=param)
    assert not fb and "minimum-norm" in fb.message
    assert not check_att_svm(None, data, alpha, param=param)


def test_att_svm_kkt_is_tight_on_a_hand_solved_case():
    # n=1, T=2, d=2, z = e1: constraint (x_0 - x_1)^T W e1 >= 1 with x_0 - x_1 = (2, 0):
    # the minimum-norm W has first column (1/2, 0) and zeros elsewhere.
    X = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]], dtype=torch.float64)
    data = al.AttentionData(X, torch.tensor([1.0]), z=torch.tensor([[1.0, 0.0]]),
                            v=torch.tensor([1.0, 0.0]))
    W = torch.tensor([[0.5, 0.0], [0.0, 0.0]], dtype=torch.float64)
    assert check_att_svm(W, data, [0])
    assert not check_att_svm(W + torch.tensor([[0.0, 0.1], [0.0, 0.0]]), data, [0])
    assert not check_att_svm(W, data, [1])  # the other selection is infeasible for W
    with pytest.raises(ValueError, match="alpha"):
        check_att_svm(W, data, [2])


def test_causal_attention_matches_the_library_and_diagnoses_mistakes():
    g = torch.Generator().manual_seed(4)
    X = torch.randn(2, 4, 3, dtype=torch.float64, generator=g)
    W = torch.randn(3, 3, dtype=torch.float64, generator=g)
    S = sequence_softmax(X, W, causal=True)
    assert check_causal_attention(S, X, W)
    assert check_causal_attention(S[0], X[0], W)
    full = sequence_softmax(X, W, causal=False)
    assert "future" in check_causal_attention(full, X, W).message
    masked_late = torch.tril(full)  # masked after the softmax: rows no longer sum to 1
    assert "masked after the softmax" in check_causal_attention(masked_late, X, W).message
    assert "transposed" in check_causal_attention(S.transpose(-1, -2), X, W).message
