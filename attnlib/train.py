"""Training dynamics: batched (normalised) gradient and ℓp mirror descent, regularisation paths.

:func:`train` runs ``B`` independent trials as one tensor computation with the analytic,
saturation-safe gradients of :mod:`attnlib.models`. :func:`regularization_path` computes
:math:`\\bar W(R) = \\arg\\min_{\\|W\\|\\le R}\\mathcal L(W)` by projected gradient descent, batched
over radii. :class:`LpMirrorDescent` is the same ℓp mirror-descent step as a
``torch.optim.Optimizer`` for any torch model (chapter 10, *Mirror descent on real data*).

The mirror-descent update (chapter 9, *Mirror descent selects tokens too*), elementwise with
:math:`\\psi(W)=\\frac1{p}\\|W\\|_p^p`:

.. math::

    \\Theta_k = \\nabla\\psi(W_k)=\\mathrm{sign}(W_k)|W_k|^{p-1},\\qquad
    \\Theta_{k+1} = \\Theta_k - \\eta_k\\nabla\\mathcal L(W_k),\\qquad
    W_{k+1} = \\mathrm{sign}(\\Theta_{k+1})|\\Theta_{k+1}|^{1/(p-1)},

with :math:`\\eta_k = \\eta/(\\|\\nabla\\mathcal L(W_k)\\|_q+\\varepsilon)`, :math:`q=p/(p-1)`, when
normalised. At p = 2 this is (normalised) gradient descent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from . import models as M
from .data import AttentionData, as_tensor, resolve_device, resolve_dtype

__all__ = ["TrainResult", "PathResult", "train", "regularization_path", "LpMirrorDescent",
           "mirror_map", "inverse_mirror_map", "PARAMS", "METHODS"]

PARAMS = ("W", "KQ", "p", "v", "W+v", "p+v")
METHODS = ("gd", "md")
_TRAINED = {"W": ("W",), "KQ": ("K", "Q"), "p": ("p",), "v": ("v",), "W+v": ("W", "v"),
            "p+v": ("p", "v")}
_BASE_NDIM = {"W": 2, "K": 2, "Q": 2, "p": 1, "v": 1}
_INIT_KEYS = {"W", "K", "Q", "p", "v", "V", "u", "b", "lam", "m"}


# ----------------------------------------------------------------------------- mirror maps
def mirror_map(W: torch.Tensor, lp: float) -> torch.Tensor:
    """:math:`\\nabla\\psi(W) = \\mathrm{sign}(W)\\odot|W|^{p-1}` (primal to dual)."""
    return W if lp == 2 else torch.sign(W) * W.abs().pow(lp - 1.0)


def inverse_mirror_map(theta: torch.Tensor, lp: float) -> torch.Tensor:
    """Inverse map, dual to primal: :math:`\\mathrm{sign}(\\Theta)\\odot|\\Theta|^{1/(p-1)}`."""
    return theta if lp == 2 else torch.sign(theta) * theta.abs().pow(1.0 / (lp - 1.0))


def _normalized_step(g: torch.Tensor, lr: float, q: float, eps: float, log_scale=None,
                     rescale=True):
    """``lr * G / (||G||_q + eps)`` per trial (rows), for ``G = g * exp(-log_scale)``.

    ``g`` may be a scaled gradient (see :func:`attnlib.models.logit_gradient`); the direction
    does not depend on the scale and ``eps`` is compared with the true norm in the log domain.
    Rows are scaled by their largest entry first (by an exact power of two when it is tiny, so
    no reciprocal overflows), so tiny and subnormal gradients give an accurate direction and a
    zero gradient gives a zero step. ``rescale=False`` skips that (for scaled gradients, whose
    entries are of order one by construction).
    """
    if not rescale:
        nrm = g.norm(dim=1) if q == 2.0 else torch.linalg.vector_norm(g, ord=q, dim=1)
        if eps > 0:
            nrm = nrm + torch.exp(math.log(eps) + log_scale)
        nrm = nrm.clamp_min(torch.finfo(g.dtype).tiny)  # a zero row stays zero
        return g * (lr / nrm).unsqueeze(1)
    m = g.abs().amax(dim=1)  # (B,)
    tiny = torch.finfo(g.dtype).tiny ** 0.5
    boost = torch.where(m < tiny, torch.full_like(m, 1.0 / tiny), torch.ones_like(m))
    g = g * boost.unsqueeze(1)  # exact: 1/tiny is a power of two
    m = m * boost
    safe = torch.where(m > 0, m, torch.ones_like(m))
    gs = g / safe.unsqueeze(1)
    nrm = torch.linalg.vector_norm(gs, ord=q, dim=1)  # >= 1 where m > 0
    if eps > 0:
        log_true_max = torch.log(safe) - torch.log(boost)
        if log_scale is not None:
            log_true_max = log_true_max - log_scale
        nrm = nrm + torch.exp(math.log(eps) - log_true_max)
    return (lr / nrm).unsqueeze(1) * gs


class _FewThreads:
    """Run small CPU problems on one intra-op thread.

    For the book's tiny tensors, thread synchronisation costs far more than it saves (on a
    loaded 2-core machine a step was measured ~50x slower with 2 threads than with 1).
    """

    def __init__(self, device, work):
        self.active = device.type == "cpu" and work < 2e5

    def __enter__(self):
        if self.active:
            self.saved = torch.get_num_threads()
            torch.set_num_threads(1)

    def __exit__(self, *exc):
        if self.active:
            torch.set_num_threads(self.saved)


# ----------------------------------------------------------------------------- results
@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes
    ----------
    W : tensor (B?, d, d)
        The combined attention matrix at the end (``K Q^T`` for (K,Q); the fixed W for the
        prompt model).
    K, Q, p, v : tensor or None
        Final values of the trained tensors (``v`` also when fixed).
    history : dict of tensors
        ``"step"`` (S,), ``"loss"`` (B?, S), ``"max_prob"`` (B?, S) the mean over inputs of
        :math:`\\max_t s_{it}`, ``"min_max_prob"`` (B?, S) the smallest of them,
        ``"grad_norm"`` (B?, S), and each trained tensor, e.g. ``"W"`` (B?, S, d, d)
        (for (K,Q) also the combined ``"W"``).
    stopped : tensor (B?,) int64
        First step at which a trial's update was exactly zero: its gradient vanished, or (with
        ``eps`` > 0 or unnormalised steps) the step underflowed. The trial is frozen from there
        on. -1 if never.
    settings : dict
        The arguments of the call.
    """

    W: torch.Tensor
    K: torch.Tensor | None = None
    Q: torch.Tensor | None = None
    p: torch.Tensor | None = None
    v: torch.Tensor | None = None
    history: dict = field(default_factory=dict)
    stopped: torch.Tensor | None = None
    settings: dict = field(default_factory=dict)

    def __repr__(self):
        s = self.settings
        return (f"TrainResult(param={s.get('param')!r}, method={s.get('method')!r}, "
                f"steps={s.get('steps')}, W shape={tuple(self.W.shape)}, "
                f"history keys={sorted(self.history)})")


