"""Tests of attnlib.train.mirror: the ℓp mirror maps and LpMirrorDescent (chapters 9, 10)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnlib as al
import attnlib.models as M
from attnlib.train import LpMirrorDescent, inverse_mirror_map, mirror_map

F64 = torch.float64


@settings(max_examples=60, deadline=None)
@given(lp=st.floats(1.01, 5.0), log10_scale=st.floats(-30, 30),
       dtype=st.sampled_from([torch.float32, torch.float64]), seed=st.integers(0, 2**16))
def test_mirror_maps_are_inverse(lp, log10_scale, dtype, seed):
    """Round trip within the accuracy of pow, finite wherever the dual value |W|^(p-1) exists
    in the dtype; never NaN. pow(x, e) is exp(e log x) inside: its relative error grows like
    eps * |e log x|, and the inverse map amplifies the dual's error by 1/(p-1)."""
    g = torch.Generator().manual_seed(seed)
    W = (torch.randn(6, 6, generator=g, dtype=F64) * 10.0 ** log10_scale).to(dtype)
    theta = mirror_map(W, lp)
    back = inverse_mirror_map(theta, lp)
    assert not torch.isnan(theta).any() and not torch.isnan(back).any()
    fi = torch.finfo(dtype)
    w = W.double()
    log_w = torch.log(w.abs())
    log_dual = (lp - 1) * log_w  # log of |Theta|, in float64
    ok = (log_dual < torch.log(torch.tensor(fi.max)) - 1) & (w.abs() > fi.tiny) & \
         (log_dual > torch.log(torch.tensor(fi.tiny)) + 1)
    assert torch.isfinite(theta[ok]).all() and torch.isfinite(back[ok]).all()
    tol = 8 * fi.eps * (1 + 1 / (lp - 1) + 2 * log_w.abs())
    rel = (back.double() - w).abs() / w.abs()
    assert (rel[ok] <= tol[ok]).all(), float((rel / tol)[ok].max())
    # the dual is sign(W)|W|^(p-1), against numpy's power in float64
    expect = torch.as_tensor(np.sign(w.numpy()) * np.abs(w.numpy()) ** (lp - 1))
    rel = (theta.double() - expect).abs() / expect.abs()
    assert (rel[ok] <= 8 * fi.eps * (1 + log_dual.abs()[ok])).all()


def test_mirror_map_is_identity_at_2():
    W = torch.randn(4, 4, dtype=F64)
    assert mirror_map(W, 2.0) is W and inverse_mirror_map(W, 2.0) is W


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lp_mirror_descent_lp11_long_run_finite(dtype):
    """Unnormalised l1.1 steps (the real-data setting) on logistic regression: finite (the
    primal weights reach ~60 in float32) and the data are fitted.  1,000 steps of 0.5 end
    where 10,000 steps of 0.05 do (the largest weight within 0.2%), at a tenth of the cost."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, dtype=dtype, generator=g)
    y = torch.sign(x[:, 0] + 0.2 * x[:, 1])  # separable through the origin
    w = torch.nn.Parameter(0.01 * torch.randn(8, dtype=dtype, generator=g))
    opt = LpMirrorDescent([w], lr=0.5, lp=1.1)
    for _ in range(1_000):
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


def test_lp_mirror_descent_one_step_is_the_formula():
    """Normalised, lp = 3: Theta - lr g/(||g||_q + eps), mapped back, in float32 storage."""
    w = torch.nn.Parameter(torch.tensor([0.5, -2.0, 1e-3], dtype=torch.float32))
    g = torch.tensor([1.0, 0.5, -2.0], dtype=torch.float32)
    w.grad = g.clone()
    LpMirrorDescent([w], lr=0.1, lp=3.0, normalized=True, eps=0.01).step()
    w0, g64 = torch.tensor([0.5, -2.0, 1e-3], dtype=F64), g.double()
    q = 1.5
    theta = torch.sign(w0) * w0.abs() ** 2 - 0.1 * g64 / (g64.abs().pow(q).sum() ** (1 / q) + 0.01)
    expect = torch.sign(theta) * theta.abs() ** 0.5
    assert torch.allclose(w.double(), expect, rtol=1e-6)


def testnormalized_step_zeros_does_not_overflow_for_huge_gradients():
    """Entries of 1e21 in float32 (tokens of norm 1e7): the squared sum overflows, the step
    must still be lr times the unit direction, not zero."""
    from attnlib.train.mirror import normalized_step

    for dtype, big in ((torch.float32, 1e21), (torch.float64, 1e160)):
        g = torch.tensor([[3.0, -4.0], [0.0, 0.0]], dtype=dtype) * big
        got = normalized_step(g, 0.5, 2.0, 0.0)
        want = torch.tensor([[0.3, -0.4], [0.0, 0.0]], dtype=dtype)
        torch.testing.assert_close(got, want, rtol=4 * torch.finfo(dtype).eps, atol=0)
        got = normalized_step(g, 0.5, 3.0, 0.0)  # an lq norm as well
        assert torch.isfinite(got).all() and float(got[0].abs().max()) > 0.1


def _linear_loss_run(lr, lp, normalized, steps, dtype=torch.float32):
    """Mirror descent on the linear loss -sum(w): a constant gradient, so the dual grows
    without bound and, with p near 1, the primal leaves the dtype's range."""
    w = torch.nn.Parameter(torch.full((6,), 0.1, dtype=dtype))
    opt = LpMirrorDescent([w], lr=lr, lp=lp, normalized=normalized)
    seen = []
    for _ in range(steps):
        opt.zero_grad()
        (-w.sum()).backward()
        opt.step()
        seen.append(w.detach().clone())
    return w, opt, torch.stack(seen)


