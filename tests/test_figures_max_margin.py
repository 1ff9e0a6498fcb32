"""The figures of arXiv 2306.13596 (attnlib.figures.max_margin): each draws its result's arrays."""

import numpy as np
import pytest

import attnlib.experiments as E
from attnlib.figures import max_margin as F


@pytest.fixture(scope="module")
def results():
    kw = {"mm_e1_basins": dict(steps=30, sweep=0), "mm_e2_multi_input": dict(steps=30),
          "mm_e3_joint": dict(steps=30), "mm_e4_loss": dict(steps=30, C=(1, 100)),
          "mm_regpath": dict(steps=40, radii=(2, 4, 8)),
          "mm_local_certificate": dict(steps=40, trials=5)}
    return {n: E.run(n, cache=False, **k) for n, k in kw.items()}


def _has_line(ax, xy):
    return any(line.get_xydata().shape == np.shape(xy) and np.allclose(line.get_xydata(), xy)
               for line in ax.lines)


def test_experiments_point_at_these_figures():
    for n, f in (("mm_e1_basins", F.plot_e1), ("mm_e2_multi_input", F.plot_e2),
                 ("mm_e3_joint", F.plot_e3), ("mm_e4_loss", F.plot_e4),
                 ("mm_regpath", F.plot_regpath), ("mm_local_certificate", F.plot_certificate)):
        assert E.get(n).plot is f


def test_e1_panels_draw_their_paths(results):
    res = results["mm_e1_basins"]
    fig = F.plot_e1(res, panels=("local",), steps=10)
    assert len(fig.axes) >= 1
    path = res.arrays["paths"][1][4, :11]  # local panel, run c = -1, iterations 0..10
    assert _has_line(fig.axes[0], path)
    assert not _has_line(fig.axes[0], res.arrays["paths"][0][0, :11])  # not the global panel


def test_e2_curves_are_the_zero_init_run(results):
    res = results["mm_e2_multi_input"]
    fig = F.plot_e2(res)
    i0 = int(res.numbers["zero_init_index"])
    s = res.arrays["steps"]
    assert _has_line(fig.axes[1], np.stack([s, res.arrays["ngd_prob"][i0]], -1))
    assert _has_line(fig.axes[2], np.stack([s, res.arrays["gd_norm"][i0]], -1))


def test_e3_and_e4_paths(results):
    r3 = results["mm_e3_joint"]
    fig = F.plot_e3(r3)
    assert _has_line(fig.axes[1], r3.arrays["v_path"][1])  # (b) non-tight: v's path
    r4 = results["mm_e4_loss"]
    fig = F.plot_e4(r4, steps=30)
    assert _has_line(fig.axes[0], r4.arrays["paths"][1, 1])  # logistic, C = 100
    assert [ln.get_linestyle() for ln in fig.axes[0].lines[:2]] == ["-", "--"]


def test_regpath_and_certificate_bars(results):
    rp = results["mm_regpath"]
    fig = F.plot_regpath(rp)
    assert _has_line(fig.axes[0], np.stack([rp.arrays["radii"], rp.arrays["cos"]], -1))
    rc = results["mm_local_certificate"]
    fig = F.plot_certificate(rc)
    heights = [b.get_height() for b in fig.axes[0].patches]
    want = np.bincount(rc.arrays["endpoint_index"], minlength=len(rc.arrays["alpha"]))
    assert heights == want.tolist() and sum(heights) == 5


def test_comparison_table_reads_the_results_numbers():
    from types import SimpleNamespace as NS

    n1 = {k: 0.1 * i for i, k in enumerate(
        ("svm1_p1", "svm1_p2", "svm1_half_sq", "svm2_p1", "svm2_p2", "svm2_half_sq",
         "global_min_cos200", "global_cos1000_lo", "global_cos1000_hi"))}
    n2 = {k: 1.0 + i for i, k in enumerate(
        ("official_half_sq", "ngd_min_cos200", "ngd_cos1000_lo", "ngd_prob50", "ngd_prob200",
         "gd_prob200", "ngd_norm200", "gd_norm200", "gd_norm1000"))}
    table = F.comparison_table(NS(numbers=n1), NS(numbers=n2), NS(numbers={"cos_Rmax": 0.5}),
                               NS(numbers={"e1_cos_end": 0.25, "e2_cos_end": 0.75},
                                  params={"steps": 1234}))
    lines = table.splitlines()
    assert lines[0] == "| quantity | paper / official code | book |" and len(lines) == 11
    assert all(line.startswith("| ") and line.endswith(" |") for line in lines[2:])
    assert "(0.00000, 0.10000), 0.20000" in lines[2]  # the book's column from the numbers
    assert "0.49505" in lines[2] and "| 0.5000 |" in lines[9]
    assert "1234 steps" in lines[10] and "0.2500 / 0.7500" in lines[10]
