"""The one batched training loop: (normalised) GD and ℓp mirror descent, B trials at once.

:func:`train` validates its settings into a :class:`~attnlib.train.config.TrainConfig`,
prepares the problem (:mod:`attnlib.train.setup`) and runs :func:`run`, the loop every
parameterisation (W, KQ, p, v, W+v, p+v) and sequences (chapter 8, through a visibility mask)
go through. See chapters 2 (GD), 5 (W vs (K,Q)), 8 (sequences) and 9 (mirror descent).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import torch

from attnlib._runtime import few_threads
from attnlib.status import RunStatus, report
from attnlib.tokens import bool_mask

from .config import TrainConfig
from .mirror import inverse_mirror_map, lq_norm, mirror_map, rows_within, step_scale
from .setup import Problem, make_gradient, prepare, stack_kq, unstack_kq

__all__ = ["TrainResult", "train", "run"]


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
    nonfinite : tensor (B?,) int64
        Step at which a trial was stopped because its update was not finite (e.g. ℓp mirror
        descent with p near 1 in float32, whose primal iterate overflows): it keeps its last
        finite values from there on, and a ``RuntimeWarning`` says how many trials stopped.
        -1 if never.
    stalled : tensor (B?,) bool
        Trials whose normalised update was exactly zero at some step although their gradient
        was not (a lost step; never expected, flagged rather than hidden).
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
    nonfinite: torch.Tensor | None = None
    stalled: torch.Tensor | None = None
    settings: dict = field(default_factory=dict)

    @property
    def status(self) -> RunStatus:
        """The run's "no NaN, no stall" verdict (:class:`attnlib.status.RunStatus`)."""
        bad = self.nonfinite.reshape(-1)
        stalled = 0 if self.stalled is None else int(self.stalled.sum())
        first = int(bad[bad >= 0].min()) if bool((bad >= 0).any()) else -1
        causes = ("an update turned non-finite (TrainResult.nonfinite)",) if first >= 0 else ()
        if stalled:
            causes += ("a normalised step was lost (TrainResult.stalled)",)
        return RunStatus(runs=bad.numel(), nonfinite=int((bad >= 0).sum()), stalled=stalled,
                         first_nonfinite=first, causes=causes)

    def __repr__(self):
        s = self.settings
        return (f"TrainResult(param={s.get('param')!r}, method={s.get('method')!r}, "
                f"steps={s.get('steps')}, W shape={tuple(self.W.shape)}, "
                f"history keys={sorted(self.history)})")


def train(data, param="W", method="gd", lr=0.1, steps=1000, normalized=True, lp=2.0,
          loss="logistic", head="linear", init=None, reg=0.0, eps=0.0, record_every=10,
          progress=False, seed=0, device=None, dtype=None, *, config=None,
          mask=None) -> TrainResult:
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
    config : TrainConfig, optional
        All the settings above (``param`` ... ``progress``) at once; given, it replaces them,
        and a keyword setting that differs both from its default and from ``config`` is an
        error (a ``ValueError`` naming it), never silently ignored.
    mask : bool or 0/1 tensor (n, T) or (B, n, T), optional
        Visible tokens of each input (hidden ones get logit :math:`-\\infty`); how sequences
        train (chapter 8, :func:`attnlib.sequences.train_sequence`). Its values are checked by
        :func:`attnlib.tokens.bool_mask`, as :func:`attnlib.tokens.as_mask` checks them (0.5
        is an error, not "visible").

    Returns
    -------
    TrainResult
        Numbers may be Python, numpy or torch scalars. A trial whose update turns non-finite
        is stopped and flagged in ``nonfinite`` (with a warning), never returned as silent NaN.

    See chapters 2 (GD), 5 (W vs (K,Q)) and 9 (mirror descent).
    """
    given = dict(param=param, method=method, lr=lr, steps=steps, normalized=normalized, lp=lp,
                 loss=loss, head=head, reg=reg, eps=eps, record_every=record_every, seed=seed,
                 progress=progress)
    if config is None:
        config = TrainConfig(**given)
    elif not isinstance(config, TrainConfig):
        raise ValueError(f"config: expected a TrainConfig, got {type(config).__name__}")
    else:
        _no_conflict(config, given)
    if mask is not None:
        mask = bool_mask(mask)  # the values as tokens.as_mask checks them; shapes: prepare
    with torch.no_grad():
        prob = prepare(data, config.param, init, config.head, config.seed, device, dtype, mask)
    return run(prob, config)


def _no_conflict(config: TrainConfig, given: dict) -> None:
    """A keyword setting changed from its default must agree with ``config``; else ValueError."""
    default = TrainConfig()
    clash = [f"{k}={v!r} (config has {getattr(config, k)!r})" for k, v in given.items()
             if not _same(v, getattr(default, k)) and not _same(v, getattr(config, k))]
    if clash:
        raise ValueError(f"config: given together with other settings: {', '.join(clash)}; "
                         f"pass one or the other, e.g. config.replace(...)")


def _same(a, b) -> bool:
    """``a`` equals ``b`` (numbers by value: 0.1, np.float64(0.1) and a 0-dim tensor)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, RuntimeError, ValueError):  # e.g. a tensor of many entries
        return a is b


