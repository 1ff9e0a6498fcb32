"""Data: the attention data set, the papers' random law and their hand-made examples.

The book's notation (chapter 1, *Attention as token selection*): an example is a label
:math:`Y_i\\in\\{-1,+1\\}`, tokens :math:`X_i\\in\\mathbb{R}^{T\\times d}` (rows :math:`x_{it}`),
a query token :math:`z_i\\in\\mathbb{R}^d` and a linear head :math:`v\\in\\mathbb{R}^d`. A leading
trials dimension ``B`` is allowed everywhere: ``X`` (B,n,T,d), ``Y`` (B,n), ``z`` (B,n,d),
``v`` (B,d).

Every constructor draws its random numbers on a CPU :class:`torch.Generator` (in float32, the
way the official notebooks do) and only then casts and moves them, so a seed gives the same data
on every device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = [
    "AttentionData",
    "Example",
    "default_device",
    "resolve_device",
    "resolve_dtype",
    "as_tensor",
    "random_data",
    "three_token_example",
    "multi_input_example",
    "joint_example",
    "loss_example",
    "visualization_example",
    "mirror_joint_example",
    "mirror_random_data",
    "lambda_head_example",
    "relu_head_example",
]


# ----------------------------------------------------------------------------- devices, dtypes
def default_device() -> torch.device:
    """CUDA when available, else CPU (the book's default device)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(device=None) -> torch.device:
    """Validate a device request; ``None`` gives :func:`default_device`.

    Raises
    ------
    ValueError
        If the string is not a device, or CUDA is asked for and not available.
    """
    if device is None:
        return default_device()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"device: expected 'cpu', 'cuda' or a torch.device, got {device!r}") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {device!r} was requested but CUDA is not available here")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device: {device!r} does not exist ({torch.cuda.device_count()} GPUs)")
    return dev


def resolve_dtype(dtype=None) -> torch.dtype:
    """Validate a floating dtype; ``None`` gives float64 (the book's default)."""
    if dtype is None:
        return torch.float64
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(
            f"dtype: expected a floating torch dtype such as torch.float64, got {dtype!r}")
    return dtype


def as_tensor(x, name: str, dtype=None, device=None) -> torch.Tensor:
    """Convert numpy arrays, lists or tensors to a floating tensor, checking finiteness."""
    if isinstance(x, torch.Tensor):
        t = x
    else:
        try:
            t = torch.as_tensor(np.asarray(x, dtype=np.float64))
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{name}: expected a tensor or array of numbers, got {type(x)}") from err
    if not (t.is_floating_point() or t.dtype in (torch.int8, torch.int16, torch.int32, torch.int64,
                                                 torch.uint8, torch.bool)):
        raise ValueError(f"{name}: expected real numbers, got dtype {t.dtype}")
    if dtype is None and not t.is_floating_point():
        dtype = torch.float64
    t = t.to(device=device if device is not None else t.device, dtype=dtype or t.dtype)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name}: contains NaN or Inf")
    return t


