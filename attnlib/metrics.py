"""Metrics: correlation, lp norms, Bregman divergences, numerical rank, sparsity, max probability.

Every function is batched over leading dimensions and accepts tensors, numpy arrays and
numpy/torch scalars. Scale-sensitive sums are computed on inputs rescaled by a power of two
(exact in floating point), so the results do not overflow or underflow for entries anywhere
between 1e-20 and 1e20, in float32 as in float64. NaN in gives NaN out, never a silent 0.
"""

from __future__ import annotations

import numpy as np
import torch

from attnlib._validate import choice, number

__all__ = ["correlation", "bregman", "bregman_direction", "numerical_rank", "max_prob",
           "lp_norm", "sparsity", "bregman_divergence", "directional_bregman"]


def _as(x):
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x, dtype=torch.float64)
    return t if t.is_floating_point() else t.to(torch.float64)


def _pow2_scale(A, ax):
    """A power of two near ``max|A|`` over ``ax`` (keepdim): the entries of ``A`` divided by it
    lie in [-2, 2]; 1/2 where the max is 0, NaN or Inf. Dividing by a power of two is exact, so
    it changes no digit of a scale-free ratio. (``2**(e-1)`` with ``max|A| < 2**e`` stays finite
    up to the dtype's largest number.)"""
    m = A.abs().amax(ax, keepdim=True)
    _, e = torch.frexp(torch.where(torch.isfinite(m), m, torch.ones_like(m)))  # frexp(0): e=0
    return torch.ldexp(torch.ones_like(m), e - 1)


def _dims(A, B, dims):
    if dims is None:
        square = (A.ndim >= 2 and B.ndim >= 2 and A.shape[-1] == A.shape[-2]
                  and B.shape[-1] == B.shape[-2])
        dims = 2 if square else 1
    if dims not in (1, 2):
        raise ValueError(f"dims: expected 1 (vectors), 2 (matrices) or None, got {dims!r}")
    if A.ndim < dims or A.shape[-dims:] != B.shape[-dims:]:  # (then B.ndim >= dims too)
        raise ValueError(f"A, B: expected the same last {dims} dims, got {tuple(A.shape)} and "
                         f"{tuple(B.shape)}")
    return tuple(range(-dims, 0))


def correlation(A, B, dims=None) -> torch.Tensor:
    """Correlation coefficient :math:`\\langle A,B\\rangle/(\\|A\\|\\,\\|B\\|)` (Frobenius).

    Batched over the leading dimensions (broadcast). ``dims`` says how many trailing dimensions
    form one object: 1 for vectors (``p``, ``v``), 2 for matrices (``W``). By default (``None``)
    the objects are matrices when both arguments end in square (d, d) dimensions and vectors
    otherwise; pass ``dims`` for non-square matrices (``K``) or batched vectors whose batch size
    equals d.

    Scale invariant: each object is divided by the power of two above its largest entry before
    the products (exact, so ordinary inputs give the same digits as the plain formula), and
    ``correlation(1e20 * A, A)`` is 1 in float32 too. A zero argument gives 0; NaN (or Inf) in
    an object gives NaN. Batch dimensions that do not broadcast, or empty objects, raise
    ``ValueError``.

    Examples
    --------
    ``correlation(result.history["W"], W_mm)``: (B, S) curves against one SVM solution.

    See chapter 2, *The Att-SVM and gradient descent*.
    """
    A, B = _as(A), _as(B)
    A, B = A.reshape(1) if A.ndim == 0 else A, B.reshape(1) if B.ndim == 0 else B
    ax = _dims(A, B, dims)
    try:
        np.broadcast_shapes(tuple(A.shape), tuple(B.shape))  # (torch's imports sympy)
    except ValueError:
        raise ValueError(f"A, B: expected batch dimensions that broadcast, got {tuple(A.shape)} "
                         f"and {tuple(B.shape)}") from None
    if any(A.shape[a] == 0 for a in ax):
        raise ValueError(f"A, B: expected non-empty objects, got shape {tuple(A.shape)}")
    A, B = A / _pow2_scale(A, ax), B / _pow2_scale(B, ax)
    num = (A * B).sum(ax)
    den = torch.sqrt((A * A).sum(ax)) * torch.sqrt((B * B).sum(ax))
    zero = den == 0  # a zero argument (NaN compares False and stays NaN)
    return torch.where(zero, torch.zeros_like(num), num / den)


