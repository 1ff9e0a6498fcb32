"""attnlib.train.setup: the cases mutation testing found untested (issue 12, item 8).

make_gradient is checked against autograd of the risk written with attnlib.models' forward
functions (never the gradient code under test), per trial and per trained tensor, on both of its
paths (the tiny problems' pair features and the factored form); prepare's default initial values
against the documented law U(-1/sqrt(d), 1/sqrt(d)) drawn from the seed in float64.
"""

import math
import re

import pytest
import torch

import attnlib as al
import attnlib.models as M
from attnlib.train.setup import make_gradient, prepare, stack_kq

F64 = torch.float64


def _rand(*shape, seed):
    return torch.randn(*shape, dtype=F64, generator=torch.Generator().manual_seed(seed))


def _oracle(data, P, fixed, head, loss, reg, mask=None):
    """Risk (summed over trials: they are independent) and its autograd gradient per tensor."""
    P = {k: t.detach().clone().requires_grad_(True) for k, t in P.items()}
    X, z = data.X, data.z
    if "p" in P or ("p" in fixed and "W" not in P and "K" not in P):
        W = fixed["W"]
        p = P["p"] if "p" in P else fixed["p"]
        a = torch.einsum("bntd,bde,be->bnt", X, W, p)  # x_it^T W p
    else:
        W = P["K"] @ P["Q"].mT if "K" in P else P.get("W", fixed.get("W"))
        a = torch.einsum("bntd,bde,bne->bnt", X, W, z)  # x_it^T W z_i
    if mask is not None:
        a = a.masked_fill(~mask, -math.inf)
    risk = M.risk(X, data.Y, torch.softmax(a, -1), P.get("v", fixed.get("v")), head, loss)
    total = risk.sum()
    if "K" in P:
        total = total + reg * (P["K"].pow(2).sum() + P["Q"].pow(2).sum())
    g = torch.autograd.grad(total, list(P.values()))
    return risk.detach(), W.detach(), dict(zip(P, g))


def _check(data, param, init=None, head="linear", loss="logistic", reg=0.0, mask=None,
           scaled=True, seed=3):
    prob = prepare(data, param, init, head, seed, mask=mask)
    grads = make_gradient(prob, loss, param, reg, scaled=scaled)
    G, K, out = grads(stack_kq(prob.P), extras=True)
    risk, W, ref = _oracle(prob.data, prob.P, prob.fixed, prob.head, loss, reg, prob.mask)
    if "K" in ref:
        ref["KQ"] = torch.stack((ref.pop("K"), ref.pop("Q")), 1)
    assert set(G) == set(K) == set(ref)
    for name, g in G.items():
        assert K[name].shape == (prob.B,)
        if not scaled:
            assert torch.equal(K[name], torch.zeros_like(K[name])), name
        k = K[name].view(-1, *[1] * (g.ndim - 1))
        torch.testing.assert_close(g * torch.exp(-k), ref[name], rtol=1e-10, atol=1e-13,
                                   msg=name)
    torch.testing.assert_close(out["loss"], risk, rtol=1e-12, atol=0)
    torch.testing.assert_close(out["W"], W, rtol=1e-12, atol=1e-15)
    return prob, G, K


# n=3, T=4: tiny at d=4 (B n T d^2 <= 3e4: pair features), factored at d=60 (> 3e4)
@pytest.mark.parametrize("d", [4, 60])
@pytest.mark.parametrize("param", ["W", "KQ", "p", "v", "W+v", "p+v"])
@pytest.mark.parametrize("loss", ["logistic", "exp"])
def test_gradient_matches_autograd(param, d, loss):
    data = al.random_data(3, 4, d, trials=2, seed=5, device="cpu")
    init = {"W": _rand(d, d, seed=1) / d ** 0.5}  # the fixed W of the prompt models and of v
    if "p" in param:
        init["p"] = _rand(2, d, seed=2)
    _check(data, param, init, loss=loss)


