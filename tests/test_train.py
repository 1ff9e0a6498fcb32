"""Tests of attnlib.train's loop: every parameterisation against a per-trial autograd loop
(tests/train_helpers.py), mirror descent, batching, history, stopping, the config, and the
implicit biases; and of attnlib.train.setup: make_gradient against autograd of the risk written
here with einsum and attnlib.models' risk (per trial, per trained tensor, both of its paths:
pair features and the factored form), invariant under a permutation of the tokens, and prepare's
default initial values against the documented law U(-1/sqrt(d), 1/sqrt(d)) drawn from the seed
in float64. (Long runs and loop details: test_train_loop.py; bad input and prepare's messages:
test_train_input.py; mirror maps and the optimizer: test_train_mirror.py; non-finite guards:
test_mirror_numerics.py; the regularisation path: test_train_path.py.)"""

import math

import numpy as np
import pytest
import torch
from train_helpers import F64, LOSSES, PARAMS, autograd_loop, seeded_init

import attnlib as al
import attnlib.models as M
from attnlib.train import TrainConfig
from attnlib.train.setup import make_gradient, prepare, stack_kq


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


@pytest.mark.parametrize("q, eps", [(2.0, 0.7), (3.0, 0.0), (1.5, 1e-3)])
def test_normalized_step_of_a_scaled_gradient(q, eps):
    """normalized_step(g, lr, q, eps, log_scale=k) of g = G exp(k) is lr G / (||G||_q + eps)
    per row, the formula written out in float64 on random G and k."""
    from attnlib.train.mirror import normalized_step

    g, k = _rand(4, 3, seed=int(10 * q)), 3 * _rand(4, seed=int(10 * q) + 1)
    G = g * torch.exp(-k)[:, None]
    want = 0.3 * G / (G.abs().pow(q).sum(1, keepdim=True) ** (1 / q) + eps)
    torch.testing.assert_close(normalized_step(g, 0.3, q, eps, log_scale=k), want, rtol=1e-13,
                               atol=0)


def test_keep_dual_must_be_a_flag():
    w = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="keep_dual: expected True or False, got 1"):
        al.LpMirrorDescent([w], lr=0.1, keep_dual=1)


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
    head = M.make_head("relu", {"V": torch.eye(3)}, d=3)  # settings name a head by its name
    s = TrainConfig(head=head).settings()
    assert s["head"] == head.name == "relu" and "progress" not in s
    assert TrainConfig().settings()["head"] == "linear"


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


# ----------------------------------------------------------------------------- setup: gradient
def _rand(*shape, seed):
    return torch.randn(*shape, dtype=F64, generator=torch.Generator().manual_seed(seed))


def _oracle(data, P, fixed, head, loss, reg, mask=None):
    """Risk per trial and the autograd gradient of its sum (the trials are independent)."""
    P = {k: t.detach().clone().requires_grad_(True) for k, t in P.items()}
    X, z = data.X, data.z
    if "p" in P or ("p" in fixed and "W" not in P and "K" not in P):
        W = fixed["W"]
        a = torch.einsum("bntd,bde,be->bnt", X, W, P["p"] if "p" in P else fixed["p"])
    else:
        W = P["K"] @ P["Q"].mT if "K" in P else P.get("W", fixed.get("W"))
        a = torch.einsum("bntd,bde,bne->bnt", X, W, z)  # x_it^T W z_i
    if mask is not None:
        a = a.masked_fill(~mask, -math.inf)
    risk = M.risk(X, data.Y, torch.softmax(a, -1), P.get("v", fixed.get("v")), head, loss)
    total = risk.sum()
    if "K" in P:
        total = total + reg * (P["K"].pow(2).sum() + P["Q"].pow(2).sum())
    g = dict(zip(P, torch.autograd.grad(total, list(P.values()))))
    if "K" in g:
        g["KQ"] = torch.stack((g.pop("K"), g.pop("Q")), 1)
    return risk.detach(), W.detach(), g


