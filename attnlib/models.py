"""Models: logits, softmax, heads, losses and their analytic gradients (pure tensor functions).

One-layer softmax attention with query :math:`z_i` (chapter 1, *Attention as token selection*):

.. math::

    a_{it} = x_{it}^\\top W z_i,\\qquad s_i = \\mathrm{softmax}(a_i),\\qquad
    h_i = X_i^\\top s_i,\\qquad f_i = \\psi(h_i),\\qquad
    \\mathcal L = \\frac1n\\sum_i \\ell(Y_i f_i).

The linear head is :math:`\\psi(h) = v^\\top h`; ``W = K Q^T`` for the (K,Q) model and
:math:`z_i = p` for the prompt model. Every function accepts any number of leading (trials)
dimensions, shared by all arguments.

The forward model lives in ``attnlib.attention``, the gradient of the risk (one
batched, saturation-safe implementation) in ``attnlib.gradient``; this module is their
public face.

Numerics deep into saturation
-----------------------------
With token values :math:`g_{it} = x_{it}^\\top \\nabla\\psi(h_i)` the logit derivative is
:math:`\\partial f_i/\\partial a_{it} = s_{it}(g_{it} - f_i)` for the linear head. Once the
softmax is saturated, :math:`g_{it}-f_i` is a difference of nearly equal numbers and is lost
to rounding. We use the equal form
:math:`s_{it}\\sum_\\tau s_{i\\tau}(g_{it}-g_{i\\tau})`, whose differences are between token
values (order one), and a log-softmax for :math:`s`; the tiny probabilities are then exact to
relative rounding and a gradient is either accurate or exactly zero.
"""

from __future__ import annotations

from attnlib.attention import (
    LOSSES,
    LambdaHead,
    LinearHead,
    MLPHead,
    ReluHead,
    attend,
    log_softmax,
    logits,
    logits_kq,
    logits_prompt,
    loss_derivative,
    loss_log_abs_derivative,
    loss_value,
    make_head,
    output,
    risk,
    softmax,
)
from attnlib.gradient import (
    grad_KQ,
    grad_p,
    grad_v,
    grad_W,
    logit_gradient,
    risk_gradient,
)

__all__ = [
    "LOSSES",
    "logits",
    "logits_kq",
    "logits_prompt",
    "softmax",
    "log_softmax",
    "attend",
    "LinearHead",
    "ReluHead",
    "LambdaHead",
    "MLPHead",
    "make_head",
    "output",
    "loss_value",
    "loss_derivative",
    "loss_log_abs_derivative",
    "risk",
    "logit_gradient",
    "risk_gradient",
    "grad_W",
    "grad_KQ",
    "grad_p",
    "grad_v",
]
