"""The gradient of the risk: one batched, saturation-safe implementation
(:func:`risk_gradient`), the ``grad_*`` functions thin views of it (the public names are read
from :mod:`attnlib.models`).

Deep into saturation it uses the form of the logit derivative whose differences are between
token values, and a log-softmax, so that a gradient is either accurate or exactly zero
(``attnlib.models``: *Numerics deep into saturation*).
"""

from __future__ import annotations

import math

import torch

from attnlib.attention import (
    LinearHead,
    attend,
    log_softmax,
    logits,
    loss_derivative,
    loss_log_abs_derivative,
    loss_value,
    mat_vec,
    vec_mat,
)

_OFF_DIAG = {}


def _off_diagonal(T, dtype, device):
    """(T, T) additive mask: 0 off the diagonal, -inf on it (cached)."""
    key = (T, dtype, device)
    if key not in _OFF_DIAG:
        eye = torch.eye(T, dtype=torch.bool, device=device)
        _OFF_DIAG[key] = torch.zeros(T, T, dtype=dtype, device=device).masked_fill(
            eye, float("-inf"))
    return _OFF_DIAG[key]


def _fits(shape, into) -> bool:
    """``shape`` broadcasts to ``into`` without enlarging it (a plain check: the cost of
    ``torch.broadcast_shapes`` would be a sizeable part of a small training step)."""
    return len(shape) <= len(into) and all(a in (1, b) for a, b in zip(reversed(shape),
                                                                      reversed(into)))


def logit_gradient(X, Y, a, v=None, head=None, loss="logistic", scaled=False, values=None,
                   pair_diff=None, extras=True, y_weight=None):
    """Gradient of the risk with respect to the logits, and the forward quantities.

    .. math::

        \\frac{\\partial\\mathcal L}{\\partial a_{it}} = \\frac1n \\ell'(Y_i f_i) Y_i
        \\sum_\\tau s_{it}s_{i\\tau}(g_{it}-g_{i\\tau}),\\qquad
        g_{it} = x_{it}^\\top\\nabla\\psi(h_i).

    The pair weights :math:`|\\ell'_i| s_{it}s_{i\\tau}` are formed in the log domain. With
    ``scaled=True`` they are multiplied by :math:`e^{K}`, :math:`K` chosen per trial (leading
    index) so that the largest weight is 1: the returned ``"da"`` is then
    :math:`e^{K}\\,\\partial\\mathcal L/\\partial a` and never underflows, however saturated the
    softmax (the normalised step only needs the direction). ``"log_scale"`` is :math:`K`
    (0 when not scaled).

    ``values`` (and optionally ``pair_diff`` = :math:`g_{it}-g_{i\\tau}`): the token values
    :math:`g_{it}=v^\\top x_{it}` of a fixed linear head, precomputed (the trainer's fast path);
    ``"h"`` is then ``None``. ``extras=False`` skips ``"lprime"`` and ``"loss"``;
    ``y_weight``: :math:`-Y_i/n` as (..., n, 1), if precomputed.

    Returns
    -------
    dict with ``"da"`` (..., n, T), ``"log_scale"`` (...), ``"s"``, ``"h"``, ``"f"``, ``"u"``
    (..., n) and, with ``extras``, ``"lprime"`` (..., n) and ``"loss"`` (...).
    """
    ls = log_softmax(a)
    s = torch.exp(ls)
    if values is None:
        head = head or LinearHead()
        h = attend(X, s)
        f = head.value(h, v)
        gh = head.grad(h, v)
        g = mat_vec(X, gh, "...ntd,...nd->...nt")  # token values x_it^T grad psi(h_i)
    else:
        h, g = None, values
        f = (s * g).sum(-1)
    if pair_diff is None:
        pair_diff = g.unsqueeze(-1) - g.unsqueeze(-2)  # g_t - g_tau
    u = Y * f
    la = loss_log_abs_derivative(u, loss)  # log|l'(u_i)|
    lw = ls.unsqueeze(-1) + (ls + la.unsqueeze(-1)).unsqueeze(-2)  # (..., n, T, T)
    # a fresh tensor: updated in place (the same values, no new (..., n, T, T) buffers) unless
    # autograd tracks it or pair_diff would broadcast it to a larger shape
    inplace = not lw.requires_grad and _fits(pair_diff.shape, lw.shape)
    off = _off_diagonal(a.shape[-1], a.dtype, a.device)
    lw = lw.add_(off) if inplace else lw + off
    if scaled and a.shape[-1] > 1:
        top = lw.flatten(-3).amax(-1)  # (...,): the largest pair weight, finite for T > 1
        lw = lw.sub_(top[..., None, None, None]) if inplace else lw - top[..., None, None, None]
        K = -top
    else:
        K = torch.zeros(a.shape[:-2], dtype=a.dtype, device=a.device)
    w = lw.exp_().mul_(pair_diff) if inplace else torch.exp(lw) * pair_diff
    coef = w.sum(-1)  # (..., n, T)
    if y_weight is None:
        y_weight = (-Y / X.shape[-3]).unsqueeze(-1)
    da = coef * y_weight  # l' < 0 for every loss
    out = {"da": da, "log_scale": K, "s": s, "h": h, "f": f, "u": u}
    if extras:
        out["lprime"] = loss_derivative(u, loss)
        out["loss"] = loss_value(u, loss).mean(-1)
    return out


