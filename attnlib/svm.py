"""The SVM problems of attention: Att-SVM, Att-SVM⋆, ℓp-AttSVM, p-SVM, v-SVM and relatives.

Every problem is "smallest norm subject to linear margin constraints",

.. math:: \\min_w \\|w\\| \\quad\\text{s.t.}\\quad A w \\ge b,\\; C w = c,

with one row of ``A`` per (input, token) pair. The rows are built as one tensor (no Python loop
over constraints) and passed to a cvxpy problem compiled once per shape and norm, whose data
are ``cp.Parameter`` s: repeated solves of one shape pay canonicalisation once. The default
solver is Clarabel (interior point, ~1e-8 accurate; OSQP would give ~1e-4).

How each norm is solved:

* ``"fro"`` -- the dual QP of :math:`\\min \\tfrac12\\|W\\|_F^2`,
  :math:`\\max_{\\lambda\\ge0,\\mu}\\, b^\\top\\lambda + c^\\top\\mu
  - \\tfrac12\\|A^\\top\\lambda + C^\\top\\mu\\|^2` with
  :math:`W = \\mathrm{mat}(A^\\top\\lambda + C^\\top\\mu)` (the SVM dual: one variable per
  constraint, so a small QP even when :math:`d^2` is large);
* ``"nuc"`` -- the dual SDP :math:`\\max\\, b^\\top\\lambda + c^\\top\\mu` s.t.
  :math:`\\|\\mathrm{mat}(A^\\top\\lambda + C^\\top\\mu)\\|_2 \\le 1`, :math:`\\lambda \\ge 0`;
  :math:`W` is read off the dual of its linear matrix inequality (4-8x faster than the
  primal SDP);
* a float ``lp > 1`` -- :math:`\\min \\sum_{jk} |W_{jk}|^p` (the entrywise
  :math:`\\|W\\|_p` of mirror descent, same minimiser) with one vectorized power cone.

The constraints of the W-problems see :math:`W` only through :math:`W z_i`, so for the
unitarily invariant norms (Frobenius, nuclear) :math:`W = M U^\\top` with :math:`U` an
orthonormal basis of :math:`\\mathrm{span}\\{z_i\\}`: a smaller problem whose solution has its
row space in :math:`\\mathrm{span}\\{z_i\\}` and rank at most n (chapter 5,
*Self-attention as an SVM: W versus (K, Q)*).

Infeasible problems raise :class:`InfeasibleError`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from typing import NamedTuple

import cvxpy as cp
import numpy as np
import torch

from attnlib.data import as_tensor, resolve_device, resolve_dtype
from attnlib.tokens import _alpha, _field, _mask, _tokens, optimal_tokens

__all__ = [
    "InfeasibleError",
    "att_svm",
    "sequence_svm",
    "prompt_svm",
    "head_svm",
    "relaxed_prompt_svm",
    "Equivalence",
    "svm_equivalence",
]


try:  # installed with scikit-learn; optional
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None


def _one_blas_thread(fn):
    """Run ``fn`` with one BLAS thread.

    The matrices here are tiny; a multi-threaded OpenBLAS on a busy machine spins instead of
    working (a 300x75 QR took 0.5 s with 2 threads under load, 3 ms with one).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ctx = contextlib.nullcontext() if threadpool_limits is None \
            else threadpool_limits(1, user_api="blas")
        with ctx:
            return fn(*args, **kwargs)

    return wrapper


class InfeasibleError(ValueError):
    """An SVM problem has no feasible point (the selection cannot be separated)."""


class _Infeasible(Exception):
    """Internal signal: instance ``index`` is infeasible (the public functions turn it into an
    :class:`InfeasibleError` that names the selection)."""

    def __init__(self, index=None):
        super().__init__(index)
        self.index = index


# ----------------------------------------------------------------------------- norms
def _norm_key(norm, matrix=True):
    """Validate ``norm``: "fro", "nuc" (matrices only) or a float lp > 1."""
    if isinstance(norm, str):
        if norm == "fro" or (norm == "nuc" and matrix):
            return norm
        allowed = "'fro', 'nuc'" if matrix else "'fro'"
        raise ValueError(f"norm: expected {allowed} or a float lp > 1, got {norm!r}")
    if isinstance(norm, bool) or not isinstance(norm, (int, float, np.floating, np.integer)):
        raise ValueError(f"norm: expected 'fro', 'nuc' or a float lp > 1, got {norm!r}")
    p = float(norm)
    if not p > 1 or math.isnan(p):
        raise ValueError(f"norm: an entrywise lp norm needs lp > 1, got {norm!r}")
    return p


# ----------------------------------------------------------------------------- the solver core
class _Rows(NamedTuple):
    """One instance: min ||w|| s.t. A w >= b, C w = c, w of ``shape``; W = M U^T if U given."""

    A: np.ndarray
    b: np.ndarray
    C: np.ndarray | None
    c: np.ndarray | None
    shape: tuple
    U: np.ndarray | None = None


class _Piece(NamedTuple):
    objective: cp.Expression  # to minimise
    constraints: list
    load: object  # (rows: _Rows) -> None: put the numbers into the Parameters
    read: object  # (rows: _Rows) -> (w (D,), lam (m,))


def _dual_vars(m, m_eq):
    """Multipliers lam >= 0 (inequalities), mu (equalities), and the b, c Parameters."""
    lam = cp.Variable(m, nonneg=True, name="lam") if m else None
    mu = cp.Variable(m_eq, name="mu") if m_eq else None
    b = cp.Parameter(m, name="b") if m else None
    c = cp.Parameter(m_eq, name="c") if m_eq else None
    obj = (b @ lam if m else 0) + (c @ mu if m_eq else 0)  # b'lam + c'mu
    return lam, mu, b, c, obj


