"""Tests of attnlib.train's loop: every parameterisation against a per-trial autograd loop
(tests/train_helpers.py), mirror descent, batching, history, stopping, the config, and the
implicit biases. (Long runs and loop details: test_train_loop.py; bad input and prepare's
messages: test_train_input.py; mirror maps and the optimizer: test_train_mirror.py; non-finite
guards: test_mirror_numerics.py; the regularisation path: test_train_path.py.)"""

import numpy as np
import pytest
import torch
from train_helpers import F64, LOSSES, PARAMS, autograd_loop, seeded_init

import attnlib as al
import attnlib.models as M
from attnlib.train import TrainConfig


@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("method, lp", [("gd", 2.0), ("md", 1.5), ("md", 3.0)])
@pytest.mark.parametrize("param", PARAMS)
def test_matches_autograd_loop(small_data, param, method, lp, normalized):
    """Five steps of train() equal five steps of the plain autograd loop, every tensor."""
    init = seeded_init(small_data.d)
    kw = dict(steps=5, lr=0.2, method=method, lp=lp, normalized=normalized, eps=1e-3)
    r = al.train(small_data, param=param, init=init, record_every=1, **kw)
    ref = autograd_loop(small_data, param, init, **kw)
    for k, t in ref.items():
        assert torch.allclose(getattr(r, k), t, rtol=1e-10, atol=1e-12), k


@pytest.mark.parametrize("loss", LOSSES)
def test_losses_and_kq_penalty_match_autograd_loop(small_data, loss):
    init = seeded_init(small_data.d, seed=3)
    kw = dict(steps=3, lr=0.3, method="gd", lp=2.0, normalized=True, eps=0.0, loss=loss,
              reg=0.05)
    r = al.train(small_data, param="KQ", init=init, **kw)
    ref = autograd_loop(small_data, "KQ", init, **kw)
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
    ref = autograd_loop(small_data, "W", {"W": W0}, steps=3, lr=0.5, method="gd", lp=2.0,
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
    W0 = seeded_init(small_data.d)["W"]
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
    W0 = seeded_init(small_data.d)["W"]
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
    r = al.train(small_data, steps=30, progress=True, init={"W": seeded_init(6)["W"]})
    ref = al.train(small_data, steps=30, init={"W": seeded_init(6)["W"]})
    assert torch.equal(r.W, ref.W)


def test_package_exports():
    import importlib

    pkg = importlib.import_module("attnlib.train")
    assert al.train is pkg.train  # the function shadows the package as attnlib's attribute
    assert set(pkg.__all__) >= {"train", "regularization_path", "LpMirrorDescent",
                                "TrainResult", "PathResult", "mirror_map", "inverse_mirror_map",
                                "PARAMS", "METHODS", "TrainConfig"}


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
