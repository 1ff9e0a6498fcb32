"""Figures of "Transformers as Support Vector Machines" (arXiv 2308.16898), chapters 5-8.

One function per registered experiment of :mod:`attnlib.experiments.tf_svm`: a
:class:`~attnlib.experiments.Result` in, a matplotlib Figure out, drawn from the result's
stored arrays only (nothing is trained or solved here). Each experiment's ``plot=`` points
here, so ``result.figure()`` calls them.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from ..plots import (
    BAND_TITLE,
    PALETTE,
    SCORE_CMAP,
    color_of,
    correlation_curves,
    new_figure,
    norm_curves,
    probability_curves,
    rays,
    readable,
    sweep_curves,
    token_plane,
)
from ..plots.style import as_array, power_ticks
from .tf_svm_heads import (  # chapter 7's figures live there
    mean_markers,
    plot_lambda,
    plot_multi,
    plot_multi_errors,
)

__all__ = ["plot_visualization", "plot_local", "plot_spectra", "mid_margin_line", "plot_rank",
           "plot_feasibility", "plot_global", "plot_multi", "plot_multi_errors", "plot_lambda",
           "plot_causal", "plot_causal_attention"]


# the official zoom of each 2-D example (visualization1: x [-30, 40], y [-100, 100];
# visualization2: x [-2, 10], y [-5, 5]): the tokens stay visible, the paths leave the frame
ZOOM = {1: ((-30.0, 40.0), (-100.0, 100.0)), 2: ((-2.0, 10.0), (-5.0, 5.0))}

#: Text size of the chapter 5 and 8 figures: at most 6.6 in wide, so that 12 pt text stays
#: readable (about 8-9 px) when a figure is shown 343 px wide on a phone.
FONT = 12


def mid_margin_line(p, x_sel, reach: float = 1e3):
    r"""Two far points of the mid-margin line :math:`\{x : p^\top x = p^\top x_{\rm sel} -
    \tfrac12\}` of one query, :math:`p = W^{mm} z_i` (the official dotted line): it passes
    through :math:`x_{\rm sel} - p/(2\|p\|^2)`, perpendicular to p. Returns (2, 2)."""
    p, x_sel = as_array(p, "p"), as_array(x_sel, "x_sel")  # (tensors on any device too)
    c = x_sel - p / (2.0 * float(p @ p))
    u = np.array([-p[1], p[0]]) / np.linalg.norm(p)
    return np.stack([c - reach * u, c + reach * u])


def _name_ray(ax, p, xlim, ylim, text, color):
    """Write ``text`` beside the ray along ``p``, inside the frame ``xlim`` x ``ylim``."""
    u = np.asarray(p, dtype=float) / np.linalg.norm(p)
    reach = [b / c for c, lim in zip(u, (xlim, ylim)) for b in lim if c * b > 0]
    t = 0.8 * min(reach) if reach else 1.0
    ax.annotate(text, (t * u[0], t * u[1]), color=color, fontsize=FONT, fontweight="bold",
                xytext=(4, 4), textcoords="offset points", zorder=4)


def plot_visualization(res):
    r"""E1 (chapter 5): the GD paths :math:`W(k) z_i` of W and of (K,Q) on the 2-D example,
    with the rays :math:`W^{mm} z_i` of the Frobenius (top) and :math:`W^{mm}_\star z_i` of
    the nuclear (bottom) Att-SVM, and each query's dotted mid-margin line, in the official
    zoom (``ZOOM``; the paths run on beyond the frame). The colour is the parameterisation's,
    as in the chapter's explorer and the paper's curves: everything of W (paths, Frobenius
    rays, margin lines) is ``PALETTE["W"]`` (blue), everything of (K,Q) ``PALETTE["KQ"]``
    (red); the two queries are told apart by the label :math:`z_i` beside each ray (and a
    thinner margin line for :math:`z_2`); the tokens are named :math:`x_{it}`."""
    A = res.arrays
    params = getattr(res, "params", {}) or {}
    example = int(params.get("example", 2))
    xlim, ylim = ZOOM.get(example, ZOOM[2])
    fig, axes = new_figure(2, 1, figsize=(6.4, 10.6))  # stacked: each panel full width
    X = np.asarray(A["X"], dtype=float)
    for ax, key, svm, title, name in (
            (axes[0], "W", "fro", "W: GD path and Att-SVM (Frobenius)", r"W^{mm}"),
            (axes[1], "KQ", "nuc", "(K,Q): GD path and Att-SVM⋆ (nuclear)", r"W^{mm}_\star")):
        paths, rays_ = A[f"path_{key}"], np.asarray(A[f"ray_{svm}"], dtype=float)  # (n, S, 2)
        qc = [PALETTE[key]] * len(paths)  # the parameterisation's colour, every query
        alpha = np.asarray(A.get(f"alpha_{key}", np.argmax(A["scores"], -1))).reshape(-1)
        names = [[f"$x_{{{i + 1}{t + 1}}}$" if t == alpha[i] else "" for t in range(X.shape[1])]
                 for i in range(X.shape[0])]  # the selected tokens are named
        token_plane(X, A["scores"], paths=paths, ax=ax, title=title, path_colors=qc,
                    legend=None, annotate=example != 1, names=names)  # ex. 1: labels collide
        rays(rays_, ax=ax, colors=qc, length=200.0,
             labels=[f"${name}\\, z_{i + 1}$" for i in range(len(paths))])
        for i, p in enumerate(rays_):
            seg = mid_margin_line(p, X[i, alpha[i]])
            ax.plot(seg[:, 0], seg[:, 1], ":", color=qc[i], lw=1.5 if i == 0 else 1.0,
                    alpha=0.8, zorder=0, label=f"mid-margin line of $z_{i + 1}$")
            _name_ray(ax, p, xlim, ylim, f"$z_{{{i + 1}}}$", qc[i])
        ax.legend(fontsize=FONT - 1, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2,
                  frameon=False)  # below the panel: the frame stays free for the paths
        if example == 1:  # the official frame of visualization1 is 70 x 200: not to scale
            ax.set_aspect("auto")
        ax.set_adjustable("box")  # keep the aspect: the frame, not the zoom, adapts
        ax.set_xlim(*xlim)
        ax.set_ylim(*ylim)
    return readable(fig, FONT - 1)


def plot_local(res):
    """E2 (chapter 5): largest softmax probability, :math:`\\mathrm{corr}(W(k), W^{mm})` for
    the aligned and the cross pairs, and :math:`\\|W(k)\\|_F`, against the iteration k (three
    stacked panels; median and 10-90% band over the runs, and in the first two panels the
    mean over the runs as open circles, which is what the official figure plots)."""
    A = res.arrays
    fig, axes = new_figure(3, 1, figsize=(6.4, 10.4), sharex=True)  # stacked panels
    s = A["steps"]
    norm = r"$\|W(k)\|_F$"
    col = {"W": PALETTE["W"], "(K,Q)": PALETTE["KQ"], "W vs Frobenius": PALETTE["W"],
           "(K,Q) vs nuclear": PALETTE["KQ"], "W vs nuclear (cross)": PALETTE["W"],
           "(K,Q) vs Frobenius (cross)": PALETTE["KQ"], norm: PALETTE["W"]}
    sty = {"W vs nuclear (cross)": "--", "(K,Q) vs Frobenius (cross)": "--"}
    probability_curves(s, {"W": A["prob_W"], "(K,Q)": A["prob_KQ"]}, ax=axes[0], colors=col)
    axes[0].set_ylabel("largest softmax probability")
    correlation_curves(s, {"W vs Frobenius": A["corr_W_fro"],
                           "(K,Q) vs nuclear": A["corr_KQ_nuc"],
                           "W vs nuclear (cross)": A["corr_W_nuc"],
                           "(K,Q) vs Frobenius (cross)": A["corr_KQ_fro"]}, ax=axes[1],
                       colors=col, styles=sty)
    mean_markers(axes[0], s, [A["prob_W"], A["prob_KQ"]], [PALETTE["W"], PALETTE["KQ"]])
    mean_markers(axes[1], s, [A["corr_W_fro"], A["corr_KQ_nuc"]], [PALETTE["W"], PALETTE["KQ"]])
    for ax in axes[:2]:  # the legend again, now with the markers
        ax.legend(fontsize=8, loc="lower right", title=BAND_TITLE, title_fontsize=7)
    norm_curves(s, {norm: A["norm_W"]}, ax=axes[2], colors=col)
    axes[2].set_ylabel(norm)
    for ax in axes[:2]:
        ax.set_xlabel("")
    return readable(fig, FONT)


def plot_spectra(res):
    """E2 (chapter 5): mean singular values (divided by the largest) of the trained W(k) and
    KQᵀ(k) at the last step, beside those of their Frobenius and nuclear SVMs (log scale):
    the low-rank bias of (K,Q) as a spectrum."""
    A = res.arrays
    fig, ax = new_figure(1, 1, figsize=(6.4, 4.4))
    j = None
    for key, label, style, c in (
            ("W", r"$W(k)$, trained", "-o", PALETTE["W"]),
            ("fro", r"$W^{mm}_\alpha$ (Frobenius)", ":", PALETTE["W"]),
            ("KQ", r"$KQ^\top(k)$, trained", "-s", PALETTE["KQ"]),
            ("nuc", r"$W^{mm}_{\star,\alpha}$ (nuclear)", ":", PALETTE["KQ"])):
        sv = np.asarray(A[f"sv_{key}"], dtype=float).mean(0)
        j = np.arange(1, len(sv) + 1)
        ax.semilogy(j, np.maximum(sv, 1e-17), style, ms=6, lw=2, label=label, color=c)
    ax.set_xticks(j)
    ax.set_ylim(1e-17, 2.0)
    ax.set_xlabel("index $j$")
    ax.set_ylabel(r"mean $\sigma_j / \sigma_1$")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=FONT, loc="lower left")
    return readable(fig, FONT)


def plot_rank(res):
    """E3 (chapter 5): mean rank of the Frobenius and nuclear Att-SVM solutions against d,
    varying n (top) and T (bottom)."""
    A = res.arrays
    fig, axes = new_figure(2, 1, figsize=(6.4, 8.4))  # stacked panels
    ds, cells = A["ds"], [tuple(int(x) for x in c) for c in A["cells"]]
    n0, T0 = cells[0]
    panels = ((axes[0], [r for r, c in enumerate(cells) if c[1] == T0], f"vary n (T = {T0})"),
              (axes[1], [r for r, c in enumerate(cells) if c[0] == n0], f"vary T (n = {n0})"))
    for ax, rows, title in panels:
        vals, styles, colors = {}, {}, {}
        for j, r in enumerate(rows):  # one colour per cell; solid Frobenius, dashed nuclear
            n, T = cells[r]
            vals[f"n={n},T={T} Frobenius"] = A["fro_mean"][r]
            vals[f"n={n},T={T} nuclear"] = A["nuc_mean"][r]
            styles[f"n={n},T={T} nuclear"] = "--"
            colors[f"n={n},T={T} Frobenius"] = colors[f"n={n},T={T} nuclear"] = color_of(j)
        sweep_curves(ds, vals, ax=ax, styles=styles, colors=colors, xlabel="dimension d",
                     ylabel="mean rank (feasible only)", title=title, legend=None)
        key = [  # a compact key: colour = cell, line style = SVM
               Line2D([], [], color=colors[f"n={cells[r][0]},T={cells[r][1]} nuclear"],
                      label=f"n={cells[r][0]}, T={cells[r][1]}") for r in rows]
        key += [Line2D([], [], color=PALETTE["ink"], ls=ls, label=lab)
                for ls, lab in (("-", "Frobenius"), ("--", "nuclear"))]
        ax.legend(handles=key, fontsize=FONT - 1, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return readable(fig, FONT)


def plot_feasibility(res):
    """Chapter 6: share of feasible Att-SVM instances per (n, T, d), at α = opt and random α;
    the sizes at or above d = max(T−1, n) left of the dashed line, those below it right."""
    from .tf_svm_heads import FONT

    A = res.arrays
    fig, ax = new_figure(1, 1, figsize=(6.6, 4.0))
    cells = [tuple(int(v) for v in c) for c in A["cells"]]
    labels = [f"({n},{T},{d})" for n, T, d in cells]
    x = np.arange(len(labels))
    ax.bar(x - 0.2, A["feasible_opt"], 0.4, label="α = opt", color=PALETTE["target"])
    ax.bar(x + 0.2, A["feasible_random"], 0.4, label="random α", color=PALETTE["other"],
           hatch="//", edgecolor="white")
    above = [d >= max(T - 1, n) for n, T, d in cells]
    if any(above) and not all(above):
        cut = above.index(False) - 0.5
        ax.axvline(cut, color=PALETTE["ink"], ls="--", lw=1)
        ax.text(cut - 0.1, 1.04, r"$d \geq \max(T-1, n)$", ha="right", va="bottom",
                fontsize=FONT)
        ax.text(cut + 0.1, 1.04, "below", ha="left", va="bottom", fontsize=FONT)
    ax.set_ylim(0, 1.18)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xticks(x, labels, rotation=35, ha="right")
    ax.set_ylabel("feasible share")
    ax.set_xlabel("size (n, T, d)")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return readable(fig, FONT)


def plot_global(res):
    """E5 (chapter 6): share of GD runs converging to the global, a locally optimal, or no
    SVM direction, against d (stacked bars, the legend beside them)."""

    A = res.arrays
    fig, ax = new_figure(1, 1, figsize=(7.6, 3.8))
    x = np.arange(len(A["ds"]))
    g, lo, o = (np.asarray(A[k]).reshape(-1) for k in ("global", "local_only", "other"))
    ax.bar(x, g, label=r"global $W^{mm}$", color=PALETTE["target"])
    ax.bar(x, lo, bottom=g, label="locally optimal,\n" + r"not global $W^{mm}_\alpha$",
           color=PALETTE["other"], hatch="//", edgecolor="white")
    ax.bar(x, o, bottom=g + lo, label="neither", color=PALETTE["neutral"])
    ax.set_xticks(x, [str(d) for d in A["ds"]])
    ax.set_xlabel("dimension d")
    ax.set_ylabel("share of GD runs")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return readable(fig, FONT)


def plot_causal(res):
    """Chapter 8: corr of causal / bidirectional GD with the matching sequence SVM (and the
    causal run against the mask-free SVM), plain (top) and as 1 − corr (bottom)."""
    A = res.arrays
    fig, axes = new_figure(2, 1, figsize=(6.4, 8.0), sharex=True)  # stacked panels
    col = {"causal GD vs causal SVM": color_of(0), "full GD vs full SVM": color_of(1),
           "causal GD vs mask-free SVM": color_of(2)}  # one colour per pair, in both panels
    correlation_curves(A["steps"], {"causal GD vs causal SVM": A["corr_causal"],
                                    "causal GD vs mask-free SVM": A["corr_causal_vs_full"],
                                    "full GD vs full SVM": A["corr_full"]},
                       ax=axes[0], legend="lower right", colors=col)
    correlation_curves(A["steps"], {"causal GD vs causal SVM": A["corr_causal"],
                                    "full GD vs full SVM": A["corr_full"]},
                       ax=axes[1], one_minus=True, legend="upper right", colors=col)
    axes[0].set_xlabel("")
    power_ticks(axes[1])  # 10⁻², not 1e-2
    return readable(fig, FONT)


def plot_causal_attention(res, trial: int = 0, seq: int = 0):
    r"""Chapter 8: the causal attention matrix :math:`S_{kt} = \mathrm{softmax}_{t \le k}
    (x_t^\top W x_k)` of one sequence at the start of training and at the last recorded step
    of ``tf_causal`` (rows: queries k, columns: tokens t; the masked future is blank). A
    square marks each query's optimal visible token (the highest score
    :math:`\gamma_{ikt}` with :math:`t \le k`)."""
    import matplotlib

    A = res.arrays
    X = np.asarray(A["X"], dtype=float)[trial, seq]  # (T, d)
    H = np.asarray(A["hist_causal"], dtype=float)[trial]  # (S, d, d)
    opt = np.asarray(A["opt_causal"])[trial, seq]  # (T,)
    steps = np.asarray(A["steps"]).reshape(-1)
    T = X.shape[0]
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    cmap = matplotlib.colormaps[SCORE_CMAP].with_extremes(bad="white")
    fig, axes = new_figure(1, 2, figsize=(6.6, 3.7))
    for ax, j, name in ((axes[0], 0, "start"), (axes[1], -1, "end")):
        logits = X @ H[j].T @ X.T  # [k, t] = x_t^T W x_k
        logits = np.where(future, -np.inf, logits)
        S = np.exp(logits - logits.max(1, keepdims=True))
        S /= S.sum(1, keepdims=True)
        im = ax.imshow(np.ma.masked_where(future, S), cmap=cmap, vmin=0.0, vmax=1.0)
        for k in range(T):
            ax.add_patch(matplotlib.patches.Rectangle(
                (opt[k] - 0.5, k - 0.5), 1, 1, fill=False, lw=2.5, ec=PALETTE["target"]))
        ax.set_xticks(range(T), [str(t + 1) for t in range(T)])
        ax.set_yticks(range(T), [str(k + 1) for k in range(T)])
        ax.set_xlabel("token $t$")
        ax.set_title(f"{name}: step {int(steps[j])}")
    axes[0].set_ylabel("query $k$")
    fig.colorbar(im, ax=list(axes), shrink=0.9, label="attention $S_{kt}$")
    return readable(fig, FONT)
