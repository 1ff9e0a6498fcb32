"""THE per-trial SVM solve with solver fallback: infeasible or failed trials do not stop the rest.

Experiments solve one Att-SVM per trial and must keep going when a trial is infeasible (its
selection cannot be separated) or when no solver's answer can be certified; they also report
which trials needed the fallback solver. :func:`solve_each` does that once for everyone.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import torch

from attnlib.svm.config import InfeasibleError, SolveConfig, UncertifiedError
from attnlib.svm.problems import att_svm

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
    """

    W: torch.Tensor
    feasible: torch.Tensor
    failed: torch.Tensor
    fallback: torch.Tensor


def solve_each(data, alpha, norm="fro", *, config=None, progress=False, desc="SVM") -> Solutions:
    """Att-SVM of every trial, one at a time, first solver then the fallbacks.

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
    stages = [dataclasses.replace(cfg, solvers=(s,)) for s in cfg.solvers]
    W = torch.full((B, d, d), math.nan, dtype=torch.float64)
    feasible = torch.zeros(B, dtype=torch.bool)
    failed = torch.zeros(B, dtype=torch.bool)
    fallback = torch.zeros(B, dtype=torch.bool)
    it = range(B)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc=desc, leave=False)
    for b in it:  # one solve per trial: an infeasible one must not stop the rest
        one = data.trial(b)
        for k, stage in enumerate(stages):
            try:
                W[b] = att_svm(one, alpha=alpha[b], norm=norm, config=stage).cpu().double()
            except InfeasibleError:
                break
            except UncertifiedError:
                continue
            feasible[b], fallback[b] = True, k > 0
            break
        else:
            failed[b] = True
    return Solutions(W, feasible, failed, fallback)