@pytest.mark.parametrize("lr, normalized", [(0.1, True), (10.0, False)])
def test_lp_mirror_descent_never_writes_overflowed_weights(lr, normalized):
    """p = 1.01 in float32: the primal overflows; the step is skipped and flagged, the weights
    stay finite and inside the dtype's range (never clamped to its largest value), and the
    optimiser says so."""
    with pytest.warns(RuntimeWarning, match="LpMirrorDescent: step .* skipped"):
        w, opt, seen = _linear_loss_run(lr, 1.01, normalized, 200)
    big = torch.finfo(torch.float32).max
    assert torch.isfinite(seen).all() and float(seen.abs().max()) < big
    assert 0 <= opt.nonfinite < 200 and not opt.status.ok and opt.status.nonfinite == 1
    assert "range" in opt.cause and "range" in str(opt.status)
    last_good = seen[opt.nonfinite - 1] if opt.nonfinite else torch.full((6,), 0.1)
    assert torch.equal(seen[-1], last_good)  # a skipped step moves nothing


def test_lp_mirror_descent_with_nan_in_its_model_stays_finite():
    """nn.Linear with a squared loss, p = 1.01, unnormalised lr = 10 (float32): NaN within a
    few steps unless overflow is refused."""
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 1)
    opt = LpMirrorDescent(model.parameters(), lr=10.0, lp=1.01)
    x, y = torch.randn(64, 6), torch.randn(64, 1)
    with pytest.warns(RuntimeWarning, match="skipped"):
        for _ in range(20):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
    assert all(torch.isfinite(p).all() for p in model.parameters()) and not opt.status.ok


def test_a_nonfinite_gradient_skips_the_step():
    w = torch.nn.Parameter(torch.ones(3, dtype=F64))
    v = torch.nn.Parameter(torch.ones(2, dtype=F64))
    opt = LpMirrorDescent([w, v], lr=0.1, lp=1.5)
    w.grad, v.grad = torch.ones(3, dtype=F64), torch.tensor([1.0, float("nan")], dtype=F64)
    with pytest.warns(RuntimeWarning, match="gradient .* NaN or Inf"):
        opt.step()
    assert torch.equal(w, torch.ones(3, dtype=F64)) and torch.equal(v, torch.ones(2, dtype=F64))
    assert opt.nonfinite == 0 and not opt.status.ok
    v.grad = torch.ones(2, dtype=F64)  # a finite gradient steps again
    opt.step()
    assert float(w.detach().max()) < 1 and opt.steps_taken == 2


