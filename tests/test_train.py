"""Tests of attnlib.train: the batched trainer, mirror descent, regularisation path, optimizer."""

import math

import pytest
import torch

import attnlib as al
import attnlib.models as M
from attnlib.train import LpMirrorDescent, inverse_mirror_map, mirror_map, regularization_path

F64 = torch.float64
LOSSES = ["logistic", "exp", "correlation"]


# ----------------------------------------------------------------------------- one step = formula
def _autograd_step(data, param, init, lr, loss, head):
    """One unnormalised GD step computed with autograd on the plain forward model."""
    names = {"W": "W", "KQ": "KQ", "p": "p", "v": "v", "W+v": "Wv", "p+v": "pv"}[param]
    P = {k: init[k].clone().requires_grad_(True) for k in names}
    W = P["K"] @ P["Q"].mT if "K" in P else P.get("W", init.get("W"))
    if "p" in P:
        a = M.logits_prompt(data.X, W, P["p"])
    else:
        a = M.logits(data.X, W, data.z)
    v = P.get("v", data.v)
    L = M.risk(data.X, data.Y, M.softmax(a), v, head, loss)
    L.backward()
    return {k: (t - lr * t.grad).detach() for k, t in P.items()}


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("param", ["W", "KQ", "p", "v", "W+v", "p+v"])
def test_one_step_matches_autograd(small_data, param, loss):
    g = torch.Generator().manual_seed(1)
    d = small_data.d
    init = {"W": torch.randn(d, d, generator=g, dtype=F64),
            "K": torch.randn(d, 3, generator=g, dtype=F64),
            "Q": torch.randn(d, 3, generator=g, dtype=F64),
            "p": torch.randn(d, generator=g, dtype=F64),
            "v": torch.randn(d, generator=g, dtype=F64)}
    r = al.train(small_data, param=param, init=init, lr=0.3, steps=1, normalized=False,
                 loss=loss, record_every=1)
    ref = _autograd_step(small_data, param, init, 0.3, loss, None)
    for k, t in ref.items():
        assert torch.allclose(getattr(r, k), t, rtol=1e-11, atol=1e-13), k


@pytest.mark.parametrize("head", ["relu", "lambda", "mlp"])
def test_one_step_nonlinear_heads_match_autograd(small_data, head):
    g = torch.Generator().manual_seed(2)
    d = small_data.d
    V = torch.randn(d, 4, generator=g, dtype=F64)
    extra = {"relu": {"V": V}, "lambda": {"lam": 0.4}, "mlp": {"V": V, "b": torch.ones(4)}}[head]
    W0 = torch.randn(d, d, generator=g, dtype=F64)
    r = al.train(small_data, param="W", init={"W": W0, **extra}, head=head, lr=0.5, steps=1,
                 normalized=False)
    h = M.make_head(head, extra, d=d)
    ref = _autograd_step(small_data, "W", {"W": W0}, 0.5, "logistic", h)
    assert torch.allclose(r.W, ref["W"], rtol=1e-11, atol=1e-13)


def test_normalized_step_has_length_lr(batched_data):
    r = al.train(batched_data, steps=1, lr=0.1, record_every=1,
                 init={"W": torch.zeros(batched_data.d, batched_data.d, dtype=F64)})
    assert torch.allclose(r.W.flatten(1).norm(dim=1), torch.full((3,), 0.1, dtype=F64))


# ----------------------------------------------------------------------------- mirror descent
@pytest.mark.parametrize("lp", [1.1, 1.25, 1.75, 2.0, 3.0])
def test_mirror_map_round_trip(lp):
    W = torch.randn(10, 10, dtype=F64, generator=torch.Generator().manual_seed(0))
    back = inverse_mirror_map(mirror_map(W, lp), lp)
    assert ((back - W).abs() / W.abs().clamp_min(1)).max() <= 1e-10


@pytest.mark.parametrize("param", ["W", "KQ", "p+v", "W+v"])
def test_md_at_lp2_equals_gd(batched_data, param):
    kw = dict(param=param, steps=50, lr=0.1, record_every=10, init={"p": torch.ones(6)}
              if "p" in param else None)
    gd = al.train(batched_data, method="gd", **kw)
    md = al.train(batched_data, method="md", lp=2.0, **kw)
    assert (gd.W - md.W).abs().max() <= 1e-12
    assert (gd.history["loss"] - md.history["loss"]).abs().max() <= 1e-12


