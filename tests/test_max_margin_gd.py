"""The GD theorem's checks (attnlib.experiments.max_margin_gd) against independent oracles.

The smoothness bound against autograd Hessians of a risk written out here from the model's
definition; the finite-difference Hessians against autograd; the stable log-deficits and
log-excess risks against the naive formulas where float64 resolves them; the circle's
minimiser against the max-margin direction found by brute force over the same grid; the
experiment's plain GD against a hand-written autograd loop with the step 1/L_bound.
"""

import math

import pytest
import torch

import attnlib.experiments as E
from attnlib.data import AttentionData, random_data
from attnlib.examples import multi_input_example, three_token_example
from attnlib.experiments import max_margin_gd as g


def _risk(data, W, p):
    """L(p) = mean_i log(1 + exp(-Y_i v^T X_i^T softmax(X_i W p))), written out."""
    s = torch.softmax(data.X @ (W @ p), dim=-1)  # (n, T)
    f = (s * (data.X @ data.v)).sum(-1)
    return torch.nn.functional.softplus(-data.Y * f).mean()


def _autograd_hessian_norm(data, W, p):
    H = torch.autograd.functional.hessian(lambda q: _risk(data, W, q), p)
    return float(torch.linalg.matrix_norm(H, 2))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bound_above_autograd_hessians_random_data(seed):
    raw = random_data(3, 4, 3, seed=seed)
    data = AttentionData(raw.X, raw.Y, v=raw.v)
    W = torch.eye(3, dtype=torch.float64)
    L = g.smoothness_bound(data, W)
    gen = torch.Generator().manual_seed(seed)
    worst = max(_autograd_hessian_norm(data, W, torch.randn(3, generator=gen,
                                                            dtype=torch.float64) * r)
                for r in (0.1, 0.5, 1.0, 2.0, 4.0) for _ in range(20))
    assert 0 < worst <= L


def test_bound_closed_form_e1():
    # keys (-.1, 1), (1, 0), (0, 0): diameter |(-1.1, 1)|, scores in [0.9, 1]
    ex = three_token_example("global")
    D, delta = math.hypot(1.1, 1.0), 0.1
    s = 1 / (1 + math.exp(0.9))  # σ(-0.9) = max |ℓ'| on [0.9, 1]
    d2 = s * (1 - s)  # σ(u)σ(-u) is largest at u = 0.9 on [0.9, 1]
    expect = d2 * (delta * D / 4) ** 2 + s * delta * D ** 2 / 4
    assert g.smoothness_bound(ex.data, ex.init["W"]) == pytest.approx(expect, rel=1e-12)


def test_hessian_norms_match_autograd():
    ex = multi_input_example()
    W = ex.init["W"]
    P = g.random_prompts(5, torch.Generator().manual_seed(3), "cpu", radius=3.0)
    got = g.hessian_norms(ex.data, W, P)
    want = torch.tensor([_autograd_hessian_norm(ex.data, W, p) for p in P],
                        dtype=torch.float64)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-9)


def test_deficits_match_naive():
    ex = multi_input_example()
    W = ex.init["W"]
    P = g.random_prompts(7, torch.Generator().manual_seed(4), "cpu", radius=4.0)
    sup = torch.zeros(ex.data.n, ex.data.T, dtype=torch.bool)
    sup[:, 1] = True
    la, ls = g.deficits(ex.data, W, P, sup)
    s = torch.softmax(torch.einsum("ntd,de,ke->knt", ex.data.X, W, P), dim=-1)  # (7, n, T)
    gam = ex.data.X @ ex.data.v  # (n, T), Y = 1
    gap = gam.amax(-1, keepdim=True) - gam
    assert torch.allclose(la.exp(), (s * gap).sum(-1), rtol=1e-10)
    assert torch.allclose(ls.exp(), s[..., 1] * gap[:, 1], rtol=1e-10)


