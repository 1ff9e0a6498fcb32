"""Input checks: one home, one error style.

Every public function of attnlib checks its arguments here and raises
``ValueError("name: expected ..., got ...")``, naming the argument and what was expected.
Numbers may be Python, numpy or torch (0-dim) scalars; booleans are never numbers.

This module is package-internal: other attnlib modules import its public names
(``from attnlib._validate import number``); users never need it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

__all__ = ["as_tensor", "number", "choice", "labels", "shape", "to_numpy", "scalar", "seed",
           "SEED_MAX"]

SEED_MAX = 2**64 - 1
"""The largest seed a ``torch.Generator`` takes (``number("seed", s, lo=0, hi=SEED_MAX)``)."""

_REAL_INT = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)


def scalar(x):
    """Python number for a Python/numpy/torch real scalar; ``None`` for anything else.

    Booleans (Python, numpy or torch) are not numbers here and give ``None``.
    """
    if isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, torch.Tensor):
        if x.ndim != 0 or x.dtype == torch.bool or x.is_complex():
            return None
        return x.item()
    if isinstance(x, np.ndarray):
        if x.ndim != 0 or x.dtype == np.bool_ or not np.issubdtype(x.dtype, np.number) \
                or np.iscomplexobj(x):
            return None
        return x.item()
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return float(x)
    return None


def number(name: str, x, lo=None, lo_open: bool = False, hi=None, integer: bool = False):
    """Check a finite real number, optionally an integer and within bounds.

    Parameters
    ----------
    name : str
        The argument's name, used in the error message.
    x : int, float, numpy or torch 0-dim scalar
        The value (``bool`` is rejected).
    lo, hi : number, optional
        Bounds: ``lo <= x`` (``lo < x`` with ``lo_open``) and ``x <= hi``.
    integer : bool
        Require an integral value (``3`` or ``3.0``); the result is then an ``int``.

    Returns
    -------
    float or int

    Raises
    ------
    ValueError
        ``"name: expected a finite number >= lo, got x"``.
    """
    v = scalar(x)
    ok = v is not None and math.isfinite(v)
    if ok and integer:
        ok = float(v).is_integer()
    if ok and lo is not None:
        ok = v > lo if lo_open else v >= lo
    if ok and hi is not None:
        ok = v <= hi
    if not ok:
        kind = "an int" if integer else "a finite number"
        bounds = []
        if lo is not None:
            bounds.append(f"{'>' if lo_open else '>='} {lo}")
        if hi is not None:
            bounds.append(f"<= {hi}")
        bound = (" " + " and ".join(bounds)) if bounds else ""
        raise ValueError(f"{name}: expected {kind}{bound}, got {x!r}")
    return int(v) if integer else float(v)


def seed(x, name: str = "seed", count: int = 1) -> int:
    """Check a random seed: an int with ``0 <= x`` and ``x + count - 1 <= SEED_MAX``.

    ``count`` seeds ``x, x+1, ..., x+count-1`` are drawn from it (one per trial), each a
    ``torch.Generator`` seed; all of them must fit in 64 bits.

    Raises
    ------
    ValueError
        ``"seed: expected an int >= 0 and <= 18446744073709551615, got -1"``.
    """
    count = number("trials", count, lo=1, integer=True)
    return number(name, x, lo=0, hi=SEED_MAX - (count - 1), integer=True)


def flag(name: str, x) -> bool:
    """Check that ``x`` is ``True`` or ``False`` (a Python bool); return it.

    Raises
    ------
    ValueError
        ``"name: expected True or False, got x"``.
    """
    if not isinstance(x, bool):
        raise ValueError(f"{name}: expected True or False, got {x!r}")
    return x


def choice(name: str, x, options):
    """Check that ``x`` is one of ``options``; return the matching option.

    Strings match strings only; numbers match by value (numpy/torch scalars included, booleans
    only booleans); anything else (``None``) by identity or ``==``.

    Raises
    ------
    ValueError
        ``"name: expected one of (...), got x"``.
    """
    options = tuple(options)
    xs = scalar(x)
    for o in options:
        if isinstance(o, str) or isinstance(x, str):
            if isinstance(o, str) and isinstance(x, str) and x == o:
                return o
        elif isinstance(o, bool) or isinstance(x, (bool, np.bool_)):
            if x is o or (isinstance(x, (bool, np.bool_)) and isinstance(o, bool) and
                          bool(x) == o):
                return o
        elif xs is not None and scalar(o) is not None:
            if xs == scalar(o):
                return o
        elif x is o:
            return o
    raise ValueError(f"{name}: expected one of {options}, got {x!r}")


def as_tensor(x, name: str, dtype=None, device=None) -> torch.Tensor:
    """Convert numpy arrays, lists, scalars or tensors to a floating tensor, checking finiteness.

    Integer and boolean input becomes float64 (unless ``dtype`` is given); floating input keeps
    its dtype and device unless ``dtype``/``device`` ask otherwise.

    Raises
    ------
    ValueError
        ``"name: expected a tensor or array of numbers, got ..."`` or
        ``"name: contains NaN or Inf"``.
    """
    if isinstance(x, torch.Tensor):
        t = x
    else:
        what = f"{name}: expected a tensor or array of numbers, got {type(x).__name__}"
        try:
            a = np.asarray(x)
            if a.dtype == object and any(v is None for v in a.flat):  # not NaN: missing
                raise ValueError(what)
            t = torch.as_tensor(a.astype(np.float64))
        except (TypeError, ValueError) as err:
            raise ValueError(what) from err
    if not (t.is_floating_point() or t.dtype in _REAL_INT):
        raise ValueError(f"{name}: expected real numbers, got dtype {t.dtype}")
    if dtype is None and not t.is_floating_point():
        dtype = torch.float64
    t = t.to(device=device if device is not None else t.device, dtype=dtype or t.dtype)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name}: contains NaN or Inf")
    return t


def labels(name: str, Y: torch.Tensor) -> torch.Tensor:
    """Check that every label is -1 or +1; return ``Y``.

    Raises
    ------
    ValueError
        ``"Y: expected labels in {-1, +1}, got ..."`` showing up to three offending values.
    """
    bad = ~((Y == 1) | (Y == -1))
    if bool(bad.any()):
        vals = torch.unique(Y[bad].detach().cpu())[:3].tolist()
        raise ValueError(f"{name}: expected labels in {{-1, +1}}, got values such as {vals}")
    return Y


def shape(name: str, t, expected: str, ndim=None, size=None):
    """Check a tensor's number of dimensions and/or its shape; return ``t``.

    Parameters
    ----------
    name : str
        The argument's name.
    t : tensor or array
    expected : str
        How the expected shape reads in the message, e.g. ``"(n,T,d) or (B,n,T,d)"``.
    ndim : int or tuple of int, optional
        Allowed numbers of dimensions.
    size : tuple, optional
        The exact shape; ``None`` entries match any length.

    Raises
    ------
    ValueError
        ``"X: expected shape (n,T,d) or (B,n,T,d), got (3, 4)"``.
    """
    got = tuple(t.shape)
    ok = True
    if ndim is not None:
        ok = len(got) in ((ndim,) if isinstance(ndim, int) else tuple(ndim))
    if ok and size is not None:
        ok = len(got) == len(size) and all(s is None or s == g for s, g in zip(size, got))
    if not ok:
        raise ValueError(f"{name}: expected shape {expected}, got {got}")
    return t


def to_numpy(x) -> np.ndarray:
    """A numpy array for a tensor (detached, on the CPU), an array or a sequence."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)