def test_md_step_is_the_mirror_update(small_data):
    W0 = torch.randn(6, 6, dtype=F64, generator=torch.Generator().manual_seed(4))
    lp, lr = 1.5, 0.2
    r = al.train(small_data, method="md", lp=lp, lr=lr, steps=1, normalized=True,
                 init={"W": W0})
    G = M.grad_W(small_data.X, small_data.Y, small_data.z, W0, small_data.v)
    q = lp / (lp - 1)
    theta = mirror_map(W0, lp) - lr * G / G.abs().pow(q).sum().pow(1 / q)
    assert torch.allclose(r.W, inverse_mirror_map(theta, lp), rtol=1e-12, atol=1e-14)


def test_md_normalized_dual_norm_invariant(small_data):
    """Normalised MD: ||W_k||_p^{p-1} = ||Theta_k||_q <= ||Theta_0||_q + lr k."""
    lp = 3.0
    r = al.train(small_data, method="md", lp=lp, lr=0.1, steps=300, record_every=50)
    Wh = r.history["W"]
    lhs = al.lp_norm(Wh, lp) ** (lp - 1)
    assert (lhs <= lhs[0] + 0.1 * r.history["step"] + 1e-9).all()


# ----------------------------------------------------------------------------- batching
@pytest.mark.parametrize("param, method, lp", [("W", "gd", 2.0), ("KQ", "gd", 2.0),
                                               ("W", "md", 1.5), ("p+v", "gd", 2.0)])
def test_batched_equals_looped(batched_data, param, method, lp):
    """B trials in one call equal B single calls (float64, 1e-10)."""
    g = torch.Generator().manual_seed(5)
    init = {k: 0.3 * torch.randn(3, *shape, generator=g, dtype=F64)
            for k, shape in {"W": (6, 6), "K": (6, 4), "Q": (6, 4), "p": (6,)}.items()}
    kw = dict(param=param, method=method, lp=lp, steps=40, lr=0.1, record_every=8)
    big = al.train(batched_data, init=init, **kw)
    for b in range(3):
        one = al.train(batched_data.trial(b), init={k: t[b] for k, t in init.items()}, **kw)
        assert (big.W[b] - one.W).abs().max() <= 1e-10
        assert (big.history["loss"][b] - one.history["loss"]).abs().max() <= 1e-10


def test_shared_data_with_batched_init(small_data):
    W0 = torch.randn(4, 6, 6, dtype=F64, generator=torch.Generator().manual_seed(0))
    r = al.train(small_data, init={"W": W0}, steps=20)
    assert r.W.shape == (4, 6, 6) and r.history["loss"].shape == (4, 3)
    one = al.train(small_data, init={"W": W0[2]}, steps=20)
    assert (one.W - r.W[2]).abs().max() <= 1e-12 and one.history["loss"].shape == (3,)


def test_history_layout(batched_data):
    r = al.train(batched_data, param="KQ", steps=25, record_every=10)
    assert r.history["step"].tolist() == [0, 10, 20, 25]
    assert r.history["W"].shape == (3, 4, 6, 6) and r.history["K"].shape == (3, 4, 6, 6)
    assert torch.allclose(r.history["W"][:, -1], r.W)
    assert r.history["max_prob"].shape == (3, 4) and r.stopped.tolist() == [-1, -1, -1]
    assert (r.history["min_max_prob"] <= r.history["max_prob"]).all()
    assert r.history["loss"][:, -1].lt(r.history["loss"][:, 0]).all()


def test_zero_gradient_stops_cleanly():
    """Equal token values give an exactly zero gradient: the trial freezes, no NaN (eps = 0)."""
    X = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=F64)
    data = al.AttentionData(X, torch.ones(1), z=torch.ones(1, 3), v=torch.tensor([0, 0, 1.0]))
    W0 = torch.randn(3, 3, dtype=F64)
    r = al.train(data, init={"W": W0}, steps=5, eps=0.0)
    assert r.stopped.item() == 0 and torch.equal(r.W, W0) and torch.isfinite(r.W).all()


