"""attnlib.experiments.report: run_all and the reproduction report (Markdown)."""

from experiment_fakes import CALLS, dummy, fake_dummy, fakes  # noqa: F401  (fixtures)

from attnlib import experiments
from attnlib.experiments import Target


def _broken(seed: int = 0):
    raise RuntimeError("solver diverged")


def test_run_all_and_report(dummy, fakes):  # noqa: F811
    fakes("broken", _broken, paper="2306.13596 Fig. 9", title="broken")
    res = experiments.run_all(["dummy", "broken"], progress=False, cache=False)
    assert CALLS[-1]["progress"] is False  # run_all passes its progress to the experiment
    assert isinstance(res["dummy"], experiments.Result)
    assert isinstance(res["broken"], RuntimeError)
    assert list(experiments.run_all(["dummy", "broken"], paper="2306.13596",
                                    progress=False)) == ["broken"]
    assert list(experiments.run_all(chapter="00_test", progress=False)) == ["dummy", "broken"]
    md = experiments.report_markdown(res)
    lines = md.splitlines()
    assert lines[0] == ("| Paper | Experiments | Live targets met | By construction | Not run "
                        "| Run time |")
    assert "| 2 / 2 |" in md  # dummy: both targets met
    assert "Max-Margin Token Selection in Attention Mechanism (2306.13596) | 1 | 0 / 1 | " \
        "0 / 0 | 0" in md
    assert md.index("(2306.13596) |") < md.index("| other (other) |")  # the papers' order
    row = next(x for x in lines if x.startswith("| `dummy`"))
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert cells[1:] == ["mean equals steps", "10", "10", "±0.5", "✓", "live", "re-simulation",
                         "a test row"]
    assert "(the experiment raised RuntimeError: solver diverged)" in md
    assert next(x for x in lines if "raised RuntimeError" in x).count("✗") == 1
    assert experiments.report_notes(res) == "- `dummy` — mean equals steps: a test row"
    assert experiments.report_markdown({}) == "*No experiments are registered yet.*"


def test_report_rows_flag_experiments_without_targets(fakes):  # noqa: F811
    fakes("bare", fake_dummy)
    rows = experiments.report_rows(experiments.run_all(["bare"], progress=False))
    assert [(r["what"], r["ok"]) for r in rows] == [("(no reproduction target declared)", False)]


def test_report_escapes_pipes(fakes):  # noqa: F811
    t = Target("mean", "|angle| of p", "≤ 8°", lo=0, hi=100, tolerance="|x| ≤ 8")
    fakes("piped", fake_dummy, targets=[t])
    md = experiments.report_markdown(experiments.run_all(["piped"], progress=False))
    assert "\\|angle\\| of p" in md and "\\|x\\| ≤ 8" in md


def test_identity_rows_are_marked_and_not_counted_as_reproductions(fakes):  # noqa: F811
    live = Target("mean", "mean equals steps", "10", lo=9.5, hi=10.5)
    ident = Target("mean", "mean is its own value", "10", lo=0, hi=100,
                   evidence="by construction")
    fakes("ident", fake_dummy, targets=[live, ident], paper="2308.16898 Fig. 2")
    res = experiments.run_all(["ident"], progress=False, cache=False)
    md = experiments.report_markdown(res)
    assert "(2308.16898) | 1 | 1 / 1 | 1 / 1 | 0 |" in md
    row = next(x for x in md.splitlines() if "its own value" in x)
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert cells[5:7] == ["✓ (identity)", "by construction"]


def test_not_run_targets_get_a_row_with_their_reason(dummy):  # noqa: F811
    from attnlib.experiments import registry

    key = "test_not_run_imdb"
    registry.not_run(key, paper="2410.14581 Table 9", what="IMDb test accuracy",
                     paper_value="0.87", reason="needs the IMDb download", chapter="00_test")
    try:
        res = experiments.run_all(["dummy"], progress=False)
        assert "not run" not in experiments.report_markdown(res)  # off by default
        for sel in (True, "00_test"):
            md = experiments.report_markdown(res, not_run=sel)
            row = next(x for x in md.splitlines() if "IMDb test accuracy" in x)
            cells = [c.strip() for c in row.strip("|").split(" | ")]
            assert cells[2:] == ["0.87", "not run", "", "not run", "not run", "paper",
                                 "needs the IMDb download"]
            k = len([e for e in registry.not_run_targets("2410.14581")
                     if sel is True or e.chapter == sel])  # other modules declare some too
            assert f"(2410.14581) | 0 | 0 / 0 | 0 / 0 | {k} |" in md
        assert "IMDb" not in experiments.report_markdown(res, not_run="05_w_vs_kq")
        # rows of a paper with no run experiment still appear, under that paper
        assert "Optimizing Attention with Mirror Descent" in \
            experiments.report_markdown({}, not_run=True)
    finally:
        registry._NOT_RUN.pop(key)
