"""Fast solvers of the two attention SVMs, whose answers the engine certifies like any other.

* ``"fro"`` -- Lawson and Hanson's least-distance program: :math:`\\min\\|w\\|` s.t.
  :math:`Aw \\ge b` is one non-negative least-squares problem,

  .. math:: \\min_{u \\ge 0} \\Big\\|\\begin{bmatrix} A^\\top \\\\ b^\\top \\end{bmatrix} u
     - e_{D+1}\\Big\\|, \\qquad r = Eu - e_{D+1},

  with :math:`w = -r_{1:D}/r_{D+1}` and multipliers :math:`\\lambda = u / (1 - b^\\top u)`;
  a zero residual means :math:`A^\\top u = 0,\\ b^\\top u = 1`: a Farkas certificate
  (:func:`farkas_check` verifies it). An active-set method, exact up to rounding, about
  0.1-0.5 ms per instance (scipy's ``nnls``). Equality rows :math:`Cw = c` are
  eliminated first (:func:`ldp_eq`: the null space of C, then the same program).
* ``"nuc"`` -- a batched primal-dual interior-point method (HKM direction, Mehrotra
  predictor-corrector) for the SDP

  .. math:: \\min \\tfrac12 \\mathrm{tr}\\,X \\ \\text{s.t.}\\ \\langle \\hat A_k, X\\rangle
     \\ge b_k,\\ X = \\begin{bmatrix} P & M \\\\ M^\\top & Q \\end{bmatrix} \\succeq 0,
     \\qquad \\hat A_k = \\tfrac12 \\begin{bmatrix} 0 & A_k \\\\ A_k^\\top & 0 \\end{bmatrix},

  whose optimum is :math:`\\min \\|M\\|_*` and whose dual is the engine's
  :math:`\\max b^\\top\\lambda` s.t. :math:`\\|\\sum_k \\lambda_k A_k\\|_2 \\le 1`. Every
  Att-SVM row is rank one, :math:`A_k = u_k v_k^\\top`, so the Schur matrix
  :math:`H_{kj} = \\mathrm{tr}(\\hat A_k X \\hat A_j S^{-1})` costs :math:`O(m^2 N + m N^2)`
  instead of :math:`O(m N^3)`; many instances of one shape iterate together as stacked arrays.

Neither solver is trusted: :func:`attnlib.svm.engine.solve_all` certifies each answer
(margins, dual feasibility, duality gap) and re-solves any that fails with the conic solvers.
See chapter 5, *W versus (K, Q)*.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import nnls

__all__ = ["ldp", "ldp_eq", "farkas_check", "rank_one", "nuclear_ipm", "aop", "aadj"]


def ldp(A: np.ndarray, b: np.ndarray):
    """:math:`\\min\\|w\\|` s.t. :math:`Aw \\ge b` through one NNLS (Lawson-Hanson).

    Returns ("solved", w (D,), lam (m,)), ("infeasible", u (m,)) with :math:`A^\\top u
    \\approx 0`, :math:`b^\\top u = 1` (to be verified by :func:`farkas_check`), or
    ("failed", None).
    """
    m, D = A.shape
    E = np.vstack([A.T, b[None, :]])  # (D+1, m)
    f = np.zeros(D + 1)
    f[-1] = 1.0
    try:
        u, _ = nnls(E, f, maxiter=max(50, 10 * m))
    except (RuntimeError, ValueError):
        return "failed", None
    r = E @ u - f
    denom = -r[-1]  # 1 - b'u
    if not np.isfinite(r).all():
        return "failed", None
    if denom <= 1e-12 * max(1.0, float(np.abs(u).max(initial=0.0))):
        return "infeasible", u
    return "solved", -r[:-1] / r[-1], u / denom


def ldp_eq(A: np.ndarray, b: np.ndarray, C: np.ndarray, c: np.ndarray):
    """:math:`\\min\\|w\\|` s.t. :math:`Aw \\ge b,\\ Cw = c`: the equalities eliminated,
    then one :func:`ldp`.

    With :math:`w_0 = C^+c` and N an orthonormal basis of the null space of C,
    :math:`w = w_0 + Ny` and :math:`\\|w\\|^2 = \\|w_0\\|^2 + \\|y\\|^2`, so y solves the LDP
    :math:`\\min\\|y\\|` s.t. :math:`ANy \\ge b - Aw_0` with the same multipliers
    :math:`\\lambda`; those of the equalities solve :math:`C^\\top\\mu = w - A^\\top\\lambda`
    (least squares). Returns ("solved", w (D,), lam (m,), mu (k,)) or ("failed", None): an
    infeasible or inconsistent instance is left to the conic solvers, and every answer is
    certified by the engine like any other.
    """
    D = A.shape[1]
    if len(b) == 0 or len(c) == 0:
        return "failed", None
    try:
        U, sv, Vt = np.linalg.svd(C, full_matrices=True)
    except np.linalg.LinAlgError:
        return "failed", None
    rank = int((sv > sv.max(initial=0.0) * max(C.shape) * np.finfo(np.float64).eps).sum())
    w0 = Vt[:rank].T @ ((U[:, :rank].T @ c) / sv[:rank])
    N = Vt[rank:].T  # (D, D - rank)
    if N.shape[1] == 0 or not np.isfinite(w0).all():
        return "failed", None
    status, *sol = ldp(A @ N, b - A @ w0)
    if status != "solved":
        return "failed", None
    y, lam = sol
    w = w0 + N @ y
    mu = np.linalg.lstsq(C.T, w - A.T @ lam, rcond=None)[0]
    if w.shape != (D,) or not (np.isfinite(w).all() and np.isfinite(mu).all()):
        return "failed", None
    return "solved", w, lam, mu


def farkas_check(A, b, lam, ratio: float) -> bool:
    """Whether ``lam`` >= 0 proves :math:`Aw \\ge b` infeasible, in the units of
    :func:`attnlib.svm.certificate.farkas` (rows unit norm, right-hand sides by their largest):
    :math:`g = \\hat b^\\top\\hat\\lambda \\ge` ``ratio`` :math:`\\|\\hat A^\\top\\hat\\lambda\\|`.
    """
    lam = np.clip(np.asarray(lam, dtype=np.float64), 0.0, None)
    na = np.linalg.norm(A, axis=1)
    if ((na == 0) & (b > 0)).any():
        return True
    keep = na > 0
    if not keep.any():
        return False
    bh = b[keep] / na[keep]
    big = np.abs(bh).max()
    if not big > 0:
        return False
    lh = lam[keep] * na[keep]  # sum_k lh_k (a_k/|a_k|) = sum_k lam_k a_k
    g = float((bh / big) @ lh)
    resid = float(np.linalg.norm(A[keep].T @ lam[keep]))
    return g > 0 and g >= ratio * resid


def rank_one(A: np.ndarray, shape: tuple, rtol: float = 1e-12):
    """Factors u (m,d), v (m,r) with ``A[k].reshape(shape) = outer(u_k, v_k)``, or None when a
    row is not rank one (within ``rtol``)."""
    m = len(A)
    Ak = A.reshape(m, *shape)
    j = np.abs(Ak).max(axis=1).argmax(axis=1)  # a column of largest entry: u_k = A_k[:, j]
    u = Ak[np.arange(m), :, j]  # (m, d)
    col = u[np.arange(m), np.abs(u).argmax(axis=1)]  # the pivot entry A_k[i*, j]
    with np.errstate(divide="ignore", invalid="ignore"):
        v = Ak[np.arange(m), np.abs(u).argmax(axis=1), :] / col[:, None]  # (m, r)
    if not np.isfinite(v).all():
        return None
    err = np.abs(Ak - u[:, :, None] * v[:, None, :]).max(axis=(1, 2))
    if (err > rtol * np.abs(Ak).max(axis=(1, 2))).any():
        return None
    return u, v


def _chol(M):
    """Batched Cholesky; (L, ok) with ok False where M is not positive definite."""
    try:
        return np.linalg.cholesky(M), np.ones(len(M), dtype=bool)
    except np.linalg.LinAlgError:
        L, ok = np.zeros_like(M), np.zeros(len(M), dtype=bool)
        for i in range(len(M)):
            try:
                L[i], ok[i] = np.linalg.cholesky(M[i]), True
            except np.linalg.LinAlgError:
                L[i] = np.eye(M.shape[-1])
        return L, ok


def _eigvalsh(M):
    """Eigenvalues of a batch of symmetric matrices, ascending (LAPACK through torch, which
    decides a stack of small matrices faster than numpy; numpy where torch's fails)."""
    try:
        return torch.linalg.eigvalsh(torch.from_numpy(M)).numpy()
    except RuntimeError:
        return np.linalg.eigvalsh(M)


def _max_step(Li, dM):
    """Largest t with L L' + t dM >= 0 (inf when dM >= 0), batched; Li = L^-1."""
    ev = _eigvalsh(Li @ dM @ np.swapaxes(Li, -1, -2)).min(axis=-1)
    with np.errstate(divide="ignore"):
        return np.where(ev < 0, -1.0 / ev, np.inf)


def _tri_inv(L):
    """Inverses of a batch of lower-triangular factors (a triangular solve, not an LU)."""
    eye = torch.eye(L.shape[-1], dtype=torch.float64).expand(L.shape)
    return torch.linalg.solve_triangular(torch.from_numpy(L), eye, upper=False).numpy()


def _ratio(x, dx):
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(dx < 0, -x / dx, np.inf)
    return t.min(axis=-1, initial=np.inf)


def aop(Y, U, V):
    """:math:`\\langle \\hat A_k, Y\\rangle = (u_k^\\top Y_{12} v_k + v_k^\\top Y_{21} u_k)/2`
    for any (B, N, N) Y, with U (B, d, m) and V (B, r, m) the factors; (B, m)."""
    d = U.shape[1]
    return 0.5 * (((Y[:, :d, d:] @ V) * U).sum(1) + ((Y[:, d:, :d] @ U) * V).sum(1))


def aadj(y, U, V):
    """:math:`\\sum_k y_k \\hat A_k`, (B, N, N): :math:`G = \\sum_k y_k u_k v_k^\\top` off the
    diagonal blocks."""
    d, r = U.shape[1], V.shape[1]
    G = 0.5 * (U * y[:, None, :]) @ np.swapaxes(V, 1, 2)  # (B, d, r)
    out = np.zeros((len(y), d + r, d + r))
    out[:, :d, d:], out[:, d:, :d] = G, np.swapaxes(G, 1, 2)
    return out


class _Iter(NamedTuple):
    """One interior-point iterate of the active instances and what its directions reuse."""

    U: np.ndarray  # (B, d, m): A_k = u_k v_k^T
    V: np.ndarray  # (B, r, m)
    X: np.ndarray
    S: np.ndarray
    s: np.ndarray
    lam: np.ndarray
    rp: np.ndarray  # primal residual b - <Â, X> + s
    Rd: np.ndarray  # dual residual C - sum lam Â - S
    Si: np.ndarray  # S^-1
    LH: np.ndarray  # Cholesky factor of the Schur matrix H + diag(s / lam)
    Lxi: np.ndarray  # inverse Cholesky factors of X and S
    Lsi: np.ndarray
    base: np.ndarray  # <Â, X + X Rd S^-1>
    aSi: np.ndarray  # <Â, S^-1>


def _direction(it: _Iter, sig_mu, XcS, sc):
    """HKM Newton direction to the target sig_mu; XcS the corrector's dX_a dS_a S^-1 (None in
    the predictor), sc its LP part ds_a * dlam_a."""
    rhs = it.rp + it.base - sig_mu[:, None] * it.aSi \
        + (0 if XcS is None else aop(XcS, it.U, it.V)) \
        + (sig_mu[:, None] - it.s * it.lam - sc) / it.lam
    y = torch.cholesky_solve(torch.from_numpy(rhs[..., None]),
                             torch.from_numpy(it.LH)).numpy()[..., 0]
    dS = it.Rd - aadj(y, it.U, it.V)
    dX = sig_mu[:, None, None] * it.Si - it.X - it.X @ dS @ it.Si
    if XcS is not None:
        dX = dX - XcS
    dX = 0.5 * (dX + np.swapaxes(dX, 1, 2))
    ds = (sig_mu[:, None] - it.s * it.lam - sc - it.s * y) / it.lam
    return dX, ds, dS, y


def _steps(it: _Iter, dX, ds, dS, dl, frac):
    """Primal and dual step lengths: a fraction ``frac`` of the way to the cones' boundary."""
    ap = np.minimum(1.0, frac * np.minimum(_max_step(it.Lxi, dX), _ratio(it.s, ds)))
    ad = np.minimum(1.0, frac * np.minimum(_max_step(it.Lsi, dS), _ratio(it.lam, dl)))
    return ap, ad


def nuclear_ipm(u, v, b, tol: float = 1e-9, max_iter: int = 50):
    """:math:`\\min\\|M\\|_*` s.t. :math:`u_k^\\top M v_k \\ge b_k` for a batch of instances.

    Parameters
    ----------
    u : (B, m, d), v : (B, m, r), b : (B, m)
        Rank-one rows :math:`A_k = u_k v_k^\\top` of each instance (no zero rows).
    tol : float
        Stop when the relative primal and dual residuals and the relative gap are below it.

    Returns
    -------
    M : (B, d, r), lam : (B, m), ok : bool (B,)
        ``ok`` False where the method did not converge (the engine then uses a conic solver).
    """
    B, m, d = u.shape
    r = v.shape[2]
    N = d + r
    U, V = np.ascontiguousarray(u.transpose(0, 2, 1)), np.ascontiguousarray(v.transpose(0, 2, 1))
    C = 0.5 * np.eye(N)
    an = 0.5 * np.sqrt(2.0) * np.linalg.norm(u, axis=2) * np.linalg.norm(v, axis=2)  # |Â_k|_F
    xi = np.maximum(np.maximum(10.0, np.sqrt(N)),
                    (N * (1 + np.abs(b)) / (1 + an)).max(axis=1))  # (B,) (SDPT3's start)
    eta = np.maximum(np.maximum(10.0, np.sqrt(N)), an.max(axis=1))
    X = xi[:, None, None] * np.eye(N)
    S = eta[:, None, None] * np.eye(N)
    s = np.repeat(xi[:, None], m, axis=1)
    lam = np.repeat(eta[:, None], m, axis=1)
    done = np.zeros(B, dtype=bool)
    bad = np.zeros(B, dtype=bool)
    bn = 1.0 + np.linalg.norm(b, axis=1)
    cn = 1.0 + np.linalg.norm(C)

    with np.errstate(all="ignore"):  # a failing instance is marked bad, not raised
        for _ in range(max_iter):
            if not _iterate(U, V, b, C, X, S, s, lam, done, bad, bn, cn, tol):
                break
    M = X[:, :d, d:]
    return M, lam, done & ~bad


def _iterate(U, V, b, C, X, S, s, lam, done, bad, bn, cn, tol) -> bool:
    """One predictor-corrector step of the active instances, in place; False when none is
    left."""
    (d, m), N = U.shape[1:], X.shape[1]
    act = np.flatnonzero(~done & ~bad)
    if not len(act):
        return False
    Ua, Va, ba = U[act], V[act], b[act]
    Xa, Sa, sa, la = X[act], S[act], s[act], lam[act]
    rp = ba - aop(Xa, Ua, Va) + sa  # primal residual of <Â,X> - s = b
    Rd = C - aadj(la, Ua, Va) - Sa  # dual residual of S = C - sum lam Â
    pobj = 0.5 * np.trace(Xa, axis1=1, axis2=2)
    dobj = (ba * la).sum(1)
    gap = np.abs(pobj - dobj) / (1 + np.abs(pobj) + np.abs(dobj))
    conv = (np.linalg.norm(rp, axis=1) / bn[act] <= tol) \
        & (np.linalg.norm(Rd, axis=(1, 2)) / cn <= tol) & (gap <= tol)
    done[act[conv]] = True
    keep = ~conv
    if not keep.any():
        return False
    act, Ua, Va, ba = act[keep], Ua[keep], Va[keep], ba[keep]
    Xa, Sa, sa, la, rp, Rd = Xa[keep], Sa[keep], sa[keep], la[keep], rp[keep], Rd[keep]
    Ls, ok_s = _chol(Sa)
    Lx, ok_x = _chol(Xa)
    Li = _tri_inv(Ls)  # S^-1 = L^-T L^-1 (a failed factor is the identity)
    Si = np.swapaxes(Li, 1, 2) @ Li
    mu = ((Xa * Sa).sum((1, 2)) + (sa * la).sum(1)) / (N + m)
    # Schur matrix H_kj = tr(Â_k X Â_j S^-1) from the rank-one factors
    # (p_k = (u_k, 0), q_k = (0, v_k): only the blocks of X and S^-1 that u, v touch)
    #   4 H = QXP o QSP' + QXQ o PSP + PXP o QSQ + PXQ o PSQ',
    # and X, S^-1 symmetric make PXQ = QXP', PSQ = QSP': the last term is the first one
    # transposed, which the symmetrisation below accounts for
    Ut, Vt = np.swapaxes(Ua, 1, 2), np.swapaxes(Va, 1, 2)
    XU, SU = Xa[:, :, :d] @ Ua, Si[:, :, :d] @ Ua  # (B, N, m)
    QXP, PXP, QXQ = Vt @ XU[:, d:], Ut @ XU[:, :d], Vt @ (Xa[:, d:, d:] @ Va)
    QSP, PSP, QSQ = Vt @ SU[:, d:], Ut @ SU[:, :d], Vt @ (Si[:, d:, d:] @ Va)
    H1 = QXP * np.swapaxes(QSP, 1, 2)
    H = QXQ * PSP + PXP * QSQ
    H = 0.125 * (H + np.swapaxes(H, 1, 2)) + 0.25 * (H1 + np.swapaxes(H1, 1, 2))
    H[:, np.arange(m), np.arange(m)] += sa / la
    LH, ok_h = _chol(H)
    ok = ok_s & ok_x & ok_h
    bad[act[~ok]] = True
    base = aop(Xa, Ua, Va) + aop(Xa @ Rd @ Si, Ua, Va)  # <Â, X + X Rd S^-1>

    it = _Iter(Ua, Va, Xa, Sa, sa, la, rp, Rd, Si, np.where(ok[:, None, None], LH, np.eye(m)),
               _tri_inv(Lx), Li, base, aop(Si, Ua, Va))
    zero = np.zeros(len(act))
    dXa, dsa, dSa, dla = _direction(it, zero, None, 0.0)  # predictor (affine scaling)
    ap, ad = _steps(it, dXa, dsa, dSa, dla, 1.0)
    mu_aff = (((Xa + ap[:, None, None] * dXa) * (Sa + ad[:, None, None] * dSa)).sum((1, 2))
              + ((sa + ap[:, None] * dsa) * (la + ad[:, None] * dla)).sum(1)) / (N + m)
    sigma = np.clip((mu_aff / mu) ** 3, 0.0, 1.0)
    dX, ds, dS, dl = _direction(it, sigma * mu, dXa @ dSa @ Si, dsa * dla)  # corrector
    ap, ad = _steps(it, dX, ds, dS, dl, 0.98)
    ok &= np.isfinite(ap) & np.isfinite(ad)
    bad[act[~ok]] = True
    ap, ad = np.where(ok, ap, 0.0), np.where(ok, ad, 0.0)
    X[act] = Xa + ap[:, None, None] * dX
    s[act] = sa + ap[:, None] * ds
    S[act] = Sa + ad[:, None, None] * dS
    lam[act] = la + ad[:, None] * dl
    return True
