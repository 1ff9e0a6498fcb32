r"""Figures of the GD theorem's checks (:mod:`attnlib.experiments.max_margin_gd`, chapter 2).

``plot_circle``: the excess risk over the circle of directions for growing R, with its
minimiser and the max-margin direction. ``plot_gd_theorem``: plain GD with the justified step,
the cosine to :math:`p^{mm}`, :math:`\|p\|` against :math:`\log k`, the sign of
:math:`\langle\nabla\mathcal L, p^{mm}\rangle` and the support tokens' share of the deficit.
``plot_regimes``: normalised GD under the numerical regimes of
``attnlib.experiments.official_numerics``. Drawn from ``result.arrays`` only.
"""

from __future__ import annotations

import numpy as np

from attnlib import plots as _plots
from attnlib.plots.style import readable

_C = _plots.PALETTE  # the book's colour of each role (attnlib.plots.style)

__all__ = ["plot_circle", "plot_gd_theorem", "plot_regimes"]

_NAMES = {"e1": "E1 (one input)", "e2": "E2 (three inputs)"}


def plot_circle(res, examples=("e1", "e2")):
    r"""For each example: :math:`\log_{10}` of the excess risk over its minimum on the circle,
    :math:`\mathcal L(R u_\theta) - \min_\theta`, against :math:`\theta`, one curve per R (dark
    = large), the minimisers (dots) and the angle of :math:`p^{mm}` (dashed). See chapter 2.
    """
    from matplotlib.lines import Line2D

    a = res.arrays
    fig, axes = _plots.new_figure(2, len(examples), figsize=(4.5 * len(examples), 7.8))
    axes = np.asarray(axes).reshape(2, len(examples))
    deg = np.degrees(a["angles"])
    radii = a["radii"]
    colors = _plots.sequence_colors(len(radii))
    for col, name in enumerate(examples):
        L = a[f"{name}_log_excess"] / np.log(10)  # (R, A) log10 excess
        mm = float(a[f"{name}_angle_mm"])
        for row, ax in enumerate(axes[:, col]):
            for j in range(len(radii)):
                ax.plot(deg, L[j] - L[j].min(), color=colors[j], lw=1.4)
                ax.plot(np.degrees(a[f"{name}_best"][j]), 0.0, "o", color=colors[j], ms=5)
            ax.axvline(mm, color=_C["target"], ls="--", lw=1.4)
            if col == 0:
                ax.set_ylabel(r"$\log_{10}$ relative excess")
            ax.grid(alpha=0.3)
            if row == 0:
                ax.set_ylim(-0.5, 8)
                _plots.title(ax, _NAMES.get(name, name) + ": whole circle", fontsize=11)
            else:
                ax.set_xlim(mm - 25, mm + 25)
                ax.set_ylim(-0.1, 2)
                _plots.title(ax, "zoom on $p^{mm}$", fontsize=11)
                ax.set_xlabel(r"direction $\theta$ (degrees)")
    key = [Line2D([], [], color=c, lw=2, label=f"$R = {r:g}$") for c, r in zip(colors, radii)]
    key.append(Line2D([], [], color=_C["target"], ls="--", lw=1.4, label="$p^{mm}$"))
    fig.legend(handles=key, loc="outside lower center", ncol=5, frameon=False, fontsize=11)
    return readable(fig)