def _true_gradient(data, param, init, head, loss, reg, mask, scaled):
    prob = prepare(data, param, init, head, 3, mask=mask)
    G, K, out = make_gradient(prob, loss, param, reg, scaled=scaled)(stack_kq(prob.P),
                                                                     extras=True)
    assert set(G) == set(K) and all(k.shape == (prob.B,) for k in K.values())
    assert scaled or all(torch.equal(k, torch.zeros_like(k)) for k in K.values())
    G = {k: g * torch.exp(-K[k].view(-1, *[1] * (g.ndim - 1))) for k, g in G.items()}
    return prob, G, K, out


def _mask(T):
    mask = torch.ones(2, 3, T, dtype=torch.bool)
    mask[0, :, 1] = False
    mask[1, 2, :3] = False
    return mask


# (param, d, loss, head, init keys, mask, reg, scaled): n=3, T=4, two trials; d=4 takes the
# pair features (B n T d^2 <= 3e4), d=60 the factored form
GRADIENT_CASES = [
    *[(param, d, ("logistic", "exp")[(i + (d > 4)) % 2], "linear", "Wp" if "p" in param else "W",
       False, 0.0, True) for i, param in enumerate(PARAMS) for d in (4, 60)],
    *[("KQ", d, "logistic", "linear", "KQ", False, 0.3, True) for d in (4, 60)],
    *[("W", d, "correlation", head, "W" + x, False, 0.0, True) for d in (4, 60)
      for head, x in (("relu", "V"), ("lambda", "l"))],
    *[(param, d, "logistic", "linear", "Wp" if "p" in param else "W", True, 0.0, True)
      for d in (4, 60) for param in ("W", "p+v")],
    *[(param, 5, "exp", "linear", "W", False, 0.0, False) for param in ("W", "W+v", "KQ")],
    ("v", 5, "logistic", "linear", "Wp-z", False, 0.0, True),  # no queries: the fixed prompt
]


@pytest.mark.parametrize("param, d, loss, head, keys, masked, reg, scaled", GRADIENT_CASES)
def test_gradient_matches_autograd(param, d, loss, head, keys, masked, reg, scaled):
    """G exp(-K) of make_gradient is autograd's gradient of every trained tensor, at random
    non-symmetric W, K, Q (width 2), p, v; the loss and W it reports are the forward ones; and
    permuting the tokens (with the mask) leaves all of them unchanged."""
    data = al.random_data(3, 4, d, trials=2, seed=5 + d, device="cpu")
    if "-z" in keys:
        data = al.AttentionData(data.X, data.Y, v=data.v)
    pool = {"W": 3 * _rand(2, d, d, seed=1) / d ** 0.5, "p": _rand(2, d, seed=2),
            "K": _rand(2, d, 2, seed=3), "Q": _rand(2, d, 2, seed=4), "V": _rand(d, 3, seed=6),
            "lam": 0.4}
    init = {k: pool[k] for k in pool if k[0] in keys}
    mask = _mask(4) if masked else None
    prob, G, K, out = _true_gradient(data, param, init, head, loss, reg, mask, scaled)
    assert prob.prompt == ("p" in param or "-z" in keys)
    risk, W, ref = _oracle(prob.data, prob.P, prob.fixed, prob.head, loss, reg, prob.mask)
    assert set(G) == set(ref)
    for name, g in G.items():
        torch.testing.assert_close(g, ref[name], rtol=1e-10, atol=1e-13, msg=name)
    if reg:
        assert torch.equal(K["KQ"], torch.zeros(2, dtype=F64))  # the true gradient already
    torch.testing.assert_close(out["loss"], risk, rtol=1e-12, atol=0)
    torch.testing.assert_close(out["W"], W, rtol=1e-12, atol=1e-15)
    perm = torch.tensor([2, 0, 3, 1])
    shuffled = al.AttentionData(data.X[..., perm, :], data.Y, data.z, data.v)
    _, Gp, _, outp = _true_gradient(shuffled, param, init, head, loss, reg,
                                    None if mask is None else mask[..., perm], scaled)
    for name, g in G.items():
        torch.testing.assert_close(Gp[name], g, rtol=1e-10, atol=1e-13, msg=name)
    torch.testing.assert_close(outp["loss"], out["loss"], rtol=1e-12, atol=0)


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_saturated_gradient_is_scaled_not_lost(param):
    """Tokens e1, e2, query e1, v = e1, logits (c, 0): by hand the gradient in W is
    l'(s1) s1 s2 (e1 - e2) e1^T, whose size exp(L), L = -softplus(s1) - softplus(c) -
    softplus(-c), underflows float64 at c = 1000. The returned G * exp(-K) must still be it:
    G exp(-K - L) is the sign pattern, for c = 3 and c = 1000 in one batch."""
    c = torch.tensor([3.0, 1000.0], dtype=F64)
    X = torch.eye(2, dtype=F64).expand(2, 1, 2, 2)
    data = al.AttentionData(X, torch.ones(2, 1, dtype=F64), torch.tensor([[[1.0, 0.0]]] * 2,
                            dtype=F64), torch.tensor([[1.0, 0.0]] * 2, dtype=F64))
    W = torch.zeros(2, 2, 2, dtype=F64)
    W[:, 0, 0] = c
    sp = torch.nn.functional.softplus
    L = -sp(torch.sigmoid(c)) - sp(c) - sp(-c)  # log |l'(u) s1 s2|, u = Y f = s1
    GW = torch.tensor([[-1.0, 0.0], [1.0, 0.0]], dtype=F64)  # sign of l' (e1 - e2) e1^T
    if param == "W":
        init, want = {"W": W}, GW.expand(2, 2, 2)
    else:  # K = Q = sqrt(c) e1 e1^T: grad K = G_W Q, grad Q = G_W^T K
        K = W.sqrt()
        init = {"K": K, "Q": K}
        want = torch.stack((GW @ K, GW.mT @ K), 1)
    prob = prepare(data, param, init, "linear", 0)
    G, Ks, _ = make_gradient(prob, "logistic", param, 0.0)(stack_kq(prob.P))
    (name,) = G
    k = (Ks[name] + L).view(-1, *[1] * (G[name].ndim - 1))
    torch.testing.assert_close(G[name] * torch.exp(-k), want, rtol=1e-12, atol=1e-14)