def risk_gradient(X, Y, *, z=None, W=None, p=None, v=None, head=None, loss="logistic", reg=0.0,
                  scaled=False, mask=None):
    """The gradient of the risk in every trained tensor: the one implementation, as a closure.

    .. math::

        \\nabla_W\\mathcal L = \\sum_{i,t}\\frac{\\partial\\mathcal L}{\\partial a_{it}}
        x_{it}z_i^\\top,\\qquad
        \\nabla_p\\mathcal L = W^\\top\\sum_{i,t}\\frac{\\partial\\mathcal L}{\\partial a_{it}}
        x_{it},\\qquad
        \\nabla_v\\mathcal L = \\frac1n\\sum_i \\ell'(Y_if_i)Y_i X_i^\\top s_i,

    and at :math:`W = KQ^\\top` with the penalty :math:`\\lambda(\\|K\\|_F^2+\\|Q\\|_F^2)`,
    :math:`\\nabla_K = (\\nabla_W\\mathcal L)Q + 2\\lambda K`,
    :math:`\\nabla_Q = (\\nabla_W\\mathcal L)^\\top K + 2\\lambda Q`; the logit derivatives
    come from :func:`logit_gradient` (log-domain pair weights, saturation-safe).

    The fixed tensors are given here: ``z`` (..., n, d) the queries of cross- or
    self-attention, or, for the prompt model (``z=None``), ``W`` the fixed matrix (a fixed
    ``W`` also serves when only ``v`` is trained); ``p`` a fixed prompt; ``v`` a fixed linear
    head (``None`` when ``v`` is trained); ``mask`` (..., n, T) the visible tokens (hidden
    ones get logit :math:`-\\infty`). Leading dimensions broadcast.

    Returns
    -------
    grads(P, extras=False, a=None) -> (G, K, out)
        ``P``: the trained tensors, any of ``"W"``, ``"KQ"`` (``K`` and ``Q`` stacked,
        (..., 2, d, m)), ``"p"``, ``"v"``; ``a``: logits, if already known. ``G[name]`` is the
        gradient times :math:`e^{K[name]}` (``K`` = 0 unless ``scaled``: then the largest
        pair weight of each trial is 1, so the direction never underflows); ``out`` the
        forward quantities of :func:`logit_gradient` with ``out["W"]`` the combined matrix.

    See chapters 2, 4, 5 and 9.
    """
    head = head or LinearHead()
    n, T, d = X.shape[-3:]
    values = diff = None
    if isinstance(head, LinearHead) and v is not None:  # fixed token values g = X v
        values = torch.einsum("...ntd,...d->...nt", X, v)
        diff = values.unsqueeze(-1) - values.unsqueeze(-2)
    y_weight = (-Y / n).unsqueeze(-1)  # (..., n, 1)
    feats = keys = None
    if z is None and W is not None:  # prompt keys W^T x_it, (..., nT, d)
        keys = (X @ W.unsqueeze(-3)).flatten(-3, -2)
    elif z is not None and X.numel() * d <= 3e4:  # tiny: x_it z_i^T flattened, (..., nT, d*d)
        feats = (X.unsqueeze(-1) * z.unsqueeze(-2).unsqueeze(-2)).flatten(-4, -3).flatten(-2)
    hidden = None if mask is None else ~torch.as_tensor(mask, dtype=torch.bool,
                                                        device=X.device)

    def grads(P, extras=False, a=None):
        pv = P.get("p", p)
        Wc = P["KQ"][..., 0, :, :] @ P["KQ"][..., 1, :, :].mT if "KQ" in P else P.get("W", W)
        if a is None and keys is not None:
            a = (keys @ pv.unsqueeze(-1)).unflatten(-2, (n, T)).squeeze(-1)
        elif a is None:
            a = ((feats @ Wc.flatten(-2).unsqueeze(-1)).unflatten(-2, (n, T)).squeeze(-1)
                 if feats is not None else logits(X, Wc, z))
        if hidden is not None:
            a = a.masked_fill(hidden, -math.inf)
        vv = P.get("v", v)
        out = logit_gradient(X, Y, a, vv, head, loss, scaled=scaled, values=values,
                             pair_diff=diff, extras=extras, y_weight=y_weight)
        G, K = {}, {}
        if {"W", "KQ", "p"} & set(P):
            da, k = out["da"].flatten(-2).unsqueeze(-1), out["log_scale"]  # (..., nT, 1)
            if "p" in P:
                G["p"], K["p"] = (keys.mT @ da).squeeze(-1), k
            else:
                GW = ((feats.mT @ da).unflatten(-2, (d, d)).squeeze(-1) if feats is not None
                      else (out["da"].unsqueeze(-1) * X).sum(-2).mT @ z)  # (..., d, d)
                if "KQ" in P:  # [grad_K, grad_Q] = [G_W Q, G_W^T K], one matmul
                    GKQ = torch.stack((GW, GW.mT), -3) @ P["KQ"].flip(-3)
                    if reg > 0:  # true scale, then add the penalty's gradient
                        GKQ = GKQ * torch.exp(-k)[..., None, None, None] + (2 * reg) * P["KQ"]
                        k = torch.zeros_like(k)
                    G["KQ"], K["KQ"] = GKQ, k
                else:
                    G["W"], K["W"] = GW, k
        if "v" in P:
            la = loss_log_abs_derivative(out["u"], loss)  # log|l'_i|, (..., n)
            kv = -la.amax(-1) if scaled else torch.zeros_like(la[..., 0])
            w = (-Y / n) * torch.exp(la + kv.unsqueeze(-1))  # l'_i Y_i / n, scaled
            G["v"], K["v"] = vec_mat(w, out["h"], "...n,...nd->...d"), kv
        out["W"] = Wc
        return G, K, out

    return grads


