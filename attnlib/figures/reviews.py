r"""Figures and tables of the real-review experiment ``md_reviews`` (chapter 10).

Each function takes a :class:`attnlib.experiments.Result` of ``md_reviews`` and returns a
matplotlib figure or a Markdown table; nothing here trains. See chapter 10, *Real reviews*.
"""

from __future__ import annotations

import numpy as np

from attnlib import plots as _plots
from attnlib.figures.mirror import FONT_SIZE, step_histogram
from attnlib.plots.style import readable

__all__ = ["REVIEW_NAMES", "PAPER_IMDB", "plot_reviews", "plot_probe_attention",
           "accuracy_table", "histogram_table", "data_summary", "reviews_summary",
           "weights_summary"]

REVIEW_NAMES = {"md": "ℓ1.1-MD", "gd": "GD (ℓ2)", "md3": "ℓ3-MD", "adam": "Adam"}
#: the paper's IMDb accuracies, 3 blocks (max, last; mean ± std over 10 runs)
PAPER_IMDB = {"md": ("83.47 ± 0.09", "82.57 ± 0.19"), "gd": ("81.66 ± 0.09", "80.61 ± 0.32"),
              "md3": ("82.57 ± 0.10", "81.33 ± 0.23"), "adam": ("not run", "not run")}
_STYLE = {"ℓ1.1-MD": "-", "GD (ℓ2)": "-", "ℓ3-MD": "--", "Adam": ":"}


def plot_reviews(res):
    """Top: test accuracy along the epochs (median of the seeds, band over seeds). Below:
    the magnitudes of the Q, K and V weights, ℓ1.1-MD against GD (the first seed's model,
    all blocks pooled), the threshold of the counts dotted, the largest marked by a dot.
    See chapter 10."""
    a, n = res.arrays, res.numbers
    fig, axes = _plots.new_figure(4, 1, figsize=(7.0, 12.5))
    _plots.curves(np.asarray(a["epoch"]),
                  {REVIEW_NAMES[k]: np.asarray(a[f"test_acc_{k}"]).T for k in REVIEW_NAMES},
                  ax=axes[0], xlabel="epoch", ylabel="test accuracy (%)", legend="lower right",
                  styles=_STYLE)
    thr = n["threshold"]
    for ax, name in zip(axes[1:], "QKV"):
        vals = {REVIEW_NAMES[k]: np.asarray(a[f"abs_{name}_{k}"]) for k in ("md", "gd")}
        hi = max(float(v.max()) for v in vals.values())
        step_histogram(ax, vals, xlabel=f"$|{name}_{{jk}}|$", bins=40,
                       range=(0.0, max(hi * 1.02, 1.2 * thr)), logy=True)
        ax.axvline(thr, color=_plots.color_of("ink"), lw=1, ls=":")  # the threshold of the counts
        for j, v in enumerate(vals.values()):
            ax.plot([v.max()], [1], "o", color=_plots.COLORS[j], ms=7, clip_on=False)
        ax.legend(fontsize=FONT_SIZE, loc="upper right")
    return readable(fig)


def plot_probe_attention(res):
    """Normalised [CLS] attention on the designated word of each usable probe sentence,
    ℓ1.1-MD against GD (mean over seeds); above the diagonal ℓ1.1-MD attends more."""
    a = res.arrays
    md = np.asarray(a["probe_md"]).mean(0)
    gd = np.asarray(a["probe_gd"]).mean(0)
    fig, ax = _plots.new_figure(1, 1, figsize=(5.0, 4.6))
    ax.plot([0, 1], [0, 1], color=_plots.color_of("ink"), lw=1, ls=":")
    ax.scatter(gd, md, s=28, color=_plots.COLORS[0])
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("GD: attention on the designated word")
    ax.set_ylabel("ℓ1.1-MD: attention on\nthe designated word")
    return readable(fig)


def accuracy_table(res) -> str:
    """Markdown: max and last test accuracy per optimizer (mean ± std over seeds), epochs
    run, the chosen rate, and the paper's 3-block IMDb numbers beside them."""
    n, S = res.numbers, res.params["seeds"]
    rows = ["| optimizer | learning rate | max test acc. (%) | last test acc. (%) | epochs | "
            "paper, IMDb max | paper, IMDb last |", "|---|---|---|---|---|---|---|"]
    for k, name in REVIEW_NAMES.items():
        rows.append(
            f"| {name} | {n[f'{k}_lr']:.3g} | {n[f'{k}_max_test']:.2f} ± "
            f"{n[f'{k}_max_test_std']:.2f} | {n[f'{k}_last_test']:.2f} ± "
            f"{n[f'{k}_last_test_std']:.2f} | {n[f'{k}_epochs']:.1f} | {PAPER_IMDB[k][0]} | "
            f"{PAPER_IMDB[k][1]} |")
    return "\n".join(rows) + f"\n\nMean ± standard deviation over {S} seeds."


