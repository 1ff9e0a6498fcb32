"""The computations of arXiv 2306.13596 (attnlib.experiments.max_margin{,_measures}), tiny scale.

Each experiment runs with few steps; its numbers are checked against an independent oracle:
closed forms of the paper's hand-made examples, or a direct numpy recomputation from the
result's own arrays (cosines, angles, softmax selections), never against the number itself.
The full-scale values are checked by the chapters through ``result.require``.
"""

import math

import numpy as np
import pytest
import torch

import attnlib.experiments as E
from attnlib.examples import three_token_example
from attnlib.experiments import max_margin as mm
from attnlib.experiments import max_margin_measures as mmm
from attnlib.optimality import is_locally_optimal

TINY = {
    "mm_e1_basins": dict(steps=30, sweep=3),
    "mm_e2_multi_input": dict(steps=30),
    "mm_e3_joint": dict(steps=30),
    "mm_e4_loss": dict(steps=30, C=(1, 2, 100), horizon=20),
    "mm_regpath": dict(steps=50, radii=(2, 4)),
    "mm_local_certificate": dict(steps=50, trials=4),
    "mm_token_plane": dict(example="e1-local", steps=40, record_every=10),
    "mm_selection": dict(score=0.9),
    "mm_ray_risk": dict(radii=(0, 2, 64)),
}
PAPER_FIGURES = ("mm_e1_basins", "mm_e2_multi_input", "mm_e3_joint", "mm_e4_loss",
                 "mm_regpath", "mm_local_certificate")


@pytest.fixture(scope="module")
def results():
    return {name: E.run(name, cache=False, **kw) for name, kw in TINY.items()}


def _cos(a, b):
    """Cosine of numpy vectors (the oracle: a direct formula)."""
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_the_paper_registers_its_experiments_with_targets_and_figures():
    mods = (mm.__name__, mmm.__name__, "attnlib.experiments.max_margin_loss")
    mine = {n for n in E.names() if E.get(n).func.__module__ in mods}
    assert mine == set(TINY)
    for n in mine:
        exp = E.get(n)
        assert exp.paper.startswith(mm.PAPER) and exp.targets
        assert (exp.plot is not None) == (n in PAPER_FIGURES)


def test_every_setting_is_typed():
    for n in TINY:
        ann = E.get(n).func.__annotations__
        assert set(E.get(n).defaults) <= set(ann), n


def test_e1_svm_directions_are_the_closed_forms(results):
    e1 = results["mm_e1_basins"].numbers
    # one support constraint <p, x1 - x3> = 1 with x3 = 0: p = x1 / |x1|^2, x1 = (-0.1, 1)
    assert (e1["svm1_p1"], e1["svm1_p2"]) == pytest.approx((-0.1 / 1.01, 1 / 1.01), abs=1e-6)
    assert e1["svm1_half_sq"] == pytest.approx(0.5 / 1.01, abs=1e-6)
    assert (e1["svm2_p1"], e1["svm2_p2"]) == pytest.approx((1.0, 0.0), abs=1e-6)
    assert e1["svm3_half_sq"] == pytest.approx(0.5 * 2.21, abs=1e-6)  # p^mm(3) = (−1, −1.1)
    assert e1["locopt_global_is_1"] == 1 and e1["locopt_local_is_12"] == 1


def test_e1_selection_and_cosines_recomputed_from_the_paths(results):
    res = results["mm_e1_basins"]
    a, nb = res.arrays, res.numbers
    keys = a["keys"]  # (3, 2); W = diag(1, 1, 0), so logits are keys @ p[:2]
    for panel in (0, 1):
        P = a["paths"][panel]  # (trials, S, 2)
        sel = (P[:, -1] @ keys.T).argmax(-1)
        assert sel.tolist() == a["selected"][panel].tolist()
        own = a["p_mm"][sel]
        cos = [_cos(P[b, -1], own[b]) for b in range(len(P))]
        assert np.allclose(cos, a["cos"][panel][:, -1], atol=1e-12)
    g_cos = [_cos(p, a["p_mm"][a["selected"][0][b]]) for b, p in enumerate(a["paths"][0][:, -1])]
    assert nb["global_cos1000_lo"] == pytest.approx(min(g_cos), abs=1e-12)
    assert nb["global_all_on_x1"] == float((a["selected"][0] == 0).all())


def test_more_trials_keep_the_official_runs_first():
    res = E.run("mm_e1_basins", cache=False, trials=8, sweep=0, steps=5)
    assert res.arrays["c"][:6].tolist() == [1.0, 0.5, 0.0, -0.5, -1.0, -1.5]
    assert len(set(res.arrays["c"].tolist())) == 8
    assert res.arrays["paths"].shape[:2] == (2, 8) and math.isnan(res.numbers["boundary_c"])


