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
           "weights_summary", "claims_table", "budget_summary", "LONGER_RUNS", "FIRST_STEP"]

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


def claims_table(res_rev, res_text, res_digits, res_svm) -> str:
    """Markdown: the paper's claims beside this chapter's measurements, ✓ or ✗ each.

    ``res_rev``, ``res_text``, ``res_digits`` and ``res_svm`` are results of ``md_reviews``,
    ``md_text``, ``md_digits`` and ``md_text_svm``. A review row's verdict is its target's
    (:class:`attnlib.experiments.Target`); the planted-word and digit rows hold the paper's
    own bounds (more attention than GD; +1.5 points of accuracy or more).
    """
    r, n3, g, s = res_rev.numbers, res_text.numbers, res_digits.numbers, res_svm.numbers
    ok = {t.key: t.ok(r[t.key]) for t in res_rev.experiment.targets}

    def mark(*good):
        return " / ".join("✓" if x else "✗" for x in good)

    rows = [
        ("more attention on the designated word than GD",
         "0.44 vs 0.31 (40 probes, normalised)",
         f"reviews: {r['md_probe']:.2f} vs {r['gd_probe']:.2f} ({r['n_probes']:.0f} probes), "
         f"{r['md_lexicon']:.2f} vs {r['gd_lexicon']:.2f} (strongest lexicon word); "
         f"planted word: {n3['md_mass']:.2f} vs {n3['gd_mass']:.2f}",
         mark(ok["probe_diff"], ok["lexicon_diff"], n3["mass_diff"] > 0)),
        ("higher test accuracy than GD", "+1.5 to +2.3 points (max over epochs)",
         f"reviews: {r['acc_diff_max']:+.1f} (max), {r['acc_diff_last']:+.1f} (last); "
         f"planted word: {n3['acc_diff']:+.1f}; digits: {g['acc_diff']:+.1f}",
         mark(ok["acc_diff_max"], ok["acc_diff_last"], n3["acc_diff"] >= 1.5,
              g["acc_diff"] >= 1.5)),
        ("fewer Q, K, V entries above the threshold than GD", "3 of 3",
         f"reviews: {r['qkv_fewer']:.0f} of 3", mark(ok["qkv_fewer"])),
        ("a larger largest Q, K, V entry than GD", "3 of 3",
         f"reviews: {r['qkv_heavier']:.0f} of 3", mark(ok["qkv_heavier"])),
        ("the gain carries to another domain", "not measured",
         f"Amazon sentences: {r['amazon_diff']:+.1f} points", mark(ok["amazon_diff"])),
        ("the direction of $W$ tends to the $\\ell_p$-AttSVM", "theorem (one layer)",
         f"each run nearest its own SVM, by at least {s['svm_diag_ratio']:.1f}×",
         mark(s["svm_diag_ratio"] > 1)),
    ]
    return ("| the paper's claim | the paper | this chapter | holds here? |\n|---|---|---|---|\n"
            + "\n".join("| " + " | ".join(x) + " |" for x in rows)
            + "\n\nWhere several verdicts are given, they follow the order of the "
            "measurements in the row.")


