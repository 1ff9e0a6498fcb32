"""attnlib.train over long runs (saturation: no NaN, the direction keeps approaching the
matching lp-SVM) and the loop's details: the result, the progress bar, gradient norms, zero
gradients and non-finite steps, checked against the autograd loop of tests/train_helpers.py."""

import pytest
import torch
from train_helpers import F64, TRAINED, autograd_loop, seeded_init

import attnlib as al
import attnlib.models as M
from attnlib.train import TrainConfig


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


@pytest.mark.parametrize("lp", [1.1, 1.75, 2.0, 3.0])
def test_normalized_md_saturation(lp):
    """Normalised MD into saturation: no NaN, saturated softmax, and the direction keeps
    approaching the matching lp-SVM of the final selection (directional Bregman divergence
    falls).  1,000 steps of 1.0 walk the dual iterate as far as 10,000 steps of 0.1 (each
    normalised step moves it by lr; ||W|| ends near 1e24 at lp = 1.1) with the same
    divergences, at a tenth of the cost."""
    data = al.random_data(4, 5, 8, seed=3, device="cpu")
    r = al.train(data, method="md", lp=lp, lr=1.0, steps=1_000, record_every=50,
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


def test_long_run_to_norm_1e4_no_nan_and_direction_improves():
    # 2,500 steps of 5.0 carry ||W|| to about 1e4 (logits of order 1e4: softmax saturates
    # completely, the true gradient underflows), as 100,000 steps of 0.1 do, at 1/40 of the cost
    data = al.random_data(3, 4, 6, seed=1, device="cpu")
    r = al.train(data, lr=5.0, steps=2_500, record_every=250,
                 init={"W": torch.zeros(6, 6, dtype=F64)})
    assert torch.isfinite(r.history["W"]).all() and r.stopped.item() == -1
    W_mm = al.att_svm(data, alpha=al.selected_tokens(data, r.W), norm="fro")
    c = al.correlation(r.history["W"], W_mm)
    assert c[-1] > 0.999 and c[-1] >= c[1] - 1e-9
    assert r.W.norm() > 9000  # the norm kept growing ~ lr per step


# ----------------------------------------------------------------------------- loop details
def test_result_repr_and_fixed_tensors(small_data):
    r = al.train(small_data, steps=3, record_every=2, init={"W": seeded_init(6)["W"]})
    assert repr(r) == ("TrainResult(param='W', method='gd', steps=3, W shape=(6, 6), history "
                       "keys=['W', 'grad_norm', 'loss', 'max_prob', 'min_max_prob', 'step'])")
    assert torch.equal(r.v, small_data.v) and r.p is None and r.K is None and r.Q is None
    W0 = seeded_init(6)["W"]
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
    init = seeded_init(small_data.d, seed=4)
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
        ref = autograd_loop(data, "W+v", {"W": W0, "v": data.v}, steps=4, lr=0.1,
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


def test_results_are_ordinary_tensors_out_of_inference_mode():
    """The loop runs under torch.inference_mode; what it returns must work like any tensor:
    updated in place, and used by autograd (an inference tensor refuses both)."""
    from attnlib.data import random_data

    data = random_data(3, 4, 5, trials=2, seed=0)
    for param in ("W", "KQ", "p"):
        res = al.train(data, param, steps=20, record_every=5)
        tensors = [res.W, res.stopped, res.nonfinite, res.stalled, *res.history.values()]
        tensors += [t for t in (res.K, res.Q, res.p) if t is not None]
        assert not any(t.is_inference() for t in tensors), param
        w = res.W.clone().requires_grad_(True)
        (w * res.W).sum().backward()  # autograd takes a returned tensor
        res.history["loss"].add_(1.0)  # and an in-place update
