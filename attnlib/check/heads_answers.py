r"""Checks for the write-it-yourself exercises of chapters 6 and 7.

- Chapter 6 (over-parameterisation): the learner builds, as in the proof of feasibility for
  every selection, a matrix :math:`W` whose margins
  :math:`(x_{i\alpha_i} - x_{it})^\top W z_i` all equal 1. :func:`check_unit_margins`
  evaluates every margin from its definition in NumPy (``margins_oracle``); no SVM is solved.
- Chapter 7 (nonlinear heads): the learner reads the selected sets
  :math:`\mathcal O_i = \{t : s_{it} > 10^{-3}\}` off an attention and computes the finite
  part :math:`W^{fin}`, the minimum-norm matrix with
  :math:`(x_{i\tau} - x_{it})^\top W z_i = \log(s_{i\tau}/s_{it})` for
  :math:`t, \tau \in \mathcal O_i`. :func:`check_finite_part` writes these equations for
  *every* pair of a set (the library uses one reference member per set) and certifies the
  minimum norm by membership in their span (the minimum-norm solution of a consistent
  linear system is the only solution in the row space); it never calls
  ``attnlib.svm_equivalence``.

Wrong answers get a diagnosis of the common mistakes (a transposed :math:`W`, 1-based token
indices, a flipped sign, the probabilities or a base-10 logarithm in place of the natural
logarithm of the ratio, masked tokens kept in the sets at any lower threshold,
torch.linalg.lstsq's default CPU driver on a wide system (in the generic message), a
solution that is not of minimum norm, the queries (or the rows of pinv(Z)) used in place
of their dual vectors, an SVM solver instead of the construction), never the expected value. See
``attnlib.check`` for how a chapter uses a check.
"""

from __future__ import annotations

import numpy as np

from attnlib.check.feedback import Feedback, answer_tensor, fail, one_instance, reference

__all__ = ["check_unit_margins", "check_finite_part", "margins_oracle", "finite_part_oracle"]

_RTOL = 1e-6


# ----------------------------------------------------------------------------- chapter 6
def margins_oracle(X, z, W, alpha) -> np.ndarray:
    r"""The margins :math:`(x_{i\alpha_i} - x_{it})^\top W z_i`, (n, T) in float64, 0 at the
    selected token; from the definition, one input at a time."""
    X, z, W = (np.asarray(a, dtype=np.float64) for a in (X, z, W))
    n, T, _ = X.shape
    out = np.zeros((n, T))
    for i in range(n):
        Wz = W @ z[i]
        for t in range(T):
            out[i, t] = float((X[i, alpha[i]] - X[i, t]) @ Wz)
    return out


def _selection(alpha, n, T) -> np.ndarray:
    a = np.asarray(reference(alpha, "alpha").numpy()).reshape(-1)
    if a.shape != (n,) or not np.all(a == np.round(a)) or a.min() < 0 or a.max() >= T:
        raise ValueError(f"alpha must hold n = {n} token indices in 0..{T - 1}, got {a}")
    return a.astype(np.int64)


def _instance(data):
    data = one_instance(data)
    if data.z is None:
        raise ValueError("data must carry the queries z (AttentionData with z)")
    return reference(data.X, "X").numpy(), reference(data.z, "z").numpy()


def _unit(M, others, scale) -> bool:
    return bool(np.all(np.abs(M[others] - 1) <= _RTOL * scale))