@dataclass
class PathResult:
    """What :func:`regularization_path` returns: solutions per radius (radius dim before the
    parameter dims, after the data's trials dim), the loss there, and the norm of the last
    projected step (how far from stationary)."""

    radii: torch.Tensor
    W: torch.Tensor
    loss: torch.Tensor
    residual: torch.Tensor
    p: torch.Tensor | None = None
    K: torch.Tensor | None = None
    Q: torch.Tensor | None = None


# ----------------------------------------------------------------------------- validation
def _number(name, x, lo=None, lo_open=False, integer=False):
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    if integer:
        ok = ok and float(x).is_integer()
    if ok and lo is not None:
        ok = x > lo if lo_open else x >= lo
    if not ok:
        kind = "an int" if integer else "a finite number"
        bound = "" if lo is None else f" {'>' if lo_open else '>='} {lo}"
        raise ValueError(f"{name}: expected {kind}{bound}, got {x!r}")
    return int(x) if integer else float(x)


def _prepare(data, param, init, head, seed, device, dtype):
    """Validate inputs; return batched tensors and the initial parameters, all (B, ...)."""
    if not isinstance(data, AttentionData):
        raise ValueError(f"data: expected an attnlib.AttentionData, got {type(data).__name__}")
    if param not in PARAMS:
        raise ValueError(f"param: expected one of {PARAMS}, got {param!r}")
    dev = data.device if device is None else resolve_device(device)
    dt = data.dtype if dtype is None else resolve_dtype(dtype)
    if (dev, dt) != (data.device, data.dtype):
        data = data.to(dev, dt)
    init = {} if init is None else dict(init)
    if not isinstance(init, dict):
        raise ValueError("init: expected a dict of tensors")
    unknown = set(init) - _INIT_KEYS
    if unknown:
        raise ValueError(f"init: unknown key(s) {sorted(unknown)}; expected some of "
                         f"{sorted(_INIT_KEYS)}")
    d = data.d
    tens = {}
    for k in ("W", "K", "Q", "p", "v"):
        if k in init and init[k] is not None:
            tens[k] = as_tensor(init[k], f"init['{k}']", dtype=dt, device=dev)
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
    m = init.get("m")
    if "K" in tens:
        m = tens["K"].shape[-1]
    m = d if m is None else _number("init['m']", m, lo=1, integer=True)
    shapes = {"W": (d, d), "K": (d, m), "Q": (d, m), "p": (d,), "v": (d,)}
    for k, t in tens.items():
        if tuple(t.shape[1:]) != shapes[k]:
            raise ValueError(f"init['{k}']: expected shape {shapes[k]} (or with trials first), "
                             f"got {tuple(t.shape[1:])}")
    head_obj = M.make_head(head, init, d=d, dtype=dt, device=dev)
    trained = _TRAINED[param]
    if "v" in trained and not isinstance(head_obj, M.LinearHead):
        raise ValueError(f"param: {param!r} trains v, which only the linear head has")
    g = torch.Generator().manual_seed(int(seed))
    bound = 1.0 / math.sqrt(d)  # torch.nn.Linear's default init, U(-1/sqrt(d), 1/sqrt(d))

    def uniform(*shape):
        return ((2 * torch.rand(B, *shape, generator=g, dtype=torch.float64) - 1) * bound).to(
            device=dev, dtype=dt)

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
    return bd, P, fixed, head_obj, prompt, unbatched, B


