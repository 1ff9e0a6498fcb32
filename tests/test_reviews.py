"""The shipped review corpora: checksum, labels with a margin, a disjoint stratified split,
a training-only vocabulary, [CLS] and padding (attnlib.reviews)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import torch

from attnlib import reviews

DATA = Path(reviews.__file__).parent / "datasets"


def _lines(name):
    """An independent reading of the shipped file: (rating, text) per non-empty line."""
    raw = gzip.open(DATA / reviews.CORPORA[name][0], "rt", encoding="utf-8").read()
    return [(float(r), t) for _, r, t in (ln.split("\t", 2) for ln in raw.splitlines() if ln)]


@pytest.fixture(scope="module")
def movies():
    return reviews.review_data("movies", margin=0.5)


@pytest.mark.parametrize("name", list(reviews.CORPORA))
def test_corpus_has_its_documented_size_and_licence(name):
    ids, rating, texts = reviews.read_corpus(name)
    assert len(ids) == len(texts) == len(rating) == reviews.CORPORA[name][2]
    assert rating.abs().max() <= 4 and len(set(ids)) == len(ids)
    licence = (DATA / "LICENSE").read_text()
    assert "MIT" in licence and "Hutto" in licence


def test_margin_drops_exactly_the_near_neutral_sentences(movies):
    rows = _lines("movies")
    kept = [r for r, _ in rows if abs(r) >= 0.5]
    assert len(movies.Y) == len(kept) and movies.dropped == len(rows) - len(kept)
    assert torch.equal(movies.rating, torch.tensor(kept, dtype=torch.float64))
    assert torch.equal(movies.Y, torch.sign(movies.rating).float())
    assert bool((movies.rating.abs() >= 0.5).all())


def test_splits_are_disjoint_cover_everything_and_are_stratified(movies):
    parts = [set(movies.index[k].tolist()) for k in ("train", "val", "test")]
    assert sum(len(p) for p in parts) == len(movies.Y) == len(set.union(*parts))
    share = float((movies.Y > 0).double().mean())
    for k, f in zip(("train", "val", "test"), (0.6, 0.2, 0.2)):
        y = movies.Y[movies.index[k]]
        assert abs(len(y) / len(movies.Y) - f) < 0.002
        assert abs(float((y > 0).double().mean()) - share) < 0.005


def test_vocabulary_comes_from_the_training_split_only(movies):
    from collections import Counter
    train = Counter(w for i in movies.index["train"].tolist() for w in movies.words[i])
    held = {w for k in ("val", "test") for i in movies.index[k].tolist() for w in movies.words[i]}
    assert set(movies.vocab.words[3:]) == {w for w, c in train.items() if c >= 2}
    assert any(w not in train for w in held)  # words only held-out sentences use ...
    ids = movies.vocab.ids  # (a property: the dict is built on each access)
    assert not any(w in ids for w in held - set(train))  # ... are not in it


def test_cls_first_then_words_then_padding(movies):
    ids = movies.vocab.ids
    for i in (0, 7, 123):
        w = movies.words[i][:movies.tokens.shape[1] - 1]
        row = movies.tokens[i]
        assert row[0] == reviews.CLS and int(movies.mask[i].sum()) == 1 + len(w)
        assert row[1:1 + len(w)].tolist() == [ids.get(x, reviews.UNK) for x in w]
        assert bool((row[1 + len(w):] == reviews.PAD).all())
    assert torch.equal(movies.mask, movies.tokens != reviews.PAD)


def test_a_tampered_file_is_refused(tmp_path):
    raw = gzip.open(DATA / reviews.CORPORA["movies"][0]).read()
    bad = raw.replace(b"\t2.26666666667\t", b"\t-2.26666666667\t", 1)
    assert bad != raw
    (tmp_path / "m.gz").write_bytes(gzip.compress(bad))
    with pytest.raises(ValueError, match="SHA-256"):
        reviews.read_corpus("movies", path=tmp_path / "m.gz")
    (tmp_path / "ok.gz").write_bytes(gzip.compress(raw))  # recompressed, same text: accepted
    assert len(reviews.read_corpus("movies", path=tmp_path / "ok.gz")[0]) == 10605


def test_probe_batch_points_at_the_designated_word(movies):
    tokens, mask, pos, Y, kept = reviews.probe_batch(movies.vocab)
    assert len(kept) == len(pos) == len(Y) and 0 < len(kept) < len(reviews.PROBES)
    for row, p, k in zip(tokens, pos, kept):
        sentence, word, y = reviews.PROBES[k]
        assert row[0] == reviews.CLS and movies.vocab.words[int(row[p])] == word
    # the three probes whose designated word is not in the sentence are never usable
    assert not {11, 33, 48} & set(kept)