def _values(lam, mu):
    return (lam.value if lam is not None else np.zeros(0),
            mu.value if mu is not None else np.zeros(0))


def _piece(m: int, m_eq: int, shape: tuple, norm) -> _Piece:
    """The cvxpy objective and constraints of one instance, with Parameters for its data."""
    D = math.prod(shape)
    if norm == "fro":  # dual QP: max b'lam + c'mu - 1/2 ||A'lam + C'mu||^2, w = A'lam + C'mu
        lam, mu, b, c, obj = _dual_vars(m, m_eq)
        F = cp.Parameter((min(m + m_eq, D), m + m_eq), name="F")  # [A; C]' = Q F, so
        y = cp.hstack([v for v in (lam, mu) if v is not None])  # ||F y|| = ||[A; C]' y||

        def load(r):
            F.value = np.linalg.qr((np.vstack([r.A, r.C]) if m_eq else r.A).T, mode="r")
            if m:
                b.value = r.b
            if m_eq:
                c.value = r.c

        def read(r):
            lv, mv = _values(lam, mu)
            return r.A.T @ lv + (r.C.T @ mv if m_eq else 0), lv

        return _Piece(0.5 * cp.sum_squares(F @ y) - obj, [], load, read)
    A = cp.Parameter((m, D), name="A") if m else None
    C = cp.Parameter((m_eq, D), name="C") if m_eq else None

    def load(r):
        if m:
            A.value, b.value = r.A, r.b
        if m_eq:
            C.value, c.value = r.C, r.c

    if norm == "nuc":  # dual SDP: max b'lam + c'mu  s.t. ||mat(A'lam + C'mu)||_2 <= 1
        rows, cols = shape
        lam, mu, b, c, obj = _dual_vars(m, m_eq)
        G = cp.reshape((A.T @ lam if m else 0) + (C.T @ mu if m_eq else 0), shape, order="C")
        lmi = cp.bmat([[np.eye(rows), G], [G.T, np.eye(cols)]]) >> 0

        def read(r):
            W = -2.0 * lmi.dual_value[:rows, rows:]  # primal W from the LMI's multiplier
            return W.reshape(-1), _values(lam, mu)[0]

        return _Piece(-obj, [lmi], load, read)
    # entrywise lp: the primal  min sum_j |w_j|^p  s.t.  Aw >= b, Cw = c, with one vectorized
    # power cone t_j^(1/p) >= |w_j| (Clarabel's native cone; cp.pnorm's rational SOC tree
    # compiles slower and fails near p = 1)
    b = cp.Parameter(m, name="b") if m else None
    c = cp.Parameter(m_eq, name="c") if m_eq else None
    w, t = cp.Variable(D, name="w"), cp.Variable(D, name="t")
    cons = ([A @ w >= b] if m else []) + ([C @ w == c] if m_eq else [])
    cons.append(cp.constraints.PowCone3D(t, np.ones(D), w, 1.0 / norm))

    def read(r):
        return w.value, (cons[0].dual_value if m else np.zeros(0))

    return _Piece(cp.sum(t), cons, load, read)


class _Compiled(NamedTuple):
    prob: cp.Problem
    pieces: list
    status_infeasible: tuple
    clarabel: dict  # extra Clarabel settings for this problem


@functools.lru_cache(maxsize=64)
def _compiled(m: int, m_eq: int, shape: tuple, norm, k: int = 1) -> _Compiled:
    """``k`` independent instances of one shape as one cvxpy problem (their sum).

    Built once per (shape, norm, k) and cached; its data are Parameters (DPP), so every later
    solve only substitutes numbers.
    """
    pieces = [_piece(m, m_eq, shape, norm) for _ in range(k)]
    prob = cp.Problem(cp.Minimize(sum(p.objective for p in pieces)),
                      [con for p in pieces for con in p.constraints])
    if norm in ("fro", "nuc"):  # dual problems: an infeasible SVM has an unbounded dual
        infeasible = ("unbounded", "unbounded_inaccurate")
    else:
        infeasible = ("infeasible", "infeasible_inaccurate")
    # a nuclear LMI's scaling block is dense: faer's supernodal LDL is ~2x faster from ~24 rows
    extra = dict(direct_solve_method="faer") if norm == "nuc" and sum(shape) >= 24 else {}
    return _Compiled(prob, pieces, infeasible, extra)


# Clarabel's defaults stop at a 1e-8 duality gap, which leaves ~1e-5 errors in W when a
# constraint is nearly degenerate. We ask for 1e-10 and accept "almost solved" only at
# Clarabel's default full accuracy (1e-8); if even that fails, retry with the defaults.
_CLARABEL_OPTS = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, tol_ktratio=1e-8,
                      reduced_tol_gap_abs=1e-8, reduced_tol_gap_rel=1e-8, reduced_tol_feas=1e-8,
                      reduced_tol_ktratio=1e-6)
# Frobenius instances are solved 8 at a time as one QP: it saves ~25% CPU per instance. The
# nuclear SDPs gain nothing (the solve dominates) and lose wall time, so they go one by one.
_CHUNK = 8


