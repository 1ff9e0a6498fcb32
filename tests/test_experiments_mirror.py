"""Mirror-descent experiments (attnlib.experiments.mirror) at a tiny scale.

The full-scale values are the reproduction report's business; here every experiment runs
small and its result object is checked: numbers for every target, arrays of the right shape,
a figure, and the algebra targets (T1-T5), which hold at any scale.
"""

import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from attnlib.experiments import get, mirror, run

matplotlib.use("Agg")


def _check_result(res):
    rows = res.check()  # raises if a target's number is missing
    assert [r["key"] for r in rows] == [t.key for t in get(res.name).targets]
    for r in rows:
        assert not math.isnan(r["book"]), r["key"]
    fig = res.figure() if get(res.name).plot is not None else None
    if fig is not None:
        assert fig.axes
        plt.close(fig)
    return res.numbers, res.arrays


def test_mechanics_targets_hold():
    res = run("md_mechanics", cache=False)
    rows = res.check()
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]


def test_convergence_tiny():
    res = run("md_convergence", cache=False, trials=2, steps=(300, 300, 300), records=10)
    num, arr = _check_result(res)
    assert arr["ddir_0"].shape == (3, 2, len(arr["steps_0"]))  # (q, trials, checkpoints)
    assert num["norm_violation"] <= 1e-10  # the dual-norm bound holds at any budget
    assert num["min_max_prob"] > 1 / 8  # more than uniform attention over T = 8 tokens
    assert 0 <= num["ddir_p2"] <= 2 and num["svm_min_margin"] >= 1 - 1e-6
    # the matched divergence at the end is smaller than at the start
    d = arr["ddir_1"][1].mean(0)
    assert d[-1] < d[0]
    with pytest.raises(ValueError, match="steps"):
        run("md_convergence", cache=False, trials=1, steps=(10,))


def test_bias_tiny():
    res = run("md_bias", cache=False, trials=2, steps=300)
    num, arr = _check_result(res)
    assert arr["ddir"].shape == (3, 3) and arr["rel_abs"].shape == (3, 200)
    assert num["sparsity_p1.25"] > num["sparsity_p2"]  # sparsity appears within 300 steps


def test_unnormalized_tiny():
    res = run("md_unnormalized", cache=False, trials=2, steps=100, records=10)
    num, arr = _check_result(res)
    assert arr["ddir"].shape[:2] == (3, 2) and arr["norm"].shape == arr["ddir"].shape
    assert np.all(np.diff(arr["steps"]) > 0)


def test_joint_tiny():
    res = run("md_joint", cache=False, steps=(200, 200, 200), records=20)
    num, arr = _check_result(res)
    assert arr["alpha_0"].shape == (2,) and arr["W_path_0"].shape[-2:] == (2, 2)
    assert num["loss_max"] < 0.1  # the toy is separated quickly


@pytest.mark.slow
def test_joint_selections_p175_p2():
    res = run("md_joint", cache=False, lps=(1.75, 2.0), steps=(1500, 2000))
    assert res.numbers["selection_ok"] == 1
    assert res.numbers["ddir_W_max"] <= 0.02 and res.numbers["ddir_v_max"] <= 0.01


def test_digits_tiny():
    res = run("md_digits", cache=False, steps=10, eval_every=5, seeds=2, lr_md=(0.3,),
              lr_gd=(1.0,), lr_adam=(0.01,))
    num, arr = _check_result(res)
    for k in ("md", "gd", "adam"):
        assert 0 <= num[f"{k}_test_acc"] <= 1 and arr[f"{k}_test_acc"].shape == (2,)
        assert arr[f"W_{k}"].shape == (2, 20, 20)
    assert num["sparsity_seeds"] in (0, 1, 2)


def test_imdb_table():
    table = mirror.imdb_table()
    lines = table.splitlines()
    assert len(lines) == 2 + len(mirror.PAPER_IMDB) == 11
    assert "83.47 ± 0.09" in table and "GD (ℓ2)" in table


def test_lp_norm_matches_definition():
    W = torch.randn(4, 3, 3, dtype=torch.float64)
    ref = (W.abs() ** 1.5).sum((-2, -1)) ** (1 / 1.5)
    assert torch.allclose(mirror.lp_norm(W, 1.5), ref)