def test_progress_bar_runs(small_data):
    r = al.train(small_data, steps=30, progress=True)
    assert r.history["step"][-1] == 30


# ----------------------------------------------------------------------------- saturation
def _lp_svm(data, alpha, lp):
    """Independent lp-AttSVM oracle: the dual max_{lam>=0} 1'lam - ||A'lam||_q^q / q by
    L-BFGS-B, W = sign(A'lam)|A'lam|^(q-1) (mirror-descent digest, section 3.1)."""
    import numpy as np
    from scipy.optimize import minimize

    X, z = data.X.numpy(), data.z.numpy()
    rows = [np.outer(X[i, alpha[i]] - X[i, t], z[i]).ravel()
            for i in range(data.n) for t in range(data.T) if t != alpha[i]]
    A = np.array(rows)
    q = lp / (lp - 1)

    def f(lam):
        u = A.T @ lam
        au = np.abs(u)
        return -(lam.sum() - (au**q).sum() / q), -(1 - A @ (np.sign(u) * au ** (q - 1)))

    lam = minimize(f, np.full(len(A), 0.1), jac=True, method="L-BFGS-B",
                   bounds=[(0, None)] * len(A), options={"maxiter": 20000, "ftol": 1e-15,
                                                         "gtol": 1e-12}).x
    u = A.T @ lam
    W = (np.sign(u) * np.abs(u) ** (q - 1)).reshape(data.d, data.d)
    assert (A @ W.ravel()).min() > 1 - 1e-4  # feasible: every margin >= 1
    return torch.as_tensor(W)


