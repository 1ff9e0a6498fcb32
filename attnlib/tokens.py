"""Token analysis: scores, optimal, selected and support tokens, local optimality, sets O_i.

For a fixed linear head :math:`v` the output of attention is a softmax-weighted average of the
token scores :math:`\\gamma_{it} = Y_i v^\\top x_{it}` (chapter 1, *Attention as token selection*):

.. math:: Y_i f(X_i) = \\sum_t s_{it}\\,\\gamma_{it}, \\qquad s_i = \\mathrm{softmax}(X_i W z_i).

Everything here is a pure tensor function of the data and works with a leading trials
dimension ``B``; nothing here solves an SVM (local optimality, which does, lives in
:mod:`attnlib.optimality`). The input helpers :func:`token_inputs`, :func:`as_selection` and
:func:`as_mask` validate the arguments every token-level function shares (also used by
:mod:`attnlib.svm` and :mod:`attnlib.optimality`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attnlib._validate import as_tensor
from attnlib.models import logits, logits_prompt

__all__ = [
    "token_inputs",
    "as_selection",
    "as_mask",
    "bool_mask",
    "scores",
    "optimal_tokens",
    "attention_logits",
    "selected_tokens",
    "token_margins",
    "support_tokens",
    "selected_sets",
    "cleanly_masked",
]


# ----------------------------------------------------------------------------- input helpers
def _field(data, name):
    """``data.<name>`` for an AttentionData (or any object with the attribute), else ``None``."""
    return getattr(data, name, None)


def token_inputs(data_or_X, z=None, *, need_z=True, dtype=None):
    """Tokens ``X`` (..., n, T, d) and queries ``z`` (..., n, d) as float tensors.

    Parameters
    ----------
    data_or_X : AttentionData (or any object with ``.X``) or tensor/array (n,T,d) / (B,n,T,d)
    z : tensor (n,d) or (B,n,d), optional
        Overrides ``data.z``.
    need_z : bool
        Raise ``ValueError`` when there are no queries (else ``z`` comes back ``None``).
    dtype : torch dtype, optional

    Returns
    -------
    X : tensor (n,T,d) or (B,n,T,d)
    z : tensor (n,d) or (B,n,d), or None

    Raises
    ------
    ValueError
        Naming ``X`` or ``z`` and the expected shape.
    """
    if hasattr(data_or_X, "X"):
        X = as_tensor(data_or_X.X, "data.X", dtype=dtype)
        if z is None:
            z = _field(data_or_X, "z")
    else:
        X = as_tensor(data_or_X, "X", dtype=dtype)
    if X.ndim not in (3, 4):
        raise ValueError(f"X: expected shape (n,T,d) or (B,n,T,d), got {tuple(X.shape)}")
    if X.numel() == 0:
        raise ValueError(f"X: expected at least one input, token and dimension (n,T,d >= 1), "
                         f"got shape {tuple(X.shape)}")
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


def as_selection(alpha, X, name="alpha"):
    """A selection as a long tensor (n,) or (B,n) with entries in [0, T), checked against X.

    Parameters
    ----------
    alpha : int array/tensor (n,) or (B,n)
        0-based token indices (integral floats are accepted).
    X : tensor (n,T,d) or (B,n,T,d)
    name : str
        Argument name for the error message.

    Raises
    ------
    ValueError
        On a wrong shape, dtype or an index outside [0, T).
    """
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


def bool_mask(mask, device=None) -> torch.Tensor:
    """A mask's values as a bool tensor: booleans, or numbers that are exactly 0 or 1.

    The value check of every mask (:func:`as_mask`, :func:`attnlib.train`); shapes are checked
    by the caller, which knows the data.

    Raises
    ------
    ValueError
        Any other value (0.5 is not "visible").
    """
    m = torch.as_tensor(mask, device=device)
    if m.dtype != torch.bool:
        if not bool(((m == 0) | (m == 1)).all()):
            raise ValueError("mask: expected booleans (True = visible token)")
        m = m.bool()
    return m


def as_mask(mask, X):
    """A visibility mask as a bool tensor (n,T) or (B,n,T); ``None`` stays ``None`` (every
    token visible).

    Parameters
    ----------
    mask : bool or 0/1 array/tensor (n,T) or (B,n,T), or None
    X : tensor (n,T,d) or (B,n,T,d)

    Raises
    ------
    ValueError
        On non-boolean values, a wrong shape, or an input with no visible token.
    """
    if mask is None:
        return None
    m = bool_mask(mask, X.device)
    n, T = X.shape[-3], X.shape[-2]
    if m.shape[-2:] != (n, T) or m.ndim > X.ndim - 1:
        raise ValueError(f"mask: expected shape (n,T)=({n},{T}) or (B,n,T), "
                         f"got {tuple(m.shape)}")
    if not bool(m.any(-1).all()):
        raise ValueError("mask: every input needs at least one visible token")
    return m


def _take(x, alpha):
    """``x[..., i, alpha_i]`` for x (..., n, T) and alpha (..., n) (broadcast)."""
    # (numpy's broadcast rule: torch.broadcast_shapes imports sympy on first use, 0.3-0.5 s)
    shape = np.broadcast_shapes(tuple(x.shape[:-1]), tuple(alpha.shape))
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
    X, _ = token_inputs(data, need_z=False)
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
    m = as_mask(mask, gamma.unsqueeze(-1))
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
    X, z = token_inputs(data_or_X, z, need_z=p is None)
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
    m = as_mask(mask, a.unsqueeze(-1))
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
    X, _ = token_inputs(data_or_X, z, need_z=False)
    alpha = as_selection(alpha, X)
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
    X, _ = token_inputs(data_or_X, z, need_z=False)
    alpha = as_selection(alpha, X)
    other = torch.ones_like(marg, dtype=torch.bool)
    other = other.scatter(-1, alpha.expand(marg.shape[:-1]).unsqueeze(-1), False)
    m = as_mask(mask, X)
    if m is not None:
        other = other & m
    big = torch.full_like(marg, math.inf)
    low = torch.where(other, marg, big).amin(dim=(-2, -1), keepdim=True)  # min margin
    if not bool((low > 0).all()):
        raise ValueError("W_mm: some margin is <= 0, so W_mm does not select alpha; pass the "
                         "SVM solution for this selection")
    return other & (marg <= low * (1 + tol))


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

