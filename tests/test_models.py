"""Tests of attnlib.models: analytic gradients against autograd, saturation accuracy, heads."""

import pytest
import torch

import attnlib.data as D
import attnlib.models as M

LOSSES = ["logistic", "exp", "correlation"]


def _heads(d):
    g = torch.Generator().manual_seed(1)
    V = torch.randn(d, 5, generator=g, dtype=torch.float64)
    return {
        "linear": M.LinearHead(),
        "relu": M.ReluHead(V / V.norm(), torch.ones(5, dtype=torch.float64)),
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
def test_grad_KQ_matches_autograd(batched_data, loss):
    d = batched_data
    g = torch.Generator().manual_seed(2)
    K = torch.randn(3, d.d, 4, dtype=torch.float64, generator=g)
    Q = torch.randn(3, d.d, 4, dtype=torch.float64, generator=g)
    reg = 0.01

    def risk(K, Q):
        s = M.softmax(M.logits_kq(d.X, K, Q, d.z))
        return M.risk(d.X, d.Y, s, d.v, None, loss) + reg * ((K**2).sum((-1, -2))
                                                             + (Q**2).sum((-1, -2)))

    rK, rQ = _autograd(risk, K, Q)
    gK, gQ = M.grad_KQ(d.X, d.Y, d.z, K, Q, d.v, None, loss, reg=reg)
    assert torch.allclose(gK, rK, rtol=1e-10, atol=1e-13)
    assert torch.allclose(gQ, rQ, rtol=1e-10, atol=1e-13)
    assert torch.allclose(M.logits_kq(d.X, K, Q, d.z), M.logits(d.X, K @ Q.mT, d.z))


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("head", ["linear", "lambda", "relu"])
def test_grad_p_matches_autograd(loss, head):
    ex = D.multi_input_example(device="cpu")
    d, W = ex.data, ex.init["W"] + 0.3 * torch.eye(3, dtype=torch.float64)
    h = _heads(3)[head]
    p = torch.tensor([[0.3, -0.2, 0.5], [1.0, 2.0, -1.0]], dtype=torch.float64)
    (ref,) = _autograd(lambda p: M.risk(d.X, d.Y, M.softmax(M.logits_prompt(d.X, W, p[:, None])
                                                            .squeeze(1)), d.v, h, loss), p)
    got = M.grad_p(d.X, d.Y, W, p, d.v, h, loss)
    assert torch.allclose(got, ref, rtol=1e-10, atol=1e-13)


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


def test_logit_coefficients_sum_to_zero_and_match_naive(small_data):
    d = small_data
    a = torch.randn(d.n, d.T, dtype=torch.float64)
    s, g = M.softmax(a), d.X @ d.v
    c = M.logit_coefficients(s, g)
    naive = s * (g - (s * g).sum(-1, keepdim=True))
    assert torch.allclose(c, naive, atol=1e-15)
    assert c.sum(-1).abs().max() < 1e-15


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
    ex = D.lambda_head_example(device="cpu")
    d, head = ex.data, M.LambdaHead(ex.init["lam"])
    s_opt = ex.known["s_opt"]
    f_opt = head.value((d.X[0].T @ s_opt)[None], d.v)
    onehot = head.value(d.X[0, :1], d.v)
    assert f_opt > onehot


@pytest.mark.parametrize("bad", [dict(loss="hinge"), dict(head="cubic")])
def test_bad_names_raise(bad):
    with pytest.raises(ValueError, match=list(bad)[0]):
        if "loss" in bad:
            M.loss_value(torch.zeros(2), bad["loss"])
        else:
            M.make_head(bad["head"])


def test_make_head_needs_its_tensors():
    with pytest.raises(ValueError, match="V"):
        M.make_head("relu", {})
    with pytest.raises(ValueError, match="lam"):
        M.make_head("lambda", {})
    h = M.make_head("relu", {"V": torch.eye(3)}, d=3)
    assert isinstance(h, M.ReluHead) and torch.equal(h.u, torch.ones(3, dtype=torch.float64))
