"""Local optimality of a token selection: the one implementation (chapter 3).

A selection :math:`\\alpha` is *locally optimal* when its SVM is feasible and every support
token -- an active margin constraint of the SVM solution -- scores strictly below the
selected token:

.. math::

    \\gamma_{i\\alpha_i} > \\gamma_{it}
    \\quad \\text{for all } t \\in \\mathcal T_i(\\alpha),\\ i \\in [n],
    \\qquad \\mathcal T_i(\\alpha) = \\{t \\ne \\alpha_i :
    (x_{i\\alpha_i} - x_{it})^\\top W^{mm}_\\alpha z_i = 1\\}.

:func:`violations` and :func:`locally_optimal_from` read it off an SVM that is already solved
(experiments solve once and reuse); :func:`is_locally_optimal` and
:func:`enumerate_selections` solve the SVMs themselves.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import torch

from attnlib import svm
from attnlib._validate import number
from attnlib.data import AttentionData
from attnlib.tokens import (
    as_mask,
    as_selection,
    optimal_tokens,
    scores,
    support_tokens,
    token_inputs,
)

__all__ = ["violations", "locally_optimal_from", "is_locally_optimal", "Selections",
           "enumerate_selections"]


def violations(data, W_mm, alpha, *, z=None, mask=None, tol=1e-6, score_tol=1e-10):
    """Support tokens that score at least as high as the selected token.

    .. math::

        V_{it} = [\\, t \\in \\mathcal T_i(\\alpha) \\text{ and }
        \\gamma_{it} \\ge \\gamma_{i\\alpha_i} - \\text{score\\_tol} \\,]

    Parameters
    ----------
    data : AttentionData
        Needs ``Y`` and ``v`` (the scores :math:`\\gamma`).
    W_mm : tensor (d,d) or (B,d,d)
        The SVM solution of ``alpha`` (any norm), or any direction selecting ``alpha``.
    alpha : int tensor (n,) or (B,n)
    z : tensor (n,d) or (B,n,d), optional
        Queries overriding ``data.z`` (the prompt model: :math:`z_i = p^{mm}`).
    mask : bool tensor (n,T) or (B,n,T), optional
        Visible tokens.
    tol : float
        Relative tolerance for a margin to count as active (see
        :func:`~attnlib.tokens.support_tokens`; the TF-SVM paper's re-simulation uses 1e-4).
    score_tol : float
        Scores closer than this count as equal (a tie violates the strict inequality).

    Returns
    -------
    bool tensor (n,T) or (B,n,T)

    See chapter 3, *Local versus global optimality*.
    """
    _check(data, tol=tol, score_tol=score_tol)
    X = data.X
    if z is not None:  # support tokens of the logits x_it^T W z_i, on the tokens X
        sup = support_tokens(X, torch.as_tensor(W_mm).to(X), alpha, z=z, mask=mask, tol=tol)
    else:
        sup = support_tokens(data, torch.as_tensor(W_mm).to(X), alpha, mask=mask, tol=tol)
    gamma = scores(data)  # (..., n, T)
    alpha = as_selection(alpha, X)
    best = torch.gather(gamma, -1, alpha.expand(gamma.shape[:-1]).unsqueeze(-1))  # (..., n, 1)
    return (sup & (gamma >= best - score_tol)).cpu()


def locally_optimal_from(data, W_mm, alpha, *, z=None, mask=None, tol=1e-6, score_tol=1e-10):
    """Local optimality from an already solved SVM: no :func:`violations`.

    Parameters are those of :func:`violations`.

    Returns
    -------
    bool tensor () or (B,)

    See chapter 3, *Local versus global optimality*.
    """
    bad = violations(data, W_mm, alpha, z=z, mask=mask, tol=tol, score_tol=score_tol)
    return ~bad.flatten(-2).any(-1)


def _solve(data, alpha, norm, param, W, mask):
    """The SVM of ``alpha``: (W_mm, z) with z the prompt queries (param "p") or None."""
    X = data.X
    if param == "W":
        return svm.att_svm(data, alpha=alpha, norm=norm, mask=mask), None
    p_mm = svm.prompt_svm(data, alpha=alpha, W=W, norm=norm, mask=mask)
    Wf = torch.eye(X.shape[-1], dtype=X.dtype, device=X.device) if W is None else W
    return Wf, p_mm.unsqueeze(-2).expand(*p_mm.shape[:-1], X.shape[-3], X.shape[-1])


def _local(data, alpha, norm, param, W, mask, tol, score_tol):
    """(feasible, locally optimal), bool tensors () or (B,); all trials solved in one call,
    and trial by trial if one is infeasible."""
    X = data.X
    try:
        W_mm, z = _solve(data, alpha, norm, param, W, mask)
    except svm.InfeasibleError:
        if X.ndim == 3:
            return torch.tensor(False), torch.tensor(False)
        B = X.shape[0]
        one = [_local(data.trial(b), alpha.expand(B, -1)[b], norm, param,
                      W if W is None or torch.as_tensor(W).ndim == 2 else W[b],
                      None if mask is None else mask.expand(B, *mask.shape[-2:])[b], tol,
                      score_tol) for b in range(B)]  # rare path: one solve per trial
        return torch.stack([f for f, _ in one]), torch.stack([lo for _, lo in one])
    ok = locally_optimal_from(data, W_mm, alpha, z=z, mask=mask, tol=tol, score_tol=score_tol)
    return torch.ones_like(ok), ok


def _check(data, param="W", tol=0.0, score_tol=0.0):
    if not isinstance(data, AttentionData):
        raise ValueError(f"data: expected an attnlib.AttentionData (tokens X, labels Y, head v), "
                         f"got {type(data).__name__}")
    if param not in ("W", "p"):
        raise ValueError(f"param: expected 'W' or 'p', got {param!r}")
    number("tol", tol, lo=0)
    number("score_tol", score_tol, lo=0)


def is_locally_optimal(data, alpha, norm="fro", *, param="W", W=None, mask=None, tol=1e-6,
                       score_tol=1e-10):
    """Whether a selection is locally optimal (its SVM is feasible and has no
    :func:`violations`).

    Parameters
    ----------
    data : AttentionData
        Needs ``Y`` and ``v`` (the scores); ``z`` for ``param="W"``.
    alpha : int tensor (n,) or (B,n)
    norm : {"fro", "nuc"} or float lp > 1
        The SVM's norm: Frobenius (W), nuclear ((K,Q)), entrywise lp (mirror descent).
    param : {"W", "p"}
        ``"W"``: Att-SVM for the key-query matrix (queries ``data.z``); ``"p"``: the p-SVM of
        the prompt model with ``W`` fixed (default identity).
    W : tensor (d,d), optional
        The fixed key-query matrix of the prompt model.
    mask : bool tensor (n,T), optional
        Visible tokens.
    tol, score_tol : float
        As in :func:`violations`.

    Returns
    -------
    bool, or bool tensor (B,) for batched data (all trials solved in one call).

    An SVM that can be neither certified nor confirmed infeasible raises
    ``attnlib.svm.UncertifiedError``: the verdict is unknown, so none is given (a confirmed
    infeasible SVM is a verdict: not locally optimal).

    See chapter 3, *Local versus global optimality*.
    """
    _check(data, param, tol, score_tol)
    X, _ = token_inputs(data, need_z=False)
    alpha = as_selection(alpha, X)
    local = _local(data, alpha, norm, param, W, as_mask(mask, X), tol, score_tol)[1]
    return bool(local) if X.ndim == 3 else local


class Selections(NamedTuple):
    """Every selection of a small instance with its labels (see :func:`enumerate_selections`).

    Attributes
    ----------
    alpha : long tensor (K, n)
        All :math:`K = T^n` selections, in lexicographic order.
    feasible : bool tensor (K,)
        The SVM of the selection is feasible.
    locally_optimal : bool tensor (K,)
    globally_optimal : bool tensor (K,)
        The selection is the optimal tokens.
    """

    alpha: torch.Tensor
    feasible: torch.Tensor
    locally_optimal: torch.Tensor
    globally_optimal: torch.Tensor


def enumerate_selections(data, norm="fro", *, param="W", W=None, mask=None, tol=1e-6,
                         score_tol=1e-10, max_selections=4096) -> Selections:
    """All :math:`T^n` selections of a small instance, labelled feasible / locally optimal.

    Parameters
    ----------
    data : AttentionData (unbatched)
    norm, param, W, mask, tol, score_tol
        As in :func:`is_locally_optimal`.
    max_selections : int
        Refuse instances with more than this many selections.

    Returns
    -------
    Selections

    As in :func:`is_locally_optimal`, ``attnlib.svm.UncertifiedError`` is raised rather than
    a selection labelled without a certified SVM.

    See chapter 3, *Local versus global optimality*.
    """
    _check(data, param, tol, score_tol)
    X, _ = token_inputs(data, need_z=False)
    if X.ndim != 3:
        raise ValueError("data: enumerate_selections needs unbatched data (n,T,d)")
    n, T = X.shape[-3], X.shape[-2]
    if T**n > max_selections:
        raise ValueError(f"data: T^n = {T}^{n} = {T**n} selections exceed max_selections="
                         f"{max_selections}")
    m = as_mask(mask, X)
    alphas = torch.tensor(list(itertools.product(range(T), repeat=n)), dtype=torch.long,
                          device=X.device)
    opt = optimal_tokens(data, mask=m)
    feas, loc = [], []
    for a in alphas:  # one SVM solve per selection (tiny instances only)
        if m is not None and not bool(m[torch.arange(n, device=X.device), a].all()):
            feas.append(False)
            loc.append(False)
            continue
        f, lo = _local(data, a, norm, param, W, m, tol, score_tol)
        feas.append(bool(f))
        loc.append(bool(lo))
    return Selections(alphas, torch.tensor(feas, device=X.device),
                      torch.tensor(loc, device=X.device), (alphas == opt).all(-1))
