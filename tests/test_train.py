"""Tests of attnlib.train's loop: every parameterisation against a per-trial autograd loop,
batching, history, stopping, validation. (Mirror maps and the optimizer: test_train_mirror.py;
non-finite guards: test_mirror_numerics.py; the regularisation path: test_train_path.py.)"""

import math
import re

import numpy as np
import pytest
import torch

import attnlib as al
import attnlib.models as M
from attnlib.train import TrainConfig, regularization_path

F64 = torch.float64
LOSSES = ["logistic", "exp", "correlation"]
PARAMS = ["W", "KQ", "p", "v", "W+v", "p+v"]
TRAINED = {"W": "W", "KQ": "KQ", "p": "p", "v": "v", "W+v": "Wv", "p+v": "pv"}


# ----------------------------------------------------------------------------- the oracle
def _signed_power(x, e):
    return torch.sign(x) * x.abs() ** e


def _autograd_loop(data, param, init, *, steps, lr, method, lp, normalized, eps, loss="logistic",
                   head=None, reg=0.0):
    """The plain per-trial loop: forward model + autograd, (mirror) step per tensor."""
    P = {k: init[k].clone() for k in TRAINED[param]}
    theta = {k: _signed_power(t, lp - 1) for k, t in P.items()}
    q = lp / (lp - 1) if method == "md" else 2.0
    for _ in range(steps):
        P = {k: t.detach().requires_grad_(True) for k, t in P.items()}
        W = P["K"] @ P["Q"].mT if "K" in P else P.get("W", init.get("W"))
        a = M.logits_prompt(data.X, W, P["p"]) if "p" in P else M.logits(data.X, W, data.z)
        L = M.risk(data.X, data.Y, M.softmax(a), P.get("v", data.v), head, loss)
        if "K" in P:
            L = L + reg * (P["K"].pow(2).sum() + P["Q"].pow(2).sum())
        grads = torch.autograd.grad(L, list(P.values()))
        for (k, t), g in zip(list(P.items()), grads):
            step = lr * g / (g.abs().pow(q).sum().pow(1 / q) + eps) if normalized else lr * g
            theta[k] = theta[k] - step
            P[k] = _signed_power(theta[k], 1 / (lp - 1)) if method == "md" else t - step
    return {k: t.detach() for k, t in P.items()}


def _init(d, seed=1, m=3):
    g = torch.Generator().manual_seed(seed)
    return {"W": torch.randn(d, d, generator=g, dtype=F64),
            "K": torch.randn(d, m, generator=g, dtype=F64),
            "Q": torch.randn(d, m, generator=g, dtype=F64),
            "p": torch.randn(d, generator=g, dtype=F64),
            "v": torch.randn(d, generator=g, dtype=F64)}


@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("method, lp", [("gd", 2.0), ("md", 1.5), ("md", 3.0)])
@pytest.mark.parametrize("param", PARAMS)
def test_matches_autograd_loop(small_data, param, method, lp, normalized):
    """Five steps of train() equal five steps of the plain autograd loop, every tensor."""
    init = _init(small_data.d)
    kw = dict(steps=5, lr=0.2, method=method, lp=lp, normalized=normalized, eps=1e-3)
    r = al.train(small_data, param=param, init=init, record_every=1, **kw)
    ref = _autograd_loop(small_data, param, init, **kw)
    for k, t in ref.items():
        assert torch.allclose(getattr(r, k), t, rtol=1e-10, atol=1e-12), k


