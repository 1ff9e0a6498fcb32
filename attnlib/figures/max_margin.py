r"""Figures of *Max-Margin Token Selection in Attention Mechanism* (arXiv 2306.13596).

One function per experiment of :mod:`attnlib.experiments.max_margin`: a
:class:`~attnlib.experiments.Result` in, a matplotlib Figure out, drawn from
``result.arrays`` only (nothing is recomputed). Chapters 2-4 show them through
``result.figure()`` (the experiment's ``plot=``) or by name (``mm.plot_e1(e1, panels=...)``).

Notation as in the book: tokens :math:`x_t` in the key plane, scores :math:`\gamma_t`, the
prompt :math:`p(k)` after :math:`k` steps, the Att-SVM direction :math:`p^{mm}`.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from attnlib import plots as _plots
from attnlib.plots.style import readable

_C = _plots.PALETTE  # the book's colour of each role (attnlib.plots.style)

__all__ = ["plot_e1", "plot_e2", "plot_e3", "plot_e4", "plot_regpath", "plot_certificate",
           "run_styles", "comparison_table"]

_LOSS_NAMES = {"correlation": "ℓ(u) = −u", "logistic": "logistic"}


def run_styles(k: int):
    """``k`` distinguishable (colour, line style) pairs for runs from ordered starts: viridis
    from light to dark, solid and dashed in turn (runs of one experiment never merge into one
    grey band). See chapter 2."""
    colors = _plots.sequence_colors(k)
    return [(colors[j], "-" if j % 2 == 0 else "--") for j in range(k)]


def _runs(ax, P, labels):
    """Gradient-descent paths ``P`` (B, S, 2), one colour and line style each, a dot at each
    start, labelled ``labels`` in the legend."""
    for (color, ls), path, lab in zip(run_styles(len(P)), np.asarray(P), labels):
        ax.plot(path[:, 0], path[:, 1], color=color, ls=ls, lw=1.8, label=lab, zorder=2)
        ax.plot(path[0, 0], path[0, 1], "o", color=color, ms=5, zorder=3)


def _second_legend(ax, top):
    """The runs' and rays' legend beside the axes, from height ``top`` down, under the score
    key that :func:`attnlib.plots.token_plane` put beside them (kept)."""
    key = ax.get_legend()
    handles, labels = ax.get_legend_handles_labels()
    if key is not None:
        ax.add_artist(key)
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, top), borderaxespad=0.0,
              frameon=False, fontsize=11)


def _upto(steps_recorded, steps: int) -> int:
    """Number of recorded points at or before iteration ``steps``."""
    return int(np.searchsorted(steps_recorded, steps, side="right"))


def _token_inset(ax, X, scores, bounds=(0.58, 0.5, 0.4, 0.38), annotate=True):
    """The tokens, named, in an inset at the upper right: the paths of p run far from them,
    and at the paths' scale the tokens collapse into one blob. With several inputs only the
    optimal tokens are named."""
    ins = ax.inset_axes(list(bounds))
    X, g = np.asarray(X, dtype=float), np.asarray(scores, dtype=float)
    names = None
    if X.ndim == 3 and X.shape[0] > 1:
        full = _plots.token_names(*X.shape[:2])
        best = g.reshape(X.shape[:2]).argmax(-1)
        names = [[full[i][t] if t == best[i] else "" for t in range(X.shape[1])]
                 for i in range(X.shape[0])]
    _plots.token_scatter(X, g, ax=ins, colorbar=False, annotate=annotate, size=30, names=names)
    ins.set_xlabel("")
    ins.set_ylabel("")
    ins.tick_params(labelsize=6, pad=1)
    ins.set_title("tokens, zoomed", fontsize=7, pad=2)
    ins.margins(0.25)
    return ins


def plot_e1(res, panels=("global", "local"), steps=200):
    r"""E1 figure: tokens, GD paths of :math:`p` (first ``steps`` iterations), SVM rays.

    ``panels`` picks the global and/or the local panel (chapter 2 shows the global one,
    chapter 3 the local one). The rays are :math:`p^{mm}(\alpha)` for :math:`\alpha = 1, 2`;
    each run has its own colour and line style, named by its start :math:`p(0) = (0, c)`.
    See chapters 2 and 3.
    """
    a = res.arrays
    fig, axes = _plots.new_figure(1, len(panels), figsize=(6.4 * len(panels), 5.6))
    axes = np.atleast_1d(axes)
    k = _upto(a["steps"], steps)
    for ax, panel in zip(axes, panels):
        j = 0 if panel == "global" else 1
        g = ", ".join(f"{x:g}" for x in a["scores"][j])
        P = np.asarray(a["paths"][j][:, :k])
        _runs(ax, P, [f"$p(0) = (0, {c:g})$" for c in P[:, 0, 1]])
        _plots.token_plane(a["keys"], a["scores"][j], directions=a["p_mm"][:2],
                           direction_labels=[r"$p^{mm}(\alpha=1)$",
                                             r"$p^{mm}(\alpha=2)$"],
                           ax=ax, title=f"{panel} scores $\\gamma$ = ({g})", annotate=False,
                           legend=False)
        _second_legend(ax, 0.66)
        ax.set_xlabel("first coordinate of $p$")
        ax.set_ylabel("second coordinate of $p$")
        _token_inset(ax, a["keys"], a["scores"][j], bounds=(0.6, 0.6, 0.38, 0.36))
    return readable(fig)


def plot_e2(res, steps=200, panels=("paths", "prob", "norm")):
    """E2 figure: (a) tokens, NGD paths (one colour and line style per start) and the p^mm
    ray; (b) optimal-token probability and (c) ‖p‖ against the iteration for the run from
    p(0) = 0, NGD (red) vs GD (blue). ``panels`` picks some of the three (chapter 2 shows
    the paths alone, then (b) and (c) together).

    See chapter 2.
    """
    a = res.arrays
    wide = {"paths": 6.4, "prob": 4.5, "norm": 4.5}
    width = sum(wide[p] for p in panels)
    fig, axes = _plots.new_figure(1, len(panels), figsize=(width, 5.6 if "paths" in panels
                                                           else 4.2))
    axes = dict(zip(panels, np.atleast_1d(axes)))
    k = _upto(a["steps"], steps)
    letter = {p: f"({chr(97 + j)}) " if len(panels) > 1 else "" for j, p in enumerate(panels)}
    if "paths" in axes:
        ax = axes["paths"]
        P = np.asarray(a["ngd_paths"][:, :k])
        _runs(ax, P, [f"$p(0) = ({c:g}, 0)$" for c in P[:, 0, 0]])
        _plots.token_plane(a["keys"], a["scores"], directions=a["p_mm"][None],
                           direction_labels=[r"$p^{mm}$"], ax=ax, annotate=False,
                           title=letter["paths"] + "normalised GD paths of $p$", legend=False)
        _second_legend(ax, 0.72)
        ax.set_xlabel("first coordinate of $p$")
        ax.set_ylabel("second coordinate of $p$")
        _token_inset(ax, a["keys"], a["scores"], bounds=(0.6, 0.04, 0.38, 0.36), annotate=False)
    i0 = int(res.numbers["zero_init_index"])
    s = a["steps"][:k]
    if "prob" in axes:
        curves = {"normalised GD": a["ngd_prob"][i0, :k], "GD": a["gd_prob"][i0, :k]}
        _plots.probability_curves(s, curves, ax=axes["prob"],
                                  title=letter["prob"] + "optimal token",
                                  ylabel="its softmax probability")
    if "norm" in axes:
        norms = {"normalised GD": a["ngd_norm"][i0, :k], "GD": a["gd_norm"][i0, :k]}
        _plots.norm_curves(s, norms, ax=axes["norm"], title=letter["norm"] + "norm of $p$",
                           ylabel=r"$\|p(k)\|$")
    for name in ("prob", "norm"):
        if name in axes:
            axes[name].set_xlabel("iteration $k$")
    return readable(fig)


def plot_e3(res, steps=200, panels=("tight", "nontight", "prob")):
    """E3 figure, ``panels`` (stacked) among: the ``"tight"`` and ``"nontight"`` paths of p
    (red) and v (blue) with the SVM rays; ``"prob"``: mean softmax probability of the optimal
    token and mean logistic probability of the tight run.

    See chapter 4.
    """

    a = res.arrays
    fig, axes = _plots.new_figure(len(panels), 1, figsize=(6.4, sum(
        4.2 if p == "prob" else 5.0 for p in panels)),
        gridspec_kw=dict(height_ratios=[4.2 if p == "prob" else 5.0 for p in panels]))
    axes = dict(zip(panels, np.atleast_1d(axes)))
    letter = {p: f"({chr(97 + j)}) " if len(panels) > 1 else "" for j, p in enumerate(panels)}
    k = _upto(a["steps"], steps)
    for j, name in enumerate(("tight", "nontight")):
        if name not in axes:
            continue
        ax = axes[name]
        dirs = [a["p_relax"][j], a["v_mm"][j]] + ([a["p_mm"][j]] if j == 1 else [])
        labels = [r"$p^{relax}$" if j else r"$p^{mm}$", r"$v^{mm}$"] + ([r"$p^{mm}$"] if j else [])
        _plots.token_scatter(a["X"][j], ax=ax, colorbar=False, annotate=False)
        _plots.trajectories(a["p_path"][j, :k], ax=ax, color=_C["target"], label="$p(k)$")
        _plots.trajectories(a["v_path"][j, :k], ax=ax, color=_C["other"], label="$v(k)$")
        _plots.rays(dirs, ax=ax, labels=labels, colors=[_C["target"], _C["other"],
                                                     _C["path"]])
        ax.set_title(letter[name] + ("tight" if j == 0 else "non-tight")
                     + " example: paths of $p$ and $v$")
        ax.set_xlabel("first coordinate")
        ax.set_ylabel("second coordinate")
        ax.legend(loc="upper right", ncol=2)
    if "prob" in axes:
        ax = axes["prob"]
        _plots.probability_curves(a["steps"][:k], {"softmax, optimal token":
                                                   a["softmax_prob"][0, :k],
                                                   r"logistic, $\sigma(Y f)$":
                                                   a["logistic_prob"][0, :k]},
                                  ax=ax, title=letter["prob"] + "mean probabilities, tight run",
                                  styles={r"logistic, $\sigma(Y f)$": "--"})
        ax.set_ylabel("probability")
        ax.set_xlabel("iteration $k$")
    return readable(fig)


def plot_e4(res, steps=200):
    """E4 figure: paths of p for every C, correlation loss (red) and logistic loss (blue),
    opacity growing with C, C = 100 dashed; the p^mm axis in black; the key under the axes.

    See chapter 3.
    """

    a = res.arrays
    fig, ax = _plots.new_figure(figsize=(6.4, 6.2))
    k = _upto(a["steps"], steps)
    C = np.asarray(a["C"])
    for j, color in enumerate((_C["target"], _C["other"])):  # correlation, logistic loss
        for b, c in enumerate(C):
            alpha = 0.25 + 0.75 * b / max(len(C) - 1, 1)
            ax.plot(a["paths"][j, b, :k, 0], a["paths"][j, b, :k, 1], color=color, alpha=alpha,
                    ls="--" if c >= 100 else "-", lw=1.6)
    ax.axhline(0, color=_C["ink"], lw=1.0, ls=":")
    # the key of discrete values: a colour per loss, the opacity and the line style per C
    key = [Line2D([], [], color=col, lw=2, label=_LOSS_NAMES[loss])
           for loss, col in (("correlation", _C["target"]), ("logistic", _C["other"]))]
    solid = [c for c in C if c < 100]
    if solid:
        key += [Line2D([], [], color=_C["ink"], alpha=0.25, lw=2,
                       label=f"C = {solid[0]:g} (faint)"),
                Line2D([], [], color=_C["ink"], lw=2, label=f"C = {solid[-1]:g} (opaque)")]
    if (C >= 100).any():
        key.append(Line2D([], [], color=_C["ink"], ls="--", lw=2,
                          label=f"C = {C[C >= 100][0]:g} (dashed)"))
    key.append(Line2D([], [], color=_C["ink"], lw=1.0, ls=":", label=r"$p^{mm}$ axis"))
    ax.set_xlabel("$p_1$")
    ax.set_ylabel("$p_2$")
    shown = ", ".join(f"{c:g}" for c in C) if len(C) <= 4 else \
        rf"{C[0]:g}, {C[1]:g}, \ldots, {C[-2]:g}, {C[-1]:g}"
    ax.set_title(f"paths of $p$ for $C = {shown}$")  # one mathtext run: "=" typeset as math
    ax.legend(handles=key, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2,
              frameon=False)
    ax.set_aspect("equal", adjustable="datalim")
    return readable(fig)


def plot_regpath(res):
    r"""Regularisation path: :math:`\cos(\bar p(R), p^{mm})` against R, and
    :math:`\bar p(R)/R` in the token plane. See chapter 2."""
    a = res.arrays
    fig, axes = _plots.new_figure(1, 2, figsize=(9.0, 4.4))
    axes[0].plot(a["radii"], a["cos"], "o-", color=_C["target"])
    axes[0].set_xscale("log", base=2)
    axes[0].set_xlabel("radius $R$")
    axes[0].set_ylabel(r"$\cos(\bar p(R), p^{mm})$")
    axes[0].grid(alpha=0.3)
    _plots.token_plane(a["keys"], a["scores"], directions=np.concatenate([a["p_mm"][None],
                                                                         a["directions"]]),
                       direction_labels=[r"$p^{mm}$"] + [f"$R = {r:g}$" for r in a["radii"]],
                       ax=axes[1], title=r"directions $\bar p(R)/R$", colorbar=False,
                       legend=False, annotate=False)
    axes[1].set_xlabel("first coordinate")
    axes[1].set_ylabel("second coordinate")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                   frameon=False)
    return readable(fig)


def plot_certificate(res):
    """Where random initialisations end: count of GD endpoints per selection (all of them,
    in lexicographic order), bars red where the selection is locally optimal, grey where not;
    only the locally optimal selections are named, the global one starred.

    See chapter 3.
    """

    a = res.arrays
    fig, ax = _plots.new_figure(figsize=(6.4, 4.4))
    K = len(a["locally_optimal"])
    counts = np.bincount(np.asarray(a["endpoint_index"], dtype=int), minlength=K)
    lo = np.asarray(a["locally_optimal"], dtype=bool)
    colors = [_C["target"] if x else _C["neutral"] for x in lo]
    ax.bar(np.arange(K), counts, color=colors)
    names = ["".join(str(int(u) + 1) for u in s) for s in a["alpha"]]
    g = int(np.flatnonzero(a["globally_optimal"])[0])
    shown = np.flatnonzero(lo)
    ax.set_xticks(np.arange(K), minor=True)
    ax.set_xticks(shown)
    ax.set_xticklabels([names[i] + (" ★" if i == g else "") for i in shown], rotation=90)
    ax.set_xlim(-1, K)
    ax.set_ylim(0, max(int(counts.max()), 1) * 1.15)
    ax.set_xlabel(f"the {K} selections α (red: locally optimal; ★ global)")
    ax.set_ylabel("GD runs ending there")
    ax.grid(axis="y", alpha=0.3)
    return readable(fig)


def comparison_table(e1, e2, rp, gdt) -> str:
    r"""The official numbers beside the book's, as Markdown (chapter 2).

    ``e1``, ``e2``, ``rp`` and ``gdt`` are the results of ``mm_e1_basins``,
    ``mm_e2_multi_input``, ``mm_regpath`` and ``mm_gd_theorem``; the left column quotes the
    official notebooks of ``ucr-optml/max_margin_attention`` (or an independent rerun of their
    setup), the right one is read from the results (nothing is recomputed).
    """
    n1, n2, nt = e1.numbers, e2.numbers, gdt.numbers
    half_sq = r"$p^{mm}$, $\tfrac12\|p^{mm}\|^2$"
    rows = [
        (f"Att-SVM ($\\alpha=1$): {half_sq}", "(−0.09901, 0.99010), 0.49505",
         f"({n1['svm1_p1']:.5f}, {n1['svm1_p2']:.5f}), {n1['svm1_half_sq']:.5f}"),
        (f"Att-SVM ($\\alpha=2$): {half_sq}", "(1, 0), 0.5",
         f"({n1['svm2_p1']:.5f}, {n1['svm2_p2']:.5f}), {n1['svm2_half_sq']:.5f}"),
        ("E1-global cos at 200 / at 1000", "≥ 0.99 / 0.993–0.997",
         f"{n1['global_min_cos200']:.4f} / {n1['global_cos1000_lo']:.4f}–"
         f"{n1['global_cos1000_hi']:.4f}"),
        (r"E2 official solver $\tfrac12\|p^{mm}\|^2$ ($W = I$)", "0.31319 (cvxopt)",
         f"{n2['official_half_sq']:.5f}"),
        ("E2 NGD cos at 200 / at 1000",
         "0.9985–0.9997 / 0.99994 (the official loop in float64; 0.9977 in its float32)",
         f"{n2['ngd_min_cos200']:.4f} / {n2['ngd_cos1000_lo']:.5f}"),
        ("E2 optimal-token prob. NGD at 50 / 200, GD at 200", "≥ 0.95 / > 0.999, 0.90–0.98",
         f"{n2['ngd_prob50']:.3f} / {n2['ngd_prob200']:.4f}, {n2['gd_prob200']:.3f}"),
        ("E2 ‖p(200)‖ NGD; GD at 200 / 1000", "18–21; 2.5–4 / 4.5–5.1",
         f"{n2['ngd_norm200']:.2f}; {n2['gd_norm200']:.2f} / {n2['gd_norm1000']:.2f}"),
        ("regularisation path cos at R = 16", "> 0.99", f"{rp.numbers['cos_Rmax']:.4f}"),
        (f"plain GD, η = 1/L, cos after {gdt.params['steps']} steps (E1 / E2)", "→ 1",
         f"{nt['e1_cos_end']:.4f} / {nt['e2_cos_end']:.4f}"),
    ]
    lines = ["| quantity | paper / official code | book |", "|---|---|---|"]
    return "\n".join(lines + [f"| {a} | {b} | {c} |" for a, b, c in rows])