def _record_steps(steps, every):
    record = list(range(0, steps + 1, every))
    if record[-1] != steps:
        record.append(steps)
    return record


def run(prob: Problem, cfg: TrainConfig) -> TrainResult:
    """The loop: one (mirror) step per iteration for all B trials of ``prob``.

    Per trained tensor and trial: :math:`\\Theta \\leftarrow \\Theta - \\eta_k G` with
    :math:`\\eta_k = \\eta/(\\|G\\|_q + \\varepsilon)` (normalised) and
    :math:`W = \\nabla\\psi^{-1}(\\Theta)` (the identity for GD). A trial whose update is zero
    is frozen (``stopped``); one whose update is not finite keeps its last finite values
    (``nonfinite``). No Python loop over trials.
    """
    bd, B, steps = prob.data, prob.B, cfg.steps
    P = stack_kq(prob.P)
    lr, eps, lp, qn, mirror = cfg.lr, cfg.eps, cfg.lp, cfg.q, cfg.mirror
    work = B * bd.n * bd.T * max(bd.T, bd.d)
    dev, dt = bd.device, bd.dtype
    # inference mode: the same kernels as under no_grad, without autograd's bookkeeping on
    # every operation (a third of the time of a step on small problems); what the loop
    # returns is copied out of it (:func:`_outside`), so callers get ordinary tensors
    with torch.inference_mode(), few_threads(work, dev):
        grads = make_gradient(prob, cfg.loss, cfg.param, cfg.reg)
        theta = {k: mirror_map(t, lp) for k, t in P.items()} if mirror else None
        record = _record_steps(steps, cfg.record_every)
        S = len(record)
        hist = {k: torch.empty(B, S, device=dev, dtype=dt)
                for k in ("loss", "max_prob", "min_max_prob", "grad_norm")}
        for k, t in unstack_kq(P).items():
            hist[k] = torch.empty(B, S, *t.shape[1:], device=dev, dtype=dt)
        if "KQ" in P:
            hist["W"] = torch.empty(B, S, bd.d, bd.d, device=dev, dtype=dt)
        frozen = torch.zeros(B, dtype=torch.int64, device=dev)  # steps with a zero update
        broken = torch.full((B,), -1, dtype=torch.int64, device=dev)  # first non-finite step
        grad_broke = torch.zeros(B, dtype=torch.bool, device=dev)  # ... where the gradient was
        stall = torch.zeros(B, dtype=torch.bool, device=dev)  # a normalised step lost
        bar = None
        if cfg.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=steps, desc=f"train {cfg.param} ({cfg.method})", leave=False)
        r_idx = 0
        cpu, any_broken = torch.device(dev).type == "cpu", False
        for k in range(steps + 1):
            rec = k == record[r_idx]
            G, Ks, out = grads(P, extras=rec)
            if rec:
                _record(hist, r_idx, P, G, Ks, out, B)
                r_idx += 1
                if bar is not None and k:
                    bar.update(k - bar.n)
            if k == steps:
                break
            zero, some_nonzero, new, new_theta = None, False, {}, {}
            for name, g in G.items():
                rows = 2 if name == "KQ" else 1  # K and Q are normalised separately
                g = g.reshape(B * rows, -1)
                ks = Ks[name] if rows == 1 else Ks[name].repeat_interleave(2)
                # a zero step: (normalised, eps = 0) exactly a zero gradient, else the step;
                # normalised, both are read off per-row scalars (no pass over the entries),
                # and on the CPU off one scalar when no row of g or of the step is zero
                if cfg.normalized:
                    step, c, g_zero = step_scale(g, lr, qn, eps, ks)
                    if cpu and g_zero is None and float(c.amin()) > 0:  # (NaN: not > 0)
                        is_zero = None  # no zero update of this tensor in any trial
                    else:
                        if g_zero is None:
                            g_zero = torch.zeros_like(c, dtype=torch.bool)
                        step_zero = g_zero | (c == 0)
                        is_zero = g_zero if eps == 0 else step_zero
                        # a normalised step of a non-zero gradient is never zero (on the CPU,
                        # looked at only where some step is zero)
                        if not cpu or bool(step_zero.any()):
                            lost = ~g_zero & step_zero
                            stall |= lost.view(B, rows).any(1)
                else:
                    step = (lr * torch.exp(-ks)).unsqueeze(1) * g
                    # (step == 0).all(1) in one reduction (NaN rows: amax is NaN, not zero)
                    is_zero = step.abs().amax(1) == 0
                # a trial's update is zero when every tensor's is (None: in no trial)
                if is_zero is None:
                    some_nonzero = True
                elif not some_nonzero:
                    if rows == 2:
                        is_zero = is_zero.view(B, 2).all(1)
                    zero = is_zero if zero is None else zero & is_zero
                step = step.view(P[name].shape)
                if mirror:
                    new_theta[name] = theta[name] - step
                    new[name] = inverse_mirror_map(new_theta[name], lp)
                else:
                    new[name] = P[name] - step
            if not some_nonzero:
                frozen += zero  # a zero update freezes the trial for good: count, don't branch
            # every trial finite, none stopped before (checked on the CPU, where the check
            # costs less than the masking it saves): the update as it is. A finite sum of the
            # entries says so at once; otherwise (a non-finite entry, or a finite sum that
            # overflows) the per-trial check decides
            if cpu and not any_broken and all(math.isfinite(float(t.sum()))
                                              for t in new.values()):
                finite = None
            else:
                finite = rows_within(new.values(), B)
            if cpu and not any_broken and (finite is None or bool(finite.all())):
                P.update(new)
                if mirror:
                    theta.update(new_theta)
                continue
            g_ok = rows_within(G.values(), B)  # where the gradient itself was finite
            newly = (broken < 0) & ~finite
            grad_broke = grad_broke | (newly & ~g_ok)
            broken = torch.where(newly, k, broken)
            keep = broken >= 0  # (B,) trials stopped at a non-finite update keep their values
            any_broken = any_broken or bool(keep.any())
            for name in new:
                shape = (B,) + (1,) * (new[name].ndim - 1)
                P[name] = torch.where(keep.view(shape), P[name], new[name])
                if mirror:
                    theta[name] = torch.where(keep.view(shape), theta[name], new_theta[name])
        if bar is not None:
            bar.update(steps - bar.n)
            bar.close()

    P, hist, frozen, broken, grad_broke, stall = _outside(P, hist, frozen, broken, grad_broke,
                                                          stall)
    stopped = torch.where(frozen > 0, steps - frozen, torch.full_like(frozen, -1))
    _warn_nonfinite(broken, grad_broke, cfg, bd)
    out = _result(prob, cfg, P, hist, record, stopped, broken, stall)
    report(out.status)
    return out


