r"""Offline sentences of real words with one planted sentiment word (chapter 10).

The words come from the VADER sentiment lexicon (Hutto & Gilbert, 2014), the file
``vader_lexicon.txt`` shipped inside the ``vaderSentiment`` wheel (MIT licence): 7,520 lines
(7,506 distinct entries), each the mean of ten human valence ratings on a -4 to +4 scale.
Nothing is downloaded. From its English words (:func:`english_words`: the emoticons and
internet abbreviations that open the file are dropped) we draw, with a seed,

- *strong* words, :math:`|\text{valence}| \ge 2` (e.g. "wonderful" 2.7, "horrible" -2.5), half
  positive and half negative;
- *weak* words, :math:`0.5 \le |\text{valence}| \le 1.5` (e.g. "okay" 0.9, "doubt" -1.5), the
  distractors;
- *neutral* words, :math:`|\text{valence}| \le 0.3`, rated neutral by the raters, completed by
  the English function words of :data:`FUNCTION_WORDS` (written here; VADER rates no function
  word), the filler.

Each sentence has T words: one strong word at a uniformly random position, k weak words of the
*opposite* polarity at other positions (the distractors), and filler elsewhere. The label is the
polarity of the strong word, :math:`Y_i = \mathrm{sign}(\text{valence}(w_{i,r_i}))`, so the
relevant token :math:`r_i` of every sentence is known: this is a planted-keyword setting
with real vocabulary. The sentences are not grammatical; they are bags of real
words in random order.

Each word gets a fixed embedding :math:`e_w = (\text{valence}_w/4,\ g_w)`: its first coordinate
is the human rating (scaled to [-1, 1]), the other m - 1 are a random code
:math:`g_w \sim N(0, I_{m-1}/m)` (a seeded ``torch.Generator``) that tells the words apart. The
token of word :math:`w` is :math:`x = e_w` (no position: the planted word's position carries no
information), and the query is the mean token :math:`z_i = \frac1T\sum_t x_{it}` or a constant
[CLS] token. The head is fixed, :math:`v = c\,e_1` (it reads the rating; ``head_scale`` c), and
only W is trained, the setting of the theory: the token scores are
:math:`\gamma_{it} = Y_i v^\top x_{it} = c\,Y_i\,\text{valence}_{it}/4`, so the planted strong
word is the globally optimal token of every sentence (:math:`\gamma \ge c/2`, against
:math:`\gamma < 0` for the distractors and :math:`|\gamma| \le 0.08c` for the filler). With
k = 3 distractors the mean rating of a sentence often has the wrong sign, so uniform attention
misclassifies: the classifier must *select* the planted word. The model is the book's one-layer
classifier :math:`f(X_i) = v^\top X_i^\top\mathrm{softmax}(X_i W z_i)`
(:class:`attnlib.realdata.AttentionClassifier`, trained with :func:`attnlib.realdata.fit`).

See chapter 10, "Mirror descent on real data".
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import torch

from ._validate import choice, number
from .splits import SplitViews, split_indices

__all__ = ["FUNCTION_WORDS", "lexicon", "word_pools", "TextSplits", "sentiment_sentences",
           "attention", "relevant_attention", "outputs", "english_words"]

FUNCTION_WORDS = (
    "the", "a", "an", "this", "that", "these", "those", "it", "its", "he", "she", "they",
    "we", "you", "his", "her", "their", "our", "my", "your", "of", "in", "on", "at", "to",
    "for", "with", "from", "by", "about", "into", "over", "after", "before", "during",
    "and", "or", "but", "so", "as", "than", "then", "when", "while", "where", "which",
    "who", "what", "is", "was", "are", "were", "be", "been", "has", "had", "have", "will",
    "would", "could", "should", "there", "here", "some", "all", "one", "two", "more", "most",
    "very", "just", "also", "still", "only", "again", "each", "every", "other", "such",
)
"""Common English function words: filler that the lexicon does not rate (none is in it)."""

_WORD = re.compile(r"[a-z]{3,}")
#: the first entry of the lexicon's dictionary part: the file lists emoticons and internet
#: abbreviations ("lol", "tgif", "jealz") first, then English words in alphabetical order
_FIRST_WORD = "abandon"


@functools.lru_cache(maxsize=1)
def lexicon() -> dict:
    """The VADER lexicon: ``{entry: mean human valence}``, 7,506 distinct entries (-4 to +4).

    Read from ``vader_lexicon.txt`` inside the installed ``vaderSentiment`` package (lines
    ``token<TAB>mean<TAB>std<TAB>[ten ratings]``), in the file's order; nothing is downloaded.
    """
    from importlib import resources

    try:
        path = resources.files("vaderSentiment").joinpath("vader_lexicon.txt")
    except ModuleNotFoundError:
        raise ImportError("the sentiment data need the package vaderSentiment "
                          "(pip install vaderSentiment==3.3.2)") from None
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            out[parts[0]] = float(parts[1])
    return out


def english_words() -> dict:
    """``{word: valence}`` of the lexicon's English words: the dictionary part of the file
    (from "abandon" on: emoticons and internet slang come before it), alphabetic, lowercase,
    at least three letters; the 7,506 entries give 7,030 words."""
    lex = lexicon()
    entries = list(lex)
    if _FIRST_WORD not in lex:
        raise ValueError(f"vader_lexicon.txt: expected the entry {_FIRST_WORD!r} (version 3.3.2)")
    return {w: lex[w] for w in entries[entries.index(_FIRST_WORD):] if _WORD.fullmatch(w)}


def word_pools(n_strong: int = 40, n_weak: int = 40, n_neutral: int = 60,
               seed: int = 0) -> dict:
    """Seeded word lists drawn from the lexicon.

    Parameters
    ----------
    n_strong, n_weak : int
        Number of strong (``|valence| >= 2``) and weak (``0.5 <= |valence| <= 1.5``) words of
        *each* polarity.
    n_neutral : int
        Number of lexicon words rated ``|valence| <= 0.3`` added to :data:`FUNCTION_WORDS`.
    seed : int
        Seed of the draw (a ``torch.Generator``); candidates are sorted first, so the pools
        depend only on the lexicon and the seed.

    Returns
    -------
    dict of str to tuple of str
        ``"positive"``, ``"negative"`` (strong), ``"weak_positive"``, ``"weak_negative"`` and
        ``"filler"`` (function words first).
    """
    sizes = dict(n_strong=n_strong, n_weak=n_weak, n_neutral=n_neutral)
    for k, v in sizes.items():
        number(k, v, lo=1 if k == "n_strong" else 0, integer=True)
    lex = {w: v for w, v in english_words().items() if w not in FUNCTION_WORDS}
    rules = {
        "positive": (lambda v: v >= 2.0, n_strong),
        "negative": (lambda v: v <= -2.0, n_strong),
        "weak_positive": (lambda v: 0.5 <= v <= 1.5, n_weak),
        "weak_negative": (lambda v: -1.5 <= v <= -0.5, n_weak),
        "neutral": (lambda v: abs(v) <= 0.3, n_neutral),
    }
    gen = torch.Generator().manual_seed(int(seed))
    pools = {}
    for name, (rule, k) in rules.items():
        cand = sorted(w for w, v in lex.items() if rule(v))
        if k > len(cand):
            raise ValueError(f"{name}: expected at most {len(cand)} words, got {k}")
        pick = torch.randperm(len(cand), generator=gen)[:k]
        pools[name] = tuple(sorted(cand[i] for i in pick.tolist()))
    pools["filler"] = FUNCTION_WORDS + pools.pop("neutral")
    return pools


@dataclass(frozen=True)
class TextSplits(SplitViews):
    """Sentences as token sequences, with a train/validation/test split.

    The same interface as :class:`attnlib.realdata.DigitSplits` (``X``, ``Y``, ``z``,
    ``index``, ``part``, ``d``), so :func:`attnlib.realdata.fit` trains on it.

    Attributes
    ----------
    X : Tensor (N, T, d)
        Word embeddings of every sentence (with a leading [CLS] token for ``query="cls"``).
    Y : Tensor (N,)
        Labels in {-1, +1}: the polarity of the planted strong word.
    z : Tensor (N, d)
        Query tokens.
    words : Tensor (N, T) of int
        Index of each token's word in ``vocab`` (the [CLS] token is ``-1``).
    relevant : Tensor (N,) of int
        Position of the planted strong word (the relevant token).
    distractor : Tensor (N, k) of int
        Positions of the k weak opposite-polarity words.
    v : Tensor (d,)
        The fixed head, :math:`c` times the indicator of the rating coordinate.
    vocab : tuple of str
        The words; ``valence`` (V,) holds their lexicon ratings (0 for function words).
    index : dict of str to Tensor
        Integer indices of the ``"train"``, ``"val"`` and ``"test"`` sentences.
    """

    X: torch.Tensor
    Y: torch.Tensor
    z: torch.Tensor
    words: torch.Tensor
    relevant: torch.Tensor
    distractor: torch.Tensor
    v: torch.Tensor
    vocab: tuple
    valence: torch.Tensor
    index: dict = field(default_factory=dict)

    def sentence(self, i: int) -> list:
        """The words of sentence ``i`` (``"[CLS]"`` for the query token)."""
        return ["[CLS]" if w < 0 else self.vocab[w] for w in self.words[int(i)].tolist()]


def sentiment_sentences(n: int = 1000, T: int = 12, dim: int = 64, distractors: int = 3,
                        query: str = "mean", n_strong: int = 20, n_weak: int = 20,
                        n_neutral: int = 20, head_scale: float = 4.0,
                        fractions=(0.5, 0.25, 0.25), seed: int = 0, device=None,
                        dtype=torch.float32) -> TextSplits:
    r"""Sentences of real words with one planted sentiment word, split train/val/test.

    Parameters
    ----------
    n : int
        Number of sentences (half positive, half negative).
    T : int
        Words per sentence (the [CLS] token, if any, comes in addition).
    dim : int
        Dimension m of the fixed word embeddings: the rating and m - 1 random coordinates
        (``d = m``, or ``m + 1`` with [CLS]).
    distractors : int
        Number of weak words of the opposite polarity planted too (at distinct positions).
    query : {"mean", "cls"}
        ``"mean"``: z_i is the mean token. ``"cls"``: a [CLS] token with its own indicator
        coordinate is prepended and z_i is that token (the paper's IMDb read-out).
    n_strong, n_weak, n_neutral
        Sizes of the word pools (:func:`word_pools`).
    head_scale : float
        c in the fixed head :math:`v = c\,e_1` (the rating coordinate).
    fractions : tuple of 3 floats
        Train/validation/test shares (stratified by label, :func:`attnlib.realdata.split_indices`).
    seed : int
        One seed for the pools, the embeddings, the sentences and the split.
    """
    n = number("n", n, lo=6, integer=True)
    distractors = number("distractors", distractors, lo=0, integer=True)
    T = number("T", T, lo=2 + distractors, integer=True)
    dim = number("dim", dim, lo=2, integer=True)
    head_scale = number("head_scale", head_scale, lo=0, lo_open=True)
    query = choice("query", query, ("mean", "cls"))
    pools = word_pools(n_strong, n_weak, n_neutral, seed)
    vocab = tuple(w for k in ("positive", "negative", "weak_positive", "weak_negative",
                              "filler") for w in pools[k])
    lex = lexicon()
    valence = torch.tensor([lex.get(w, 0.0) for w in vocab], dtype=torch.float64)
    start, offset = {}, 0  # first vocabulary index of each pool
    for k in ("positive", "negative", "weak_positive", "weak_negative", "filler"):
        start[k], offset = offset, offset + len(pools[k])
    g = torch.Generator().manual_seed(int(seed) + 1)
    code = torch.randn(len(vocab), dim - 1, generator=g, dtype=torch.float64) / dim ** 0.5
    E = torch.cat([valence[:, None] / 4, code], dim=1)  # (V, m): rating, random code

    def draw(pool, size):  # uniform word indices of one pool, (size,)
        return start[pool] + torch.randint(len(pools[pool]), size, generator=g)

    Y = torch.where(torch.arange(n) % 2 == 0, 1.0, -1.0)[torch.randperm(n, generator=g)]
    pos = Y > 0
    words = draw("filler", (n, T))  # (n, T)
    order = torch.rand(n, T, generator=g).argsort(-1)  # random distinct positions per row
    relevant = order[:, 0]
    strong = torch.where(pos, draw("positive", (n,)), draw("negative", (n,)))
    words[torch.arange(n), relevant] = strong
    dpos = order[:, 1:1 + distractors]  # (n, k)
    weak = torch.where(pos[:, None], draw("weak_negative", (n, distractors)),
                       draw("weak_positive", (n, distractors)))
    words.scatter_(1, dpos, weak)
    X = E[words]  # (n, T, m)
    v = torch.zeros(dim + (query == "cls"), dtype=torch.float64)
    v[int(query == "cls")] = head_scale  # reads the rating coordinate
    if query == "cls":
        X = torch.cat([torch.zeros(n, T, 1, dtype=X.dtype), X], dim=-1)
        cls = torch.zeros(n, 1, dim + 1, dtype=X.dtype)
        cls[..., 0] = 1.0
        X = torch.cat([cls, X], dim=1)
        z = X[:, 0]
        words = torch.cat([torch.full((n, 1), -1), words], dim=1)
        relevant, dpos = relevant + 1, dpos + 1
    else:
        z = X.mean(dim=1)
    index = split_indices(Y, fractions, seed)
    dev = torch.device(device) if device is not None else None
    return TextSplits(X=X.to(dev, dtype), Y=Y.to(dev, dtype), z=z.to(dev, dtype),
                      words=words.to(dev), relevant=relevant.to(dev), distractor=dpos.to(dev),
                      v=v.to(dev, dtype), vocab=vocab, valence=valence,
                      index={k: i.to(dev) for k, i in index.items()})


def attention(W, X, z):
    r"""Softmax attention :math:`s_{bit} = \mathrm{softmax}_t(x_{it}^\top W_b z_i)`, (B, N, T).

    Parameters
    ----------
    W : Tensor (B, d, d)
    X, z : Tensor (N, T, d), (N, d)
    """
    a = torch.einsum("ntd,bde,ne->bnt", X, W, z)  # (B, N, T)
    return torch.softmax(a, dim=-1)


def relevant_attention(s, relevant):
    r"""Mean attention on the relevant token and its top-1 hit rate, per model.

    .. math::

        \mathrm{mass}_b = \frac1N\sum_i s_{b,i,r_i}, \qquad
        \mathrm{hit}_b = \frac1N\sum_i [\arg\max_t s_{bit} = r_i]

    Parameters
    ----------
    s : Tensor (B, N, T)
        Attention of B models on N sentences.
    relevant : Tensor (N,) of int
        Position :math:`r_i` of the relevant token.

    Returns
    -------
    (Tensor (B,), Tensor (B,))
    """
    s = torch.as_tensor(s)
    relevant = torch.as_tensor(relevant, device=s.device).long()
    if s.ndim != 3 or relevant.shape != s.shape[1:2]:
        raise ValueError(f"s must be (B, N, T) and relevant (N,), got {tuple(s.shape)} and "
                         f"{tuple(relevant.shape)}")
    idx = relevant[None, :, None].expand(s.shape[0], -1, 1)  # (B, N, 1)
    mass = s.gather(-1, idx).squeeze(-1).mean(-1)
    hit = (s.argmax(-1) == relevant).to(s.dtype).mean(-1)
    return mass, hit


def outputs(W, v, X, z):
    r"""Classifier outputs :math:`f_{bi} = \sum_t s_{bit}\, v^\top x_{it}`, (B, N).

    Parameters
    ----------
    W : Tensor (B, d, d)
    v : Tensor (d,) or (B, d)
        The head (shared by every model, or one per model).
    X, z : Tensor (N, T, d), (N, d)
    """
    values = X @ (v.T if v.ndim == 2 else v[:, None])  # (N, T, B or 1)
    return (attention(W, X, z) * values.permute(2, 0, 1)).sum(-1)