@pytest.mark.parametrize("d", [4, 60])
def test_kq_gradient_with_penalty_and_width(d):
    """(K, Q) of width m != d with the penalty reg (||K||^2 + ||Q||^2) added at true scale."""
    data = al.random_data(3, 4, d, trials=2, seed=6, device="cpu")
    init = {"K": _rand(2, d, 2, seed=3), "Q": _rand(2, d, 2, seed=4)}
    _, G, K = _check(data, "KQ", init, reg=0.3)
    assert torch.equal(K["KQ"], torch.zeros(2, dtype=F64))  # already the true gradient


@pytest.mark.parametrize("d", [4, 60])
@pytest.mark.parametrize("head, extra", [("relu", "V"), ("lambda", "lam")])
def test_gradient_of_nonlinear_heads(head, extra, d):
    data = al.random_data(3, 4, d, trials=2, seed=7, device="cpu")
    init = {"W": _rand(2, d, d, seed=5), "V": _rand(d, 3, seed=6), "lam": 0.4}
    _check(data, "W", {k: init[k] for k in ("W", extra)}, head=head, loss="correlation")


@pytest.mark.parametrize("d", [4, 60])
@pytest.mark.parametrize("param", ["W", "p+v"])
def test_gradient_under_a_mask(param, d):
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[0, :, 1] = False
    mask[1, 2, :3] = False
    data = al.random_data(3, 4, d, trials=2, seed=8, device="cpu")
    init = {"p": _rand(d, seed=9)} if "p" in param else {"W": _rand(d, d, seed=9)}
    _check(data, param, init, mask=mask)


@pytest.mark.parametrize("param", ["W", "W+v", "KQ"])
def test_unscaled_gradient_is_the_true_gradient(param):
    data = al.random_data(3, 4, 5, trials=2, seed=10, device="cpu")
    _check(data, param, {"W": 3 * _rand(5, 5, seed=11)}, scaled=False)


def test_v_without_queries_uses_the_fixed_prompt():
    d = 5
    data = al.random_data(3, 4, d, trials=2, seed=12, device="cpu")
    data = al.AttentionData(data.X, data.Y, v=data.v)
    prob, _, _ = _check(data, "v", {"p": _rand(d, seed=13), "W": _rand(d, d, seed=14)})
    assert prob.prompt



