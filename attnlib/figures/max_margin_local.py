r"""Figures of the local and joint checks of arXiv 2306.13596 (chapters 3 and 4).

One function per experiment of ``attnlib.experiments.max_margin_local``: a Result in, a
matplotlib Figure out, drawn from ``result.arrays`` only (nothing is recomputed), and
:func:`plot_joint_example`, the picture of the joint example that opens chapter 4. Every
figure is at most 6.4 inches wide, its panels stacked, with text of at least 11 points, so
that it stays legible at a phone's width.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from attnlib import plots as _plots
from attnlib.plots.style import readable

_C = _plots.PALETTE  # the book's colour of each role (attnlib.plots.style)

__all__ = ["plot_local_cone", "plot_local_regpath", "plot_joint_regpath",
           "plot_joint_example"]

#: the smallest text of the figures of chapters 3 and 4, in points
def _np(a):
    return np.asarray(a.cpu() if hasattr(a, "cpu") else a)


def plot_local_cone(res):
    r"""(a) The plain-GD paths from the cone boundaries, red when they end selecting
    :math:`x_2` (the local direction), grey when they end on :math:`x_1`; the ray of
    :math:`p^{mm}(2)` and the edge of the tail cone. (b) For every (μ, R) on the
    :math:`x_1` side: stayed in its cone (dot), left it but still selects :math:`x_2`
    (triangle), ended on :math:`x_1` (cross). Panels stacked. See chapter 3."""
    a = res.arrays
    mus, radii = _np(a["mus"]), _np(a["radii"])
    P = _np(a["paths"]).reshape(len(mus), 2, len(radii), -1, 2)
    sel, stay = _np(a["selected"]), _np(a["stay"])
    mu_star = float(a["mu_star"])
    fig, axes = _plots.new_figure(2, 1, figsize=(6.4, 10.0),
                                  gridspec_kw=dict(height_ratios=(1.0, 0.85)))
    ax = axes[0]
    for i in range(len(mus)):
        for j in range(2):
            for k in range(len(radii)):
                color = _C["target"] if sel[i, j, k] == 1 else _C["path"]
                ax.plot(P[i, j, k, :, 0], P[i, j, k, :, 1], color=color, lw=0.9, alpha=0.8)
                ax.plot(*P[i, j, k, 0], "o", color=color, ms=3)
    top = max(float(np.abs(P[..., 0]).max()), 1.0)
    t = np.arccos(1 - mu_star)
    key = [Line2D([], [], color=_C["target"], label=r"ends selecting $x_2$"),
           Line2D([], [], color=_C["path"], label=r"ends selecting $x_1$"),
           ax.plot([0, top], [0, 0], "--", color=_C["target"], lw=1.5,
                   label=r"$p^{mm}(2)$")[0],
           ax.plot([0, top], [0, top * np.tan(t)], ":", color=_C["ink"], lw=1.5,
                   label=r"edge of the tail cone")[0]]
    ax.set_xlabel("$p_1$")
    ax.set_ylabel("$p_2$")
    ax.set_title(r"(a) plain GD, $\eta = 1/L$, from the cone boundaries")
    ax.legend(handles=key, loc="lower right")
    ax = axes[1]
    for i, mu in enumerate(mus):
        for k, R in enumerate(radii):
            if sel[i, 0, k] != 1:
                m, c = "x", _C["path"]
            else:
                m, c = ("o", _C["target"]) if stay[i, 0, k] else ("^", _C["support"])
            ax.plot(R, mu, m, color=c, ms=9)
    ax.axhline(mu_star, color=_C["ink"], ls=":", lw=1.5)
    ax.text(radii[-1] * 1.25, mu_star, r"$\mu_\star$", va="center")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"start norm $R$")
    ax.set_ylabel(r"cone width $\mu$")
    ax.set_title(r"(b) starts on the $x_1$ side")
    marks = [Line2D([], [], ls="", marker="o", color=_C["target"], ms=9,
                    label="stays in its cone"),
             Line2D([], [], ls="", marker="^", color=_C["support"], ms=9,
                    label=r"leaves it, selects $x_2$"),
             Line2D([], [], ls="", marker="x", color=_C["path"], ms=9,
                    label=r"ends selecting $x_1$")]
    ax.legend(handles=marks, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2,
              frameon=False)
    fig.set_layout_engine("constrained")
    return readable(fig)


_REGPATH_PANELS = ("circle", "valley", "paths")


def plot_local_regpath(res, panels=_REGPATH_PANELS):
    r"""The local regularisation path, ``panels`` (stacked) among

    * ``"circle"``: the loss on the circle :math:`\|p\|=R` against the angle of p, for every
      R (light to dark), with the directions of :math:`p^{mm}(1)` and :math:`p^{mm}(2)`;
    * ``"valley"``: near :math:`p^{mm}(2)`, the score deficit :math:`\gamma_2-Yf` (the loss is
      decreasing in :math:`Yf`) over its value at the cone-restricted minimiser, log scale,
      with the restricting cone and the tail cone;
    * ``"paths"``: :math:`1-\cos` of the global and the local (cone) minimiser to their
      max-margin directions against R.

    See chapter 3."""
    unknown = set(panels) - set(_REGPATH_PANELS)
    if unknown or not panels:
        raise ValueError(f"panels must be among {_REGPATH_PANELS}, got {panels!r}")
    a = res.arrays
    radii, phi, loss = _np(a["radii"]), np.degrees(_np(a["phi"])), _np(a["loss"])
    fig, axes = _plots.new_figure(len(panels), 1, figsize=(6.4, 4.6 * len(panels)))
    axes = dict(zip(panels, np.atleast_1d(axes)))
    letter = {p: f"({chr(97 + j)}) " if len(panels) > 1 else "" for j, p in enumerate(panels)}
    colors = _plots.sequence_colors(len(radii))
    if "circle" in axes:
        ax = axes["circle"]
        for i, R in enumerate(radii):
            lab = f"$R = {R:g}$" if i in (0, len(radii) - 1) else None
            ax.plot(phi, loss[i], color=colors[i], lw=1.2, label=lab)
        for key, color, ls, lab in (("p_mm_1", _C["target"], "--", r"$p^{mm}(1)$"),
                                    ("p_mm_2", _C["other"], "-.", r"$p^{mm}(2)$")):
            q = _np(a[key])
            ax.axvline(np.degrees(np.arctan2(q[1], q[0])), color=color, ls=ls, lw=1.5,
                       label=lab)
        ax.set_xlabel(r"angle of $p$ (degrees)")
        ax.set_ylabel(r"$\mathcal{L}(p)$ on $\|p\| = R$")
        ax.set_title(letter["circle"] + "the loss over the circle of directions")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)
    if "valley" in axes:
        ax = axes["valley"]
        z, dfc = np.degrees(_np(a["phi_zoom"])), _np(a["deficit"])
        best = np.degrees(_np(a["best_local"]))
        for i in range(len(radii)):
            y = np.where(dfc[i] > 0, dfc[i], np.nan)
            y = y / np.interp(best[i], z, dfc[i])
            lab = f"$R = {radii[i]:g}$" if i in (0, len(radii) - 1) else None
            ax.semilogy(z, y, color=colors[i], lw=1.2, label=lab)
            ax.plot(best[i], np.interp(best[i], z, y), "o", color=colors[i], ms=5)
        h, b = np.degrees(float(a["half_angle"])), np.degrees(float(a["barrier"]))
        for x, st, lab in ((h, "--", "restricting cone"), (b, ":", "tail cone")):
            ax.axvline(x, color=_C["ink"], ls=st, lw=1.2, label=lab)
            ax.axvline(-x, color=_C["ink"], ls=st, lw=1.2)
        ax.set_xlabel(r"angle of $p$ from $p^{mm}(2)$ (degrees)")
        ax.set_ylabel(r"$\gamma_2 - Yf$, relative")
        ax.set_ylim(0.3, 1e3)
        ax.set_title(letter["valley"] + "the local valley (dots: minimisers)")
        ax.legend(loc="upper center", ncol=2)
    if "paths" in axes:
        ax = axes["paths"]
        ax.loglog(radii, 1 - _np(a["cos_global"]) + 1e-17, "o-", color=_C["target"],
                  label=r"global: to $p^{mm}(1)$")
        ax.loglog(radii, 1 - _np(a["cos_local"]) + 1e-17, "s--", color=_C["other"],
                  label=r"local (cone): to $p^{mm}(2)$")
        ax.set_xlabel("$R$")
        ax.set_ylabel(r"$1-\cos(\bar p(R), p^{mm})$")
        ax.set_title(letter["paths"] + "the two regularisation paths")
        ax.legend(loc="lower left")
    fig.set_layout_engine("constrained")
    return readable(fig)


def plot_joint_regpath(res):
    r""":math:`1-\cos` of the joint minimisers :math:`(\bar v_r,\bar p_R)` to the SVM
    directions against R (r = R): tight p to :math:`p^{mm}`, non-tight p to :math:`p^{relax}`
    and to :math:`p^{mm}`, v to :math:`v^{mm}`. See chapter 4."""
    a = res.arrays
    R = _np(a["radii"])
    fig, ax = _plots.new_figure(figsize=(6.4, 5.0))
    for vals, lab, st, col in (
            (a["cos_p_mm"][0], r"tight: $p$ to $p^{mm}$", "o-", _plots.COLORS[1]),
            (a["cos_p_relax"][1], r"non-tight: $p$ to $p^{relax}$", "s-", _C["target"]),
            (a["cos_p_mm"][1], r"non-tight: $p$ to $p^{mm}$", "s--", _plots.COLORS[3]),
            (a["cos_v"][1], r"non-tight: $v$ to $v^{mm}$", "^:", _plots.COLORS[2])):
        ax.loglog(R, 1 - _np(vals) + 1e-17, st, color=col, label=lab, ms=7)
    ax.set_xlabel("radius $R$ ($= r$)")
    ax.set_ylabel(r"$1-\cos$")
    ax.set_title("joint regularisation path")
    ax.legend(loc="lower left")
    fig.set_layout_engine("constrained")
    return readable(fig)


def plot_joint_example(data, v_mm, p_mm, p_relax):
    r"""The joint example in the plane: the second token of each input (marker by label; the
    first is the origin), the head's margin lines :math:`v^{mm\top}x = \pm1`, and the
    directions :math:`v^{mm}`, :math:`p^{mm}` and :math:`p^{relax}` as arrows from the origin.
    See chapter 4."""
    X, Y = _np(data.X), _np(data.Y)
    v, pm, pr = _np(v_mm), _np(p_mm), _np(p_relax)
    fig, ax = _plots.new_figure(figsize=(6.4, 5.4))
    ax.axhline(0, color=_C["axis"], lw=0.8, zorder=0)
    ax.axvline(0, color=_C["axis"], lw=0.8, zorder=0)
    vn = v / (v @ v)  # the points x with v^T x = +-1 are +-vn plus the normal's orthogonal
    o = np.array([-v[1], v[0]]) / np.linalg.norm(v)
    for s in (1, -1):
        a, b = s * vn - 3 * o, s * vn + 3 * o
        ax.plot([a[0], b[0]], [a[1], b[1]], ":", color=_C["other"], lw=1.5,
                label=r"head margin $v^{mm\top}x = \pm 1$" if s == 1 else None)
    ax.plot(0, 0, "o", color=_C["neutral"], mec=_C["ink"], ms=10, ls="",
            label="first token of every input")
    for i, (x, y) in enumerate(zip(X[:, 1], Y)):
        m, c = ("o", _C["target"]) if y > 0 else ("s", _C["other"])
        ax.plot(*x, m, color=c, mec=_C["ink"], ms=11, ls="",
                label=(r"second token, $Y = +1$" if y > 0 else r"second token, $Y = -1$")
                if i == int(np.argmax(Y > 0 if y > 0 else Y < 0)) else None)
        margin = float(y * (v @ x))
        ax.annotate(f"input {i + 1}" + ("" if abs(margin - 1) < 1e-6 else
                                        f" (head margin {margin:g})"),
                    x, xytext=(8, 6), textcoords="offset points")
    for d, c, ls, lab in ((v, _C["other"], "-", r"$v^{mm}$"),
                          (pm, _C["path"], "--", r"$p^{mm}$"),
                          (pr, _C["target"], "-", r"$p^{relax}$")):
        ax.annotate("", xy=d, xytext=(0, 0),
                    arrowprops=dict(arrowstyle="-|>", color=c, lw=2, ls=ls,
                                    mutation_scale=18))
        ax.plot([], [], color=c, ls=ls, lw=2, label=lab)
    ax.set_xlim(-0.6, 2.5)
    ax.set_ylim(-1.6, 2.1)
    ax.set_aspect("equal")
    ax.set_xlabel("first coordinate")
    ax.set_ylabel("second coordinate")
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.14), ncol=2, frameon=False)
    fig.set_layout_engine("constrained")
    return readable(fig)
