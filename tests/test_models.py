"""Tests of attnlib.models (attnlib.attention, attnlib.gradient): analytic gradients against
autograd, saturation accuracy, heads."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnlib.data as D
import attnlib.examples as E
import attnlib.gradient as G
import attnlib.models as M

LOSSES = ["logistic", "exp", "correlation"]


@pytest.fixture(autouse=True)
def fresh_mask_cache(monkeypatch):
    """Each test builds the (T, T) diagonal mask itself (no cache carried between tests)."""
    monkeypatch.setattr(G, "_OFF_DIAG", {})


def _heads(d):
    g = torch.Generator().manual_seed(1)
    V = torch.randn(d, 5, generator=g, dtype=torch.float64)
    return {
        "linear": M.LinearHead(),
        "relu": M.ReluHead(V / V.norm(), torch.linspace(0.5, 2, 5, dtype=torch.float64)),
        "lambda": M.LambdaHead(0.3),
        "mlp": M.MLPHead(V, 0.1 * torch.ones(5, dtype=torch.float64),
                         torch.linspace(-1, 1, 5, dtype=torch.float64)),
    }


def _autograd(fn, *tensors):
    ts = [t.detach().clone().requires_grad_(True) for t in tensors]
    fn(*ts).sum().backward()
    return [t.grad for t in ts]


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("head", ["linear", "relu", "lambda", "mlp"])
def test_grad_W_matches_autograd(batched_data, loss, head):
    d = batched_data
    h = _heads(d.d)[head]
    W = torch.randn(3, d.d, d.d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    (ref,) = _autograd(lambda W: M.risk(d.X, d.Y, M.softmax(M.logits(d.X, W, d.z)), d.v, h, loss),
                       W)
    got = M.grad_W(d.X, d.Y, d.z, W, d.v, h, loss)
    assert torch.allclose(got, ref, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("head", ["linear", "relu", "lambda", "mlp"])
def test_grad_KQ_matches_autograd(batched_data, loss, head):
    d = batched_data
    hd = _heads(d.d)[head]
    g = torch.Generator().manual_seed(2)
    K = torch.randn(3, d.d, 4, dtype=torch.float64, generator=g)
    Q = torch.randn(3, d.d, 4, dtype=torch.float64, generator=g)
    reg = 0.01

    def risk(K, Q):
        s = M.softmax(M.logits_kq(d.X, K, Q, d.z))
        return M.risk(d.X, d.Y, s, d.v, hd, loss) + reg * ((K**2).sum((-1, -2))
                                                           + (Q**2).sum((-1, -2)))

    rK, rQ = _autograd(risk, K, Q)
    gK, gQ = M.grad_KQ(d.X, d.Y, d.z, K, Q, d.v, hd, loss, reg=reg)
    assert torch.allclose(gK, rK, rtol=1e-10, atol=1e-13)
    assert torch.allclose(gQ, rQ, rtol=1e-10, atol=1e-13)
    assert torch.allclose(M.logits_kq(d.X, K, Q, d.z), M.logits(d.X, K @ Q.mT, d.z))


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("head", ["linear", "lambda", "relu", "mlp"])
def test_grad_p_matches_autograd(loss, head):
    d = D.random_data(4, 5, 3, seed=4, device="cpu")
    g = torch.Generator().manual_seed(5)
    W = torch.randn(3, 3, dtype=torch.float64, generator=g)
    assert (W - W.mT).abs().max() > 0.5  # W^T r and W r differ
    h = _heads(3)[head]
    p = torch.randn(2, 3, dtype=torch.float64, generator=g)
    (ref,) = _autograd(lambda p: M.risk(d.X, d.Y, M.softmax(M.logits_prompt(d.X, W, p[:, None])
                                                            .squeeze(1)), d.v, h, loss), p)
    got = M.grad_p(d.X, d.Y, W, p, d.v, h, loss)
    assert torch.allclose(got, ref, rtol=1e-10, atol=1e-13)


def _logits(name, X, P, z, W0):
    """The oracle's logits for each parameterisation (trials first in P)."""
    if name == "W":
        return M.logits(X, P, z)
    if name == "KQ":
        return M.logits_kq(X, P[:, 0], P[:, 1], z)
    return M.logits_prompt(X, W0, P[:, None])[:, 0]


