r"""The paper's sentiment transformer in miniature, M independent copies trained as one.

The model of the paper's real-data experiment (arXiv 2410.14581, §5; official code
``aaronk2002/AttentionMD``, ``real-data/tools/sent_analysis_model.py``), with its sizes as
settings: token plus learned positional embedding; ``n_blocks`` post-LayerNorm blocks

.. math::

    x \leftarrow \mathrm{LN}(x + \mathrm{Attn}(x)),\qquad
    x \leftarrow \mathrm{LN}(x + W_2\,\mathrm{GELU}(W_1 x)),

with a fused QKV projection, ``n_head`` heads, scale :math:`1/\sqrt{C/h}`, and the padding mask
of the official code (query i sees key j when both are real tokens, and every query sees
position 0); the position-0 ([CLS]) representation goes through a linear head to the logit
:math:`f(X)`, and the loss is the binary cross-entropy of :math:`\sigma(f)` summed over the
batch. No biases (LayerNorm has a weight only); dropout on the attention weights, after the
attention's output projection and after the MLP. Weights are stored input-first
(``x @ W``), so ``qkv[..., :C]``, ``[C:2C]``, ``[2C:]`` are the Q, K and V weights (the
transposes of the official ``nn.Linear`` weights), and every parameter carries a leading
**member** dimension M: M independently initialised models (seeds, learning rates) run as one
batched computation. Elementwise optimizers (mirror descent, Adam) treat each member exactly
as if it were alone. Initialisation as torch's defaults: embeddings :math:`N(0, 1)`, linear
weights :math:`U(-1/\sqrt{\text{fan-in}}, 1/\sqrt{\text{fan-in}})`, LayerNorm weights 1.
See chapter 10, *Real reviews*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from ._validate import number

__all__ = ["EncoderConfig", "ReviewEncoder", "bce_sum", "qkv_weights", "cls_attention", "min_max"]


@dataclass(frozen=True)
class EncoderConfig:
    """Sizes of the encoder (the paper's 3-block model: 384, 3, 3, 1536, 512, 0.2)."""

    vocab_size: int
    max_len: int = 40
    n_embd: int = 32
    n_blocks: int = 2
    n_head: int = 2
    n_hidden: int = 64
    dropout: float = 0.1

    def __post_init__(self):
        for k in ("vocab_size", "max_len", "n_embd", "n_blocks", "n_head", "n_hidden"):
            number(k, getattr(self, k), lo=1, integer=True)
        number("dropout", self.dropout, lo=0, hi=0.99)
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd: expected a multiple of n_head={self.n_head}, "
                             f"got {self.n_embd}")


def _uniform(M, fan_in, fan_out, g):
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(M, fan_in, fan_out, generator=g) * 2 - 1) * bound


