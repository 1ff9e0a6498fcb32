"""The ℓq-AttSVMs of the mirror-descent experiments (chapter 9): every trial in one call, each
(trial, selection) solved once however many runs end on it."""

from __future__ import annotations

import torch

__all__ = ["lq_svms", "lq_svms_once"]

from attnlib.data import AttentionData
from attnlib.svm import InfeasibleError, att_svm, solve_each


def lq_svms(data, alpha, qs):
    """ℓq-AttSVM of the selection ``alpha`` for every q in ``qs``: (len(qs), B, d, d), and the
    number of trials that needed the fallback solver.

    All trials are solved in one call; only if that call fails (Clarabel occasionally does on
    ℓq problems with q close to 1) are they solved one by one with the fallback of
    :func:`attnlib.svm.solve_each` (NaN where no solver answered).
    """
    out, fallbacks = [], 0
    for q in qs:
        try:
            out.append(att_svm(data, alpha=alpha, norm=float(q)))
        except (RuntimeError, InfeasibleError):  # rare path: trial by trial
            sol = solve_each(data, alpha, norm=float(q))
            out.append(sol.W.to(device=data.device, dtype=data.dtype))
            fallbacks += int(sol.fallback.sum())
    return torch.stack(out), fallbacks


def lq_svms_once(data, alpha, qs, solved: dict):
    """:func:`lq_svms` for batched ``data``, solving each (trial, selection) once.

    ``solved`` maps ``(trial, selection)`` to that trial's ℓq-AttSVMs (Q, d, d) and is filled
    here: runs of several exponents on the same datasets often end on the same selection,
    whose SVMs are then the same problems (at paper scale 124 distinct of 300). Solving one
    again would only move its answer within the solver's tolerance (Clarabel's answer depends
    slightly on the instance solved before it). Returns what :func:`lq_svms` returns, the
    fallbacks counted for the newly solved trials only.
    """
    keys = [(b, tuple(a)) for b, a in enumerate(alpha.tolist())]
    new = [b for b, k in enumerate(keys) if k not in solved]
    fallbacks = 0
    if new:
        idx = torch.tensor(new, device=alpha.device)
        part = AttentionData(*(None if t is None else t[idx]
                               for t in (data.X, data.Y, data.z, data.v)))
        Wn, fallbacks = lq_svms(part, alpha[idx], qs)  # (Q, len(new), d, d)
        for j, b in enumerate(new):
            solved[keys[b]] = Wn[:, j]
    return torch.stack([solved[k] for k in keys], 1), fallbacks
