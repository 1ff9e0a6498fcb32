r"""Two ways to keep the dual point of ℓp mirror descent (arXiv 2410.14581), chapter 9.

The paper's official optimizer recomputes the dual point :math:`\nabla\psi(W) =
\mathrm{sign}(W)|W|^{p-1}` from the weights at every step, in their dtype (float32 on real
data); attnlib's :class:`attnlib.train.LpMirrorDescent` keeps it (in float64) between steps.
At p = 1.1 the inverse map is :math:`|\Theta|^{10}`, so in float32 a dual entry below about
:math:`10^{-4.5}` becomes a weight of exactly 0, whose recomputed dual is again 0: an entry
that crosses zero with dual steps smaller than that stays at 0 for good in the paper's
variant. ``md_dual`` shows the mechanism on one entry (by construction) and measures both
variants on the paper's synthetic problem at p = 1.1 in float32. See chapter 9.
"""

from __future__ import annotations

import numpy as np
import torch

from attnlib import models
from attnlib.examples import mirror_random_data
from attnlib.metrics import sparsity
from attnlib.train import LpMirrorDescent

from .official_numerics import Numerics
from .registry import Target, experiment

PAPER = "2410.14581"
F32 = torch.float32


def _one_entry(keep_dual: bool, steps: int, step: float, theta0: float, lp: float):
    """One float32 entry with dual ``theta0`` and a constant gradient 1 (dual step ``step``):
    the weight after each step."""
    w = torch.tensor([theta0 ** (1.0 / (lp - 1.0))], dtype=F32, requires_grad=True)
    opt = LpMirrorDescent([w], lr=step, lp=lp, keep_dual=keep_dual)
    out = np.empty(steps)
    for k in range(steps):
        w.grad = torch.ones_like(w)
        opt.step()
        out[k] = float(w.detach())
    return out


def _synthetic(keep_dual, data, W0, lp, lr, steps):
    """Train all data sets' W (B, d, d) as one float32 tensor with unnormalised steps (the
    paper's real-data setting), so each data set's update is its own; returns the final W
    in float64 and the mean final loss."""
    X, Y, z, v = (t.to(F32) for t in (data.X, data.Y, data.z, data.v))
    vals = torch.einsum("bntd,bd->bnt", X, v)  # per-token values x_it^T v
    W = W0.to(F32).clone().requires_grad_(True)
    opt = LpMirrorDescent([W], lr=lr, lp=lp, keep_dual=keep_dual)
    for _ in range(steps):
        opt.zero_grad()
        s = models.softmax(models.logits(X, W, z))
        loss = torch.nn.functional.softplus(-Y * (s * vals).sum(-1)).mean(-1)
        loss.sum().backward()
        opt.step()
    return W.detach().double(), float(loss.detach().mean())


@experiment(
    "md_dual", paper=f"{PAPER} (official optimizer vs attnlib's)", chapter="09_mirror_descent",
    title="The paper's optimizer (dual recomputed from float32 weights) vs the book's "
          "(dual kept): zero trapping at p = 1.1",
    seconds=0.8,  # measured 2026-11-29: CPU s, one process alone
    targets=[
        Target("trap_paper", "one float32 entry at p = 1.1 crossing zero with dual steps of "
               "1e-5: steps it ends at exactly 0, paper's variant (of the steps after the "
               "crossing)", "all", 1.0, 1.0, "exact", "suggested",
               "the mechanism on one entry: an identity of the two update rules",
               evidence="by construction"),
        Target("escaped_kept", "the same entry with the dual kept is nonzero (past zero) at "
               "the end", "1", 1, 1, "exact", "suggested", evidence="by construction"),
        Target("sparsity_gap", "synthetic data, p = 1.1, float32: |near-zero fraction, paper's "
               "variant − kept dual| (entries < 1% of the largest)", "small", 0.0, 0.05,
               "≤ 0.05", "suggested",
               "how much the choice moves the sparsity number on the paper's synthetic task"),
    ],
)
def dual(trials: int = 10, seed: int = 1, lp: float = 1.1, steps: int = 2000, lr: float = 1.0,
         init_scale: float = 0.01, demo_steps: int = 300,
         demo_step: float = 1e-5, demo_theta0: float = 1e-3):
    r"""Both variants of :class:`attnlib.train.LpMirrorDescent` (``keep_dual`` True / False).

    Demo: one float32 entry with dual ``demo_theta0`` and a constant gradient, dual step
    ``demo_step`` per step, ``demo_steps`` steps: it crosses zero after
    ``demo_theta0 / demo_step`` steps. Synthetic: ``trials`` data sets of
    :func:`attnlib.examples.mirror_random_data`, W(0) = ``init_scale``·N(0, 1), ``steps``
    unnormalised ℓp steps of size ``lr`` in float32 with each variant; sparsity is the
    fraction of entries below 1% of the largest (:func:`attnlib.metrics.sparsity`). See chapter 9.
    """
    paper = _one_entry(False, demo_steps, demo_step, demo_theta0, lp)
    kept = _one_entry(True, demo_steps, demo_step, demo_theta0, lp)
    cross = int(np.ceil(demo_theta0 / demo_step))  # the first step at or past zero
    after = slice(cross + 1, None)
    ex = mirror_random_data(seed=seed, trials=trials, device="cpu")
    W0 = init_scale * ex.init["W"]
    numbers, arrays = {}, {"demo_paper": paper, "demo_kept": kept}
    for name, keep in (("paper", False), ("kept", True)):
        W, loss = _synthetic(keep, ex.data, W0, lp, lr, steps)
        numbers[f"sparsity_{name}"] = float(sparsity(W, 0.01).mean())
        numbers[f"zeros_{name}"] = float((W == 0).double().mean())
        numbers[f"loss_{name}"] = loss
        arrays[f"W_{name}"] = W
    numbers.update(Numerics("autograd", 0.0, "float32").numbers())  # constant steps: no ε
    numbers.update(trap_paper=float((paper[after] == 0).mean()),
                   trap_kept=float((kept[after] == 0).mean()),
                   escaped_kept=int(kept[-1] != 0),
                   demo_final_kept=float(kept[-1]), demo_final_paper=float(paper[-1]),
                   demo_cross=cross,
                   sparsity_gap=abs(numbers["sparsity_paper"] - numbers["sparsity_kept"]))
    return numbers, arrays
