"""attnlib.experiments registry: registration, settings, caching, targets, persistence."""

import dataclasses
import math

import numpy as np
import pytest

from attnlib import experiments
from attnlib.experiments import Target, _registry

CALLS = []


def _dummy(trials=3, steps=10, seed=0, device="cpu", scale=1.0, progress=True):
    """A tiny experiment: ``mean`` of ``trials`` draws of N(steps * scale, 0) and its seed."""
    CALLS.append(dict(trials=trials, steps=steps, seed=seed, device=device, scale=scale,
                      progress=progress))
    rng = np.random.default_rng(seed)
    x = steps * scale + 0 * rng.standard_normal(trials)
    return {"mean": float(x.mean()), "seed": seed}, {"x": x, "t": np.arange(trials)}


def _plot(res):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot(res.arrays["t"], res.arrays["x"])
    return fig


DUMMY_TARGETS = [
    Target("mean", "mean equals steps", "10", lo=9.5, hi=10.5, tolerance="±0.5",
           source="re-simulation", note="a test row"),
    Target("seed", "seed is zero", "0", lo=0, hi=0, tolerance="exact", source="suggested"),
]


@pytest.fixture
def dummy(monkeypatch, tmp_path):
    """Register ``_dummy`` as experiment 'dummy' in a private copy of the registry."""
    monkeypatch.setattr(_registry, "_REGISTRY", dict(_registry._REGISTRY))
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path / "cache"))
    experiments.experiment("dummy", paper="test Fig. 0", chapter="00_test", title="a dummy",
                           targets=DUMMY_TARGETS, plot=_plot)(_dummy)
    CALLS.clear()
    return "dummy"


def test_register_and_list(dummy):
    assert dummy in experiments.names()
    e = experiments.get(dummy)
    assert e.defaults == dict(trials=3, steps=10, seed=0, device="cpu", scale=1.0,
                              progress=True)
    assert e.scale == "trials=3, steps=10"
    with pytest.raises(ValueError, match="registered twice"):
        experiments.experiment("dummy", paper="", chapter="", title="")(lambda: ({}, {}))
    with pytest.raises(ValueError, match="unknown experiment 'nope'.*dummy"):
        experiments.get("nope")


def test_run_checks_targets_and_caches(dummy, tmp_path):
    res = experiments.run(dummy)
    assert res.numbers["mean"] == 10 and not res.cached and res.passed
    rows = res.check()
    assert [r["key"] for r in rows] == ["mean", "seed"]
    assert rows[0]["note"] == "a test row" and rows[0]["source"] == "re-simulation"
    again = experiments.run(dummy)
    assert again.cached and again.numbers == res.numbers and len(CALLS) == 1
    np.testing.assert_array_equal(again.arrays["x"], res.arrays["x"])
    fresh = experiments.run(dummy, cache=False)
    assert not fresh.cached and len(CALLS) == 2
    assert experiments.run(dummy, progress=False).cached  # progress is not part of the key
    other = experiments.run(dummy, steps=20)  # other settings: another cache entry, target missed
    assert len(CALLS) == 3 and not other.passed
    assert "✗ mean equals steps" in other.summary() and "steps=20" in other.summary()
    assert "✓ seed is zero" in other.summary()


def test_run_rejects_unknown_settings(dummy):
    with pytest.raises(ValueError, match="no setting.*'lr'"):
        experiments.run(dummy, lr=0.1)


def test_missing_target_key_is_an_error(dummy):
    res = experiments.run(dummy)
    res.numbers.pop("seed")
    with pytest.raises(KeyError, match="seed"):
        res.check()


def test_figure_and_roundtrip(dummy, tmp_path):
    res = experiments.run(dummy, cache=False)
    fig = res.figure()
    assert fig.axes
    path = res.save(tmp_path / "out")
    back = experiments.Result.load(tmp_path / "out", dummy)
    assert path.exists() and back.numbers == res.numbers and back.params == res.params


def test_target_validation():
    with pytest.raises(ValueError, match="source"):
        Target("k", "w", "1", source="rumour")
    with pytest.raises(ValueError, match="lo=2"):
        Target("k", "w", "1", lo=2, hi=1)
    t = Target("k", "w", "1", lo=0, hi=1)
    assert t.ok(0.5) and t.ok(True) and not t.ok(1.5) and not t.ok(math.nan)


def test_source_hash_and_cache_dir(monkeypatch, tmp_path):
    h = experiments.source_hash()
    assert len(h) == 16 and h == experiments.source_hash()
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    assert experiments.cache_dir() == tmp_path


