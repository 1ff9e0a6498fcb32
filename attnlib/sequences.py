"""Sequence-to-sequence and causal self-attention: every position is a query.

One layer of self-attention with a fixed linear head ``v`` makes one prediction per position
``k`` of sequence ``i``. The query is the token itself, :math:`z = x_{ik}`, and with a causal
(decoder) mask the query sees only the tokens :math:`1..k`:

.. math::

    a_{ikt} = x_{it}^\\top W x_{ik}, \\qquad
    s_{ik} = \\mathrm{softmax}_{t \\le k}(a_{ik\\cdot}), \\qquad
    f_{ik} = \\sum_{t} s_{ikt}\\, v^\\top x_{it},

    L(W) = \\frac{1}{nT} \\sum_{i,k} \\ell(Y_{ik} f_{ik}).

This is cross-attention on the :math:`nT` (sequence, query) pairs with truncated token sets, so
its Att-SVM is :func:`attnlib.svm.sequence_svm` (constraints only over visible tokens).
See chapter 8, "Sequences and causal attention".

Shapes: ``X`` (n,T,d) or (B,n,T,d); ``Y`` (n,T) or (B,n,T), one label per position; ``v`` (d,)
or (B,d); ``W`` (d,d) or (B,d,d). Selections ``alpha`` are (n,T) or (B,n,T): ``alpha[i, k]`` is
the token selected by query ``k`` of sequence ``i``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import models as M
from ._runtime import resolve_device, resolve_dtype
from ._validate import SEED_MAX, as_tensor, flag, labels, number
from .data import AttentionData, TokenData
from .status import RunStatus
from .train import TrainConfig, train

__all__ = [
    "SequenceData",
    "random_sequences",
    "causal_mask",
    "query_pairs",
    "sequence_logits",
    "sequence_softmax",
    "sequence_output",
    "sequence_loss",
    "sequence_grad",
    "sequence_optimal_tokens",
    "sequence_selected_tokens",
    "SequenceTrainResult",
    "train_sequence",
]


@dataclass(frozen=True)
class SequenceData(TokenData):
    """Validated data for sequence self-attention (chapter 8).

    Parameters
    ----------
    X : tensor (n, T, d) or (B, n, T, d)
        Tokens; every position is also a query.
    Y : tensor (n, T) or (B, n, T)
        One label in {-1, +1} per position.
    v : tensor (d,) or (B, d)
        Fixed linear head; token scores are :math:`\\gamma_{ikt} = Y_{ik} v^\\top x_{it}`.

    Sizes (``B``, ``n``, ``T``, ``d``) and :meth:`trial` as for :class:`attnlib.data.AttentionData`.
    """

    X: torch.Tensor
    Y: torch.Tensor
    v: torch.Tensor
    FIELDS = ("X", "Y", "v")

    def __post_init__(self):
        X, Y, v = self.X, self.Y, self.v
        if not (torch.is_tensor(X) and torch.is_tensor(Y) and torch.is_tensor(v)):
            raise ValueError("X, Y, v: expected torch tensors (use SequenceData.of for arrays)")
        if X.dim() not in (3, 4):
            raise ValueError(f"X: expected shape (n,T,d) or (B,n,T,d), got {tuple(X.shape)}")
        batch = X.shape[:-3]
        n, T, d = X.shape[-3:]
        if min(X.shape) < 1:
            raise ValueError(f"X: expected at least one sequence, position and feature "
                             f"(n, T, d >= 1), got shape {tuple(X.shape)}")
        if tuple(Y.shape) != (*batch, n, T):
            raise ValueError(f"Y: expected shape {(*batch, n, T)}, got {tuple(Y.shape)}")
        if tuple(v.shape) != (*batch, d):
            raise ValueError(f"v: expected shape {(*batch, d)}, got {tuple(v.shape)}")
        labels("Y", Y)
        for name, t in (("X", X), ("v", v)):
            if not bool(torch.isfinite(t).all()):
                raise ValueError(f"{name}: contains NaN or Inf")

    @classmethod
    def of(cls, X, Y, v, device=None, dtype=None) -> SequenceData:
        """Build from arrays or tensors, cast to ``dtype`` (float64) on ``device``."""
        device, dtype = resolve_device(device), resolve_dtype(dtype)
        return cls(*(as_tensor(t, name, dtype=dtype, device=device)
                     for t, name in ((X, "X"), (Y, "Y"), (v, "v"))))

    def pairs(self, causal: bool = True):
        """The sequence problem as attention data over its :math:`nT` (sequence, query) pairs.

        Returns ``(AttentionData, mask)``: inputs ``X`` (B?, nT, T, d) (sequence i repeated for
        each of its queries), queries ``z = x_{ik}`` (B?, nT, d), labels ``Y_{ik}`` (B?, nT),
        the head ``v``, and the visibility ``mask`` (nT, T) (causal: query k sees t <= k). This
        is how sequences train through :func:`attnlib.train` (a mask on the logits) and the
        reduction behind the sequence Att-SVM (chapter 8).
        """
        Xp, z, mask = query_pairs(self, causal)
        return AttentionData(Xp, self.Y.flatten(-2), z, self.v), mask


def random_sequences(n: int, T: int, d: int, trials: int | None = None, seed: int = 0,
                     device=None, dtype=None) -> SequenceData:
    """Random sequences following the papers' law (chapter 8).

    Draws, from one ``torch.Generator`` on the CPU (so the data are the same on every device):
    ``v`` standard normal then unit norm; ``Y`` Rademacher, one label per position; tokens
    standard normal, each of unit norm.
    """
    n, T, d = (number(name, val, lo=1, integer=True) for name, val in
               (("n", n), ("T", T), ("d", d)))
    if trials is not None:
        trials = number("trials", trials, lo=1, integer=True)
    seed = number("seed", seed, lo=0, hi=SEED_MAX, integer=True)  # one generator, all trials
    device, dtype = resolve_device(device), resolve_dtype(dtype)
    g = torch.Generator().manual_seed(seed)
    batch = () if trials is None else (int(trials),)
    v = torch.randn(*batch, d, generator=g, dtype=torch.float64)
    v = v / v.norm(dim=-1, keepdim=True)
    Y = 2.0 * (torch.randn(*batch, n, T, generator=g, dtype=torch.float64) > 0) - 1.0
    X = torch.randn(*batch, n, T, d, generator=g, dtype=torch.float64)
    X = X / X.norm(dim=-1, keepdim=True)
    return SequenceData(X.to(device, dtype), Y.to(device, dtype), v.to(device, dtype))


def causal_mask(T: int, causal: bool = True, device=None) -> torch.Tensor:
    """Visibility mask (T, T): ``mask[k, t]`` is True when query ``k`` sees token ``t``.

    Causal attention sees :math:`t \\le k`; full (bidirectional) attention sees every token.
    ``T`` is an int >= 1, ``causal`` a bool.
    """
    T = number("T", T, lo=1, integer=True)
    flag("causal", causal)
    mask = torch.ones(T, T, dtype=torch.bool, device=device)
    return torch.tril(mask) if causal else mask


def query_pairs(data: SequenceData, causal: bool = True):
    """The sequence problem as cross-attention on :math:`nT` (sequence, query) pairs.

    Returns ``X_pairs`` (B?, nT, T, d) (sequence i repeated for each of its queries), ``z``
    (B?, nT, d) (the queries :math:`x_{ik}`) and ``mask`` (nT, T) (visible tokens of each
    pair). Pair ``i*T + k`` is query ``k`` of sequence ``i``. This is the reduction behind the
    sequence Att-SVM of chapter 8.
    """
    X = data.X
    *batch, n, T, d = X.shape
    Xp = X.unsqueeze(-3).expand(*batch, n, T, T, d).reshape(*batch, n * T, T, d)
    z = X.reshape(*batch, n * T, d)
    mask = causal_mask(T, causal, X.device).repeat(n, 1)  # (nT, T)
    return Xp, z, mask


def sequence_logits(X: torch.Tensor, W: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Logits :math:`a_{ikt} = x_{it}^\\top W x_{ik}`, shape (B?, n, T_query, T_key).

    Invisible tokens (:math:`t > k` when causal) get :math:`-\\infty`.
    """
    XW = X @ W.unsqueeze(-3)  # (B?, n, T, d): rows x_it^T W
    a = X @ XW.transpose(-1, -2)  # (B?, n, Tq, Tk): a_ikt = x_ik . (W^T x_it)
    if causal:
        a = a.masked_fill(~causal_mask(X.shape[-2], True, X.device), -math.inf)
    return a


