"""The verdict of a check (:class:`Feedback`), strict mode, and the helpers every check uses.

Strict mode: ``al.check.strict(True)`` makes every failed check raise ``AssertionError``;
``Feedback(..., strict=True)`` does it for one check. Its default comes from the environment
variable ``ATTNLIB_CHECK_STRICT`` (``1``: on), read in one place, :func:`is_strict`, so that a
grader (``scripts/assignments.py``, the notebook tests) can switch it on for a whole run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["Feedback", "strict", "is_strict", "STRICT_ENV", "DTYPE", "answer_tensor",
           "reference", "one_instance", "fail", "position"]

DTYPE = torch.float64  # every check computes in float64 on the CPU
STRICT_ENV = "ATTNLIB_CHECK_STRICT"  # "1": failed checks raise (the grader's switch)
_STRICT = {"on": None}  # set by strict(); None: follow STRICT_ENV


def strict(on=None) -> bool:
    """Switch strict mode on or off (``None``: leave it); returns whether it is on.

    In strict mode every failed check raises ``AssertionError`` with its message.
    ``strict(None)`` after ``strict(True|False)`` keeps the setting; the environment
    variable ``ATTNLIB_CHECK_STRICT`` is the default until ``strict`` is first called with a
    bool.
    """
    if on is not None:
        if not isinstance(on, bool):
            raise ValueError(f"on: expected True, False or None, got {on!r}")
        _STRICT["on"] = on
    return is_strict()


def is_strict() -> bool:
    """Whether failed checks raise: the value set by :func:`strict`, else the environment
    variable ``ATTNLIB_CHECK_STRICT`` (set and not ``"0"``): the one place it is read."""
    if _STRICT["on"] is not None:
        return _STRICT["on"]
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


@dataclass
class Feedback:
    """The verdict of one check: ``bool(fb)`` is whether the answer is right.

    Attributes
    ----------
    ok : bool
        Whether the answer passed.
    title : str
        What was checked, e.g. ``"Att-SVM direction"``.
    message : str
        What is right, or precisely what is wrong.
    details : dict
        The numbers behind the message (margins, correlation, ...), for graders.
    strict : bool, optional
        Raise ``AssertionError`` at creation when the answer failed; default
        :func:`is_strict`.
    """

    ok: bool
    title: str
    message: str
    details: dict = field(default_factory=dict)
    strict: bool | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if not self.ok and (is_strict() if self.strict is None else self.strict):
            raise AssertionError(str(self))

    def __bool__(self) -> bool:
        return bool(self.ok)

    def __str__(self) -> str:
        mark = "✓ correct" if self.ok else "✗ not yet"
        return f"{mark} ({self.title}): {self.message}"

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        mark = "✓ **Correct**" if self.ok else "✗ **Not yet**"
        esc = lambda t: "".join("\\" + c if c in "\\*_`[]<>#|" else c for c in t)
        return f"{mark} ({esc(self.title)}): {esc(self.message)}"


# -- helpers shared by the checks --------------------------------------------------------
def answer_tensor(x, name, dtype=DTYPE):
    """The answer as a CPU tensor, or an error string for the feedback."""
    if x is None:
        return None, f"{name} is None: you have not answered yet (replace the stub above)."
    try:
        # numpy first: torch.as_tensor reads a list of Python floats in float32
        t = torch.as_tensor(x.detach() if hasattr(x, "detach") else np.asarray(x))
    except (TypeError, ValueError, RuntimeError) as e:
        return None, f"{name} could not be read as an array ({e})."
    if t.is_complex():
        return None, f"{name} must be real, got dtype {t.dtype}."
    if dtype is not None:
        t = t.to(device="cpu", dtype=dtype)
        if not torch.isfinite(t).all():
            return None, f"{name} contains NaN or Inf."
    return t.cpu(), None


def reference(x, name):
    """A reference argument (not the learner's answer) as a float64 CPU tensor."""
    x = x.detach() if hasattr(x, "detach") else np.asarray(x, dtype=np.float64)
    return torch.as_tensor(x).to("cpu", DTYPE)


def one_instance(data):
    """``data`` on the CPU in float64, checked to be one instance (no trials dimension)."""
    if not (hasattr(data, "X") and hasattr(data, "Y")):
        raise ValueError(f"data must be an attnlib.AttentionData, got {type(data).__name__}")
    if getattr(data, "B", None) is not None or torch.as_tensor(data.X).dim() != 3:
        raise ValueError("data must hold one instance (X of shape (n,T,d)); take one trial "
                         "first: data.trial(b)")
    return data.to(device="cpu", dtype=DTYPE) if hasattr(data, "to") else data


def fail(title, message, **details):
    return Feedback(False, title, message, details)


def position(index, names=None) -> str:
    """A place in an array as the text counts it (from 1), with its Python index (from 0).

    ``position((1, 2), ("sample", "token"))`` is ``"sample 2, token 3 (Python index [1, 2])"``;
    without ``names``, ``position((0, 1))`` is ``"entry (1, 2) (Python index [0, 1])"``.
    """
    idx = tuple(int(u) for u in (index if isinstance(index, (tuple, list)) else (index,)))
    py = "[" + ", ".join(map(str, idx)) + "]"
    if names is None:
        return f"entry ({', '.join(str(u + 1) for u in idx)}) (Python index {py})"
    return ", ".join(f"{n} {u + 1}" for n, u in zip(names, idx)) + f" (Python index {py})"