@settings(max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 4), T=st.integers(2, 5),
       dim=st.integers(2, 4), m=st.integers(1, 4), loss=st.sampled_from(LOSSES),
       head=st.sampled_from(["linear", "lambda", "mlp"]), train_v=st.booleans(),
       scaled=st.booleans())
def test_risk_gradient_matches_autograd_for_every_parameter(seed, n, T, dim, m, loss, head,
                                                            train_v, scaled):
    """Random non-symmetric W, K, Q, p, v; data shared by two trials of parameters; the
    scaled gradient times e^{-K} is the true one; permuting the tokens of each input changes
    nothing."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, dtype=torch.float64, generator=g)

    X, z, v, W0 = rnd(n, T, dim), rnd(n, dim), rnd(dim), rnd(dim, dim)
    Y = torch.where(rnd(n) > 0, 1.0, -1.0).double()
    hd = _heads(dim)[head]
    train_v = train_v and head == "linear"  # only the linear head has a trained v
    perm = torch.stack([torch.randperm(T, generator=g) for _ in range(n)])
    Xp = torch.gather(X, 1, perm[..., None].expand(n, T, dim))  # tokens permuted per input
    params = {"W": rnd(2, dim, dim), "KQ": rnd(2, 2, dim, m), "p": rnd(2, dim)}
    for name, P in params.items():
        fixed = dict(z=z) if name != "p" else dict(W=W0)
        P = dict({name: P}, **({"v": rnd(2, dim)} if train_v else {}))

        def risk(X, *t, name=name):
            vv = t[1] if train_v else v
            return M.risk(X, Y, M.softmax(_logits(name, X, t[0], z, W0)), vv, hd, loss)

        want = _autograd(lambda *t: risk(X, *t), *P.values())
        got = {}
        for data in (X, Xp):
            G, K, _ = M.risk_gradient(data, Y, v=None if train_v else v, head=hd, loss=loss,
                                      scaled=scaled, **fixed)(P)
            got[data is X] = {k: G[k] * torch.exp(-K[k]).reshape(-1, *[1] * (G[k].ndim - 1))
                              for k in P}
        for key, ref in zip(P, want):
            assert torch.allclose(got[True][key], ref, rtol=1e-9, atol=1e-12), (name, key)
            assert torch.allclose(got[False][key], ref, rtol=1e-9, atol=1e-12), (name, key)


@pytest.mark.parametrize("loss", LOSSES)
def test_grad_v_matches_autograd(small_data, loss):
    d = small_data
    W = torch.randn(d.d, d.d, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    a = M.logits(d.X, W, d.z)
    (ref,) = _autograd(lambda v: M.risk(d.X, d.Y, M.softmax(a), v, None, loss), d.v)
    assert torch.allclose(M.grad_v(d.X, d.Y, a, d.v, loss), ref, rtol=1e-10, atol=1e-13)


def test_prompt_logits_equal_W_logits_with_constant_query(small_data):
    d = small_data
    W = torch.randn(d.d, d.d, dtype=torch.float64)
    p = torch.randn(d.d, dtype=torch.float64)
    assert torch.allclose(M.logits_prompt(d.X, W, p), M.logits(d.X, W, p.expand(d.n, d.d)))


def test_gradient_accurate_deep_in_saturation():
    """At logit gaps ~ 60 the naive s_t (g_t - f) loses every digit; ours keeps them."""
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]]], dtype=torch.float64)
    Y = torch.ones(1, dtype=torch.float64)
    v = torch.tensor([1.0, 0.2], dtype=torch.float64)
    a = torch.tensor([[0.0, -60.0, -61.0]], dtype=torch.float64)
    out = M.logit_gradient(X, Y, a, v, loss="correlation")
    # exact: dL/da_t = -s_t (g_t - f); for t = 1: s_1 (g_0 - g_1) + O(s^2)
    s = torch.exp(a - torch.logsumexp(a, -1, keepdim=True))
    g = X[0] @ v
    exact_1 = -s[0, 1] * (g[1] - g[0])
    assert torch.allclose(out["da"][0, 1], exact_1, rtol=1e-12)
    assert torch.allclose(out["da"][0].sum(), torch.zeros((), dtype=torch.float64), atol=1e-40)


def test_scaled_gradient_direction_survives_underflow():
    """Scaled gradients keep the direction when the true gradient underflows to zero."""
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]]], dtype=torch.float64)
    Y = torch.ones(1, dtype=torch.float64)
    v = torch.tensor([1.0, 0.2], dtype=torch.float64)
    for gap in (50.0, 900.0):
        a = torch.tensor([[0.0, -gap, -gap - 1.0]], dtype=torch.float64)
        out = M.logit_gradient(X, Y, a, v, scaled=True)
        da = out["da"] / out["da"].abs().max()
        # direction: token 1 gets -(g1-g0)/(1 + e^-1 (g2-g0)/(g1-g0)) relative weight
        assert torch.isfinite(da).all() and da.abs().max() == 1
        if gap == 50.0:
            true = M.logit_gradient(X, Y, a, v)["da"]
            assert torch.allclose(da, true / true.abs().max(), rtol=1e-12)
    assert M.logit_gradient(X, Y, a, v)["da"].abs().max() == 0  # the unscaled one underflows


def test_losses_and_derivatives():
    u = torch.linspace(-30, 700, 50, dtype=torch.float64, requires_grad=True)
    for loss in LOSSES:
        (ref,) = torch.autograd.grad(M.loss_value(u, loss).sum(), u)
        assert torch.allclose(M.loss_derivative(u.detach(), loss), ref, rtol=1e-12, atol=0)
        lad = M.loss_log_abs_derivative(u.detach(), loss)
        assert torch.allclose(lad, torch.log(ref.abs()), rtol=1e-12)
    # far beyond underflow the log-derivative stays exact: log sigma(-u) = -u for large u
    big = torch.tensor([2000.0], dtype=torch.float64)
    assert M.loss_log_abs_derivative(big, "logistic").item() == -2000.0


def test_lambda_head_optimum_is_a_mixture():
    ex = E.lambda_head_example(device="cpu")
    d, head = ex.data, M.LambdaHead(ex.init["lam"])
    s_opt = ex.known["s_opt"]
    f_opt = head.value((d.X[0].T @ s_opt)[None], d.v)
    onehot = head.value(d.X[0, :1], d.v)
    assert f_opt > onehot


@pytest.mark.parametrize("bad", [dict(loss="hinge"), dict(head="cubic")])
def test_bad_names_raise(bad):
    key = list(bad)[0]
    with pytest.raises(ValueError, match=rf"^{key}: expected .*, got '{bad[key]}'$"):
        if "loss" in bad:
            M.loss_value(torch.zeros(2), bad["loss"])
        else:
            M.make_head(bad["head"])


def test_make_head_needs_its_tensors():
    with pytest.raises(ValueError, match=r"^init\['V'\]: expected the value matrix \(d, m\) "
                                         r"of the 'relu' head, got nothing$"):
        M.make_head("relu", {})
    with pytest.raises(ValueError, match="lam"):
        M.make_head("lambda", {})
    h = M.make_head("relu", {"V": torch.eye(3)}, d=3)
    assert isinstance(h, M.ReluHead) and torch.equal(h.u, torch.ones(3, dtype=torch.float64))


def test_forward_pieces_against_loops(small_data):
    d = small_data
    W = torch.randn(d.d, d.d, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    a = M.logits(d.X, W, d.z)
    s = M.softmax(a)
    assert torch.allclose(M.log_softmax(a).exp(), s, rtol=1e-14)
    for i in range(d.n):
        for t in range(d.T):
            assert torch.allclose(a[i, t], d.X[i, t] @ W @ d.z[i], rtol=1e-13)
        e = torch.exp(a[i] - a[i].max())
        assert torch.allclose(s[i], e / e.sum(), rtol=1e-13)
        h = sum(s[i, t] * d.X[i, t] for t in range(d.T))
        assert torch.allclose(M.attend(d.X, s)[i], h, rtol=1e-13)
        assert torch.allclose(M.output(d.X, s, d.v)[i], h @ d.v, rtol=1e-13)
    Y = d.Y
    u = Y * M.output(d.X, s, d.v)
    for loss, ell in [("logistic", lambda x: torch.log1p(torch.exp(-x))),
                      ("exp", lambda x: torch.exp(-x)), ("correlation", lambda x: -x)]:
        assert torch.allclose(M.risk(d.X, Y, s, d.v, loss=loss), ell(u).mean(), rtol=1e-13)


@pytest.mark.parametrize("head", ["relu", "lambda", "mlp"])
def test_head_gradients_match_autograd(head):
    h0 = torch.randn(3, 4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    v = torch.randn(3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    hd = _heads(6)[head]
    h0[0, 0] = 0.0  # ReLU at exactly 0: derivative 0, as autograd's
    (ref,) = _autograd(lambda h: hd.value(h, v), h0)
    assert torch.allclose(hd.grad(h0, v), ref, rtol=1e-12, atol=1e-14)
    assert hd.value(h0, v).shape == (3, 4)


def test_logit_gradient_fast_path_and_outputs(batched_data):
    d = batched_data
    W = torch.randn(3, d.d, d.d, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    a = M.logits(d.X, W, d.z)
    full = M.logit_gradient(d.X, d.Y, a, d.v, loss="exp")
    g = torch.einsum("...ntd,...d->...nt", d.X, d.v)
    fast = M.logit_gradient(d.X, d.Y, a, values=g, pair_diff=g.unsqueeze(-1) - g.unsqueeze(-2),
                            loss="exp", extras=False, y_weight=(-d.Y / d.n).unsqueeze(-1))
    assert torch.allclose(fast["da"], full["da"], rtol=1e-13, atol=1e-16)
    assert fast["h"] is None and "loss" not in fast and "lprime" not in fast
    assert torch.allclose(fast["f"], full["f"], rtol=1e-13)
    s = M.softmax(a)
    assert torch.allclose(full["s"], s, rtol=1e-13)
    assert torch.allclose(full["u"], d.Y * M.output(d.X, s, d.v), rtol=1e-13)
    assert torch.allclose(full["lprime"], M.loss_derivative(full["u"], "exp"), rtol=1e-13)
    assert torch.allclose(full["loss"], M.risk(d.X, d.Y, s, d.v, loss="exp"), rtol=1e-13)
    assert full["log_scale"].shape == (3,) and (full["log_scale"] == 0).all()
    assert full["log_scale"].dtype == a.dtype
    (ref,) = _autograd(lambda a: M.risk(d.X, d.Y, M.softmax(a), d.v, None, "exp"), a)
    assert torch.allclose(full["da"], ref, rtol=1e-10, atol=1e-14)
    # scaled: e^K dL/da, K per trial so that the largest pair weight is 1
    sc = M.logit_gradient(d.X, d.Y, a, d.v, loss="exp", scaled=True)
    K = sc["log_scale"]
    assert torch.allclose(sc["da"], full["da"] * torch.exp(K)[:, None, None], rtol=1e-12)
    ls, la = M.log_softmax(a), M.loss_log_abs_derivative(full["u"], "exp")
    lw = ls.unsqueeze(-1) + (ls + la.unsqueeze(-1)).unsqueeze(-2)
    off = ~torch.eye(d.T, dtype=torch.bool)
    assert torch.allclose(-K, lw[..., off].flatten(1).amax(-1), rtol=1e-13)


def test_one_token_has_zero_gradient():
    X = torch.randn(2, 1, 3, dtype=torch.float64)
    out = M.logit_gradient(X, torch.ones(2, dtype=torch.float64), torch.zeros(2, 1),
                           torch.ones(3, dtype=torch.float64), scaled=True)
    assert (out["da"] == 0).all() and (out["log_scale"] == 0).all()


@pytest.mark.parametrize("shape", [(2, 1, 3), (2, 4, 2)])
def test_scaled_gradient_for_one_input_or_two_tokens(shape):
    """The scaling applies whenever T > 1, whatever n (here n = 1, or T = 2)."""
    g = torch.Generator().manual_seed(8)
    B, n, T = shape
    X = torch.randn(B, n, T, 3, dtype=torch.float64, generator=g)
    Y = torch.ones(B, n, dtype=torch.float64)
    v = torch.randn(3, dtype=torch.float64, generator=g)
    a = 30 * torch.randn(B, n, T, dtype=torch.float64, generator=g)
    plain = M.logit_gradient(X, Y, a, v)
    sc = M.logit_gradient(X, Y, a, v, scaled=True)
    assert (sc["log_scale"] != 0).all()
    assert sc["da"].abs().max() > 0
    assert torch.allclose(sc["da"], plain["da"] * torch.exp(sc["log_scale"])[:, None, None],
                          rtol=1e-10)


def test_defaults_are_the_logistic_loss_and_no_penalty(batched_data):
    d = batched_data
    g = torch.Generator().manual_seed(9)
    W = torch.randn(3, d.d, d.d, dtype=torch.float64, generator=g)
    K, Q = torch.randn(3, d.d, 2, dtype=torch.float64, generator=g), torch.randn(
        3, d.d, 2, dtype=torch.float64, generator=g)
    p = torch.randn(3, d.d, dtype=torch.float64, generator=g)
    u = torch.linspace(-3, 3, 7, dtype=torch.float64)
    a = M.logits(d.X, W, d.z)
    s = M.softmax(a)
    eq = torch.equal
    assert eq(M.loss_value(u), M.loss_value(u, "logistic"))
    assert eq(M.loss_derivative(u), M.loss_derivative(u, "logistic"))
    assert eq(M.loss_log_abs_derivative(u), M.loss_log_abs_derivative(u, "logistic"))
    assert eq(M.risk(d.X, d.Y, s, d.v), M.risk(d.X, d.Y, s, d.v, None, "logistic"))
    assert eq(M.grad_W(d.X, d.Y, d.z, W, d.v), M.grad_W(d.X, d.Y, d.z, W, d.v, None, "logistic"))
    for got, want in zip(M.grad_KQ(d.X, d.Y, d.z, K, Q, d.v),
                         M.grad_KQ(d.X, d.Y, d.z, K, Q, d.v, None, "logistic", reg=0.0)):
        assert eq(got, want)
    assert eq(M.grad_p(d.X, d.Y, W, p, d.v), M.grad_p(d.X, d.Y, W, p, d.v, None, "logistic"))
    assert eq(M.grad_v(d.X, d.Y, a, d.v), M.grad_v(d.X, d.Y, a, d.v, "logistic"))
    assert eq(M.logit_gradient(d.X, d.Y, a, d.v)["da"],
              M.logit_gradient(d.X, d.Y, a, d.v, M.LinearHead(), "logistic")["da"])


def test_unbatched_kq_logits():
    g = torch.Generator().manual_seed(10)
    X, z = torch.randn(4, 5, 3, generator=g), torch.randn(4, 3, generator=g)
    K, Q = torch.randn(3, 2, generator=g), torch.randn(3, 2, generator=g)
    assert torch.allclose(M.logits_kq(X, K, Q, z), M.logits(X, K @ Q.T, z), atol=1e-6)


def test_make_head_passes_objects_and_casts():
    V = torch.eye(3, dtype=torch.float32)
    r = M.make_head(M.ReluHead(V, torch.ones(3)), dtype=torch.float64)
    assert r.V.dtype == torch.float64 and r.u.dtype == torch.float64
    m = M.make_head(M.MLPHead(V, torch.zeros(3), torch.ones(3)), dtype=torch.float64)
    assert m.V.dtype == m.b.dtype == m.u.dtype == torch.float64
    lam = M.LambdaHead(0.5)
    assert M.make_head(lam) is lam and isinstance(M.make_head(), M.LinearHead)
    mlp = M.make_head("mlp", {"V": torch.eye(3)}, d=3)
    assert mlp.b.tolist() == [0.0] * 3 and mlp.u.tolist() == [1.0] * 3
    V32 = torch.ones(3, 2, dtype=torch.float32)  # (d, m) with m != d
    p32 = {"V": V32, "u": torch.ones(2, dtype=torch.float32),
           "b": torch.zeros(2, dtype=torch.float32)}
    for name in ("relu", "mlp"):
        h = M.make_head(name, p32, d=3, dtype=torch.float64)
        assert torch.equal(h.V, V32.double()) and h.V.dtype == h.u.dtype == torch.float64
        if name == "mlp":
            assert h.b.dtype == torch.float64
    for key in ("V", "u", "b"):
        bad = dict(p32, **{key: p32[key] * float("nan")})
        with pytest.raises(ValueError, match=rf"^init\['{key}'\]: contains NaN or Inf$"):
            M.make_head("mlp", bad, d=3)
    assert M.make_head("lambda", {"lam": np.float64(0.25)}).lam == 0.25
    for params, word in [({"V": torch.eye(2)}, r"^init\['V'\]: expected shape \(d, m\) with d=3"),
                         ({"V": torch.eye(3), "u": torch.ones(2)}, r"^init\['u'\]"),
                         ({"V": torch.eye(3), "b": torch.ones(2)}, r"^init\['b'\]")]:
        with pytest.raises(ValueError, match=word):
            M.make_head("mlp", params, d=3)
    with pytest.raises(ValueError, match=r"^init\['lam'\]: expected a finite number >= 0"):
        M.make_head("lambda", {"lam": -1})
    with pytest.raises(ValueError, match=r"^init\['lam'\]: expected a number >= 0 for the "
                                         r"'lambda' head, got nothing$"):
        M.make_head("lambda", {})


@pytest.mark.cuda
def test_make_head_moves_to_the_device():
    h = M.make_head("mlp", {"V": torch.eye(3)}, d=3, device="cuda")
    assert h.V.device.type == h.b.device.type == h.u.device.type == "cuda"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_logit_gradient_for_several_token_counts_in_a_row(dtype):
    """One call after another with T = 2..5 (the diagonal mask follows T and dtype)."""
    g = torch.Generator().manual_seed(11)
    for T in (2, 5, 3, 4):
        X = torch.randn(2, 3, T, 4, generator=g).to(dtype)
        Y = torch.tensor([[1.0, -1.0, 1.0]] * 2, dtype=dtype)
        v = torch.randn(4, generator=g).to(dtype)
        a = torch.randn(2, 3, T, generator=g).to(dtype)
        (ref,) = _autograd(lambda a, X=X, Y=Y, v=v: M.risk(X, Y, M.softmax(a), v), a)
        got = M.logit_gradient(X, Y, a, v)["da"]
        assert got.dtype == dtype and got.shape == (2, 3, T)
        assert torch.allclose(got, ref, rtol=1e-4 if dtype == torch.float32 else 1e-10,
                              atol=1e-7 if dtype == torch.float32 else 1e-14)


@pytest.mark.parametrize("broadcast", [False, True])
def test_vec_mat_and_mat_vec_are_their_einsums(broadcast):
    """The batched products behind attend and the gradients, against the sums written out:
    the same batch shape (the bmm path) and a batch axis that broadcasts (trials against one
    data set: einsum)."""
    from attnlib.attention import mat_vec, vec_mat

    g = torch.Generator().manual_seed(7)
    B = torch.randn(3, 4, 5, 6, generator=g, dtype=torch.float64)
    a = torch.randn(1 if broadcast else 3, 4, 5, generator=g, dtype=torch.float64)
    c = torch.randn(1 if broadcast else 3, 4, 6, generator=g, dtype=torch.float64)
    want_vm = (a.unsqueeze(-1) * B).sum(-2)  # sum_k a_k B_km
    want_mv = (B * c.unsqueeze(-2)).sum(-1)  # sum_k B_mk a_k
    got_vm = vec_mat(a, B, "...nt,...ntd->...nd")
    got_mv = mat_vec(B, c, "...ntd,...nd->...nt")
    assert got_vm.shape == (3, 4, 6) and got_mv.shape == (3, 4, 5)
    torch.testing.assert_close(got_vm, want_vm, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_mv, want_mv, rtol=1e-12, atol=1e-12)
