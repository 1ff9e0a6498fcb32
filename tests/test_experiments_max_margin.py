"""The experiments of arXiv 2306.13596 at a tiny scale: result objects, targets, figures.

The full-scale values are asserted live in chapters 2-4; here each experiment runs with few
steps and checks that it computes every target key, that the targets evaluate, that the
scale-independent numbers (SVM solutions, local-optimality labels) are right, and that the
figure draws.
"""

import math

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

import attnlib.experiments as E
from attnlib.experiments import max_margin as mm

TINY = {
    "mm_e1_basins": dict(steps=30, sweep=3),
    "mm_e2_multi_input": dict(steps=30),
    "mm_e3_joint": dict(steps=30),
    "mm_e4_loss": dict(steps=30, C=(1, 2, 100)),
    "mm_regpath": dict(steps=50, radii=(2, 4)),
    "mm_local_certificate": dict(steps=50, trials=4),
}


@pytest.fixture(scope="module")
def results():
    return {name: E.run(name, cache=False, **kw) for name, kw in TINY.items()}


def test_every_experiment_of_the_paper_is_registered():
    names = [n for n in E.names() if E.get(n).func.__module__ == mm.__name__]
    assert sorted(names) == sorted(TINY)
    for n in names:
        exp = E.get(n)
        assert exp.paper.startswith(mm.PAPER) and exp.plot is not None and exp.targets
        assert exp.chapter in ("02_att_svm", "03_local_global", "04_joint_head")


@pytest.mark.parametrize("name", list(TINY))
def test_result_object(results, name):
    res = results[name]
    rows = res.check()  # raises KeyError if a target key was not computed
    assert len(rows) == len(res.experiment.targets)
    for r in rows:
        assert isinstance(r["ok"], bool) and math.isfinite(r["book"]) or r["key"] == "boundary_c"
    assert all(isinstance(v, float) for v in res.numbers.values())
    assert all(isinstance(a, np.ndarray) for a in res.arrays.values())
    fig = res.figure()
    assert isinstance(fig, Figure) and fig.axes


def test_scale_independent_numbers(results):
    e1 = results["mm_e1_basins"].numbers
    assert e1["svm1_half_sq"] == pytest.approx(0.5 / 1.01, abs=1e-6)  # ½‖(−.1, 1)/1.01‖²
    assert e1["svm2_p1"] == pytest.approx(1.0, abs=1e-6)
    assert e1["svm3_half_sq"] == pytest.approx(0.5 * 2.21, abs=1e-6)  # p^mm(3) = (−1, −1.1)
    assert e1["locopt_global_is_1"] == 1 and e1["locopt_local_is_12"] == 1
    e3 = results["mm_e3_joint"].numbers
    assert (e3["tight_pmm_1"], e3["tight_pmm_2"]) == pytest.approx((4 / 3, 1 / 3), abs=1e-6)
    assert (e3["nontight_prelax_1"], e3["nontight_prelax_2"]) == pytest.approx((1, 0), abs=1e-6)
    assert e3["cos_pmm_prelax"] == pytest.approx(0.9806, abs=1e-4)
    e4 = results["mm_e4_loss"].numbers
    assert e4["corr_angle200_C1"] == pytest.approx(0, abs=1e-9)  # symmetric inputs


def test_e2_probabilities_match_the_trainer(results):
    # the optimal-token probability recomputed from the path equals the trainer's max_prob
    # once attention selects the optimal token; at p(0) = 0 attention is uniform over 7 tokens
    a = results["mm_e2_multi_input"].arrays
    i0 = int(results["mm_e2_multi_input"].numbers["zero_init_index"])
    assert a["ngd_prob"][i0, 0] == pytest.approx(1 / 7)
    assert np.all(np.diff(a["ngd_norm"][i0]) > 0)


def test_e1_full_scale_basins():
    # the paper's headline of E1 (local panel) at full length, without the boundary sweep
    res = E.run("mm_e1_basins", cache=False, sweep=0)
    assert res.numbers["local_split_ok"] == 1 and res.numbers["global_all_on_x1"] == 1
    assert math.isnan(res.numbers["boundary_c"])


def test_more_trials_keep_the_official_runs_first():
    assert mm._inits(6) == list(mm._INITS) and mm._inits(2) == [1.0, 0.5]
    assert mm._inits(9)[:6] == list(mm._INITS) and len(mm._inits(9)) == 9
    res = E.run("mm_e1_basins", cache=False, trials=8, sweep=0, steps=20)
    assert res.arrays["paths"].shape[:2] == (2, 8)
    assert "local_split_ok" in res.numbers


def test_bad_settings():
    with pytest.raises(ValueError, match="trials"):
        E.run("mm_e2_multi_input", cache=False, trials=0)
    with pytest.raises(ValueError, match="no setting"):
        E.run("mm_e3_joint", cache=False, trial=3)


def test_cosine_helper():
    P = torch.tensor([[[1.0, 0.0], [1.0, 1.0]]], dtype=torch.float64)
    c = mm._cos(P, torch.tensor([2.0, 0.0], dtype=torch.float64))
    assert c[0].tolist() == pytest.approx([1.0, 2 ** -0.5])


def test_ray_losses_against_a_direct_computation():
    from attnlib.data import three_token_example

    ex = three_token_example("global", device="cpu")
    u = torch.tensor([[-0.1, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    risk, s = mm.ray_losses(ex, u, [0.0, 3.0])
    X = ex.data.X[0]  # (T, d)
    for j in range(2):
        p = 3.0 * u[j] / u[j].norm()
        a = X @ torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64)) @ p
        w = torch.exp(a) / torch.exp(a).sum()
        f = (w * X[:, 2]).sum()  # v = (0, 0, 1), Y = +1
        assert risk[j, 1] == pytest.approx(float(torch.log1p(torch.exp(-f))), rel=1e-12)
        assert s[j, 1, 0].tolist() == pytest.approx(w.tolist(), rel=1e-12)
    assert risk[0, 0] == risk[1, 0]  # p = 0: uniform attention on both rays


def test_explorers_live(results):
    sm = mm.softmax_explorer(mode="live")
    png = sm.png
    sm.update(norm=16.0, angle=0)
    assert sm.png != png
    je = mm.joint_explorer(results["mm_e3_joint"], mode="live")
    png = je.png
    je.update(example="tight", iterations=20)
    assert je.png != png
