"""ℓp mirror maps, the normalised step, and :class:`LpMirrorDescent` for any torch model.

With :math:`\\psi(W)=\\frac1{p}\\|W\\|_p^p` (elementwise), the mirror map and its inverse are

.. math::

    \\nabla\\psi(W) = \\mathrm{sign}(W)\\odot|W|^{p-1},\\qquad
    \\nabla\\psi^{-1}(\\Theta) = \\mathrm{sign}(\\Theta)\\odot|\\Theta|^{1/(p-1)},

and one mirror-descent step is
:math:`W_{k+1} = \\nabla\\psi^{-1}(\\nabla\\psi(W_k) - \\eta_k\\nabla\\mathcal L(W_k))`, with
:math:`\\eta_k = \\eta/(\\|\\nabla\\mathcal L(W_k)\\|_q+\\varepsilon)`, :math:`q=p/(p-1)`, when
normalised. At p = 2 this is (normalised) gradient descent. See chapters 9 and 10.
"""

from __future__ import annotations

import math
import warnings

import torch

from attnlib._validate import flag, number
from attnlib.status import RunStatus, report

__all__ = ["mirror_map", "inverse_mirror_map", "lq_norm", "normalized_step",
           "normalized_step_zeros", "step_scale", "rows_within", "LpMirrorDescent"]


def _power(x: torch.Tensor, e: float) -> torch.Tensor:
    """:math:`\\mathrm{sign}(x)|x|^e`, elementwise; never NaN for non-NaN input.

    ``pow`` of a magnitude: 0 stays 0, ``inf`` stays ``inf``, and a result beyond the dtype's
    range is ``±inf`` (one below it is 0); no ``0 * inf`` arises. For ``e = 1/(p-1)`` with p
    near 1 the exponent is large (100 at p = 1.01), so a dual entry of 2.5 is already
    :math:`7\\cdot10^{39}`, beyond float32: that overflow is real (the primal value does not
    exist in the dtype), and :func:`attnlib.train` stops such a trial and flags it.
    """
    return torch.sign(x) * x.abs().pow(e)


def mirror_map(W: torch.Tensor, lp: float) -> torch.Tensor:
    """:math:`\\nabla\\psi(W) = \\mathrm{sign}(W)\\odot|W|^{p-1}` (primal to dual).

    The identity at p = 2. See chapter 9, *Mirror descent selects tokens too*.
    """
    return W if lp == 2 else _power(W, lp - 1.0)


def inverse_mirror_map(theta: torch.Tensor, lp: float) -> torch.Tensor:
    """Inverse map, dual to primal: :math:`\\mathrm{sign}(\\Theta)\\odot|\\Theta|^{1/(p-1)}`.

    Entries whose primal value exceeds the dtype's range come back as ``±inf`` (never NaN).
    See chapter 9.
    """
    return theta if lp == 2 else _power(theta, 1.0 / (lp - 1.0))


def lq_norm(g: torch.Tensor, q: float) -> torch.Tensor:
    """:math:`\\|g\\|_q` per row (B,), without underflow or overflow of :math:`|g|^q`.

    For large q (q = 101 at p = 1.01), or for large entries at any q (:math:`10^{21}` squared
    leaves float32), the sum :math:`\\sum_j |g_j|^q` leaves the dtype's range
    although the norm does not (in float32 an entry of 0.4 gives 0, one of 3 gives inf), and a
    zero norm makes a step of :math:`10^{35}`. The direct sum is kept where it is accurate (finite
    and at least :math:`\\max_j|g_j|`, as every ℓq norm is); elsewhere the norm is
    :math:`m\\,\\|g/m\\|_q` with :math:`m = \\max_j|g_j|`.
    """
    nrm = torch.linalg.vector_norm(g, ord=q, dim=1)
    m = g.abs().amax(dim=1)
    ok = torch.isfinite(nrm) & (nrm >= m * (1 - 16 * torch.finfo(g.dtype).eps))
    safe = torch.where(m > 0, m, torch.ones_like(m))
    scaled = safe * torch.linalg.vector_norm(g / safe.unsqueeze(1), ord=q, dim=1)
    return torch.where(ok, nrm, scaled)