def test_every_registered_experiment_is_well_formed():
    """Every registered experiment has a title, a paper figure, a chapter and described targets."""
    for name in experiments.names():
        e = experiments.get(name)
        assert e.title and e.paper and e.chapter, name
        assert e.targets, f"experiment {name!r} declares no reproduction target"
        for t in e.targets:
            assert t.what and t.paper and t.tolerance, (name, t.key)


def test_run_all_and_report(dummy):
    def broken(seed=0):
        raise RuntimeError("solver diverged")

    experiments.experiment("broken", paper="2306.13596 Fig. 9", chapter="00_test",
                           title="broken")(broken)
    assert experiments.paper_of("broken") == "2306.13596"
    assert experiments.paper_of("dummy") == "other"
    res = experiments.run_all(["dummy", "broken"], progress=False, cache=False)
    assert CALLS[-1]["progress"] is False  # run_all passes its progress to the experiment
    assert isinstance(res["dummy"], experiments.Result)
    assert isinstance(res["broken"], RuntimeError)
    assert list(experiments.run_all(["dummy", "broken"], paper="2306.13596",
                                    progress=False)) == ["broken"]
    assert list(experiments.run_all(chapter="00_test", progress=False)) == ["dummy", "broken"]
    md = experiments.report_markdown(res)
    lines = md.splitlines()
    assert lines[0] == "| Paper | Experiments | Targets met | Run time |"
    assert "| 2/2 " not in md and "| 2 / 2 |" in md  # dummy: both targets met
    assert "Max-Margin Token Selection in Attention Mechanism (2306.13596) | 1 | 0 / 1" in md
    assert md.index("(2306.13596) |") < md.index("| other (other) |")  # the papers' order
    row = next(x for x in lines if x.startswith("| `dummy`"))
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert cells[1:] == ["mean equals steps", "10", "10", "±0.5", "✓", "re-simulation",
                         "a test row"]
    assert "(the experiment raised RuntimeError: solver diverged)" in md
    assert next(x for x in lines if "raised RuntimeError" in x).count("✗") == 1
    assert experiments.report_notes(res) == "- `dummy` — mean equals steps: a test row"
    assert experiments.report_markdown({}) == "*No experiments are registered yet.*"


def test_report_escapes_pipes(dummy, monkeypatch):
    t = Target("mean", "|angle| of p", "≤ 8°", lo=0, hi=100, tolerance="|x| ≤ 8")
    monkeypatch.setitem(_registry._REGISTRY, "dummy",
                        dataclasses.replace(experiments.get("dummy"), targets=(t,)))
    md = experiments.report_markdown(experiments.run_all(["dummy"], progress=False))
    assert "\\|angle\\| of p" in md and "\\|x\\| ≤ 8" in md


def test_recorded_results_load_and_are_checked_now(dummy, tmp_path, monkeypatch):
    # a result saved by `reproduce` is read back as a recorded run, and run_all uses it
    res = experiments.run("dummy", cache=False, steps=7)
    res.save(tmp_path)
    monkeypatch.setattr(_registry, "RECORDED", tmp_path)
    assert experiments.recorded_names() == ["dummy"]
    rec = experiments.recorded("dummy")
    assert rec.recorded and rec.numbers["mean"] == 7.0 and rec.params["steps"] == 7
    assert [r["ok"] for r in rec.check()] == [r["ok"] for r in res.check()]
    n_calls = len(CALLS)
    out = experiments.run_all(["dummy"], progress=False, use_recorded=True)
    assert out["dummy"].recorded and len(CALLS) == n_calls  # not recomputed
    assert "recorded run" in experiments.report_markdown(out)
    with pytest.raises(ValueError, match="no recorded result"):
        experiments.recorded("nope")


def test_shipped_recorded_results_match_registered_experiments():
    for name in experiments.recorded_names():
        rec = experiments.recorded(name)
        assert set(rec.params) <= set(experiments.get(name).defaults)
        assert rec.check()  # every declared target has its number in the recording


def test_require_prints_checks_and_returns(dummy, capsys):
    res = experiments.run(dummy)
    assert res.require("mean") == 10.0
    assert capsys.readouterr().out == \
        "✓ mean = 10  target in [9.5, 10.5]  paper 10  [re-simulation, test Fig. 0]\n"
    assert res.require("seed", "mean") == (0, 10.0)
    with pytest.raises(KeyError, match="no target 'lr'; declared: mean, seed"):
        res.require("lr")
    miss = experiments.run(dummy, steps=20)
    with pytest.raises(AssertionError, match=r"mean = 20 \(target in \[9.5, 10.5\]"):
        miss.require("seed", "mean")
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("✓ seed = 0") and lines[-1].startswith("✗ mean = 20")