def check_unit_margins(W, data, alpha) -> Feedback:
    r"""Check the construction of the proof of feasibility (chapter 6): every margin
    :math:`(x_{i\alpha_i} - x_{it})^\top W z_i`, :math:`t \ne \alpha_i`, equals 1.

    Any matrix with this property passes (the construction leaves a choice of the vectors
    :math:`u_i`); the Att-SVM solution, whose non-support margins exceed 1, does not.

    Parameters
    ----------
    W : array (d, d)
        The answer.
    data : AttentionData
        One instance with queries ``z``.
    alpha : int array (n,)
        The selection (0-based token indices).
    """
    title = "unit margins (the construction)"
    X, z = _instance(data)
    n, T, d = X.shape
    a = _selection(alpha, n, T)
    ans, err = answer_tensor(W, "W")
    if err:
        return fail(title, err)
    A = ans.numpy()
    if A.shape != (d, d):
        if A.shape == (d * d,):
            A = A.reshape(d, d)
        else:
            return fail(title, f"W must have shape (d, d) = ({d}, {d}), yours has "
                               f"{tuple(A.shape)}.")
    others = np.arange(T)[None, :] != a[:, None]
    scale = 1 + np.abs(X).max() ** 2 * np.abs(z).max() * np.abs(A).sum()
    M = margins_oracle(X, z, A, a)
    m = int(others.sum())
    if _unit(M, others, scale):
        return Feedback(True, title, f"all {m} margins equal 1: W separates the selection, "
                                     "every constraint tight.")
    wrong = [i for i in range(n) if not _unit(M[i], others[i], scale)]
    for shift in (-1, 1):  # alpha read as 1-based (or shifted the other way), input by input
        b = (a + shift) % T
        Mb, ob = margins_oracle(X, z, A, b), np.arange(T)[None, :] != b[:, None]
        shifted = [i for i in wrong if _unit(Mb[i], ob[i], scale)]
        if shifted:
            return fail(title, f"in input(s) {shifted} (counted from 0, as in X[i]) your W "
                               "gives margin 1 to token "
                               f"α_i {'−' if shift < 0 else '+'} 1 instead of α_i: alpha is "
                               "0-based, the selected token of input i is X[i, alpha[i]].")
    if _unit(margins_oracle(X, z, A.T, a), others, scale):
        return fail(title, "your W is transposed: the margin is (x_iα − x_it)ᵀ W z_i, so the "
                           "queries enter on the right (W z_i = u_i) and the token "
                           "differences on the left.")
    if _unit(-M, others, scale):
        return fail(title, "every margin is −1: the sign is flipped; the margin is the "
                           "selected token minus the other one, x_iα − x_it.")
    lo, hi = M[others].min(), M[others].max()
    if hi - lo <= _RTOL * scale and lo > 0:
        return fail(title, f"all your margins are equal, to {lo:.4g} rather than 1: the "
                           "construction asks for margin exactly 1 (check the right-hand "
                           "side of the equations for u_i, or a stray factor).")
    if lo >= 1 - _RTOL * scale:
        return fail(title, f"every margin is at least 1, so your W separates the selection, "
                           f"but {int((M[others] > 1 + _RTOL * scale).sum())} of {m} exceed 1: "
                           "this is a feasible point (an Att-SVM solution, perhaps), not the "
                           "construction, which makes every margin exactly 1 without a "
                           "solver.")
    Zp = np.linalg.pinv(z)  # (d, n): dual vectors of the queries
    Uh = A @ Zp  # if W = sum_j u_j z_j^T: column i is u_i
    if all(np.allclose((X[i, a[i]] - X[i, np.arange(T) != a[i]]) @ Uh[:, i], 1,
                       rtol=0, atol=_RTOL * scale) for i in range(n)):
        return fail(title, "your u_i are right, but W z_i ≠ u_i: W = Σ_j u_j z_jᵀ works only "
                           "for orthonormal queries. Use vectors w_j with w_jᵀ z_i = δ_ij "
                           "(the rows of a left inverse of [z_1 ⋯ z_n], as in the proof).")
    if n == d:  # W = sum_j u_j (row j of pinv(Z)): rows taken where columns are meant
        Ur = A @ np.linalg.pinv(Zp)
        if all(np.allclose((X[i, a[i]] - X[i, np.arange(T) != a[i]]) @ Ur[:, i], 1,
                           rtol=0, atol=_RTOL * scale) for i in range(n)):
            return fail(title, "your u_i are right, but W z_i ≠ u_i: you took the rows of "
                               "the right inverse pinv(Z) of the queries' matrix Z (rows "
                               "z_iᵀ); the dual vectors w_j are its columns, Z w_j = e_j.")
    off = others & (np.abs(M - 1) > _RTOL * scale)
    i, t = np.argwhere(off)[np.abs(M - 1)[off].argmax()]
    rows = sorted({int(k) for k in np.nonzero(off.any(1))[0]})
    return fail(title, f"{int(off.sum())} of {m} margins differ from 1, in input(s) {rows} "
                       f"(counted from 0); the farthest is X[{int(i)}, {int(t)}] (yours "
                       f"{M[i, t]:.4g}). Check W z_i for that input: its differences "
                       "x_iα − x_it must all give 1, with α_i counted from 0.",
                off=int(off.sum()))


