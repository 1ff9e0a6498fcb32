"""The regularisation path :math:`\\bar W(R) = \\arg\\min_{\\|W\\|\\le R}\\mathcal L(W)`.

Projected, normalised gradient descent with a step on the iterate's own scale and a
continuation across radii, all radii (and trials) as one batch. See chapter 2, *The Att-SVM and
gradient descent*. In the entrywise ℓp ball (``norm=lp``) the same path is computed by ℓp
mirror descent with Bregman projections (chapter 9).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlib._runtime import few_threads
from attnlib._validate import choice, number
from attnlib.data import AttentionData

from .mirror import inverse_mirror_map, mirror_map, normalized_step
from .setup import make_gradient, prepare, stack_kq, unstack_kq

__all__ = ["PathResult", "regularization_path"]


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


def regularization_path(data, radii, param="W", loss="logistic", steps=2000, lr=0.1,
                        head="linear", init=None, seed=0, progress=False, device=None,
                        dtype=None, norm="fro") -> PathResult:
    """Regularisation path :math:`\\bar W(R) = \\arg\\min_{\\|W\\|_F\\le R}\\mathcal L(W)`.

    Projected, normalised gradient descent, all radii (and trials) as one batch. Step k is
    :math:`\\eta_k\\rho_k` times the unit gradient, then the projection onto the ball:
    :math:`\\eta_k` falls linearly from ``lr`` to ``lr/1000`` and :math:`\\rho_k` is the norm of
    the iterate (of the pair for (K, Q)). On the sphere :math:`\\rho_k = R`; inside it the
    step follows the iterate's scale, so a minimiser inside the ball (an infeasible Att-SVM)
    is reached at every radius, however large. From a zero start :math:`\\rho_0` is R or, if
    smaller, :math:`1/\\max_{i,t}\\|x_{it}\\|\\|z_i\\|` (:math:`1/\\max\\|W^\\top x_{it}\\|`
    for the prompt), the radius at which no logit has moved by more than 1; the iterate then
    grows by about a factor :math:`1+\\eta_k` a step until it meets the sphere.
    In the entrywise ℓp ball the step is taken in the dual,
    :math:`\\theta \\leftarrow \\theta - \\eta_k\\rho_k^{p-1} G/\\|G\\|_q`
    with :math:`\\theta = \\mathrm{sign}(W)|W|^{p-1}`, then mapped back and rescaled into the
    ball.

    Continuation: before every step, and after the last one, each radius takes the point of
    lowest loss among the radii up to its own when it is strictly lower than its own (a point
    of a smaller ball lies in the larger one). The path's loss is then non-increasing in R,
    and a radius whose own iterate stalls on a flat, saturated region of its sphere is
    restarted from the smaller radii's point.

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
    param = choice("param", param, ("W", "p", "KQ"))
    if norm == "fro":
        lp = 2.0
    else:
        lp = number("norm", norm, lo=1, lo_open=True)
        if param == "KQ" and lp != 2.0:
            raise ValueError(f"norm: the (K,Q) path is Frobenius only, got norm={norm!r}")
    q = lp / (lp - 1.0)
    R = torch.as_tensor(radii, dtype=torch.float64).reshape(-1)
    if R.numel() == 0 or not bool(torch.isfinite(R).all()) or not bool((R > 0).all()):
        raise ValueError(f"radii: expected positive finite numbers, got {radii!r}")
    steps = number("steps", steps, lo=1, integer=True)
    lr = number("lr", lr, lo=0, lo_open=True)
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
        prob = prepare(big, param, init, head, seed, device, dtype)
    bd, B = prob.data, prob.B
    with torch.no_grad(), few_threads(B * bd.n * bd.T * max(bd.T, bd.d), bd.device):
        grads = make_gradient(prob, loss, param, 0.0)
        P = stack_kq(prob.P)
        Rb = R.to(bd.device, bd.dtype).repeat(Bt)  # (B,) radius of each flat trial
        bound = Rb if param != "KQ" else torch.sqrt(2 * Rb)

        def project(P):
            flat = torch.cat([t.reshape(B, -1) for t in P.values()], 1)
            nrm = torch.linalg.vector_norm(flat, ord=lp, dim=1)
            scale = torch.clamp(bound / nrm.clamp_min(1e-300), max=1.0)
            return {k: t * scale.view(B, *[1] * (t.ndim - 1)) for k, t in P.items()}

        P = project(P)
        # the radii of one trial in increasing order, for the continuation below
        order = torch.argsort(R.to(bd.device), stable=True)
        own = torch.arange(nR, device=bd.device)
        base = (torch.arange(Bt, device=bd.device) * nR).unsqueeze(1)

        def continuation(L, *trees):
            """Each radius takes the point of lowest loss among the radii up to its own (a
            point of a smaller ball lies in the larger one); it keeps its own on a tie."""
            Ls = L.view(Bt, nR)[:, order]
            low, at = torch.cummin(Ls, dim=1)
            src = torch.where(low < Ls, order[at], order.expand(Bt, nR))
            idx = torch.empty_like(src)
            idx[:, order] = src
            idx = (base + idx).reshape(-1)
            moved = bool((idx != (base + own).reshape(-1)).any())
            return [({k: t[idx] for k, t in tr.items()} if isinstance(tr, dict) else tr[idx])
                    if moved else tr for tr in (L, *trees)]

        # the first step from a zero start: at most the radius at which every logit has moved
        # by 1 (|x^T W z| <= ||x|| ||z|| ||W||_F; the prompt model's logits are (W^T x)^T p)
        keys = bd.X @ prob.fixed["W"].unsqueeze(1) if param == "p" else bd.X
        lip = torch.linalg.vector_norm(keys, dim=-1)
        if param != "p":
            lip = lip * torch.linalg.vector_norm(bd.z, dim=-1).unsqueeze(-1)
        lip = lip.flatten(1).amax(1)
        start = torch.where(lip > 0, torch.minimum(bound, 1 / lip.clamp_min(1e-300)), bound)

        def size(P):  # ||P|| in the ball's norm, per flat trial
            return torch.linalg.vector_norm(
                torch.cat([t.reshape(B, -1) for t in P.values()], 1), ord=lp, dim=1)

        it = range(steps)
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(it, desc="regularization path", leave=False)
        resid = torch.zeros(B, device=bd.device, dtype=bd.dtype)
        for k in it:
            G, _, out = grads(P, extras=True)
            _, P, G, resid = continuation(out["loss"], P, G, resid)
            eta = lr * (1 - (1 - 1e-3) * k / max(steps - 1, 1))
            rho = size(P)
            rho = torch.where(rho > 0, rho, start)  # the scale of the iterate
            gflat = torch.cat([g.reshape(B, -1) for g in G.values()], 1)
            step = normalized_step(gflat, 1.0, q, 0.0) * (eta * rho ** (lp - 1)).unsqueeze(1)
            new, off = {}, 0
            for name, t in P.items():
                sz = t[0].numel()
                dual = mirror_map(t, lp) - step[:, off:off + sz].view_as(t)
                new[name] = inverse_mirror_map(dual, lp)
                off += sz
            new = project(new)
            resid = torch.sqrt(sum(((new[k] - P[k]).reshape(B, -1) ** 2).sum(1) for k in P))
            P = new
        _, _, out = grads(P, extras=True)
        loss_out, P, resid = continuation(out["loss"], P, resid)
        P = unstack_kq(P)

    def shape(t):
        t = t.reshape(Bt, nR, *t.shape[1:])
        return t[0] if B0 is None else t

    fixed = prob.fixed
    W_final = P["K"] @ P["Q"].mT if "K" in P else P.get("W", fixed.get("W"))
    return PathResult(radii=R, W=shape(W_final), loss=shape(loss_out), residual=shape(resid),
                      p=shape(P["p"]) if "p" in P else None,
                      K=shape(P["K"]) if "K" in P else None,
                      Q=shape(P["Q"]) if "Q" in P else None)
