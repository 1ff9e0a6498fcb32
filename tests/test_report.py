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
    assert lines[0] == "| Paper | Experiments | Targets met | Run time |"
    assert "| 2 / 2 |" in md  # dummy: both targets met
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


def test_report_rows_flag_experiments_without_targets(fakes):  # noqa: F811
    fakes("bare", fake_dummy)
    rows = experiments.report_rows(experiments.run_all(["bare"], progress=False))
    assert [(r["what"], r["ok"]) for r in rows] == [("(no reproduction target declared)", False)]


def test_report_escapes_pipes(fakes):  # noqa: F811
    t = Target("mean", "|angle| of p", "≤ 8°", lo=0, hi=100, tolerance="|x| ≤ 8")
    fakes("piped", fake_dummy, targets=[t])
    md = experiments.report_markdown(experiments.run_all(["piped"], progress=False))
    assert "\\|angle\\| of p" in md and "\\|x\\| ≤ 8" in md
