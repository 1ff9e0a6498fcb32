"""attnlib.text: the planted-sentiment sentences and their token-selection metrics.

Oracles: the lexicon file parsed here line by line (not through attnlib), and plain loops over
models, sentences and tokens.
"""

from importlib import resources

import pytest
import torch

from attnlib import text


def _vader_file():
    """{token: valence} parsed directly from the wheel's file, in file order."""
    path = resources.files("vaderSentiment").joinpath("vader_lexicon.txt")
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            token, mean = line.rstrip("\r\n").split("\t")[:2]
            out[token] = float(mean)
    return out


@pytest.fixture(scope="module")
def data():
    return text.sentiment_sentences(n=300, T=10, dim=16, distractors=2, seed=3)


def test_lexicon_matches_the_file():
    raw = _vader_file()
    assert len(raw) == 7506  # 7,520 lines, 14 tokens twice (the last wins)
    assert text.lexicon() == raw
    words = text.english_words()
    assert "lol" not in words and "tgif" not in words  # internet slang precedes "abandon"
    assert words["horrible"] == raw["horrible"] < -2 and words["wonderful"] > 2


def test_builder_is_deterministic(data):
    again = text.sentiment_sentences(n=300, T=10, dim=16, distractors=2, seed=3)
    for name in ("X", "Y", "z", "words", "relevant", "distractor", "v"):
        assert torch.equal(getattr(data, name), getattr(again, name)), name
    assert data.vocab == again.vocab
    other = text.sentiment_sentences(n=300, T=10, dim=16, distractors=2, seed=4)
    assert not torch.equal(data.words, other.words)


def test_labels_follow_the_planted_word(data):
    raw = _vader_file()
    n_pos = 0
    for i in range(len(data.Y)):
        words = data.sentence(i)
        r = int(data.relevant[i])
        val = raw[words[r]]
        assert abs(val) >= 2.0 and (val > 0) == (data.Y[i] > 0), (i, words[r], val)
        n_pos += val > 0
        dis = {int(t) for t in data.distractor[i]}
        assert len(dis) == 2 and r not in dis
        for t, w in enumerate(words):
            if t in dis:  # weak word of the opposite polarity
                assert 0.5 <= abs(raw[w]) <= 1.5 and (raw[w] > 0) != (val > 0), (i, w)
            elif t != r:  # filler: a function word or a word rated neutral
                assert w in text.FUNCTION_WORDS or abs(raw[w]) <= 0.3, (i, w)
    assert n_pos == len(data.Y) // 2  # balanced


def test_embedding_carries_the_rating_and_the_head_reads_it(data):
    raw = _vader_file()
    for i in range(5):
        for t, w in enumerate(data.sentence(i)):
            assert data.X[i, t, 0].item() == pytest.approx(raw.get(w, 0.0) / 4, abs=1e-6)
    assert data.v[0] == 4.0 and data.v[1:].abs().max() == 0
    assert torch.allclose(data.z, data.X.mean(1))
    # the planted word is the globally optimal token: highest score Y v^T x in every sentence
    gamma = data.Y[:, None] * (data.X @ data.v)  # (N, T)
    assert torch.equal(gamma.argmax(-1), data.relevant)


def test_uniform_attention_misclassifies():
    """With three opposite distractors the mean rating often has the wrong sign: the classifier
    must select the planted word (what the chapter claims of the task)."""
    d = text.sentiment_sentences(n=400, seed=0)
    f = d.X.mean(1) @ d.v  # uniform attention
    wrong = ((f > 0) != (d.Y > 0)).double().mean()
    assert wrong > 0.3


def test_cls_query(data):
    d = text.sentiment_sentences(n=40, T=6, dim=8, distractors=1, query="cls", seed=1)
    assert d.X.shape == (40, 7, 9) and d.sentence(0)[0] == "[CLS]"
    assert torch.equal(d.z, d.X[:, 0]) and d.v[1] == 4.0
    gamma = d.Y[:, None] * (d.X @ d.v)
    assert torch.equal(gamma.argmax(-1), d.relevant)


def test_relevant_attention_against_a_loop():
    g = torch.Generator().manual_seed(0)
    s = torch.softmax(torch.randn(3, 20, 7, generator=g), -1)
    s[1, 4] = torch.tensor([0.0, 0.5, 0.5, 0, 0, 0, 0])  # a tie: argmax takes the first
    rel = torch.randint(7, (20,), generator=g)
    mass, hit = text.relevant_attention(s, rel)
    for b in range(3):
        m = sum(float(s[b, i, rel[i]]) for i in range(20)) / 20
        h = sum(int(max(range(7), key=lambda t: float(s[b, i, t])) == rel[i]) for i in range(20))
        assert mass[b].item() == pytest.approx(m, abs=1e-6)
        assert hit[b].item() == pytest.approx(h / 20)
    with pytest.raises(ValueError, match="relevant"):
        text.relevant_attention(s, rel[:5])


def test_attention_and_outputs_against_a_loop(data):
    g = torch.Generator().manual_seed(1)
    W = torch.randn(2, data.d, data.d, generator=g)
    X, z = data.X[:6], data.z[:6]
    s, f = text.attention(W, X, z), text.outputs(W, data.v, X, z)
    for b in range(2):
        for i in range(6):
            a = torch.tensor([float(X[i, t] @ W[b] @ z[i]) for t in range(data.T)])
            p = torch.softmax(a, 0)
            assert torch.allclose(s[b, i], p, atol=1e-5)
            assert f[b, i].item() == pytest.approx(float(sum(p[t] * (X[i, t] @ data.v)
                                                             for t in range(data.T))), abs=1e-5)


def test_bad_input():
    with pytest.raises(ValueError, match="T"):
        text.sentiment_sentences(n=20, T=3, distractors=3)
    with pytest.raises(ValueError, match="query"):
        text.sentiment_sentences(n=20, query="max")
    with pytest.raises(ValueError, match="positive"):
        text.word_pools(n_strong=100000)
