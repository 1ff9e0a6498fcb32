"""The attention model, forward: logits, softmax, heads, losses and the risk (pure tensor
functions; the public names are read from :mod:`attnlib.models`).

One-layer softmax attention with query :math:`z_i` (chapter 1, *Attention as token selection*):
:math:`a_{it} = x_{it}^\\top W z_i`, :math:`s_i = \\mathrm{softmax}(a_i)`,
:math:`h_i = X_i^\\top s_i`, :math:`f_i = \\psi(h_i)` and the risk
:math:`\\frac1n\\sum_i \\ell(Y_i f_i)`. Every function accepts any number of leading (trials)
dimensions, shared by all arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attnlib._validate import as_tensor, choice, number

LOSSES = ("logistic", "exp", "correlation")


# ----------------------------------------------------------------------------- attention
def logits(X: torch.Tensor, W: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Attention logits :math:`a_{it} = x_{it}^\\top W z_i` (no :math:`1/\\sqrt d`).

    Parameters
    ----------
    X : (..., n, T, d)
    W : (..., d, d)
    z : (..., n, d)

    Returns
    -------
    (..., n, T)
    """
    q = z @ W.mT  # W z_i  (..., n, d)
    return (X @ q.unsqueeze(-1)).squeeze(-1)


def logits_kq(X, K, Q, z):
    """Logits of the (K,Q) model, :math:`a_{it} = (K^\\top x_{it})^\\top (Q^\\top z_i)`.

    ``K``, ``Q``: (..., d, m). See chapter 5, *W versus (K, Q)*.
    """
    keys = X @ K.unsqueeze(-3)  # (..., n, T, m)
    queries = (z.unsqueeze(-2) @ Q.unsqueeze(-3))  # (..., n, 1, m)
    return (keys * queries).sum(-1)


def logits_prompt(X, W, p):
    """Logits of the prompt model, :math:`a_{it} = x_{it}^\\top W p` (``p``: (..., d)).

    See chapter 2, *The Att-SVM and gradient descent*.
    """
    q = torch.einsum("...de,...e->...d", W, p)  # (..., d)
    return torch.einsum("...ntd,...d->...nt", X, q)


def softmax(a: torch.Tensor) -> torch.Tensor:
    """Softmax over tokens (last dimension), :math:`s_t = e^{a_t}/\\sum_\\tau e^{a_\\tau}`."""
    return torch.softmax(a, dim=-1)


def log_softmax(a: torch.Tensor) -> torch.Tensor:
    """Log-softmax over tokens; ``exp`` of it gives tiny probabilities to full relative accuracy."""
    return torch.log_softmax(a, dim=-1)


def vec_mat(a: torch.Tensor, B: torch.Tensor, spec: str) -> torch.Tensor:
    """:math:`a^\\top B` batched over the leading axes: (..., k) and (..., k, m) give (..., m).

    A batched matrix product when ``a`` and ``B`` have one dtype and the same batch shape
    (what ``torch.einsum`` itself runs, without parsing ``spec`` on every step of a trainer);
    else ``torch.einsum(spec, a, B)``, which broadcasts the batch axes (trials against one data
    set) and, for some shapes, mixes dtypes. The one home of that choice for :func:`attend` and
    the gradients (:mod:`attnlib.gradient`)."""
    if a.dtype == B.dtype and a.shape == B.shape[:-1]:
        return (a.unsqueeze(-2) @ B).squeeze(-2)
    return torch.einsum(spec, a, B)


def mat_vec(B: torch.Tensor, a: torch.Tensor, spec: str) -> torch.Tensor:
    """:math:`B a` batched over the leading axes: (..., m, k) and (..., k) give (..., m); a
    batched matrix product or ``torch.einsum(spec, B, a)``, as in :func:`vec_mat`."""
    if a.dtype == B.dtype and a.shape[:-1] == B.shape[:-2]:
        return (B @ a.unsqueeze(-1)).squeeze(-1)
    return torch.einsum(spec, B, a)


