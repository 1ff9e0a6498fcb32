"""Mirror-descent experiments (attnlib.experiments.mirror) at a tiny scale.

The full-scale values are the reproduction report's business. Here each experiment runs
small and its numbers are recomputed from its arrays and its data by an independent route:
the directional Bregman divergence and the margins in closed form with numpy, the selected
tokens as an argmax of the logits, sparsity by counting, and constant-step mirror descent
re-simulated with autograd.
"""

import math

import numpy as np
import pytest
import torch

from attnlib.examples import mirror_joint_example, mirror_random_data
from attnlib.experiments import get, mirror, run


def ddir(A, B, p):
    """1 - <sign(B̄)|B̄|^(p-1), Ā> with unit-ℓp Ā, B̄ (numpy, last two dims)."""
    A, B = np.asarray(A, float), np.asarray(B, float)
    A = A / (np.abs(A) ** p).sum((-2, -1), keepdims=True) ** (1 / p)
    B = B / (np.abs(B) ** p).sum((-2, -1), keepdims=True) ** (1 / p)
    return 1 - (np.sign(B) * np.abs(B) ** (p - 1) * A).sum((-2, -1))


def logits(X, W, z):
    """a_it = x_it^T W z_i (numpy; X (..., n, T, d), W (..., d, d), z (..., n, d))."""
    return np.einsum("...ntd,...de,...ne->...nt", np.asarray(X), np.asarray(W), np.asarray(z))


def margins(X, W, z, alpha):
    a = logits(X, W, z)
    best = np.take_along_axis(a, np.asarray(alpha)[..., None], -1)
    m = best - a
    np.put_along_axis(m, np.asarray(alpha)[..., None], np.inf, -1)
    return m  # (..., n, T), +inf at the selected token


def test_mechanics_targets_hold():
    # chapter 9 runs this experiment at the same (default) settings: through the experiment
    # cache it is computed once, here or there
    res = run("md_mechanics")
    bad = [r for r in res.verdicts() if not r["ok"]]
    assert not bad, bad


def test_convergence_tiny_against_closed_forms():
    res = run("md_convergence", cache=False, trials=2, steps=(300, 300, 300), records=10)
    num, arr = res.numbers, res.arrays
    data = mirror_random_data(seed=1, trials=2).data
    X, z = data.X.numpy(), data.z.numpy()
    low = math.inf
    for j, lp in enumerate((1.75, 2.0, 3.0)):
        assert arr["steps_0"][-1] == 300  # the final iterate is the last record
        np.testing.assert_array_equal(arr[f"alpha_{j}"], logits(X, arr[f"W_{j}"], z).argmax(-1))
        low = min(low, margins(X, arr[f"Wmm_{j}"], z, arr[f"alpha_{j}"]).min())
        D = ddir(arr[f"Wmm_{j}"], arr[f"W_{j}"], lp)  # (trials,)
        np.testing.assert_allclose(arr[f"ddir_final_{j}"][j], D, rtol=1e-8, atol=1e-12)
        tag = {1.75: "p175", 2.0: "p2", 3.0: "p3"}[lp]
        np.testing.assert_allclose(num[f"ddir_{tag}"], D.mean(), rtol=1e-8)
        # local optimality: every support token (margin 1) scores below the selected one
        gamma = np.einsum("bntd,bd->bnt", X, data.v.numpy()) * data.Y.numpy()[..., None]
        sup = np.abs(margins(X, arr[f"Wmm_{j}"], z, arr[f"alpha_{j}"]) - 1) < 1e-5
        best = np.take_along_axis(gamma, arr[f"alpha_{j}"][..., None], -1)
        local = ~(sup & (gamma >= best)).any((-2, -1))
        assert num[f"local_opt_frac_{tag}"] == local.mean()
    assert num["svm_min_margin"] == pytest.approx(low, rel=1e-9)
    assert low == pytest.approx(1.0, abs=1e-6)  # the SVM's active constraints sit at 1
    # the dual-norm bound ||W_k||_p^(p-1) <= ||W_0||_p^(p-1) + eta k holds at any budget
    assert num["norm_violation"] <= 1e-10
    assert num["svm_scs_fallbacks"] == 0
    with pytest.raises(ValueError, match="steps"):
        run("md_convergence", cache=False, trials=1, steps=(10,))


