"""attnlib.status: the one "no NaN, no stall" verdict of train, LpMirrorDescent, realdata.fit
and experiment results, and how the reports of the runs inside a computation are gathered."""

import pytest
import torch

import attnlib as al
from attnlib import realdata
from attnlib.status import RunStatus, collect, report, total
from attnlib.train import LpMirrorDescent


def test_a_status_adds_up_and_round_trips():
    a = RunStatus(runs=3, nonfinite=1, first_nonfinite=7, causes=("overflow",))
    b = RunStatus(runs=2, stalled=1, causes=("lost step", "overflow"))
    s = a + b
    assert (s.runs, s.nonfinite, s.stalled, s.first_nonfinite) == (5, 1, 1, 7)
    assert s.causes == ("overflow", "lost step") and not s.ok and RunStatus(runs=4).ok
    assert RunStatus.from_dict(s.to_dict()) == s and total([a, b]) == s and total([]).ok
    assert "1 of 5 turned non-finite" in str(s) and "1 of 5 stalled" in str(s)
    with pytest.raises(ValueError, match="^status: expected a RunStatus dict"):
        RunStatus.from_dict({"runs": 1})
    with pytest.raises(ValueError, match="^nonfinite: expected a count >= 0"):
        RunStatus(nonfinite=-1)


def test_collect_gathers_the_runs_inside_it_only():
    data = al.random_data(3, 2, 2, trials=2, seed=0)
    al.train(data, steps=2)  # outside any block: reported to no one
    with collect() as outer:
        al.train(data, steps=2)
        with collect() as inner:
            report(RunStatus(runs=1, nonfinite=1))
    assert total(outer) == RunStatus(runs=2) and total(inner).nonfinite == 1


def _overflowing_optimizer():
    w = torch.nn.Parameter(torch.full((4,), 0.1))
    return w, LpMirrorDescent([w], lr=1e3, lp=1.01)


def test_the_optimizer_reports_its_first_skipped_step():
    w, opt = _overflowing_optimizer()
    with collect() as got, pytest.warns(RuntimeWarning):
        for _ in range(3):
            w.grad = -torch.ones(4)
            opt.step()
    assert [s.nonfinite for s in got] == [1]  # once, not at every skipped step
    assert opt.status.first_nonfinite == 0 and opt.steps_taken == 3


def test_fit_reports_models_that_turn_nonfinite():
    data = realdata.digits_tokens()
    ok = realdata.fit(data, "md", (0.1,), lp=1.1, steps=2, seeds=(0, 1))
    assert ok["status"].ok and ok["status"].runs == 2
    with collect() as got, pytest.warns(RuntimeWarning, match="skipped"):
        bad = realdata.fit(data, "md", (1e6,), lp=1.01, steps=3, seeds=(0, 1))
    st = bad["status"]
    assert (st.runs, st.nonfinite, st.ok) == (2, 2, False) and "range" in st.causes[0]
    assert got == [st]  # fit's own total, not the optimiser's report besides it
    assert torch.isfinite(bad["W"]).all() and torch.isfinite(bad["train_loss"]).all()