# ----------------------------------------------------------------------------- setup: prepare
def _uniform_law(seed, B, *shapes, d):
    """The documented default: U(-1/sqrt(d), 1/sqrt(d)) drawn in float64 on the CPU from one
    generator seeded by ``seed``, tensor after tensor (K before Q)."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(B, *s, generator=g, dtype=F64) * 2 - 1) / math.sqrt(d) for s in shapes]


@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_default_initial_values_follow_the_documented_law(dtype):
    """W, K and Q (width m, d by default) drawn by the law; p = 0 and v = the data's v."""
    data = al.random_data(3, 4, 5, trials=2, seed=0, device="cpu", dtype=dtype)
    tol = dict(rtol=1e-14 if dtype == F64 else 1e-6, atol=0)
    for param, init, seed, m in [("W", None, 7, 0), ("KQ", {"m": 2}, 9, 2), ("KQ", None, 9, 5)]:
        P = prepare(data, param, init, "linear", seed).P
        want = _uniform_law(seed, 2, *[(5, 5)] if m == 0 else [(5, m)] * 2, d=5)
        assert all(t.dtype == dtype for t in P.values())
        torch.testing.assert_close(torch.stack(list(P.values())),
                                   torch.stack(want).to(dtype), **tol)
    P = prepare(data, "p+v", None, "linear", 0).P
    assert torch.equal(P["p"], torch.zeros(2, 5, dtype=dtype)) and torch.equal(P["v"], data.v)