def sequence_softmax(X: torch.Tensor, W: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Attention :math:`s_{ik} = \\mathrm{softmax}_{t\\le k}(a_{ik})`, shape (B?, n, T, T)."""
    return torch.softmax(sequence_logits(X, W, causal), dim=-1)


def sequence_output(data: SequenceData, W: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Predictions :math:`f_{ik} = \\sum_t s_{ikt} v^\\top x_{it}`, shape (B?, n, T)."""
    g = torch.einsum("...itd,...d->...it", data.X, data.v)  # (B?, n, T)
    s = sequence_softmax(data.X, W, causal)
    return torch.einsum("...ikt,...it->...ik", s, g)


def sequence_loss(data: SequenceData, W: torch.Tensor, causal: bool = True,
                  loss: str = "logistic") -> torch.Tensor:
    """Empirical risk :math:`L(W) = \\frac{1}{nT}\\sum_{i,k}\\ell(Y_{ik} f_{ik})`, shape (B?,).

    Differentiable (the autograd oracle of the tests).
    """
    return M.loss_value(data.Y * sequence_output(data, W, causal), loss).mean(dim=(-2, -1))


def sequence_grad(data: SequenceData, W: torch.Tensor, causal: bool = True,
                  loss: str = "logistic"):
    """Loss and analytic gradient :math:`\\nabla_W L`, accurate deep into saturation.

    .. math::

        \\nabla_W L = \\frac{1}{nT}\\sum_{i,k} \\ell'_{ik} Y_{ik}
            \\sum_t s_{ikt}\\,(g_{it} - f_{ik})\\, x_{it} x_{ik}^\\top,
        \\qquad g_{it} - f_{ik} = \\sum_{\\tau} s_{ik\\tau} (g_{it} - g_{i\\tau}),

    with :math:`g_{it} = v^\\top x_{it}`. The logit derivatives come from
    :func:`attnlib.models.logit_gradient` applied to the :math:`nT` (sequence, query) pairs of
    :func:`query_pairs` (the cancellation-free form on the right, with a log-softmax), so the
    gradient keeps its relative accuracy when the softmax is saturated.

    Returns
    -------
    L : tensor (B?,)
    grad : tensor like W
    """
    Xp, z, _ = query_pairs(data, causal)  # (B?, nT, T, d), (B?, nT, d)
    a = sequence_logits(data.X, W, causal).flatten(-3, -2)  # (B?, nT, T)
    Yp = data.Y.flatten(-2)  # (B?, nT)
    out = M.logit_gradient(Xp, Yp, a, data.v, None, loss)  # mean over pairs
    r = torch.einsum("...pt,...ptd->...pd", out["da"], Xp)  # sum_t dL/da_pt x_t
    return out["loss"], r.transpose(-1, -2) @ z


def _scores(data: SequenceData) -> torch.Tensor:
    """Token scores :math:`\\gamma_{ikt} = Y_{ik} v^\\top x_{it}`, shape (B?, n, Tq, Tk)."""
    g = torch.einsum("...itd,...d->...it", data.X, data.v)
    return data.Y.unsqueeze(-1) * g.unsqueeze(-2)


def sequence_optimal_tokens(data: SequenceData, causal: bool = True) -> torch.Tensor:
    """Optimal selection :math:`\\alpha_{ik} = \\arg\\max_{t \\le k} \\gamma_{ikt}`, (B?, n, T)."""
    gam = _scores(data)
    gam = gam.masked_fill(~causal_mask(data.T, causal, gam.device), -math.inf)
    return gam.argmax(dim=-1)


def sequence_selected_tokens(data: SequenceData, W: torch.Tensor,
                             causal: bool = True) -> torch.Tensor:
    """Selection made by ``W``: the argmax of each query's attention, (B?, n, T)."""
    return sequence_logits(data.X, W, causal).argmax(dim=-1)


@dataclass
class SequenceTrainResult:
    """Final parameters and recorded trajectory of :func:`train_sequence`.

    ``W`` is always the combined matrix :math:`KQ^\\top` for ``param="KQ"``. ``history`` holds
    ``"step"`` (S,), ``"loss"`` (B?, S), ``"max_prob"`` (B?, S) (mean over queries of the
    largest attention probability), ``"W"`` (B?, S, d, d) and ``"grad_norm"`` (B?, S), the
    norm of the gradient of the trained tensors (for (K,Q): of the pair (K, Q), as in
    :func:`attnlib.train`). ``nonfinite`` (B?,) and ``status`` (the run's "no NaN, no stall"
    verdict): see :class:`attnlib.train.TrainResult`.
    """

    W: torch.Tensor
    K: torch.Tensor | None
    Q: torch.Tensor | None
    history: dict
    nonfinite: torch.Tensor | None = None
    status: RunStatus | None = None


def train_sequence(data: SequenceData, param: str = "W", causal: bool = True, lr: float = 0.1,
                   steps: int = 1000, normalized: bool = True, loss: str = "logistic",
                   init: dict | None = None, reg: float = 0.0, m: int | None = None,
                   eps: float = 0.0, record_every: int | None = None, seed: int = 0,
                   progress: bool = False) -> SequenceTrainResult:
    """(Normalised) gradient descent on a sequence self-attention layer, all trials at once.

    .. math::

        W \\leftarrow W - \\eta\\, \\frac{\\nabla_W L}{\\|\\nabla_W L\\|_F}
        \\quad\\text{or, for } W = KQ^\\top:\\quad
        \\nabla_K = \\nabla_W L\\, Q + 2\\lambda K,\\;\\; \\nabla_Q = \\nabla_W L^\\top K
        + 2\\lambda Q,

    each factor normalised separately, as in the papers' experiments. Every trial of a batched
    ``data`` runs in the same tensor computation: this is :func:`attnlib.train` on the
    :math:`nT` (sequence, query) pairs of :meth:`SequenceData.pairs` with their visibility mask
    (the one training loop). See chapter 8.

    Parameters
    ----------
    data : SequenceData
    param : {"W", "KQ"}
    causal : bool
        Causal (decoder) mask: query k sees tokens 1..k.
    lr, steps, normalized, loss : as in :func:`attnlib.train`.
    init : dict, optional
        Initial ``{"W": ...}`` or ``{"K": ..., "Q": ...}``; default ``U(-1/sqrt(d), 1/sqrt(d))``
        entrywise (PyTorch's ``nn.Linear`` law), drawn from ``seed``.
    eps : float
        The :math:`\\varepsilon` of the normalisation, as in :func:`attnlib.train`.
    reg : float
        The tiny Frobenius penalty :math:`\\lambda(\\|K\\|_F^2 + \\|Q\\|_F^2)` for (K,Q).
    m : int, optional
        Width of K and Q (default d).
    record_every : int, optional
        Record the trajectory every this many steps (default ``max(1, steps // 100)``); the
        final step is always recorded.
    """
    if not isinstance(data, SequenceData):
        raise ValueError(f"data: expected a SequenceData, got {type(data).__name__}")
    if param not in ("W", "KQ"):
        raise ValueError(f"param: expected 'W' or 'KQ', got {param!r}")
    steps = number("steps", steps, lo=0, integer=True)
    every = max(1, steps // 100) if record_every is None else record_every
    reg = number("reg", reg, lo=0)
    config = TrainConfig(param=param, lr=lr, steps=steps, normalized=normalized, loss=loss,
                         reg=reg if param == "KQ" else 0.0, eps=eps, record_every=every,
                         seed=seed, progress=progress)
    init = dict(init or {})
    if param == "KQ" and m is not None:
        init["m"] = m
    pairs, mask = data.pairs(causal)
    res = train(pairs, init=init, config=config, mask=mask)
    hist = {k: res.history[k] for k in ("step", "loss", "max_prob", "W", "grad_norm")}
    return SequenceTrainResult(W=res.W, K=res.K, Q=res.Q, history=hist, nonfinite=res.nonfinite,
                               status=res.status)
