"""md_reviews at a tiny scale: its numbers are what they say (accuracy differences, weight
counts against the threshold, attention on the designated and the strongest lexicon word),
and the [CLS] attention statistic is the paper's (attnlib.experiments.mirror_reviews)."""

from __future__ import annotations

import math

import pytest
import torch

from attnlib import encoder, reviews, text
from attnlib.experiments import mirror_reviews as mr

TINY = dict(seeds=2, epochs=1, n_train=200, n_val=100, n_embd=8, n_hidden=8, max_len=16,
            progress=False, lr_md=(8e-4, 3e-3))


@pytest.fixture(scope="module")
def tiny():
    return mr.real_reviews(**TINY)


def test_numbers_are_the_differences_and_counts_they_name(tiny):
    n, a = tiny
    assert n["acc_diff_max"] == pytest.approx(n["md_max_test"] - n["gd_max_test"])
    assert n["acc_diff_last"] == pytest.approx(n["md_last_test"] - n["gd_last_test"])
    assert n["threshold"] == pytest.approx(1.2 / math.sqrt(TINY["n_embd"]))
    assert n["qkv_fewer"] == sum(n[f"md_count_{m}"] < n[f"gd_count_{m}"] for m in "QKV")
    assert n["qkv_heavier"] == sum(n[f"md_max_{m}"] > n[f"gd_max_{m}"] for m in "QKV")
    for k in mr.RUNS:
        test = a[f"test_acc_{k}"]  # (E, S)
        assert n[f"{k}_max_test"] == pytest.approx(float(test.amax(0).double().mean()))
        assert n[f"{k}_last_test"] == pytest.approx(float(test[-1].double().mean()))
    # the kept rate is the one with the best validation accuracy
    grid = a["val_grid_md"]
    assert n["md_lr"] == pytest.approx(float(a["lr_grid_md"][int(grid.argmax())]))
    assert 0 < n["n_probes"] < len(reviews.PROBES) and n["n_lexicon"] > 0


def test_cls_attention_is_the_last_block_cls_row_mean_over_heads_min_max():
    cfg = encoder.EncoderConfig(vocab_size=9, max_len=6, n_embd=6, n_blocks=2, n_head=3,
                                n_hidden=4, dropout=0.0)
    model = encoder.ReviewEncoder(cfg, seeds=(1,))
    tok = torch.tensor([[1, 4, 5, 6, 0, 0], [1, 7, 8, 3, 2, 5]])
    mask = tok != 0
    _, maps = model(tok, mask, attention=True)
    raw = maps[-1][0, :, :, 0, :].mean(1)  # (B, T): last block, [CLS] row, mean over heads
    got = encoder.cls_attention(model, tok, mask)[0]
    assert torch.allclose(got, torch.where(mask, raw, torch.zeros_like(raw)))
    nrm = encoder.cls_attention(model, tok, mask, normalize=True)[0]
    for b in range(2):
        r = raw[b, mask[b]]
        assert torch.allclose(nrm[b, mask[b]], (r - r.min()) / (r.max() - r.min()))
        assert bool((nrm[b, ~mask[b]] == 0).all())
    assert torch.allclose(raw.sum(-1), torch.ones(2))  # padding gets no attention


def test_lexicon_positions_point_at_the_strongest_word_of_the_labels_sign():
    data = reviews.review_data(max_len=16)
    rows, pos = mr.lexicon_positions(data)
    lex, ids = text.lexicon(), data.vocab.ids  # (ids: a property, built on each access)
    assert len(rows) > 100
    for i, t in zip(rows.tolist()[:300], pos.tolist()[:300]):
        w = data.vocab.words[int(data.tokens[i, t])]
        v = lex[w]
        assert abs(v) >= 2 and (v > 0) == (data.Y[i] > 0)
        others = [abs(lex.get(x, 0.0)) for x in data.words[i][:15] if x in ids]
        assert abs(v) == max(others)


def test_claims_table_marks_each_row_by_its_target_or_the_papers_bound(tiny):
    from types import SimpleNamespace

    from attnlib.experiments.registry import get
    from attnlib.figures import reviews as fr

    n, _ = tiny
    rev = SimpleNamespace(numbers=n, experiment=get("md_reviews"))
    text_ = SimpleNamespace(numbers=dict(md_mass=0.3, gd_mass=0.4, mass_diff=-0.1,
                                         acc_diff=2.0))
    dig = SimpleNamespace(numbers=dict(acc_diff=-1.2))
    svm = SimpleNamespace(numbers=dict(svm_diag_ratio=2.7))
    table = fr.claims_table(rev, text_, dig, svm).split("\n\n")[0].splitlines()
    assert len(table) == 2 + 6 and all(r.count("|") == 5 for r in table)
    ok = {t.key: t.ok(n[t.key]) for t in get("md_reviews").targets}
    acc = table[3].rstrip(" |").split("|")[-1].split("/")
    assert [m.strip() == "✓" for m in acc] == [ok["acc_diff_max"], ok["acc_diff_last"], True,
                                                 False]
    assert table[2].rstrip(" |").endswith("✗")  # the planted-word mass is below GD's
    assert "2.7×" in table[7] and table[7].rstrip(" |").endswith("✓")


def test_budget_summary_quotes_the_recorded_runs():
    from attnlib.figures import reviews as fr

    s = fr.budget_summary()
    R = mr.LONGER_RUNS
    for k in ("gd, official rate", "md, ×4", "gd, ×8, long", "md, ×4, long"):
        assert f"{R[k][5]:.1f}%" in s, k
    assert f"{R['md, ×4, long'][5] - R['gd, ×8, long'][5]:.1f} points" in s
    assert all(r[2] > 0 and 0 <= r[4] <= 100 and r[3] % 20 == 0 for r in R.values())
