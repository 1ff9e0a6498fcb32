"""The training problem: validated data, initial and fixed tensors, and its batched gradient.

:func:`prepare` turns ``train``'s arguments into a :class:`Problem` (every tensor with a leading
trials dimension B); :func:`make_gradient` returns the batched, saturation-safe gradient of the
risk for that problem (:func:`attnlib.models.risk_gradient`, the one implementation), for every
parameterisation. See chapters 2, 5, 8 and 9.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from attnlib import models as M
from attnlib._runtime import resolve_device, resolve_dtype
from attnlib._validate import as_tensor, choice, number
from attnlib._validate import seed as check_seed
from attnlib.data import AttentionData

from .config import PARAMS

__all__ = ["Problem", "prepare", "make_gradient", "stack_kq", "unstack_kq", "TRAINED"]

TRAINED = {"W": ("W",), "KQ": ("K", "Q"), "p": ("p",), "v": ("v",), "W+v": ("W", "v"),
           "p+v": ("p", "v")}
"""The tensors each parameterisation trains."""
_BASE_NDIM = {"W": 2, "K": 2, "Q": 2, "p": 1, "v": 1}
_INIT_KEYS = {"W", "K", "Q", "p", "v", "V", "u", "b", "lam", "m"}


@dataclass
class Problem:
    """A prepared training problem, every tensor batched over the B trials.

    Attributes
    ----------
    data : AttentionData
        With a trials dimension B (shared unbatched data is expanded).
    P : dict of tensors
        Initial values of the trained tensors, (B, ...).
    fixed : dict of tensors
        Tensors held fixed: ``W`` of the prompt model, ``p`` for ``param="v"`` without queries,
        ``v`` of a fixed linear head.
    head : head object of :mod:`attnlib.models`
    prompt : bool
        The query is the trained (or fixed) prompt ``p`` instead of ``data.z``.
    unbatched : bool
        Neither data nor initial values had a trials dimension (results drop it).
    mask : tensor (B, n, T) bool or None
        Visible tokens of each input (``None``: all); the logits of hidden ones are
        :math:`-\\infty`. Sequences (chapter 8) are inputs with a causal mask.
    """

    data: AttentionData
    P: dict
    fixed: dict
    head: object
    prompt: bool
    unbatched: bool
    mask: torch.Tensor | None = None
    B: int = field(init=False)

    def __post_init__(self):
        self.B = self.data.B


def _initial_tensors(init, dt, dev):
    init = {} if init is None else init
    if not isinstance(init, dict):
        raise ValueError(f"init: expected a dict of tensors, got {type(init).__name__}")
    unknown = set(init) - _INIT_KEYS
    if unknown:
        raise ValueError(f"init: unknown key(s) {sorted(unknown)}; expected some of "
                         f"{sorted(_INIT_KEYS)}")
    return dict(init), {k: as_tensor(init[k], f"init['{k}']", dtype=dt, device=dev)
                        for k in ("W", "K", "Q", "p", "v") if init.get(k) is not None}


def prepare(data, param, init, head, seed, device=None, dtype=None, mask=None) -> Problem:
    """Validate ``train``'s inputs and build the batched :class:`Problem`.

    Default initial values: W, K, Q ~ U(-1/√d, 1/√d) (torch.nn.Linear's law, drawn from
    ``seed`` on the CPU in float64); p = 0; v = data.v, else 0.
    """
    if not isinstance(data, AttentionData):
        raise ValueError(f"data: expected an attnlib.AttentionData, got {type(data).__name__}")
    param = choice("param", param, PARAMS)
    seed = check_seed(seed)
    dev = data.device if device is None else resolve_device(device)
    dt = data.dtype if dtype is None else resolve_dtype(dtype)
    if (dev, dt) != (data.device, data.dtype):
        data = data.to(dev, dt)
    init, tens = _initial_tensors(init, dt, dev)
    d = data.d
    # trials: from the data and from any batched initial tensor
    Bs = {data.B} if data.B is not None else set()
    for k, t in tens.items():
        if t.ndim == _BASE_NDIM[k] + 1:
            Bs.add(t.shape[0])
        elif t.ndim != _BASE_NDIM[k]:
            raise ValueError(f"init['{k}']: expected {_BASE_NDIM[k]} dims (or one more for "
                             f"trials), got shape {tuple(t.shape)}")
    if len(Bs) > 1:
        raise ValueError(f"init: the trials dimensions of data and init disagree: {sorted(Bs)}")
    unbatched = not Bs
    B = Bs.pop() if Bs else 1
    bd = data.batched(B) if data.B is None else data

    tens = {k: (t if t.ndim == _BASE_NDIM[k] + 1 else t.unsqueeze(0).expand(B, *t.shape)).clone()
            for k, t in tens.items()}
    m = tens["K"].shape[-1] if "K" in tens else init.get("m")
    m = d if m is None else number("init['m']", m, lo=1, integer=True)
    shapes = {"W": (d, d), "K": (d, m), "Q": (d, m), "p": (d,), "v": (d,)}
    for k, t in tens.items():
        if tuple(t.shape[1:]) != shapes[k]:
            raise ValueError(f"init['{k}']: expected shape {shapes[k]} (or with trials first), "
                             f"got {tuple(t.shape[1:])}")
    head_obj = M.make_head(head, init, d=d, dtype=dt, device=dev)
    trained = TRAINED[param]
    if "v" in trained and not isinstance(head_obj, M.LinearHead):
        raise ValueError(f"param: {param!r} trains v, which only the linear head has")
    P = _initial_values(trained, tens, bd, B, d, m, seed, dev, dt)
    fixed = {}
    if param in ("p", "p+v", "v"):
        eye = torch.eye(d, device=dev, dtype=dt).expand(B, d, d)
        fixed["W"] = tens["W"] if "W" in tens else eye
    prompt = "p" in trained or (param == "v" and bd.z is None)
    if param == "v" and bd.z is None:
        if "p" not in tens:
            raise ValueError("init['p']: param 'v' needs query tokens data.z or a fixed prompt p")
        fixed["p"] = tens["p"]
    if not prompt and bd.z is None:
        raise ValueError(f"data.z: param {param!r} needs query tokens z "
                         f"(use random_data or pass z)")
    if "v" not in trained and not isinstance(head_obj, (M.ReluHead, M.MLPHead)):
        if bd.v is None:
            raise ValueError(f"data.v: the {head_obj.name} head needs v (or train it: param "
                             f"'W+v' / 'p+v')")
        fixed["v"] = bd.v
    if mask is not None:
        mask = torch.as_tensor(mask, dtype=torch.bool, device=dev)
        if tuple(mask.shape[-2:]) != (bd.n, bd.T) or mask.ndim not in (2, 3):
            raise ValueError(f"mask: expected shape (n, T) or (B, n, T) = "
                             f"{(B, bd.n, bd.T)}, got {tuple(mask.shape)}")
        if not bool(mask.any(-1).all()):
            raise ValueError("mask: expected every input to see at least one token")
        mask = mask.expand(B, bd.n, bd.T)
    return Problem(bd, P, fixed, head_obj, prompt, unbatched, mask)


def _initial_values(trained, tens, bd, B, d, m, seed, dev, dt):
    """The trained tensors' initial values: given, or drawn from ``seed``."""
    g = torch.Generator().manual_seed(int(seed))
    bound = 1.0 / math.sqrt(d)  # torch.nn.Linear's default init, U(-1/sqrt(d), 1/sqrt(d))

    def uniform(*shape):
        u = torch.rand(B, *shape, generator=g, dtype=torch.float64, device="cpu")
        return ((2 * u - 1) * bound).to(device=dev, dtype=dt)

    P = {}
    if "W" in trained:
        P["W"] = tens["W"] if "W" in tens else uniform(d, d)
    if "K" in trained:
        P["K"] = tens["K"] if "K" in tens else uniform(d, m)
        P["Q"] = tens["Q"] if "Q" in tens else uniform(d, m)
    if "p" in trained:
        P["p"] = tens["p"] if "p" in tens else torch.zeros(B, d, device=dev, dtype=dt)
    if "v" in trained:
        if "v" in tens:
            P["v"] = tens["v"]
        elif bd.v is not None:
            P["v"] = bd.v.clone()
        else:
            P["v"] = torch.zeros(B, d, device=dev, dtype=dt)
    return P


