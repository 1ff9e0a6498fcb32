r"""E4 of *Max-Margin Token Selection in Attention Mechanism* (arXiv 2306.13596): the loss
shapes the path (chapter 3).

``mm_e4_loss`` trains normalised GD on p from 0 for every C with the correlation loss
:math:`\ell(u) = -u` and the logistic loss, as one batched call per loss. Re-exported by
``attnlib.experiments.max_margin``, which registers it after E1-E3 (the paper's order).
"""

from __future__ import annotations

import torch

from attnlib import examples as _examples
from attnlib._runtime import resolve_device
from attnlib.figures.max_margin import plot_e4
from attnlib.train import train

from .registry import Target, experiment

__all__ = ["e4_loss"]

PAPER = "2306.13596"


# ----------------------------------------------------------------------------- E4

@experiment(
    "mm_e4_loss", seconds=0.2, paper=f"{PAPER} appendix figure (E4)", chapter="03_local_global",
    title="The loss shapes the path: correlation loss vs logistic loss",
    plot=plot_e4,
    targets=[
        Target("corr_max_abs_angle200", "ℓ = −u: largest |angle(p(200))| from the p^mm axis "
               "over C ∈ {1..10, 100}", "≤ 8° (6.9° at C=100)", 0.0, 8.0, "≤ 8°",
               "re-simulation"),
        Target("corr_min_angle200", "ℓ = −u: smallest angle(p(200)) (paths approach from above)",
               "≥ 0°", -1e-6, 8.0, "positive side", "re-simulation"),
        Target("log_angle200_C100", "logistic, C = 100: angle(p(200)) in degrees", "−45°",
               -47.0, -43.0, "±2°", "re-simulation"),
        Target("corr_angle200_C1", "ℓ = −u, C = 1: angle(p(200)) in degrees", "0°", -1e-6, 1e-6,
               "exact", "re-simulation", "C = 1: the two inputs are mirror images and p(0) = 0, "
               "so the path stays on the axis by symmetry", evidence="by construction"),
        Target("log_angle200_C1", "logistic, C = 1: angle(p(200)) in degrees", "0°", -1e-6,
               1e-6, "exact", "re-simulation", "by symmetry, as for ℓ = −u",
               evidence="by construction"),
    ],
)
def e4_loss(C: tuple[float, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100), steps: int = 1000,
            lr: float = 0.1, eps: float = 1e-9, horizon: int = 200,
            device: str | None = "cpu"):
    r"""E4: normalised GD on p from 0 for every C, one batched call per loss.

    :math:`X_1=[(0,0;0),(1,1;C)]`, :math:`X_2=[(0,0;0),(1,-1;1)]`, so :math:`p^{mm}=(1,0)` for
    every C. The angle of :math:`p(k)` from the :math:`p^{mm}` axis is recorded at the
    ``horizon`` the paper plots (200). See chapter 3.
    """
    dev = resolve_device(device)
    ex = _examples.loss_example(C=C, device=dev)
    runs = [train(ex.data, param="p", loss=loss, lr=lr, steps=steps, eps=eps, init=ex.init,
                  record_every=1) for loss in ("correlation", "logistic")]
    P = torch.stack([r.history["p"] for r in runs])  # (2, len(C), S, 3)
    angle = torch.rad2deg(torch.atan2(P[..., 1], P[..., 0]))  # (2, len(C), S)
    angle = torch.where(P[..., :2].norm(dim=-1) > 0, angle, torch.zeros_like(angle))
    k = min(horizon, steps)
    Cs = list(ex.known["C"])
    i1, i100 = Cs.index(1.0) if 1.0 in Cs else 0, Cs.index(100.0) if 100.0 in Cs else -1
    numbers = {
        "corr_max_abs_angle200": float(angle[0, :, k].abs().max()),
        "corr_min_angle200": float(angle[0, :, k].min()),
        "log_angle200_C100": float(angle[1, i100, k]),
        "corr_angle200_C100": float(angle[0, i100, k]),
        "corr_angle200_C1": float(angle[0, i1, k]), "log_angle200_C1": float(angle[1, i1, k]),
        "log_min_angle200": float(angle[1, :, k].min()),
        "log_angle_final_C100": float(angle[1, i100, -1]),
    }
    for c, a0, a1 in zip(Cs, angle[0, :, k].tolist(), angle[1, :, k].tolist()):
        numbers[f"corr_angle200_C{c:g}"] = a0
        numbers[f"log_angle200_C{c:g}"] = a1
    arrays = {"steps": runs[0].history["step"], "C": torch.tensor(Cs), "paths": P[..., :2],
              "angle": angle}
    return numbers, arrays
