"""Figures of "Transformers as Support Vector Machines" (arXiv 2308.16898), chapters 5-8.

One function per registered experiment of :mod:`attnlib.experiments.tf_svm`: a
:class:`~attnlib.experiments.Result` in, a matplotlib Figure out, drawn from the result's
stored arrays only (nothing is trained or solved here). Each experiment's ``plot=`` points
here, so ``result.figure()`` calls them.
"""

from __future__ import annotations

import numpy as np

from ..plots import (
    correlation_curves,
    new_figure,
    norm_curves,
    probability_curves,
    sweep_curves,
    token_plane,
)

__all__ = ["plot_visualization", "plot_local", "plot_rank", "plot_feasibility", "plot_global",
           "plot_multi", "plot_lambda", "plot_causal"]


def plot_visualization(res):
    """E1 (chapter 5): the GD paths :math:`W(k) z_i` of W and of (K,Q) on the 2-D example,
    with the rays :math:`W^{mm} z_i` of the Frobenius and the nuclear Att-SVM."""
    A = res.arrays
    fig, axes = new_figure(1, 2, figsize=(9.0, 3.8))
    for ax, key, svm, title in ((axes[0], "W", "fro", "W: GD path and Att-SVM"),
                                (axes[1], "KQ", "nuc", "(K,Q): GD path and Att-SVM⋆")):
        paths = A[f"path_{key}"]  # (n, S, 2)
        token_plane(A["X"], A["scores"], paths=paths, directions=A[f"ray_{svm}"],
                    direction_labels=[f"W^mm z_{i + 1} ({svm})" for i in range(len(paths))],
                    ax=ax, title=title)
    return fig


def plot_local(res):
    """E2 (chapter 5): largest softmax probability, :math:`\\mathrm{corr}(W(k), W^{mm})` for
    the aligned and the cross pairs, and :math:`\\|W(k)\\|_F`, against the iteration k."""
    A = res.arrays
    fig, axes = new_figure(1, 3, figsize=(13.0, 3.6))
    s = A["steps"]
    probability_curves(s, {"W": A["prob_W"], "(K,Q)": A["prob_KQ"]}, ax=axes[0])
    correlation_curves(s, {"W vs Frobenius": A["corr_W_fro"],
                           "(K,Q) vs nuclear": A["corr_KQ_nuc"],
                           "W vs nuclear (cross)": A["corr_W_nuc"],
                           "(K,Q) vs Frobenius (cross)": A["corr_KQ_fro"]}, ax=axes[1])
    norm_curves(s, {"‖W(k)‖_F": A["norm_W"]}, ax=axes[2])
    return fig


def plot_rank(res):
    """E3 (chapter 5): mean rank of the Frobenius and nuclear Att-SVM solutions against d,
    varying n (left) and T (right)."""
    A = res.arrays
    fig, axes = new_figure(1, 2, figsize=(9.6, 3.6))
    ds, cells = A["ds"], [tuple(int(x) for x in c) for c in A["cells"]]
    n0, T0 = cells[0]
    panels = ((axes[0], [r for r, c in enumerate(cells) if c[1] == T0], f"vary n (T = {T0})"),
              (axes[1], [r for r, c in enumerate(cells) if c[0] == n0], f"vary T (n = {n0})"))
    for ax, rows, title in panels:
        vals, styles = {}, {}
        for r in rows:
            n, T = cells[r]
            vals[f"n={n},T={T} Frobenius"] = A["fro_mean"][r]
            vals[f"n={n},T={T} nuclear"] = A["nuc_mean"][r]
            styles[f"n={n},T={T} nuclear"] = "--"
        sweep_curves(ds, vals, ax=ax, styles=styles, ylabel="mean rank (feasible only)",
                     title=title, legend="upper left")
    return fig


def plot_feasibility(res):
    """Chapter 6: share of feasible Att-SVM instances per (n, T, d), at α = opt and random α."""
    A = res.arrays
    fig, ax = new_figure(1, 1, figsize=(6.0, 3.4))
    labels = [f"({n},{T},{d})" for n, T, d in A["cells"]]
    x = np.arange(len(labels))
    ax.bar(x - 0.2, A["feasible_opt"], 0.4, label="α = opt")
    ax.bar(x + 0.2, A["feasible_random"], 0.4, label="random α")
    ax.set_xticks(x, labels, rotation=30, fontsize=8)
    ax.set_ylabel("feasible share")
    ax.set_xlabel("(n, T, d)")
    ax.legend(fontsize=8)
    return fig


