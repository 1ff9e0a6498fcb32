r"""The attention-over-words explorer of chapter 10 (arXiv 2410.14581, real-data claim).

:func:`word_attention`: pick a test sentence and an optimizer (ℓ1.1-MD, GD, ℓ3-MD, Adam) and
see the attention :math:`s_t = \mathrm{softmax}_t(x_t^\top W z)` the trained classifier puts on
each word, the planted sentiment word in red and its three opposite-polarity distractors
in orange. It reads the experiment ``md_text`` (:func:`attnlib.experiments.run`, cached) and
only draws. Chapters show it as ``al.explorers.word_attention(res)``.
"""

from __future__ import annotations

import numpy as np

from attnlib import plots
from attnlib.experiments import run
from attnlib.explorers.framework import Control, Explorer, with_static
from attnlib.figures.mirror_text import TEXT_NAMES

_C = plots.PALETTE  # the book's colour roles (attnlib.plots.style)

__all__ = ["word_attention", "representative_sentence", "TEXT_SETTINGS", "WORD_CAPTION"]

#: What the explorer shows at every setting (the line under it gives the setting's numbers).
WORD_CAPTION = ("The attention a trained classifier puts on each word of a test sentence: "
                "the planted sentiment word in red, its opposite-polarity distractors in "
                "orange, the dotted line at uniform attention. It opens on a typical sentence "
                "for ℓ1.1 mirror descent; move the sentence slider and switch the optimizer to "
                "compare where gradient descent, ℓ3 mirror descent and Adam look.")

#: the settings of chapter 10's live run of ``md_text`` (the explorer's default result)
TEXT_SETTINGS: dict = {}


def _draw_words(fig, sentence, optimizer, seed, result):
    """Two side-by-side panels (first and second half of the sentence, read top to bottom):
    the attention per word as horizontal bars, the words as labels (each panel stays readable
    as its own image on a phone)."""
    a = result.arrays
    i, k = int(sentence), str(optimizer)
    vocab = a["vocab"]
    words = [str(vocab[w]) if w >= 0 else "[CLS]" for w in np.asarray(a["words"][i])]
    rel = int(a["relevant"][i])
    dis = {int(t) for t in np.atleast_1d(a["distractor"][i])}
    s = np.asarray(a[f"attention_{k}"][int(seed), i], dtype=float)  # (T,)
    T = len(words)
    half = (T + 1) // 2
    axes = fig.subplots(1, 2, sharex=True)
    label = "positive" if a["label"][i] > 0 else "negative"
    titles = (f"{TEXT_NAMES[k]}, seed {int(seed)}, label {label}",
              f"planted word '{words[rel]}' (red)")
    bars = []
    for ax, ts, ttl in zip(axes, (range(half), range(half, T)), titles):
        ts = list(ts)
        colors = [_C["target"] if t == rel else (_C["support"] if t in dis else "0.6")
                  for t in ts]
        bars.append((ax.barh(np.arange(len(ts)), s[ts], color=colors), ts))
        ax.axvline(1.0 / T, color="0.4", ls=":", lw=1, label="uniform 1/T")
        ax.set_yticks(np.arange(len(ts)), [words[t] for t in ts], fontsize=11)
        for tick, t in zip(ax.get_yticklabels(), ts):
            if t == rel or t in dis:
                tick.set_color(_C["target"] if t == rel else _C["support"])
                tick.set_fontweight("bold")
        ax.set_ylim(half - 0.5, -0.5)  # sentence order, top to bottom; equal bar heights
        ax.set_xlim(0, 1)
        ax.set_xlabel("attention")
        ax.set_ylabel(f"words {ts[0] + 1}-{ts[-1] + 1}" if ts else "")
        ax.yaxis.set_label_coords(-0.47, 0.5)  # fixed: the phone cuts stay right for any word
        plots.title(ax, ttl, fontsize=11)
    axes[1].legend(fontsize=11, loc="lower right")
    for ax in axes:
        ax.tick_params(labelsize=11)
        ax.xaxis.label.set_size(11)
        ax.yaxis.label.set_size(11)

    def update(sentence2, optimizer2, seed2):
        """Another optimizer or seed on the same sentence: the bars and the left title move
        (the words, colours and axes stay); the same pixels as a new draw."""
        if int(sentence2) != i:
            return False
        k2 = str(optimizer2)
        s2 = np.asarray(a[f"attention_{k2}"][int(seed2), i], dtype=float)
        for container, ts in bars:
            for bar, t in zip(container, ts):
                bar.set_width(s2[t])
        plots.title(axes[0], f"{TEXT_NAMES[k2]}, seed {int(seed2)}, label {label}", fontsize=11)
        return True

    return lambda sentence, optimizer, seed: update(sentence, optimizer, seed)


