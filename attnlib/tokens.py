"""Token analysis: scores, optimal, selected and support tokens, local optimality, sets O_i.

For a fixed linear head :math:`v` the output of attention is a softmax-weighted average of the
token scores :math:`\\gamma_{it} = Y_i v^\\top x_{it}` (chapter 1, *Attention as token selection*):

.. math:: Y_i f(X_i) = \\sum_t s_{it}\\,\\gamma_{it}, \\qquad s_i = \\mathrm{softmax}(X_i W z_i).

Everything here is a pure tensor function of the data and works with a leading trials
dimension ``B``. :func:`is_locally_optimal` and :func:`enumerate_selections` solve SVMs and so
call :mod:`attnlib.svm` (imported inside them: svm sits above tokens).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import torch

from attnlib.data import as_tensor
from attnlib.models import logits, logits_prompt

__all__ = [
    "scores",
    "optimal_tokens",
    "attention_logits",
    "selected_tokens",
    "token_margins",
    "support_tokens",
    "is_locally_optimal",
    "Selections",
    "enumerate_selections",
    "selected_sets",
    "cleanly_masked",
]


# ----------------------------------------------------------------------------- input helpers
def _field(data, name):
    """``data.<name>`` for an AttentionData (or any object with the attribute), else ``None``."""
    return getattr(data, name, None)


def _tokens(data_or_X, z=None, *, need_z=True, dtype=None):
    """Tokens ``X`` (..., n, T, d) and queries ``z`` (..., n, d) as float tensors.

    ``data_or_X`` is an :class:`~attnlib.data.AttentionData` (or any object with ``.X``) or a
    raw tensor/array ``X``; an explicit ``z`` overrides ``data.z``.
    """
    if hasattr(data_or_X, "X"):
        X = as_tensor(data_or_X.X, "data.X", dtype=dtype)
        if z is None:
            z = _field(data_or_X, "z")
    else:
        X = as_tensor(data_or_X, "X", dtype=dtype)
    if X.ndim not in (3, 4):
        raise ValueError(f"X: expected shape (n,T,d) or (B,n,T,d), got {tuple(X.shape)}")
    if z is None:
        if need_z:
            raise ValueError("z: the query tokens are needed (pass z=, or data with data.z; "
                             "self-attention uses z = X[..., 0, :])")
        return X, None
    z = as_tensor(z, "z", dtype=X.dtype, device=X.device)
    n, d = X.shape[-3], X.shape[-1]
    if z.shape[-2:] != (n, d) or z.ndim not in (2, X.ndim - 1):
        raise ValueError(f"z: expected shape (n,d)=({n},{d}) (optionally with the trials "
                         f"dimension of X), got {tuple(z.shape)}")
    return X, z


def _alpha(alpha, X, name="alpha"):
    """Validate a selection: integer tensor (n,) or (B,n) with entries in [0, T)."""
    n, T = X.shape[-3], X.shape[-2]
    a = torch.as_tensor(alpha, device=X.device)
    if a.is_floating_point():
        if not bool((a == a.round()).all()):
            raise ValueError(f"{name}: expected integer token indices, got {a.tolist()}")
        a = a.long()
    if a.dtype == torch.bool or a.is_complex():
        raise ValueError(f"{name}: expected integer token indices, got dtype {a.dtype}")
    a = a.long()
    if a.shape[-1:] != (n,) or a.ndim > X.ndim - 2:
        raise ValueError(f"{name}: expected shape (n,)=({n},) or (B,n), got {tuple(a.shape)}")
    if bool(((a < 0) | (a >= T)).any()):
        raise ValueError(f"{name}: token indices must lie in [0, T) = [0, {T}) (0-based), "
                         f"got {a.tolist()}")
    return a


def _mask(mask, X):
    """Validate a visibility mask: bool (n,T) or (B,n,T); ``None`` means every token visible."""
    if mask is None:
        return None
    m = torch.as_tensor(mask, device=X.device)
    if m.dtype != torch.bool:
        if not bool(((m == 0) | (m == 1)).all()):
            raise ValueError("mask: expected booleans (True = visible token)")
        m = m.bool()
    n, T = X.shape[-3], X.shape[-2]
    if m.shape[-2:] != (n, T) or m.ndim > X.ndim - 1:
        raise ValueError(f"mask: expected shape (n,T)=({n},{T}) or (B,n,T), "
                         f"got {tuple(m.shape)}")
    if not bool(m.any(-1).all()):
        raise ValueError("mask: every input needs at least one visible token")
    return m


def _take(x, alpha):
    """``x[..., i, alpha_i]`` for x (..., n, T) and alpha (..., n) (broadcast)."""
    shape = torch.broadcast_shapes(x.shape[:-1], alpha.shape)
    return torch.gather(x.expand(*shape, x.shape[-1]), -1,
                        alpha.expand(shape).unsqueeze(-1)).squeeze(-1)


# ----------------------------------------------------------------------------- scores
def scores(data) -> torch.Tensor:
    """Token scores :math:`\\gamma_{it} = Y_i\\, v^\\top x_{it}`.

    Parameters
    ----------
    data : AttentionData
        Needs ``Y`` and the head ``v``.

    Returns
    -------
    gamma : tensor (n,T) or (B,n,T)

    See chapter 1, *Attention as token selection*.
    """
    X, _ = _tokens(data, need_z=False)
    Y, v = _field(data, "Y"), _field(data, "v")
    if Y is None or v is None:
        raise ValueError("data: the token scores need the labels Y and the head v (data.v is "
                         "None)")
    Y = as_tensor(Y, "data.Y", dtype=X.dtype, device=X.device)
    v = as_tensor(v, "data.v", dtype=X.dtype, device=X.device)
    g = (X @ v.unsqueeze(-2).unsqueeze(-1)).squeeze(-1)  # (..., n, T): v^T x_it
    return Y.unsqueeze(-1) * g


def optimal_tokens(data, mask=None) -> torch.Tensor:
    """The optimal tokens :math:`\\mathrm{opt}_i = \\arg\\max_t \\gamma_{it}` (0-based).

    Parameters
    ----------
    data : AttentionData
    mask : bool tensor (n,T) or (B,n,T), optional
        Visible tokens; the argmax runs over visible tokens only.

    Returns
    -------
    alpha : long tensor (n,) or (B,n)

    See chapter 1.
    """
    gamma = scores(data)
    m = _mask(mask, gamma.unsqueeze(-1))
    if m is not None:
        gamma = gamma.masked_fill(~m, -math.inf)
    return gamma.argmax(-1)


# ----------------------------------------------------------------------------- attention
def attention_logits(data_or_X, W=None, *, p=None, z=None) -> torch.Tensor:
    """Attention logits :math:`a_{it} = x_{it}^\\top W z_i`, or :math:`x_{it}^\\top W p`.

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
    W : tensor (d,d) or (B,d,d), optional
        Key-query matrix; with ``p`` it is the fixed matrix of the prompt model (default
        identity).
    p : tensor (d,) or (B,d), optional
        Prompt token (the prompt model, :math:`z_i = p` for every i).
    z : tensor (n,d) or (B,n,d), optional
        Queries, overriding ``data.z``.

    Returns
    -------
    a : tensor (n,T) or (B,n,T)
    """
    X, z = _tokens(data_or_X, z, need_z=p is None)
    d = X.shape[-1]
    if W is not None:
        W = as_tensor(W, "W", dtype=X.dtype, device=X.device)
        if W.shape[-2:] != (d, d) or W.ndim not in (2, 3):
            raise ValueError(f"W: expected shape (d,d)=({d},{d}) or (B,d,d), "
                             f"got {tuple(W.shape)}")
    if p is not None:
        p = as_tensor(p, "p", dtype=X.dtype, device=X.device)
        if p.shape[-1:] != (d,) or p.ndim not in (1, 2):
            raise ValueError(f"p: expected shape (d,)=({d},) or (B,d), got {tuple(p.shape)}")
        if W is None:
            return (X @ p.unsqueeze(-2).unsqueeze(-1)).squeeze(-1)  # (..., n, T): x_it^T p
        return logits_prompt(X, W, p)
    if W is None:
        raise ValueError("W: give the key-query matrix W (or the prompt p=)")
    return logits(X, W, z)  # (..., n, T)


def selected_tokens(data_or_X, W=None, *, p=None, z=None, mask=None) -> torch.Tensor:
    """Tokens the attention selects, :math:`\\arg\\max_t \\mathrm{softmax}(a_i)_t`.

    The argmax of the softmax is the argmax of the logits :math:`a_{it}`.

    Parameters
    ----------
    data_or_X, W, p, z
        As in :func:`attention_logits`: logits :math:`x_{it}^\\top W z_i` (W model) or
        :math:`x_{it}^\\top W p` (prompt model, ``p=``).
    mask : bool tensor (n,T) or (B,n,T), optional
        Visible tokens (e.g. a causal mask); invisible tokens are never selected.

    Returns
    -------
    alpha : long tensor (n,) or (B,n)

    See chapter 3, *Local versus global optimality*.
    """
    a = attention_logits(data_or_X, W, p=p, z=z)
    m = _mask(mask, a.unsqueeze(-1))
    if m is not None:
        a = a.masked_fill(~m, -math.inf)
    return a.argmax(-1)


def token_margins(data_or_X, W, alpha, *, z=None) -> torch.Tensor:
    """Logit margins :math:`(x_{i\\alpha_i} - x_{it})^\\top W z_i` of every token.

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
    W : tensor (d,d) or (B,d,d)
    alpha : int tensor (n,) or (B,n)
    z : tensor (n,d) or (B,n,d), optional

    Returns
    -------
    margins : tensor (n,T) or (B,n,T); 0 at the selected token.
    """
    a = attention_logits(data_or_X, W, z=z)
    X, _ = _tokens(data_or_X, z, need_z=False)
    alpha = _alpha(alpha, X)
    return _take(a, alpha).unsqueeze(-1) - a


def support_tokens(data_or_X, W_mm, alpha, *, z=None, mask=None, tol=1e-6) -> torch.Tensor:
    """Support tokens :math:`\\mathcal T_i(\\alpha)`: the active margin constraints of an SVM.

    .. math::

        \\mathcal T_i(\\alpha) = \\{\\, t \\ne \\alpha_i :
            (x_{i\\alpha_i} - x_{it})^\\top W^{mm}_\\alpha z_i = 1 \\,\\}

    The margins are divided by their minimum over visible tokens (1 for an SVM solution), so a
    trained direction ``W`` can be passed as well; a token is a support token when its margin
    is within ``1 + tol``.

    Parameters
    ----------
    data_or_X : AttentionData or tensor (n,T,d) / (B,n,T,d)
    W_mm : tensor (d,d) or (B,d,d)
        The SVM solution for ``alpha`` (any norm).
    alpha : int tensor (n,) or (B,n)
    z : tensor, optional
        Queries overriding ``data.z``.
    mask : bool tensor (n,T) or (B,n,T), optional
        Visible tokens; invisible ones are never support tokens.
    tol : float
        Relative tolerance on "= 1".

    Returns
    -------
    support : bool tensor (n,T) or (B,n,T)

    See chapter 3, *Local versus global optimality*.
    """
    if not tol >= 0:
        raise ValueError(f"tol: expected a number >= 0, got {tol!r}")
    marg = token_margins(data_or_X, W_mm, alpha, z=z)  # (..., n, T)
    X, _ = _tokens(data_or_X, z, need_z=False)
    alpha = _alpha(alpha, X)
    other = torch.ones_like(marg, dtype=torch.bool)
    other = other.scatter(-1, alpha.expand(marg.shape[:-1]).unsqueeze(-1), False)
    m = _mask(mask, X)
    if m is not None:
        other = other & m
    big = torch.full_like(marg, math.inf)
    low = torch.where(other, marg, big).amin(dim=(-2, -1), keepdim=True)  # min margin
    if not bool((low > 0).all()):
        raise ValueError("W_mm: some margin is <= 0, so W_mm does not select alpha; pass the "
                         "SVM solution for this selection")
    return other & (marg <= low * (1 + tol))


# ----------------------------------------------------------------------------- local optimality
def _local(data, alpha, norm, param, W, mask, tol, score_tol):
    """(feasible, locally optimal) as bool tensors of the trials' shape, () or (B,).

    All trials are solved in one call; if one is infeasible, trial by trial.
    """
    from attnlib import svm  # svm sits above tokens in the layering

    X = data.X
    try:
        if param == "W":
            W_mm = svm.att_svm(data, alpha=alpha, norm=norm, mask=mask)
            sup = support_tokens(data, W_mm, alpha, mask=mask, tol=tol)
        else:  # prompt model: queries z_i = p^mm for every i, W fixed
            p_mm = svm.prompt_svm(data, alpha=alpha, W=W, norm=norm, mask=mask)
            Wf = torch.eye(X.shape[-1], dtype=X.dtype, device=X.device) if W is None else W
            z = p_mm.unsqueeze(-2).expand(*p_mm.shape[:-1], X.shape[-3], X.shape[-1])
            sup = support_tokens(X, Wf, alpha, z=z, mask=mask, tol=tol)
    except svm.InfeasibleError:
        if X.ndim == 3:
            return torch.tensor(False), torch.tensor(False)
        B = X.shape[0]
        one = [_local(data.trial(b), alpha.expand(B, -1)[b], norm, param,
                      W if W is None or torch.as_tensor(W).ndim == 2 else W[b],
                      None if mask is None else mask.expand(B, *mask.shape[-2:])[b], tol,
                      score_tol) for b in range(B)]  # one solve per trial
        return torch.stack([f for f, _ in one]), torch.stack([lo for _, lo in one])
    gamma = scores(data)  # (..., n, T)
    best = _take(gamma, alpha).unsqueeze(-1)  # (..., n, 1)
    ok = (~sup | (gamma < best - score_tol)).flatten(-2).all(-1)  # every support scores lower
    return torch.ones_like(ok), ok.cpu()


def is_locally_optimal(data, alpha, norm="fro", *, param="W", W=None, mask=None, tol=1e-6,
                       score_tol=1e-10):
    """Whether a selection is locally optimal.

    :math:`\\alpha` is locally optimal when its SVM is feasible and every support token scores
    strictly below the selected token:

    .. math::

        \\gamma_{i\\alpha_i} > \\gamma_{it}
        \\quad \\text{for all } t \\in \\mathcal T_i(\\alpha),\\ i \\in [n].

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
    tol : float
        Relative tolerance for a constraint to count as active.
    score_tol : float
        Scores closer than this count as equal (a tie fails the strict inequality).

    Returns
    -------
    bool, or bool tensor (B,) for batched data (all trials solved in one call).

    See chapter 3, *Local versus global optimality*.
    """
    if param not in ("W", "p"):
        raise ValueError(f"param: expected 'W' or 'p', got {param!r}")
    X, _ = _tokens(data, need_z=False)
    alpha = _alpha(alpha, X)
    local = _local(data, alpha, norm, param, W, _mask(mask, X), tol, score_tol)[1]
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

    See chapter 3, *Local versus global optimality*.
    """
    X, _ = _tokens(data, need_z=False)
    if X.ndim != 3:
        raise ValueError("data: enumerate_selections needs unbatched data (n,T,d)")
    n, T = X.shape[-3], X.shape[-2]
    if T**n > max_selections:
        raise ValueError(f"data: T^n = {T}^{n} = {T**n} selections exceed max_selections="
                         f"{max_selections}")
    m = _mask(mask, X)
    alphas = torch.tensor(list(itertools.product(range(T), repeat=n)), dtype=torch.long)
    opt = optimal_tokens(data, mask=m).cpu()
    feas, loc = [], []
    for a in alphas:  # one SVM solve per selection
        if m is not None and not bool(m.cpu()[torch.arange(n), a].all()):
            feas.append(False)
            loc.append(False)
            continue
        f, lo = _local(data, a.to(X.device), norm, param, W, m, tol, score_tol)
        feas.append(bool(f))
        loc.append(bool(lo))
    return Selections(alphas, torch.tensor(feas), torch.tensor(loc),
                      (alphas == opt).all(-1))


