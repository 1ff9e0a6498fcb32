"""The one solve path of every SVM: compile once per shape, solve, certify, fall back.

Every problem is "smallest norm subject to linear margin constraints",

.. math:: \\min_w \\|w\\| \\quad\\text{s.t.}\\quad A w \\ge b,\\; C w = c,

with one row of ``A`` per (input, token) pair, given as :class:`Rows`. A cvxpy problem is
compiled once per (shape, norm) with ``cp.Parameter`` data (DPP), so repeated solves of one
shape pay canonicalisation once. How each norm is solved:

* ``"fro"`` -- the dual QP :math:`\\max_{\\lambda\\ge0,\\mu}\\, b^\\top\\lambda + c^\\top\\mu
  - \\tfrac12\\|A^\\top\\lambda + C^\\top\\mu\\|^2`, :math:`w = A^\\top\\lambda + C^\\top\\mu`;
* ``"nuc"`` -- the dual SDP :math:`\\max\\, b^\\top\\lambda + c^\\top\\mu` s.t.
  :math:`\\|\\mathrm{mat}(A^\\top\\lambda + C^\\top\\mu)\\|_2 \\le 1`; W from the dual of its LMI;
* a float ``lp > 1`` -- :math:`\\min \\sum_j |w_j|^p` with one vectorized power cone.

Frobenius problems and nuclear ones without equality rows go first to
:mod:`attnlib.svm.fast` (``SolveConfig.fast``); what it cannot certify goes the conic way
below.

After every solve the answer is certified (:func:`~attnlib.svm.certificate.certify`): margins
:math:`A_k w \\ge b_k(1 - \\mathrm{tol})`, dual feasibility, and a relative duality gap
:math:`\\le \\mathrm{tol}`. An uncertified answer is re-solved on rescaled rows (rows / s,
:math:`w = w'/s`), then with the next solver of :class:`SolveConfig`. A solver's "infeasible"
is believed only with a verified Farkas certificate
(:func:`~attnlib.svm.certificate.farkas`).

See chapter 2, *The Att-SVM and gradient descent*.
"""

from __future__ import annotations

import functools
import math
import warnings
import weakref
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnlib.svm.certificate import certify, farkas
from attnlib.svm.config import CLARABEL_TIGHT, InfeasibleError, SolveConfig, UncertifiedError
from attnlib.svm.fast import farkas_check, ldp, ldp_eq, nuclear_ipm, rank_one

if TYPE_CHECKING:  # cvxpy is imported where a problem is built (its import costs about a
    import cvxpy as cp  # second, which a process that only takes the fast paths need not pay)

__all__ = ["Rows", "Infeasible", "compiled", "solve_all", "solve_many", "CHUNK"]


class Rows(NamedTuple):
    """One instance: min ||w|| s.t. A w >= b, C w = c, w of ``shape``; W = M U^T if U given."""

    A: np.ndarray
    b: np.ndarray
    C: np.ndarray | None
    c: np.ndarray | None
    shape: tuple
    U: np.ndarray | None = None


class Infeasible(InfeasibleError):
    """Instance ``index`` is infeasible, confirmed by a Farkas certificate (the problem
    functions re-raise it as an :class:`InfeasibleError` naming the selection)."""

    def __init__(self, index=None):
        super().__init__(f"instance {index} is infeasible")
        self.index = index


class Piece(NamedTuple):
    objective: cp.Expression  # to minimise
    constraints: list
    load: object  # (rows: Rows) -> None: put the numbers into the Parameters
    read: object  # (rows: Rows) -> (w (D,), lam (m,), mu (m_eq,))


def _dual_vars(m, m_eq):
    """Multipliers lam >= 0 (inequalities), mu (equalities), and the b, c Parameters."""
    import cvxpy as cp

    lam = cp.Variable(m, nonneg=True, name="lam") if m else None
    mu = cp.Variable(m_eq, name="mu") if m_eq else None
    b = cp.Parameter(m, name="b") if m else None
    c = cp.Parameter(m_eq, name="c") if m_eq else None
    obj = (b @ lam if m else 0) + (c @ mu if m_eq else 0)  # b'lam + c'mu
    return lam, mu, b, c, obj


def _values(lam, mu):
    return (lam.value if lam is not None else np.zeros(0),
            mu.value if mu is not None else np.zeros(0))


