r"""Checks for the exercises where the learner implements the idea (chapters 2, 5, 8).

A gradient-descent step on :math:`W` and on :math:`(K, Q)`, the Att-SVM written in cvxpy,
causal attention. Each check compares the answer with an **independent** computation written
here in NumPy float64, never with the attnlib function the chapter teaches:

- the risk is evaluated from its definition,
  :math:`\mathcal L(W) = \frac1n\sum_i \log\bigl(1 + e^{-Y_i v^\top X_i^\top
  \mathrm{softmax}(X_i W z_i)}\bigr)`, and its gradient by central finite differences;
- the Att-SVM answer is certified by its optimality (KKT) conditions: every margin at least
  1, and the answer a non-negative combination of the active constraints (a non-negative
  least-squares fit, SciPy's ``nnls``), which holds for the minimum-norm point and for no other
  feasible point;
- causal attention from its definition, one query at a time.

So a learner who calls the library and one who writes the computation by hand are both
checked against a third computation. Wrong answers get a diagnosis of the common mistakes
(ascent instead of descent, a transposed gradient, a sum instead of a mean, a missing step
size, K and Q swapped, attending to future tokens, rows not normalised), never the expected
value. See ``attnlib.check`` for how a chapter uses a check.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import nnls

from attnlib.check.feedback import Feedback, answer_tensor, fail, one_instance, position, reference
from attnlib.check.numeric import check_value

__all__ = ["check_gd_step", "check_kq_step", "check_att_svm", "check_causal_attention",
           "risk_oracle"]

_H = 1e-5  # finite-difference step (central differences: error O(h^2) ~ 1e-10)


def risk_oracle(X, Y, z, v, W) -> np.ndarray:
    r"""The logistic risk :math:`\mathcal L(W)` from its definition, in NumPy float64.

    ``W`` may carry leading dimensions (one risk per matrix); ``X`` (n,T,d), ``Y`` (n,),
    ``z`` (n,d), ``v`` (d,). An independent oracle for the checks of this module.
    """
    X, Y, z, v, W = (np.asarray(a, dtype=np.float64) for a in (X, Y, z, v, W))
    a = np.einsum("itd,...de,ie->...it", X, W, z)
    a = a - a.max(-1, keepdims=True)
    s = np.exp(a)
    s /= s.sum(-1, keepdims=True)
    f = np.einsum("...it,itd,d->...i", s, X, v)
    return np.logaddexp(0.0, -Y * f).mean(-1)


def _fd_grad(fun, A: np.ndarray) -> np.ndarray:
    """Central finite differences of ``fun`` (batched over a leading dim) at ``A``."""
    E = np.eye(A.size).reshape(A.size, *A.shape) * _H
    return ((fun(A + E) - fun(A - E)) / (2 * _H)).reshape(A.shape)


def _data(data):
    data = one_instance(data)
    if data.z is None or data.v is None:
        raise ValueError("data must carry the queries z and the head v (AttentionData with z "
                         "and v)")
    return tuple(reference(t, n).numpy() for t, n in
                 ((data.X, "X"), (data.Y, "Y"), (data.z, "z"), (data.v, "v")))


def _lr(lr) -> float:
    lr = float(lr)
    if not np.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr must be a positive number, got {lr}")
    return lr


def check_gd_step(W_next, W, data, lr) -> Feedback:
    r"""Check one gradient-descent step on :math:`W` (chapters 1-2):
    :math:`W^+ = W - \eta\,\nabla\mathcal L(W)`, with :math:`\nabla\mathcal L` by finite
    differences of the risk written from its definition (``risk_oracle``).

    Parameters
    ----------
    W_next : array (d, d)
        The answer.
    W : array (d, d)
        The current iterate.
    data : AttentionData
        One instance with queries ``z`` and head ``v``; logistic loss.
    lr : float
        The step size :math:`\eta > 0`.
    """
    X, Y, z, v = _data(data)
    W, lr = reference(W, "W").numpy(), _lr(lr)
    if W.shape != (X.shape[-1],) * 2:
        raise ValueError(f"W must have shape (d, d) = {(X.shape[-1],) * 2}, got {W.shape}")
    g = _fd_grad(lambda A: risk_oracle(X, Y, z, v, A), W)
    n = X.shape[0]
    mistakes = {
        "You moved up the gradient: a descent step subtracts η∇L.": W + lr * g,
        "Your gradient is transposed: ∂a_it/∂W = x_it z_iᵀ (keys in rows, queries in "
        "columns).": W - lr * g.T,
        "Your gradient is a sum over samples: the risk is a mean, so divide by n.":
            W - lr * n * g,
        "The step size η is missing: the step is W - η∇L.": W - g,
    }
    return check_value(W_next, W - lr * g, rtol=1e-6, atol=1e-8, name="W after one GD step",
                       mistakes=mistakes)


def check_kq_step(KQ_next, K, Q, data, lr) -> Feedback:
    r"""Check one gradient-descent step on :math:`(K, Q)` with :math:`W = KQ^\top`
    (chapter 5): :math:`K^+ = K - \eta\,\nabla_K\mathcal L`, :math:`Q^+ = Q - \eta\,
    \nabla_Q\mathcal L`, both gradients at the current :math:`(K, Q)` (a simultaneous step),
    by finite differences of ``risk_oracle``.

    Parameters
    ----------
    KQ_next : pair (K_next, Q_next), arrays (d, m)
        The answer.
    K, Q : arrays (d, m)
        The current iterate.
    data : AttentionData
        One instance with queries ``z`` and head ``v``; logistic loss.
    lr : float
        The step size :math:`\eta > 0`.
    """
    title = "(K, Q) after one GD step"
    X, Y, z, v = _data(data)
    K, Q, lr = reference(K, "K").numpy(), reference(Q, "Q").numpy(), _lr(lr)
    d = X.shape[-1]
    if K.ndim != 2 or K.shape != Q.shape or K.shape[0] != d:
        raise ValueError(f"K and Q must both have shape (d, m) with d = {d}, got {K.shape} "
                         f"and {Q.shape}")
    if KQ_next is None:
        return fail(title, "KQ_next is None: you have not answered yet (replace the stub "
                           "above).")
    if not isinstance(KQ_next, (tuple, list)) or len(KQ_next) != 2:
        return fail(title, "answer with the pair (K_next, Q_next).")
    ans = []
    for x, name in zip(KQ_next, ("K_next", "Q_next")):
        t, err = answer_tensor(x, name)
        if err:
            return fail(title, err)
        ans.append(t.numpy())
    risk = lambda A, B: risk_oracle(X, Y, z, v, np.einsum("...dm,...em->...de", A, B))
    gK = _fd_grad(lambda A: risk(A, np.broadcast_to(Q, A.shape)), K)
    gQ = _fd_grad(lambda B: risk(np.broadcast_to(K, B.shape), B), Q)
    K1 = K - lr * gK
    gQ_seq = _fd_grad(lambda B: risk(np.broadcast_to(K1, B.shape), B), Q)
    G = _fd_grad(lambda A: risk_oracle(X, Y, z, v, A), K @ Q.T)  # dL/dW
    n = X.shape[0]
    stacked = lambda a, b: np.stack([a, b])
    mistakes = {
        "Your gradients are of the summed loss: the risk is a mean over the n samples, so "
        "divide by n.": stacked(K - lr * n * gK, Q - lr * n * gQ),
        "A transpose is missing in ∇_Q L: with W = KQᵀ, ∇_Q L = Gᵀ K, not G K "
        "(G = ∇_W L).": stacked(K1, Q - lr * (G @ K)),
        "∇_K L has a transpose too many: with W = KQᵀ, ∇_K L = G Q, not Gᵀ Q "
        "(G = ∇_W L).": stacked(K - lr * (G.T @ Q), Q - lr * gQ),
        "You moved up the gradient: a descent step subtracts η times each gradient.":
            stacked(K + lr * gK, Q + lr * gQ),
        "Your Q step used the updated K: take both gradients at the current (K, Q), then "
        "step.": stacked(K1, Q - lr * gQ_seq),
        "Your gradients of K and Q are swapped: with W = KQᵀ, ∇_K L = G Q and ∇_Q L = Gᵀ K "
        "(G = ∇_W L).": stacked(K - lr * (G.T @ Q), Q - lr * (G @ K)),
        "The step size η is missing.": stacked(K - gK, Q - gQ),
    }
    if any(a.shape != K.shape for a in ans):
        return fail(title, f"K_next and Q_next must have shape {K.shape}, yours have "
                           f"{ans[0].shape} and {ans[1].shape}.")
    fb = check_value(stacked(*ans), stacked(K1, Q - lr * gQ), rtol=1e-6, atol=1e-8,
                     name="(K_next, Q_next) stacked", mistakes=mistakes)
    return Feedback(fb.ok, title, fb.message, fb.details)


def _att_svm_rows(data, alpha, param, W):
    """The constraint vectors A_k (flattened) and their (sample, token) of the Att-SVM."""
    X = reference(data.X, "X").numpy()
    n, T, d = X.shape
    alpha = np.asarray(torch.as_tensor(alpha).cpu(), dtype=np.int64).reshape(-1)
    if alpha.shape != (n,) or alpha.min() < 0 or alpha.max() >= T:
        raise ValueError(f"alpha must hold n = {n} token indices in 0..{T - 1}, got {alpha}")
    i, t = np.nonzero(np.arange(T)[None, :] != alpha[:, None])
    diff = X[i, alpha[i]] - X[i, t]  # (m, d): x_{i alpha_i} - x_{it}
    if param == "p":
        Wk = np.eye(d) if W is None else reference(W, "W").numpy()
        return diff @ Wk, (i, t)  # k_it = W^T x_it: (k_ia - k_it)^T p = diff W p
    if data.z is None:
        raise ValueError("data must carry the queries z for the W-SVM")
    Z = reference(data.z, "z").numpy()
    return np.einsum("md,me->mde", diff, Z[i]).reshape(len(i), d * d), (i, t)


def check_att_svm(answer, data, alpha, *, param="W", W=None) -> Feedback:
    r"""Check an Att-SVM solution by its optimality conditions (chapter 2).

    .. math::
        \min \|w\| \quad\text{s.t.}\quad \langle A_k, w\rangle \ge 1, \qquad
        A_k = (x_{i\alpha_i} - x_{it}) z_i^\top \ (w = W) \text{ or }
        W^\top(x_{i\alpha_i} - x_{it}) \ (w = p),

    for every sample :math:`i` and token :math:`t \ne \alpha_i`. A feasible :math:`w` is the
    solution iff :math:`w = \sum_k \lambda_k A_k` with :math:`\lambda \ge 0` supported on the
    active constraints (KKT). Both are checked without a convex solver.

    Parameters
    ----------
    answer : array (d, d) for ``param="W"``, (d,) for ``param="p"``
    data : AttentionData
        One instance (with queries ``z`` for ``param="W"``).
    alpha : int array (n,)
        The selected token of each sample (0-based).
    param : "W" or "p"
    W : array (d, d), optional
        The fixed key matrix of the p-SVM (default identity).
    """
    if param not in ("W", "p"):
        raise ValueError(f"param must be 'W' or 'p', got {param!r}")
    title = f"Att-SVM ({param})"
    data = one_instance(data)
    A, (i, t) = _att_svm_rows(data, alpha, param, W)
    ans, err = answer_tensor(answer, param)
    if err:
        return fail(title, err)
    w = ans.numpy().reshape(-1)
    if w.size != A.shape[1]:
        return fail(title, f"{param} must have {A.shape[1]} entries, yours has {w.size}.")
    margins = A @ w
    scale = 1e-6 * (1 + np.abs(A).max() * np.abs(w).max())
    if margins.min() < 1 - scale:
        k = int(margins.argmin())
        worst = int((margins < 1 - scale).sum())
        return fail(title, f"{worst} of {len(margins)} margin constraints are violated; the "
                           f"worst is at {position((i[k], t[k]), ('sample', 'token'))} "
                           f"(margin {margins[k]:.4g} < 1).", violated=worst)
    active = margins <= 1 + 1e-5 * (1 + np.abs(margins).max())
    if not active.any():
        return fail(title, "every margin is above 1: a smaller multiple of your answer is "
                           "still feasible, so it is not the minimum-norm solution (a "
                           "normalisation is missing).")
    lam, res = nnls(A[active].T, w)
    rel = res / max(np.linalg.norm(w), 1e-300)
    if rel > 1e-4:
        return fail(title, f"feasible, but not the minimum-norm solution: it is not a "
                           f"non-negative combination of its {int(active.sum())} active "
                           f"constraints (relative residual {rel:.2g}); a smaller "
                           f"feasible answer exists.", residual=rel)
    return Feedback(True, title, f"all {len(margins)} margins ≥ 1 and the KKT conditions hold "
                                 f"({int((lam > 1e-9).sum())} support constraints).",
                    dict(support=int((lam > 1e-9).sum())))


def check_causal_attention(S, X, W) -> Feedback:
    r"""Check causal self-attention (chapter 8):
    :math:`S_{kt} = \mathrm{softmax}_{t \le k}(x_t^\top W x_k)`, zero for :math:`t > k`.

    Parameters
    ----------
    S : array (T, T) or (n, T, T)
        The answer: row ``k`` is the attention of query ``k`` over the tokens.
    X : array (T, d) or (n, T, d)
        The sequence(s).
    W : array (d, d)
    """
    title = "causal attention"
    X, W = reference(X, "X").numpy(), reference(W, "W").numpy()
    if X.ndim not in (2, 3) or W.shape != (X.shape[-1],) * 2:
        raise ValueError(f"X must be (T,d) or (n,T,d) and W (d,d); got {X.shape}, {W.shape}")
    T = X.shape[-2]
    a = np.einsum("...td,de,...ke->...kt", X, W, X)  # a[k, t] = x_t^T W x_k
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    expected = np.where(future, -np.inf, a)
    expected = np.exp(expected - expected.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    full = np.exp(a - a.max(-1, keepdims=True))
    full /= full.sum(-1, keepdims=True)
    ans, err = answer_tensor(S, "S")
    if err:
        return fail(title, err)
    A = ans.numpy()
    if A.shape == expected.shape and np.allclose(A, np.swapaxes(expected, -1, -2), rtol=1e-6,
                                                 atol=1e-9):
        return fail(title, "your matrix is transposed: row k must be the attention of query k "
                           "over the tokens t ≤ k (a[k, t] = x_tᵀ W x_k).")
    if A.shape == expected.shape and bool((A[..., future] != 0).any()):
        return fail(title, "some query attends to a future token (S[k, t] ≠ 0 for t > k): "
                           "in causal attention query k sees only tokens t ≤ k.")
    return check_value(S, expected, rtol=1e-6, atol=1e-9, name="S", mistakes={
        "You masked after the softmax, so the rows no longer sum to 1: set the future logits to "
        "-∞ before normalising.": np.where(future, 0.0, full),
    })
