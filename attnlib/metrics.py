"""Metrics: correlation, directional Bregman divergence, numerical rank, max softmax probability.

Depends on nothing but torch. Every function is batched over leading dimensions.
"""

from __future__ import annotations

import torch

__all__ = ["correlation", "bregman", "bregman_direction", "numerical_rank", "max_prob",
           "lp_norm", "bregman_divergence", "directional_bregman"]


def _as(x):
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(x, dtype=torch.float64)


def _dims(A, B, dims):
    if dims is None:
        square = (A.ndim >= 2 and B.ndim >= 2 and A.shape[-1] == A.shape[-2]
                  and B.shape[-1] == B.shape[-2])
        dims = 2 if square else 1
    if dims not in (1, 2):
        raise ValueError(f"dims: expected 1 (vectors), 2 (matrices) or None, got {dims!r}")
    if A.ndim < dims or B.ndim < dims or A.shape[-dims:] != B.shape[-dims:]:
        raise ValueError(f"A, B: the last {dims} dims must agree, got {tuple(A.shape)} and "
                         f"{tuple(B.shape)}")
    return tuple(range(-dims, 0))


def correlation(A, B, dims=None) -> torch.Tensor:
    """Correlation coefficient :math:`\\langle A,B\\rangle/(\\|A\\|\\,\\|B\\|)` (Frobenius).

    Batched over the leading dimensions (broadcast). ``dims`` says how many trailing dimensions
    form one object: 1 for vectors (``p``, ``v``), 2 for matrices (``W``). By default (``None``)
    the objects are matrices when both arguments end in square (d, d) dimensions and vectors
    otherwise; pass ``dims`` for non-square matrices (``K``) or batched vectors whose batch size
    equals d. A zero argument gives 0.

    Examples
    --------
    ``correlation(result.history["W"], W_mm)``: (B, S) curves against one SVM solution.

    See chapter 2, *The Att-SVM and gradient descent*.
    """
    A, B = _as(A), _as(B)
    ax = _dims(A, B, dims)
    num = (A * B).sum(ax)
    den = torch.sqrt((A * A).sum(ax)) * torch.sqrt((B * B).sum(ax))
    return torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)),
                       torch.zeros_like(num))


def lp_norm(A, lp: float, dims=None) -> torch.Tensor:
    """Entrywise :math:`\\|A\\|_p = (\\sum_{jk}|A_{jk}|^p)^{1/p}` over the trailing ``dims``."""
    A = _as(A)
    ax = _dims(A, A, dims)
    m = A.abs().amax(ax, keepdim=True)
    m = torch.where(m > 0, m, torch.ones_like(m))
    return (A / m).abs().pow(lp).sum(ax).pow(1.0 / lp) * m.reshape(
        m.shape[:m.ndim - len(ax)])


def _check_lp(lp):
    if not isinstance(lp, (int, float)) or isinstance(lp, bool) or not lp > 1:
        raise ValueError(f"lp: expected a number > 1, got {lp!r}")
    return float(lp)


def bregman(W, V, lp: float = 2.0) -> torch.Tensor:
    """Bregman divergence of the potential :math:`\\psi = \\frac1p\\|\\cdot\\|_p^p` (entrywise).

    .. math::

        D_\\psi(W,V) = \\tfrac1p\\|W\\|_p^p + \\tfrac{p-1}{p}\\|V\\|_p^p
        - \\langle \\mathrm{sign}(V)\\odot|V|^{p-1}, W\\rangle

    The sums run over the last two dimensions when the inputs are at least 2-D, else over the
    last one. See chapter 9, *Mirror descent selects tokens too*.
    """
    lp = _check_lp(lp)
    W, V = _as(W), _as(V)
    ax = (-2, -1) if min(W.ndim, V.ndim) >= 2 else (-1,)
    dual = torch.sign(V) * V.abs().pow(lp - 1)
    return (W.abs().pow(lp).sum(ax) / lp + (lp - 1) / lp * V.abs().pow(lp).sum(ax)
            - (dual * W).sum(ax))


def bregman_direction(A, B, lp: float = 2.0, dims=None) -> torch.Tensor:
    """Directional Bregman divergence :math:`D_\\psi(\\bar A,\\bar B)`, :math:`\\bar X=X/\\|X\\|_p`.

    .. math::

        D_{dir}(A,B) = 1 - \\langle \\mathrm{sign}(\\bar B)\\odot|\\bar B|^{p-1}, \\bar A\\rangle
        \\in [0, 2]

    The mirror-descent paper's metric takes the SVM solution first and the iterate second,
    ``bregman_direction(W_mm, history["W"], lp)``. At p = 2 it equals
    :math:`1-\\mathrm{corr}(A,B)`. ``dims`` as in :func:`correlation`.
    See chapter 9, *Mirror descent selects tokens too*.
    """
    lp = _check_lp(lp)
    A, B = _as(A), _as(B)
    ax = _dims(A, B, dims)
    k = len(ax)

    def unit(X):
        n = lp_norm(X, lp, dims=k)
        n = torch.where(n > 0, n, torch.ones_like(n))
        return X / n.reshape(*n.shape, *[1] * k)

    Au, Bu = unit(A), unit(B)
    return 1 - (torch.sign(Bu) * Bu.abs().pow(lp - 1) * Au).sum(ax)


def numerical_rank(W, rtol: float = 1e-6) -> torch.Tensor:
    """Number of singular values above ``rtol`` times the largest (per matrix, batched).

    A relative tolerance, so the rank does not depend on the scale of W or on the solver's
    absolute accuracy. See chapter 5, *W versus (K, Q)*.
    """
    W = _as(W)
    if W.ndim < 2:
        raise ValueError(f"W: expected a matrix (..., d, d), got shape {tuple(W.shape)}")
    if not rtol > 0:
        raise ValueError(f"rtol: expected a positive number, got {rtol!r}")
    sv = torch.linalg.svdvals(W)
    top = sv[..., :1]
    return ((sv > rtol * top) & (top > 0)).sum(-1)


def max_prob(s, reduce: str = "mean") -> torch.Tensor:
    """Largest softmax probability per input, :math:`\\max_t s_{it}`, reduced over inputs.

    ``s``: (..., n, T) attention probabilities. ``reduce``: "mean" (the papers' "softmax
    probability"), "min" or "none" (shape (..., n)).
    """
    s = _as(s)
    if s.ndim < 2:
        raise ValueError(f"s: expected shape (..., n, T), got {tuple(s.shape)}")
    m = s.amax(-1)
    if reduce == "mean":
        return m.mean(-1)
    if reduce == "min":
        return m.amin(-1)
    if reduce == "none":
        return m
    raise ValueError(f"reduce: expected 'mean', 'min' or 'none', got {reduce!r}")


# the names used by the mirror-descent experiments
bregman_divergence = bregman
directional_bregman = bregman_direction
