"""How the SVMs are solved and certified: :class:`SolveConfig` and the two errors.

Every SVM answer is *certified* before it is returned (see :mod:`attnlib.svm.engine`):

* primal feasibility -- every margin :math:`A_k w / b_k \\ge 1 - \\mathrm{tol}` (margins are
  dimensionless: scaling the data does not change them, so the tolerance is relative to the
  data's scale) and every equality :math:`|C_k w - c_k| \\le \\mathrm{tol}
  \\max(|c_k|, \\|C_k\\|\\|w\\|)`;
* optimality -- the multipliers are dual feasible and the duality gap between the primal
  objective and the dual objective of the multipliers is at most ``tol`` relative to the
  objective (for the Frobenius dual QP this is the complementary slackness
  :math:`\\lambda^\\top(Aw - b)`).

An answer that fails is re-solved on rescaled data, then with the next solver of
``solvers``; :class:`InfeasibleError` is raised only when a Farkas certificate confirms the
infeasibility, :class:`UncertifiedError` when no attempt could be certified.
"""

from __future__ import annotations

import functools
import importlib.util
import math
from dataclasses import dataclass

import numpy as np

from attnlib._validate import flag, scalar

__all__ = ["SolveConfig", "InfeasibleError", "UncertifiedError", "norm_key", "check_solver",
           "FIRST_ORDER", "MAX_LP", "CLARABEL_TIGHT"]

FIRST_ORDER = ("SCS", "OSQP")  # first-order solvers: about 1e-4 accurate
#: The largest entrywise exponent lp the SVMs accept. Its power cones get harder to solve as lp
#: grows: of 150 random Att-SVMs (5 shapes, tokens scaled by 1e-3, 1 and 1e3) Clarabel's
#: answer could not be certified for 1 at lp = 3, 3 at 4, 9 at 5, and a quarter of them at 16;
#: at lp = 1e3 almost none is certified. The book's exponents are at most 3.
MAX_LP = 4.0
#: Clarabel's defaults stop at a 1e-8 duality gap, which leaves ~1e-5 errors in W when a
#: constraint is nearly degenerate. We ask for 1e-10 and accept "almost solved" only at
#: Clarabel's default full accuracy (1e-8); if even that fails, retry with the defaults.
CLARABEL_TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, tol_ktratio=1e-8,
                      reduced_tol_gap_abs=1e-8, reduced_tol_gap_rel=1e-8, reduced_tol_feas=1e-8,
                      reduced_tol_ktratio=1e-6)


class InfeasibleError(ValueError):
    """An SVM problem has no feasible point (the selection cannot be separated).

    Raised only when infeasibility is confirmed by a Farkas certificate: multipliers
    :math:`\\lambda \\ge 0` with :math:`\\sum_k \\lambda_k A_k = 0` and
    :math:`\\sum_k \\lambda_k b_k > 0` (checked numerically, rows normalised).
    """


class UncertifiedError(RuntimeError):
    """No solver's answer could be certified (feasible and optimal within ``SolveConfig.tol``)
    and infeasibility could not be confirmed either."""


