"""THE per-trial SVM solve with solver fallback: infeasible or failed trials do not stop the rest.

Experiments solve one Att-SVM per trial and must keep going when a trial is infeasible (its
selection cannot be separated) or when no solver's answer can be certified; they also report
which trials needed the fallback solver. :func:`solve_each` does that once for everyone.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from attnlib.svm.config import InfeasibleError, SolveConfig, UncertifiedError, norm_key
from attnlib.svm.engine import solve_many
from attnlib.svm.problems import att_rows

__all__ = ["Solutions", "solve_each"]


class Solutions(NamedTuple):
    """Per-trial Att-SVM solutions (see :func:`solve_each`).

    Attributes
    ----------
    W : tensor (B,d,d), float64 on the CPU
        The certified solution; NaN where the trial is infeasible or failed.
    feasible : bool tensor (B,)
        Solved and certified.
    failed : bool tensor (B,)
        No solver's answer could be certified and infeasibility was not confirmed.
    fallback : bool tensor (B,)
        Solved, but only by a later solver of ``config.solvers`` (e.g. SCS, ~1e-4 accurate).
    lam : tensor (B,n,T), float64 on the CPU
        The certified multipliers of the margin constraints (see :func:`att_svm`'s
        ``return_dual``); NaN where the trial is infeasible or failed.
    """

    W: torch.Tensor
    feasible: torch.Tensor
    failed: torch.Tensor
    fallback: torch.Tensor
    lam: torch.Tensor


def solve_each(data, alpha, norm="fro", *, config=None, progress=False, desc="SVM",
               feasible=None) -> Solutions:
    """Att-SVM of every trial, first solver then the fallbacks; an infeasible or failed trial
    does not stop the others.

    .. math::

        W^{mm}_b = \\arg\\min_W \\|W\\| \\quad\\text{s.t.}\\quad
        (x_{bi\\alpha_{bi}} - x_{bit})^\\top W z_{bi} \\ge 1 \\quad t \\ne \\alpha_{bi}

    for each trial b. A trial whose SVM is (provably) infeasible gets ``feasible=False``; one
    whose answer no solver could certify gets ``failed=True``; both keep NaN in ``W``.

    Parameters
    ----------
    data : AttentionData with a trials dimension B
    alpha : int tensor (B,n)
        The selection of each trial.
    norm : {"fro", "nuc"} or float lp > 1
    config : SolveConfig, optional
        Default ``SolveConfig(solvers=("CLARABEL", "SCS"))``; pass
        ``SolveConfig(solvers=("CLARABEL",))`` for no fallback.
    progress : bool
        tqdm progress bar over the trials.
    desc : str
        Label of the progress bar.
    feasible : bool tensor (B,), optional
        Trials already known to be feasible (feasibility is the same for every norm, e.g.
        from their Frobenius solve): the nuclear norm's fast path solves their SDP without
        checking feasibility first. The answers are certified as always.

    Returns
    -------
    Solutions

    See chapter 6, *When is Att-SVM feasible?*
    """
    cfg = SolveConfig(solvers=("CLARABEL", "SCS")) if config is None \
        else SolveConfig.of(None, config)
    B, d = data.B, data.d
    if B is None:
        raise ValueError("data: solve_each needs data with a trials dimension (B,n,T,d)")
    alpha = torch.as_tensor(alpha)
    if alpha.ndim != 2 or alpha.shape[0] != B:
        raise ValueError(f"alpha: expected shape (B,n) with B={B}, got {tuple(alpha.shape)}")
    known = frozenset() if feasible is None else frozenset(
        torch.nonzero(torch.as_tensor(feasible, dtype=torch.bool).reshape(B)).flatten().tolist())
    key = norm_key(norm)
    items, X, _, ac, _, _ = att_rows(data, None, alpha, key, None)
    n, T = X.shape[-3:-1]
    W = torch.full((B, d, d), math.nan, dtype=torch.float64)
    lam = torch.full((B, n, T), math.nan, dtype=torch.float64)
    feasible = torch.zeros(B, dtype=torch.bool)
    failed = torch.zeros(B, dtype=torch.bool)
    fallback = torch.zeros(B, dtype=torch.bool)
    outs = solve_many(items, key, cfg, progress, desc, known)  # an infeasible one stops nothing
    for b, out in enumerate(outs):
        if isinstance(out, InfeasibleError):
            continue
        if isinstance(out, UncertifiedError):
            failed[b] = True
            continue
        Wb, lb, solver = out
        W[b] = torch.as_tensor(Wb, dtype=torch.float64)
        lam[b] = torch.as_tensor(lb.reshape(n, T) * ac[b], dtype=torch.float64)
        feasible[b], fallback[b] = True, solver not in ("fast", "zero", cfg.solvers[0])
    return Solutions(W, feasible, failed, fallback, lam)
