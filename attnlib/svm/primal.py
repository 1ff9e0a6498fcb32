"""The SVM problems as the papers write them: one cvxpy constraint per token.

Readable, slow (a Python loop over constraints and a fresh canonicalisation per call) and
independent of the fast path (:mod:`attnlib.svm.engine` solves duals of vectorized rows): the
documentation's statement of each problem and the tests' oracle. Arguments are numpy arrays of
one instance; each function returns ``(optimal value, solution)``. cvxpy is imported when a
problem is first built (its import costs about a second, which a process that never solves
one need not pay).
"""

from __future__ import annotations

import numpy as np

__all__ = ["att_svm_primal", "prompt_svm_primal", "head_svm_primal"]

_TIGHT = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def _norm(x, norm):
    import cvxpy as cp

    if norm == "fro":
        return cp.norm(cp.vec(x, order="C"), 2)
    if norm == "nuc":
        return cp.normNuc(x)
    return cp.pnorm(cp.vec(x, order="C"), float(norm))


def att_svm_primal(X, z, alpha, norm="fro", mask=None):
    """Att-SVM: :math:`\\min_W \\|W\\|` s.t. :math:`(x_{i\\alpha_i} - x_{it})^\\top W z_i \\ge 1`
    for every visible :math:`t \\ne \\alpha_i`. X (n,T,d), z (n,d), alpha (n,), mask (n,T).

    The problem as the paper writes it, one cvxpy constraint per pair :math:`(i, t)`: the
    readable statement that :func:`att_svm` (the fast path) is tested against. Returns
    ``(optimal value, W)`` as numpy. See chapter 2, *The Att-SVM and gradient descent*.
    """
    import cvxpy as cp

    n, T, d = X.shape
    W = cp.Variable((d, d))
    cons = [(X[i, alpha[i]] - X[i, t]) @ W @ z[i] >= 1
            for i in range(n) for t in range(T)
            if t != alpha[i] and (mask is None or mask[i, t])]
    prob = cp.Problem(cp.Minimize(_norm(W, norm)), cons)
    prob.solve(**_TIGHT)
    return prob.value, W.value


def prompt_svm_primal(X, alpha, W=None, norm="fro", rhs=None):
    """p-SVM: :math:`\\min_p \\|p\\|` s.t. :math:`(x_{i\\alpha_i} - x_{it})^\\top W p \\ge r_i`
    (:math:`r_i = 1`, or ``rhs``: the relaxed p-SVM). X (n,T,d), W (d,d) default identity.

    The readable statement that :func:`prompt_svm` and :func:`relaxed_prompt_svm` are tested
    against. Returns ``(optimal value, p)`` as numpy. See chapter 2.
    """
    import cvxpy as cp

    n, T, d = X.shape
    W = np.eye(d) if W is None else W
    p = cp.Variable(d)
    r = np.ones(n) if rhs is None else rhs
    cons = [(X[i, alpha[i]] - X[i, t]) @ W @ p >= r[i]
            for i in range(n) for t in range(T) if t != alpha[i]]
    prob = cp.Problem(cp.Minimize(_norm(p, norm)), cons)
    prob.solve(**_TIGHT)
    return prob.value, p.value


def head_svm_primal(X, Y, alpha, norm="fro"):
    """v-SVM: :math:`\\min_v \\|v\\|` s.t. :math:`Y_i v^\\top x_{i\\alpha_i} \\ge 1`.

    The readable statement that :func:`head_svm` is tested against. Returns
    ``(optimal value, v)`` as numpy. See chapter 4, *Training the head too*.
    """
    import cvxpy as cp

    n, _, d = X.shape
    v = cp.Variable(d)
    cons = [Y[i] * (X[i, alpha[i]] @ v) >= 1 for i in range(n)]
    prob = cp.Problem(cp.Minimize(_norm(v, norm)), cons)
    prob.solve(**_TIGHT)
    return prob.value, v.value