def stack_kq(P):
    """Keep (K, Q) as one (B, 2, d, m) tensor inside the loops (half the ops)."""
    if "K" not in P:
        return P
    P = dict(P)
    return {"KQ": torch.stack((P.pop("K"), P.pop("Q")), 1), **P}


def unstack_kq(P):
    """Inverse of :func:`stack_kq`."""
    if "KQ" not in P:
        return P
    P = dict(P)
    KQ = P.pop("KQ")
    return {"K": KQ[:, 0], "Q": KQ[:, 1], **P}


def make_gradient(prob: Problem, loss, param, reg, scaled=True):
    """The batched gradient of the risk for one problem: :func:`attnlib.models.risk_gradient`
    with the problem's fixed tensors.

    The closure ``grads(P, extras=False)`` returns ``(G, K, out)``: per trained tensor a
    (possibly scaled) gradient and its log scale (B,), the true gradient being
    ``G * exp(-K)``; and the forward quantities of :func:`attnlib.models.logit_gradient`
    (with ``out["W"]`` the combined matrix). ``param`` names the trained tensors, which the
    closure reads from the keys of ``P``.
    """
    choice("param", param, PARAMS)
    bd, fixed = prob.data, prob.fixed
    return M.risk_gradient(bd.X, bd.Y, z=None if prob.prompt else bd.z, W=fixed.get("W"),
                           p=fixed.get("p"), v=fixed.get("v"), head=prob.head, loss=loss,
                           reg=reg, scaled=scaled, mask=prob.mask)