@pytest.mark.parametrize("loss", LOSSES)
def test_losses_and_kq_penalty_match_autograd_loop(small_data, loss):
    init = _init(small_data.d, seed=3)
    kw = dict(steps=3, lr=0.3, method="gd", lp=2.0, normalized=True, eps=0.0, loss=loss,
              reg=0.05)
    r = al.train(small_data, param="KQ", init=init, **kw)
    ref = _autograd_loop(small_data, "KQ", init, **kw)
    assert torch.allclose(r.K, ref["K"], rtol=1e-10, atol=1e-12)
    assert torch.allclose(r.Q, ref["Q"], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("head", ["relu", "lambda", "mlp"])
def test_nonlinear_heads_match_autograd_loop(small_data, head):
    g = torch.Generator().manual_seed(2)
    d = small_data.d
    V = torch.randn(d, 4, generator=g, dtype=F64)
    extra = {"relu": {"V": V}, "lambda": {"lam": 0.4}, "mlp": {"V": V, "b": torch.ones(4)}}[head]
    W0 = torch.randn(d, d, generator=g, dtype=F64)
    r = al.train(small_data, param="W", init={"W": W0, **extra}, head=head, lr=0.5, steps=3,
                 normalized=False)
    ref = _autograd_loop(small_data, "W", {"W": W0}, steps=3, lr=0.5, method="gd", lp=2.0,
                         normalized=False, eps=0.0, head=M.make_head(head, extra, d=d))
    assert torch.allclose(r.W, ref["W"], rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- mirror descent
@pytest.mark.parametrize("param", ["W", "KQ", "p+v", "W+v"])
def test_md_at_lp2_equals_gd(batched_data, param):
    kw = dict(param=param, steps=50, lr=0.1, record_every=10, init={"p": torch.ones(6)}
              if "p" in param else None)
    gd = al.train(batched_data, method="gd", **kw)
    md = al.train(batched_data, method="md", lp=2.0, **kw)
    assert (gd.W - md.W).abs().max() <= 1e-12
    assert (gd.history["loss"] - md.history["loss"]).abs().max() <= 1e-12


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


def test_history_is_the_trajectory(batched_data):
    """Recorded iterates are those of shorter runs; loss and attention recomputed from them."""
    r = al.train(batched_data, param="KQ", steps=25, record_every=10)
    assert r.history["step"].tolist() == [0, 10, 20, 25]
    short = al.train(batched_data, param="KQ", steps=10)
    assert torch.equal(r.history["K"][:, 1], short.K)
    assert torch.equal(r.history["W"][:, -1], r.W)
    W = r.history["W"]  # (B, S, d, d)
    X, z = batched_data.X[:, None], batched_data.z[:, None]
    s = M.softmax(M.logits(X, W, z))  # (B, S, n, T)
    L = M.risk(X, batched_data.Y[:, None], s, batched_data.v[:, None])
    assert torch.allclose(r.history["loss"], L, rtol=1e-12)
    assert torch.allclose(r.history["max_prob"], s.amax(-1).mean(-1), rtol=1e-12)
    assert torch.allclose(r.history["min_max_prob"], s.amax(-1).amin(-1), rtol=1e-12)
    assert r.stopped.tolist() == [-1, -1, -1] and r.nonfinite.tolist() == [-1, -1, -1]
    assert r.stopped.dtype == r.nonfinite.dtype == torch.int64  # documented: int64 steps


def test_grad_norm_is_the_gradient_norm(small_data):
    W0 = _init(small_data.d)["W"]
    r = al.train(small_data, init={"W": W0}, steps=0, record_every=1)
    G = M.grad_W(small_data.X, small_data.Y, small_data.z, W0, small_data.v)
    assert torch.allclose(r.history["grad_norm"][0], G.norm(), rtol=1e-12)


def test_zero_gradient_stops_cleanly():
    """Equal token values give an exactly zero gradient: the trial freezes, no NaN (eps = 0)."""
    X = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=F64)
    data = al.AttentionData(X, torch.ones(1), z=torch.ones(1, 3), v=torch.tensor([0, 0, 1.0]))
    W0 = torch.randn(3, 3, dtype=F64)
    r = al.train(data, init={"W": W0}, steps=5, eps=0.0)
    assert r.stopped.item() == 0 and torch.equal(r.W, W0) and torch.isfinite(r.W).all()


def test_mask_hides_tokens_like_removing_them(small_data):
    """A token hidden by the mask weighs exactly as if it were absent from the input."""
    mask = torch.ones(small_data.n, small_data.T, dtype=torch.bool)
    mask[:, -1] = False
    W0 = _init(small_data.d)["W"]
    r = al.train(small_data, init={"W": W0}, steps=20, mask=mask)
    cut = al.AttentionData(small_data.X[:, :-1], small_data.Y, small_data.z, small_data.v)
    ref = al.train(cut, init={"W": W0}, steps=20)
    assert torch.allclose(r.W, ref.W, rtol=1e-11, atol=1e-12)
    assert torch.allclose(r.history["loss"], ref.history["loss"], rtol=1e-12)


def test_config_equals_keywords_and_accepts_numpy_scalars(batched_data):
    kw = dict(param="KQ", method="md", lp=1.5, lr=0.05, steps=12, normalized=True, eps=1e-6,
              reg=1e-3, record_every=4, seed=7)
    ref = al.train(batched_data, **kw)
    cfg = TrainConfig(**{**kw, "lr": np.float64(0.05), "steps": np.int64(12),
                         "lp": torch.tensor(1.5, dtype=F64), "seed": np.int32(7)})
    r = al.train(batched_data, config=cfg)
    assert torch.equal(r.W, ref.W) and r.settings == ref.settings
    assert isinstance(cfg.steps, int) and isinstance(cfg.lr, float)
    assert cfg.replace(steps=3).steps == 3
    with pytest.raises(ValueError, match="steps"):
        cfg.replace(steps=-1)
    with pytest.raises(ValueError, match="^config: expected a TrainConfig, got dict$"):
        al.train(batched_data, config=kw)


def test_config_stores_python_numbers_under_its_fields():
    t = torch.tensor
    cfg = TrainConfig(param="KQ", method="md", lr=t(0.5), steps=t(3), lp=t(1.5), reg=t(0.25),
                      eps=t(1e-3, dtype=F64), record_every=t(2), seed=t(4), loss="exp")
    got = {k: getattr(cfg, k) for k in ("lr", "steps", "lp", "reg", "eps", "record_every",
                                        "seed")}
    assert got == dict(lr=0.5, steps=3, lp=1.5, reg=0.25, eps=1e-3, record_every=2, seed=4)
    assert [type(v) for v in got.values()] == [float, int, float, float, float, int, int]
    assert set(vars(cfg)) == {f for f in TrainConfig.__dataclass_fields__}
    assert cfg.q == 3.0 and cfg.mirror and not TrainConfig(method="md").mirror


@pytest.mark.parametrize("field, value, msg", [
    ("param", "WQ", "^param: expected one of"), ("method", "adam", "^method: expected one of"),
    ("lr", 0.0, "^lr: expected a finite number > 0"),
    ("steps", -1, "^steps: expected an int >= 0"), ("lp", 1.0, "^lp: expected a finite number > 1"),
    ("loss", "hinge", "^loss: expected one of"), ("reg", -1.0, "^reg: expected a finite number"),
    ("eps", -1.0, "^eps: expected a finite number >= 0"),
    ("record_every", 0, "^record_every: expected an int >= 1"),
    ("seed", 0.5, "^seed: expected an int"), ("normalized", 1, "^normalized: expected True"),
])
def test_config_names_the_bad_field(field, value, msg):
    base = dict(method="md", param="KQ")
    with pytest.raises(ValueError, match=msg):
        TrainConfig(**{**base, field: value})


def test_progress_bar_runs(small_data):
    r = al.train(small_data, steps=30, progress=True, init={"W": _init(6)["W"]})
    ref = al.train(small_data, steps=30, init={"W": _init(6)["W"]})
    assert torch.equal(r.W, ref.W)


def test_package_exports():
    import importlib

    pkg = importlib.import_module("attnlib.train")
    assert al.train is pkg.train  # the function shadows the package as attnlib's attribute
    assert set(pkg.__all__) >= {"train", "regularization_path", "LpMirrorDescent",
                                "TrainResult", "PathResult", "mirror_map", "inverse_mirror_map",
                                "PARAMS", "METHODS", "TrainConfig"}


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
def test_long_run_to_norm_1e4_no_nan_and_direction_improves():
    # 20,000 steps of 0.5 carry ||W|| to about 1e4 (logits of order 1e4: softmax saturates
    # completely), as 100,000 steps of 0.1 do, at a fifth of the cost
    data = al.random_data(3, 4, 6, seed=1, device="cpu")
    r = al.train(data, lr=0.5, steps=20_000, record_every=2_000,
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
        (dict(lr=True), "lr"),
        (dict(progress="yes"), "progress"),
        (dict(seed=1.5), "seed"),
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
    with pytest.raises(ValueError, match="mask"):
        al.train(small_data, steps=1, mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask"):
        al.train(small_data, steps=1, mask=torch.zeros(4, 5, dtype=torch.bool))


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


# ----------------------------------------------------------------------------- loop details
def test_result_repr_and_fixed_tensors(small_data):
    r = al.train(small_data, steps=3, record_every=2, init={"W": _init(6)["W"]})
    assert repr(r) == ("TrainResult(param='W', method='gd', steps=3, W shape=(6, 6), history "
                       "keys=['W', 'grad_norm', 'loss', 'max_prob', 'min_max_prob', 'step'])")
    assert torch.equal(r.v, small_data.v) and r.p is None and r.K is None and r.Q is None
    W0 = _init(6)["W"]
    rv = al.train(small_data, param="v", steps=2)  # W fixed: the identity by default
    assert torch.equal(rv.W, torch.eye(6, dtype=F64)) and rv.v.shape == (6,)
    assert torch.equal(al.train(small_data, param="v", steps=2, init={"W": W0}).W, W0)
    rp = al.train(small_data, param="p", steps=2, init={"W": W0})
    assert torch.equal(rp.W, W0) and torch.equal(rp.v, small_data.v)


def test_progress_bar_counts_every_step(small_data, monkeypatch):
    """The bar (tqdm.auto) counts the steps: it ends at steps/steps, never past, and closes."""
    import tqdm.auto

    bars = []

    class Bar(tqdm.auto.tqdm):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.seen, self.kw = [], kw
            bars.append(self)

        def update(self, n=1):
            super().update(n)
            self.seen.append(self.n)

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    al.train(small_data, param="KQ", method="md", lp=1.5, steps=30, record_every=7,
             progress=True)
    (bar,) = bars
    assert bar.kw == dict(total=30, desc="train KQ (md)", leave=False)
    assert bar.seen == [7, 14, 21, 28, 30, 30] and bar.disable is True or bar.n == 30
    assert bar.seen[-1] == 30 and sorted(bar.seen) == bar.seen


@pytest.mark.parametrize("param", ["W+v", "KQ", "p+v"])
def test_grad_norm_of_several_tensors(small_data, param):
    """history["grad_norm"] is the norm of the whole gradient: sqrt(sum over tensors)."""
    init = _init(small_data.d, seed=4)
    r = al.train(small_data, param=param, init=init, steps=0, record_every=1)
    P = {k: init[k].clone().requires_grad_(True) for k in TRAINED[param]}
    W = P["K"] @ P["Q"].mT if "K" in P else P.get("W")
    a = M.logits_prompt(small_data.X, init["W"], P["p"]) if "p" in P else \
        M.logits(small_data.X, W, small_data.z)
    L = M.risk(small_data.X, small_data.Y, M.softmax(a), P.get("v", small_data.v))
    g = torch.autograd.grad(L, list(P.values()))
    ref = torch.sqrt(sum((x ** 2).sum() for x in g))
    assert torch.allclose(r.history["grad_norm"][0], ref, rtol=1e-12)
    assert torch.allclose(r.history["loss"][0], L.detach(), rtol=1e-12)


def test_one_zero_gradient_does_not_freeze_the_trial():
    """W's gradient is exactly zero at the start (equal token values) but v's is not: the
    trial moves on (it stops only when every trained tensor's update is zero)."""
    X = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=F64)
    data = al.AttentionData(X, torch.ones(1), z=torch.ones(1, 3), v=torch.tensor([0, 0, 1.0]))
    W0 = torch.randn(3, 3, dtype=F64, generator=torch.Generator().manual_seed(0))
    for normalized in (True, False):
        r = al.train(data, param="W+v", init={"W": W0}, steps=4, normalized=normalized)
        assert r.stopped.item() == -1 and not torch.equal(r.v, data.v)
        if normalized:  # the oracle divides W's zero gradient by its zero norm
            continue
        ref = _autograd_loop(data, "W+v", {"W": W0, "v": data.v}, steps=4, lr=0.1,
                             method="gd", lp=2.0, normalized=normalized, eps=0.0)
        assert torch.allclose(r.v, ref["v"], rtol=1e-12) and torch.allclose(r.W, ref["W"])
    # unnormalised, all tensors' gradients zero: stopped at step 0, nothing moves
    r = al.train(data, param="W", init={"W": W0}, steps=4, normalized=False)
    assert r.stopped.item() == 0 and torch.equal(r.W, W0)


def test_nonfinite_at_the_first_step_keeps_the_initial_values():
    """lp = 1.01 in float32 with a large step: every trial's first update overflows; each is
    flagged at step 0 and keeps its initial tensors; the warning says how many."""
    data = al.random_data(3, 4, 5, trials=2, seed=1, device="cpu", dtype=torch.float32)
    W0 = 0.1 * torch.ones(5, 5)
    with pytest.warns(RuntimeWarning, match=r"^train: 2 of 2 trials stopped at a non-finite "
                      r"update, 2 because the primal iterate .* \(lp=1.01 is close to 1 for "
                      r"torch.float32\); they keep their last finite values"):
        r = al.train(data, method="md", lp=1.01, lr=10.0, steps=3, record_every=1,
                     init={"W": W0})
    assert r.nonfinite.tolist() == [0, 0] and r.stopped.tolist() == [-1, -1]
    assert torch.equal(r.W, W0.expand(2, 5, 5)) and torch.isfinite(r.history["loss"]).all()


def test_nonfinite_in_one_of_two_tensors_stops_the_trial(data32_wv):
    """W overflows while v stays finite (W+v, lp = 1.01, float32): the trial is still flagged
    and keeps the last finite values of both tensors."""
    data, kw = data32_wv
    with pytest.warns(RuntimeWarning):
        r = al.train(data, **kw)
    bad = int(r.nonfinite.max())
    assert bad > 0 and torch.isfinite(r.W).all() and torch.isfinite(r.v).all()
    b = int(r.nonfinite.argmax())
    short = al.train(data, **{**kw, "steps": bad})
    assert torch.equal(r.W[b], short.W[b]) and torch.equal(r.v[b], short.v[b])


@pytest.fixture
def data32_wv():
    data = al.random_data(4, 5, 6, trials=4, seed=0, device="cpu", dtype=torch.float32)
    return data, dict(param="W+v", method="md", lp=1.01, lr=0.1, steps=100, record_every=50)


def test_train_signature_and_config_defaults():
    """The public call (CONTRIBUTING: signatures stay stable): train's defaults are
    TrainConfig's, and both are the documented ones."""
    import dataclasses
    import inspect

    documented = dict(param="W", method="gd", lr=0.1, steps=1000, normalized=True, lp=2.0,
                      loss="logistic", head="linear", init=None, reg=0.0, eps=0.0,
                      record_every=10, progress=False, seed=0, device=None, dtype=None,
                      config=None, mask=None)
    sig = inspect.signature(al.train).parameters
    assert {k: p.default for k, p in sig.items() if k != "data"} == documented
    fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    assert fields == {k: documented[k] for k in fields}
    assert TrainConfig().settings() == {k: documented[k] for k in fields if k != "progress"}


# ----------------------------------------------------------------------------- prepare's messages
def _no_z(d):
    return al.AttentionData(d.X, d.Y, v=d.v)


def _no_v(d):
    return al.AttentionData(d.X, d.Y, z=d.z)


_B2 = dict(trials=2, seed=0, device="cpu")
_KEYS = "['K', 'Q', 'V', 'W', 'b', 'lam', 'm', 'p', 'u', 'v']"


@pytest.mark.parametrize("make, kw, msg", [
    (lambda d: d.X, {}, "data: expected an attnlib.AttentionData, got Tensor"),
    (None, dict(init=[1]), "init: expected a dict of tensors, got list"),
    (None, dict(init={"Z": torch.zeros(6), "A": 1}),
     f"init: unknown key(s) ['A', 'Z']; expected some of {_KEYS}"),
    (None, dict(init={"W": torch.zeros(6)}),
     "init['W']: expected 2 dims (or one more for trials), got shape (6,)"),
    (None, dict(init={"p": torch.zeros(2, 3, 6)}, param="p"),
     "init['p']: expected 1 dims (or one more for trials), got shape (2, 3, 6)"),
    (None, dict(init={"W": torch.zeros(2, 6, 6), "p": torch.zeros(3, 6)}, param="v"),
     "init: the trials dimensions of data and init disagree: [2, 3]"),
    (lambda d: al.random_data(4, 5, 6, **_B2), dict(init={"W": torch.zeros(3, 6, 6)}),
     "init: the trials dimensions of data and init disagree: [2, 3]"),
    (None, dict(init={"W": torch.zeros(5, 5)}),
     "init['W']: expected shape (6, 6) (or with trials first), got (5, 5)"),
    (None, dict(init={"K": torch.zeros(6, 2), "Q": torch.zeros(6, 3)}, param="KQ"),
     "init['Q']: expected shape (6, 2) (or with trials first), got (6, 3)"),
    (None, dict(init={"m": 0}, param="KQ"), "init['m']: expected an int >= 1, got 0"),
    (None, dict(param="W+v", head="lambda", init={"lam": 0.1}),
     "param: 'W+v' trains v, which only the linear head has"),
    (_no_z, dict(param="v"), "init['p']: param 'v' needs query tokens data.z or a fixed prompt p"),
    (_no_z, dict(param="KQ"),
     "data.z: param 'KQ' needs query tokens z (use random_data or pass z)"),
    (_no_v, dict(param="W"), "data.v: the linear head needs v (or train it: param 'W+v' / 'p+v')"),
    (_no_v, dict(param="p", head="lambda", init={"lam": 0.2}),
     "data.v: the lambda head needs v (or train it: param 'W+v' / 'p+v')"),
    (None, dict(mask=torch.ones(3, 3, dtype=torch.bool)),
     "mask: expected shape (n, T) or (B, n, T) = (1, 4, 5), got (3, 3)"),
    (None, dict(mask=torch.ones(1, 2, 4, 5, dtype=torch.bool)),
     "mask: expected shape (n, T) or (B, n, T) = (1, 4, 5), got (1, 2, 4, 5)"),
    (None, dict(mask=torch.ones(4, 6, dtype=torch.bool)),
     "mask: expected shape (n, T) or (B, n, T) = (1, 4, 5), got (4, 6)"),
    (None, dict(mask=torch.zeros(4, 5, dtype=torch.bool).index_fill(1, torch.tensor([0]), 1)
                .index_fill(0, torch.tensor([2]), 0)),
     "mask: expected every input to see at least one token"),
])
def test_prepare_names_the_problem_exactly(small_data, make, kw, msg):
    data = small_data if make is None else make(small_data)
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        al.train(data, steps=1, **kw)


def test_prepare_accepts_what_it_documents(small_data):
    """The other side of each check: a fixed prompt for param 'v' without z; the relu head
    needs no v; a batched mask; float32 data trained in float64 equals float64 data."""
    p0 = torch.ones(6, dtype=F64)
    r = al.train(_no_z(small_data), param="v", init={"p": p0}, steps=3, lr=0.2)
    a = M.logits_prompt(small_data.X, torch.eye(6, dtype=F64), p0)
    L = M.risk(small_data.X, small_data.Y, M.softmax(a), r.v)
    assert torch.allclose(r.history["loss"][-1], L, rtol=1e-12)
    V = torch.randn(6, 3, dtype=F64, generator=torch.Generator().manual_seed(1))
    al.train(_no_v(small_data), head="relu", init={"V": V}, steps=2)
    mask = torch.ones(2, 4, 5, dtype=torch.bool)
    mask[1, :, 0] = False
    W0 = _init(6)["W"]
    rb = al.train(small_data, init={"W": W0.expand(2, 6, 6)}, mask=mask, steps=4)
    r0 = al.train(small_data, init={"W": W0}, steps=4)
    r1 = al.train(small_data, init={"W": W0}, mask=mask[1], steps=4)
    assert torch.allclose(rb.W[0], r0.W, rtol=1e-12, atol=1e-14)
    assert torch.allclose(rb.W[1], r1.W, rtol=1e-12, atol=1e-14)
    assert not torch.allclose(r0.W, r1.W, rtol=1e-6)
    r32 = al.train(small_data.to("cpu", torch.float32), init={"W": W0}, steps=4, dtype=F64)
    assert r32.W.dtype == F64 and torch.allclose(r32.W, r0.W, rtol=1e-6)


def test_train_defaults_are_the_documented_ones(monkeypatch):
    """A call with every default equals one that spells the documented values out (the
    signature test above cannot see a wrapper's defaults; this call can)."""
    import tqdm.auto

    def no_bar(*a, **kw):
        raise AssertionError("a progress bar by default")

    monkeypatch.setattr(tqdm.auto, "tqdm", no_bar)
    data = al.random_data(2, 2, 2, seed=1, device="cpu")
    a = al.train(data)
    cfg = TrainConfig(param="W", method="gd", lr=0.1, steps=1000, normalized=True, lp=2.0,
                      loss="logistic", head="linear", reg=0.0, eps=0.0, record_every=10,
                      seed=0, progress=False)
    b = al.train(data, config=cfg)
    assert torch.equal(a.W, b.W) and a.settings == b.settings == cfg.settings()
    assert torch.equal(a.history["step"], torch.arange(0, 1001, 10))


def test_loop_runs_under_few_threads_with_the_step_size(batched_data, monkeypatch):
    """run() limits threads by the size of one step, B*n*T*max(T, d), on the data's device
    (tiny problems: one thread; big ones keep theirs)."""
    import importlib

    loop = importlib.import_module("attnlib.train.loop")  # attnlib.train is the function
    real, calls = loop.few_threads, []

    def few(work=None, device=None):
        calls.append((work, device))
        return real(work, device)

    monkeypatch.setattr(loop, "few_threads", few)
    al.train(batched_data, steps=2)  # B=3, n=4, T=5, d=6
    data = al.random_data(2, 7, 3, seed=0, device="cpu")  # T > d
    al.train(data, steps=2)
    assert calls == [(3 * 4 * 5 * 6, torch.device("cpu")), (1 * 2 * 7 * 7, torch.device("cpu"))]