# ----------------------------------------------------------------------------- the trainer
def _stack_kq(P):
    """Keep (K, Q) as one (B, 2, d, m) tensor inside the loops (half the ops)."""
    if "K" not in P:
        return P
    P = dict(P)
    return {"KQ": torch.stack((P.pop("K"), P.pop("Q")), 1), **P}


def _unstack_kq(P):
    if "KQ" not in P:
        return P
    P = dict(P)
    KQ = P.pop("KQ")
    return {"K": KQ[:, 0], "Q": KQ[:, 1], **P}


def _make_gradient(bd, fixed, head, loss, prompt, param, reg, scaled=True):
    """The batched gradient of the risk for one parameterisation, as a closure.

    The closure returns ``(G, K, out)``: per trained tensor a (possibly scaled) gradient and its
    log scale (B,), the true gradient being ``G * exp(-K)``; and the forward quantities.

    Logits are linear in the trained matrix: :math:`a_{it} = \\langle W, x_{it} z_i^\\top\\rangle`
    (and :math:`a_{it} = (W^\\top x_{it})^\\top p` for the prompt). For tiny problems the pair
    features are built once, so logits and gradient are one batched matmul each (fewer ops;
    beyond that size it is memory-bound and the factored form is faster).
    """
    X, Y, n, T, d = bd.X, bd.Y, bd.n, bd.T, bd.d
    B = X.shape[0]
    z = bd.z
    trained = _TRAINED[param]
    values = diff = None
    if isinstance(head, M.LinearHead) and "v" not in trained:  # fixed token values g = X v
        values = torch.einsum("bntd,bd->bnt", X, fixed["v"])
        diff = values.unsqueeze(-1) - values.unsqueeze(-2)
    y_weight = (-Y / n).unsqueeze(-1)  # (B, n, 1)
    feats = keys = None
    if prompt:  # keys W^T x_it, (B, nT, d)
        keys = (X @ fixed["W"].unsqueeze(1)).reshape(B, n * T, d)
    elif B * n * T * d * d <= 3e4:  # tiny: x_it z_i^T flattened row-major, (B, nT, d*d)
        feats = (X.unsqueeze(-1) * z.unsqueeze(-2).unsqueeze(-2)).reshape(B, n * T, d * d)

    def grads(P, extras=False):
        if prompt:
            Wc = fixed["W"]
            p = P["p"] if "p" in P else fixed["p"]
            a = (keys @ p.unsqueeze(-1)).view(B, n, T)
        else:
            Wc = (P["KQ"][:, 0] @ P["KQ"][:, 1].mT if "KQ" in P
                  else (P["W"] if "W" in P else fixed["W"]))
            a = ((feats @ Wc.reshape(B, d * d, 1)).view(B, n, T) if feats is not None
                 else M.logits(X, Wc, z))
        v = P["v"] if "v" in P else fixed.get("v")
        out = M.logit_gradient(X, Y, a, v, head, loss, scaled=scaled, values=values,
                               pair_diff=diff, extras=extras, y_weight=y_weight)
        G, K = {}, {}
        if trained != ("v",):
            da = out["da"].reshape(B, n * T, 1)
            k = out["log_scale"]
            if prompt:
                G["p"], K["p"] = (keys.mT @ da).view(B, d), k
            else:
                if feats is not None:
                    GW = (feats.mT @ da).view(B, d, d)
                else:
                    r = (out["da"].unsqueeze(-1) * X).sum(-2)  # sum_t dL/da_it x_it, (B,n,d)
                    GW = r.mT @ z
                if "KQ" in P:  # (K, Q) stacked: [grad_K, grad_Q] = [G_W Q, G_W^T K], one matmul
                    GKQ = torch.stack((GW, GW.mT), 1) @ P["KQ"].flip(1)
                    if reg > 0:  # true scale, then add the penalty's gradient
                        GKQ = GKQ * torch.exp(-k).view(-1, 1, 1, 1) + (2 * reg) * P["KQ"]
                        k = torch.zeros_like(k)
                    G["KQ"], K["KQ"] = GKQ, k
                else:
                    G["W"], K["W"] = GW, k
        if "v" in P:
            la = M.loss_log_abs_derivative(out["u"], loss)  # (B, n)
            kv = -la.amax(1) if scaled else torch.zeros_like(la[:, 0])
            w = (-Y / n) * torch.exp(la + kv.unsqueeze(1))  # l'_i Y_i / n, scaled
            G["v"], K["v"] = torch.einsum("bn,bnd->bd", w, out["h"]), kv
        out["W"] = Wc
        return G, K, out

    return grads