# ----------------------------------------------------------------------------- sets O_i
def _probs(s):
    s = as_tensor(s, "s", dtype=torch.float64 if not torch.is_tensor(s) else None)
    if s.ndim < 2:
        raise ValueError(f"s: expected softmax probabilities (n,T) or (B,n,T), "
                         f"got {tuple(s.shape)}")
    if bool((s < 0).any()) or bool((s > 1 + 1e-6).any()):
        raise ValueError("s: expected probabilities in [0, 1]")
    return s


def selected_sets(s, threshold=1e-3) -> torch.Tensor:
    """Selected sets :math:`\\mathcal O_i = \\{t : s_{it} > \\text{threshold}\\}` (nonlinear heads).

    The tokens that keep attention as :math:`\\|W\\| \\to \\infty`; the rest,
    :math:`\\bar{\\mathcal O}_i`, are masked. With :math:`|\\mathcal O_i| = 1` for every i this
    is a selection :math:`\\alpha`.

    Parameters
    ----------
    s : tensor (n,T) or (B,n,T)
        Final softmax probabilities.
    threshold : float
        1e-3 in the TF-SVM paper's experiment (E4).

    Returns
    -------
    O : bool tensor like ``s``

    See chapter 7, *Nonlinear heads*.
    """
    if not 0 < threshold < 1:
        raise ValueError(f"threshold: expected a number in (0, 1), got {threshold!r}")
    return _probs(s) > threshold


def cleanly_masked(s, threshold=1e-3, masked=1e-6) -> torch.Tensor:
    """Whether a run separates cleanly (the acceptance filter of the TF-SVM paper's E4).

    Accepted when no probability lies in ``(masked, threshold]`` (no ambiguous token) and at
    least one token is masked (:math:`s_{it} \\le` ``masked``), over the whole data set.

    Parameters
    ----------
    s : tensor (n,T) or (B,n,T)
    threshold, masked : float
        1e-3 and 1e-6 in the paper.

    Returns
    -------
    bool tensor () or (B,)

    See chapter 7, *Nonlinear heads*.
    """
    if not 0 < masked < threshold < 1:
        raise ValueError(f"masked, threshold: expected 0 < masked < threshold < 1, got "
                         f"{masked!r}, {threshold!r}")
    s = _probs(s)
    ambiguous = ((s > masked) & (s <= threshold)).flatten(-2).any(-1)
    some_masked = (s <= masked).flatten(-2).any(-1)
    return ~ambiguous & some_masked