def plot_gd_theorem(res, examples=("e1", "e2")):
    r"""Plain GD with :math:`\eta = 1/L_{\rm bound}`: (a) :math:`1-\cos(p(k), p^{mm})`,
    (b) :math:`\|p(k)\|/\|p^{mm}\|` against :math:`\log k`, (c) the normalised
    :math:`\langle\nabla\mathcal L(p(k)), p^{mm}\rangle` (below 0), (d) the support tokens'
    share of the score deficit. Six runs per example. See chapter 2.
    """
    a = res.arrays
    fig, axes = _plots.new_figure(2, 2, figsize=(9.0, 7.8))
    axes = np.asarray(axes).reshape(-1)
    styles = {"e1": (_C["other"], "E1"), "e2": (_C["support"], "E2")}
    for name in examples:
        color, label = styles.get(name, (_C["path"], name))
        k = np.asarray(a[f"{name}_steps"], dtype=float)
        keep = k > 0
        for j in range(a[f"{name}_cos"].shape[0]):
            lab = label if j == 0 else None
            axes[0].plot(k[keep], 1 - a[f"{name}_cos"][j][keep], color=color, lw=1.4, label=lab)
            axes[1].plot(np.log(k[keep]), a[f"{name}_norm"][j][keep] / a[f"{name}_p_mm_norm"],
                         color=color, lw=1.4, label=lab)
            axes[2].plot(k[keep], a[f"{name}_inner"][j][keep], color=color, lw=1.4, label=lab)
            axes[3].plot(k[keep], a[f"{name}_share"][j][keep], color=color, lw=1.4, label=lab)
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_ylabel(r"$1-\cos(p(k), p^{mm})$")
    axes[1].set_xlabel(r"$\log k$")
    axes[1].set_ylabel(r"$\|p(k)\| / \|p^{mm}\|$")
    lo = np.log(max(1.0, float(np.min(np.asarray(a["e1_steps"])[1:]))))
    hi = np.log(float(np.max(a["e1_steps"])))
    base = a["e1_norm"][0][-1] / a["e1_p_mm_norm"]
    axes[1].plot([lo, hi], [base - (hi - lo), base], "k:", lw=1, label="slope 1")
    axes[2].axhline(0.0, color=_C["ink"], lw=0.8)
    axes[2].set_xscale("log")
    axes[2].set_ylabel(r"$\cos\angle(\nabla\mathcal{L}(p(k)),\, p^{mm})$")
    axes[3].set_xscale("log")
    axes[3].set_ylim(0, 1.02)
    axes[3].set_ylabel("support share of deficit")
    for ax, t in zip(axes, ("(a) direction", "(b) norm", "(c) gradient against $p^{mm}$",
                            "(d) support tokens")):
        _plots.title(ax, t, fontsize=11)
        ax.grid(alpha=0.3)
        if ax is not axes[1]:
            ax.set_xlabel("iteration $k$")
        ax.legend(fontsize=11)
    return readable(fig)


#: the regimes of ``mm_official_numerics`` as the figure names them
REGIME_LABELS = {"exact_eps": "exact gradient, official ε",
                 "exact_0": "exact gradient, ε = 0",
                 "auto_eps": "autograd, official ε",
                 "auto_0": "autograd, ε = 0",
                 "auto_eps_f32": "autograd, official ε, float32"}


def plot_regimes(res, examples=("e1", "e2")):
    r"""For each example, :math:`1 - \cos(p(k), p^{mm})` of normalised GD under every
    numerical regime (median over the six official starts with the 10-90% band), on a log
    axis. ``res`` is a result of ``mm_official_numerics``. See chapter 2.
    """
    a = res.arrays
    fig, axes = _plots.new_figure(1, len(examples), figsize=(4.8 * len(examples), 4.2))
    axes = np.atleast_1d(axes)
    colors = dict(zip(REGIME_LABELS.values(), _plots.COLORS[1:3] + _plots.COLORS[0:1]
                      + _plots.COLORS[3:5]))
    for ax, name in zip(axes, examples):
        vals = {lab: a[f"{name}_{tag}_cos"] for tag, lab in REGIME_LABELS.items()
                if f"{name}_{tag}_cos" in a}
        _plots.curves(a["steps"], vals, ax=ax, one_minus=True, logy=True,
                      ylabel=r"$1-\cos(p(k), p^{mm})$", colors=colors,
                      title=_NAMES.get(name, name), legend="lower left" if name == "e2" else None)
    return readable(fig)