@pytest.mark.slow
@pytest.mark.parametrize("lp", [1.1, 1.75, 2.0, 3.0])
def test_normalized_md_saturation(lp):
    """1e4 normalised MD steps: no NaN, saturated softmax, and the direction keeps approaching
    the matching lp-SVM of the final selection (directional Bregman divergence falls)."""
    data = al.random_data(4, 5, 8, seed=3, device="cpu")
    r = al.train(data, method="md", lp=lp, lr=0.1, steps=10_000, record_every=500,
                 init={"W": torch.zeros(8, 8, dtype=F64)})
    Wh = r.history["W"]
    assert torch.isfinite(Wh).all() and torch.isfinite(r.history["loss"]).all()
    assert r.history["min_max_prob"][-1] > 0.999
    alpha = al.selected_tokens(data, r.W)
    W_mm = _lp_svm(data, alpha.tolist(), lp)
    if lp == 2.0:  # the oracle agrees with the library's Frobenius SVM
        assert al.correlation(W_mm, al.att_svm(data, alpha=alpha, norm="fro")) > 1 - 1e-6
    D = al.bregman_direction(W_mm, Wh, lp)
    assert D[-1] < 0.05 and D[-1] <= D[len(D) // 2] + 1e-6 and D[len(D) // 2] <= D[2] + 1e-6


@pytest.mark.slow
def test_gd_1e5_steps_no_nan_and_direction_improves():
    data = al.random_data(3, 4, 6, seed=1, device="cpu")
    r = al.train(data, lr=0.1, steps=100_000, record_every=10_000,
                 init={"W": torch.zeros(6, 6, dtype=F64)})
    assert torch.isfinite(r.history["W"]).all() and r.stopped.item() == -1
    W_mm = al.att_svm(data, alpha=al.selected_tokens(data, r.W), norm="fro")
    c = al.correlation(r.history["W"], W_mm)
    assert c[-1] > 0.999 and c[-1] >= c[1] - 1e-9
    assert r.W.norm() > 9000  # the norm kept growing ~ lr per step


# ----------------------------------------------------------------------------- theory
@pytest.mark.slow
def test_gd_W_aligns_with_frobenius_svm_and_KQ_with_nuclear():
    data = al.random_data(6, 8, 10, trials=4, seed=0, device="cpu")
    rW = al.train(data, param="W", steps=2000, lr=0.1, record_every=2000)
    rK = al.train(data, param="KQ", steps=2000, lr=0.1, record_every=2000,
                  reg=torch.finfo(F64).eps)
    cW, cK, cross = [], [], []
    for b in range(4):
        db = data.trial(b)
        fro = al.att_svm(db, alpha=al.selected_tokens(db, rW.W[b]), norm="fro")
        nuc = al.att_svm(db, alpha=al.selected_tokens(db, rK.W[b]), norm="nuc")
        cW.append(float(al.correlation(rW.W[b], fro)))
        cK.append(float(al.correlation(rK.W[b], nuc)))
        cross.append(float(al.correlation(rK.W[b], fro)))
    # the digest's re-simulation: mean 0.997 / 0.997, minimum over 100 runs 0.990 / 0.984
    assert sum(cW) / 4 > 0.99 and min(cW) > 0.98, cW
    assert sum(cK) / 4 > 0.99 and min(cK) > 0.98, cK
    assert sum(cross) / 4 < sum(cK) / 4  # the two implicit biases differ


def test_three_token_basins():
    """E1: global scores -> every run selects token 1; local scores -> c in {-1,-1.5} go to
    token 2 (the locally optimal direction (1,0))."""
    for scores in ("global", "local"):
        ex = al.three_token_example(scores, device="cpu")
        r = al.train(ex.data, init=ex.init, **{**ex.settings, "steps": 600})
        a = M.logits_prompt(ex.data.X, ex.init["W"], r.p[:, None]).squeeze(1)  # (6, 1, T)
        sel = a.argmax(-1)[:, 0].tolist()
        assert sel == ex.known["final_selection"], (scores, sel)
        for b, t in enumerate(sel):
            assert al.correlation(r.p[b], ex.known["p_mm"][t]) > 0.99


def test_regularization_path_turns_to_max_margin():
    ex = al.three_token_example("global", device="cpu")
    path = regularization_path(ex.data, [1, 4, 16], param="p", init={"W": ex.init["W"]},
                               steps=800)
    c = al.correlation(path.p, ex.known["p_mm"][0])
    assert torch.allclose(path.p.norm(dim=-1), torch.tensor([1.0, 4, 16], dtype=F64))
    assert c[0] < c[1] < c[2] and c[2] > 0.99
    W = regularization_path(al.random_data(3, 4, 6, trials=2, device="cpu"), [2.0, 8.0],
                            steps=50)
    assert W.W.shape == (2, 2, 6, 6) and W.loss.shape == (2, 2)
    assert (W.loss[:, 1] < W.loss[:, 0]).all()


# ----------------------------------------------------------------------------- optimizer
def test_lp_mirror_descent_at_2_is_sgd():
    torch.manual_seed(0)
    a, b = torch.nn.Linear(5, 3).double(), torch.nn.Linear(5, 3).double()
    b.load_state_dict(a.state_dict())
    oa, ob = LpMirrorDescent(a.parameters(), lr=0.05, lp=2.0), torch.optim.SGD(b.parameters(),
                                                                               lr=0.05)
    x = torch.randn(20, 5, dtype=F64)
    for _ in range(10):
        for m, o in ((a, oa), (b, ob)):
            o.zero_grad()
            m(x).pow(2).mean().backward()
            o.step()
    assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lp_mirror_descent_lp11_long_run_finite(dtype):
    """1e4 unnormalised l1.1 steps (the real-data setting) on logistic regression: finite (the
    primal weights reach ~1e-17 and ~60 in float32) and the data are fitted."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, dtype=dtype, generator=g)
    y = torch.sign(x[:, 0] + 0.2 * x[:, 1])  # separable through the origin
    w = torch.nn.Parameter(0.01 * torch.randn(8, dtype=dtype, generator=g))
    opt = LpMirrorDescent([w], lr=0.05, lp=1.1)
    for _ in range(10_000):
        with torch.no_grad():  # logistic-regression gradient, by hand (no autograd overhead)
            w.grad = -(x * (y * torch.sigmoid(-y * (x @ w))).unsqueeze(1)).mean(0)
        opt.step()
    assert torch.isfinite(w).all()
    assert (torch.sign(x @ w) == y).float().mean() > 0.97


def test_lp_mirror_descent_matches_train(small_data):
    """The optimizer on the autograd model follows al.train's md trajectory."""
    W0 = torch.randn(6, 6, dtype=F64, generator=torch.Generator().manual_seed(9))
    ref = al.train(small_data, method="md", lp=1.5, lr=0.05, steps=40, init={"W": W0})
    W = W0.clone().requires_grad_(True)
    opt = LpMirrorDescent([W], lr=0.05, lp=1.5, normalized=True)
    for _ in range(40):
        opt.zero_grad()
        s = M.softmax(M.logits(small_data.X, W, small_data.z))
        M.risk(small_data.X, small_data.Y, s, small_data.v).backward()
        opt.step()
    assert torch.allclose(W.detach(), ref.W, rtol=1e-9, atol=1e-11)


def test_lp_mirror_descent_resyncs_after_external_edit():
    w = torch.nn.Parameter(torch.ones(3, dtype=F64))
    opt = LpMirrorDescent([w], lr=0.1, lp=1.5)
    w.grad = torch.ones(3, dtype=F64)
    opt.step()
    with torch.no_grad():
        w.fill_(2.0)
    opt.step()
    theta = mirror_map(torch.full((3,), 2.0, dtype=F64), 1.5) - 0.1
    assert torch.allclose(w, inverse_mirror_map(theta, 1.5))


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kw, word",
    [
        (dict(param="WQ"), "param"),
        (dict(method="adam"), "method"),
        (dict(lr=0.0), "lr"),
        (dict(lr=float("nan")), "lr"),
        (dict(steps=-1), "steps"),
        (dict(steps=2.5), "steps"),
        (dict(method="md", lp=1.0), "lp"),
        (dict(method="gd", lp=1.5), "lp"),
        (dict(loss="hinge"), "loss"),
        (dict(reg=1e-3), "reg"),
        (dict(reg=-1.0, param="KQ"), "reg"),
        (dict(eps=-1.0), "eps"),
        (dict(record_every=0), "record_every"),
        (dict(head="cubic"), "head"),
        (dict(head="relu"), "V"),
        (dict(param="W+v", head="lambda", init={"lam": 0.1}), "param"),
        (dict(init={"W": torch.zeros(5, 5)}), "init"),
        (dict(init={"W": torch.zeros(2, 6, 6), "p": torch.zeros(3, 6)}, param="v"), "init"),
        (dict(init={"Z": torch.zeros(6)}), "init"),
        (dict(init={"W": torch.full((6, 6), float("nan"))}), "init"),
        (dict(normalized=1), "normalized"),
        (dict(dtype=torch.int32), "dtype"),
    ],
)
def test_bad_input_raises(small_data, kw, word):
    with pytest.raises(ValueError, match=word):
        al.train(small_data, **{"steps": 2, **kw})


