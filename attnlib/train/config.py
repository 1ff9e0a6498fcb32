"""The settings of one training run, validated in one place: :class:`TrainConfig`.

See chapters 2 (GD), 5 (W vs (K,Q)), 8 (sequences) and 9 (mirror descent).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from attnlib import models as M
from attnlib._validate import choice, flag, number
from attnlib._validate import seed as check_seed

__all__ = ["TrainConfig", "PARAMS", "METHODS"]

PARAMS = ("W", "KQ", "p", "v", "W+v", "p+v")
"""What :func:`attnlib.train` can train (see :class:`TrainConfig`)."""
METHODS = ("gd", "md")
"""Gradient descent, or ℓp mirror descent."""


@dataclass(frozen=True)
class TrainConfig:
    """How to train: a frozen, validated record of :func:`attnlib.train`'s settings.

    Numbers may be Python, numpy or torch scalars; they are stored as Python ``float``/``int``.
    Bad values raise ``ValueError`` naming the field.

    Attributes
    ----------
    param : {"W", "KQ", "p", "v", "W+v", "p+v"}
        What is trained (``"p"``/``"p+v"``: the prompt model; ``"v"``: the head alone).
    method : {"gd", "md"}
        Gradient descent, or ℓp mirror descent with exponent ``lp``.
    lr : float > 0
    steps : int >= 0
    normalized : bool
        Divide each tensor's gradient by its (dual ℓq) norm plus ``eps``.
    lp : float > 1
        Mirror-descent exponent (``gd`` requires 2).
    loss : {"logistic", "exp", "correlation"}
    head : str or head object
        ``"linear"``, ``"relu"``, ``"lambda"``, ``"mlp"`` or an :mod:`attnlib.models` head.
    reg : float >= 0
        The (K,Q) penalty :math:`\\lambda(\\|K\\|_F^2+\\|Q\\|_F^2)` (``param="KQ"`` only).
    eps : float >= 0
        The ε of the normalisation.
    record_every : int >= 1
        Record iterates 0, r, 2r, ... and the last one.
    seed : int
        Seed of the default random initialisation, ``0 <= seed < 2**64`` (a torch seed).
    progress : bool
        Show a tqdm progress bar.
    """

    param: str = "W"
    method: str = "gd"
    lr: float = 0.1
    steps: int = 1000
    normalized: bool = True
    lp: float = 2.0
    loss: str = "logistic"
    head: object = "linear"
    reg: float = 0.0
    eps: float = 0.0
    record_every: int = 10
    seed: int = 0
    progress: bool = False

    def __post_init__(self):
        fix = {
            "param": choice("param", self.param, PARAMS),
            "method": choice("method", self.method, METHODS),
            "lr": number("lr", self.lr, lo=0, lo_open=True),
            "steps": number("steps", self.steps, lo=0, integer=True),
            "lp": number("lp", self.lp, lo=1, lo_open=True),
            "loss": choice("loss", self.loss, M.LOSSES),
            "reg": number("reg", self.reg, lo=0),
            "eps": number("eps", self.eps, lo=0),
            "record_every": number("record_every", self.record_every, lo=1, integer=True),
            "seed": check_seed(self.seed),
        }
        for name in ("normalized", "progress"):
            flag(name, getattr(self, name))
        if fix["method"] == "gd" and fix["lp"] != 2.0:
            raise ValueError(f"lp: method 'gd' is the case lp=2; use method='md' for "
                             f"lp={fix['lp']}")
        if fix["reg"] and fix["param"] != "KQ":
            raise ValueError(f"reg: the (K,Q) penalty applies to param='KQ' only, got "
                             f"param={fix['param']!r}")
        for k, v in fix.items():
            object.__setattr__(self, k, v)

    @property
    def mirror(self) -> bool:
        """True when the dual state differs from the primal (md with lp != 2)."""
        return self.method == "md" and self.lp != 2.0

    @property
    def q(self) -> float:
        """The dual exponent of the normalisation: p/(p-1) for md, 2 for gd."""
        return self.lp / (self.lp - 1.0) if self.method == "md" else 2.0

    def replace(self, **changes) -> TrainConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def settings(self) -> dict:
        """The fields as a plain dict (the head by its name), as in ``TrainResult.settings``."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out.pop("progress")
        if not isinstance(self.head, str):
            out["head"] = self.head.name
        return out