def _piece(m: int, m_eq: int, shape: tuple, norm) -> Piece:
    """The cvxpy objective and constraints of one instance, with Parameters for its data."""
    import cvxpy as cp

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
            return r.A.T @ lv + (r.C.T @ mv if m_eq else 0), lv, mv

        return Piece(0.5 * cp.sum_squares(F @ y) - obj, [], load, read)
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
            return (W.reshape(-1), *_values(lam, mu))

        return Piece(-obj, [lmi], load, read)
    # entrywise lp: the primal  min sum_j |w_j|^p  s.t.  Aw >= b, Cw = c, with one vectorized
    # power cone t_j^(1/p) >= |w_j| (Clarabel's native cone; cp.pnorm's rational SOC tree
    # compiles slower and fails near p = 1)
    b = cp.Parameter(m, name="b") if m else None
    c = cp.Parameter(m_eq, name="c") if m_eq else None
    w, t = cp.Variable(D, name="w"), cp.Variable(D, name="t")
    cons = ([A @ w >= b] if m else []) + ([C @ w == c] if m_eq else [])
    cons.append(cp.constraints.PowCone3D(t, np.ones(D), w, 1.0 / norm))

    def read(r):  # cvxpy's equality multiplier has the opposite sign of mu in grad f = A'l + C'mu
        lv = cons[0].dual_value if m else np.zeros(0)
        mv = -cons[1 if m else 0].dual_value if m_eq else np.zeros(0)
        return w.value, lv, mv

    return Piece(cp.sum(t), cons, load, read)


class Compiled(NamedTuple):
    prob: cp.Problem
    pieces: list
    status_infeasible: tuple
    clarabel: dict  # extra Clarabel settings for this problem


#: every compiled problem (see :func:`fresh_start`)
_PROBLEMS: weakref.WeakSet = weakref.WeakSet()


def fresh_start() -> None:
    """Forget the solvers kept for warm starts: the next solve of every compiled problem
    starts cold, as in a new process.

    A warm-started Clarabel answer depends slightly on the instance solved before it (about
    1e-6 relative, inside the tolerance it is certified to), so a result would depend on what
    ran before it in the same process; ``attnlib.experiments.run`` calls this before each
    experiment, whose numbers are then the same in any order.
    """
    for prob in list(_PROBLEMS):
        prob._solver_cache.clear()


@functools.lru_cache(maxsize=64)
def compiled(m: int, m_eq: int, shape: tuple, norm, k: int = 1) -> Compiled:
    """``k`` independent instances of one shape as one cvxpy problem (their sum).

    Built once per (shape, norm, k) and cached; its data are Parameters (DPP), so every later
    solve only substitutes numbers.
    """
    import cvxpy as cp

    pieces = [_piece(m, m_eq, shape, norm) for _ in range(k)]
    prob = cp.Problem(cp.Minimize(sum(p.objective for p in pieces)),
                      [con for p in pieces for con in p.constraints])
    if norm in ("fro", "nuc"):  # dual problems: an infeasible SVM has an unbounded dual
        infeasible = ("unbounded", "unbounded_inaccurate")
    else:
        infeasible = ("infeasible", "infeasible_inaccurate")
    # a nuclear LMI's scaling block is dense: faer's supernodal LDL is ~2x faster from ~24 rows
    extra = dict(direct_solve_method="faer") if norm == "nuc" and sum(shape) >= 24 else {}
    _PROBLEMS.add(prob)
    return Compiled(prob, pieces, infeasible, extra)


# Frobenius instances are solved 8 at a time as one QP: it saves ~25% CPU per instance. The
# nuclear SDPs gain nothing (the solve dominates) and lose wall time, so they go one by one.
CHUNK = 8
_ITERS = {"CLARABEL": "max_iter", "SCS": "max_iters", "OSQP": "max_iter", "ECOS": "max_iters"}


def _attempts(comp: Compiled, solver: str, config: SolveConfig) -> list:
    """(options, warm start) to try in order: for Clarabel 1. accurate, reusing the solver
    object of the last solve; 2. the same fresh (a reused one occasionally fails after an
    earlier instance); 3. the solver's default accuracy, fresh."""
    cap = {} if config.max_iters is None or solver not in _ITERS \
        else {_ITERS[solver]: int(config.max_iters)}
    if solver == "CLARABEL":
        tight = {**CLARABEL_TIGHT, **comp.clarabel, **cap}
        return [(tight, True), (tight, False), ({**comp.clarabel, **cap}, False)]
    return [(cap, False)]


def _run(comp: Compiled, items: list, solver: str, opts: dict, warm: bool):
    """One solver call on ``items``: ("solved", [(w, lam, mu)]), ("infeasible", None) or
    ("failed", reason)."""
    import cvxpy as cp

    for piece, r in zip(comp.pieces, items):
        piece.load(r)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            comp.prob.solve(solver=solver, warm_start=warm, **opts)
    except cp.error.SolverError as err:
        return "failed", f"solver error ({str(err).splitlines()[0][:80]})"
    status = comp.prob.status
    if status in comp.status_infeasible:
        return "infeasible", None
    if status not in ("optimal", "optimal_inaccurate"):
        return "failed", f"status {status!r}"
    return "solved", [piece.read(r) for piece, r in zip(comp.pieces, items)]


