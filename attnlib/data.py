"""Data: the attention data set and the papers' random law.

The book's notation (chapter 1, *Attention as token selection*): an example is a label
:math:`Y_i\\in\\{-1,+1\\}`, tokens :math:`X_i\\in\\mathbb{R}^{T\\times d}` (rows :math:`x_{it}`),
a query token :math:`z_i\\in\\mathbb{R}^d` and a linear head :math:`v\\in\\mathbb{R}^d`. A leading
trials dimension ``B`` is allowed everywhere: ``X`` (B,n,T,d), ``Y`` (B,n), ``z`` (B,n,d),
``v`` (B,d).

Every constructor draws its random numbers on a CPU :class:`torch.Generator` (in float32, the
way the official notebooks do) and only then casts and moves them, so a seed gives the same data
on every device.

The papers' hand-made examples live in :mod:`attnlib.examples` (which builds on this module).
The device and dtype policy lives in ``attnlib._runtime``; ``default_device``, ``resolve_device``,
``resolve_dtype`` and ``as_tensor`` stay importable from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlib._runtime import default_device, resolve_device, resolve_dtype
from attnlib._validate import SEED_MAX, as_tensor, choice, labels, number, shape

__all__ = [
    "TokenData",
    "AttentionData",
    "default_device",
    "resolve_device",
    "resolve_dtype",
    "as_tensor",
    "random_data",
    "official_draw",
]


# ----------------------------------------------------------------------------- sizes and trials
class TokenData:
    """Sizes and trials of a data set of tokens ``X`` (n,T,d) or (B,n,T,d), whose other tensor
    fields carry the same leading trials dimension: shared by :class:`AttentionData` and
    :class:`attnlib.sequences.SequenceData`."""

    #: the tensor fields, in the constructor's order
    FIELDS: tuple[str, ...] = ("X",)

    @property
    def B(self) -> int | None:
        """Number of trials, ``None`` without a trials dimension."""
        return self.X.shape[0] if self.X.ndim == 4 else None

    @property
    def n(self) -> int:
        return self.X.shape[-3]

    @property
    def T(self) -> int:
        return self.X.shape[-2]

    @property
    def d(self) -> int:
        return self.X.shape[-1]

    @property
    def device(self) -> torch.device:
        return self.X.device

    @property
    def dtype(self) -> torch.dtype:
        return self.X.dtype

    def trial(self, b: int):
        """The unbatched data of trial ``b``."""
        if self.B is None:
            raise ValueError("b: expected data with a trials dimension, got unbatched data")
        b = number("b", b, lo=-self.B, hi=self.B - 1, integer=True)
        return type(self)(*(None if (t := getattr(self, f)) is None else t[b]
                            for f in self.FIELDS))


# ----------------------------------------------------------------------------- the data class
@dataclass(frozen=True, eq=False)
class AttentionData(TokenData):
    """Attention data :math:`(X_i, Y_i, z_i)_{i\\le n}` with a linear head :math:`v`.

    Validated on construction. ``X`` fixes dtype and device (numpy input becomes float64 on
    CPU); ``Y``, ``z`` and ``v`` are cast to them. With a trials dimension (``X`` of shape
    (B,n,T,d)) the other fields may be given per trial or once; shared ones are expanded
    (views, no copy), so after construction every field has the leading ``B``.

    Parameters
    ----------
    X : tensor (n,T,d) or (B,n,T,d)
        Tokens :math:`x_{it}`.
    Y : tensor (n,) or (B,n)
        Labels in {-1, +1}.
    z : tensor (n,d) or (B,n,d), optional
        Query tokens :math:`z_i` (self-attention: :math:`z_i = x_{i1}`). ``None`` for the prompt
        model, where the query is the trained token ``p``.
    v : tensor (d,) or (B,d), optional
        Linear head; the token scores are :math:`\\gamma_{it} = Y_i v^\\top x_{it}`.

    See chapter 1, *Attention as token selection*.
    """

    X: torch.Tensor
    Y: torch.Tensor
    z: torch.Tensor | None = None
    v: torch.Tensor | None = None
    FIELDS = ("X", "Y", "z", "v")

    def __post_init__(self):
        X = shape("X", as_tensor(self.X, "X"), "(n,T,d) or (B,n,T,d)", ndim=(3, 4))
        if min(X.shape) == 0:
            raise ValueError(f"X: expected every dimension >= 1, got shape {tuple(X.shape)}")
        if X.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            X = X.to(torch.float64)
        B = X.shape[0] if X.ndim == 4 else None
        n, T, d = X.shape[-3:]
        kw = dict(dtype=X.dtype, device=X.device)

        def fit(t, name, tail, what):
            t = as_tensor(t, name, **kw)
            full = (B, *tail) if B is not None else tail
            if tuple(t.shape) == tuple(tail) and B is not None:
                return t.expand(*full)
            if tuple(t.shape) != tuple(full):
                raise ValueError(f"{name}: expected shape {what}, got {tuple(t.shape)}")
            return t

        Yshape = "(n,) or (B,n)" if B is not None else "(n,)"
        Y = fit(self.Y, "Y", (n,), f"{Yshape} with n={n}")
        labels("Y", Y)
        z = None
        if self.z is not None:
            what = f"(n,d)=({n},{d})" + (f" or (B,n,d) with B={B}" if B else "")
            z = fit(self.z, "z", (n, d), what)
        v = None
        if self.v is not None:
            v = fit(self.v, "v", (d,), f"(d,)=({d},)" + (f" or (B,d) with B={B}" if B else ""))
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "Y", Y)
        object.__setattr__(self, "z", z)
        object.__setattr__(self, "v", v)

    # ------------------------------------------------------------------ views
    def to(self, device=None, dtype=None) -> AttentionData:
        """Copy to another device and/or floating dtype (``None`` keeps the current one)."""
        dev = self.device if device is None else resolve_device(device)
        dt = self.dtype if dtype is None else resolve_dtype(dtype)

        def mv(t):
            return None if t is None else t.to(device=dev, dtype=dt)

        return AttentionData(mv(self.X), mv(self.Y), mv(self.z), mv(self.v))

    def batched(self, B: int = 1) -> AttentionData:
        """Data with a leading trials dimension; unbatched data is repeated ``B`` times (views)."""
        B = number("B", B, lo=1, integer=True)
        if self.B is not None:
            if B not in (1, self.B):
                raise ValueError(
                    f"B: expected 1 or {self.B} (the data has {self.B} trials), got {B}")
            return self

        def ex(t):
            return None if t is None else t.unsqueeze(0).expand(B, *t.shape)

        return AttentionData(ex(self.X), ex(self.Y), ex(self.z), ex(self.v))

    def with_(self, **fields) -> AttentionData:
        """A copy with some of ``X, Y, z, v`` replaced (validated again)."""
        unknown = set(fields) - {"X", "Y", "z", "v"}
        if unknown:
            raise ValueError(f"fields: expected some of X, Y, z, v, got {sorted(unknown)}")
        cur = dict(X=self.X, Y=self.Y, z=self.z, v=self.v)
        cur.update(fields)
        return AttentionData(**cur)

    def __repr__(self):
        shape = f"B={self.B}, " if self.B is not None else ""
        return (f"AttentionData({shape}n={self.n}, T={self.T}, d={self.d}, "
                f"z={'yes' if self.z is not None else 'no'}, "
                f"v={'yes' if self.v is not None else 'no'}, "
                f"dtype={self.dtype}, device={self.device})")


# ----------------------------------------------------------------------------- random law
def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def official_draw(n: int, T: int, d: int, generator: torch.Generator, attention: str = "cross"):
    """One raw data set in the official draw order (v, Y, X, z) of the TF-SVM / MD notebooks.

    Float32 standard normals on ``generator`` (not normalised): ``v`` (d,), labels
    :math:`Y_i = \\pm 1` from the sign of a normal (n,), ``X`` (n,T,d) and, for cross-attention,
    ``z`` (n,d) (``None`` for self-attention). :func:`random_data` normalises them; an example
    that draws more on the same generator (:func:`attnlib.examples.relu_head_example`) calls
    this directly.
    """
    g, f32 = generator, torch.float32  # (float32 whatever torch's default dtype is)
    v = torch.randn(d, generator=g, dtype=f32)
    Y = 2.0 * (torch.randn(n, generator=g, dtype=f32) > 0).double() - 1.0
    X = torch.randn(n, T, d, generator=g, dtype=f32)
    z = torch.randn(n, d, generator=g, dtype=f32) if attention == "cross" else None
    return v, Y, X, z


def random_data(n: int, T: int, d: int, trials: int | None = None, seed: int = 0,
                attention: str = "cross", device=None, dtype=None) -> AttentionData:
    """Random data following the papers' law.

    .. math::

        v\\sim\\mathcal N(0,I_d)/\\|\\cdot\\|,\\quad Y_i=\\pm1 \\text{ w.p. } 1/2,\\quad
        x_{it}\\sim\\mathcal N(0,I_d)/\\|\\cdot\\|,\\quad z_i\\sim\\mathcal N(0,I_d)/\\|\\cdot\\|

    (self-attention: :math:`z_i = x_{i1}`). Draws happen in the official notebooks' order
    (v, Y, X, z) on a CPU ``torch.Generator`` in float32, then are cast to ``dtype`` and
    normalised there, so trial ``b`` reproduces the official ``data_generator(seed + b)`` up to
    float32 rounding, on any device.

    Parameters
    ----------
    n, T, d : int
        Examples, tokens per example, embedding dimension.
    trials : int, optional
        ``None`` gives unbatched tensors; an int ``B`` gives a leading trials dimension, trial
        ``b`` drawn from seed ``seed + b``.
    seed : int
        Seed of the first trial.
    attention : {"cross", "self"}
        Cross-attention (random unit :math:`z_i`) or self-attention (:math:`z_i = x_{i1}`).
    device, dtype
        Default: :func:`default_device`, float64.

    See chapter 1, *Attention as token selection*.
    """
    n, T, d = (number(k, x, lo=1, integer=True) for k, x in (("n", n), ("T", T), ("d", d)))
    if trials is not None:
        trials = number("trials", trials, lo=1, integer=True)
    # every trial's seed (seed + b) is a torch.Generator seed
    seed = number("seed", seed, lo=0, hi=SEED_MAX - ((trials or 1) - 1), integer=True)
    choice("attention", attention, ("cross", "self"))
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    seeds = [int(seed)] if trials is None else [int(seed) + b for b in range(trials)]
    draws = []
    for s in seeds:  # data generation only, not a hot path
        g = torch.Generator().manual_seed(s)
        draws.append(official_draw(n, T, d, g, attention))
    v, Y, X, z = (None if parts[0] is None else torch.stack(parts) for parts in zip(*draws))
    v, X = _unit(v.to(dt)), _unit(X.to(dt))
    z = X[..., 0, :].clone() if z is None else _unit(z.to(dt))
    Y = Y.to(dt)
    if trials is None:
        X, Y, z, v = X[0], Y[0], z[0], v[0]
    return AttentionData(X.to(dev), Y.to(dev), z.to(dev), v.to(dev))