class ReviewEncoder(torch.nn.Module):
    """M members of the encoder; ``forward(tokens, mask)`` -> logits (M, B).

    Parameters
    ----------
    config : EncoderConfig
    seeds : sequence of int
        One seed per member: its initial weights (and, in :func:`dropout`, its own masks).
    """

    def __init__(self, config: EncoderConfig, seeds=(0,)):
        super().__init__()
        self.config, self.seeds = config, tuple(int(s) for s in seeds)
        c, M = config, len(self.seeds)
        members = []
        for s in self.seeds:  # each member's draws depend on its own seed only
            g = torch.Generator().manual_seed(s)
            w = {"tok": torch.randn(c.vocab_size, c.n_embd, generator=g),
                 "pos": torch.randn(c.max_len, c.n_embd, generator=g)}
            for b in range(c.n_blocks):
                w[f"qkv{b}"] = _uniform(1, c.n_embd, 3 * c.n_embd, g)[0]
                w[f"proj{b}"] = _uniform(1, c.n_embd, c.n_embd, g)[0]
                w[f"fc1{b}"] = _uniform(1, c.n_embd, c.n_hidden, g)[0]
                w[f"fc2{b}"] = _uniform(1, c.n_hidden, c.n_embd, g)[0]
            w["head"] = _uniform(1, c.n_embd, 1, g)[0, :, 0]
            members.append(w)
        P = torch.nn.Parameter
        self.tok = P(torch.stack([m["tok"] for m in members]))  # (M, V, C)
        self.pos = P(torch.stack([m["pos"] for m in members]))  # (M, T, C)
        self.qkv = torch.nn.ParameterList(
            P(torch.stack([m[f"qkv{b}"] for m in members])) for b in range(c.n_blocks))
        self.proj = torch.nn.ParameterList(
            P(torch.stack([m[f"proj{b}"] for m in members])) for b in range(c.n_blocks))
        self.fc1 = torch.nn.ParameterList(
            P(torch.stack([m[f"fc1{b}"] for m in members])) for b in range(c.n_blocks))
        self.fc2 = torch.nn.ParameterList(
            P(torch.stack([m[f"fc2{b}"] for m in members])) for b in range(c.n_blocks))
        self.ln1 = torch.nn.ParameterList(P(torch.ones(M, c.n_embd)) for _ in range(c.n_blocks))
        self.ln2 = torch.nn.ParameterList(P(torch.ones(M, c.n_embd)) for _ in range(c.n_blocks))
        self.head = P(torch.stack([m["head"] for m in members]))  # (M, C)
        self._gen = torch.Generator().manual_seed(hash(self.seeds) % 2 ** 31)

    @property
    def M(self) -> int:
        return len(self.seeds)

    def _drop(self, x):
        p = self.config.dropout
        if not self.training or p == 0:
            return x
        keep = (torch.rand(x.shape, generator=self._gen, dtype=x.dtype) >= p).to(x.device)
        return x * keep / (1 - p)

    def forward(self, tokens, mask, attention: bool = False):
        r"""Logits :math:`f` (M, B) of every member for ``tokens`` (B, T) or (M, B, T).

        With ``attention=True`` also the attention weights of every block,
        a list of (M, B, h, T, T) tensors (query rows, key columns).
        """
        c = self.config
        if tokens.dim() == 2:  # the same batch for every member
            tokens, mask = tokens.expand(self.M, *tokens.shape), mask.expand(self.M, *mask.shape)
        M, B, T = tokens.shape
        if T > c.max_len:
            raise ValueError(f"tokens: {T} positions, more than the model's max_len = "
                             f"{c.max_len} (cut the inputs to max_len, as reviews.encode does)")
        h, C, V = c.n_head, c.n_embd, c.vocab_size
        offset = V * torch.arange(M, device=tokens.device)[:, None, None]
        rows = tokens + offset  # member m's table starts at row m V
        x = F.embedding(rows, self.tok.view(M * V, C)) + self.pos[:, None, :T]  # (M, B, T, C)
        allowed = (mask[:, :, None, :] & mask[:, :, :, None]).clone()  # (M, B, T_query, T_key)
        allowed[..., 0] = True  # every query may attend to position 0
        allowed = allowed[:, :, None]  # (M, B, 1, T, T): the same for every head
        fused = not attention and not (self.training and c.dropout > 0)
        if not fused:
            bias = torch.zeros(allowed.shape, dtype=x.dtype, device=x.device)
            bias = bias.masked_fill(~allowed, -math.inf)
        maps = []
        for b in range(c.n_blocks):
            qkv = torch.einsum("mbtc,mcd->mbtd", x, self.qkv[b])  # (M, B, T, 3C)
            q, k, v = (t.reshape(M, B, T, h, C // h).transpose(2, 3) for t in qkv.split(C, -1))
            if fused:  # the same computation, one fused kernel
                y = _attend(q, k, v, allowed)
            else:
                a = q @ k.transpose(-2, -1) / math.sqrt(C // h) + bias
                s = torch.softmax(a, dim=-1)  # (M, B, h, T, T)
                maps.append(s)
                y = self._drop(s) @ v
            y = y.transpose(2, 3).reshape(M, B, T, C)
            y = self._drop(torch.einsum("mbtc,mcd->mbtd", y, self.proj[b]))
            x = F.layer_norm(x + y, (C,), eps=1e-5) * self.ln1[b][:, None, None]
            y = F.gelu(torch.einsum("mbtc,mch->mbth", x, self.fc1[b]))
            y = self._drop(torch.einsum("mbth,mhc->mbtc", y, self.fc2[b]))
            x = F.layer_norm(x + y, (C,), eps=1e-5) * self.ln2[b][:, None, None]
        f = torch.einsum("mbc,mc->mb", x[:, :, 0], self.head)  # (M, B)
        return (f, maps) if attention else f


def _attend(q, k, v, allowed):
    """``scaled_dot_product_attention`` of (M, B, h, T, c) tensors as one 4-D batch (M·B, h,
    T, c): a 5-D call takes the unfused path, twice as slow forward and backward on the CPU
    (the same values within float32 round-off, about 1e-7 relative)."""
    M, B, h, T, c = q.shape
    y = F.scaled_dot_product_attention(
        *(t.reshape(M * B, h, T, c) for t in (q, k, v)),
        attn_mask=allowed.expand(M, B, 1, T, T).reshape(M * B, 1, T, T))
    return y.view(M, B, h, T, c)


def bce_sum(f, Y):
    r"""Binary cross-entropy of :math:`\sigma(f)` against :math:`(Y+1)/2`, summed over the
    batch, per member: (M,). The official loss (``BCELoss(reduction="sum")``)."""
    t = (Y > 0).to(f.dtype).expand_as(f)
    return F.binary_cross_entropy_with_logits(f, t, reduction="none").sum(-1)


def qkv_weights(model: ReviewEncoder) -> dict:
    """The Q, K and V weights of every block, pooled: ``{"Q": (M, n_blocks*C*C), ...}``."""
    C = model.config.n_embd
    out = {}
    for i, name in enumerate("QKV"):
        out[name] = torch.cat([w[..., i * C:(i + 1) * C].detach().flatten(1)
                               for w in model.qkv], dim=1)
    return out


@torch.no_grad()
def cls_attention(model: ReviewEncoder, tokens, mask, normalize: bool = False):
    r"""Last block's attention of the [CLS] query, averaged over heads: (M, B, T).

    The paper's attention-map statistic reads the attention row of position 0 in the last
    block, averages it over the heads and, with ``normalize=True``, min-max normalises it over
    the sentence's tokens (the [CLS] position included, padding excluded):
    :math:`(s_t-\min_u s_u)/(\max_u s_u-\min_u s_u)`. Padding positions get 0.
    """
    was = model.training
    model.eval()
    _, maps = model(tokens, mask, attention=True)
    model.train(was)
    s = maps[-1][:, :, :, 0, :].mean(2)  # (M, B, T)
    s = torch.where(mask.expand_as(s), s, torch.zeros_like(s))
    return min_max(s, mask) if normalize else s


def min_max(s, mask):
    r"""Min-max normalisation of attention rows over each sentence's tokens:
    :math:`(s_t-\min_u s_u)/(\max_u s_u-\min_u s_u)`, padding excluded (and set to 0).

    ``s`` (M, B, T), e.g. :func:`cls_attention`'s raw rows (normalised from them, the same
    numbers as ``normalize=True`` without a second forward pass); ``mask`` (B, T) or
    (M, B, T).
    """
    if s.ndim != 3 or mask.shape[-2:] != s.shape[-2:]:
        raise ValueError(f"s must be (M, B, T) and mask (B, T) or (M, B, T), got "
                         f"{tuple(s.shape)} and {tuple(mask.shape)}")
    m = mask.expand_as(s)
    hi = torch.where(m, s, torch.full_like(s, -math.inf)).amax(-1, keepdim=True)
    lo = torch.where(m, s, torch.full_like(s, math.inf)).amin(-1, keepdim=True)
    return torch.where(m, (s - lo) / (hi - lo).clamp_min(1e-30), torch.zeros_like(s))