@pytest.mark.parametrize("group, msg", [
    (dict(lp=0.5), "^lp: expected a finite number > 1"),
    (dict(lp=1.0), "^lp: expected a finite number > 1"),
    (dict(lr=-5.0), "^lr: expected a finite number > 0"),
    (dict(eps=float("nan")), "^eps: expected"),
    (dict(normalized=1), "^normalized: expected True or False"),
])
def test_per_group_settings_are_checked(group, msg):
    w, v = torch.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match=msg):
        LpMirrorDescent([{"params": [w]}, {"params": [v], **group}], lr=0.1, lp=1.5)
    opt = LpMirrorDescent([w], lr=0.1, lp=1.5)
    with pytest.raises(ValueError, match=msg):
        opt.add_param_group({"params": [v], **group})
    assert len(opt.param_groups) == 1
    opt.param_groups[0].update(group)  # as a scheduler would
    w.grad = torch.ones(2)
    with pytest.raises(ValueError, match=msg):
        opt.step()
    assert torch.equal(w.detach(), torch.zeros(2))


@pytest.mark.parametrize("kw, msg", [
    (dict(lr=0.1, lp=0.5), "^lp: expected a finite number > 1"),
    (dict(lr=0.1, lp=1.0), "^lp: expected a finite number > 1"),
    (dict(lr=0.0), "^lr: expected a finite number > 0"),
    (dict(lr=0.1, eps=-1), "^eps: expected a finite number >= 0"),
    (dict(lr=0.1, normalized="yes"), "^normalized: expected True or False"),
])
def test_lp_mirror_descent_bad_input(kw, msg):
    with pytest.raises(ValueError, match=msg):
        LpMirrorDescent([torch.zeros(2, requires_grad=True)], **kw)


def test_lp_mirror_descent_defaults_are_unnormalised_sgd():
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=F64))
    opt = LpMirrorDescent([w], lr=np.float64(0.5))
    assert opt.defaults == dict(lr=0.5, lp=2.0, normalized=False, eps=0.0, keep_dual=True)
    assert type(opt.defaults["lr"]) is float
    w.grad = torch.tensor([2.0, 2.0], dtype=F64)
    opt.step()
    assert torch.equal(w.detach(), torch.tensor([0.0, -3.0], dtype=F64))


def testnormalized_step_zeros_exact_for_subnormal_zero_and_plain_rows():
    """lr g / (||g||_2 + eps) per row, also when ||g|| is subnormal (1e-310) or exactly zero."""
    from attnlib.train.mirror import normalized_step

    g = torch.tensor([[3e-310, -4e-310], [0.0, 0.0], [3.0, 4.0]], dtype=F64)
    u = torch.tensor([[0.6, -0.8], [0.0, 0.0], [0.6, 0.8]], dtype=F64)
    assert torch.allclose(normalized_step(g, 0.5, 2.0, 0.0), 0.5 * u, rtol=1e-12, atol=0)
    # eps = 1e-300 dominates the tiny row's norm 5e-310: step = lr u * 5e-310 / (5e-310 + eps)
    shrink = torch.tensor([5e-310 / (5e-310 + 1e-300), 1.0, 5 / (5 + 1e-300)], dtype=F64)
    got = normalized_step(g, 0.5, 2.0, 1e-300)
    assert torch.allclose(got, 0.5 * u * shrink[:, None], rtol=1e-9, atol=0)
    # a scaled gradient: g = G * exp(K), the true norm ||G|| = 5 exp(-K) meets eps in the log domain
    K = torch.tensor([0.0, 0.0, 700.0], dtype=F64)
    got = normalized_step(g, 0.5, 2.0, 1e-300, log_scale=K)
    true_norm = torch.tensor(5.0, dtype=F64) * torch.exp(-K[2])
    assert torch.allclose(got[2], 0.5 * u[2] * true_norm / (true_norm + 1e-300), rtol=1e-9)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("q", [2.0, 11.0])
