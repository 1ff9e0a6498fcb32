"""Figures of chapter 7 (nonlinear heads) of "Transformers as SVMs" (arXiv 2308.16898).

A :class:`~attnlib.experiments.Result` of ``tf_multi_token`` or ``tf_lambda_head`` in, a
matplotlib Figure out, drawn from the result's stored arrays only.
"""

from __future__ import annotations

import numpy as np

from ..plots import PALETTE, BookFigure, color_of, correlation_curves, curves, new_figure
from ..plots.style import BAND_TITLE, power_ticks, readable

__all__ = ["plot_multi", "plot_multi_errors", "plot_lambda", "mean_markers",
           "plot_nonlinear_path", "multi_table", "PAPER_E4_MEANS", "PAPER_XLIM",
           "FONT"]

PAPER_XLIM = (5e-18, 1e-6)  # the official scatter's x-axis (largest masked probability)

#: The official E4 figure's final mean 1 − corr per d, read off the figure: SVM equivalence,
#: W^dir and the 1-token SVM (the last only at the curve's ends, d = 4 and 10; None elsewhere).
PAPER_E4_MEANS = {4: (0.035, 0.075, 0.16), 6: (0.017, 0.045, None), 8: (0.011, 0.015, None),
                  10: (0.0055, 0.0085, 0.12)}

#: Text size of the chapter 6 and 7 figures (at most 9 in wide): at least 12 pt, so that a
#: figure shown at a phone's width keeps its labels legible.
FONT = 12


def _grid(k):
    """A figure of ``k`` panels, two per row (readable at the book's column width)."""
    cols = min(k, 2)
    rows = -(-k // cols)
    fig, axes = new_figure(rows, cols, figsize=(3.8 * cols + 0.4, 3.5 * rows))
    axes = np.atleast_1d(axes).reshape(-1)
    for ax in axes[k:]:
        ax.set_visible(False)
    return fig, axes[:k]


def mean_markers(ax, steps, values, colors, points: int = 5):
    """Overlay the mean over runs of each curve in ``values`` (list of (B, S) arrays) as open
    circles at ``points`` evenly spaced iterations (the first one left out), labelled "mean
    over runs" once: the official figures plot means, the book's curves medians."""
    steps = np.asarray(steps).reshape(-1)
    at = np.linspace(0, len(steps) - 1, points + 1).round().astype(int)[1:]
    for c, (y, color) in enumerate(zip(values, colors)):
        mean = np.nanmean(np.atleast_2d(np.asarray(y, dtype=float)), 0)
        ax.plot(steps[at], mean[at], "o", ms=6, color=color, mfc="white", mec=color, mew=1.5,
                label="mean over runs" if c == 0 else None)


def plot_multi(res):
    """E4 (chapter 7), the official figure's top row: per d (one panel each, two per row),
    1 − corr of W(k) with the SVM equivalence, W^dir and the 1-token SVM against the
    iteration (log y; median and 10-90% band over the kept runs, the mean as open markers,
    as the official figure plots means). The official bottom row is ``plot_multi_errors``."""
    A = res.arrays
    ds = A["ds"]
    fig, axes = _grid(len(ds))
    for j, d in enumerate(ds):
        k = A["run_d"] == d
        correlation_curves(A["steps"], {"SVM-eq": A["corr_eq"][k], r"$W^{dir}$": A["corr_dir"][k],
                                        "1-token SVM": A["corr_one"][k]},
                           ax=axes[j], one_minus=True, title=f"d = {d} ({k.sum()} runs)",
                           legend=None, styles={r"$W^{dir}$": "--", "1-token SVM": ":"})
        axes[j].set_xlabel("iteration k" if j >= len(ds) - 2 else "")
        power_ticks(axes[j])
        # the official figure plots means: the mean over the runs, as markers
        mean_markers(axes[j], A["steps"], [1 - np.asarray(A[key])[k] for key in
                                           ("corr_eq", "corr_dir", "corr_one")],
                     [color_of(c) for c in range(3)])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, title=BAND_TITLE)
    return readable(fig, FONT)


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
        ax.loglog(x[~low], y[~low], ".", ms=4, alpha=0.6, color=PALETTE["other"])
        ax.loglog(np.full(low.sum(), PAPER_XLIM[0]), y[low], "o", mfc="none", ms=6, alpha=0.8,
                  color=PALETTE["support"])
        ax.set_xlim(PAPER_XLIM[0] / 3, PAPER_XLIM[1] * 3)
        ax.set_title(f"d = {d}: {low.sum()} runs at the left edge")
        ax.set_xlabel("largest masked probability" if j >= len(ds) - 2 else "")
        ax.set_ylabel("1 − corr(W, SVM-eq)" if j % 2 == 0 else "")
        ax.grid(alpha=0.3)
    return readable(fig, FONT)


