"""attnlib.experiments.result: run (cached), Result's checks, figure, files."""

import numpy as np
import pytest
import torch
from experiment_fakes import CALLS, dummy, fakes  # noqa: F401  (fixtures)

from attnlib import experiments


def test_run_checks_targets_and_caches(dummy):  # noqa: F811
    res = experiments.run(dummy)
    assert res.numbers == {"mean": 10.0, "seed": 0} and not res.cached and res.passed
    rows = res.verdicts()
    assert [r["key"] for r in rows] == ["mean", "seed"]
    assert rows[0]["note"] == "a test row" and rows[0]["source"] == "re-simulation"
    again = experiments.run(dummy)
    assert again.cached and again.numbers == res.numbers and len(CALLS) == 1
    assert again.params == res.params and again.params["sizes"] == (1, 2)
    np.testing.assert_array_equal(again.arrays["x"], res.arrays["x"])
    assert not experiments.run(dummy, cache=False).cached and len(CALLS) == 2
    assert experiments.run(dummy, progress=False).cached  # progress is not part of the key
    # the same values in other Python types: the same entry
    assert experiments.run(dummy, steps=np.int64(10), scale=torch.tensor(1), sizes=[1, 2]).cached
    other = experiments.run(dummy, steps=20)  # other settings: another entry, target missed
    assert len(CALLS) == 3 and CALLS[-1]["steps"] == 20 and not other.passed
    assert "✗ mean equals steps" in other.summary() and "steps=20" in other.summary()
    assert "✓ seed is zero" in other.summary()


def test_a_target_not_computed_is_a_miss_not_a_crash(dummy):  # noqa: F811
    res = experiments.run(dummy)
    res.numbers.pop("seed")
    row = res.verdicts()[1]
    assert row["key"] == "seed" and row["ok"] is False and row["computed"] is False
    assert np.isnan(row["book"]) and not res.passed
    assert "✗ seed is zero: not computed with these settings" in res.summary()
    with pytest.raises(KeyError, match="did not compute target 'seed'"):
        res.require("seed")  # a chapter that needs it still fails loudly


def test_require_prints_checks_and_returns(dummy, capsys):  # noqa: F811
    res = experiments.run(dummy)
    assert res.require("mean") == 10.0
    assert capsys.readouterr().out == ""  # silent: recorded in the ledger instead
    assert res.require("mean", verbose=True) == 10.0
    assert capsys.readouterr().out == \
        "✓ mean = 10  target in [9.5, 10.5]  paper 10  [live; re-simulation, test Fig. 0]\n"
    assert res.require("seed", "mean") == (0, 10.0)
    with pytest.raises(KeyError, match="no target 'lr'; declared: mean, seed"):
        res.require("lr")
    miss = experiments.run(dummy, steps=20)
    with pytest.raises(AssertionError, match=r"mean = 20 \(target in \[9.5, 10.5\]"):
        miss.require("seed", "mean")
    lines = capsys.readouterr().out.splitlines()  # a miss is printed, the passed 'seed' is not
    assert lines == [lines[-1]] and lines[-1].startswith("✗ mean = 20")


def test_figure_and_roundtrip(dummy, tmp_path):  # noqa: F811
    res = experiments.run(dummy, cache=False)
    assert res.figure().axes
    path = res.save(tmp_path / "out")
    back = experiments.Result.load(tmp_path / "out", dummy)
    assert path == tmp_path / "out" / "dummy.json"
    assert back.numbers == res.numbers and back.params == {**res.params, "sizes": [1, 2]}
    np.testing.assert_array_equal(back.arrays["t"], res.arrays["t"])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["dummy.json", "dummy.npz"]


@pytest.mark.parametrize("cache", ["no", 0, None])
def test_cache_must_be_a_bool(dummy, cache):  # noqa: F811
    with pytest.raises(ValueError, match="cache: expected one of"):
        experiments.run(dummy, cache=cache)
    assert CALLS == []