# ----------------------------------------------------------------------------- the data class
@dataclass(frozen=True, eq=False)
class AttentionData:
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

    def __post_init__(self):
        X = as_tensor(self.X, "X")
        if X.ndim not in (3, 4):
            raise ValueError(f"X: expected shape (n,T,d) or (B,n,T,d), got {tuple(X.shape)}")
        if min(X.shape) == 0:
            raise ValueError(f"X: every dimension must be >= 1, got {tuple(X.shape)}")
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
        if not bool(((Y == 1) | (Y == -1)).all()):
            raise ValueError("Y: labels must be -1 or +1")
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

    # ------------------------------------------------------------------ sizes
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
        if not isinstance(B, int) or B < 1:
            raise ValueError(f"B: expected a positive int, got {B!r}")
        if self.B is not None:
            if B not in (1, self.B):
                raise ValueError(f"B: data already has {self.B} trials, cannot make {B}")
            return self

        def ex(t):
            return None if t is None else t.unsqueeze(0).expand(B, *t.shape)

        return AttentionData(ex(self.X), ex(self.Y), ex(self.z), ex(self.v))

    def trial(self, b: int) -> AttentionData:
        """The unbatched data of trial ``b``."""
        if self.B is None:
            raise ValueError("b: this data has no trials dimension")
        if not -self.B <= b < self.B:
            raise ValueError(f"b: expected an index in [0, {self.B}), got {b}")

        def tk(t):
            return None if t is None else t[b]

        return AttentionData(tk(self.X), tk(self.Y), tk(self.z), tk(self.v))

    def with_(self, **fields) -> AttentionData:
        """A copy with some of ``X, Y, z, v`` replaced (validated again)."""
        unknown = set(fields) - {"X", "Y", "z", "v"}
        if unknown:
            raise ValueError(f"fields: unknown field(s) {sorted(unknown)}; expected X, Y, z, v")
        cur = dict(X=self.X, Y=self.Y, z=self.z, v=self.v)
        cur.update(fields)
        return AttentionData(**cur)

    def __repr__(self):
        shape = f"B={self.B}, " if self.B is not None else ""
        return (f"AttentionData({shape}n={self.n}, T={self.T}, d={self.d}, "
                f"z={'yes' if self.z is not None else 'no'}, "
                f"v={'yes' if self.v is not None else 'no'}, "
                f"dtype={self.dtype}, device={self.device})")


@dataclass(frozen=True, eq=False)
class Example:
    """A hand-made example of a paper: its data plus the settings the paper trains it with.

    Attributes
    ----------
    name : str
        Short name.
    data : AttentionData
        The data (unbatched unless a sweep is part of the example).
    init : dict of tensors
        Ready for ``train(..., init=example.init)``: fixed tensors (e.g. ``W`` for the prompt
        model) and initial values. A leading dimension on an initial value stacks the paper's
        several runs as trials.
    settings : dict
        The paper's training settings (``param``, ``lr``, ``steps``, ``eps``, ...), ready for
        ``train(example.data, **example.settings, init=example.init)``.
    known : dict
        Closed-form reference values from the digests (SVM solutions, labels, ...).
    source : str
        Paper and notebook the example comes from.
    """

    name: str
    data: AttentionData
    init: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    known: dict = field(default_factory=dict)
    source: str = ""