# ----------------------------------------------------------------------------- chapter 7
def _pairs(X, z, s, O):
    """Every pair t < τ of each set: rows (x_iτ − x_it) z_iᵀ (flattened), log(s_iτ/s_it)."""
    rows, logr, diff, where = [], [], [], []
    for i in range(X.shape[0]):
        members = np.nonzero(O[i])[0]
        for k, t in enumerate(members):
            for tau in members[k + 1:]:
                rows.append(np.outer(X[i, tau] - X[i, t], z[i]).ravel())
                logr.append(np.log(s[i, tau] / s[i, t]))
                diff.append(s[i, tau] - s[i, t])
                where.append((i, int(t), int(tau)))
    d2 = X.shape[-1] ** 2
    return (np.array(rows).reshape(-1, d2), np.array(logr), np.array(diff), where)


def _probs(s, n, T, threshold):
    S = reference(s, "s").numpy()
    if S.shape != (n, T) or np.any(S < 0) or np.any(S > 1 + 1e-6):
        raise ValueError(f"s must hold attention probabilities of shape (n, T) = ({n}, {T})")
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    return S


def finite_part_oracle(X, z, s, threshold=1e-3) -> np.ndarray:
    r"""The finite part :math:`W^{fin}` from its definition: the minimum-norm solution
    (``numpy.linalg.lstsq``) of :math:`(x_{i\tau} - x_{it})^\top W z_i =
    \log(s_{i\tau}/s_{it})` over every pair of :math:`\mathcal O_i = \{t: s_{it} >`
    ``threshold``:math:`\}`; (d, d) in float64."""
    X, z, s = (np.asarray(a, dtype=np.float64) for a in (X, z, s))
    C, b, _, _ = _pairs(X, z, s, s > threshold)
    d = X.shape[-1]
    if len(b) == 0:
        return np.zeros((d, d))
    return np.linalg.lstsq(C, b, rcond=None)[0].reshape(d, d)


def _solves(C, w, b, tol) -> bool:
    return bool(np.all(np.abs(C @ w - b) <= tol * (1 + np.abs(b))))


def _fits_masked(X, z, S, threshold, w, tol, k) -> bool:
    """Whether w reproduces the ratios of sets read with a lower threshold than the one
    asked (masked tokens kept), for any such threshold."""
    for th in [0.0] + sorted(set(S[(S <= threshold) & (S > 0)].tolist())):
        C0, l0, _, _ = _pairs(X, z, S, S > th)
        if len(l0) > k and _solves(C0, w, l0, tol):
            return True
    return False


