r"""Real review sentences rated by people, shipped with the library (chapter 10).

The corpora are two files of the VADER authors' research data (Hutto & Gilbert, ICWSM 2014;
MIT licence, in ``attnlib/datasets/`` with its ``LICENSE`` and a README that cites them):
10,605 sentences of rotten-tomatoes movie reviews (drawn from the 2,000 reviews of Pang & Lee,
2004) and 3,708 sentences of Amazon product reviews, each with the mean sentiment rating
:math:`r_i\in[-4, 4]` of at least 20 raters. Nothing is downloaded: a file whose SHA-256 does
not match the one recorded here is refused.

A sentence becomes a binary example with a stated margin :math:`m`:

.. math::

    Y_i = \mathrm{sign}(r_i)\quad\text{if } |r_i| \ge m, \qquad\text{dropped otherwise},

so near-neutral sentences, on whose sign the raters barely agree, leave the task. The split
into train, validation and test is stratified by label and disjoint. Words are lower-cased
runs of letters, digits and apostrophes (and ``!``, ``?``); the vocabulary is built from the
**training split only** (words seen at least ``min_count`` times), so no validation or test
sentence shapes it. A word-level vocabulary rather than the paper's distilbert word pieces:
it needs no tokenizer library or vocabulary file, and with a few thousand rows its embedding
fits the CPU budget of the chapter (distilbert's has 30,522). Each sequence is
``[CLS] w_1 ... w_L [PAD] ...``: position 0 is the [CLS] token whose last-layer
representation the classifier reads, as in the paper's model, and ``mask`` marks the real
tokens. See chapter 10, *Real reviews*.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch

from ._validate import choice, number
from .splits import split_indices

__all__ = ["CORPORA", "PAD", "CLS", "UNK", "PROBES", "read_corpus", "tokenize", "Vocabulary",
           "ReviewData", "review_data", "encode", "probe_batch"]

DATA_DIR = Path(__file__).parent / "datasets"
#: corpus -> (file in attnlib/datasets, SHA-256 of its uncompressed text, sentences)
CORPORA = {
    "movies": ("movie_reviews.tsv.gz",
               "c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350", 10605),
    "amazon": ("amazon_reviews.tsv.gz",
               "11a9807a0974a2506a2d3b4851eaf69b3d6d20688ce4923adda2312a4f6dd6c2", 3708),
}
PAD, CLS, UNK = 0, 1, 2  # reserved token ids
SPECIALS = ("[PAD]", "[CLS]", "[UNK]")
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[!?]")

#: The paper's 50 probe sentences (arXiv 2410.14581, attention-map table; official code
#: ``real-data/attn_map.ipynb``): (sentence, designated word, label). Three designated words
#: do not occur in their sentences; :func:`probe_batch` keeps only the usable ones.
PROBES = tuple((s, w, +1 if y else -1) for s, w, y in (
    ("The movie was fantastic", "fantastic", 1), ("I hated the movie", "hated", 0),
    ("The plot was boring", "boring", 0), ("I love this movie", "love", 1),
    ("The plot was terrible", "terrible", 0), ("This movie is great", "great", 1),
    ("The scenes were dirty", "dirty", 0), ("I'm satisfied with movie", "satisfied", 1),
    ("The DVD arrived late", "late", 0), ("The subtitles work perfectly", "perfectly", 1),
    ("The movie was disappointing", "disappointing", 0),
    ("I enjoyed the movie", "excellent", 1), ("The pacing is unreliable", "unreliable", 0),
    ("The cast were friendly", "friendly", 1), ("The script is slow", "slow", 0),
    ("The movie was great", "great", 1), ("The DVD was poor", "poor", 0),
    ("The plot was fascinating", "fascinating", 1), ("The set was sturdy", "sturdy", 1),
    ("The cinematography was ruined", "ruined", 0),
    ("The documentary was engaging", "engaging", 1), ("The DVD crashes often", "crashes", 0),
    ("The scenes were delicious", "delicious", 1), ("The DVD broke down", "broke", 0),
    ("The scenery was breathtaking", "breathtaking", 1),
    ("The service was prompt", "prompt", 1), ("The plot was predictable", "predictable", 0),
    ("The tickets overpriced", "overpriced", 0), ("The service was excellent", "excellent", 1),
    ("The projector overheats", "overheats", 0), ("The theater is scenic", "scenic", 1),
    ("The projector stopped", "stopped", 0), ("The festival was vibrant", "vibrant", 1),
    ("The popcorn runs out", "quickly", 0), ("The movie was fun", "fun", 1),
    ("The screening was delayed", "delayed", 0), ("The impact was pleasant", "pleasant", 1),
    ("The streaming is unstable", "unstable", 0), ("The snacks are fresh", "fresh", 1),
    ("The DVD cracked", "cracked", 0), ("The theater has selection", "selection", 1),
    ("The interface is difficult", "difficult", 0), ("The cinema is spacious", "spacious", 1),
    ("The equipment broke", "broke", 0), ("The staff are friendly", "friendly", 1),
    ("The seats are uncomfortable", "uncomfortable", 0),
    ("The movie was heavenly", "heavenly", 1), ("The equipment is outdated", "outdated", 0),
    ("The theater is well-kept", "happy", 1), ("The plot was confusing", "confusing", 0),
))


def read_corpus(name: str = "movies", path=None) -> tuple[list, torch.Tensor, list]:
    """The sentences of one corpus: ``(ids, ratings (N,) float64, texts)``.

    ``path`` replaces the shipped file (for tests). Raises ``ValueError`` if the uncompressed
    text's SHA-256 differs from the recorded one: a damaged or altered file is never read.
    """
    name = choice("name", name, tuple(CORPORA))
    fname, digest, _ = CORPORA[name]
    raw = gzip.decompress(Path(path or DATA_DIR / fname).read_bytes())
    got = hashlib.sha256(raw).hexdigest()
    if got != digest:
        raise ValueError(f"{fname}: SHA-256 {got} does not match the recorded {digest}; "
                         f"the file is damaged or altered")
    ids, ratings, texts = [], [], []
    for line in raw.decode("utf-8").splitlines():
        if line.strip():
            i, r, t = line.split("\t", 2)
            ids.append(i)
            ratings.append(float(r))
            texts.append(t)
    return ids, torch.tensor(ratings, dtype=torch.float64), texts


def tokenize(text: str) -> list:
    """Lower-cased words (letters, digits, one apostrophe suffix) and ``!``/``?``."""
    return _TOKEN.findall(text.lower())


@dataclass(frozen=True)
class Vocabulary:
    """Word <-> id, ids 0, 1, 2 being [PAD], [CLS], [UNK]."""

    words: tuple

    @classmethod
    def build(cls, sentences, min_count: int = 2) -> Vocabulary:
        """Words seen at least ``min_count`` times in ``sentences`` (lists of words), by
        decreasing count then alphabetically (deterministic)."""
        counts = Counter(w for s in sentences for w in s)
        kept = sorted((w for w, c in counts.items() if c >= min_count),
                      key=lambda w: (-counts[w], w))
        return cls(SPECIALS + tuple(kept))

    @cached_property
    def ids(self) -> dict:
        """Word -> id, built once per vocabulary."""
        return {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)


def encode(texts, vocab: Vocabulary, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens (N, max_len) long, mask (N, max_len) bool)``: [CLS] then the words, cut at
    ``max_len`` and padded with [PAD]; unknown words become [UNK]."""
    lookup, rows = vocab.ids, []
    for t in texts:
        words = t if isinstance(t, list) else tokenize(t)
        row = [CLS] + [lookup.get(w, UNK) for w in words[:max_len - 1]]
        rows.append(row + [PAD] * (max_len - len(row)))
    tok = torch.tensor(rows, dtype=torch.long).view(len(texts), max_len)
    return tok, tok != PAD


