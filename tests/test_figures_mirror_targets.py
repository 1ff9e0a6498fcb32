"""attnlib.figures.mirror.targets_table: chapter 9's closing table, from the checked targets."""

from experiment_fakes import fakes  # noqa: F401  (a fixture)

from attnlib.experiments import run
from attnlib.figures.mirror import targets_table


def test_targets_table_rows_marks_evidence_and_omit(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    res = run("md_dual", cache=False, trials=2, steps=50, demo_steps=150)
    rows = res.verdicts()
    lines = targets_table([res]).splitlines()
    assert len(lines) == 2 + len(rows)
    for r, line in zip(rows, lines[2:]):
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        assert cells[0] == f"`{r['experiment']}`"
        assert cells[3] == f"{r['book']:.4g}"
        assert cells[4] == ("✓" if r["ok"] else "✗")
        assert cells[5] == r["evidence"]
    assert "by construction" in lines[2] and lines[-1].endswith("| live |")
    fewer = targets_table([res], omit={("md_dual", "trap_paper")}).splitlines()
    assert len(fewer) == len(lines) - 1 and not any("dual steps of 1e-5: steps" in x
                                                    for x in fewer)


def _radii_fake(steps: int = 10, radii: tuple[float, ...] = (1.0, 8.0)):
    return ({"mean": float(steps), **({"at8": 1.0} if 8.0 in radii else {})}, {})


def test_a_target_not_computed_at_these_settings_is_shown_so(fakes):  # noqa: F811
    """A conditional target the settings skip is "not computed" with no mark (neither ✓ nor
    ✗; it was ✗, or a format error on its missing value)."""
    from attnlib import experiments

    fakes("table_radii", _radii_fake, targets=[
        experiments.Target("mean", "mean equals steps", "10", lo=9.5, hi=10.5),
        experiments.Target("at8", "read at R = 8", "1", lo=1, hi=1,
                           when=lambda s: 8.0 in s["radii"], condition="radii include 8")])
    rows = targets_table([run("table_radii", cache=False, radii=(1.0,))]).splitlines()[2:]
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in rows]
    assert [c[3:5] for c in cells] == [["10", "✓"], ["not computed", "–"]]