def check_finite_part(W_fin, data, s, threshold=1e-3) -> Feedback:
    r"""Check a finite part :math:`W^{fin}` of the SVM equivalence (chapter 7): the
    minimum-norm :math:`W` with :math:`(x_{i\tau} - x_{it})^\top W z_i =
    \log(s_{i\tau}/s_{it})` for all :math:`t, \tau \in \mathcal O_i = \{t : s_{it} >
    \text{threshold}\}`.

    The equations are checked pair by pair; the minimum norm by the answer lying in the span
    :math:`\mathcal S_{fin}` of the matrices :math:`(x_{i\tau} - x_{it}) z_i^\top`.

    Parameters
    ----------
    W_fin : array (d, d)
        The answer.
    data : AttentionData
        One instance with queries ``z``.
    s : array (n, T)
        The attention probabilities the sets and ratios are read from.
    threshold : float
        :math:`10^{-3}`, as in the paper's code.
    """
    title = "finite part W^fin"
    X, z = _instance(data)
    n, T, d = X.shape
    S = _probs(s, n, T, threshold)
    ans, err = answer_tensor(W_fin, "W_fin")
    if err:
        return fail(title, err)
    A = ans.numpy()
    if A.shape != (d, d):
        return fail(title, f"W_fin must have shape (d, d) = ({d}, {d}), yours has "
                           f"{tuple(A.shape)}.")
    C, logr, diff, where = _pairs(X, z, S, S > threshold)
    w, tol = A.ravel(), 1e-6
    if len(logr) == 0:  # every set a singleton: W_fin = 0
        ok = bool(np.abs(w).max() <= tol)
        return Feedback(ok, title, "every set has one token, so W_fin = 0." if ok else
                        "every set has one token: no ratio to reproduce, so the minimum-norm "
                        "W_fin is the zero matrix.")
    if not _solves(C, w, logr, tol):
        if not np.any(w):
            return fail(title, "your W_fin is zero, but some set O_i holds several tokens: "
                               "O_i = {t : s_it > 10⁻³}, a threshold, not the argmax.")
        if _solves(C, -w, logr, tol):
            return fail(title, "the signs are flipped: the logit difference (x_iτ − x_it)ᵀ W z_i "
                               "must equal log(s_iτ / s_it), the larger logit for the larger "
                               "probability.")
        if _solves(C, A.T.ravel(), logr, tol):
            return fail(title, "your W_fin is transposed: the logit of token t is x_itᵀ W z_i, "
                               "the query on the right.")
        if _solves(C, w, diff, tol):
            return fail(title, "your logit differences equal the differences of the "
                               "probabilities: softmax ratios are exponentials of logit "
                               "differences, so take the logarithm of the ratio.")
        if any(_solves(C, w, logr / np.log(base), tol) for base in (10.0, 2.0)):
            return fail(title, "your ratios are in log base 10 or 2: the softmax is built "
                               "on exp, so take the natural logarithm (torch.log).")
        bad = np.abs(C @ w - logr) > tol * (1 + np.abs(logr))
        i, t, tau = where[int(np.argmax(np.abs(C @ w - logr)))]
        return fail(title, f"{int(bad.sum())} of {len(logr)} in-set equations fail; the "
                           f"farthest is input {i}, tokens ({t}, {tau}), all counted from 0 "
                           "as in X[i, t]. Check that your sets "
                           "are O_i = {t : s_it > 10⁻³} and that each equation uses the "
                           "tokens of one input with its own query. If you used "
                           "torch.linalg.lstsq: its default CPU driver (gelsy) can misjudge "
                           "the rank of a wide C and return a non-solution; use "
                           "torch.linalg.pinv.", failed=int(bad.sum()))
    proj = np.linalg.pinv(C) @ (C @ w)  # projection of w on S_fin (the row space of C)
    out = np.linalg.norm(w - proj) / max(np.linalg.norm(w), 1e-300)
    if out > 1e-6:
        if _fits_masked(X, z, S, threshold, w, tol, len(logr)):
            return fail(title, "your W_fin also reproduces the ratios of the masked tokens "
                               "(s_it ≤ 10⁻³): they are not in the selected sets, and fitting "
                               "them pushes W out of S_fin.")
        return fail(title, f"every in-set ratio is reproduced, but W_fin is not of minimum "
                           f"norm: {out:.0%} of its norm lies outside S_fin (the span of the "
                           "matrices (x_iτ − x_it) z_iᵀ). Take the minimum-norm solution "
                           "(torch.linalg.pinv, or numpy.linalg.lstsq).", outside=out)
    return Feedback(True, title, f"all {len(logr)} in-set log-ratios are reproduced and W_fin "
                                 "lies in S_fin (minimum norm).")
