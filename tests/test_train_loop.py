"""attnlib.train over long runs (saturation: no NaN, the direction keeps approaching the
matching lp-SVM, an independent scipy oracle) and the loop's details: the recorded steps, the
gradient norms (against autograd of attnlib.models' forward functions), the stopping rules on
hand-built data whose gradients are exactly zero (or not) by symmetry, non-finite updates, the
order of the trials in a batch, and the device of the results."""

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
def _two_tokens(v):
    """n=1, T=2, d=3: tokens e1, e2, query (1, 1, 1); one trial per row of v (token values
    v1, v2: the gradient in W, K, Q is exactly zero when v1 == v2)."""
    v = torch.tensor(v, dtype=F64)
    X = torch.eye(3, dtype=F64)[:2].expand(*v.shape[:-1], 1, 2, 3)
    return al.AttentionData(X, torch.ones(*v.shape[:-1], 1, dtype=F64),
                            torch.ones(*v.shape[:-1], 1, 3, dtype=F64), v)


def _v_blind(dtype=F64, v=((1.0, 0.0, 0.0),)):
    """Inputs x and -x (Y = +1 both), one query: at W = 0 both softmaxes are uniform, so the
    attention outputs cancel and the correlation loss's gradient in v is exactly zero, while
    the one in W is not when the token values differ (v = e1)."""
    x = torch.eye(3, dtype=dtype)[:2]
    v = torch.tensor(v, dtype=dtype)
    B = len(v)
    return al.AttentionData(torch.stack((x, -x)).expand(B, 2, 2, 3), torch.ones(B, 2, dtype=dtype),
                            torch.ones(B, 2, 3, dtype=dtype), v)


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


@pytest.mark.parametrize("steps, every", [(0, 4), (1, 1), (3, 1), (5, 3), (6, 3), (7, 10),
                                          (11, 4)])
def test_recorded_steps(steps, every):
    """The documented record: steps 0, every, 2 every, ... and the last step, once each; the
    first recorded W is the initial one, the last the final one."""
    W0 = torch.randn(3, 3, dtype=F64, generator=torch.Generator().manual_seed(steps))
    r = al.train(_two_tokens([1.0, 0.0, 0.5]), steps=steps, record_every=every, init={"W": W0})
    want = sorted(set(range(0, steps, every)) | {steps})
    assert r.history["step"].tolist() == want
    assert r.history["loss"].shape == (len(want),) and r.history["W"].shape == (len(want), 3, 3)
    assert torch.equal(r.history["W"][0], W0) and torch.equal(r.history["W"][-1], r.W)


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


@pytest.mark.parametrize("param", ["W", "W+v", "KQ", "p+v"])
def test_grad_norm_and_loss_per_trial(param):
    """history["grad_norm"] of a batch: each trial's norm of its whole gradient (all trained
    tensors), and history["loss"] its risk, against autograd (the trials' norms differ)."""
    data = al.random_data(3, 4, 5, trials=3, seed=2, device="cpu")
    g = torch.Generator().manual_seed(3)
    init = {k: torch.randn(3, *s, dtype=F64, generator=g)
            for k, s in dict(W=(5, 5), K=(5, 2), Q=(5, 2), p=(5,), v=(5,)).items()}
    r = al.train(data, param=param, init=init, steps=0)
    P = {k: init[k].clone().requires_grad_(True) for k in TRAINED[param]}
    W = P["K"] @ P["Q"].mT if "K" in P else P.get("W", init["W"])
    a = (torch.einsum("bntd,bde,be->bnt", data.X, W, P["p"]) if "p" in P else
         torch.einsum("bntd,bde,bne->bnt", data.X, W, data.z))
    L = M.risk(data.X, data.Y, torch.softmax(a, -1), P.get("v", data.v))  # (B,)
    grads = torch.autograd.grad(L.sum(), list(P.values()))  # trials are independent
    ref = torch.sqrt(sum(x.pow(2).flatten(1).sum(1) for x in grads))
    torch.testing.assert_close(r.history["grad_norm"][:, 0], ref, rtol=1e-12, atol=0)
    torch.testing.assert_close(r.history["loss"][:, 0], L.detach(), rtol=1e-12, atol=0)
    assert ref.max() > 1.2 * ref.min()