def train(data, param="W", method="gd", lr=0.1, steps=1000, normalized=True, lp=2.0,
          loss="logistic", head="linear", init=None, reg=0.0, eps=0.0, record_every=10,
          progress=False, seed=0, device=None, dtype=None) -> TrainResult:
    """Train attention by (normalised) gradient descent or ℓp mirror descent, B trials at once.

    .. math::

        \\mathcal L = \\frac1n\\sum_i
        \\ell\\big(Y_i\\,\\psi(X_i^\\top\\mathrm{softmax}(X_i W z_i))\\big)
        \\;[+\\,\\lambda(\\|K\\|_F^2+\\|Q\\|_F^2)],\\qquad
        W_{k+1} = \\nabla\\psi^*\\Big(\\nabla\\psi(W_k) - \\frac{\\eta\\,\\nabla\\mathcal L(W_k)}
        {\\|\\nabla\\mathcal L(W_k)\\|_q+\\varepsilon}\\Big)

    (GD: :math:`\\psi = \\frac12\\|\\cdot\\|_F^2`; unnormalised: :math:`\\eta\\nabla\\mathcal L`).
    Each trained tensor is normalised by its own gradient's (dual) norm, per trial.

    Parameters
    ----------
    data : AttentionData
        Unbatched or with ``B`` trials; unbatched data is shared by batched initial values.
    param : {"W", "KQ", "p", "v", "W+v", "p+v"}
        What is trained. ``"p"``/``"p+v"``: prompt model, query :math:`z_i=p`, W fixed
        (``init["W"]``, default identity). ``"v"``: the head alone with W fixed.
    method : {"gd", "md"}
        Gradient descent, or ℓp mirror descent (dual state kept) with exponent ``lp``.
    lr : float > 0
    steps : int >= 0
    normalized : bool
        Divide each tensor's gradient by its norm (dual ℓq norm for md) plus ``eps``.
    lp : float > 1
        Mirror-descent exponent (``gd`` requires 2).
    loss : {"logistic", "exp", "correlation"}
    head : {"linear", "relu", "lambda", "mlp"} or a head object of :mod:`attnlib.models`
        Nonlinear heads take their tensors from ``init`` (``V``, ``u``, ``b``, ``lam``).
    init : dict, optional
        Initial values (``W``, ``K``, ``Q``, ``p``, ``v``; a leading dim makes trials), fixed
        tensors (``W`` for the prompt model) and head tensors; ``m`` sets the (K,Q) width.
        Defaults: W, K, Q ~ U(-1/√d, 1/√d) (torch.nn.Linear's init, from ``seed``); p = 0;
        v = data.v, else 0.
    reg : float >= 0
        The (K,Q) penalty :math:`\\lambda(\\|K\\|_F^2+\\|Q\\|_F^2)`.
    eps : float >= 0
        The ε of the normalisation (the official notebooks use 1e-9 ... 2.2e-16).
    record_every : int >= 1
        Record iterates 0, r, 2r, ... and the last one.
    progress : bool
        Show a tqdm progress bar.
    seed : int
        Seed of the default random initialisation.
    device, dtype
        Default: the data's.

    Returns
    -------
    TrainResult

    See chapters 2 (GD), 5 (W vs (K,Q)) and 9 (mirror descent).
    """
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    lr = _number("lr", lr, lo=0, lo_open=True)
    steps = _number("steps", steps, lo=0, integer=True)
    lp = _number("lp", lp, lo=1, lo_open=True)
    if method == "gd" and lp != 2.0:
        raise ValueError(f"lp: method 'gd' is the case lp=2; use method='md' for lp={lp}")
    if loss not in M.LOSSES:
        raise ValueError(f"loss: expected one of {M.LOSSES}, got {loss!r}")
    reg = _number("reg", reg, lo=0)
    eps = _number("eps", eps, lo=0)
    record_every = _number("record_every", record_every, lo=1, integer=True)
    if not isinstance(normalized, bool):
        raise ValueError(f"normalized: expected True or False, got {normalized!r}")
    if reg and param != "KQ":
        raise ValueError(f"reg: the (K,Q) penalty applies to param='KQ' only, got param={param!r}")
    settings = dict(param=param, method=method, lr=lr, steps=steps, normalized=normalized, lp=lp,
                    loss=loss, head=head if isinstance(head, str) else head.name, reg=reg,
                    eps=eps, record_every=record_every, seed=seed)
    with torch.no_grad():
        bd, P, fixed, head_obj, prompt, unbatched, B = _prepare(data, param, init, head, seed,
                                                                 device, dtype)
    P = _stack_kq(P)
    work = B * bd.n * bd.T * max(bd.T, bd.d)
    with torch.no_grad(), _FewThreads(bd.device, work):
        grads = _make_gradient(bd, fixed, head_obj, loss, prompt, param, reg)
        mirror = method == "md" and lp != 2.0
        qn = lp / (lp - 1.0) if method == "md" else 2.0  # dual norm of the step
        theta = {k: mirror_map(t, lp) for k, t in P.items()} if mirror else None
        record = list(range(0, steps + 1, record_every))
        if record[-1] != steps:
            record.append(steps)
        S = len(record)
        dev, dt = bd.device, bd.dtype
        hist = {"loss": torch.empty(B, S, device=dev, dtype=dt),
                "max_prob": torch.empty(B, S, device=dev, dtype=dt),
                "min_max_prob": torch.empty(B, S, device=dev, dtype=dt),
                "grad_norm": torch.empty(B, S, device=dev, dtype=dt)}
        for k, t in _unstack_kq(P).items():
            hist[k] = torch.empty(B, S, *t.shape[1:], device=dev, dtype=dt)
        if "KQ" in P:
            hist["W"] = torch.empty(B, S, bd.d, bd.d, device=dev, dtype=dt)
        frozen = torch.zeros(B, dtype=torch.int64, device=dev)  # steps with a zero update
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=steps, desc=f"train {param} ({method})", leave=False)
        r_idx = 0
        for k in range(steps + 1):
            rec = k == record[r_idx]
            G, Ks, out = grads(P, extras=rec)
            if rec:
                hist["loss"][:, r_idx] = out["loss"]
                mp = out["s"].amax(-1)
                hist["max_prob"][:, r_idx] = mp.mean(-1)
                hist["min_max_prob"][:, r_idx] = mp.amin(-1)
                hist["grad_norm"][:, r_idx] = torch.sqrt(sum(
                    torch.exp(torch.log(g.reshape(B, -1).norm(dim=1)) - Ks[name]) ** 2
                    for name, g in G.items()))
                for name, t in _unstack_kq(P).items():
                    hist[name][:, r_idx] = t
                if "KQ" in P:
                    hist["W"][:, r_idx] = out["W"]
                r_idx += 1
                if bar is not None and k:
                    bar.update(k - bar.n)
            if k == steps:
                break
            zero = None
            for name, g in G.items():
                rows = 2 if name == "KQ" else 1  # K and Q are normalised separately
                g = g.reshape(B * rows, -1)
                ks = Ks[name] if rows == 1 else Ks[name].repeat_interleave(2)
                if normalized:
                    step = _normalized_step(g, lr, qn, eps, ks, rescale=False)
                else:
                    step = (lr * torch.exp(-ks)).unsqueeze(1) * g
                # a zero step: (normalised, eps = 0) exactly a zero gradient, else check the step
                is_zero = (g == 0).all(1) if normalized and eps == 0 else (step == 0).all(1)
                if rows == 2:
                    is_zero = is_zero.view(B, 2).all(1)
                zero = is_zero if zero is None else zero & is_zero
                step = step.view(P[name].shape)
                if mirror:
                    theta[name] = theta[name] - step
                    P[name] = inverse_mirror_map(theta[name], lp)
                else:
                    P[name] = P[name] - step
            frozen += zero  # a zero update freezes the trial for good: count, don't branch
        if bar is not None:
            bar.update(steps - bar.n)
            bar.close()

    stopped = torch.where(frozen > 0, steps - frozen, torch.full_like(frozen, -1))

    def sq(t):
        return t[0] if (unbatched and t is not None) else t

    history = {name: sq(t) for name, t in hist.items()}
    history["step"] = torch.tensor(record, device=dev)
    P = _unstack_kq(P)
    W_final = P["K"] @ P["Q"].mT if "K" in P else P.get("W", fixed.get("W"))
    v_final = P.get("v", fixed.get("v"))
    return TrainResult(W=sq(W_final), K=sq(P.get("K")), Q=sq(P.get("Q")), p=sq(P.get("p")),
                       v=sq(v_final), history=history, stopped=sq(stopped), settings=settings)


