"""Figures of chapter 7 (nonlinear heads) of "Transformers as SVMs" (arXiv 2308.16898).

A :class:`~attnlib.experiments.Result` of ``tf_multi_token`` or ``tf_lambda_head`` in, a
matplotlib Figure out, drawn from the result's stored arrays only.
"""

from __future__ import annotations

import numpy as np

from ..plots import PALETTE, color_of, correlation_curves, curves, new_figure

__all__ = ["plot_multi", "plot_multi_errors", "plot_lambda", "plot_nonlinear_path", "PAPER_XLIM"]

PAPER_XLIM = (5e-18, 1e-6)  # the official scatter's x-axis (largest masked probability)


def _grid(k):
    """A figure of ``k`` panels, two per row (readable at the book's column width)."""
    cols = min(k, 2)
    rows = -(-k // cols)
    fig, axes = new_figure(rows, cols, figsize=(3.6 * cols + 0.4, 3.1 * rows))
    axes = np.atleast_1d(axes).reshape(-1)
    for ax in axes[k:]:
        ax.set_visible(False)
    return fig, axes[:k]


def plot_multi(res):
    """E4 (chapter 7), the official figure's top row: per d (one panel each, two per row),
    1 − corr of W(k) with the SVM equivalence, W^dir and the 1-token SVM against the
    iteration (log y; median and 10-90% band over the kept runs). The official bottom row is
    ``plot_multi_errors``."""
    A = res.arrays
    ds = A["ds"]
    fig, axes = _grid(len(ds))
    for j, d in enumerate(ds):
        k = A["run_d"] == d
        correlation_curves(A["steps"], {"SVM-eq": A["corr_eq"][k], r"$W^{dir}$": A["corr_dir"][k],
                                        "1-token SVM": A["corr_one"][k]},
                           ax=axes[j], one_minus=True, title=f"d = {d} ({k.sum()} runs)",
                           legend="lower left" if j == 0 else None)
    return fig


def plot_multi_errors(res):
    """E4 (chapter 7), the official figure's bottom row: per d (two panels per row), the final
    SVM-eq error of every kept run against its largest masked probability (log-log, the
    official x-range). Runs whose largest masked probability lies below the official range
    are drawn at its left edge as open markers, and counted in the title."""
    A = res.arrays
    ds = A["ds"]
    fig, axes = _grid(len(ds))
    for j, d in enumerate(ds):
        k = A["run_d"] == d
        ax = axes[j]
        x, y = A["max_masked"][k], np.maximum(1 - A["corr_eq"][k][:, -1], 1e-16)
        low = x < PAPER_XLIM[0]
        ax.loglog(x[~low], y[~low], ".", ms=3, alpha=0.6, color=PALETTE["other"])
        ax.loglog(np.full(low.sum(), PAPER_XLIM[0]), y[low], "o", mfc="none", ms=3, alpha=0.5,
                  color=PALETTE["support"])
        ax.set_xlim(PAPER_XLIM[0] / 3, PAPER_XLIM[1] * 3)
        ax.set_title(f"d = {d}: {low.sum()} runs below {PAPER_XLIM[0]:.0e} (left edge)",
                     fontsize=8)
        ax.set_xlabel("largest masked probability")
        ax.set_ylabel("1 − corr(W, SVM-eq)")
        ax.grid(alpha=0.3)
    return fig


def plot_lambda(res):
    """Chapter 7, λ head: 1 − corr of W(k) with the fitted SVM equivalence, W^dir and the
    1-token SVM (left); the a-priori checks, the finite part's gap to W^fin(s*) and the
    diverging part's 1 − corr with W^dir(s*) (middle); the final attention (right)."""
    A = res.arrays
    fig, axes = new_figure(1, 3, figsize=(13.0, 3.4))
    correlation_curves(A["steps"], {"SVM-eq (R fitted)": A["corr_eq"], r"$W^{dir}$": A["corr_dir"],
                                    "1-token SVM": A["corr_one"]}, ax=axes[0], one_minus=True,
                       legend="center right", title=r"whole $W(k)$")
    curves(A["steps"], {r"finite part: gap to $W^{fin}(s^*)$": A["fin_gap"],
                        r"diverging part: 1 − corr with $W^{dir}$": A["perp_err"]}, ax=axes[1],
           logy=True, ylabel="a-priori error", legend="upper right",
           title=r"the two parts, against $s^*$ (no GD input)")
    x = np.arange(len(A["s_opt"]))
    axes[2].bar(x - 0.2, A["s_opt"], 0.4, label=r"best attention $s^*$", color=color_of(0))
    axes[2].bar(x + 0.2, A["s_final"], 0.4, label="GD's final softmax", color=color_of(1))
    axes[2].set_xticks(x, [f"$x_{{{t + 1}}}$" for t in x])
    axes[2].set_xlabel("token")
    axes[2].set_ylabel(r"attention $s_t$")
    axes[2].legend(fontsize=8)
    return fig


def plot_nonlinear_path(res):
    """Chapter 7, one best token per input: corr of the regularisation path with the Att-SVM
    of the head's best tokens against the radius (mean and each data set, left); the share of
    single random starts that find the global selection (right)."""
    A = res.arrays
    R, C = np.asarray(A["radii"]), np.asarray(A["corr"])
    fig, axes = new_figure(1, 2, figsize=(9.6, 3.4))
    ax = axes[0]
    for j, c in enumerate(C):  # each data set, grey
        ax.semilogx(R, c, color=PALETTE["neutral"], lw=0.8,
                    label="each data set" if j == 0 else None)
    ax.semilogx(R, C.mean(0), "o-", color=color_of(0), label="mean over data sets")
    ax.set_xlabel("radius R")
    ax.set_ylabel(r"corr$(\bar W(R), W^{mm}_\alpha)$")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    ax = axes[1]
    ax.semilogx(R, A["single_ok"], "s-", color=color_of(1))
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("radius R")
    ax.set_ylabel("share of single starts on α")
    ax.grid(alpha=0.3)
    return fig