def test_a_zero_row_takes_a_zero_step_at_any_learning_rate(dtype, q):
    """A zero gradient gives a zero step also for a large lr (lr / tiny would overflow)."""
    from attnlib.train.mirror import normalized_step

    g = torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]], dtype=dtype)
    for lr in (0.1, 10.0, 1e6):
        got = normalized_step(g, lr, q, 0.0)
        assert torch.equal(got[0], torch.zeros(3, dtype=dtype)), lr
        assert torch.isfinite(got).all()


def test_a_zero_gradient_at_a_large_step_stops_the_trial_and_is_finite():
    X = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=F64)
    data = al.AttentionData(X, torch.ones(1), z=torch.ones(1, 3), v=torch.tensor([0, 0, 1.0]))
    r = al.train(data, init={"W": torch.eye(3, dtype=F64)}, steps=5, eps=0.0, lr=10.0)
    assert r.stopped.item() == 0 and r.status.ok  # stopped at once, every number finite
    assert torch.equal(r.W, torch.eye(3, dtype=F64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("eps", [0.0, 1e-300, 1e30])
@pytest.mark.parametrize("q", [2.0, 1.5, 5.0])
def test_per_row_zero_and_finite_checks_match_the_entries(dtype, eps, q):
    """The trainer's per-row summaries against the straightforward passes over the entries:
    ``normalized_step_zeros``'s (gradient zero, step zero) are ``(g == 0).all(1)`` and
    ``(step == 0).all(1)``, its step is :func:`normalized_step`'s, and ``rows_within`` is
    ``isfinite(t).all(1)`` or ``(|t| <= bound).all(1)`` (also LpMirrorDescent's whole-tensor
    checks, one row); rows: plain,
    zero, subnormal, huge, with NaN, +inf, -inf, and a true scale that makes ``eps`` dominate
    (a step that underflows to exactly zero)."""
    from attnlib.train.mirror import normalized_step, normalized_step_zeros, rows_within

    fi = torch.finfo(dtype)
    g = torch.randn(10, 7, generator=torch.Generator().manual_seed(3), dtype=F64).to(dtype)
    g[1] = 0
    g[2] = g[2] * fi.tiny * 2.0 ** -3  # subnormal entries
    g[3] = g[3] * fi.max / 8
    g[4, 2] = float("nan")
    g[5, 0] = float("inf")
    g[6, 6] = float("-inf")
    g[7, 1:] = 0  # one non-zero entry
    log_scale = torch.zeros(10, dtype=dtype)
    log_scale[8] = 700.0  # the true gradient is e^-700 times g: eps dominates the norm
    log_scale[9] = -700.0
    for lr in (0.1, fi.tiny):
        step, g_zero, step_zero = normalized_step_zeros(g, lr, q, eps, log_scale)
        assert torch.equal(step.nan_to_num(7.0), normalized_step(g, lr, q, eps, log_scale)
                           .nan_to_num(7.0))
        assert torch.equal(g_zero, (g == 0).all(1))
        assert torch.equal(step_zero, (step == 0).all(1))
        if eps == 1e30:
            assert step_zero[8] and not g_zero[8]  # exactly zero: eps swamps the true norm
    assert torch.equal(rows_within([g], 10), torch.isfinite(g).all(1))
    h = torch.ones(10, 2, 3, dtype=dtype)
    h[0, 1, 2] = float("-inf")
    both = rows_within([g, h], 10)
    assert torch.equal(both, torch.isfinite(g).all(1) & torch.isfinite(h.flatten(1)).all(1))
    # LpMirrorDescent's whole-tensor checks: all finite, all within the dtype's range
    for row in list(g) + [g[:0]]:
        assert bool(rows_within([row], 1)) == bool(torch.isfinite(row).all())
        assert bool(rows_within([row], 1, fi.max / 16)) == bool((row.abs() <= fi.max / 16).all())
    within = rows_within([g, h], 10, fi.max / 16)
    assert torch.equal(within, (g.abs() <= fi.max / 16).all(1)
                       & (h.flatten(1).abs() <= fi.max / 16).all(1))
