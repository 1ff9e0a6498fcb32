"""LpMirrorDescent(keep_dual=False): the paper's optimizer, dual recomputed from the weights.

Oracles: a numpy transcription of the update rule (the dual from the weights in their dtype,
one step, the inverse map), the kept-dual trajectory in float64, and torch.optim.SGD at p = 2.
"""

import numpy as np
import pytest
import torch

from attnlib.experiments import mirror_dual
from attnlib.train import LpMirrorDescent


def numpy_step(w, g, lr, p, dtype):
    """One step of the recompute-from-weights rule, rounding to ``dtype`` as torch does."""
    w = np.asarray(w, dtype=np.float64)
    theta = (np.sign(w) * np.abs(w) ** (p - 1)).astype(dtype) - dtype(lr) * g.astype(dtype)
    return (np.sign(theta) * np.abs(theta.astype(np.float64)) ** (1 / (p - 1))).astype(dtype)


@pytest.mark.parametrize("p", [1.1, 1.5, 3.0])
def test_float64_steps_match_the_rule(p):
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(5, 4))
    w = torch.tensor(w0, requires_grad=True)
    opt = LpMirrorDescent([w], lr=0.05, lp=p, keep_dual=False)
    ref = w0.copy()
    for _ in range(30):
        g = rng.normal(size=(5, 4))
        w.grad = torch.tensor(g)
        opt.step()
        ref = numpy_step(ref, g, 0.05, p, np.float64)
    np.testing.assert_allclose(w.detach().numpy(), ref, rtol=1e-10, atol=1e-300)
    assert not opt.state[w]  # no dual state is kept


def test_float32_zero_crossing_is_trapped_only_without_the_dual():
    """p = 1.1: dual steps of 1e-5 take the entry through zero; |theta|^10 < 1e-45 is 0 in
    float32, so the recomputed dual is 0 again at every later step."""
    steps, step, theta0 = 300, 1e-5, 1e-3
    paper = mirror_dual._one_entry(False, steps, step, theta0, 1.1)
    kept = mirror_dual._one_entry(True, steps, step, theta0, 1.1)
    cross = int(np.ceil(theta0 / step))
    assert (paper[:cross - 10] > 0).all() and (paper[cross + 1:] == 0).all()
    # the kept dual follows float64 arithmetic: theta_k = theta0 - k * step
    k = np.arange(1, steps + 1)
    theta = theta0 - k * step
    expect = np.sign(theta) * np.abs(theta) ** 10
    ok = np.abs(expect) > 1e-37  # representable (normal) in float32
    np.testing.assert_allclose(kept[ok], expect[ok], rtol=1e-5)
    assert kept[-1] < 0 and np.isclose(kept[-1], expect[-1], rtol=1e-5)


def test_p2_is_sgd_and_validation():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(3, 3, generator=g, requires_grad=True)
    b = a.detach().clone().requires_grad_(True)
    grad = torch.randn(3, 3, generator=g)
    a.grad, b.grad = grad.clone(), grad.clone()
    LpMirrorDescent([a], lr=0.1, lp=2.0, keep_dual=False).step()
    torch.optim.SGD([b], lr=0.1).step()
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="keep_dual"):
        LpMirrorDescent([a], lr=0.1, lp=1.5, keep_dual="no")


def test_md_dual_experiment_small():
    numbers, arrays = mirror_dual.dual.__wrapped__(trials=3, steps=300) \
        if hasattr(mirror_dual.dual, "__wrapped__") else mirror_dual.dual(trials=3, steps=300)
    assert numbers["trap_paper"] == 1.0 and numbers["escaped_kept"] == 1
    assert numbers["demo_final_paper"] == 0.0 and numbers["demo_final_kept"] < 0
    assert numbers["zeros_kept"] <= numbers["zeros_paper"]
    W = arrays["W_kept"]
    assert numbers["sparsity_kept"] == pytest.approx(
        float((W.abs() < 0.01 * W.abs().amax((-2, -1), keepdim=True)).double().mean()))