def test_a_trial_stops_only_when_every_update_is_zero():
    """A zero gradient in W alone (equal token values) or in v alone (inputs x and -x at
    W = 0) does not stop the trial; a zero gradient in all of them stops it at step 0, also
    at the only step, and nothing moves. Unnormalised steps against the autograd loop."""
    data = _two_tokens([0.0, 0.0, 1.0])
    W0 = torch.randn(3, 3, dtype=F64, generator=torch.Generator().manual_seed(0))
    for normalized in (True, False):
        r = al.train(data, param="W+v", init={"W": W0}, steps=4, normalized=normalized)
        assert r.stopped.item() == -1 and not torch.equal(r.v, data.v)
    ref = autograd_loop(data, "W+v", {"W": W0, "v": data.v}, steps=4, lr=0.1, method="gd",
                        lp=2.0, normalized=False, eps=0.0)
    torch.testing.assert_close(r.v, ref["v"], rtol=1e-12, atol=0)
    torch.testing.assert_close(r.W, ref["W"], rtol=1e-12, atol=1e-15)
    for steps in (1, 4):
        r = al.train(data, param="W", init={"W": W0}, steps=steps, normalized=steps == 1)
        assert r.stopped.item() == 0 and torch.equal(r.W, W0)
    blind = _v_blind()
    r = al.train(blind, param="W+v", loss="correlation", steps=3, record_every=1,
                 init={"W": torch.zeros(3, 3, dtype=F64)})
    assert r.stopped.item() == -1 and not torch.equal(r.history["W"][0, 1], r.history["W"][0, 0])
    assert torch.equal(r.history["v"][0, 1], blind.v[0])  # v did not move at step 0
    # (K, Q) with Q = 0: K's gradient G Q is zero, Q's is not; the trial goes on
    data = _two_tokens([0.0, 0.5, 1.0])
    K0 = torch.randn(3, 2, dtype=F64, generator=torch.Generator().manual_seed(1))
    for normalized in (True, False):
        r = al.train(data, param="KQ", init={"K": K0, "Q": torch.zeros(3, 2, dtype=F64)},
                     steps=3, normalized=normalized)
        assert r.stopped.item() == -1 and r.Q.abs().max() > 0, normalized


