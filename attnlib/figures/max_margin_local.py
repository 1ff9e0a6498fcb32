r"""Figures of the local and joint checks of arXiv 2306.13596 (chapters 3 and 4).

One function per experiment of ``attnlib.experiments.max_margin_local``: a Result in, a
matplotlib Figure out, drawn from ``result.arrays`` only (nothing is recomputed).
"""

from __future__ import annotations

import numpy as np

from attnlib import plots as _plots

_C = _plots.PALETTE  # the book's colour of each role (attnlib.plots.style)

__all__ = ["plot_local_cone", "plot_local_regpath", "plot_joint_regpath"]


def _np(a):
    return np.asarray(a.cpu() if hasattr(a, "cpu") else a)


def plot_local_cone(res):
    r"""(a) The plain-GD paths from the cone boundaries, red when they end selecting
    :math:`x_2` (the local direction), grey when they end on :math:`x_1`; the ray of
    :math:`p^{mm}(2)` and the edge of the tail cone. (b) For every (μ, R) on the
    :math:`x_1` side: stayed in its cone (●), left it but still selects :math:`x_2` (▲),
    ended on :math:`x_1` (✕). See chapter 3."""
    a = res.arrays
    mus, radii = _np(a["mus"]), _np(a["radii"])
    P = _np(a["paths"]).reshape(len(mus), 2, len(radii), -1, 2)
    sel, stay = _np(a["selected"]), _np(a["stay"])
    mu_star = float(a["mu_star"])
    fig, axes = _plots.new_figure(1, 2, figsize=(10.0, 4.0))
    ax = axes[0]
    for i in range(len(mus)):
        for j in range(2):
            for k in range(len(radii)):
                color = _C["target"] if sel[i, j, k] == 1 else _C["path"]
                ax.plot(P[i, j, k, :, 0], P[i, j, k, :, 1], color=color, lw=0.8, alpha=0.8)
                ax.plot(*P[i, j, k, 0], "o", color=color, ms=2)
    top = max(float(np.abs(P[..., 0]).max()), 1.0)
    ax.plot([0, top], [0, 0], "--", color=_C["target"], lw=1, label=r"$p^{mm}(2)$")
    t = np.arccos(1 - mu_star)
    ax.plot([0, top], [0, top * np.tan(t)], ":", color=_C["ink"], lw=1,
            label=r"tail cone edge ($\mu_\star$)")
    ax.set_xlabel("$p_1$")
    ax.set_ylabel("$p_2$")
    ax.set_title("plain GD (η = 1/L) from the cone boundaries", fontsize=9)
    ax.legend(fontsize=8)
    ax = axes[1]
    for i, mu in enumerate(mus):
        for k, R in enumerate(radii):
            if sel[i, 0, k] != 1:
                m, c = "x", _C["path"]
            else:
                m, c = ("o", _C["target"]) if stay[i, 0, k] else ("^", _C["support"])
            ax.plot(R, mu, m, color=c, ms=7)
    ax.axhline(mu_star, color=_C["ink"], ls=":", lw=1)
    ax.text(radii[0], mu_star * 1.1, r"$\mu_\star$", fontsize=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("R (start norm)")
    ax.set_ylabel(r"$\mu$ (cone width)")
    ax.set_title("x1 side: ● stays in its cone, ▲ leaves it, ✕ ends on x1", fontsize=9)
    return fig


def plot_local_regpath(res):
    r"""(a) The loss on the circle :math:`\|p\|=R` against the angle of p, for every R, with
    the directions of :math:`p^{mm}(1)` and :math:`p^{mm}(2)`. (b) Near :math:`p^{mm}(2)`: the
    score deficit :math:`\gamma_2-Yf` (the loss is decreasing in :math:`Yf`) over its value at
    the cone-restricted minimiser, log scale, with the
    restricting cone and the tail cone. (c) :math:`1-\cos` of the global and the local (cone)
    minimiser to their max-margin directions against R. See chapter 3."""
    a = res.arrays
    radii, phi, loss = _np(a["radii"]), np.degrees(_np(a["phi"])), _np(a["loss"])
    fig, axes = _plots.new_figure(1, 3, figsize=(13.5, 3.8))
    colors = _plots.sequence_colors(len(radii))
    ax = axes[0]
    for i, R in enumerate(radii):
        ax.plot(phi, loss[i], color=colors[i], lw=1, label=f"R = {R:g}")
    for key, color, lab in (("p_mm_1", _C["target"], r"$p^{mm}(1)$"),
                            ("p_mm_2", _C["other"], r"$p^{mm}(2)$")):
        q = _np(a[key])
        ax.axvline(np.degrees(np.arctan2(q[1], q[0])), color=color, ls="--", lw=1, label=lab)
    ax.set_xlabel("angle of p (degrees)")
    ax.set_ylabel(r"$\mathcal{L}(p)$ on $\|p\| = R$")
    ax.set_title("(a) the loss over the circle of directions", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    ax = axes[1]
    z, dfc = np.degrees(_np(a["phi_zoom"])), _np(a["deficit"])
    best = np.degrees(_np(a["best_local"]))
    for i in range(len(radii)):
        y = np.where(dfc[i] > 0, dfc[i], np.nan)
        y = y / np.interp(best[i], z, dfc[i])
        ax.semilogy(z, y, color=colors[i], lw=1)
        ax.plot(best[i], np.interp(best[i], z, y), "o", color=colors[i], ms=3)
    h, b = np.degrees(float(a["half_angle"])), np.degrees(float(a["barrier"]))
    for x, st, lab in ((h, "--", "restricting cone"), (b, ":", "tail cone")):
        ax.axvline(x, color=_C["ink"], ls=st, lw=0.8, label=lab)
        ax.axvline(-x, color=_C["ink"], ls=st, lw=0.8)
    ax.set_xlabel(r"angle of p from $p^{mm}(2)$ (degrees)")
    ax.set_ylabel(r"$(\gamma_2 - Yf)$ over its value at $\bar p_{loc}$")
    ax.set_ylim(0.3, 1e3)
    ax.set_title("(b) the local valley, minimisers dotted", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[2]
    ax.loglog(radii, 1 - _np(a["cos_global"]) + 1e-17, "o-", color=_C["target"],
              label=r"global: $p^{mm}(1)$")
    ax.loglog(radii, 1 - _np(a["cos_local"]) + 1e-17, "s-", color=_C["other"],
              label=r"local (cone): $p^{mm}(2)$")
    ax.set_xlabel("R")
    ax.set_ylabel(r"$1-\cos(\bar p(R), p^{mm})$")
    ax.set_title("(c) regularisation paths", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def plot_joint_regpath(res):
    r""":math:`1-\cos` of the joint minimisers :math:`(\bar v_r,\bar p_R)` to the SVM
    directions against R (r = R): tight p to :math:`p^{mm}`, non-tight p to :math:`p^{relax}`
    and to :math:`p^{mm}`, v to :math:`v^{mm}`. See chapter 4."""
    a = res.arrays
    R = _np(a["radii"])
    fig, ax = _plots.new_figure(figsize=(5.6, 3.8))
    for vals, lab, st in (
            (a["cos_p_mm"][0], r"tight: $p$ vs $p^{mm}$", "o-"),
            (a["cos_p_relax"][1], r"non-tight: $p$ vs $p^{relax}$", "s-"),
            (a["cos_p_mm"][1], r"non-tight: $p$ vs $p^{mm}$", "s--"),
            (a["cos_v"][1], r"non-tight: $v$ vs $v^{mm}$", "^:")):
        ax.loglog(R, 1 - _np(vals) + 1e-17, st, label=lab)
    ax.set_xlabel("R (= r)")
    ax.set_ylabel(r"$1-\cos$")
    ax.set_title("joint regularisation path", fontsize=9)
    ax.legend(fontsize=8)
    return fig