def test_bias_tiny_sparsity_and_diagonal_by_counting():
    res = run("md_bias", cache=False, trials=2, steps=300)
    num, arr = res.numbers, res.arrays
    assert arr["rel_abs"].shape == (3, 200)
    for j, lp in enumerate((1.25, 2.0, 3.0)):
        assert num[f"sparsity_p{lp:g}"] == pytest.approx((arr["rel_abs"][j] < 0.01).mean())
    assert num["sparsity_ratio"] == pytest.approx(num["sparsity_p1.25"] / num["sparsity_p2"])
    D = arr["ddir"]
    ratios = [min(D[i, k] for k in range(3) if k != i) / D[i, i] for i in range(3)]
    assert num["diag_ratio_min"] == pytest.approx(min(ratios))
    assert num["sparsity_p1.25"] > num["sparsity_p2"]  # sparsity appears within 300 steps


@pytest.mark.slow
def test_failed_batched_svm_is_solved_trial_by_trial_and_fallbacks_counted(monkeypatch):
    from attnlib.svm import UncertifiedError, engine

    ref = run("md_bias", cache=False, trials=2, steps=100)
    real_mirror, real_run = mirror.att_svm, engine._run

    def batched_fails(data, **kw):  # the one-call solve of all trials fails
        if data.B is not None:
            raise UncertifiedError("batched solve failed")
        return real_mirror(data, **kw)

    monkeypatch.setattr(mirror, "att_svm", batched_fails)
    res = run("md_bias", cache=False, trials=2, steps=100)
    assert res.numbers["svm_scs_fallbacks"] == 0  # the first solver answered every trial
    np.testing.assert_allclose(res.arrays["ddir"], ref.arrays["ddir"], rtol=1e-4)

    def clarabel_fails(comp, items, solver, opts, warm):  # ... and now only SCS answers
        if solver == "CLARABEL":
            return "failed", "planted failure"
        return real_run(comp, items, solver, opts, warm)

    monkeypatch.setattr(engine, "_run", clarabel_fails)
    res = run("md_bias", cache=False, trials=2, steps=100)
    assert res.numbers["svm_scs_fallbacks"] == 2 * 3 * 3  # trials x q x p, all by SCS
    np.testing.assert_allclose(res.arrays["ddir"], ref.arrays["ddir"], rtol=1e-2, atol=1e-4)


def test_unnormalized_matches_an_autograd_resimulation():
    steps, lr, lp = 20, 10.0, 1.25
    res = run("md_unnormalized", cache=False, trials=2, steps=steps, records=10, lps=(lp, 2.0))
    arr = res.arrays
    assert arr["steps"][-1] == steps and np.all(np.diff(arr["steps"]) > 0)
    ex = mirror_random_data(seed=1, trials=2)
    d = ex.data
    for b in range(2):
        W = 0.01 * ex.init["W"][b].clone()
        for _ in range(steps):  # W <- (grad psi)^-1(grad psi(W) - lr grad L(W)), psi = |W|^p/p
            w = W.clone().requires_grad_(True)
            s = torch.softmax(torch.einsum("ntd,de,ne->nt", d.X[b], w, d.z[b]), -1)
            f = (s * (d.X[b] @ d.v[b])).sum(-1)
            torch.nn.functional.softplus(-d.Y[b] * f).mean().backward()
            theta = W.sign() * W.abs() ** (lp - 1) - lr * w.grad
            W = theta.sign() * theta.abs() ** (1 / (lp - 1))
        norm = float((W.abs() ** lp).sum() ** (1 / lp))
        assert arr["norm"][0][b, -1] == pytest.approx(norm, rel=1e-7)
    assert res.numbers["norm_p2"] == pytest.approx(arr["norm"][1][:, -1].mean())


def test_joint_tiny_selection_and_divergences():
    res = run("md_joint", cache=False, steps=(200, 200, 200), records=20)
    num, arr = res.numbers, res.arrays
    dW, dv = [], []
    for j, lp in enumerate((1.75, 2.0, 3.0)):
        d = mirror_joint_example(lp=lp).data
        W = arr[f"W_path_{j}"][-1]
        np.testing.assert_array_equal(arr[f"alpha_{j}"], logits(d.X, W, d.z).argmax(-1))
        dW.append(ddir(arr[f"W_mm_{j}"], W, lp))
        v, v_mm = arr[f"v_path_{j}"][-1], arr[f"v_mm_{j}"]
        dv.append(float(ddir(v_mm[None], v[None], lp)))  # (1, d): one vector
    assert num["ddir_W_max"] == pytest.approx(max(dW), rel=1e-8)
    assert num["ddir_v_max"] == pytest.approx(max(dv), rel=1e-8)
    assert num["loss_max"] < 0.1  # the toy is separated quickly