@dataclass(frozen=True)
class ReviewData:
    """Encoded review sentences with their labels and a disjoint stratified split.

    Attributes
    ----------
    tokens : Tensor (N, T) long
        ``[CLS]`` at position 0, then word ids, then ``[PAD]``.
    mask : Tensor (N, T) bool
        True at real tokens ([CLS] included).
    Y : Tensor (N,)
        Labels in {-1, +1}: the sign of the mean rating.
    rating : Tensor (N,) float64
        The raters' mean rating.
    words : list of list of str
        Each sentence's words (before the cut at ``T - 1``).
    vocab : Vocabulary
        Built from the training split.
    index : dict of str to Tensor
        ``"train"``, ``"val"``, ``"test"`` row indices, disjoint.
    dropped : int
        Sentences dropped by the margin.
    """

    tokens: torch.Tensor
    mask: torch.Tensor
    Y: torch.Tensor
    rating: torch.Tensor
    words: list
    vocab: Vocabulary
    index: dict = field(default_factory=dict)
    dropped: int = 0

    def part(self, name: str):
        """``(tokens, mask, Y)`` of one split."""
        i = self.index[name]
        return self.tokens[i], self.mask[i], self.Y[i]


def review_data(corpus: str = "movies", margin: float = 0.5, max_len: int = 40,
                fractions=(0.6, 0.2, 0.2), min_count: int = 2, seed: int = 0,
                vocab: Vocabulary | None = None) -> ReviewData:
    r"""Load, label, split and encode one corpus (see the module docstring).

    Parameters
    ----------
    corpus : {"movies", "amazon"}
    margin : float >= 0
        Sentences with :math:`|r_i| < m` are dropped (``margin=0`` keeps all but exact zeros).
    max_len : int
        Sequence length T, [CLS] included: longer sentences are cut.
    fractions : 3 floats
        Train/validation/test shares, stratified by label.
    min_count : int
        Words seen fewer times in the training split become [UNK].
    vocab : Vocabulary, optional
        Use this vocabulary instead (e.g. the movie vocabulary for the Amazon corpus).
    """
    margin = number("margin", margin, lo=0)
    max_len = number("max_len", max_len, lo=2, integer=True)
    min_count = number("min_count", min_count, lo=1, integer=True)
    _, rating, texts = read_corpus(corpus)
    keep = (rating.abs() >= margin) & (rating != 0)
    rating = rating[keep]
    words = [tokenize(t) for t, k in zip(texts, keep.tolist()) if k]
    Y = torch.where(rating > 0, 1.0, -1.0)
    index = split_indices(Y, fractions, seed)
    if vocab is None:
        vocab = Vocabulary.build([words[i] for i in index["train"].tolist()], min_count)
    tokens, mask = encode(words, vocab, max_len)
    return ReviewData(tokens=tokens, mask=mask, Y=Y, rating=rating, words=words, vocab=vocab,
                      index=index, dropped=int((~keep).sum()))