def plot_global(res):
    """E5 (chapter 6): share of GD runs converging to the global, a locally optimal, or no
    SVM direction, against d (stacked bars)."""
    A = res.arrays
    fig, ax = new_figure(1, 1, figsize=(5.6, 3.4))
    x = np.arange(len(A["ds"]))
    g, lo, o = (np.asarray(A[k]).reshape(-1) for k in ("global", "local_only", "other"))
    ax.bar(x, g, label="global W^mm", color="tab:red")
    ax.bar(x, lo, bottom=g, label="locally optimal W^mm_α", color="tab:blue")
    ax.bar(x, o, bottom=g + lo, label="other", color="0.7")
    ax.set_xticks(x, [str(d) for d in A["ds"]])
    ax.set_xlabel("d")
    ax.set_ylabel("share of GD runs")
    ax.legend(fontsize=8, loc="lower right")
    return fig


def plot_multi(res):
    """E4 (chapter 7): per d, 1 − corr of W(k) with the SVM equivalence, W^dir and the
    1-token SVM (top), and the final error against the largest masked probability (bottom)."""
    A = res.arrays
    ds = A["ds"]
    fig, axes = new_figure(2, len(ds), figsize=(3.3 * len(ds), 6.4))
    axes = np.atleast_2d(axes).reshape(2, len(ds))
    for j, d in enumerate(ds):
        k = A["run_d"] == d
        correlation_curves(A["steps"], {"SVM-eq": A["corr_eq"][k], "W^dir": A["corr_dir"][k],
                                        "1-token SVM": A["corr_one"][k]},
                           ax=axes[0, j], one_minus=True, title=f"d = {d}",
                           legend="lower left" if j == 0 else None)
        ax = axes[1, j]
        ax.loglog(np.maximum(A["max_masked"][k], 1e-300), 1 - A["corr_eq"][k][:, -1], ".",
                  ms=3, alpha=0.6)
        ax.set_xlabel("largest masked probability")
        ax.set_ylabel("1 − corr(W, SVM-eq)")
        ax.grid(alpha=0.3)
    return fig


def plot_lambda(res):
    """Chapter 7, λ head: 1 − corr of W(k) with the SVM equivalence, W^dir and the 1-token
    SVM (left); GD's final attention beside the best attention (right)."""
    A = res.arrays
    fig, axes = new_figure(1, 2, figsize=(9.6, 3.4))
    correlation_curves(A["steps"], {"SVM-eq": A["corr_eq"], "W^dir": A["corr_dir"],
                                    "1-token SVM": A["corr_one"]}, ax=axes[0], one_minus=True,
                       legend="lower left")
    x = np.arange(len(A["s_opt"]))
    axes[1].bar(x - 0.2, A["s_opt"], 0.4, label="best attention (sparsemax-like)")
    axes[1].bar(x + 0.2, A["s_final"], 0.4, label="GD's final softmax")
    axes[1].set_xlabel("token t")
    axes[1].set_ylabel("attention s_t")
    axes[1].legend(fontsize=8)
    return fig


def plot_causal(res):
    """Chapter 8: corr of causal / bidirectional GD with the matching sequence SVM (and the
    causal run against the mask-free SVM), plain and as 1 − corr."""
    A = res.arrays
    fig, axes = new_figure(1, 2, figsize=(9.6, 3.6))
    correlation_curves(A["steps"], {"causal GD vs causal SVM": A["corr_causal"],
                                    "causal GD vs mask-free SVM": A["corr_causal_vs_full"],
                                    "full GD vs full SVM": A["corr_full"]},
                       ax=axes[0], legend="lower right")
    correlation_curves(A["steps"], {"causal GD vs causal SVM": A["corr_causal"],
                                    "full GD vs full SVM": A["corr_full"]},
                       ax=axes[1], one_minus=True, legend="upper right")
    return fig