@pytest.mark.slow
def test_joint_selections_at_the_official_budgets():
    # chapter 9's run (p = 1.75, 2 and 3 at their official budgets), read through the
    # experiment cache: computed once, here or there
    res = run("md_joint", steps=(1500, 2000, 5000))
    res.require("selection_ok", "ddir_W_max", "ddir_v_max")


def test_path_divergences_and_svm_in_closed_form():
    res = run("md_path", cache=False, lp=1.5, seed=2)
    num, a = res.numbers, res.arrays
    d = mirror_random_data(2).data
    X, z = d.X.numpy(), d.z.numpy()
    assert a["W"].shape == (151, 10, 10) and a["steps"][-1] == 1500
    assert not a["W"][0].any()  # W(0) = 0
    np.testing.assert_array_equal(a["alpha"], logits(X, a["W"][-1], z).argmax(-1))
    for key, svm in (("D_lp", a["svm_lp"]), ("D_2", a["svm_2"])):
        np.testing.assert_allclose(a[key][1:], ddir(svm, a["W"][1:], 1.5), rtol=1e-8,
                                   atol=1e-12)
        assert a[key][0] == 1.0  # from W(0) = 0: no direction yet, the divergence's convention
        m = margins(X, svm, z, a["alpha"])
        assert m.min() == pytest.approx(1.0, abs=1e-6)  # feasible, some constraint active
    top = np.argsort(np.abs(a["svm_lp"]).ravel())[::-1][:2]
    assert [tuple(e) for e in a["entries"]] == [divmod(int(t), 10) for t in top]
    assert num["matched_closer"] == int(a["D_lp"][-1] <= a["D_2"][-1])
    assert a["D_lp"][-1] < a["D_2"][-1]  # the matched SVM is closer (chapter 9)


def test_path_at_p2_is_gradient_descent_to_the_frobenius_svm():
    a = run("md_path", cache=False, lp=2.0, steps=100, record_every=100).arrays
    np.testing.assert_array_equal(a["svm_lp"], a["svm_2"])
    d = mirror_random_data(1).data
    W = torch.zeros(10, 10, dtype=torch.float64)
    for _ in range(100):  # normalised GD: W <- W - 0.1 g / ||g||_F
        w = W.clone().requires_grad_(True)
        s = torch.softmax(torch.einsum("ntd,de,ne->nt", d.X, w, d.z), -1)
        torch.nn.functional.softplus(-d.Y * (s * (d.X @ d.v)).sum(-1)).mean().backward()
        W = W - 0.1 * w.grad / w.grad.norm()
    np.testing.assert_allclose(a["W"][-1], W.numpy(), rtol=1e-9, atol=1e-12)


def test_digits_tiny_aggregates_from_the_per_seed_arrays():
    res = run("md_digits", cache=False, steps=10, eval_every=5, seeds=2, lr_md=(0.3,),
              lr_gd=(1.0,), lr_adam=(0.01,))
    num, arr = res.numbers, res.arrays
    for k in ("md", "gd", "adam"):
        assert arr[f"W_{k}"].shape == (2, 20, 20)
        assert num[f"{k}_test_acc"] == pytest.approx(arr[f"{k}_test_acc"].mean())
        A = np.abs(arr[f"W_{k}"])
        np.testing.assert_allclose(arr[f"rel_abs_{k}"], (A / A.max((1, 2), keepdims=True)).ravel())
    md, gd = arr["md_sparsity"], arr["gd_sparsity"]
    assert num["sparsity_ratio"] == pytest.approx(md.mean() / max(gd.mean(), 1e-12))
    assert num["sparsity_seeds"] == int((md > gd).sum())
    assert num["entropy_lower"] == int(arr["md_entropy"].mean() < arr["gd_entropy"].mean())
    assert num["acc_diff"] == pytest.approx(
        100 * (arr["md_test_acc"].mean() - arr["gd_test_acc"].mean()))


def test_settings_are_typed_and_on_the_cpu_by_default():
    for name in ("md_mechanics", "md_convergence", "md_bias", "md_unnormalized", "md_joint",
                 "md_path", "md_digits"):
        exp = get(name)
        assert exp.defaults["device"] == "cpu"
        ann = exp.func.__annotations__
        assert set(ann) - {"return"} == set(exp.defaults), name


def test_each_experiment_draws_its_own_figure():
    from attnlib.figures import mirror as F

    for name, plot in (("md_convergence", F.plot_convergence), ("md_bias", F.plot_bias),
                       ("md_unnormalized", F.plot_unnormalized)):
        assert get(name).plot is plot, name
