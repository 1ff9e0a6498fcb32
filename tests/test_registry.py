"""attnlib.experiments.registry: registration, typed settings, targets, the registered set."""

import inspect
import math

import pytest
from experiment_fakes import CALLS, dummy, fake_dummy, fakes  # noqa: F401  (fixtures)

from attnlib import experiments
from attnlib.experiments import Target


def test_register_get_and_unregister(dummy):  # noqa: F811
    assert dummy in experiments.names()
    e = experiments.get(dummy)
    assert e.defaults == dict(trials=3, steps=10, seed=0, device="cpu", scale=1.0, sizes=(1, 2),
                              progress=True)
    assert e.scale == "trials=3, steps=10" and e.seconds == 150
    assert list(e.settings) == list(e.defaults)
    experiments.experiment("dummy", paper="", chapter="", title="")(fake_dummy)  # re-import: ok
    with pytest.raises(ValueError, match="registered twice"):
        experiments.experiment("dummy", paper="", chapter="", title="")(lambda: ({}, {}))
    with pytest.raises(ValueError, match="unknown experiment 'nope'.*dummy"):
        experiments.get("nope")
    experiments.unregister(dummy)
    assert dummy not in experiments.names()


def test_settings_are_checked_before_the_experiment_runs(dummy):  # noqa: F811
    e = experiments.get(dummy)
    assert e.check_settings({"sizes": [4, 5]}) == {**e.defaults, "sizes": (4, 5)}
    with pytest.raises(ValueError, match="setting trials expects an int >= 1, got '4'"):
        e.check_settings({"trials": "4"})  # text is parsed by the command line, not here
    with pytest.raises(ValueError, match="experiment 'dummy': setting steps expects an int >= 1"
                                         ", got -5"):
        experiments.run(dummy, steps=-5)
    with pytest.raises(ValueError, match="experiment 'dummy' has no setting.*'lr'"):
        experiments.run(dummy, lr=0.1)
    assert CALLS == []


def test_a_default_that_fails_its_own_check_is_refused(fakes):  # noqa: F811
    def bad(trials: int = 0):
        return {}, {}

    with pytest.raises(TypeError, match="setting trials expects an int >= 1, got 0"):
        fakes("bad", bad)
    assert "bad" not in experiments.names()
    fakes("ok", bad, bounds={"trials": (0, None)})  # a declared bound allows it
    assert experiments.get("ok").settings["trials"].lo == 0


def test_target_bounds_and_validation():
    with pytest.raises(ValueError, match="source"):
        Target("k", "w", "1", source="rumour")
    with pytest.raises(ValueError, match="lo=2"):
        Target("k", "w", "1", lo=2, hi=1)
    t = Target("k", "w", "1", lo=0, hi=1)
    assert t.ok(0.5) and t.ok(True) and t.ok(0) and t.ok(1)
    assert not t.ok(1.5) and not t.ok(-1e-12) and not t.ok(math.nan)
    assert [Target("k", "w", "1", lo=0.99).bound(), Target("k", "w", "1", hi=1e-6).bound(),
            Target("k", "w", "1", lo=2, hi=2).bound(), t.bound(), Target("k", "w", "1").bound()] \
        == [">= 0.99", "<= 1e-06", "== 2", "in [0, 1]", "any value"]


def test_paper_of(fakes):  # noqa: F811
    fakes("arx", fake_dummy, paper="2306.13596 Fig. 9")
    assert experiments.paper_of("arx") == "2306.13596"
    fakes("noarx", fake_dummy, paper="test Fig. 0")
    assert experiments.paper_of("noarx") == "other"


def test_every_registered_experiment_is_well_formed():
    """Title, paper figure, chapter, described targets, and EVERY setting typed."""
    for name in experiments.names():
        e = experiments.get(name)
        assert e.title and e.paper and e.chapter, name
        assert e.targets, f"experiment {name!r} declares no reproduction target"
        for t in e.targets:
            assert t.what and t.paper and t.tolerance, (name, t.key)
        params = inspect.signature(e.func).parameters
        untyped = [k for k, s in e.settings.items() if not s.annotated]
        assert not untyped, f"experiment {name!r}: annotate the setting(s) {untyped}"
        assert list(e.settings) == list(params)