# ----------------------------------------------------------------------------- random law
def _check_size(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")
    return int(value)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def _draw_one(n, T, d, g, attention):
    """One data set, in the official draw order (v, Y, X, z) of the TF-SVM / MD notebooks."""
    v = torch.randn(d, generator=g)
    Y = 2.0 * (torch.randn(n, generator=g) > 0).double() - 1.0
    X = torch.randn(n, T, d, generator=g)
    z = torch.randn(n, d, generator=g) if attention == "cross" else None
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
    n, T, d = _check_size("n", n), _check_size("T", T), _check_size("d", d)
    if trials is not None:
        trials = _check_size("trials", trials)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed: expected an int, got {seed!r}")
    if attention not in ("cross", "self"):
        raise ValueError(f"attention: expected 'cross' or 'self', got {attention!r}")
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    seeds = [int(seed)] if trials is None else [int(seed) + b for b in range(trials)]
    draws = []
    for s in seeds:  # data generation only, not a hot path
        g = torch.Generator().manual_seed(s)
        draws.append(_draw_one(n, T, d, g, attention))
    v, Y, X, z = (None if parts[0] is None else torch.stack(parts) for parts in zip(*draws))
    v, X = _unit(v.to(dt)), _unit(X.to(dt))
    z = X[..., 0, :].clone() if z is None else _unit(z.to(dt))
    Y = Y.to(dt)
    if trials is None:
        X, Y, z, v = X[0], Y[0], z[0], v[0]
    return AttentionData(X.to(dev), Y.to(dev), z.to(dev), v.to(dev))


def mirror_random_data(seed: int = 1, trials: int | None = None, device=None, dtype=None):
    """The synthetic set-up of the mirror-descent paper (§5.1): n=6, T=8, d=10, cross-attention.

    Returns an :class:`Example` whose ``init["W"]`` is the paper's aggregate-run initialisation
    :math:`W(0)\\sim\\mathcal N(0,1)` entrywise (drawn on a separate generator seeded with
    ``seed``), and whose settings are normalised MD with lr 0.1; ``known["steps"]`` gives the
    paper's budgets per p (1,500 / 2,000 / 20,000 for p = 1.75 / 2 / 3).

    See chapter 9, *Mirror descent selects tokens too*.
    """
    data = random_data(6, 8, 10, trials=trials, seed=seed, device=device, dtype=dtype)
    g = torch.Generator().manual_seed(10_000 + int(seed))
    shape = (10, 10) if trials is None else (trials, 10, 10)
    W0 = torch.randn(*shape, generator=g).to(device=data.device, dtype=data.dtype)
    return Example(
        name="mirror_random",
        data=data,
        init={"W": W0},
        settings=dict(param="W", method="md", lr=0.1, normalized=True, loss="logistic"),
        known={"steps": {1.75: 1500, 2.0: 2000, 3.0: 20000}},
        source="arXiv 2410.14581, §5.1 (AttentionMD synthetic experiment)",
    )


# ----------------------------------------------------------------------------- hand-made examples
def _t(x, device, dtype):
    return torch.as_tensor(x, dtype=torch.float64).to(device=resolve_device(device),
                                                       dtype=resolve_dtype(dtype))


def _prompt_W(device, dtype):
    return _t(np.diag([1.0, 1.0, 0.0]), device, dtype)


def three_token_example(scores: str = "global", device=None, dtype=None) -> Example:
    """The single-input 3-token example (max-margin paper, E1).

    Tokens are 3-D, :math:`(u_1, u_2, \\gamma)`: :math:`x_1=(-0.1, 1)`, :math:`x_2=(1, 0)`,
    :math:`x_3=(0, 0)` in the key plane and the score in the third coordinate. With
    :math:`W=\\mathrm{diag}(1,1,0)` the logits :math:`x_t^\\top W p` see only the plane, and
    :math:`v=(0,0,1)` reads only the score, so :math:`\\gamma=(1, 0.9, 0.9)` ("global") or
    :math:`(1, 0.9, 0)` ("local"). Six runs start at :math:`p(0)=(0,c,0)`,
    :math:`c\\in\\{1, .5, 0, -.5, -1, -1.5\\}` (stacked as 6 trials in ``init["p"]``).

    ``known``: the SVM solutions :math:`p^{mm}(\\alpha)` for :math:`\\alpha=1,2,3` (0-based keys
    0, 1, 2), the locally optimal selections, and (local panel) the expected final selection of
    each run: runs with c = -1, -1.5 go to token 2 (index 1), the others to token 1 (index 0).

    See chapter 3, *Local versus global optimality*.
    """
    if scores not in ("global", "local"):
        raise ValueError(f"scores: expected 'global' or 'local', got {scores!r}")
    g3 = 0.9 if scores == "global" else 0.0
    X = _t([[[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [0.0, 0.0, g3]]], device, dtype)
    data = AttentionData(X, _t([1.0], device, dtype), v=_t([0.0, 0.0, 1.0], device, dtype))
    cs = [1.0, 0.5, 0.0, -0.5, -1.0, -1.5]
    p0 = _t([[0.0, c, 0.0] for c in cs], device, dtype)
    k = 1 / 1.01
    known = {
        "p_mm": {0: _t([-0.1 * k, k, 0.0], device, dtype), 1: _t([1.0, 0.0, 0.0], device, dtype),
                 2: _t([-1.0, -1.1, 0.0], device, dtype)},
        "p_mm_sq_norm": {0: 1 / 1.01, 1: 1.0, 2: 2.21},
        "support": {0: [2], 1: [2], 2: [0, 1]},
        "locally_optimal": [0] if scores == "global" else [0, 1],
        "c": cs,
        "final_selection": [0] * 6 if scores == "global" else [0, 0, 0, 0, 1, 1],
    }
    return Example(
        name=f"three_token_{scores}",
        data=data,
        init={"W": _prompt_W(device, dtype), "p": p0},
        settings=dict(param="p", method="gd", lr=0.1, steps=1000, normalized=True, eps=1e-9,
                      loss="logistic"),
        known=known,
        source="arXiv 2306.13596, E1 (single_input_converge.ipynb)",
    )


def multi_input_example(device=None, dtype=None) -> Example:
    """The multi-input example (max-margin paper, E2), exact torch seed-0 recipe.

    ``X = 0.2 * randn(3, 7, 3)`` on ``torch.Generator().manual_seed(0)`` (float32); token 0 is
    shifted by (1,0), tokens 1-3 by (-1,1), tokens 4-6 by (-0.5,-0.5); the third coordinate is
    then set to 1 for token 0 (optimal) and 0.5 for the others. :math:`Y=(1,1,1)`,
    :math:`v=(0,0,1)`, :math:`W=\\mathrm{diag}(1,1,0)`. Six runs start at
    :math:`p(0)=(c,0,0)`, :math:`c\\in\\{1,.5,0,-.5,-1,-1.5\\}`.

    ``known["p_mm_norm_official"]`` = 0.7914 is the notebook's stored cvxopt objective
    (0.31319 = ½‖p^mm‖²). The same recipe under this library's torch (2.13) draws different
    numbers from seed 0 (torch's CPU normal sampler is not stable across versions): here
    ‖p^mm‖ ≈ 0.862 (checked with :func:`attnlib.svm.prompt_svm`), so only the qualitative targets
    transfer. Settings: normalised GD (lr 0.1, eps 1e-12); ``known["gd_settings"]``: the
    plain-GD baseline (lr 1, not normalised).

    See chapter 2, *The Att-SVM and gradient descent*.
    """
    n, T, d = 3, 7, 3
    g = torch.Generator().manual_seed(0)
    X = torch.randn((n, T, d), generator=g) * 0.2
    X[:, 0] += torch.tensor([1.0, 0.0, 0.0])
    X[:, 1:(T + 1) // 2] += torch.tensor([-1.0, 1.0, 0.0])
    X[:, -(T - 1) // 2:] += torch.tensor([-0.5, -0.5, 0.0])
    X[:, 0, -1] = 1.0
    X[:, 1:, -1] = 0.5
    X = X.to(device=resolve_device(device), dtype=resolve_dtype(dtype))
    data = AttentionData(X, torch.ones(n, dtype=X.dtype, device=X.device),
                         v=_t([0.0, 0.0, 1.0], device, dtype))
    cs = [1.0, 0.5, 0.0, -0.5, -1.0, -1.5]
    return Example(
        name="multi_input",
        data=data,
        init={"W": _prompt_W(device, dtype), "p": _t([[c, 0.0, 0.0] for c in cs], device, dtype)},
        settings=dict(param="p", method="gd", lr=0.1, steps=1000, normalized=True, eps=1e-12,
                      loss="logistic"),
        known={"p_mm_norm_official": math.sqrt(2 * 0.31319), "opt": [0, 0, 0], "c": cs,
               "gd_settings": dict(lr=1.0, normalized=False)},
        source="arXiv 2306.13596, E2 (multi_input_converge.ipynb)",
    )


def joint_example(tight: bool = True, device=None, dtype=None) -> Example:
    """Joint (v, p) training (max-margin paper, E3).

    n=3, T=2, d=2, W=I, Y=(+1,-1,+1); first token of every input is the origin, the second is
    (1,1), (1,-1) and (0.5,1) (tight) or (0.5,1.5) (non-tight). Start p(0)=(0,-1),
    v(0)=(-1,0); normalised GD on both, lr 0.1, 1000 steps. The notebook's epsilons differ
    (1e-19 for p, 1e-9 for v); ``settings["eps"]`` is 1e-19 for both (the difference is below
    float64 resolution for these gradients).

    ``known``: v^mm = (0,1); p^mm = (4/3,1/3) (tight) or (1.25,0.25) (non-tight);
    p^relax = p^mm (tight) or (1,0) (non-tight).

    See chapter 4, *Training the head too*.
    """
    third = [0.5, 1.0] if tight else [0.5, 1.5]
    X = _t([[[0, 0], [1, 1]], [[0, 0], [1, -1]], [[0, 0], third]], device, dtype)
    data = AttentionData(X, _t([1.0, -1.0, 1.0], device, dtype))
    known = {"v_mm": _t([0.0, 1.0], device, dtype),
             "p_mm": _t([4 / 3, 1 / 3] if tight else [1.25, 0.25], device, dtype),
             "p_relax": _t([4 / 3, 1 / 3] if tight else [1.0, 0.0], device, dtype),
             "opt": [1, 1, 1], "v_support": [0, 1, 2] if tight else [0, 1]}
    return Example(
        name=f"joint_{'tight' if tight else 'nontight'}",
        data=data,
        init={"W": torch.eye(2, dtype=X.dtype, device=X.device),
              "p": _t([0.0, -1.0], device, dtype), "v": _t([-1.0, 0.0], device, dtype)},
        settings=dict(param="p+v", method="gd", lr=0.1, steps=1000, normalized=True, eps=1e-19,
                      loss="logistic"),
        known=known,
        source="arXiv 2306.13596, E3 (joint_training.ipynb)",
    )


def loss_example(C=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100), device=None, dtype=None) -> Example:
    """The loss-function example (max-margin paper, E4).

    n=2, T=2, d=3, Y=(1,1), v=(0,0,1), W=diag(1,1,0); :math:`X_1=[(0,0;0),(1,1;C)]`,
    :math:`X_2=[(0,0;0),(1,-1;1)]`. The optimal token is the second one in both inputs and
    :math:`p^{mm}=(1,0,0)` for every C. ``C`` may be a number (unbatched data) or a sequence
    (one trial per value). Start p(0)=0, normalised GD, lr 0.1, eps 1e-9; the paper plots 200 of
    1000 iterations, for the correlation loss and the logistic loss.

    See chapter 3, *Local versus global optimality*.
    """
    Cs = np.atleast_1d(np.asarray(C, dtype=np.float64))
    if Cs.ndim != 1 or not np.isfinite(Cs).all():
        raise ValueError(f"C: expected a number or a 1-D sequence of finite numbers, got {C!r}")
    X = np.zeros((len(Cs), 2, 2, 3))
    X[:, 0, 1] = np.stack([np.ones_like(Cs), np.ones_like(Cs), Cs], axis=-1)
    X[:, 1, 1] = [1.0, -1.0, 1.0]
    X = _t(X, device, dtype)
    Y, v = _t([1.0, 1.0], device, dtype), _t([0.0, 0.0, 1.0], device, dtype)
    batched = np.ndim(C) > 0
    data = AttentionData(X if batched else X[0], Y, v=v)
    p0 = torch.zeros((len(Cs), 3) if batched else (3,), dtype=X.dtype, device=X.device)
    return Example(
        name="loss_example",
        data=data,
        init={"W": _prompt_W(device, dtype), "p": p0},
        settings=dict(param="p", method="gd", lr=0.1, steps=1000, normalized=True, eps=1e-9),
        known={"p_mm": _t([1.0, 0.0, 0.0], device, dtype), "C": Cs.tolist(), "opt": [1, 1],
               "plot_steps": 200, "losses": ["correlation", "logistic"]},
        source="arXiv 2306.13596, E4 (diff_loss_function.ipynb)",
    )


def visualization_example(version: int = 2, device=None, dtype=None) -> Example:
    """The 2-D pictures of the TF-SVM paper (E1), exact official recipes.

    ``version=1`` (``visualization.ipynb``, seed 1): n=2, T=3, d=2, Y=(1,1),
    X = 0.3·N(0,I) shifted by (-1,0) for input 1 and (+1,0) for input 2 (not normalised).
    ``version=2`` (``visualization2.ipynb``, seed 3): n=2, T=5, d=2, Y=(1,1),
    X = 0.5·N(0,I) with :math:`x_{11}=(1,0.5)`, :math:`x_{21}=(1,-0.5)` and the other tokens
    shifted by (-1,0). Both draw v (unit), then X, then z (unit) on one torch generator.

    ``init["W"]`` = 0 (the W run); ``init["K"]`` = 0.1·N(0,1) (drawn on a generator seeded with
    the example's seed; the official code uses the global RNG) and ``init["Q"]`` = 0 (the
    (K,Q) run). Settings: normalised GD, lr 0.1, 2000 steps, eps = float64 machine epsilon,
    ``reg`` = the same epsilon for (K,Q).

    See chapter 5, *Self-attention as an SVM: W versus (K, Q)*.
    """
    if version not in (1, 2):
        raise ValueError(f"version: expected 1 or 2, got {version!r}")
    n, d = 2, 2
    T, seed, scale = (3, 1, 0.3) if version == 1 else (5, 3, 0.5)
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(d, generator=g)
    v = v / torch.norm(v)
    X = scale * torch.randn((n, T, d), generator=g)
    if version == 1:
        X[0] += torch.tensor([-1.0, 0.0])
        X[1] += torch.tensor([1.0, 0.0])
    else:
        X[0, 0] = torch.tensor([1.0, 0.5])
        X[1, 0] = torch.tensor([1.0, -0.5])
        X[:, 1:] += torch.tensor([-1.0, 0.0])
    z = torch.randn((n, d), generator=g)
    z = z / torch.norm(z, dim=-1, keepdim=True)
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    data = AttentionData(X.to(dev, dt), torch.ones(n, device=dev, dtype=dt), z.to(dev, dt),
                         v.to(dev, dt))
    K0 = 0.1 * torch.randn((d, d), generator=torch.Generator().manual_seed(seed))
    eps = torch.finfo(torch.float64).eps
    return Example(
        name=f"visualization{version}",
        data=data,
        init={"W": torch.zeros(d, d, device=dev, dtype=dt), "K": K0.to(dev, dt),
              "Q": torch.zeros(d, d, device=dev, dtype=dt)},
        settings=dict(param="W", method="gd", lr=0.1, steps=2000, normalized=True, eps=eps,
                      loss="logistic"),
        known={"reg_KQ": eps, "seed": seed},
        source=f"arXiv 2308.16898, E1 (visualization{'' if version == 1 else '2'}.ipynb)",
    )


def mirror_joint_example(lp: float = 2.0, device=None, dtype=None) -> Example:
    """The joint (W, v) toy problem of the mirror-descent paper (§5.2).

    n=2, T=3, d=2, self-attention (:math:`z_i = x_{i1}`):
    :math:`X_1=[(-2.7,1.2),(1.4,2.1),(1.3,-0.1)]`, :math:`Y_1=+1`;
    :math:`X_2=[(0.4,-2.2),(-1.1,-0.4),(0.9,0.1)]`, :math:`Y_2=-1`. Start W(0)=0, v(0)=0;
    normalised ℓp-MD on both, lr 0.1; 1,500 / 2,000 / 20,000 steps for p = 1.75 / 2 / 3.
    The code's epsilon 2.2e-16 makes the first step (where the W-gradient is 0) safe.

    ``known["selection"]``: the final selected tokens, (1,0) for p in {1.75, 2} and (0,0) for
    p = 3 (0-based).

    See chapter 9, *Mirror descent selects tokens too*.
    """
    X = _t([[[-2.7, 1.2], [1.4, 2.1], [1.3, -0.1]], [[0.4, -2.2], [-1.1, -0.4], [0.9, 0.1]]],
           device, dtype)
    data = AttentionData(X, _t([1.0, -1.0], device, dtype), z=X[:, 0, :].clone())
    steps = {1.75: 1500, 2.0: 2000, 3.0: 20000}.get(float(lp), 2000)
    sel = {1.75: [1, 0], 2.0: [1, 0], 3.0: [0, 0]}
    return Example(
        name="mirror_joint",
        data=data,
        init={"W": torch.zeros(2, 2, dtype=X.dtype, device=X.device),
              "v": torch.zeros(2, dtype=X.dtype, device=X.device)},
        settings=dict(param="W+v", method="md", lp=float(lp), lr=0.1, steps=steps,
                      normalized=True, eps=2.220446049250313e-16, loss="logistic"),
        known={"selection": sel, "steps": {1.75: 1500, 2.0: 2000, 3.0: 20000}},
        source="arXiv 2410.14581, §5.2 (AttentionMD joint toy)",
    )


def relu_head_example(d: int = 4, seed: int = 1, device=None, dtype=None) -> Example:
    """The nonlinear (ReLU) head set-up of the TF-SVM paper (E4).

    n=3, T=4, cross-attention, unit tokens and unit random z, drawn like :func:`random_data`
    from ``seed``; the head is :math:`f = \\mathbf 1^\\top \\mathrm{ReLU}(V^\\top X^\\top s)`
    with :math:`V\\in\\mathbb R^{d\\times d}` standard normal scaled to ``‖V‖_F = 1`` (drawn after
    the data on the same generator) and an all-ones readout. Use
    ``head=models.ReluHead(example.init["V"], example.init["u"])``. Settings: W only, 2001
    normalised GD steps, lr 0.1.

    See chapter 7, *Nonlinear heads*.
    """
    d = _check_size("d", d)
    g = torch.Generator().manual_seed(int(seed))
    v, Y, X, z = _draw_one(3, 4, d, g, "cross")
    V = torch.randn(d, d, generator=g)
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    V = (V / V.norm()).to(dev, dt)
    data = AttentionData(_unit(X.to(dt)).to(dev), Y.to(dev, dt), _unit(z.to(dt)).to(dev),
                         _unit(v.to(dt)).to(dev))
    return Example(
        name="relu_head",
        data=data,
        init={"V": V, "u": torch.ones(d, device=dev, dtype=dt)},
        settings=dict(param="W", method="gd", lr=0.1, steps=2001, normalized=True,
                      eps=torch.finfo(torch.float64).eps, loss="logistic"),
        known={"mask_threshold": 1e-3, "masked_max": 1e-6},
        source="arXiv 2308.16898, E4 (multi_token_converge.ipynb, mode 'relu')",
    )


def lambda_head_example(lam: float = 0.25, gamma=(1.0, 0.8, 0.2, -0.5), device=None,
                        dtype=None) -> Example:
    """A designed multi-token case for the λ-penalty head (TF-SVM ``base_nonlinear.py``).

    One input, T = d = len(gamma), orthonormal tokens (the identity basis), Y = +1 and
    :math:`v=\\gamma`, so the token scores are ``gamma``. The head is
    :math:`f = v^\\top h - \\lambda \\|h\\|^2` with :math:`h = X^\\top s`; with orthonormal
    tokens :math:`\\|h\\|^2 = \\|s\\|^2` and the best attention is the sparsemax-like mixture
    :math:`s_t = \\max(0, (\\gamma_t-\\tau)/(2\\lambda))`, given in ``known["s_opt"]``.
    Use ``head=models.LambdaHead(lam)`` (query z = x_1).

    See chapter 7, *Nonlinear heads*.
    """
    gam = np.asarray(gamma, dtype=np.float64)
    if gam.ndim != 1 or gam.size < 2 or not np.isfinite(gam).all():
        raise ValueError(f"gamma: expected a 1-D sequence of >= 2 finite scores, got {gamma!r}")
    if not lam > 0:
        raise ValueError(f"lam: expected a positive number, got {lam!r}")
    T = gam.size
    # simplex projection of gamma / (2 lam): s = max(0, gamma/(2lam) - tau')
    y = gam / (2 * lam)
    u = np.sort(y)[::-1]
    css = np.cumsum(u)
    k = np.nonzero(u - (css - 1) / np.arange(1, T + 1) > 0)[0][-1]
    s_opt = np.maximum(y - (css[k] - 1) / (k + 1), 0.0)
    X = _t(np.eye(T)[None], device, dtype)
    data = AttentionData(X, _t([1.0], device, dtype), z=X[:, 0, :].clone(),
                         v=_t(gam, device, dtype))
    return Example(
        name="lambda_head",
        data=data,
        init={"lam": float(lam)},
        settings=dict(param="W", method="gd", lr=0.1, steps=2000, normalized=True,
                      loss="correlation"),
        known={"s_opt": _t(s_opt, device, dtype), "selected": np.nonzero(s_opt > 0)[0].tolist()},
        source="arXiv 2308.16898, base_nonlinear.py mode 'lambda' (unused in the notebooks)",
    )
