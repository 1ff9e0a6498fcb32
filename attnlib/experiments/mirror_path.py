r"""The data of chapter 9's explorer: one ℓp mirror-descent path and its AttSVMs.

``md_path`` trains W by ℓp mirror descent (arXiv 2410.14581),
:math:`W_{k+1} = \nabla\psi^{-1}(\nabla\psi(W_k) - \eta\nabla\mathcal L(W_k))` with
:math:`\nabla\psi(W) = \mathrm{sign}(W)|W|^{p-1}`, from :math:`W(0) = 0` on one synthetic data
set, and solves the ℓp- and the ℓ2-AttSVM of the final selection. The explorer
:func:`attnlib.explorers.mirror.mirror_descent` reads it through :func:`attnlib.experiments.run`
(cached), so a slider move never retrains. See chapter 9.
"""

from __future__ import annotations

import numpy as np
import torch

from attnlib._runtime import few_threads, resolve_device
from attnlib.examples import MD_BUDGETS, mirror_random_data
from attnlib.metrics import bregman_direction
from attnlib.svm import solve_each
from attnlib.tokens import selected_tokens
from attnlib.train import train

from .official_numerics import Numerics
from .registry import Target, experiment

PAPER = "2410.14581"


@experiment(
    "md_path", paper=f"{PAPER} §5.1 (one dataset, W(0) = 0)", chapter="09_mirror_descent",
    title="One ℓp-MD path from W(0) = 0 and the ℓp- and ℓ2-AttSVMs of its selection",
    seconds=0.1,  # measured 2026-11-29: CPU s, one process alone
    targets=[
        Target("matched_closer", "at the end the iterate is no farther (D_dir) from the "
               "ℓp-AttSVM than from the ℓ2-AttSVM", "closer", 1, 1, "exact", "suggested",
               "the data of the chapter's explorer (attnlib.explorers.mirror_descent)"),
    ],
)
def path(lp: float = 1.75, seed: int = 1, normalized: bool = True, steps: int = MD_BUDGETS[1.75],
         record_every: int = 10, lr: float = 0.1, eps: float = 0.0, progress: bool = False,
         device: str | None = "cpu"):
    r"""ℓp mirror descent (plain GD at p = 2) from :math:`W(0) = 0` on one data set of
    :func:`attnlib.examples.mirror_random_data` (n = 6, T = 8, d = 10), recorded every
    ``record_every`` steps, and the ℓp- and ℓ2-AttSVM of the final selection.

    Arrays: ``W`` (S, d, d) the iterates, ``steps`` (S,), ``svm_lp`` and ``svm_2`` (d, d)
    (NaN where no solver answered), ``alpha`` (n,), ``entries`` (2, 2) the (row, column) of
    the two largest entries of ``|svm_lp|``, and ``D_lp``, ``D_2`` (S,) the directional
    Bregman divergences :math:`D_{dir}(W^{mm}, W(k))` in the ℓp geometry, ``grad`` (S,) the
    gradient's Frobenius norm. ``eps`` is the ε
    added to the dual-norm of the gradient in the normalised step (see :func:`attnlib.train`):
    0 by default (every step of length η, attnlib's exact gradient), or the official code's
    2⁻⁵² (its step rule, with attnlib's gradient):
    near p = 1 the gradient falls below 2⁻⁵² within a few hundred steps and the direction
    freezes (seed 1, p = 1.1, 1,500 steps: D_dir ≈ 0.12 with 2⁻⁵², ≈ 2e-4 with 0), a property
    of ε, not of p (chapter 9).
    """
    dev = resolve_device(device)
    data = mirror_random_data(seed, device=dev).data
    with few_threads(device=dev):
        run = train(data, "W", method="gd" if lp == 2.0 else "md", lp=lp, lr=lr,
                    normalized=normalized, steps=steps, eps=eps, record_every=record_every,
                    progress=progress, init={"W": torch.zeros(data.d, data.d, dtype=data.dtype,
                                                              device=dev)})
        alpha = selected_tokens(data, run.W)
        one = data.batched()  # solve_each solves the trials of batched data
        svm_lp = solve_each(one, alpha[None], norm=float(lp) if lp != 2.0 else "fro")
        svm_2 = solve_each(one, alpha[None], norm="fro")
    H = run.history["W"]  # (S, d, d)
    W_lp, W_2 = svm_lp.W[0].to(H), svm_2.W[0].to(H)  # (d, d), NaN where no solver answered
    big = np.argsort(np.nan_to_num(W_lp.abs().cpu().numpy()).ravel())[-2:][::-1]
    D_lp = bregman_direction(W_lp, H, lp, dims=2)
    D_2 = bregman_direction(W_2, H, lp, dims=2)
    numbers = dict(ddir_lp=float(D_lp[-1]), ddir_2=float(D_2[-1]),
                   matched_closer=int(bool(D_lp[-1] <= D_2[-1])),
                   svm_fallbacks=int(svm_lp.fallback.sum() + svm_2.fallback.sum()),
                   **Numerics("exact", eps if normalized else 0.0).numbers())
    return numbers, dict(W=H, steps=run.history["step"], svm_lp=W_lp, svm_2=W_2, alpha=alpha,
                         entries=np.array([divmod(int(j), data.d) for j in big]),
                         D_lp=D_lp, D_2=D_2, grad=run.history["grad_norm"])
