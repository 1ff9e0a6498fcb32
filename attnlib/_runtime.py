"""Runtime policy: the default device, dtype checks, and the thread policy for tiny problems.

One device default for the whole package: :func:`default_device` (``$ATTNLIB_DEVICE`` when
set, else CUDA when available, else CPU). One floating default: float64. One thread policy:
:func:`few_threads`.

This module is package-internal: other attnlib modules import its public names.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys

import torch

try:  # installed with scikit-learn; optional
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover
    ThreadpoolController = None

__all__ = ["default_device", "resolve_device", "resolve_dtype", "few_threads",
           "one_blas_thread", "SMALL_WORK"]

#: Below this many elementary operations per step a CPU problem runs on one thread.
SMALL_WORK = 2e5


#: The environment variable that overrides :func:`default_device` (``cpu``, ``cuda``, ``cuda:1``).
DEVICE_ENV = "ATTNLIB_DEVICE"


def default_device() -> torch.device:
    """The book's default device, the ONE default: ``$ATTNLIB_DEVICE`` when it is set, else
    CUDA when available, else CPU.

    ``ATTNLIB_DEVICE=cpu`` on a GPU machine reproduces the book's own numbers, which were
    computed on a CPU (a GPU rounds differently); every chapter sets it so. An empty value is
    unset.

    Raises
    ------
    ValueError
        If ``$ATTNLIB_DEVICE`` is not ``cpu``, ``cuda``, ``cuda:<n>`` or ``mps``, or names a
        GPU this machine does not have.
    """
    named = os.environ.get(DEVICE_ENV, "").strip()
    if not named:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = resolve_device(named)
    except ValueError as err:
        raise ValueError(f"{DEVICE_ENV}={named!r}: {err}") from None
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"{DEVICE_ENV}={named!r}: expected cpu, cuda, cuda:<n> or mps")
    return dev


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
        raise ValueError(f"device: expected an available device, got {device!r} "
                         "(CUDA is not available here)")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device: expected one of {torch.cuda.device_count()} GPUs, "
                         f"got {device!r}")
    return dev


def resolve_dtype(dtype=None) -> torch.dtype:
    """Validate a floating dtype (a torch dtype or its name); ``None`` gives float64."""
    if dtype is None:
        return torch.float64
    given = dtype
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(
            f"dtype: expected a floating torch dtype such as torch.float64, got {given!r}")
    return dtype


_BLAS = {"controller": None, "modules": -1}


def _one_blas_thread_limit():
    """A context limiting every loaded BLAS to one thread (a no-op without threadpoolctl).

    Scanning the loaded libraries costs ~15 ms; the scan is cached and redone only when new
    Python modules (which may bring a BLAS, e.g. scipy under cvxpy) have been imported.
    """
    if ThreadpoolController is None:  # pragma: no cover
        return contextlib.nullcontext()
    if _BLAS["controller"] is None or _BLAS["modules"] != len(sys.modules):
        _BLAS["controller"] = ThreadpoolController()
        _BLAS["modules"] = len(sys.modules)
    return _BLAS["controller"].limit(limits=1, user_api="blas")


@contextlib.contextmanager
def few_threads(work=None, device=None):
    """Run a tiny CPU problem on one thread (torch intra-op and BLAS), restoring after.

    For the book's tensors, thread synchronisation costs far more than it saves: on a loaded
    2-core machine a training step was ~50x slower with 2 threads than with 1, a tiny softmax
    100x, and a 300x75 QR inside a cvxpy solve took 0.5 s instead of 3 ms.

    Parameters
    ----------
    work : float, optional
        Size of the problem (elementary operations per step); at or above
        :data:`SMALL_WORK` the thread settings are left alone. ``None``: small.
    device : torch.device or str, optional
        Only CPU work is limited; ``None`` means CPU.

    Usable as a context manager (``with few_threads(work, dev): ...``) and as a decorator
    (``@few_threads()``).
    """
    active = (device is None or torch.device(device).type == "cpu") and \
        (work is None or work < SMALL_WORK)
    if not active:
        yield
        return
    saved = torch.get_num_threads()
    blas = _one_blas_thread_limit()
    torch.set_num_threads(1)
    try:
        with blas:
            yield
    finally:
        torch.set_num_threads(saved)


def one_blas_thread(fn):
    """Decorator: run ``fn`` under :func:`few_threads` (for the small cvxpy solves)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with few_threads():
            return fn(*args, **kwargs)

    return wrapper