def test_e2_probability_and_norm_recomputed(results):
    res = results["mm_e2_multi_input"]
    a, nb = res.arrays, res.numbers
    i0 = int(nb["zero_init_index"])
    assert a["c"][i0] == 0 and a["ngd_prob"][i0, 0] == pytest.approx(1 / 7)  # uniform at p=0
    p = a["ngd_paths"][i0, -1]  # W = diag(1, 1, 0): logits = keys @ p[:2]
    logits = a["keys"] @ p  # (n, T)
    s = np.exp(logits - logits.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    assert a["ngd_prob"][i0, -1] == pytest.approx(s[:, 0].mean(), rel=1e-10)
    assert a["gd_norm"][i0, -1] == pytest.approx(np.linalg.norm(a["gd_paths"][i0, -1]))
    gap = a["ngd_prob"][i0, 1:] - a["gd_prob"][i0, 1:]
    assert nb["ngd_above_gd"] == float((gap > 0).all())


def test_e2_direction_and_rate_numbers_recomputed():
    # at full length the NGD/GD comparisons of chapter 2, recomputed from the paths
    res = E.run("mm_e2_multi_input", cache=False, steps=1000, trials=2)
    a, nb = res.arrays, res.numbers
    pmm = a["p_mm"] / np.linalg.norm(a["p_mm"])

    def cos(P):
        return P @ pmm / np.linalg.norm(P, axis=-1)

    c_ngd, c_gd = cos(a["ngd_paths"][:, 200]), cos(a["gd_paths"][:, 200])
    assert nb["ngd_ahead_cos200"] == pytest.approx((c_ngd - c_gd).min(), abs=1e-12)
    assert nb["gd_cos_rises"] == float((cos(a["gd_paths"][:, -1]) > c_gd).all())
    i0 = int(nb["zero_init_index"])
    assert nb["ngd_norm200_ratio"] == pytest.approx(
        np.linalg.norm(a["ngd_paths"][i0, 200]) / 20.0, rel=1e-12)
    rate = (np.linalg.norm(a["gd_paths"][i0, -1]) - np.linalg.norm(a["gd_paths"][i0, 200]))
    assert nb["gd_log_rate"] == pytest.approx(rate / (nb["p_mm_norm"] * math.log(5)), rel=1e-9)
    assert 0.85 < nb["gd_log_rate"] < 1.15  # ‖p‖ ≈ ‖p^mm‖ log k for plain GD
    assert nb["official_half_sq"] == pytest.approx(0.31319, abs=1e-5)


def test_e3_svm_solutions_are_the_closed_forms(results):
    e3 = results["mm_e3_joint"].numbers
    assert (e3["tight_vmm_1"], e3["tight_vmm_2"]) == pytest.approx((0, 1), abs=1e-6)
    assert (e3["tight_pmm_1"], e3["tight_pmm_2"]) == pytest.approx((4 / 3, 1 / 3), abs=1e-6)
    assert e3["tight_relax_equals_mm"] == 1
    assert (e3["nontight_prelax_1"], e3["nontight_prelax_2"]) == pytest.approx((1, 0), abs=1e-6)
    assert (e3["nontight_pmm_1"], e3["nontight_pmm_2"]) == pytest.approx((1.25, 0.25), abs=1e-6)
    assert e3["cos_pmm_prelax"] == pytest.approx(1.25 / math.hypot(1.25, 0.25), abs=1e-9)


def test_e4_angles_recomputed_from_the_paths(results):
    res = results["mm_e4_loss"]
    a, nb = res.arrays, res.numbers
    k = 20  # the horizon
    ang = np.degrees(np.arctan2(a["paths"][..., k, 1], a["paths"][..., k, 0]))  # (2, C)
    for b, c in enumerate(a["C"]):
        assert nb[f"corr_angle200_C{c:g}"] == pytest.approx(ang[0, b], abs=1e-9)
        assert nb[f"log_angle200_C{c:g}"] == pytest.approx(ang[1, b], abs=1e-9)
    assert nb["corr_max_abs_angle200"] == pytest.approx(np.abs(ang[0]).max(), abs=1e-9)
    assert nb["corr_angle200_C1"] == pytest.approx(0, abs=1e-9)  # C=1: symmetric inputs


def test_regpath_respects_the_radius_and_its_cosines(results):
    res = results["mm_regpath"]
    a = res.arrays
    assert (np.linalg.norm(a["p"], axis=-1) <= a["radii"] * (1 + 1e-9)).all()
    cos = [_cos(p[:2], a["p_mm"]) for p in a["p"]]  # third entry: W's zero row, p stays 0
    assert np.allclose(cos, a["cos"], atol=1e-12)
    assert res.numbers["cos_increasing"] == float(cos[1] > cos[0])


def test_certificate_labels_agree_with_is_locally_optimal(results):
    res = results["mm_local_certificate"]
    a = res.arrays
    from attnlib.data import AttentionData, random_data

    raw = random_data(3, 3, 4, seed=0, device="cpu")
    data = AttentionData(raw.X, raw.Y, v=raw.v)
    labels = [is_locally_optimal(data, torch.as_tensor(al), param="p")
              for al in a["endpoint_alpha"]]
    assert res.numbers["fraction_locally_optimal"] == pytest.approx(np.mean(labels))
    K = 3 ** 3
    assert len(a["alpha"]) == K and a["endpoint_index"].max() < K
    assert (a["alpha"][a["endpoint_index"]] == a["endpoint_alpha"]).all()


def test_token_plane_runs_and_rays(results):
    res = results["mm_token_plane"]
    a = res.arrays
    assert a["P"].shape == (6, 40 // 10 + 1, 2)
    # local scores (1, .9, 0): the locally optimal selections are {x1} and {x2}
    assert a["alphas"].tolist() == [[0], [1]]
    assert np.allclose(a["dirs"], [[-0.1 / 1.01, 1 / 1.01], [1.0, 0.0]], atol=1e-6)
    sel = (a["P"][:, -1] @ a["X"][0].T).argmax(-1)  # W = diag(1, 1, 0)
    assert sel.tolist() == a["selected"][:, 0].tolist()
    on = np.isin(sel, a["alphas"][:, 0])
    assert res.numbers["fraction_on_a_ray"] == pytest.approx(on.mean())
    cos = np.array([[[_cos(p, u) for p in P] for P in a["P"][:, 1:]] for u in a["dirs"]])
    assert np.allclose(cos, a["cos"][:, :, 1:], atol=1e-12)


def test_selection_labels_in_the_tie_and_off_it(results):
    tie = results["mm_selection"]  # x3 = (0, 0) with score 0.9: a tie with x2's score
    assert tie.arrays["locally_optimal"].tolist() == [True, False, False]
    off = E.run("mm_selection", cache=False, score=0.0)  # score 0: {x1, x2} as in E1-local
    assert off.arrays["locally_optimal"].tolist() == [True, True, False]
    assert np.allclose(off.arrays["p_mm"][0], [-0.1 / 1.01, 1 / 1.01], atol=1e-6)
    assert off.numbers["rule_agrees"] == 1 and tie.numbers["rule_agrees"] == 1
    assert off.numbers["n_locally_optimal"] == 2


def test_ray_losses_against_a_direct_computation():
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


def test_ray_risk_against_the_logistic_loss(results):
    res = results["mm_ray_risk"]
    risk, att = res.arrays["risk"], res.arrays["attention"]
    ell = lambda u: np.log1p(np.exp(-u))  # noqa: E731
    assert res.numbers["gap_inf_x1"] == pytest.approx(abs(risk[0, -1] - ell(1.0)), abs=1e-15)
    assert res.numbers["gap_inf_x2"] == pytest.approx(abs(risk[1, -1] - ell(0.9)), abs=1e-15)
    assert risk[0, 0] == pytest.approx(ell((1.0 + 0.9 + 0.9) / 3))  # R = 0: uniform attention
    assert res.numbers["risk_decreasing"] == float((np.diff(risk[0, 1:]) < 0).all())
    assert res.numbers["s1_Rmax"] == att[0, -1, 0, 0]


def test_bad_settings():
    with pytest.raises(ValueError, match="trials"):
        E.run("mm_e2_multi_input", cache=False, trials=0)
    with pytest.raises(ValueError, match="example"):
        E.run("mm_token_plane", cache=False, example="e9")
    with pytest.raises(ValueError, match="position"):
        E.run("mm_selection", cache=False, position="(9, 9)")


def test_e1_global_final_norm_recomputed(results):
    res = results["mm_e1_basins"]
    P = np.asarray(res.arrays["paths"])[0][:, -1]  # global panel, last point (trials, 2)
    assert res.numbers["global_final_norm"] == pytest.approx(
        np.linalg.norm(P, axis=-1).mean(), rel=1e-12)  # p's third entry stays 0 (W kills it)