# ----------------------------------------------------------------------------- regularisation path
def regularization_path(data, radii, param="W", loss="logistic", steps=2000, lr=0.1,
                        head="linear", init=None, seed=0, progress=False, device=None,
                        dtype=None) -> PathResult:
    """Regularisation path :math:`\\bar W(R) = \\arg\\min_{\\|W\\|_F\\le R}\\mathcal L(W)`.

    Projected, normalised gradient descent with a decaying step :math:`\\eta_k R`
    (:math:`\\eta_k` falls linearly from ``lr`` to ``lr/1000``), all radii as one batch.
    ``param="p"``: the prompt model, :math:`\\|p\\|\\le R` (W fixed by ``init["W"]``, default
    identity); ``param="KQ"``: :math:`\\|K\\|_F^2+\\|Q\\|_F^2\\le 2R` (so
    :math:`\\|KQ^\\top\\|_\\star\\le R`). As R grows, :math:`\\bar W(R)/R` turns to the max-margin
    direction (chapter 2, *The Att-SVM and gradient descent*).

    Parameters
    ----------
    data : AttentionData
        Unbatched, or with trials (then results are (B, R, ...)).
    radii : sequence of positive numbers
    steps : int
        Projected steps per radius (all radii run together).

    Returns
    -------
    PathResult
    """
    if param not in ("W", "p", "KQ"):
        raise ValueError(f"param: expected 'W', 'p' or 'KQ', got {param!r}")
    R = torch.as_tensor(radii, dtype=torch.float64).reshape(-1)
    if R.numel() == 0 or not bool(torch.isfinite(R).all()) or not bool((R > 0).all()):
        raise ValueError(f"radii: expected positive finite numbers, got {radii!r}")
    steps = _number("steps", steps, lo=1, integer=True)
    lr = _number("lr", lr, lo=0, lo_open=True)
    if not isinstance(data, AttentionData):
        raise ValueError(f"data: expected an attnlib.AttentionData, got {type(data).__name__}")
    nR, B0 = R.numel(), data.B
    # flatten (trials, radii) into one trials dimension
    flat = data.batched(1) if B0 is None else data
    Bt = flat.B

    def rep(t):
        return None if t is None else t.repeat_interleave(nR, dim=0)

    big = AttentionData(rep(flat.X), rep(flat.Y), rep(flat.z), rep(flat.v))
    init = dict(init or {})
    if param == "p":
        init.setdefault("p", torch.zeros(big.d, dtype=torch.float64))
    elif param == "W":
        init.setdefault("W", torch.zeros(big.d, big.d, dtype=torch.float64))
    with torch.no_grad():
        bd, P, fixed, head_obj, prompt, _, B = _prepare(big, param, init, head, seed, device,
                                                        dtype)
    with torch.no_grad(), _FewThreads(bd.device, B * bd.n * bd.T * max(bd.T, bd.d)):
        grads = _make_gradient(bd, fixed, head_obj, loss, prompt, param, 0.0)
        P = _stack_kq(P)
        Rb = R.to(bd.device, bd.dtype).repeat(Bt)  # (B,) radius of each flat trial
        bound = Rb if param != "KQ" else torch.sqrt(2 * Rb)

        def project(P):
            sq = sum((t.reshape(B, -1) ** 2).sum(1) for t in P.values())
            scale = torch.clamp(bound / torch.sqrt(sq).clamp_min(1e-300), max=1.0)
            return {k: t * scale.view(B, *[1] * (t.ndim - 1)) for k, t in P.items()}

        P = project(P)
        it = range(steps)
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(it, desc="regularization path", leave=False)
        resid = torch.zeros(B, device=bd.device, dtype=bd.dtype)
        for k in it:
            G, _, _ = grads(P)
            eta = lr * (1 - (1 - 1e-3) * k / max(steps - 1, 1))
            gflat = torch.cat([g.reshape(B, -1) for g in G.values()], 1)
            step = _normalized_step(gflat, 1.0, 2.0, 0.0) * (eta * bound).unsqueeze(1)
            new, off = {}, 0
            for name, t in P.items():
                sz = t[0].numel()
                new[name] = t - step[:, off:off + sz].view_as(t)
                off += sz
            new = project(new)
            resid = torch.sqrt(sum(((new[k] - P[k]).reshape(B, -1) ** 2).sum(1) for k in P))
            P = new
        _, _, out = grads(P, extras=True)
        P = _unstack_kq(P)

    def shape(t):
        t = t.reshape(Bt, nR, *t.shape[1:])
        return t[0] if B0 is None else t

    W_final = P["K"] @ P["Q"].mT if "K" in P else P.get("W", fixed.get("W"))
    return PathResult(radii=R, W=shape(W_final), loss=shape(out["loss"]), residual=shape(resid),
                      p=shape(P["p"]) if "p" in P else None,
                      K=shape(P["K"]) if "K" in P else None,
                      Q=shape(P["Q"]) if "Q" in P else None)