def test_circle_excess_matches_naive_at_small_radius():
    ex = three_token_example("global")
    W = ex.init["W"]
    th = torch.linspace(0, 2 * math.pi, 13, dtype=torch.float64)
    got = g.circle_excess(ex.data, W, [0.5, 2.0], th)
    Lstar = math.log1p(math.exp(-1.0))  # ℓ(1): the best score is 1
    for j, R in enumerate((0.5, 2.0)):
        for a, t in enumerate(th):
            p = torch.tensor([R * math.cos(t), R * math.sin(t), 0.0], dtype=torch.float64)
            assert math.log(float(_risk(ex.data, W, p)) - Lstar) == pytest.approx(
                float(got[j, a]), rel=1e-8)


def test_circle_excess_large_radius_is_finite_and_decreasing_along_pmm():
    ex = multi_input_example()
    W = ex.init["W"]
    th = torch.tensor([math.radians(11.45)], dtype=torch.float64)
    got = g.circle_excess(ex.data, W, [64.0, 256.0, 1024.0], th)[:, 0]
    assert torch.isfinite(got).all() and (got.diff() < 0).all()


@pytest.fixture(scope="module")
def circle():
    return E.run("mm_circle", cache=False, radii=(1, 8, 256), n_angles=3600)


def test_circle_minimiser_turns_to_brute_force_max_margin(circle):
    th = torch.as_tensor(circle.arrays["angles"])
    for name, make in (("e1", three_token_example), ("e2", multi_input_example)):
        ex = make("global") if name == "e1" else make()
        K = (ex.data.X @ ex.init["W"])[..., :2]  # keys in the plane (n, T, 2)
        U = torch.stack([th.cos(), th.sin()], -1)  # (A, 2)
        gaps = (K[:, :1] - K[:, 1:]) @ U.T  # token 0 is optimal in both examples
        best = th[gaps.amin((0, 1)).argmax()]  # the max-margin direction on the grid
        got = torch.as_tensor(circle.arrays[f"{name}_best"])[-1]
        assert abs(math.degrees(float(got - best))) <= 0.5
        assert circle.numbers[f"{name}_err_R1"] > 5  # at R = 1 it is not there yet


@pytest.fixture(scope="module")
def gdrun():
    return E.run("mm_gd_theorem", cache=False, steps=600, record_every=20, samples=256)


def test_gd_theorem_follows_plain_gd_with_step_one_over_L(gdrun):
    ex = multi_input_example()
    W = ex.init["W"]
    eta = 1 / g.smoothness_bound(ex.data, W)
    assert gdrun.numbers["e2_step"] == pytest.approx(eta, rel=1e-12)
    p = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64, requires_grad=True)
    for _ in range(600):
        (grad,) = torch.autograd.grad(_risk(ex.data, W, p), p)
        p = (p - eta * grad).detach().requires_grad_(True)
    assert float(p.detach().norm()) == pytest.approx(
        float(torch.as_tensor(gdrun.arrays["e2_norm"])[0, -1]), rel=1e-9)


def test_gd_theorem_numbers_recomputed_from_arrays(gdrun):
    a, n = gdrun.arrays, gdrun.numbers
    for name in ("e1", "e2"):
        cos = torch.as_tensor(a[f"{name}_cos"])
        assert n[f"{name}_cos_end"] == pytest.approx(float(cos[:, -1].min()))
        assert n[f"{name}_path_inner_max"] == pytest.approx(
            float(torch.as_tensor(a[f"{name}_inner"]).max()))
        assert n[f"{name}_path_inner_max"] < 0  # the data condition holds on E1/E2
    assert n["bound_holds"] == 1.0 and n["local_inner_positive"] > 0
    assert n["official_gd_step_ok"] == 1.0  # η = 1 ≤ 1/L_bound ≈ 3.7 on E2


def test_figures_draw_from_the_arrays(circle, gdrun):
    from attnlib.figures.max_margin_gd import plot_circle, plot_gd_theorem

    assert len(plot_circle(circle).axes) == 4
    assert len(plot_gd_theorem(gdrun).axes) == 4


def test_next_gap_closed_form_e1(gdrun):
    # p_mm = (-0.1, 1)/1.01; the non-support token x2 = (1, 0): (k1 - k2)^T p_mm = 1.11/1.01
    assert gdrun.numbers["e1_next_gap"] == pytest.approx(1.11 / 1.01, rel=1e-9)
    assert 1.0 < gdrun.numbers["e2_next_gap"] < 1.05  # a near-support token on E2
