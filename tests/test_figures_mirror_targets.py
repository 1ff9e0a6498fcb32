"""attnlib.figures.mirror.targets_table: chapter 9's closing table, from the checked targets."""

from attnlib.experiments import run
from attnlib.figures.mirror import targets_table


def test_targets_table_rows_marks_evidence_and_omit(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    res = run("md_dual", cache=False, trials=2, steps=50, demo_steps=150)
    rows = res.check()
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