@dataclass(frozen=True)
class SolveConfig:
    """Settings of every SVM solve.

    Parameters
    ----------
    solvers : tuple of str
        cvxpy solvers tried in order (each on the raw, then on rescaled data) until an answer
        is certified. ``att_svm(..., solver=s)`` uses ``(s,)``; :func:`attnlib.svm.solve_each`
        defaults to ``("CLARABEL", "SCS")``.
    tol : float
        Certification tolerance of interior-point answers: margins :math:`\\ge 1 - tol`,
        relative duality gap :math:`\\le tol`.
    first_order_tol : float
        The same tolerance for first-order solvers (SCS, OSQP: about 1e-4 accurate).
    rescale_outside : (float, float)
        Data whose largest constraint row norm lies outside this range are rescaled to unit
        scale before the first solve (and scaled back); others only after a failed attempt.
    farkas_ratio : float
        A Farkas certificate with :math:`b^\\top\\lambda / \\|A^\\top\\lambda\\| \\ge`
        ``farkas_ratio`` (rows normalised, see ``attnlib.svm.certificate.farkas``) confirms
        infeasibility: every feasible point would need a norm above this ratio (a geometric
        margin below its inverse).
    max_iters : int or None
        Iteration cap passed to the solvers (None: the solver's default).
    fast : bool
        Try the exact fast solvers of ``attnlib.svm.fast`` first (Frobenius: one NNLS;
        nuclear: a batched interior-point method), certified like every answer. Used when
        the first solver is Clarabel and ``max_iters`` is None.

    See chapter 2, *The Att-SVM and gradient descent*.
    """

    solvers: tuple = ("CLARABEL",)
    tol: float = 1e-6
    first_order_tol: float = 1e-3
    rescale_outside: tuple = (1e-4, 1e4)
    farkas_ratio: float = 1e6
    max_iters: int | None = None
    fast: bool = True

    def __post_init__(self):
        s = self.solvers
        if isinstance(s, str) or not isinstance(s, tuple) or not s \
                or not all(isinstance(x, str) and x for x in s):
            raise ValueError(f"solvers: expected a non-empty tuple of solver names, got {s!r}")
        object.__setattr__(self, "solvers", tuple(check_solver(x, "solvers") for x in s))
        for name in ("tol", "first_order_tol", "farkas_ratio"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) \
                    or not math.isfinite(v) or not v > 0:
                raise ValueError(f"{name}: expected a finite number > 0, got {v!r}")
        lo_hi = tuple(self.rescale_outside)
        if len(lo_hi) != 2 or not 0 < lo_hi[0] <= 1 <= lo_hi[1]:
            raise ValueError(f"rescale_outside: expected (lo, hi) with 0 < lo <= 1 <= hi, got "
                             f"{self.rescale_outside!r}")
        object.__setattr__(self, "rescale_outside", (float(lo_hi[0]), float(lo_hi[1])))
        flag("fast", self.fast)
        mi = self.max_iters
        if mi is not None and (isinstance(mi, bool) or int(mi) != mi or mi < 1):
            raise ValueError(f"max_iters: expected None or an integer >= 1, got {mi!r}")

    def tol_of(self, solver: str) -> float:
        """The certification tolerance of ``solver``."""
        return self.first_order_tol if solver.upper() in FIRST_ORDER else self.tol

    @classmethod
    def of(cls, solver=None, config=None) -> SolveConfig:
        """``config``, or the default with ``solvers=(solver,)``."""
        if config is not None:
            if not isinstance(config, SolveConfig):
                raise ValueError(f"config: expected a SolveConfig, got {type(config).__name__}")
            return config
        if solver is None:
            return cls()
        if not isinstance(solver, str):
            raise ValueError(f"solver: expected a cvxpy solver name, got {solver!r}")
        return cls(solvers=(check_solver(solver),))


@functools.lru_cache(maxsize=1)
def _solvers() -> tuple:
    """cvxpy's solver names and the installed ones."""
    import cvxpy as cp

    return tuple(cp.settings.SOLVERS), tuple(cp.installed_solvers())


def check_solver(name, arg: str = "solver") -> str:
    """A cvxpy solver name, upper-cased, of an installed solver; ValueError (naming ``arg``)
    for an unknown or a missing one."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{arg}: expected a cvxpy solver name, got {name!r}")
    s = name.upper()
    if s == "CLARABEL" and importlib.util.find_spec("clarabel") is not None:
        return s  # the default solver, installed: no need to import cvxpy (about a second) to know
    known, installed = _solvers()
    if s not in installed:
        why = "is not installed" if s in known else "is not a cvxpy solver"
        raise ValueError(f"{arg}: {name!r} {why}; installed solvers: {', '.join(installed)}")
    return s


def norm_key(norm, matrix=True):
    """Validate ``norm``: "fro", "nuc" (matrices only) or a float 1 < lp <= :data:`MAX_LP`."""
    if isinstance(norm, str):
        if norm == "fro" or (norm == "nuc" and matrix):
            return norm
        allowed = "'fro', 'nuc'" if matrix else "'fro'"
        raise ValueError(f"norm: expected {allowed} or a float lp > 1, got {norm!r}")
    p = scalar(norm)
    if p is None:
        raise ValueError(f"norm: expected 'fro', 'nuc' or a float lp > 1, got {norm!r}")
    p = float(p)
    if not p > 1 or not math.isfinite(p):
        raise ValueError(f"norm: an entrywise lp norm needs a finite lp > 1, got {norm!r}")
    if p > MAX_LP:
        raise ValueError(f"norm: an entrywise lp norm is supported for 1 < lp <= {MAX_LP:g} "
                         "(above it, fewer and fewer of the solvers' answers can be "
                         f"certified), got {norm!r}")
    return p
