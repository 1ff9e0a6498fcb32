"""The experiments of "Transformers as SVMs" (chapters 5-8) at a tiny scale.

Each test runs one registered experiment with small settings and checks the result object:
every target's number is computed (or NaN where the tiny grid leaves it out), the arrays have
the documented shapes, the figure draws. The paper-scale values are checked by the chapters.
"""

import math

import numpy as np
import pytest
import torch

from attnlib import experiments as E
from attnlib.experiments import tf_svm


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))


def _run(name, **settings):
    res = E.run(name, cache=False, device="cpu", **settings)
    rows = res.check()
    assert len(rows) == len(E.get(name).targets) > 0
    for r in rows:
        assert isinstance(r["ok"], bool) and r["source"] in ("paper", "official code",
                                                             "re-simulation", "suggested")
    assert res.figure() is not None
    return res


def test_registered_with_chapters():
    chapters = {E.get(n).chapter for n in E.names() if E.get(n).paper.startswith("2308.16898")}
    assert chapters == {"05_w_vs_kq", "06_overparameterization", "07_nonlinear_heads",
                        "08_sequences_causal"}


def test_visualization_tiny():
    res = _run("tf_visualization", steps=300, layouts=2)
    num = res.numbers
    assert 0.9 < num["corr_W_fro"] <= 1 + 1e-12 and 0.9 < num["corr_KQ_nuc"] <= 1 + 1e-12
    S = len(res.arrays["steps"])
    assert res.arrays["path_W"].shape == (2, S, 2) and res.arrays["ray_nuc"].shape == (2, 2)
    assert res.arrays["layouts_corr_W"].shape == (2,)


def test_local_convergence_tiny():
    res = _run("tf_local_convergence", trials=3, steps=200, record_every=10)
    A, num = res.arrays, res.numbers
    assert A["corr_W_fro"].shape == (3, 21) and A["prob_KQ"].shape == (3, 21)
    # normalised GD: the norm grows by at most lr per step
    assert num["norm_W_final"] <= 0.1 * 200 + A["norm_W"][:, 0].max() + 1e-9
    for key in ("frac_global_W", "frac_local_KQ"):
        assert 0 <= num[key] <= 1
    # the aligned pairing is ahead of the cross pairing already
    assert A["corr_W_fro"][:, -1].mean() > A["corr_W_nuc"][:, -1].mean() - 0.05


def test_rank_counts_infeasible_apart():
    res = _run("tf_svm_rank", trials=3, ds=(3, 5), cells=((5, 5), (15, 5)), official_trials=2,
               progress=False)
    A, num = res.arrays, res.numbers
    assert A["fro_mean"].shape == (2, 2)
    # n=15, T=5, d=3: all infeasible -> no rank (NaN), infeasible share 1; the official
    # notebook's counting would call it rank 1
    assert A["infeasible"][1, 0] == 1 and math.isnan(A["fro_mean"][1, 0])
    assert num["artefact_n15_d3"] == 1
    assert num["fro_rank_dev_max"] <= 0.5 and num["nuc_minus_fro_max"] <= 0
    assert num["margin_err_max"] < 1e-6 and num["offspan_max"] < 1e-6
    assert A["nuc_mean"][0, 1] <= A["fro_mean"][0, 1] <= 5
    # the official solver's ranks are inflated by noise, never below the accurate ones
    assert num["official_nuc_rank_n5_d5"] >= num["nuc_rank_n5_d5"]
    assert math.isnan(num["official_nuc_rank_n10_d10"])  # not in this tiny grid


def test_feasibility_tiny():
    res = _run("tf_feasibility", trials=4, at=((3, 3, 3),), progress=False)
    num = res.numbers
    assert num["feasible_opt_at"] == 1 and num["feasible_random_at"] == 1
    assert 0 <= num["infeasible_n15_T5_d4"] <= 1 and 0 <= num["infeasible_n10_T5_d3"] <= 1


def test_global_fraction_tiny():
    res = _run("tf_global_fraction", trials=4, ds=(2, 20), steps=300, progress=False)
    A = res.arrays
    total = A["global"] + A["local_only"] + A["other"]
    np.testing.assert_allclose(total, 1.0)
    assert A["global"].shape == (1, 2) and A["cells"].tolist() == [[6, 8]]
    assert res.numbers["global_rise"] == pytest.approx(A["global"][0, -1] - A["global"][0, 0])
    assert math.isnan(res.numbers["global_d10"])  # a d left out of the sweep


@pytest.mark.slow
def test_multi_token_tiny():
    num, A = tf_svm.tf_multi_token(accepted=2, ds=(4,), steps=2001, record_every=1000,
                                   progress=False, device="cpu")
    assert num["accepted_d4"] == 2 and num["tried_d4"] >= 2
    assert 0 < num["rate_d4"] <= 1
    assert A["corr_eq"].shape == (2, 4) and A["max_masked"].shape == (2,)
    assert (A["max_masked"] <= 1e-6).all()  # accepted runs separate cleanly
    for key in ("eq_mean_d4", "dir_mean_d4", "one_mean_d4"):
        assert 0 <= num[key] <= 2
    rows = {r["key"]: r for r in E.Result("tf_multi_token", {}, num).check()}
    assert math.isnan(rows["eq_mean_d10"]["book"]) and not rows["eq_mean_d10"]["ok"]


def test_causal_tiny():
    res = _run("tf_causal", trials=2, n=2, T=4, d=10, steps=300)
    num, A = res.numbers, res.arrays
    assert A["corr_causal"].shape == (2, 16)
    assert num["corr_causal_final"] > 0.9 and num["corr_full_final"] > 0.9
    assert 0 <= num["opt_share_causal"] <= 1


def test_official_nuclear_rank_is_noisy_upper_bound():
    from attnlib.data import random_data
    from attnlib.svm import att_svm
    from attnlib.tokens import optimal_tokens

    data = random_data(5, 5, 5, trials=2, seed=4, device="cpu")
    alpha = optimal_tokens(data)
    official = tf_svm._official_nuclear_rank(data, alpha)
    accurate = torch.linalg.matrix_rank(att_svm(data, alpha=alpha, norm="nuc"), rtol=1e-6)
    assert (official >= accurate.numpy()).all()


@pytest.mark.slow
def test_causal_explorer_both_modes():
    live = tf_svm.causal_explorer(n=1, T=3, d=4, steps=200, mode="live")
    before = live.figure.axes[0].get_title()
    live.update(iterations=100, attention="bidirectional")
    assert live.figure.axes[0].get_title() != before  # the figure follows the controls
    static = tf_svm.causal_explorer(n=1, T=3, d=4, steps=200, mode="static")
    assert "<" in static._repr_html_()


def test_recorded_paper_scale_multi_token():
    res = tf_svm.recorded("tf_multi_token")
    assert res.params["accepted"] == 500 and res.cached
    for d in (4, 6, 8, 10):
        assert res.numbers[f"accepted_d{d}"] == 500
        assert res.numbers[f"tried_d{d}"] >= 500  # every trained candidate is counted
    assert len(res.check()) == len(E.get("tf_multi_token").targets)
    with pytest.raises(ValueError, match="no recorded result"):
        tf_svm.recorded("tf_nothing")
