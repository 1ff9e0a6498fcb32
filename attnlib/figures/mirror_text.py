r"""Figures and the table of the planted-sentiment experiment ``md_text`` (chapter 10).

Each function takes a :class:`attnlib.experiments.Result` of ``md_text`` and returns a
matplotlib figure or a Markdown table; nothing here trains. The attention drawn is
:math:`s_{it} = \mathrm{softmax}_t(x_{it}^\top W z_i)` of the validation-selected models; the
planted word is the relevant token :math:`r_i` of sentence i. See chapter 10.
"""

from __future__ import annotations

import numpy as np

from attnlib import plots as _plots

__all__ = ["TEXT_NAMES", "plot_text", "plot_sentences", "draw_sentence", "text_table"]

#: display name of each optimizer of ``md_text``
TEXT_NAMES = {"md": "ℓ1.1-MD", "gd": "GD (ℓ2)", "md3": "ℓ3-MD", "adam": "Adam"}


def plot_text(res):
    """Left: attention on the planted word along training. Middle: mass, top-1 hit and test
    accuracy per optimizer (dots: seeds). Right: ``|W_jk|``/max|W| of the selected models.

    ``res`` is a result of ``md_text``. See chapter 10.
    """
    a = res.arrays
    fig, (ax1, ax2, ax3) = _plots.new_figure(1, 3, figsize=(13.0, 3.5))
    _plots.curves(a["curve_step"], {TEXT_NAMES[k]: a[f"curve_mass_{k}"].T for k in TEXT_NAMES},
                  ax=ax1, xlabel="step", ylabel="test attention on the planted word",
                  legend="upper left")
    ax1.axhline(res.numbers["uniform"], color="0.6", ls=":", lw=1)
    ax1.set_ylim(0, 1)
    metrics = (("mass", "attention mass"), ("hit", "top-1 hit"), ("test_acc", "test acc."))
    width = 0.8 / len(TEXT_NAMES)
    for j, k in enumerate(TEXT_NAMES):
        x = np.arange(len(metrics)) + (j - (len(TEXT_NAMES) - 1) / 2) * width
        vals = np.stack([np.asarray(a[f"{k}_{m}"], dtype=float) for m, _ in metrics])  # (3, S)
        ax2.bar(x, vals.mean(1), width, label=TEXT_NAMES[k], color=f"C{j}", alpha=0.75)
        for i in range(len(metrics)):
            ax2.plot(np.full(vals.shape[1], x[i]), vals[i], "k.", ms=3)
    ax2.set_xticks(np.arange(len(metrics)), [w for _, w in metrics])
    ax2.set_ylim(0, 1.05)
    ax2.legend(fontsize=7, loc="lower left")
    _plots.title(ax2, "on the test sentences (selected models)")
    _plots.histogram({TEXT_NAMES[k]: a[f"rel_abs_{k}"] for k in TEXT_NAMES}, ax=ax3, bins=40,
                     logy=True, xlabel="|W_jk| / max|W| (selected models)", range=(0.0, 1.0))
    return fig


def draw_sentence(ax, words, attention, relevant, distractors=(), vmax=1.0):
    """Words in boxes coloured by their attention; the planted word boxed in red and the
    distractors in orange. ``words`` (T,) str, ``attention`` (T,)."""
    import matplotlib as mpl

    cmap, x = mpl.colormaps["Blues"], 0.0
    for t, (w, s) in enumerate(zip(words, attention)):
        edge = "tab:red" if t == relevant else ("tab:orange" if t in distractors else "0.8")
        ax.text(x, 0.5, w, fontsize=8, va="center", ha="left",
                color="white" if s > 0.6 * vmax else "black",
                bbox=dict(boxstyle="round,pad=0.25", fc=cmap(min(float(s) / vmax, 1.0)),
                          ec=edge, lw=1.6 if edge != "0.8" else 0.6))
        x += 0.6 + 0.075 * len(w)
    ax.set_xlim(-0.2, max(x, 8.0))
    ax.set_ylim(0, 1)
    ax.axis("off")


def _sentence(a, i):
    vocab = a["vocab"]
    words = [str(vocab[w]) if w >= 0 else "[CLS]" for w in np.asarray(a["words"][i])]
    return words, int(a["relevant"][i]), {int(t) for t in np.atleast_1d(a["distractor"][i])}


def plot_sentences(res, sentences: int = 3, seed: int = 0):
    """Attention maps over test sentences: one row per (sentence, optimizer), words coloured
    by the seed-``seed`` model's attention; red box: the planted word, orange: distractors.

    ``res`` is a result of ``md_text``. See chapter 10.
    """
    a = res.arrays
    rows = [(i, k) for i in range(sentences) for k in TEXT_NAMES]
    fig = _plots.BookFigure(figsize=(11.0, 0.42 * len(rows)))  # fixed margins, no layout engine
    axes = fig.subplots(len(rows), 1)
    for ax, (i, k) in zip(np.atleast_1d(axes), rows):
        words, rel, dis = _sentence(a, i)
        draw_sentence(ax, words, np.asarray(a[f"attention_{k}"][seed, i]), rel, dis)
        label = "+" if a["label"][i] > 0 else "−"
        ax.text(-0.3, 0.5, f"{TEXT_NAMES[k]} ({label})", fontsize=8, ha="right", va="center")
    fig.subplots_adjust(left=0.12, right=0.99, top=0.98, bottom=0.02, hspace=0.1)
    return fig


def text_table(res) -> str:
    """The comparison of ``md_text`` as Markdown: mean ± std over seeds (chapter 10)."""
    n = res.numbers
    lines = ["| optimizer | lr (chosen on val.) | train acc. (%) | test acc. (%) | "
             "attention on planted word | top-1 hit (%) | near-zero W entries (%) |",
             "|---|---|---|---|---|---|---|"]

    def ms(key, scale=1.0, fmt=".1f"):
        return f"{scale * n[key]:{fmt}} ± {scale * n[key + '_std']:{fmt}}"

    for k, name in TEXT_NAMES.items():
        lines.append(f"| {name} | {n[k + '_lr']:g} | {ms(k + '_train_acc', 100)} | "
                     f"{ms(k + '_test_acc', 100)} | {ms(k + '_mass', 1, '.3f')} | "
                     f"{ms(k + '_hit', 100)} | {ms(k + '_sparsity', 100)} |")
    lines.append(f"\nMean ± standard deviation over {res.params['seeds']} seeds (different "
                 f"initialisations); uniform attention would be {n['uniform']:.3f}.")
    return "\n".join(lines)
