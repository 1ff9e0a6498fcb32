"""The independent oracle of the training tests (tests/test_train*.py): a plain per-trial loop
of forward model + torch autograd + (mirror) step, and seeded initial tensors."""

import torch

import attnlib.models as M

F64 = torch.float64
LOSSES = ["logistic", "exp", "correlation"]
PARAMS = ["W", "KQ", "p", "v", "W+v", "p+v"]
TRAINED = {"W": "W", "KQ": "KQ", "p": "p", "v": "v", "W+v": "Wv", "p+v": "pv"}


def signed_power(x, e):
    return torch.sign(x) * x.abs() ** e


def autograd_loop(data, param, init, *, steps, lr, method, lp, normalized, eps, loss="logistic",
                  head=None, reg=0.0):
    """The plain per-trial loop: forward model + autograd, (mirror) step per tensor."""
    P = {k: init[k].clone() for k in TRAINED[param]}
    theta = {k: signed_power(t, lp - 1) for k, t in P.items()}
    q = lp / (lp - 1) if method == "md" else 2.0
    for _ in range(steps):
        P = {k: t.detach().requires_grad_(True) for k, t in P.items()}
        W = P["K"] @ P["Q"].mT if "K" in P else P.get("W", init.get("W"))
        a = M.logits_prompt(data.X, W, P["p"]) if "p" in P else M.logits(data.X, W, data.z)
        L = M.risk(data.X, data.Y, M.softmax(a), P.get("v", data.v), head, loss)
        if "K" in P:
            L = L + reg * (P["K"].pow(2).sum() + P["Q"].pow(2).sum())
        grads = torch.autograd.grad(L, list(P.values()))
        for (k, t), g in zip(list(P.items()), grads):
            step = lr * g / (g.abs().pow(q).sum().pow(1 / q) + eps) if normalized else lr * g
            theta[k] = theta[k] - step
            P[k] = signed_power(theta[k], 1 / (lp - 1)) if method == "md" else t - step
    return {k: t.detach() for k, t in P.items()}


def seeded_init(d, seed=1, m=3):
    """W (d, d), K and Q (d, m), p and v (d,), standard normal from ``seed``, float64."""
    g = torch.Generator().manual_seed(seed)
    return {"W": torch.randn(d, d, generator=g, dtype=F64),
            "K": torch.randn(d, m, generator=g, dtype=F64),
            "Q": torch.randn(d, m, generator=g, dtype=F64),
            "p": torch.randn(d, generator=g, dtype=F64),
            "v": torch.randn(d, generator=g, dtype=F64)}