#: Budget against step size, measured once (2026-11-28, shared 2-core CPU; too long for the
#: page): the chapter's data, model and batches, seed 0, ``fit_encoder`` with the rate and
#: the number of steps (20 per epoch) given. run -> (optimizer, p, lr, steps, final train
#: accuracy %, max test accuracy %, last test accuracy %). Reproduce a row with
#: ``attnlib.experiments.mirror_reviews.real_reviews(seeds=1, epochs=steps // 20,
#: lr_md=(lr,), ...)``. The ℓ1.1 run at 1.28e-2 overflows float32 at its second step,
#: which is skipped, and so is every later one.
LONGER_RUNS = {
    "gd, official rate": ("md", 2.0, 4e-4, 600, 55.9, 54.2, 53.4),
    "gd, ×8": ("md", 2.0, 3.2e-3, 600, 62.4, 56.8, 55.2),
    "gd, ×32": ("md", 2.0, 1.28e-2, 600, 71.5, 56.3, 54.2),
    "md, official rate": ("md", 1.1, 8e-4, 600, 61.5, 56.3, 54.8),
    "md, ×4": ("md", 1.1, 3.2e-3, 600, 68.2, 57.6, 55.3),
    "md, ×16": ("md", 1.1, 1.28e-2, 600, 50.0, 48.9, 48.9),
    "adam": ("adam", 2.0, 1e-2, 320, 99.5, 68.3, 68.3),
    "gd, ×8, long": ("md", 2.0, 3.2e-3, 2000, 92.5, 56.8, 52.4),
    "md, ×4, long": ("md", 1.1, 3.2e-3, 2000, 82.4, 62.4, 58.7),
    "md3, ×16, long": ("md", 3.0, 6.4e-5, 2000, 60.8, 57.4, 56.8),
}
#: The first step on one batch of 100 training sentences from the seed-0 initialisation:
#: ‖Δw‖/‖w‖ of the first block's fused Q, K, V weights, at the official 3-block rates (GD
#: 4e-4, ℓ1.1-MD 8e-4) and Adam at 1e-2 (measured once, with :data:`LONGER_RUNS`).
FIRST_STEP = {"gd": 1.1e-3, "md": 3.9e-3, "adam": 6.9e-2}


def budget_summary() -> str:
    """Markdown: what longer runs show, budget against step size
    (:data:`LONGER_RUNS`, one seed)."""
    R, S = LONGER_RUNS, FIRST_STEP

    def acc(k):
        return f"{R[k][4]:.0f}% train, {R[k][5]:.1f}% best test"

    return (
        f"Is it the budget or the step size? Runs of the same model on the same sentences "
        f"(one seed) five times longer, 600 steps, answer it. Every rate that stays finite "
        f"lowers the training loss and lifts the training accuracy: gradient descent at the "
        f"official rate reaches {acc('gd, official rate')}, at 8× it {acc('gd, ×8')}, at 32× "
        f"{acc('gd, ×32')}; $\\ell_{{1.1}}$ at its official rate {acc('md, official rate')}, "
        f"at 4× {acc('md, ×4')}. Larger steps do not help: at 16× the official rate the "
        f"$\\ell_{{1.1}}$ update leaves float32's range within three steps and the run stops "
        f"where it began ({R['md, ×16'][5]:.1f}% test). Adam stops at 99.5% training "
        f"accuracy after {R['adam'][3]} steps with {R['adam'][5]:.1f}% test. After 2,000 steps "
        f"gradient descent fits {R['gd, ×8, long'][4]:.1f}% of the training sentences but "
        f"tests at {R['gd, ×8, long'][5]:.1f}% at best, $\\ell_{{1.1}}$ fits "
        f"{R['md, ×4, long'][4]:.1f}% and tests at {R['md, ×4, long'][5]:.1f}% at best, "
        f"$\\ell_3$ fits {R['md3, ×16, long'][4]:.1f}%. So the plateau of this page is the "
        f"step budget: plain and mirror descent learn, but far more slowly per step than "
        f"Adam (in its first step at the official rate, gradient descent moves the first "
        f"block's Q, K, V weights by {100 * S['gd']:.1f}% of their norm, $\\ell_{{1.1}}$ by "
        f"{100 * S['md']:.1f}%, Adam at its rate by {100 * S['adam']:.0f}%), and the "
        f"paper's runs take 18,000 to 40,000 steps (72 to 160 epochs of 250 batches). One "
        f"seed at 2,000 steps favours $\\ell_{{1.1}}$ by "
        f"{R['md, ×4, long'][5] - R['gd, ×8, long'][5]:.1f} points of best test accuracy, "
        f"the paper's direction, but one seed decides nothing.")