def normalized_step(g: torch.Tensor, lr: float, q: float, eps: float, log_scale=None):
    """``lr * G / (||G||_q + eps)`` per row (trial), for ``G = g * exp(-log_scale)``.

    ``g`` may be a scaled gradient (see :func:`attnlib.models.logit_gradient`); the direction
    does not depend on the scale and ``eps`` is compared with the true norm in the log domain.
    Rows are scaled by their largest entry first (by an exact power of two when it is tiny, so
    no reciprocal overflows), so neither the norm nor the step under- or overflows: tiny and
    subnormal gradients give an accurate direction, a zero gradient gives a zero step, and a
    gradient whose norm exceeds the dtype's range (tokens of norm :math:`10^{7}` in float32
    give entries of :math:`10^{21}`, whose squares do) still moves the weights. A row with a
    non-finite entry gives a non-finite step, which :func:`attnlib.train` flags.

    Parameters
    ----------
    g : tensor (B, N)
        One flattened gradient per row.
    lr : float
    q : float
        The dual exponent of the norm (2 for gradient descent).
    eps : float
        Added to the true norm.
    log_scale : tensor (B,), optional
        ``g`` is the gradient times ``exp(log_scale)``.
    """
    return normalized_step_zeros(g, lr, q, eps, log_scale)[0]


def normalized_step_zeros(g, lr, q, eps, log_scale=None):
    """:func:`normalized_step`, and per row whether the gradient and the step are zero.

    Returns ``(step, g_zero, step_zero)``: ``g_zero`` (B,) is ``(g == 0).all(1)`` and
    ``step_zero`` (B,) is ``(step == 0).all(1)``, read off per-row scalars instead of the
    (B, N) entries. The largest entry of a row of ``g / max|g|`` is exactly 1 in magnitude, so
    the largest of the step's row is exactly ``lr / nrm``: the step is zero where ``g`` is or
    ``lr / nrm`` underflows, and NaN rows are neither (``amax`` propagates NaN).
    """
    step, c, g_zero = step_scale(g, lr, q, eps, log_scale)
    if g_zero is None:
        g_zero = torch.zeros_like(c, dtype=torch.bool)
    return step, g_zero, g_zero | (c == 0)


def step_scale(g, lr, q, eps, log_scale=None):
    """The normalised step of :func:`normalized_step` and what :func:`attnlib.train` checks
    per step: ``(step, c, g_zero)``.

    The step is :math:`c_b\\, g_b / \\max_j|g_{bj}|` with
    :math:`c_b = \\eta\\,\\max_j|G_{bj}| / (\\|G_b\\|_q + \\varepsilon)` (B,), the largest
    magnitude in the step's row where that row of ``g`` is non-zero and finite (zero where it
    underflows; finite for a zero row, whose step is zero). ``g_zero`` (B,) is
    ``(g == 0).all(1)``, or ``None`` when no row can be zero: on the CPU, when the smallest row
    maximum of ``g`` is at least :math:`\\sqrt{\\mathrm{tiny}}` (one scalar read instead of
    per-row tests; NaN rows take the general path).
    """
    m = g.abs().amax(dim=1)  # (B,)
    tiny = torch.finfo(g.dtype).tiny ** 0.5
    cpu = g.device.type == "cpu"
    boost = g_zero = None  # no row tiny (the usual case on the CPU, checked there): a boost of 1
    if cpu and float(m.amin()) >= tiny:  # every row's largest entry >= tiny > 0 (no NaN)
        safe = m
    else:
        small = m < tiny
        if not cpu or bool(small.any()):
            boost = torch.where(small, torch.full_like(m, 1.0 / tiny), torch.ones_like(m))
            g = g * boost.unsqueeze(1)  # exact: 1/tiny is a power of two
            m = m * boost
        safe = torch.where(m > 0, m, torch.ones_like(m))
        g_zero = m == 0
    gs = g / safe.unsqueeze(1)
    nrm = torch.linalg.vector_norm(gs, ord=q, dim=1)  # >= 1 where m > 0
    if eps > 0:
        log_true_max = torch.log(safe) if boost is None else torch.log(safe) - torch.log(boost)
        if log_scale is not None:
            log_true_max = log_true_max - log_scale
        nrm = nrm + torch.exp(torch.rsub(log_true_max, math.log(eps)))  # eps / true max
    # a zero row (nrm 0, eps = 0) takes a zero step: nrm >= 1 wherever m > 0, so a floor of 1
    # changes no other row, and lr / 1 stays finite (lr / tiny overflowed for lr above ~4)
    nrm = nrm.clamp_min(1.0)
    # (B,): the largest |entry| of each row of the step (where m > 0); lr / nrm, which for
    # a Python number is nrm.reciprocal() * lr (without the operator's wrapper)
    c = nrm.reciprocal() * lr if isinstance(lr, (int, float)) else lr / nrm
    return c.unsqueeze(1) * gs, c, g_zero