def plot_lambda(res):
    """Chapter 7, λ head: 1 − corr of W(k) with the fitted SVM equivalence, W^dir and the
    1-token SVM (top left); the a-priori checks, the finite part's gap to W^fin(s*) and the
    diverging part's 1 − corr with W^dir(s*) (top right); the final attention (bottom)."""
    A = res.arrays
    fig = BookFigure(figsize=(8.8, 7.0), layout="constrained")
    axes = fig.subplot_mosaic([["whole", "parts"], ["att", "att"]],
                              height_ratios=(1.25, 1))
    correlation_curves(A["steps"], {"SVM-eq (R fitted)": A["corr_eq"], r"$W^{dir}$": A["corr_dir"],
                                    "1-token SVM": A["corr_one"]}, ax=axes["whole"],
                       one_minus=True, legend="center right", title=r"whole $W(k)$: 1 − corr",
                       styles={r"$W^{dir}$": "--", "1-token SVM": ":"})
    curves(A["steps"], {"finite part:\n" + r"gap to $W^{fin}(s^*)$": A["fin_gap"],
                        "diverging part:\n" + r"1 − corr with $W^{dir}(s^*)$": A["perp_err"]},
           styles={"diverging part:\n" + r"1 − corr with $W^{dir}(s^*)$": "--"},
           ax=axes["parts"], logy=True, ylabel="error against $s^*$", legend="upper right",
           title=r"the two parts, against $s^*$")
    for key in ("whole", "parts"):
        axes[key].set_xlabel("iteration k")
        power_ticks(axes[key])
    ax = axes["att"]
    x = np.arange(len(A["s_opt"]))
    ax.bar(x - 0.2, A["s_opt"], 0.4, label=r"best attention $s^*$", color=color_of(0))
    ax.bar(x + 0.2, A["s_final"], 0.4, label="GD's final softmax", color=color_of(1),
           hatch="//", edgecolor="white")
    ax.set_xticks(x, [f"$x_{{{t + 1}}}$" for t in x])
    ax.set_xlabel("token")
    ax.set_ylabel(r"attention $s_t$")
    ax.legend(loc="upper right")
    return readable(fig, FONT)


def plot_nonlinear_path(res):
    """Chapter 7, one best token per input: corr of the regularisation path with the Att-SVM
    of the head's best tokens against the radius (mean and each data set, left); the share of
    single random starts that find the global selection (right)."""
    A = res.arrays
    R, C = np.asarray(A["radii"]), np.asarray(A["corr"])
    fig, axes = new_figure(1, 2, figsize=(8.8, 3.8))
    ax = axes[0]
    for j, c in enumerate(C):  # each data set: thin
        ax.semilogx(R, c, color=color_of(1), lw=0.9, alpha=0.45,
                    label="each data set" if j == 0 else None)
    ax.semilogx(R, C.mean(0), "o-", color=color_of(0), lw=2, label="mean")
    ax.set_xlabel("radius R")
    ax.set_ylabel(r"corr$(\bar W(R), W^{mm}_\alpha)$")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    ax = axes[1]
    ax.semilogx(R, A["single_ok"], "s-", color=color_of(2), lw=2)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("radius R")
    ax.set_ylabel("single starts on α (share)")
    ax.grid(alpha=0.3)
    return readable(fig, FONT)


def multi_table(numbers) -> str:
    """E4 (chapter 7): a Markdown table of the mean final 1 − corr per d (SVM equivalence,
    W^dir, 1-token SVM) beside the official figure's values, and a paragraph comparing them.

    ``numbers`` are those of a ``tf_multi_token`` result (keys ``eq_mean_d{d}``,
    ``dir_mean_d{d}``, ``one_mean_d{d}`` and ``mean_z_max``)."""
    ds = tuple(PAPER_E4_MEANS)

    def cell(x, p):
        return f"{x:.4f}" + (f" ({p:g})" if p else "")

    rows = "\n".join(
        f"| {d} | " + " | ".join(cell(numbers[f"{k}_mean_d{d}"], PAPER_E4_MEANS[d][j])
                                 for j, k in enumerate(("eq", "dir", "one"))) + " |"
        for d in ds)
    pairs = [(numbers[f"{k}_mean_d{d}"], PAPER_E4_MEANS[d][j]) for d in ds
             for j, k in enumerate(("eq", "dir", "one")) if PAPER_E4_MEANS[d][j] and k != "dir"]
    dev = max(abs(x / p - 1) for x, p in pairs)
    r_dir = [numbers[f"dir_mean_d{d}"] / PAPER_E4_MEANS[d][1] for d in ds]
    return ("| $d$ | SVM-eq | $W^{dir}$ | one-token SVM |\n|---:|---:|---:|---:|\n" + rows
            + "\n\nMean final $1 - \\mathrm{corr}$ over the kept runs; in brackets the value "
            "read off the paper's figure (the one-token curve only at its ends, 0.16 to 0.12). "
            f"The means of the equivalence and of the one-token SVM are within {dev:.0%} of the "
            "figure's values; those of $W^{dir}$ differ more, from "
            f"{min(r_dir):.1f} to {max(r_dir):.1f} times the figure's. A mean of 500 "
            "heavy-tailed errors is itself uncertain: compared as two means of 500 runs with "
            "the same spread, the largest difference of the twelve, in units of its standard "
            f"error, is $|z| = {numbers['mean_z_max']:.2f}$, within sampling error (a 5% test "
            "over twelve means accepts up to 2.87).")