def test_bad_data_raises(small_data):
    with pytest.raises(ValueError, match="data"):
        al.train(small_data.X, steps=1)
    with pytest.raises(ValueError, match="data.z"):
        al.train(al.AttentionData(small_data.X, small_data.Y, v=small_data.v), param="W")
    with pytest.raises(ValueError, match="data.v"):
        al.train(al.AttentionData(small_data.X, small_data.Y, z=small_data.z), param="W")
    with pytest.raises(ValueError, match="radii"):
        regularization_path(small_data, [1.0, -2.0])
    with pytest.raises(ValueError, match="lp"):
        LpMirrorDescent([torch.zeros(2, requires_grad=True)], lr=0.1, lp=0.5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_request_without_cuda_raises(small_data):
    with pytest.raises(ValueError, match="device"):
        al.train(small_data, steps=1, device="cuda")


@pytest.mark.cuda
def test_cuda_matches_cpu():
    data = al.random_data(6, 8, 10, trials=8, seed=0, device="cpu")
    cpu = al.train(data, param="KQ", steps=200)
    gpu = al.train(data, param="KQ", steps=200, device="cuda")
    assert gpu.W.device.type == "cuda"
    assert torch.allclose(gpu.W.cpu(), cpu.W, rtol=1e-8, atol=1e-10)
    assert math.isfinite(float(gpu.history["loss"].sum()))