def representative_sentence(result, optimizer: str = "md", seed: int = 0) -> int:
    """The kept test sentence on which ``optimizer``'s seed-``seed`` model puts the median
    attention on the planted word (the lower of the two middle ones for an even count): the
    explorer opens on a typical case, neither the best nor a failure. A run that kept no test
    sentence (n = 6) raises a ValueError."""
    a = result.arrays
    att = np.asarray(a[f"attention_{optimizer}"][int(seed)], dtype=float)  # (shown, T)
    if att.shape[0] == 0:
        raise ValueError(
            f"result: this md_text run kept no test sentence to show (n={result.params['n']}: "
            "a quarter of the sentences is the test split; run it with n >= 7)")
    rel = np.asarray(a["relevant"], dtype=int)[: att.shape[0]]
    mass = att[np.arange(att.shape[0]), rel]
    order = np.argsort(mass, kind="stable")
    return int(order[(len(order) - 1) // 2])


def word_attention(result=None, sentence: int | None = None, optimizer: str = "md", *,
                   seed: int = 0, static: dict | None = None, mode: str | None = None):
    r"""Explorer: the attention of each optimizer's classifier over the words of a sentence.

    The classifier :math:`f(X) = v^\top X^\top\mathrm{softmax}(XWz)` of chapter 10 (W trained
    by ℓ1.1 mirror descent, gradient descent, ℓ3 mirror descent or Adam; learning rate and
    checkpoint chosen on validation) reads sentences of real words with one planted strong
    sentiment word (the relevant token, red) and three weaker words of the opposite polarity
    (orange). The attention per word as bars, the sentence read top to bottom in two panels
    (first half left, second half right), against the uniform 1/T. See chapter 10.

    Parameters
    ----------
    result : Result, optional
        A result of ``md_text`` (default: the chapter's run, :data:`TEXT_SETTINGS`).
    sentence : int, optional
        One of the kept test sentences (0-7); default: :func:`representative_sentence`, the
        one with the median attention on the planted word for ``optimizer`` (a typical case).
    optimizer : {"md", "gd", "md3", "adam"}
    seed : int
        Which initialisation's model is shown (live only; the website shows ``seed``).
    static : dict, optional
        ``{control: values}``: the settings rendered on the static site.
    mode : {"live", "static", "both"}, optional
        As in :func:`attnlib.explorers.explorer_mode`.
    """
    result = run("md_text", **TEXT_SETTINGS) if result is None else result
    shown = int(np.asarray(result.arrays["words"]).shape[0])
    if shown == 0:
        representative_sentence(result, optimizer, seed)  # raises: no sentence to show
    seeds = int(np.asarray(result.arrays["attention_md"]).shape[0])
    if sentence is None:
        sentence = representative_sentence(result, optimizer, seed)
        shown_static = tuple((static or {}).get("sentence", range(shown)))
        if sentence not in shown_static:
            sentence = int(shown_static[0])
    controls = [
        Control("sentence", tuple(range(shown)), default=sentence, label="test sentence"),
        Control("optimizer", tuple(TEXT_NAMES), default=optimizer,
                static=tuple(TEXT_NAMES), names=dict(TEXT_NAMES)),
        Control("seed", tuple(range(seeds)), default=seed, label="seed"),
    ]

    def draw(fig, sentence, optimizer, seed):
        return _draw_words(fig, sentence, optimizer, seed, result)

    a = result.arrays

    def note(sentence, optimizer, seed):
        i = int(sentence)
        s = np.asarray(a[f"attention_{optimizer}"][int(seed), i], dtype=float)
        rel = int(a["relevant"][i])
        dis = sorted({int(t) for t in np.atleast_1d(a["distractor"][i])})
        word = str(a["vocab"][int(a["words"][i][rel])])
        return (f"{TEXT_NAMES[optimizer]}, sentence {i}: {100 * s[rel]:.0f}% of the attention "
                f"on the planted word '{word}', {100 * s[dis].sum():.0f}% on the "
                f"{len(dis)} distractors.")

    ex = Explorer(draw, with_static(controls, static), name="word-attention",
                  slider="sentence", fast="optimizer", figsize=(8.0, 3.6), note=note,
                  margins=dict(left=0.19, right=0.96, bottom=0.14, top=0.84, wspace=0.62),
                  caption=WORD_CAPTION)
    return ex.show(mode)