def histogram_table(res) -> str:
    """Markdown: Q, K, V entries above the threshold and the largest, ℓ1.1-MD vs GD, beside
    the paper's 6-block counts."""
    n = res.numbers
    paper = {"K": ("18,206 vs 27,224", "≈ 0.70 vs 0.26"), "Q": ("13,964 vs 14,654",
             "≈ 0.30 vs 0.17"), "V": ("7,643 vs 10,127", "≈ 1.16 vs 0.29")}
    rows = [f"| weights | entries > {n['threshold']:.3f}: ℓ1.1-MD vs GD | largest: ℓ1.1-MD vs GD"
            " | paper (> 0.06) | paper, largest |", "|---|---|---|---|---|"]
    for m in "QKV":
        rows.append(f"| {m} | {n[f'md_count_{m}']:.0f} vs {n[f'gd_count_{m}']:.0f} | "
                    f"{n[f'md_max_{m}']:.3f} vs {n[f'gd_max_{m}']:.3f} | {paper[m][0]} | "
                    f"{paper[m][1]} |")
    return "\n".join(rows)


def _pm(n, key, digits=2):
    return f"{n[key]:.{digits}f} ± {n[key + '_std']:.{digits}f}"


def data_summary(res) -> str:
    """The data and model of ``md_reviews`` in one paragraph (numbers from the result)."""
    n, p = res.numbers, res.params
    return (
        f"After dropping the {n['dropped']:,.0f} sentences rated within ±{p['margin']} of "
        f"neutral, the models train on {n['n_train']:,.0f} sentences drawn from the training "
        f"split, choose their learning rate on {n['n_val']:,.0f} validation sentences and are "
        f"tested on all {n['n_test']:,.0f} test sentences. The vocabulary has "
        f"{n['vocab']:,.0f} entries, and each model {n['n_params']:,.0f} parameters "
        f"({p['n_blocks']} blocks of width {p['n_embd']} with {p['n_head']} heads).")


def reviews_summary(res) -> str:
    """The "What we observe" paragraph of ``md_reviews`` (numbers from the result)."""
    n, S = res.numbers, res.params["seeds"]
    order = sorted(REVIEW_NAMES, key=lambda k: -n[f"{k}_max_test"])
    best = ", ".join(f"{REVIEW_NAMES[k]} {n[k + '_max_test']:.1f}%" for k in order)
    stop = ", ".join(f"{REVIEW_NAMES[k]} {n[k + '_stopped']:.0%}" for k in REVIEW_NAMES)
    return (
        f"**What we observe.** Ranked by max test accuracy (mean over {S} seeds): {best}. "
        f"$\\ell_{{1.1}}$ mirror descent is {abs(n['acc_diff_max']):.1f} points "
        f"{'above' if n['acc_diff_max'] >= 0 else 'below'} gradient descent at its best "
        f"epoch and {abs(n['acc_diff_last']):.1f} points "
        f"{'above' if n['acc_diff_last'] >= 0 else 'below'} at stopping; the paper's gain "
        f"is +1.5 to +2.3 points. Share of the models that reached 99.5% training accuracy "
        f"within {res.params['epochs']} epochs: {stop}. On the Amazon sentences, a domain "
        f"none of the models saw, $\\ell_{{1.1}}$ scores {n['md_amazon']:.1f}% against "
        f"{n['gd_amazon']:.1f}% for gradient descent.")


def weights_summary(res) -> str:
    """The weights and attention of ``md_reviews`` in words (numbers from the result)."""
    n = res.numbers
    fewer = int(n["qkv_fewer"])
    heavier = int(n["qkv_heavier"])
    return (
        f"In {fewer} of the 3 weight matrices $\\ell_{{1.1}}$ mirror descent leaves fewer "
        f"entries above {n['threshold']:.2f} than gradient descent, and in {heavier} of 3 its "
        f"largest entry is larger (the paper: 3 and 3). On the {n['n_probes']:.0f} probe "
        f"sentences whose designated word is in the vocabulary, the normalised [CLS] "
        f"attention on that word is {_pm(n, 'md_probe')} with $\\ell_{{1.1}}$ against "
        f"{_pm(n, 'gd_probe')} with gradient descent (the paper: 0.4387 against 0.3122); "
        f"on the strongest lexicon word of {n['n_lexicon']:.0f} held-out sentences, "
        f"{_pm(n, 'md_lexicon')} against {_pm(n, 'gd_lexicon')}. Without the normalisation, "
        f"the attention on the probe word is {n['md_probe_raw']:.3f} against "
        f"{n['gd_probe_raw']:.3f}, where uniform attention would give "
        f"{n['uniform_probe']:.3f}.")