def attend(X: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Attention output :math:`h_i = X_i^\\top s_i = \\sum_t s_{it} x_{it}`, shape (..., n, d)."""
    return vec_mat(s, X, "...nt,...ntd->...nd")


# ----------------------------------------------------------------------------- heads
@dataclass(frozen=True)
class LinearHead:
    """Linear head :math:`\\psi(h) = v^\\top h` (the papers' main model; ``v`` passed at call)."""

    name = "linear"

    def value(self, h, v):
        return torch.einsum("...nd,...d->...n", h, v)

    def grad(self, h, v):
        return v.unsqueeze(-2).expand_as(h)


@dataclass(frozen=True)
class ReluHead:
    """ReLU value head of TF-SVM E4, :math:`\\psi(h) = u^\\top \\mathrm{ReLU}(V^\\top h)`.

    ``V``: (d, m) fixed value matrix (the official code scales it to ``‖V‖_F = 1``), ``u``: (m,)
    readout (all ones in the official code, unnormalised). See chapter 7, *Nonlinear heads*.
    """

    V: torch.Tensor
    u: torch.Tensor
    name = "relu"

    def value(self, h, v=None):
        return F.relu(h @ self.V) @ self.u

    def grad(self, h, v=None):
        active = (h @ self.V > 0).to(h.dtype)  # (..., n, m)
        return (active * self.u) @ self.V.mT


@dataclass(frozen=True)
class LambdaHead:
    """λ-penalty head of TF-SVM (``base_nonlinear.py`` mode 'lambda').

    .. math:: \\psi(h) = v^\\top h - \\lambda\\|h\\|^2,\\qquad h = X^\\top s

    With orthonormal tokens :math:`\\|h\\|^2=\\|s\\|^2` and the best attention is a
    sparsemax-like mixture of several tokens. See chapter 7, *Nonlinear heads*.
    """

    lam: float
    name = "lambda"

    def value(self, h, v):
        return torch.einsum("...nd,...d->...n", h, v) - self.lam * (h * h).sum(-1)

    def grad(self, h, v):
        return v.unsqueeze(-2) - 2.0 * self.lam * h


@dataclass(frozen=True)
class MLPHead:
    """Small MLP head :math:`\\psi(h) = u^\\top \\tanh(V^\\top h + b)` (fixed weights).

    ``V``: (d, m), ``b``: (m,), ``u``: (m,). See chapter 7, *Nonlinear heads*.
    """

    V: torch.Tensor
    b: torch.Tensor
    u: torch.Tensor
    name = "mlp"

    def value(self, h, v=None):
        return torch.tanh(h @ self.V + self.b) @ self.u

    def grad(self, h, v=None):
        t = torch.tanh(h @ self.V + self.b)
        return ((1 - t * t) * self.u) @ self.V.mT


def make_head(head="linear", params=None, d=None, dtype=torch.float64, device="cpu"):
    """Build a head from a name and a dict of its tensors (or pass a head object through).

    ``"linear"``; ``"relu"`` needs ``V`` (``u`` defaults to ones); ``"lambda"`` needs ``lam``;
    ``"mlp"`` needs ``V`` (``b`` defaults to zeros, ``u`` to ones).
    """
    kw = dict(dtype=dtype, device=device)
    if isinstance(head, ReluHead):
        return ReluHead(head.V.to(**kw), head.u.to(**kw))
    if isinstance(head, MLPHead):
        return MLPHead(head.V.to(**kw), head.b.to(**kw), head.u.to(**kw))
    if isinstance(head, (LinearHead, LambdaHead)):
        return head
    params = params or {}
    if head == "linear":
        return LinearHead()
    if head in ("relu", "mlp"):
        if "V" not in params:
            raise ValueError(f"init['V']: expected the value matrix (d, m) of the {head!r} head, "
                             "got nothing")
        V = as_tensor(params["V"], "init['V']", **kw)
        if V.ndim != 2 or (d is not None and V.shape[0] != d):
            raise ValueError(f"init['V']: expected shape (d, m) with d={d}, got {tuple(V.shape)}")
        m = V.shape[1]
        u = as_tensor(params.get("u", torch.ones(m)), "init['u']", **kw)
        if u.shape != (m,):
            raise ValueError(f"init['u']: expected shape ({m},), got {tuple(u.shape)}")
        if head == "relu":
            return ReluHead(V, u)
        b = as_tensor(params.get("b", torch.zeros(m)), "init['b']", **kw)
        if b.shape != (m,):
            raise ValueError(f"init['b']: expected shape ({m},), got {tuple(b.shape)}")
        return MLPHead(V, b, u)
    if head == "lambda":
        if params.get("lam") is None:
            raise ValueError("init['lam']: expected a number >= 0 for the 'lambda' head, got "
                             "nothing")
        return LambdaHead(number("init['lam']", params["lam"], lo=0))
    raise ValueError(f"head: expected 'linear', 'relu', 'lambda', 'mlp' or a head object, "
                     f"got {head!r}")


def output(X, s, v=None, head=None):
    """Model output :math:`f_i = \\psi(X_i^\\top s_i)`.

    Linear head: :math:`f_i = \\sum_t s_{it} v^\\top x_{it}`.
    """
    head = head or LinearHead()
    return head.value(attend(X, s), v)


# ----------------------------------------------------------------------------- losses
def _check_loss(loss):
    if not (isinstance(loss, str) and loss in LOSSES):  # fast path: called every step
        choice("loss", loss, LOSSES)


def loss_value(u: torch.Tensor, loss: str = "logistic") -> torch.Tensor:
    """Loss :math:`\\ell(u)`.

    Logistic :math:`\\log(1+e^{-u})`, exp :math:`e^{-u}`, correlation :math:`-u`.
    """
    _check_loss(loss)
    if loss == "logistic":
        return F.softplus(-u)
    if loss == "exp":
        return torch.exp(-u)
    return -u


def loss_derivative(u: torch.Tensor, loss: str = "logistic") -> torch.Tensor:
    """:math:`\\ell'(u)`, computed stably.

    Logistic :math:`-\\sigma(-u)`, exp :math:`-e^{-u}`, correlation -1.
    """
    _check_loss(loss)
    if loss == "logistic":
        return -torch.sigmoid(-u)
    if loss == "exp":
        return -torch.exp(-u)
    return -torch.ones_like(u)


def risk(X, Y, s, v=None, head=None, loss="logistic"):
    """Empirical risk :math:`\\mathcal L = \\frac1n\\sum_i \\ell(Y_i f_i)` from attention ``s``.

    Differentiable (used by the tests as the autograd oracle). Shape: the leading dimensions.
    """
    return loss_value(Y * output(X, s, v, head), loss).mean(-1)


# ----------------------------------------------------------------------------- gradients
def loss_log_abs_derivative(u: torch.Tensor, loss: str = "logistic") -> torch.Tensor:
    """:math:`\\log|\\ell'(u)|` without underflow (all three losses have :math:`\\ell'<0`)."""
    _check_loss(loss)
    if loss == "logistic":
        return -F.softplus(u)
    if loss == "exp":
        return -u
    return torch.zeros_like(u)
