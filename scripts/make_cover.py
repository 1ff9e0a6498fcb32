"""Draw the landing page's cover figure, book/_static/cover.svg (run once; the SVG is committed).

    .venv/bin/python scripts/make_cover.py

The max-margin paper's three-token example (``attnlib.examples.three_token_example``, arXiv
2306.13596, E1): normalised gradient descent trains the prompt p from p(0) = (0, -0.5). Left,
the key plane: the three tokens, the direction of p(t) at a few steps turning toward the
max-margin direction p^mm, and the two lines of the Att-SVM's margin (through the selected
token and through its support token). Right, the attention each token receives as ||p||
grows: it concentrates on token 1. The output is deterministic (no date, fixed hash salt).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import attnlib as al  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "book" / "_static" / "cover.svg"
COLORS = ("#d1495b", "#00798c", "#edae49")  # token 1 (selected), 2, 3
STEPS = 80


def main() -> Path:
    plt.rcParams.update({"svg.hashsalt": "attention-svm-cover", "font.size": 15,
                         "axes.titlesize": 15, "axes.spines.top": False,
                         "axes.spines.right": False})
    ex = al.examples.three_token_example("global", device="cpu", dtype=torch.float64)
    res = al.train(ex.data, **{**ex.settings, "steps": STEPS}, device="cpu",
                   init={"W": ex.init["W"], "p": torch.tensor([0.0, -0.5, 0.0],
                                                              dtype=torch.float64)},
                   record_every=1)
    P = res.history["p"].numpy()[:, :2]  # p(t) in the key plane, (steps+1, 2)
    K = ex.data.X[0, :, :2].numpy()  # the three keys x_t in the plane
    p_mm = ex.known["p_mm"][0].numpy()[:2]  # Att-SVM solution selecting token 1
    att = np.exp(P @ K.T)
    att /= att.sum(axis=1, keepdims=True)  # softmax attention s_t(p(t)) per step
    norms = np.linalg.norm(P, axis=1)

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(6.6, 3.3), gridspec_kw={"wspace": 0.38})
    # left: the key plane
    u = p_mm / np.linalg.norm(p_mm)
    normal = np.array([-u[1], u[0]])
    ends = []
    for level, style in ((K[0] @ p_mm, "-"), (K[0] @ p_mm - 1, "--")):
        c = level * p_mm / (p_mm @ p_mm)  # a point of the line {k: p_mm . k = level}
        seg = np.array([c - 2 * normal, c + 2 * normal])
        ax.plot(seg[:, 0], seg[:, 1], style, color="0.45", lw=1.2, zorder=1)
        ends.append(c - 1.3 * normal)
    ax.annotate("", xy=ends[0], xytext=ends[1],
                arrowprops=dict(arrowstyle="<->", color="0.3", lw=1.2, shrinkA=0, shrinkB=0))
    ax.text(ends[1][0] + 0.05, (ends[0][1] + ends[1][1]) / 2, "margin", color="0.3",
            fontsize=13, va="center", ha="left", rotation=90)
    for t in (0, 6, 12, 25, STEPS):
        d = P[t] / np.linalg.norm(P[t])
        alpha = 0.3 + 0.7 * t / STEPS
        ax.annotate("", xy=1.15 * d, xytext=(0, 0),
                    arrowprops=dict(arrowstyle="-|>", color="#3b3b98", alpha=alpha, lw=1.6))
    ax.annotate("", xy=1.45 * u, xytext=(0, 0),
                arrowprops=dict(arrowstyle="-|>", color="black", lw=2.2))
    ax.text(1.45 * u[0] + 0.1, 1.45 * u[1] - 0.05, r"$p^{\rm mm}$", fontsize=16)
    d0 = P[0] / np.linalg.norm(P[0])
    ax.text(1.15 * d0[0] + 0.08, 1.15 * d0[1], r"$p(0)$", color="#3b3b98", fontsize=15)
    for t, (x, y) in enumerate(K):
        ax.scatter([x], [y], s=140, color=COLORS[t], edgecolor="black", zorder=3)
        dx, dy = ((0.14, -0.27), (-0.1, 0.16), (0.1, 0.12))[t]
        ax.text(x + dx, y + dy, f"$x_{t + 1}$", fontsize=16, zorder=4)
    ax.set_xlim(-1.3, 1.65)
    ax.set_ylim(-1.3, 1.75)
    ax.set_aspect("equal")
    ax.set_xticks([-1, 0, 1])
    ax.set_yticks([-1, 0, 1])
    ax.set_title("direction of $p$ turns to $p^{\\rm mm}$")
    # right: attention per token as ||p|| grows
    for t in range(3):
        bx.plot(norms, att[:, t], color=COLORS[t], lw=2.4,
                ls=("-", "--", ":")[t], label=f"$x_{t + 1}$")
    bx.set_xlabel(r"$\|p(t)\|$")
    bx.set_ylabel("attention")
    bx.set_ylim(-0.03, 1.03)
    bx.set_title("attention selects $x_1$")
    bx.legend(frameon=False, loc="center right")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return OUT


if __name__ == "__main__":
    print(main())