def test_initial_values_given_or_default_are_the_problems_own():
    """A given tensor is copied (the caller's is untouched, init too), None means the default
    draw; v defaults to zero without data v and to a copy of it with one."""
    data = al.random_data(3, 4, 5, seed=0, device="cpu")
    W0 = _rand(5, 5, seed=1)
    init = {"W": W0, "m": 2}
    prob = prepare(data, "W", init, "linear", 0)
    assert torch.equal(prob.P["W"], W0[None]) and init == {"W": W0, "m": 2}
    prob.P["W"] += 1
    assert torch.equal(W0, _rand(5, 5, seed=1))
    (W,) = _uniform_law(4, 1, (5, 5), d=5)
    torch.testing.assert_close(prepare(data, "W", {"W": None}, "linear", 4).P["W"], W,
                               rtol=1e-14, atol=0)
    for dt in (F64, torch.float32):  # the data's dtype, not torch's default one
        prob = prepare(al.AttentionData(data.X.to(dt), data.Y, data.z), "W+v", None, "linear", 0)
        assert prob.P["v"].dtype == dt and prob.unbatched
        assert torch.equal(prob.P["v"], torch.zeros(1, 5, dtype=dt))
    prob = prepare(data, "v", None, "linear", 0)
    assert torch.equal(prob.P["v"], data.v.expand(1, 5))
    prob.P["v"] += 1
    assert torch.equal(prob.data.v, data.v.expand(1, 5))


def test_default_draw_ignores_torchs_default_device(monkeypatch):
    """The draw is on the CPU whatever torch's default device (a CPU generator cannot feed a
    draw elsewhere; 'meta' stands for a GPU here): the same values, on the data's device; so
    are the default zeros of p and v, the fixed W and the mask; and device=None keeps the data
    where it is even where the book's default device is another one."""
    import importlib

    data = al.random_data(3, 4, 5, trials=2, seed=0, device="cpu")
    no_v = al.AttentionData(data.X, data.Y, data.z)
    K, Q = _uniform_law(3, 2, (5, 5), (5, 5), d=5)
    W0 = torch.zeros(5, 5, dtype=F64)
    with torch.device("meta"):
        P = prepare(data, "KQ", None, "linear", 3).P
        Pp = prepare(data, "p", None, "linear", 3).P
        Pv = prepare(no_v, "W+v", {"W": W0}, "linear", 3).P
        fixed = prepare(data, "p", None, "linear", 3).fixed
        mask = prepare(data, "W", {"W": W0}, "linear", 3, mask=[[True] * 4] * 3).mask
    assert torch.equal(fixed["W"], torch.eye(5, dtype=F64).expand(2, 5, 5))
    assert torch.equal(mask, torch.ones(2, 3, 4, dtype=torch.bool))
    torch.testing.assert_close(torch.stack((P["K"], P["Q"])), torch.stack((K, Q)),
                               rtol=1e-14, atol=0)
    zeros = torch.zeros(2, 5, dtype=F64)
    assert torch.equal(Pp["p"], zeros) and torch.equal(Pv["v"], zeros)
    assert Pp["p"].device == Pv["v"].device == torch.device("cpu")
    runtime = importlib.import_module("attnlib._runtime")
    monkeypatch.setattr(runtime, "default_device", lambda: torch.device("meta"))
    prob = prepare(data, "W", None, "linear", 0)
    assert prob.data.X.device == prob.P["W"].device == torch.device("cpu")


def test_prepare_mask_head_and_param():
    """A mask of numbers becomes a bool mask; the head's tensors take the training dtype and
    V must have d rows; an unknown param is named."""
    data = al.random_data(3, 4, 5, seed=0, device="cpu", dtype=torch.float32)
    m = torch.ones(3, 4, dtype=torch.int64)
    m[1, 2] = 0
    got = prepare(data, "W", None, "linear", 0, mask=m).mask
    assert got.dtype == torch.bool and torch.equal(got, (m == 1).expand(1, 3, 4))
    V = _rand(5, 2, seed=1)
    head = prepare(data, "W", {"V": V}, "relu", 0).head
    assert head.V.dtype == head.u.dtype == torch.float32
    with pytest.raises(ValueError, match=r"init\['V'\]: expected shape \(d, m\) with d=5"):
        prepare(data, "W", {"V": V[:4]}, "relu", 0)
    with pytest.raises(ValueError, match="param: expected one of .*'p\\+v'.*got 'WQ'"):
        prepare(data, "WQ", None, "linear", 0)
