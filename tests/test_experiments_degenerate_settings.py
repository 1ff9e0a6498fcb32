"""Allowed settings at their edges compute or are refused by name; skipped steps reach the status.

- ``tf_rank_cap`` at T = 1 (no token competes: no margin, W = 0) is refused naming T, and its
  rank-capped oracle answers W = 0 for an instance without margins;
- ``tf_lambda_head`` keeps λ where the best attention has two tokens and steps where gradient
  descent has dropped one (its SVM equivalence needs a masked token), and the run itself says
  "steps: ..." when every token is still selected;
- ``md_reviews`` refuses a ``max_len`` that cuts the probe sentences before loading the data;
  the probes and the encoder refuse or cut longer inputs by name;
- ``md_reviews``'s status counts the training steps skipped for a non-finite gradient (Adam's
  included: it would write NaN), and ``reproduce --strict`` fails on it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnlib.experiments as E
from attnlib import encoder, encoder_fit, reviews
from attnlib.cli import main
from attnlib.experiments.settings import SettingError
from attnlib.experiments.tf_svm_heads import fin_rows
from attnlib.experiments.tf_svm_rankcap import capped_svm

TINY = dict(seeds=1, epochs=1, n_train=40, n_val=20, n_embd=4, n_blocks=1, n_head=1,
            n_hidden=4, batch=20, max_len=8, progress=False)


def test_tf_rank_cap_needs_a_competing_token():
    with pytest.raises(SettingError, match="setting T expects an int >= 2"):
        E.run("tf_rank_cap", cache=False, T=1)
    W, value = capped_svm(np.ones((1, 1, 3)), np.ones((1, 3)), [0], m=1)
    assert value == 0.0 and np.array_equal(W, np.zeros((3, 3)))


def test_tf_lambda_head_bounds_and_the_run_names_steps():
    for bad in (dict(lam=0.1), dict(lam=0.71), dict(steps=199)):
        with pytest.raises(SettingError, match=f"setting {next(iter(bad))} "):
            E.run("tf_lambda_head", cache=False, **bad)
    with pytest.raises(ValueError, match=r"^steps: after 1 steps .* selects every token"):
        E.get("tf_lambda_head").func(steps=1)  # past the settings check: the run's own words


def test_fin_rows_of_singletons_is_empty_not_a_crash():
    X, z = torch.randn(2, 3, 4, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    O = torch.zeros(2, 3, dtype=torch.bool)
    O[:, 0] = True
    assert fin_rows(X, z, O).shape == (0, 16)


def test_md_reviews_refuses_a_short_max_len_before_loading(monkeypatch):
    def no_data(*a, **k):
        raise AssertionError("the data were loaded")

    monkeypatch.setattr(reviews, "review_data", no_data)
    with pytest.raises(SettingError, match="setting max_len expects an int >= 5"):
        E.run("md_reviews", cache=False, **{**TINY, "max_len": 4})


def test_probes_cut_at_max_len_and_the_encoder_names_it():
    words = [reviews.tokenize(s) for s, _, _ in reviews.PROBES]
    vocab = reviews.Vocabulary.build(words, min_count=1)
    full = reviews.probe_batch(vocab)
    cut = reviews.probe_batch(vocab, max_len=3)
    assert cut[0].shape[1] == 3 and int(cut[2].max()) <= 2 and 0 < len(cut[4]) < len(full[4])
    with pytest.raises(ValueError, match="max_len = 2"):
        reviews.probe_batch(vocab, max_len=2)  # every designated word is past the first
    cfg = encoder.EncoderConfig(vocab_size=len(vocab), max_len=3, n_embd=2, n_blocks=1,
                                n_head=1, n_hidden=2)
    model = encoder.ReviewEncoder(cfg)
    assert model(cut[0], cut[1]).shape == (1, len(cut[4]))
    with pytest.raises(ValueError, match="max_len = 3"):
        model(full[0], full[1])


def _nan_for_last_member(monkeypatch):
    """Adam (the last run, one seed: the last member) gets a NaN loss from the second step."""
    orig, calls = encoder_fit.bce_sum, []

    def bce(f, Y):
        calls.append(1)
        out = orig(f, Y)
        if len(calls) > 1:
            w = torch.ones_like(out)
            w[-1] = float("nan")
            out = out * w
        return out

    monkeypatch.setattr(encoder_fit, "bce_sum", bce)


def test_md_reviews_status_counts_skipped_steps(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path / "cache"))
    res = E.run("md_reviews", cache=False, **TINY)
    assert res.status.ok and res.status.runs == 4 and res.numbers["skipped_steps"] == 0
    _nan_for_last_member(monkeypatch)
    with pytest.warns(RuntimeWarning, match="fit_encoder: step 1 of member 3 skipped"):
        res = E.run("md_reviews", cache=False, **TINY)
    assert not res.status.ok and res.status.nonfinite == 1 and res.status.first_nonfinite == 1
    assert "adam/0 seed 0: at least 1 step(s) skipped, the first at step 1" in str(res.status)
    assert res.numbers["skipped_steps"] == 1
    # the skipped member keeps finite weights: Adam never saw the NaN gradient
    assert res.numbers["adam_max_Q"] == res.numbers["adam_max_Q"]


def test_reproduce_strict_fails_on_md_reviews_skipped_steps(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path / "cache"))
    sets = [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]
    args = ["reproduce", "md_reviews", *sets, "--no-cache", "--no-figure",
            "--out", str(tmp_path / "out")]
    _nan_for_last_member(monkeypatch)
    with pytest.warns(RuntimeWarning):
        code = main(args + ["--strict"])
    out = capsys.readouterr().out
    assert code == 1 and "non-finite or stalled training: md_reviews (not ok: 1 of 4" in out


def test_declared_string_choices_are_the_tables_the_runs_read():
    from attnlib.attention import LOSSES
    from attnlib.experiments.max_margin_measures import SELECTION_POSITIONS, TOKEN_EXAMPLES

    choices = {(n, k): E.get(n).settings[k].choices for n, k in (
        ("mm_ray_risk", "loss"), ("mm_token_plane", "loss"), ("mm_token_plane", "example"),
        ("mm_selection", "position"), ("md_text", "query"))}
    assert choices == {("mm_ray_risk", "loss"): LOSSES, ("mm_token_plane", "loss"): LOSSES,
                       ("mm_token_plane", "example"): tuple(TOKEN_EXAMPLES),
                       ("mm_selection", "position"): tuple(SELECTION_POSITIONS),
                       ("md_text", "query"): ("mean", "cls")}