# ----------------------------------------------------------------------------- torch optimizer
class LpMirrorDescent(torch.optim.Optimizer):
    """Elementwise ℓp mirror descent for any torch model.

    See chapter 10, *Mirror descent on real data*.

    .. math::

        \\Theta \\leftarrow \\Theta - \\eta\\,\\nabla\\mathcal L
        \\quad(\\text{or } \\eta\\,\\nabla\\mathcal L/\\|\\nabla\\mathcal L\\|_q),
        \\qquad w = \\mathrm{sign}(\\Theta)|\\Theta|^{1/(p-1)},\\qquad
        \\Theta = \\mathrm{sign}(w)|w|^{p-1}\\text{ initially.}

    The dual state :math:`\\Theta` is kept in the optimizer state (in float64 for float32 or
    lower-precision parameters), so entries that underflow in the primal are not lost; written
    weights are clamped to the parameter dtype's finite range. If something else changes a
    parameter between steps, its dual is re-synchronised from the new value. At ``lp=2`` the step
    is exactly ``torch.optim.SGD``'s (without momentum).

    Parameters
    ----------
    params : iterable of tensors or parameter groups
    lr : float > 0
    lp : float > 1
    normalized : bool
        Divide each tensor's gradient by its dual norm :math:`\\|g\\|_q`, :math:`q=p/(p-1)`.
    eps : float >= 0
        Added to the dual norm when normalising.
    """

    def __init__(self, params, lr, lp=2.0, normalized=False, eps=0.0):
        lr = _number("lr", lr, lo=0, lo_open=True)
        lp = _number("lp", lp, lo=1, lo_open=True)
        eps = _number("eps", eps, lo=0)
        if not isinstance(normalized, bool):
            raise ValueError(f"normalized: expected True or False, got {normalized!r}")
        super().__init__(params, dict(lr=lr, lp=lp, normalized=normalized, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, lp, eps = group["lr"], group["lp"], group["eps"]
            q = lp / (lp - 1.0)
            for w in group["params"]:
                if w.grad is None:
                    continue
                g = w.grad
                if lp == 2.0 and not group["normalized"]:
                    w.add_(g, alpha=-lr)  # exactly torch.optim.SGD's update
                    continue
                if group["normalized"]:
                    step = _normalized_step(g.reshape(1, -1), lr, q, eps).view_as(g)
                else:
                    step = lr * g
                if lp == 2.0:
                    w.sub_(step)
                    continue
                st = self.state[w]
                if "theta" not in st or not torch.equal(st["last"], w):
                    work = torch.float64 if w.dtype != torch.float64 else w.dtype
                    st["theta"] = mirror_map(w.detach().to(work), lp)
                theta = st["theta"]
                theta.sub_(step.to(theta.dtype))
                new = inverse_mirror_map(theta, lp)
                if new.dtype != w.dtype:
                    big = torch.finfo(w.dtype).max
                    new = new.clamp(-big, big)
                w.copy_(new)
                st["last"] = w.detach().clone()
        return loss