def grad_W(X, Y, z, W, v=None, head=None, loss="logistic"):
    """Gradient in W of the risk (a view of :func:`risk_gradient`), (..., d, d).

    Shapes as in :func:`logits`. See chapter 2, *The Att-SVM and gradient descent*.
    """
    return risk_gradient(X, Y, z=z, v=v, head=head, loss=loss)({"W": W})[0]["W"]


def grad_KQ(X, Y, z, K, Q, v=None, head=None, loss="logistic", reg=0.0):
    """Gradients in K and Q at :math:`W = KQ^\\top` (a view of :func:`risk_gradient`).

    ``reg`` is :math:`\\lambda` of the penalty :math:`\\lambda(\\|K\\|_F^2+\\|Q\\|_F^2)`.
    See chapter 5, *W versus (K, Q)*.
    """
    G = risk_gradient(X, Y, z=z, v=v, head=head, loss=loss, reg=reg)(
        {"KQ": torch.stack(torch.broadcast_tensors(K, Q), -3)})[0]["KQ"]
    return G[..., 0, :, :], G[..., 1, :, :]


def grad_p(X, Y, W, p, v=None, head=None, loss="logistic"):
    """Gradient in the prompt p, (..., d) (a view of :func:`risk_gradient`).

    See chapter 2, *The Att-SVM and gradient descent*.
    """
    return risk_gradient(X, Y, W=W, v=v, head=head, loss=loss)({"p": p})[0]["p"]


def grad_v(X, Y, a, v, loss="logistic"):
    """Gradient in the linear head v at logits ``a`` (..., n, T) (a view of
    :func:`risk_gradient`). See chapter 4, *Training the head too*.
    """
    return risk_gradient(X, Y, loss=loss)({"v": v}, a=a)[0]["v"]