def probe_batch(vocab: Vocabulary, probes=PROBES, max_len: int | None = None):
    """The usable probe sentences: ``(tokens (P, T), mask, positions (P,), Y (P,), kept)``.

    A probe is usable if its designated word occurs in the sentence and is in ``vocab``
    (the analogue of the paper's rule that it be one word piece present in the sentence),
    and, with ``max_len`` (a model's longest input), if the word is within its first
    ``max_len - 1`` words (the sentences are cut there, as :func:`encode` does);
    ``positions`` is the word's position ([CLS] is 0) and ``kept`` the probes' indices.

    Raises
    ------
    ValueError
        If no probe is usable (``max_len`` named when it is the reason).
    """
    if max_len is not None:
        max_len = number("max_len", max_len, lo=2, integer=True)
    lookup, rows, pos, Y, kept = vocab.ids, [], [], [], []
    for k, (sentence, word, y) in enumerate(probes):
        w = tokenize(sentence)
        if word in w and word in lookup and (max_len is None or w.index(word) < max_len - 1):
            rows.append(w)
            pos.append(1 + w.index(word))
            Y.append(float(y))
            kept.append(k)
    if not rows:
        raise ValueError("probes: none is usable (designated word in the sentence and the "
                         "vocabulary" + (f", within max_len = {max_len} tokens" if max_len
                                         else "") + ")")
    T = 1 + max(len(w) for w in rows)
    tokens, mask = encode(rows, vocab, T if max_len is None else min(T, max_len))
    return tokens, mask, torch.tensor(pos), torch.tensor(Y), kept