def lp_norm(A, lp: float, dims=None) -> torch.Tensor:
    """Entrywise :math:`\\|A\\|_p = (\\sum_{jk}|A_{jk}|^p)^{1/p}` over the trailing ``dims``.

    Computed as :math:`m\\,\\|A/m\\|_p` with :math:`m=\\max|A_{jk}|`, so no power overflows or
    underflows. ``dims`` as in :func:`correlation`; ``lp`` >= 1. NaN in gives NaN, an infinite
    entry gives Inf. See chapter 9, *Mirror descent selects tokens too*.
    """
    lp = number("lp", lp, lo=1)
    A = _as(A)
    ax = _dims(A, A, dims)
    m0 = A.abs().amax(ax, keepdim=True)
    m = torch.where(m0 > 0, m0, torch.ones_like(m0))
    out = (A / m).abs().pow(lp).sum(ax).pow(1.0 / lp) * m.reshape(m.shape[:m.ndim - len(ax)])
    m0 = m0.reshape(out.shape)
    return torch.where(torch.isinf(m0), m0, out)


def sparsity(W, rel: float, dims: int = 2) -> torch.Tensor:
    """Fraction of near-zero entries, per object.

    .. math::

        \\mathrm{sparsity}(W) = \\#\\{jk: |W_{jk}| < \\mathrm{rel}\\max|W|\\} / \\#\\{jk\\}

    Per object over the trailing ``dims`` (2: matrices, 1: vectors), batched over the leading
    ones. A relative threshold, so the result does not depend on the scale of W; a zero matrix
    has no near-zero entries by this definition (0). NaN in an object gives NaN.
    See chapter 10, *Real data*.
    """
    rel = number("rel", rel, lo=0)
    dims = choice("dims", dims, (1, 2))
    W = _as(W)
    ax = _dims(W, W, dims)
    A = W.abs()
    frac = (A < rel * A.amax(ax, keepdim=True)).to(W.dtype).mean(ax)
    return torch.where(torch.isnan(W).any(ax), torch.nan, frac)


def _check_lp(lp):
    return number("lp", lp, lo=1, lo_open=True)


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
    absolute accuracy. The ranks are float64 (integer values); a matrix with a NaN or Inf entry
    has rank NaN (the other matrices of a batch keep theirs). See chapter 5, *W versus (K, Q)*.
    """
    W = _as(W)
    if W.ndim < 2:
        raise ValueError(f"W: expected a matrix (..., d, d), got shape {tuple(W.shape)}")
    rtol = number("rtol", rtol, lo=0, lo_open=True)
    bad = ~torch.isfinite(W).flatten(-2).all(-1)  # (...,)
    sv = torch.linalg.svdvals(torch.where(bad[..., None, None], torch.zeros_like(W), W))
    top = sv[..., :1]
    rank = (sv > rtol * top).sum(-1).to(torch.float64)  # a zero matrix: rank 0 (0 > 0 is false)
    return torch.where(bad, torch.full_like(rank, float("nan")), rank)


def max_prob(s, reduce: str = "mean") -> torch.Tensor:
    """Largest softmax probability per input, :math:`\\max_t s_{it}`, reduced over inputs.

    ``s``: (..., n, T) attention probabilities. ``reduce``: "mean" (the papers' "softmax
    probability"), "min" or "none" (shape (..., n)).
    """
    s = _as(s)
    if s.ndim < 2:
        raise ValueError(f"s: expected shape (..., n, T), got {tuple(s.shape)}")
    reduce = choice("reduce", reduce, ("mean", "min", "none"))
    m = s.amax(-1)  # (..., n)
    if reduce == "mean":
        return m.mean(-1)
    if reduce == "min":
        return m.amin(-1)
    return m


# the names used by the mirror-descent experiments
bregman_divergence = bregman
directional_bregman = bregman_direction