# ----------------------------------------------------------------------------- solving
def _row_scale(r: Rows) -> float:
    """Largest norm of a constraint row (1 when every row is zero)."""
    norms = [np.linalg.norm(M, axis=1).max() for M in (r.A, r.C) if M is not None and len(M)]
    s = max(norms, default=0.0)
    return float(s) if s > 0 and math.isfinite(s) else 1.0


def _scaled(r: Rows, s: float) -> Rows:
    return r if s == 1.0 else r._replace(A=r.A / s, C=None if r.C is None else r.C / s)


def _unscale(sol, s: float, norm):
    """Rows / s give w' = s w and multipliers scaled by s^2 (fro), s (nuc), s^p (lp)."""
    w, lam, mu = sol
    if s == 1.0:
        return w, lam, mu
    k = 2.0 if norm == "fro" else 1.0 if norm == "nuc" else float(norm)
    return np.asarray(w) / s, np.asarray(lam) / s**k, np.asarray(mu) / s**k


def _finish(r: Rows, w, lam):
    w = np.asarray(w, dtype=np.float64).reshape(r.shape)
    return (w if r.U is None else w @ r.U.T, np.asarray(lam, dtype=np.float64))


def _key(r: Rows):
    return len(r.b), 0 if r.C is None else len(r.C), tuple(r.shape)


def solve_one(r: Rows, norm, config: SolveConfig, index: int = 0):
    """One instance through every attempt; (W, lam) or raises Infeasible / UncertifiedError."""
    return _solve_one(r, norm, config, index)[:2]


def _solve_one(r: Rows, norm, config: SolveConfig, index: int = 0):
    """:func:`solve_one`, returning (W, lam, the solver whose answer was certified)."""
    if not (r.b > 0).any() and (r.C is None or not np.any(r.c)):
        # w = 0 is feasible, hence optimal in any norm (with lam = 0); a solver's ~1e-9 answer
        # here has no relative duality gap to certify (0 / 0)
        return (*_finish(r, np.zeros(math.prod(r.shape)), np.zeros(len(r.b))), "zero")
    s = _row_scale(r)
    lo, hi = config.rescale_outside
    scalings = [s] if not lo <= s <= hi else [1.0] + ([s] if s != 1.0 else [])
    comp = compiled(*_key(r), norm, 1)
    notes, confirmed = [], None
    for solver in config.solvers:
        tol = config.tol_of(solver)
        for sc in scalings:
            tag = f"{solver}{'' if sc == 1.0 else ', rescaled'}"
            for opts, warm in _attempts(comp, solver, config):
                status, out = _run(comp, [_scaled(r, sc)], solver, opts, warm)
                if status == "solved":
                    w, lam, mu = _unscale(out[0], sc, norm)
                    cert = certify(r, w, lam, mu, norm, tol)
                    if cert.ok:
                        return (*_finish(r, w, lam), solver)
                    notes.append(f"{tag}: margin violation {cert.margin:.1e}, duality gap "
                                 f"{cert.gap:.1e}, dual violation {cert.dual:.1e}")
                elif status == "infeasible":
                    confirmed = farkas(r, config.farkas_ratio) if confirmed is None \
                        else confirmed
                    if confirmed:
                        raise Infeasible(index)
                    notes.append(f"{tag}: reported infeasible, but no Farkas certificate")
                    break  # next scaling
                else:
                    notes.append(f"{tag}: {out}")
    if confirmed is None and farkas(r, config.farkas_ratio):
        raise Infeasible(index)
    err = UncertifiedError(
        f"the SVM answer (instance {index}) could not be certified to tol="
        f"{config.tol:g} (first-order solvers {config.first_order_tol:g}) after "
        f"{len(notes)} attempts, and it is not provably infeasible: " + "; ".join(notes[-4:])
        + ". The data may be nearly degenerate; try SolveConfig(solvers=...) with "
        "another solver.")
    err.index = index
    raise err