# ----------------------------------------------------------------------------- initial values
def _uniform_law(seed, B, *shapes, d):
    """The documented default: U(-1/sqrt(d), 1/sqrt(d)) drawn in float64 on the CPU from one
    generator seeded by ``seed``, tensor after tensor (K before Q)."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(B, *s, generator=g, dtype=F64) * 2 - 1) / math.sqrt(d) for s in shapes]


@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_default_initial_values_follow_the_documented_law(dtype):
    data = al.random_data(3, 4, 5, trials=2, seed=0, device="cpu", dtype=dtype)
    (W,) = _uniform_law(7, 2, (5, 5), d=5)
    tol = dict(rtol=1e-14 if dtype == F64 else 1e-6, atol=0)
    P = prepare(data, "W", None, "linear", 7).P
    assert P["W"].dtype == dtype
    torch.testing.assert_close(P["W"], W.to(dtype), **tol)
    K, Q = _uniform_law(9, 2, (5, 2), (5, 2), d=5)
    P = prepare(data, "KQ", {"m": 2}, "linear", 9).P
    torch.testing.assert_close(torch.stack((P["K"], P["Q"])), torch.stack((K, Q)).to(dtype), **tol)
    K, Q = _uniform_law(9, 2, (5, 5), (5, 5), d=5)  # m defaults to d
    P = prepare(data, "KQ", None, "linear", 9).P
    torch.testing.assert_close(torch.stack((P["K"], P["Q"])), torch.stack((K, Q)).to(dtype), **tol)
    P = prepare(data, "p+v", None, "linear", 0).P  # p = 0, v = the data's v
    assert torch.equal(P["p"], torch.zeros(2, 5, dtype=dtype)) and torch.equal(P["v"], data.v)


def test_default_v_is_zero_without_data_v_and_a_copy_with_it():
    data = al.random_data(3, 4, 5, seed=0, device="cpu")
    prob = prepare(al.AttentionData(data.X, data.Y, data.z), "W+v", None, "linear", 0)
    assert torch.equal(prob.P["v"], torch.zeros(1, 5, dtype=F64)) and prob.unbatched
    assert prob.P["v"].dtype == F64
    prob = prepare(data, "v", None, "linear", 0)
    assert torch.equal(prob.P["v"], data.v.expand(1, 5))
    prob.P["v"] += 1  # the trained copy is the problem's own
    assert torch.equal(prob.data.v, data.v.expand(1, 5))


def test_given_initial_values_are_copied_and_none_means_default():
    data = al.random_data(3, 4, 5, seed=0, device="cpu")
    W0 = _rand(5, 5, seed=1)
    init = {"W": W0, "m": 2}
    prob = prepare(data, "W", init, "linear", 0)
    assert torch.equal(prob.P["W"], W0[None]) and init == {"W": W0, "m": 2}
    prob.P["W"] += 1
    assert torch.equal(W0, _rand(5, 5, seed=1))  # the caller's tensor is untouched
    (W,) = _uniform_law(4, 1, (5, 5), d=5)
    torch.testing.assert_close(prepare(data, "W", {"W": None}, "linear", 4).P["W"], W,
                               rtol=1e-14, atol=0)


# ----------------------------------------------------------------------------- saturation
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
    s1 = torch.sigmoid(c)
    L = -sp(s1) - sp(c) - sp(-c)  # log |l'(u) s1 s2|, u = Y f = s1
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


def test_default_draw_ignores_torchs_default_device():
    """The draw is on the CPU whatever torch's default device (a CPU generator cannot feed a
    draw elsewhere; 'meta' stands for a GPU here): the same values, on the data's device; so
    are the default zeros of p and v."""
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


def test_no_device_keeps_the_datas(monkeypatch):
    """device=None keeps the data where it is, even where the book's default device is
    another one (a CUDA machine, simulated: the default is 'meta', which would fail here)."""
    import importlib

    runtime = importlib.import_module("attnlib._runtime")
    monkeypatch.setattr(runtime, "default_device", lambda: torch.device("meta"))
    data = al.random_data(3, 4, 5, seed=0, device="cpu")
    prob = prepare(data, "W", None, "linear", 0)
    assert prob.data.X.device == prob.P["W"].device == torch.device("cpu")


def test_param_message():
    data = al.random_data(3, 4, 5, seed=0, device="cpu")
    msg = "param: expected one of ('W', 'KQ', 'p', 'v', 'W+v', 'p+v'), got 'WQ'"
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        prepare(data, "WQ", None, "linear", 0)


def test_mask_of_numbers_is_a_bool_mask():
    data = al.random_data(3, 4, 5, seed=0, device="cpu")
    m = torch.ones(3, 4, dtype=torch.int64)
    m[1, 2] = 0
    got = prepare(data, "W", None, "linear", 0, mask=m).mask
    assert got.dtype == torch.bool and torch.equal(got, (m == 1).expand(1, 3, 4))


def test_head_built_for_the_data():
    """The head's tensors take the training dtype, and V's rows must be d."""
    data = al.random_data(3, 4, 5, seed=0, device="cpu", dtype=torch.float32)
    V = _rand(5, 2, seed=1)
    head = prepare(data, "W", {"V": V}, "relu", 0).head
    assert head.V.dtype == head.u.dtype == torch.float32
    msg = "init['V']: expected shape (d, m) with d=5, got (4, 2)"
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        prepare(data, "W", {"V": V[:4]}, "relu", 0)