def test_evidence_and_not_run_declarations_are_validated():
    import pytest

    from attnlib.experiments import registry

    assert Target("k", "w", "1").evidence == "live"
    with pytest.raises(ValueError, match="evidence must be one of"):
        Target("k", "w", "1", evidence="recorded")
    with pytest.raises(ValueError, match="reason must say why"):
        registry.not_run("t_nr", paper="2410.14581 Table 1", what="w", paper_value="1",
                         reason=" ", chapter="10_real_data")
    with pytest.raises(ValueError, match="arXiv id"):
        registry.not_run("t_nr", paper="Table 1", what="w", paper_value="1", reason="r",
                         chapter="10_real_data")
    kw = dict(paper="2410.14581 Table 1", what="w", paper_value="1", reason="r",
              chapter="10_real_data")
    try:
        registry.not_run("t_nr", **kw)
        registry.not_run("t_nr", **kw)  # the same declaration twice (a re-import) is fine
        with pytest.raises(ValueError, match="declared twice"):
            registry.not_run("t_nr", **{**kw, "reason": "other"})
        assert [e.key for e in registry.not_run_targets("2410.14581")].count("t_nr") == 1
        assert "t_nr" not in [e.key for e in registry.not_run_targets("2306.13596")]
    finally:
        registry._NOT_RUN.pop("t_nr", None)


def test_parse_bound_reads_what_bound_writes():
    from attnlib.experiments.registry import parse_bound

    for lo, hi in [(0.99, math.inf), (-math.inf, 1e-6), (2, 2), (0, 1), (-0.09911, -0.09891),
                   (-math.inf, math.inf), (1e-12, 3.5e7)]:
        assert parse_bound(Target("k", "w", "1", lo=lo, hi=hi).bound()) == (lo, hi)
    assert parse_bound("≥ 0.9") == (0.9, math.inf) and parse_bound("≤ 2") == (-math.inf, 2)
    assert parse_bound("≥ −1") == (-1, math.inf) and parse_bound("≥ +1.5") == (1.5, math.inf)
    with pytest.raises(ValueError, match="expected '>= x'"):
        parse_bound("about 0.9")


def test_a_bound_agrees_with_its_recorded_revisions():
    ok = Target("k", "w", "1", lo=0.9, revisions=(">= 0.99 -> >= 0.95: first",
                                                  ">= 0.95 -> >= 0.9: second"))
    assert ok.revision_problems() == [] and Target("k", "w", "1").revision_problems() == []
    assert [h[1] for h in ok.history()] == [(0.95, math.inf), (0.9, math.inf)]
    # the declared bound differs from where its history ends
    assert "last revision sets >= 0.9" in " ".join(
        Target("k", "w", "1", lo=0.8, revisions=(">= 0.99 -> >= 0.9: why",)).revision_problems())
    # a broken chain, a revision that changes nothing, one with no reason, unreadable bounds
    assert "starts from >= 0.97" in " ".join(Target(
        "k", "w", "1", lo=0.9, revisions=(">= 0.99 -> >= 0.95: a", ">= 0.97 -> >= 0.9: b")
    ).revision_problems())
    assert "does not change" in " ".join(
        Target("k", "w", "1", lo=0.9, revisions=(">= 0.9 -> >= 0.9: same",)).revision_problems())
    assert "no reason" in " ".join(
        Target("k", "w", "1", lo=0.9, revisions=(">= 0.99 -> >= 0.9: ",)).revision_problems())
    assert "expected" in " ".join(
        Target("k", "w", "1", lo=0.9, revisions=("high -> >= 0.9: why",)).revision_problems())
    with pytest.raises(ValueError, match="revisions must be a tuple"):
        Target("k", "w", "1", revisions=">= 0.99 -> >= 0.9: why")


def test_a_bound_changed_without_a_recorded_revision_is_found(fakes):  # noqa: F811
    from attnlib.experiments.registry import bound_snapshot, unrecorded_changes

    before = Target("mean", "w", "10", lo=9.5, hi=10.5)
    fakes("bounded", fake_dummy, targets=[before])
    snap = {k: v for k, v in bound_snapshot().items() if k.startswith("bounded.")}
    assert snap == {"bounded.mean": "in [9.5, 10.5]"} and unrecorded_changes(snap) == []
    experiments.unregister("bounded")
    fakes("bounded", fake_dummy, targets=[Target("mean", "w", "10", lo=9, hi=11)])
    assert unrecorded_changes(snap) == [
        "bounded.mean: bound in [9.5, 10.5] -> in [9, 11] with no revision recording the "
        "change ('old bound -> new bound: why')"]
    experiments.unregister("bounded")
    fakes("bounded", fake_dummy, targets=[Target(
        "mean", "w", "10", lo=9, hi=11, revisions=("in [9.5, 10.5] -> in [9, 11]: why",))])
    assert unrecorded_changes(snap) == []


def test_every_bound_is_the_recorded_one_or_has_its_revision():
    """The bounds of tests/target_bounds.json were recorded before later results were seen;
    a bound that differs from its record must say why in its ``revisions``."""
    import json
    from pathlib import Path

    from attnlib.experiments.registry import unrecorded_changes

    snap = json.loads((Path(__file__).parent / "target_bounds.json").read_text())
    assert unrecorded_changes(snap) == []