def _fast(items: list, idx: list, norm, config: SolveConfig, known=frozenset()) -> dict:
    """The instances ``idx`` that :mod:`attnlib.svm.fast` decided: {j: (w, lam)} for answers
    that pass :func:`certify`, {j: None} for infeasibility proved by a verified Farkas
    certificate (:func:`~attnlib.svm.fast.farkas_check`). The rest is left to the conic
    solvers. ``known``: instances already known to be feasible, whose nuclear SDP is tried
    without the LDP that checks feasibility first."""
    out, nuc = {}, {}
    for j in idx:
        r = items[j]
        if r.C is not None and len(r.C):
            if norm == "fro":  # equality rows eliminated; infeasible ones: the conic path
                status, *sol = ldp_eq(r.A, r.b, r.C, r.c)
                if status == "solved" and certify(r, *sol, norm, config.tol).ok:
                    out[j] = (sol[0], sol[1])
            continue  # nuclear norm with equality rows: the conic path
        status, *sol = ("solved",) if norm == "nuc" and j in known else ldp(r.A, r.b)
        if status == "infeasible":  # feasibility is the same for both norms
            if farkas_check(r.A, r.b, sol[0], config.farkas_ratio):
                out[j] = None
        elif status == "solved" and norm == "fro":
            if certify(r, sol[0], sol[1], np.zeros(0), norm, config.tol).ok:
                out[j] = (sol[0], sol[1])
        elif status == "solved":
            keep = np.linalg.norm(r.A, axis=1) > 0  # zero rows (0 >= b, b <= 0): lam = 0
            uv = rank_one(r.A[keep], r.shape) if keep.any() and len(r.shape) == 2 else None
            if uv is not None:
                nuc.setdefault((int(keep.sum()), r.shape), []).append((j, keep, *uv))
    for group in nuc.values():  # the SDPs of one shape iterate together
        try:
            M, lam, _ = nuclear_ipm(np.stack([g[2] for g in group]),
                                    np.stack([g[3] for g in group]),
                                    np.stack([items[g[0]].b[g[1]] for g in group]))
        except (np.linalg.LinAlgError, ValueError):
            continue  # left to the conic solvers
        for (j, keep, _, _), Mj, lj in zip(group, M, lam):
            full = np.zeros(len(items[j].b))
            full[keep] = lj
            if certify(items[j], Mj.reshape(-1), full, np.zeros(0), norm, config.tol).ok:
                out[j] = (Mj.reshape(-1), full)
    return out


def solve_many(items: list, norm, config: SolveConfig, progress=False, desc="SVM",
               known=frozenset()) -> list:
    """Solve and certify every instance; one outcome per instance, never raising.

    An outcome is ``(W, lam, solver)`` -- the certified answer and who gave it (``"fast"`` for
    :mod:`attnlib.svm.fast`, ``"zero"`` where w = 0 is feasible, else the cvxpy solver's
    name) -- or the :class:`Infeasible` /
    :class:`UncertifiedError` the instance raised. Instances of one shape share a compiled
    problem; Frobenius ones left by the fast solvers are solved ``CHUNK`` at a time as one
    problem, and an instance of a chunk that fails or is not certified is re-solved alone.
    ``known``: indices of instances already known to be feasible (see :func:`_fast`).
    """
    out = [None] * len(items)
    groups = {}
    for j, r in enumerate(items):
        groups.setdefault(_key(r), []).append(j)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(items), desc=desc)
    first = config.solvers[0]
    lo, hi = config.rescale_outside
    for key, idx in groups.items():
        # the fast solvers stand in for the first Clarabel attempt (none with a cap)
        if config.fast and config.max_iters is None and config.solvers[0] == "CLARABEL" \
                and norm in ("fro", "nuc"):
            done = _fast(items, idx, norm, config, known)
            for j, sol in done.items():
                out[j] = Infeasible(j) if sol is None else (*_finish(items[j], *sol), "fast")
            idx = [j for j in idx if j not in done]
            if bar is not None:
                bar.update(len(done))
        k = CHUNK if norm == "fro" and len(idx) >= CHUNK else 1
        chunks = [idx[i:i + k] for i in range(0, len(idx) - len(idx) % k, k)]
        chunks += [[j] for j in idx[len(idx) - len(idx) % k:]]
        for ch in chunks:
            if len(ch) > 1 and all(lo <= _row_scale(items[j]) <= hi for j in ch):
                comp = compiled(*key, norm, len(ch))
                for opts, warm in _attempts(comp, first, config):
                    status, sols = _run(comp, [items[j] for j in ch], first, opts, warm)
                    if status != "failed":
                        break
                if status == "solved":
                    tol = config.tol_of(first)
                    for j, sol in zip(ch, sols):
                        if certify(items[j], *sol, norm, tol).ok:
                            out[j] = (*_finish(items[j], sol[0], sol[1]), first)
            for j in ch:
                if out[j] is None:
                    try:
                        out[j] = _solve_one(items[j], norm, config, j)
                    except (Infeasible, UncertifiedError) as err:
                        out[j] = err
            if bar is not None:
                bar.update(len(ch))
    if bar is not None:
        bar.close()
    return out


def solve_all(items: list, norm, config: SolveConfig, progress=False, desc="SVM") -> list:
    """Solve and certify every instance (:func:`solve_many`); returns [(W, lam)].

    Raises the first instance's :class:`Infeasible` (``.index`` set) or
    :class:`UncertifiedError`.
    """
    outs = solve_many(items, norm, config, progress, desc)
    for o in outs:
        if isinstance(o, Exception):
            raise o
    return [o[:2] for o in outs]
