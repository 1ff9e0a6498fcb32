"""The certificate of an SVM answer, and of an SVM's infeasibility.

Every answer of :mod:`attnlib.svm.engine` (and of :mod:`attnlib.svm.fast`, which the engine
tries first) is returned only after :func:`certify` has checked it against the problem

.. math:: \\min_w \\|w\\| \\quad\\text{s.t.}\\quad A w \\ge b,\\; C w = c

(the rows of an :class:`~attnlib.svm.engine.Rows`): its margins, the dual feasibility of its
multipliers and the duality gap. A solver's "infeasible" is believed only when :func:`farkas`
finds and verifies a Farkas certificate.

See chapter 2, *The Att-SVM and gradient descent*.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from attnlib.svm.config import CLARABEL_TIGHT

__all__ = ["Certificate", "certify", "farkas"]


class Certificate(NamedTuple):
    """The checks of one answer: ``ok`` when all are within ``tol``.

    ``margin`` is the largest relative margin violation
    :math:`\\max_k (b_k - A_k w)/|b_k|` (0 when every margin holds), ``gap`` the relative
    duality gap, ``dual`` the dual infeasibility (negative multipliers; for "nuc" the excess of
    :math:`\\|\\mathrm{mat}(A^\\top\\lambda + C^\\top\\mu)\\|_2` over 1).
    """

    ok: bool
    margin: float
    gap: float
    dual: float


def certify(r, w, lam, mu, norm, tol: float) -> Certificate:
    """Primal feasibility, dual feasibility and duality gap of an answer (w, lam, mu) to the
    problem of the rows ``r`` (an :class:`~attnlib.svm.engine.Rows`)."""
    w, lam = np.asarray(w, dtype=np.float64).reshape(-1), np.asarray(lam, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    if not (np.isfinite(w).all() and np.isfinite(lam).all() and np.isfinite(mu).all()):
        return Certificate(False, math.inf, math.inf, math.inf)
    wn = float(np.linalg.norm(w))
    margin = 0.0
    if len(r.b):
        Aw = r.A @ w
        scale = np.where(r.b != 0, np.abs(r.b), np.linalg.norm(r.A, axis=1) * wn + 1e-300)
        margin = max(0.0, float(((r.b - Aw) / scale).max()))
    if r.C is not None and len(r.C):
        scale = np.maximum(np.abs(r.c), np.linalg.norm(r.C, axis=1) * wn) + 1e-300
        margin = max(margin, float((np.abs(r.C @ w - r.c) / scale).max()))
    y = (r.A.T @ lam if len(lam) else 0) + (r.C.T @ mu if len(mu) else 0)  # A'lam + C'mu
    dual_obj = float(r.b @ lam if len(lam) else 0) + float(r.c @ mu if len(mu) else 0)
    dual = max(0.0, -float(lam.min()) / (float(np.abs(lam).max()) + 1e-300)) if len(lam) \
        else 0.0
    if norm == "fro":  # primal 1/2||w||^2, dual b'lam + c'mu - 1/2||A'lam + C'mu||^2
        primal = wn * wn
        gap = abs(primal - dual_obj) / max(primal, abs(dual_obj), 1e-300)
        dual = max(dual, float(np.linalg.norm(w - y)) / (wn + 1e-300))
    elif norm == "nuc":  # primal ||W||_*, dual b'lam + c'mu with ||mat(y)||_2 <= 1
        primal = float(np.linalg.norm(w.reshape(r.shape), "nuc"))
        gap = abs(primal - dual_obj) / max(primal, 1e-300)
        spec = float(np.linalg.norm(np.reshape(y, r.shape), 2)) if np.ndim(y) else 0.0
        dual = max(dual, spec - 1.0)
    else:  # primal sum|w|^p, dual b'lam + c'mu - sum (p-1)(|y|/p)^q, q = p/(p-1)
        p = float(norm)
        primal = float((np.abs(w) ** p).sum())
        conj = (p - 1.0) * float(((np.abs(y) / p) ** (p / (p - 1.0))).sum()) if np.ndim(y) \
            else 0.0
        gap = abs(primal - (dual_obj - conj)) / max(primal, 1e-300)
    ok = margin <= tol and gap <= tol and dual <= tol
    return Certificate(bool(ok), margin, float(gap), float(dual))


def farkas(r, ratio: float) -> bool:
    r"""Whether infeasibility of the rows ``r`` (an :class:`~attnlib.svm.engine.Rows`) is
    confirmed by a verified Farkas certificate.

    The rows are normalised (every :math:`A_k`, :math:`C_k` to unit norm, then all right-hand
    sides by their largest magnitude), so the test does not depend on the data's scale. Then
    find :math:`0 \le \lambda \le 1`, :math:`|\mu| \le 1` maximising
    :math:`g = b^\top\lambda + c^\top\mu` subject to :math:`A^\top\lambda + C^\top\mu = 0`.
    Confirmed when :math:`g \ge` ``ratio`` :math:`\cdot \|A^\top\lambda + C^\top\mu\|`
    (recomputed in float64): every w with :math:`Aw \ge b,\ Cw = c` would then need
    :math:`\|w\| \ge` ``ratio`` in these units (a geometric margin below 1/ratio). A zero
    row with a positive right-hand side (:math:`0 \ge b_k > 0`) is confirmed at once.
    """
    eq = r.C is not None and len(r.C) > 0
    C0, c0 = (r.C, r.c) if eq else (np.zeros((0, r.A.shape[1])), np.zeros(0))
    na, nc = np.linalg.norm(r.A, axis=1), np.linalg.norm(C0, axis=1)
    if ((na == 0) & (r.b > 0)).any() or ((nc == 0) & (c0 != 0)).any():
        return True
    ka, kc = na > 0, nc > 0  # zero rows left are 0 >= b (b <= 0) or 0 = 0: always true
    A, b = r.A[ka] / na[ka, None], r.b[ka] / na[ka]
    C, c = C0[kc] / nc[kc, None], c0[kc] / nc[kc]
    big = max(np.abs(b).max(initial=0.0), np.abs(c).max(initial=0.0))
    if not big > 0:
        return False  # homogeneous: w = 0 is feasible
    b, c = b / big, c / big
    eq = len(c) > 0
    import cvxpy as cp  # (here only: a process that never needs it does not pay its import)

    lam = cp.Variable(len(b), nonneg=True)
    mu = cp.Variable(len(c)) if eq else None
    res = (A.T @ lam if len(b) else 0) + (C.T @ mu if eq else 0)
    cons = [lam <= 1, res == 0] + ([cp.abs(mu) <= 1] if eq else [])
    prob = cp.Problem(cp.Maximize((b @ lam if len(b) else 0) + (c @ mu if eq else 0)), cons)
    try:
        prob.solve(solver="CLARABEL", **CLARABEL_TIGHT)
    except cp.error.SolverError:
        return False
    if prob.status not in ("optimal", "optimal_inaccurate") or lam.value is None:
        return False
    lv = np.clip(lam.value, 0.0, None)
    mv = mu.value if eq else np.zeros(0)
    g = float(b @ lv + c @ mv)
    resid = float(np.linalg.norm(A.T @ lv + C.T @ mv))
    return g > 0 and g >= ratio * resid