def _outside(*objs):
    """Tensors made under ``torch.inference_mode`` (alone or in dicts) as ordinary tensors
    (a copy; others as they are), so that autograd and in-place updates may use them."""
    def plain(t):
        return t.clone() if isinstance(t, torch.Tensor) and t.is_inference() else t

    return tuple({k: plain(v) for k, v in o.items()} if isinstance(o, dict) else plain(o)
                 for o in objs)


def _warn_nonfinite(broken, grad_broke, cfg, bd):
    """One ``RuntimeWarning`` naming why trials stopped: their gradient, or the update itself."""
    n_bad, n_grad = int((broken >= 0).sum()), int(grad_broke.sum())
    if not n_bad:
        return
    B, dt = broken.numel(), bd.dtype
    causes = []
    if n_grad:
        big = float(bd.X.detach().abs().amax())
        causes.append(f"{n_grad} because the gradient itself overflowed {dt} (tokens as large "
                      f"as {big:.3g} are too large for it: rescale the data or use float64)")
    if n_bad > n_grad:
        why = (f"the primal iterate |Theta|^(1/(p-1)) left {dt}'s range (lp={cfg.lp} is close "
               f"to 1 for {dt})" if cfg.mirror else f"the iterate left {dt}'s range")
        causes.append(f"{n_bad - n_grad} because {why}")
    warnings.warn(f"train: {n_bad} of {B} trials stopped at a non-finite update, "
                  f"{'; '.join(causes)}; they keep their last finite values "
                  f"(TrainResult.nonfinite)", RuntimeWarning, stacklevel=4)


def _record(hist, r, P, G, Ks, out, B):
    """Write iterate ``r`` of the history (loss, attention, gradient norm, tensors)."""
    hist["loss"][:, r] = out["loss"]
    mp = out["s"].amax(-1)
    hist["max_prob"][:, r] = mp.mean(-1)
    hist["min_max_prob"][:, r] = mp.amin(-1)
    hist["grad_norm"][:, r] = torch.sqrt(sum(
        torch.exp(torch.log(lq_norm(g.reshape(B, -1), 2.0)) - Ks[name]) ** 2
        for name, g in G.items()))
    for name, t in unstack_kq(P).items():
        hist[name][:, r] = t
    if "KQ" in P:
        hist["W"][:, r] = out["W"]


def _result(prob, cfg, P, hist, record, stopped, broken, stall):
    def sq(t):
        return t[0] if (prob.unbatched and t is not None) else t

    history = {name: sq(t) for name, t in hist.items()}
    history["step"] = torch.tensor(record, device=prob.data.device)
    P = unstack_kq(P)
    fixed = prob.fixed
    W_final = P["K"] @ P["Q"].mT if "K" in P else P.get("W", fixed.get("W"))
    v_final = P.get("v", fixed.get("v"))
    return TrainResult(W=sq(W_final), K=sq(P.get("K")), Q=sq(P.get("Q")), p=sq(P.get("p")),
                       v=sq(v_final), history=history, stopped=sq(stopped),
                       nonfinite=sq(broken), stalled=sq(stall), settings=cfg.settings())