@pytest.mark.parametrize("method, lp", [("gd", 2.0), ("md", 1.5)])
def test_trial_order_and_one_frozen_trial(method, lp):
    """A (K, Q) batch where one trial has a zero gradient (equal token values): only that
    trial is stopped (at step 0) and keeps its tensors; reversing the trials in the batch
    reverses every per-trial result exactly."""
    data = _two_tokens([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    K0 = torch.randn(2, 3, 2, dtype=F64, generator=torch.Generator().manual_seed(0))
    kw = dict(param="KQ", method=method, lp=lp, steps=4, record_every=3)
    r = al.train(data, init={"K": K0, "Q": K0 + 1}, **kw)
    assert r.stopped.tolist() == [0, -1]
    torch.testing.assert_close(r.K[0], K0[0], rtol=1e-14, atol=0)  # md: mirror map and back
    assert (r.K[1] - K0[1]).abs().max() > 1e-3
    flip = al.AttentionData(*(t.flip(0) for t in (data.X, data.Y, data.z, data.v)))
    rf = al.train(flip, init={"K": K0.flip(0), "Q": K0.flip(0) + 1}, **kw)
    for a, b in zip([r.W, r.K, r.stopped, *r.history.values()],
                    [rf.W, rf.K, rf.stopped, *rf.history.values()]):
        assert torch.equal(a.flip(0), b) if a.ndim and a.shape[0] == 2 else torch.equal(a, b)


@pytest.mark.parametrize("normalized, eps, lr, stopped", [
    (False, 0.0, 1e-323, 0),  # unnormalised: lr g underflows to 0 -> stopped (documented)
    (True, 1e-3, 5e-324, 0),  # normalised with eps > 0: the step is checked -> stopped
    (True, 0.0, 5e-324, -1),  # normalised, eps = 0: only a zero gradient stops a trial
])
def test_an_underflowing_step(normalized, eps, lr, stopped):
    """A nonzero gradient whose step underflows to exactly 0: "stopped" follows the
    documented rule (the update is checked, except normalised with eps = 0 where the gradient
    is); the tensors do not move either way."""
    data = al.random_data(3, 4, 5, seed=4, device="cpu")
    W0 = torch.randn(5, 5, dtype=F64, generator=torch.Generator().manual_seed(5)) / 5
    r = al.train(data, init={"W": W0}, lr=lr, normalized=normalized, eps=eps, steps=2)
    assert r.stopped.item() == stopped and torch.equal(r.W, W0)
    assert r.history["grad_norm"][0] > 1e-3


def test_nonfinite_at_the_first_step_keeps_the_initial_values():
    """lp = 1.01 in float32 with a large step: every trial's first update overflows; each is
    flagged at step 0 and keeps its initial tensors; the warning says how many and why."""
    data = al.random_data(3, 4, 5, trials=2, seed=1, device="cpu", dtype=torch.float32)
    W0 = 0.1 * torch.ones(5, 5)
    with pytest.warns(RuntimeWarning, match=r"2 of 2 trials .* primal iterate .*lp=1.01"):
        r = al.train(data, method="md", lp=1.01, lr=10.0, steps=3, record_every=1,
                     init={"W": W0})
    assert r.nonfinite.tolist() == [0, 0] and r.stopped.tolist() == [-1, -1]
    assert torch.equal(r.W, W0.expand(2, 5, 5)) and torch.isfinite(r.history["loss"]).all()


def test_one_tensor_of_one_trial_overflowing_stops_that_trial_alone():
    """W+v, lp = 1.01, float32, a large unnormalised step: in trial 0 W overflows at step 0
    while v's update is exactly zero (finite); trial 1 has a zero gradient. Only trial 0 is
    flagged non-finite, and keeps W = 0."""
    data = _v_blind(torch.float32, v=((1.0, 0.0, 0.0), (0.0, 0.0, 1.0)))
    with pytest.warns(RuntimeWarning, match="1 of 2 trials"):
        r = al.train(data, param="W+v", loss="correlation", method="md", lp=1.01, lr=1e3,
                     normalized=False, steps=2, init={"W": torch.zeros(3, 3)})
    assert r.nonfinite.tolist() == [0, -1] and r.stopped.tolist() == [-1, 0]
    assert torch.equal(r.W, torch.zeros(2, 3, 3)) and torch.isfinite(r.v).all()


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


@pytest.mark.parametrize("param, method", [("KQ", "md"), ("W+v", "gd")])
def test_results_stay_on_the_data_device(param, method):
    """Every result tensor is made on the data's device, whatever torch's default device (here
    'meta', which holds no values: a tensor made there would not equal the reference)."""
    data = al.random_data(3, 4, 5, trials=2, seed=0, device="cpu")
    g = torch.Generator().manual_seed(1)
    init = {k: torch.randn(5, 2 if k in "KQ" else 5, dtype=F64, generator=g) for k in "KQW"}
    kw = dict(param=param, method=method, lp=1.5 if method == "md" else 2.0, steps=3,
              record_every=2, init=init)
    ref = al.train(data, **kw)
    with torch.device("meta"):
        r = al.train(data, **kw)
    assert list(r.history) == list(ref.history)
    for name, a, b in [*((k, getattr(r, k), getattr(ref, k)) for k in ("W", "v", "stopped",
                                                                       "nonfinite")),
                       *((k, r.history[k], ref.history[k]) for k in ref.history)]:
        assert a.device == torch.device("cpu") and torch.equal(a, b), name


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