class LpMirrorDescent(torch.optim.Optimizer):
    """Elementwise ℓp mirror descent for any torch model.

    See chapter 10, *Mirror descent on real data*.

    .. math::

        \\Theta \\leftarrow \\Theta - \\eta\\,\\nabla\\mathcal L
        \\quad(\\text{or } \\eta\\,\\nabla\\mathcal L/\\|\\nabla\\mathcal L\\|_q),
        \\qquad w = \\mathrm{sign}(\\Theta)|\\Theta|^{1/(p-1)},\\qquad
        \\Theta = \\mathrm{sign}(w)|w|^{p-1}\\text{ initially.}

    The dual state :math:`\\Theta` is kept in the optimizer state (in float64 for float32 or
    lower-precision parameters), so entries that underflow in the primal are not lost. A step
    whose gradient is not finite, or whose update leaves the parameter dtype's finite range, is
    skipped as a whole and flagged (``nonfinite``, ``cause``, :attr:`status`, a
    ``RuntimeWarning``): the weights never turn NaN. If something else changes a
    parameter between steps, its dual is re-synchronised from the new value. At ``lp=2`` the step
    is exactly ``torch.optim.SGD``'s (without momentum).

    ``keep_dual=False`` is the optimizer of the paper's official code instead: no dual state,
    the dual point is recomputed from the weights, in their dtype, at every step. That loses
    what the weights cannot hold: at p = 1.1 in float32 a dual entry below about
    :math:`10^{-4.5}` maps to a primal value below float32's range, i.e. to exactly 0, whose
    dual is again exactly 0; an entry that crosses zero with a small step is trapped there
    until one gradient step alone moves it out (chapter 9, *Two ways to keep the dual*).

    Parameters
    ----------
    params : iterable of tensors or parameter groups
    lr : float > 0
    lp : float > 1
    normalized : bool
        Divide each tensor's gradient by its dual norm :math:`\\|g\\|_q`, :math:`q=p/(p-1)`.
    eps : float >= 0
        Added to the dual norm when normalising.
    keep_dual : bool
        Keep the dual point between steps (default), or recompute it from the weights at
        every step in the weights' dtype, as the paper's code does.

    Each of these may be set per parameter group (checked the same way, also when a scheduler
    changes it between steps).

    Attributes
    ----------
    steps_taken : int
        Calls of :meth:`step` so far.
    nonfinite : int
        The first skipped (non-finite) step, -1 if none; ``cause`` says why.
    """

    def __init__(self, params, lr, lp=2.0, normalized=False, eps=0.0, keep_dual=True):
        defaults = _checked_group(dict(lr=lr, lp=lp, normalized=normalized, eps=eps,
                                       keep_dual=keep_dual))
        self.steps_taken = 0
        self.nonfinite = -1
        self.cause = ""
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group; its own ``lr``, ``lp``, ``normalized``, ``eps``, ``keep_dual`` are
        checked like the constructor's (``ValueError`` naming the setting)."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            group.update(_checked_group(group))
        except ValueError:
            self.param_groups.pop()
            raise

    @property
    def status(self) -> RunStatus:
        """Whether the run stayed finite: see :class:`attnlib.status.RunStatus`."""
        bad = int(self.nonfinite >= 0)
        return RunStatus(runs=1, nonfinite=bad, first_nonfinite=self.nonfinite,
                         causes=(self.cause,) if bad else ())

    @torch.no_grad()
    def step(self, closure=None):
        """One step of every parameter with a gradient, or of none.

        A gradient with NaN or Inf entries, or an update that leaves the parameter dtype's
        finite range (the primal :math:`|\\Theta|^{1/(p-1)}` overflows for p near 1), skips
        the whole step: no parameter changes, ``nonfinite`` records the first such step and
        ``cause`` says why, and a ``RuntimeWarning`` is raised the first time. The weights
        are never written NaN, Inf or clamped.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        k, self.steps_taken = self.steps_taken, self.steps_taken + 1
        todo = []  # (w, new value, state, new dual): written only when every one is finite
        for group in self.param_groups:
            group.update(_checked_group(group))  # also after a scheduler changed it
            lr, lp, eps = group["lr"], group["lp"], group["eps"]
            q = lp / (lp - 1.0)
            for w in group["params"]:
                if w.grad is None:
                    continue
                g = w.grad
                if not bool(rows_within([g], 1)):
                    return self._skip(k, f"the gradient of a parameter of shape "
                                         f"{tuple(w.shape)} has NaN or Inf entries", loss)
                if lp == 2.0 and not group["normalized"]:
                    todo.append((w, w.add(g, alpha=-lr), None, None))  # SGD's update
                    continue
                if group["normalized"]:
                    step = normalized_step(g.reshape(1, -1), lr, q, eps).view_as(g)
                else:
                    step = lr * g
                st, theta = None, None
                if lp == 2.0:
                    new = w - step
                elif not group["keep_dual"]:  # the paper's code: dual from w, in its dtype
                    new = inverse_mirror_map(mirror_map(w.detach(), lp) - step.to(w.dtype), lp)
                else:
                    st = self.state[w]
                    if "theta" in st and torch.equal(st["last"], w):
                        theta = st["theta"]
                    else:  # new, or changed by something else: re-synchronise
                        work = torch.float64 if w.dtype != torch.float64 else w.dtype
                        theta = mirror_map(w.detach().to(work), lp)
                    theta = theta - step.to(theta.dtype)
                    new = inverse_mirror_map(theta, lp)
                big = torch.finfo(w.dtype).max
                if not bool(rows_within([new], 1, big)):  # NaN, Inf or beyond w's dtype
                    return self._skip(k, f"the update of a parameter of shape {tuple(w.shape)} "
                                         f"leaves {w.dtype}'s range (lp={lp:g}, lr={lr:g})",
                                      loss)
                todo.append((w, new, st, theta))
        for w, new, st, theta in todo:
            w.copy_(new)
            if st is not None:
                st["theta"] = theta
                st["last"] = w.detach().clone()
        return loss

    def _skip(self, k: int, cause: str, loss):
        if self.nonfinite < 0:
            self.nonfinite, self.cause = k, cause
            warnings.warn(f"LpMirrorDescent: step {k} skipped: {cause}; the weights keep their "
                          f"last finite values (see .status)", RuntimeWarning, stacklevel=5)
            report(self.status)
        return loss


def rows_within(tensors, rows: int, bound: float = math.inf) -> torch.Tensor:
    """(rows,) bool: every entry of row b of every tensor (each read as ``(rows, -1)``) is
    finite (``bound`` = inf) or has :math:`|t| \\le` ``bound``; never for NaN. The trainers'
    per-step checks: :func:`attnlib.train` per trial, :class:`LpMirrorDescent` per parameter
    (``rows`` = 1). One ``abs().amax`` per tensor and row (``amax`` propagates NaN): cheaper
    per step than ``isfinite(t).all(1)``, which passes over the entries twice and makes a
    boolean tensor the size of ``t``."""
    ok, device = None, None
    for t in tensors:
        device = t.device
        if t.numel() == 0:  # no entry to break the rule
            continue
        top = t.reshape(rows, -1).abs().amax(1)
        f = torch.isfinite(top) if bound == math.inf else top <= bound
        ok = f if ok is None else ok & f
    if ok is None:
        ok = torch.ones(rows, dtype=torch.bool, device=device)
    return ok


def _checked_group(group: dict) -> dict:
    """A parameter group's settings, checked: lr > 0, lp > 1, eps >= 0, two booleans."""
    out = dict(lr=number("lr", group["lr"], lo=0, lo_open=True),
               lp=number("lp", group["lp"], lo=1, lo_open=True),
               eps=number("eps", group["eps"], lo=0))
    for name in ("normalized", "keep_dual"):
        out[name] = flag(name, group[name])
    return out