def _run(prob, solver, opts):
    """Solve; returns the status (cvxpy's "may be inaccurate" warning is handled by caller)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        prob.solve(solver=solver, **opts)
    return prob.status


def _solve_compiled(comp: _Compiled, items: list, solver: str) -> list:
    """Solve the instances ``items`` (a list of _Rows) with one compiled problem."""
    for piece, r in zip(comp.pieces, items):
        piece.load(r)
    clarabel = str(solver).upper() == "CLARABEL"
    # 1. accurate, reusing the solver object of the last solve (cvxpy's warm_start updates
    #    its data); 2. the same from a fresh solver (a reused one occasionally fails after an
    #    earlier instance); 3. the solver's default accuracy, fresh.
    tight = {**_CLARABEL_OPTS, **comp.clarabel} if clarabel else {}
    attempts = [(tight, True, True), (tight, False, True)] if clarabel else []
    attempts.append((comp.clarabel, False, False))
    error, accurate = None, False
    for opts, warm, tight_enough in attempts:
        accurate = tight_enough  # "almost solved" under tight settings still means 1e-8
        try:
            status = _run(comp.prob, solver, {**opts, "warm_start": warm})
        except cp.error.SolverError as err:
            status, error = "solver_error", err
        if status in ("optimal", "optimal_inaccurate", *comp.status_infeasible):
            break
    else:
        raise RuntimeError(f"solver {solver} failed on this SVM (status {status!r}); try "
                           "another solver= ('CLARABEL', 'SCS')") from error
    if status in comp.status_infeasible:
        raise _Infeasible()
    if status == "optimal_inaccurate" and not accurate:
        warnings.warn(f"solver {solver} reports an inaccurate solution", RuntimeWarning,
                      stacklevel=4)
    out = []
    for piece, r in zip(comp.pieces, items):
        w, lam = piece.read(r)
        w = np.asarray(w, dtype=np.float64).reshape(r.shape)
        out.append((w if r.U is None else w @ r.U.T, np.asarray(lam, dtype=np.float64)))
    return out


def _solve_all(items: list, norm, solver: str, progress=False, desc="SVM") -> list:
    """Solve every instance; returns [(W, lam)]. Raises _Infeasible with ``.index`` set.

    Instances of one shape share a compiled problem. Frobenius instances are solved
    ``_CHUNK`` at a time as one problem (fewer solver calls); a chunk that fails is re-solved
    one by one (to name the infeasible instance).
    """
    out = [None] * len(items)
    groups = {}
    for j, r in enumerate(items):
        key = (len(r.b), 0 if r.C is None else len(r.C), tuple(r.shape))
        groups.setdefault(key, []).append(j)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(items), desc=desc)
    for (m, m_eq, shape), idx in groups.items():
        k = _CHUNK if norm == "fro" and len(idx) >= _CHUNK else 1
        chunks = [idx[i:i + k] for i in range(0, len(idx) - len(idx) % k, k)]
        chunks += [[j] for j in idx[len(idx) - len(idx) % k:]]
        for ch in chunks:
            try:
                sols = _solve_compiled(_compiled(m, m_eq, shape, norm, len(ch)),
                                       [items[j] for j in ch], solver)
            except (_Infeasible, RuntimeError) as err:
                if len(ch) > 1:  # solve one by one: name the infeasible instance
                    sols = []
                    for j in ch:
                        try:
                            sols.append(_solve_all([items[j]], norm, solver)[0])
                        except _Infeasible:
                            raise _Infeasible(j) from None
                elif isinstance(err, _Infeasible) or _infeasible(items[ch[0]], norm, solver):
                    raise _Infeasible(ch[0]) from None
                else:
                    raise
            for j, sol in zip(ch, sols):
                out[j] = sol
            if bar is not None:
                bar.update(len(ch))
    if bar is not None:
        bar.close()
    return out


def _infeasible(r: _Rows, norm, solver) -> bool:
    """After a solver failure: is the instance infeasible? (Feasibility does not depend on
    the norm, and the Frobenius dual QP detects it reliably.)"""
    if norm == "fro":
        return False
    try:
        _solve_compiled(_compiled(len(r.b), 0 if r.C is None else len(r.C), tuple(r.shape),
                                  "fro"), [r], solver)
    except _Infeasible:
        return True
    return False


def _solve(A, b, shape, norm, solver, C=None, c=None):
    """Solve one :math:`\\min\\|w\\|` s.t. :math:`Aw \\ge b`, :math:`Cw = c`; (w, lam)."""
    return _solve_all([_Rows(A, b, C, c, tuple(shape))], norm, solver)[0]


def _row_basis(z: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
    """Orthonormal basis (d, r) of span{z_i}, r = numerical rank of the queries."""
    U, s, _ = np.linalg.svd(z.T, full_matrices=False)
    r = max(1, int((s > rtol * s.max()).sum())) if s.size and s.max() > 0 else 1
    return U[:, :r]


def _matrix_rows(D, z, active, norm, eq=None) -> _Rows:
    """Rows of a W-problem: D (n,T,d) differences x_sel - x_t, z (n,d) queries, active (n,T).

    Row (i,t) is vec(D_it (U^T z_i)^T) with U a basis of span{z_i} ("fro", "nuc"; identity
    for lp); inactive rows become the harmless ``0 >= -1`` (fixed shapes, strictly
    feasible). ``eq`` = (D_eq (k,d), z_eq (k,d), rhs (k,)) adds equality rows.
    """
    n, T, d = D.shape
    U = _row_basis(z) if norm in ("fro", "nuc") else None
    zq = z if U is None else z @ U  # (n, r)
    A = np.einsum("ntj,nk->ntjk", D, zq).reshape(n * T, -1) * active.reshape(-1, 1)
    b = np.where(active.reshape(-1), 1.0, -1.0)
    C = c = None
    if eq is not None and len(eq[0]):
        zq_eq = eq[1] if U is None else eq[1] @ U
        C = np.einsum("kj,kl->kjl", eq[0], zq_eq).reshape(len(eq[0]), -1)
        c = eq[2]
    return _Rows(A, b, C, c, (d, zq.shape[-1]), U)


def _output(x: np.ndarray, like: torch.Tensor, device, dtype) -> torch.Tensor:
    dev = like.device if device is None else resolve_device(device)
    dt = (like.dtype if like.is_floating_point() else torch.float64) if dtype is None \
        else resolve_dtype(dtype)
    return torch.as_tensor(x, dtype=torch.float64).to(device=dev, dtype=dt)


# ----------------------------------------------------------------------------- Att-SVM
_ATT_FEASIBLE = ("For data in general position Att-SVM is feasible for every selection when "
                 "d >= max(T-1, n)")


@_one_blas_thread
def att_svm(data_or_X, z=None, alpha=None, norm="fro", mask=None, *, return_dual=False,
            solver="CLARABEL", progress=False, device=None, dtype=None):
    """Att-SVM: the max-margin key-query matrix of a token selection.

    .. math::

        W^{mm}_\\alpha = \\arg\\min_W \\|W\\| \\quad\\text{s.t.}\\quad
        (x_{i\\alpha_i} - x_{it})^\\top W z_i \\ge 1
        \\quad\\text{for all visible } t \\ne \\alpha_i,\\ i \\in [n].

    ``norm="fro"`` is the Att-SVM of the W parameterisation and ``"nuc"`` the Att-SVM⋆ of
    the (K, Q) parameterisation (chapter 5, feasibility in chapter 6), a float ``lp > 1`` the
    ℓp-AttSVM of mirror descent (chapter 9). With ``mask`` (visible tokens) it is the SVM of
    sequence / causal attention (see :func:`sequence_svm`).

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
        A leading trials dimension B solves B instances with one compiled problem (the
        Frobenius ones 8 at a time as one QP, the others one by one).
    z : tensor (n,d) or (B,n,d), optional
        Queries; default ``data.z``.
    alpha : int tensor (n,) or (B,n), optional
        Selection (0-based); default the optimal tokens (needs ``data.Y`` and ``data.v``).
    norm : {"fro", "nuc"} or float lp > 1
    mask : bool tensor (n,T) or (B,n,T), optional
        Visible tokens (True); invisible tokens get no constraint. ``alpha`` must be visible.
    return_dual : bool
        Also return the multipliers :math:`\\lambda_{it} \\ge 0` of the margin constraints,
        (n,T) or (B,n,T), 0 at selected and invisible tokens; :math:`\\lambda_{it} > 0` marks a
        support vector. For "fro" they satisfy :math:`W = \\sum_{it}\\lambda_{it}
        (x_{i\\alpha_i} - x_{it}) z_i^\\top`; for "nuc" those of :math:`\\min\\|W\\|_*`
        (:math:`\\sum_{it}\\lambda_{it} = \\|W\\|_*`), for lp those of
        :math:`\\min\\sum_{jk}|W_{jk}|^p` (:math:`\\sum_{it}\\lambda_{it} = p\\|W\\|_p^p`).
    solver : str
        cvxpy solver (default "CLARABEL").
    progress : bool
        tqdm progress bar over the trials.
    device, dtype
        Of the result; default the device and floating dtype of ``X`` (float64 for arrays).

    Returns
    -------
    W : tensor (d,d) or (B,d,d)
    lam : tensor (n,T) or (B,n,T), only with ``return_dual=True``

    Raises
    ------
    InfeasibleError
        If no W satisfies the constraints (the message names the selection and trial).
    """
    key = _norm_key(norm)
    X, z = _tokens(data_or_X, z)
    if alpha is None:
        if not hasattr(data_or_X, "X"):
            raise ValueError("alpha: required when X is given without data (no head v to "
                             "find the optimal tokens)")
        alpha = optimal_tokens(data_or_X, mask=mask)
    alpha = _alpha(alpha, X)
    m = _mask(mask, X)
    n, T, d = X.shape[-3:]
    shp = X.shape[:-3]
    alpha = alpha.expand(*shp, n)
    vis = torch.ones(*shp, n, T, dtype=torch.bool, device=X.device) if m is None \
        else m.expand(*shp, n, T)
    if not bool(torch.gather(vis, -1, alpha.unsqueeze(-1)).all()):
        raise ValueError("alpha: a selected token is not visible under mask")
    active = vis.clone()
    active.scatter_(-1, alpha.unsqueeze(-1), False)  # (..., n, T): t != alpha_i and visible
    Xs = X.detach().cpu().to(torch.float64).numpy().reshape(-1, n, T, d)
    zs = z.detach().cpu().to(torch.float64).expand(*shp, n, d).numpy().reshape(-1, n, d)
    al = alpha.cpu().numpy().reshape(-1, n)
    ac = active.cpu().numpy().reshape(-1, n, T)
    items = []
    for b in range(len(Xs)):  # the rows of each instance, as one array
        D = Xs[b][np.arange(n), al[b]][:, None, :] - Xs[b]  # (n, T, d): x_{i alpha_i} - x_it
        items.append(_matrix_rows(D, zs[b], ac[b], key))
    try:
        sols = _solve_all(items, key, solver, progress, "Att-SVM")
    except _Infeasible as err:
        b = err.index
        trial = f" (trial {b})" if shp else ""
        raise InfeasibleError(
            f"Att-SVM ({norm}) is infeasible for the selection alpha={al[b].tolist()}"
            f"{trial}: no W gives each selected token a logit margin >= 1 over the other "
            f"{'visible ' if m is not None else ''}tokens of its input. {_ATT_FEASIBLE} "
            f"(here n={n}, T={T}, d={d}).") from None
    Ws = [W for W, _ in sols]
    lams = [lam.reshape(n, T) * ac[b] for b, (_, lam) in enumerate(sols)]
    W = _output(np.stack(Ws).reshape(*shp, d, d), X, device, dtype)
    if not return_dual:
        return W
    return W, _output(np.stack(lams).reshape(*shp, n, T), X, device, dtype)


@_one_blas_thread
def sequence_svm(data_or_X, alpha=None, *, Y=None, v=None, causal=False, norm="fro",
                 return_dual=False, solver="CLARABEL", progress=False, device=None,
                 dtype=None):
    """SAtt-SVM: the Att-SVM of sequence-to-sequence (and causal) self-attention.

    Every position k of sequence i is a query :math:`z = x_{ik}` with its own selection
    :math:`\\alpha_{ik}`:

    .. math::

        \\min_W \\|W\\| \\quad\\text{s.t.}\\quad
        (x_{i\\alpha_{ik}} - x_{it})^\\top W x_{ik} \\ge 1
        \\quad\\text{for all } t \\ne \\alpha_{ik} \\text{ visible to } k,

    where a causal query k sees only :math:`t \\le k`. It is :func:`att_svm` on the nT
    (sequence, query) pairs, pair ``i*T + k``, with truncated token sets (a mask).

    Parameters
    ----------
    data_or_X : tensor (n,T,d) / (B,n,T,d), or an object with ``.X`` (e.g. SequenceData)
    alpha : int tensor (n,T) or (B,n,T), optional
        ``alpha[i, k]``: token selected by query k; default the optimal visible tokens
        :math:`\\arg\\max_{t} Y_{ik} v^\\top x_{it}` (needs Y and v).
    Y : tensor (n,T) or (B,n,T), optional
        Labels per position (default ``data.Y``).
    v : tensor (d,) or (B,d), optional
        Head (default ``data.v``).
    causal : bool
    norm, return_dual, solver, progress, device, dtype
        As in :func:`att_svm`; the multipliers come back as (n,T,T) = (sequence, query,
        token).

    Returns
    -------
    W : tensor (d,d) or (B,d,d)

    See chapter 8, *Sequences and causal attention*.
    """
    X, _ = _tokens(data_or_X, need_z=False)
    *batch, n, T, d = X.shape
    vis = torch.ones(T, T, dtype=torch.bool, device=X.device)
    vis = torch.tril(vis) if causal else vis  # (T_query, T_token)
    if alpha is None:
        Y = _field(data_or_X, "Y") if Y is None else Y
        v = _field(data_or_X, "v") if v is None else v
        if Y is None or v is None:
            raise ValueError("alpha: give the selection, or labels Y (n,T) and head v")
        Y = as_tensor(Y, "Y", dtype=X.dtype, device=X.device)
        v = as_tensor(v, "v", dtype=X.dtype, device=X.device)
        if Y.shape[-2:] != (n, T):
            raise ValueError(f"Y: expected one label per position, shape (n,T)=({n},{T}), "
                             f"got {tuple(Y.shape)}")
        g = (X @ v.unsqueeze(-2).unsqueeze(-1)).squeeze(-1)  # (..., n, T): v^T x_it
        gam = Y.unsqueeze(-1) * g.unsqueeze(-2)  # (..., n, k, t)
        alpha = gam.masked_fill(~vis, -math.inf).argmax(-1)
    a = torch.as_tensor(alpha, device=X.device)
    if a.shape[-2:] != (n, T):
        raise ValueError(f"alpha: expected shape (n,T)=({n},{T}) or (B,n,T), "
                         f"got {tuple(a.shape)}")
    if a.is_floating_point() and not bool((a == a.round()).all()):
        raise ValueError("alpha: expected integer token indices")
    a = a.long()
    if bool(((a < 0) | (a >= T)).any()):
        raise ValueError(f"alpha: token indices must lie in [0, {T})")
    if causal and bool((a > torch.arange(T, device=X.device)).any()):
        raise ValueError("alpha: with causal=True query k can only select a token t <= k")
    Xp = X.unsqueeze(-3).expand(*batch, n, T, T, d).reshape(*batch, n * T, T, d)
    zp = X.reshape(*batch, n * T, d)
    mask = vis.repeat(n, 1)  # (nT, T)
    try:
        out = att_svm(Xp, z=zp, alpha=a.reshape(*a.shape[:-2], n * T), norm=norm, mask=mask,
                      return_dual=return_dual, solver=solver, progress=progress,
                      device=device, dtype=dtype)
    except InfeasibleError:
        raise InfeasibleError(
            f"SAtt-SVM ({norm}, causal={causal}) is infeasible for the selection "
            f"alpha={a.tolist()}: no W separates every query's selected token. The nT "
            f"queries play the role of the n inputs: for tokens in general position it is "
            f"feasible when d >= max(T-1, nT) (here n={n}, T={T}, d={d}).") from None
    if not return_dual:
        return out
    W, lam = out
    return W, lam.reshape(*lam.shape[:-2], n, T, T)


# ----------------------------------------------------------------------------- p-SVM and v-SVM
def _fixed_W(W, d, X):
    if W is None:
        return None
    W = as_tensor(W, "W", dtype=torch.float64, device="cpu")
    if W.shape[-2:] != (d, d) or W.ndim not in (2, 3):
        raise ValueError(f"W: expected shape (d,d)=({d},{d}) or (B,d,d), got {tuple(W.shape)}")
    if W.ndim == 3 and (X.ndim != 4 or W.shape[0] != X.shape[0]):
        raise ValueError("W: a batch of W needs data with the same trials dimension B")
    return W


def _vector_rows(rows, rhs, active) -> _Rows:
    """min ||w|| s.t. rows w >= rhs on active rows. rows (m,d), rhs (m,), active (m,) bool."""
    return _Rows(rows * active[:, None], np.where(active, rhs, -1.0), None, None,
                 (rows.shape[1],))


def _prompt(data_or_X, alpha, W, norm, mask, rhs, what, solver, progress, device, dtype,
            return_dual):
    """The p-SVM family: keys k_it = W^T x_it, rows (k_{i alpha_i} - k_it).

    ``rhs`` (B', n): the margin required of each input (default 1 everywhere).
    """
    key = _norm_key(norm, matrix=False)
    X, _ = _tokens(data_or_X, need_z=False)
    if alpha is None:
        if not hasattr(data_or_X, "X"):
            raise ValueError("alpha: required when X is given without data (no head v)")
        alpha = optimal_tokens(data_or_X, mask=mask)
    alpha = _alpha(alpha, X)
    m = _mask(mask, X)
    n, T, d = X.shape[-3:]
    shp = X.shape[:-3]
    W = _fixed_W(W, d, X)
    Xs = X.detach().cpu().to(torch.float64)
    K = Xs if W is None else Xs @ W.unsqueeze(-3) if W.ndim == 3 else Xs @ W  # keys W^T x
    K = K.numpy().reshape(-1, n, T, d)
    alpha = alpha.expand(*shp, n)
    vis = torch.ones(*shp, n, T, dtype=torch.bool) if m is None \
        else m.cpu().expand(*shp, n, T)
    if not bool(torch.gather(vis, -1, alpha.cpu().unsqueeze(-1)).all()):
        raise ValueError("alpha: a selected token is not visible under mask")
    active = vis.clone()
    active.scatter_(-1, alpha.cpu().unsqueeze(-1), False)
    al = alpha.cpu().numpy().reshape(-1, n)
    ac = active.numpy().reshape(-1, n, T)
    items = []
    for b in range(len(K)):  # the rows of each instance, as one array
        D = K[b][np.arange(n), al[b]][:, None, :] - K[b]  # (n, T, d)
        need = np.ones(n) if rhs is None else rhs[b]  # (n,)
        items.append(_vector_rows(D.reshape(n * T, d), np.repeat(need, T),
                                  ac[b].reshape(-1)))
    try:
        sols = _solve_all(items, key, solver, progress, what)
    except _Infeasible as err:
        b = err.index
        trial = f" (trial {b})" if shp else ""
        raise InfeasibleError(
            f"{what} ({norm}) is infeasible for the selection alpha={al[b].tolist()}"
            f"{trial}: no single prompt p gives each selected key the required margin "
            f"over the other keys of its input. For keys in general position it is "
            f"feasible for every selection when d >= n(T-1) (here n={n}, T={T}, d={d}; "
            f"Att-SVM with queries z_i is feasible when d >= max(T-1, n)).") from None
    ps = [p for p, _ in sols]
    lams = [lam.reshape(n, T) for _, lam in sols]
    p = _output(np.stack(ps).reshape(*shp, d), X, device, dtype)
    if not return_dual:
        return p
    return p, _output(np.stack(lams).reshape(*shp, n, T), X, device, dtype)


@_one_blas_thread
def prompt_svm(data_or_X, alpha=None, W=None, norm="fro", mask=None, *, return_dual=False,
               solver="CLARABEL", progress=False, device=None, dtype=None):
    """p-SVM: the max-margin prompt token of the prompt model, with W fixed.

    .. math::

        p^{mm}(\\alpha) = \\arg\\min_p \\|p\\| \\quad\\text{s.t.}\\quad
        (k_{i\\alpha_i} - k_{it})^\\top p \\ge 1 \\quad\\text{for all } t \\ne \\alpha_i,
        \\qquad k_{it} = W^\\top x_{it}.

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
    alpha : int tensor (n,) or (B,n), optional
        Default the optimal tokens.
    W : tensor (d,d) or (B,d,d), optional
        The fixed key-query matrix (default identity).
    norm : "fro" (Euclidean) or float lp > 1
    mask, return_dual, solver, progress, device, dtype
        As in :func:`att_svm` (multipliers (n,T) of the problem solved as
        :math:`\\min\\tfrac12\\|p\\|^2` for "fro").

    Returns
    -------
    p : tensor (d,) or (B,d)

    See chapter 2, *The Att-SVM and gradient descent*.
    """
    return _prompt(data_or_X, alpha, W, norm, mask, None, "p-SVM", solver, progress, device,
                   dtype, return_dual)


@_one_blas_thread
def head_svm(data_or_X, Y=None, alpha=None, norm="fro", *, return_dual=False,
             solver="CLARABEL", progress=False, device=None, dtype=None):
    """v-SVM: the hard-margin head on the selected tokens (no intercept).

    .. math::

        v^{mm} = \\arg\\min_v \\|v\\| \\quad\\text{s.t.}\\quad
        Y_i\\, v^\\top x_{i\\alpha_i} \\ge 1 \\quad\\text{for all } i \\in [n].

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
    Y : tensor (n,) or (B,n), optional
        Labels (default ``data.Y``).
    alpha : int tensor (n,) or (B,n), optional
        Default the optimal tokens (needs ``data.v``).
    norm : "fro" (Euclidean) or float lp > 1
    return_dual : bool
        Also return the multipliers (n,) or (B,n); :math:`\\lambda_i > 0` marks a support
        vector.
    solver, progress, device, dtype
        As in :func:`att_svm`.

    Returns
    -------
    v : tensor (d,) or (B,d)

    See chapter 4, *Training the head too*.
    """
    key = _norm_key(norm, matrix=False)
    X, _ = _tokens(data_or_X, need_z=False)
    Y = _field(data_or_X, "Y") if Y is None else Y
    if Y is None:
        raise ValueError("Y: the labels are needed (pass Y= or data with data.Y)")
    Y = as_tensor(Y, "Y", dtype=torch.float64, device="cpu")
    n, T, d = X.shape[-3:]
    shp = X.shape[:-3]
    if Y.shape[-1:] != (n,) or Y.ndim > X.ndim - 2:
        raise ValueError(f"Y: expected shape (n,)=({n},) or (B,n), got {tuple(Y.shape)}")
    if not bool(((Y == 1) | (Y == -1)).all()):
        raise ValueError("Y: labels must be -1 or +1")
    if alpha is None:
        if _field(data_or_X, "v") is None:
            raise ValueError("alpha: required when the data has no head v (data.v is None)")
        alpha = optimal_tokens(data_or_X)
    alpha = _alpha(alpha, X).cpu().expand(*shp, n)
    Xs = X.detach().cpu().to(torch.float64)
    sel = torch.gather(Xs, -2, alpha[..., None, None].expand(*shp, n, 1, d)).squeeze(-2)
    rows = (Y.expand(*shp, n).unsqueeze(-1) * sel).numpy().reshape(-1, n, d)  # Y_i x_{i a_i}
    al = alpha.numpy().reshape(-1, n)
    items = [_vector_rows(rows[b], np.ones(n), np.ones(n, dtype=bool))
             for b in range(len(rows))]
    try:
        sols = _solve_all(items, key, solver, progress, "v-SVM")
    except _Infeasible as err:
        b = err.index
        trial = f" (trial {b})" if shp else ""
        raise InfeasibleError(
            f"v-SVM ({norm}) is infeasible for the selection alpha={al[b].tolist()}"
            f"{trial}: the selected tokens are not linearly separable by their labels "
            f"through the origin. For tokens in general position it is feasible when "
            f"d >= n (here n={n}, d={d}).") from None
    vs = [v for v, _ in sols]
    lams = [lam for _, lam in sols]
    v = _output(np.stack(vs).reshape(*shp, d), X, device, dtype)
    if not return_dual:
        return v
    return v, _output(np.stack(lams).reshape(*shp, n), X, device, dtype)


@_one_blas_thread
def relaxed_prompt_svm(data, alpha=None, W=None, v_mm=None, norm="fro", *, tol=1e-6,
                       return_dual=False, solver="CLARABEL", progress=False, device=None,
                       dtype=None):
    """The p-SVM of joint (v, p) training: full margin only for v's support inputs.

    .. math::

        p^{relax} = \\arg\\min_p \\|p\\| \\quad\\text{s.t.}\\quad
        (k_{i\\alpha_i} - k_{it})^\\top p \\ge
        \\begin{cases} 1 & i \\in \\mathcal S \\\\ 0 & i \\notin \\mathcal S \\end{cases}
        \\quad t \\ne \\alpha_i,

    where :math:`\\mathcal S = \\{i : Y_i\\, v^{mm\\top} x_{i\\alpha_i} = 1\\}` are the support
    vectors of the v-SVM (:func:`head_svm`). When every input is a support vector (the tight
    case) this is :func:`prompt_svm`.

    Parameters
    ----------
    data : AttentionData
    alpha : int tensor (n,) or (B,n), optional
        Default the optimal tokens.
    W : tensor (d,d), optional
        Fixed key-query matrix (default identity).
    v_mm : tensor (d,) or (B,d), optional
        The v-SVM solution (default :func:`head_svm` of ``data`` and ``alpha``).
    norm : "fro" or float lp > 1
    tol : float
        A v-margin within ``1 + tol`` counts as a support vector.
    return_dual, solver, progress, device, dtype
        As in :func:`prompt_svm`.

    Returns
    -------
    p : tensor (d,) or (B,d)

    See chapter 4, *Training the head too*.
    """
    X, _ = _tokens(data, need_z=False)
    n, T, d = X.shape[-3:]
    shp = X.shape[:-3]
    if alpha is None:
        alpha = optimal_tokens(data)
    alpha = _alpha(alpha, X)
    if v_mm is None:
        v_mm = head_svm(data, alpha=alpha, solver=solver)
    v_mm = as_tensor(v_mm, "v_mm", dtype=torch.float64, device="cpu")
    if v_mm.shape[-1:] != (d,) or v_mm.ndim > X.ndim - 2:
        raise ValueError(f"v_mm: expected shape (d,)=({d},) or (B,d), got {tuple(v_mm.shape)}")
    Y = as_tensor(data.Y, "data.Y", dtype=torch.float64, device="cpu")
    Xs = X.detach().cpu().to(torch.float64)
    a = alpha.cpu().expand(*shp, n)
    sel = torch.gather(Xs, -2, a[..., None, None].expand(*shp, n, 1, d)).squeeze(-2)
    vmarg = Y * (sel @ v_mm.unsqueeze(-1)).squeeze(-1).expand(*shp, n)  # (..., n)
    rhs = (vmarg <= 1 + tol).double().numpy().reshape(-1, n)  # 1: v-support input, else 0
    return _prompt(data, alpha, W, norm, None, rhs, "relaxed p-SVM", solver, progress, device,
                   dtype, return_dual)


# ----------------------------------------------------------------------------- SVM equivalence
class Equivalence(NamedTuple):
    """Finite and directional parts of the generalised SVM equivalence (chapter 7).

    ``W(k) ≈ W_fin + R_k W_dir / ||W_dir||`` with :math:`R_k \\to \\infty`.

    Attributes
    ----------
    W_fin : tensor (d,d) or (B,d,d)
    W_dir : tensor (d,d) or (B,d,d)
    """

    W_fin: torch.Tensor
    W_dir: torch.Tensor

    def fit(self, W) -> torch.Tensor:
        """:math:`W^{fin} + R\\,W^{dir}` with R fitted to ``W`` by least squares (the official
        code's :math:`W^{SVMeq}`)."""
        W = torch.as_tensor(W, dtype=self.W_dir.dtype, device=self.W_dir.device)
        R = ((W - self.W_fin) * self.W_dir).sum((-2, -1), keepdim=True) \
            / (self.W_dir * self.W_dir).sum((-2, -1), keepdim=True)
        return self.W_fin + R * self.W_dir


@_one_blas_thread
def svm_equivalence(data_or_X, O, s, norm="fro", *, z=None, solver="CLARABEL",
                    progress=False, device=None, dtype=None) -> Equivalence:
    """Generalised SVM equivalence for selected sets :math:`\\mathcal O_i` (nonlinear heads).

    Directional part (beat the masked tokens, no preference inside :math:`\\mathcal O_i`):

    .. math::

        W^{dir} = \\arg\\min_W \\|W\\| \\ \\text{s.t.}\\
        \\begin{cases}
        (x_{it} - x_{i\\tau})^\\top W z_i \\ge 1
            & t \\in \\mathcal O_i,\\ \\tau \\notin \\mathcal O_i \\\\
        (x_{it} - x_{i\\tau})^\\top W z_i = 0 & t, \\tau \\in \\mathcal O_i
        \\end{cases}

    and finite part, matching the softmax ratios :math:`s` inside the sets (as the official
    code builds it from the final softmax):

    .. math::

        W^{fin} = \\arg\\min_W \\|W\\| \\ \\text{s.t.}\\
        (x_{i\\tau} - x_{it})^\\top W z_i = \\log(s_{i\\tau} / s_{it}),\\ t, \\tau \\in
        \\mathcal O_i.

    The pairs are written against one reference member :math:`r_i` of each set (equivalent,
    without redundant rows). With :math:`|\\mathcal O_i| = 1` for every i, :math:`W^{fin} = 0`
    and :math:`W^{dir}` is the Att-SVM of that selection.

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
    O : bool tensor (n,T) or (B,n,T)
        Selected sets (see :func:`attnlib.tokens.selected_sets`).
    s : tensor (n,T) or (B,n,T)
        Final softmax probabilities (positive on O).
    norm : {"fro", "nuc"} or float lp > 1
        Norm of both problems (the official code uses "fro"; "fro" W_fin is the
        minimum-norm least-squares solution).
    z : tensor, optional
        Queries overriding ``data.z``.
    solver, progress, device, dtype
        As in :func:`att_svm`.

    Returns
    -------
    Equivalence
        ``(W_fin, W_dir)``; ``.fit(W)`` gives :math:`W^{fin} + R W^{dir}` fitted to ``W``.

    See chapter 7, *Nonlinear heads*.
    """
    key = _norm_key(norm)
    X, z = _tokens(data_or_X, z)
    n, T, d = X.shape[-3:]
    shp = X.shape[:-3]
    Om = torch.as_tensor(O, device="cpu")
    if Om.dtype != torch.bool:
        raise ValueError("O: expected a bool tensor (True = selected token)")
    if Om.shape[-2:] != (n, T) or Om.ndim > X.ndim - 1:
        raise ValueError(f"O: expected shape (n,T)=({n},{T}) or (B,n,T), got {tuple(Om.shape)}")
    if not bool(Om.any(-1).all()):
        raise ValueError("O: every input needs at least one selected token")
    S = as_tensor(s, "s", dtype=torch.float64, device="cpu")
    if S.shape[-2:] != (n, T) or S.ndim > X.ndim - 1:
        raise ValueError(f"s: expected shape (n,T)=({n},{T}) or (B,n,T), got {tuple(S.shape)}")
    Om, S = Om.expand(*shp, n, T), S.expand(*shp, n, T)
    if not bool((S[Om] > 0).all()):
        raise ValueError("s: probabilities must be > 0 on the selected sets O")
    Xs = X.detach().cpu().to(torch.float64).numpy().reshape(-1, n, T, d)
    zs = z.detach().cpu().to(torch.float64).expand(*shp, n, d).numpy().reshape(-1, n, d)
    On = Om.numpy().reshape(-1, n, T)
    Sn = S.numpy().reshape(-1, n, T)
    items, fins = [], []
    for b in range(len(Xs)):  # the rows of each instance, as one array
        Ob = On[b]
        if Ob.all():
            raise ValueError(f"O: selects every token{f' of trial {b}' if shp else ''}; "
                             "with no masked token W_dir is undefined (a finite solution)")
        ref = Ob.argmax(-1)  # (n,): first member r_i of each set
        D = Xs[b][np.arange(n), ref][:, None, :] - Xs[b]  # (n, T, d): x_{i r_i} - x_{i tau}
        ii, tt = np.nonzero(Ob & (np.arange(T) != ref[:, None]))  # equality pairs (i, t)
        D_eq = Xs[b][ii, tt] - Xs[b][ii, ref[ii]]  # (k, d): x_it - x_{i r_i}
        rhs = np.log(Sn[b][ii, tt] / Sn[b][ii, ref[ii]])  # log(s_it / s_{i r_i})
        items.append(_matrix_rows(D, zs[b], ~Ob, key, eq=(D_eq, zs[b][ii], np.zeros(len(ii)))))
        fins.append(_finite_part(D_eq, zs[b][ii], rhs, d, key, solver))
    try:
        dirs = [W for W, _ in _solve_all(items, key, solver, progress, "SVM equivalence")]
    except _Infeasible as err:
        b = err.index
        raise InfeasibleError(
            f"the directional SVM ({norm}) is infeasible for the selected sets "
            f"O={On[b].astype(int).tolist()}{f' (trial {b})' if shp else ''}: no W puts every "
            f"selected token at least 1 above the masked ones with equal logits inside "
            f"each set. {_ATT_FEASIBLE} (here n={n}, T={T}, d={d}).") from None
    return Equivalence(_output(np.stack(fins).reshape(*shp, d, d), X, device, dtype),
                       _output(np.stack(dirs).reshape(*shp, d, d), X, device, dtype))


def _finite_part(D_eq, z_eq, rhs, d, key, solver):
    """min ||W|| s.t. (x_it - x_ir)^T W z_i = log(s_it/s_ir): W^fin of the SVM equivalence."""
    if len(rhs) == 0:
        return np.zeros((d, d))
    C = np.einsum("kj,kl->kjl", D_eq, z_eq).reshape(len(rhs), d * d)
    if key == "fro":  # minimum-norm solution of the linear system
        return (np.linalg.pinv(C) @ rhs).reshape(d, d)
    try:
        W, _ = _solve(np.zeros((0, d * d)), np.zeros(0), (d, d), key, solver, C, rhs)
    except _Infeasible:
        raise InfeasibleError("the finite part W_fin is infeasible: the log-ratios inside the "
                              "selected sets are inconsistent for these tokens") from None
    return W
