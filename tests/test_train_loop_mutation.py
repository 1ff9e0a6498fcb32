"""attnlib.train.loop: the cases mutation testing found untested (issue 12, item 8).

Oracles: autograd of the risk written with attnlib.models' forward functions, hand-built data
whose gradients are exactly zero (or not) by symmetry, and the documented history steps.
"""

import pytest
import torch

import attnlib as al
import attnlib.models as M

F64 = torch.float64


def _data(v, B=None):
    """n=1, T=2, d=3: tokens e1, e2, query (1, 1, 1); the token values are v1 and v2, so the
    gradient is exactly zero when v1 == v2. A list of v gives one trial each."""
    X = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=F64)
    z = torch.ones(1, 3, dtype=F64)
    if B is None:
        return al.AttentionData(X, torch.ones(1, dtype=F64), z, torch.tensor(v, dtype=F64))
    k = len(v)
    return al.AttentionData(X.expand(k, 1, 2, 3), torch.ones(k, 1, dtype=F64),
                            z.expand(k, 1, 3), torch.tensor(v, dtype=F64))


def _v_blind_data(dtype=F64):
    """Inputs x and -x (Y = +1 both), one query: at W = 0 both softmaxes are uniform, so the
    attention outputs cancel and the correlation loss's gradient in v is exactly zero, while
    the gradient in W is not (token values 1 and 0 differ)."""
    e1, e2 = torch.eye(3, dtype=dtype)[:2]
    X = torch.stack((torch.stack((e1, e2)), -torch.stack((e1, e2))))
    return al.AttentionData(X, torch.ones(2, dtype=dtype), torch.ones(2, 3, dtype=dtype),
                            torch.tensor([1.0, 0.0, 0.0], dtype=dtype))


@pytest.mark.parametrize("steps, every, want", [(3, 1, [0, 1, 2, 3]), (5, 3, [0, 3, 5]),
                                                (6, 3, [0, 3, 6]), (0, 4, [0])])
def test_recorded_steps(steps, every, want):
    r = al.train(_data([1.0, 0.0, 0.5]), steps=steps, record_every=every)
    assert r.history["step"].tolist() == want
    assert r.history["loss"].shape == (len(want),) and r.history["W"].shape == (len(want), 3, 3)


def test_zero_gradient_at_the_only_step_counts_as_stopped():
    r = al.train(_data([0.0, 0.0, 1.0]), steps=1, init={"W": torch.eye(3, dtype=F64)})
    assert r.stopped.item() == 0 and torch.equal(r.W, torch.eye(3, dtype=F64))


@pytest.mark.parametrize("method, lp", [("gd", 2.0), ("md", 1.5)])
def test_kq_batch_with_one_frozen_trial(method, lp):
    """Trial 0 has a zero gradient in K and Q (equal token values), trial 1 does not: only
    trial 0 is stopped (at step 0) and keeps its tensors."""
    data = _data([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], B=2)
    K0 = torch.randn(3, 2, dtype=F64, generator=torch.Generator().manual_seed(0))
    r = al.train(data, param="KQ", method=method, lp=lp, steps=4, init={"K": K0, "Q": K0 + 1})
    assert r.stopped.tolist() == [0, -1]
    torch.testing.assert_close(r.K[0], K0, rtol=1e-14, atol=0)  # md: mirror map and back
    assert (r.K[1] - K0).abs().max() > 1e-3


def test_v_with_a_zero_gradient_does_not_freeze_a_moving_w():
    """At W = 0 the gradient in v is exactly zero but the one in W is not: the trial moves on
    (it stops only when every trained tensor's update is zero)."""
    data = _v_blind_data()
    r = al.train(data, param="W+v", loss="correlation", steps=3, record_every=1,
                 init={"W": torch.zeros(3, 3, dtype=F64)})
    assert r.stopped.item() == -1 and not torch.equal(r.history["W"][1], r.history["W"][0])
    assert torch.equal(r.history["v"][1], data.v)  # v did not move at step 0


def test_w_overflowing_alone_stops_the_trial():
    """lp = 1.01 in float32, unnormalised, large lr: W's first update overflows while v's is
    exactly zero (finite): the trial is flagged at step 0 and keeps W = 0."""
    data = _v_blind_data(torch.float32)
    with pytest.warns(RuntimeWarning, match="^train: 1 of 1 trials stopped"):
        r = al.train(data, param="W+v", loss="correlation", method="md", lp=1.01, lr=1e3,
                     normalized=False, steps=2, init={"W": torch.zeros(3, 3)})
    assert r.nonfinite.item() == 0 and torch.equal(r.W, torch.zeros(3, 3))
    assert torch.isfinite(r.v).all()


def test_grad_norm_per_trial():
    """history["grad_norm"] of a batch: each trial's own gradient norm (autograd)."""
    data = al.random_data(3, 4, 5, trials=3, seed=2, device="cpu")
    W0 = torch.randn(3, 5, 5, dtype=F64, generator=torch.Generator().manual_seed(3))
    r = al.train(data, param="W+v", init={"W": W0}, steps=0)
    W, v = W0.clone().requires_grad_(True), data.v.clone().requires_grad_(True)
    L = M.risk(data.X, data.Y, M.softmax(M.logits(data.X, W, data.z)), v)  # (B,)
    gW, gv = torch.autograd.grad(L.sum(), (W, v))
    ref = torch.sqrt(gW.pow(2).sum((1, 2)) + gv.pow(2).sum(1))
    torch.testing.assert_close(r.history["grad_norm"][:, 0], ref, rtol=1e-12, atol=0)
    assert ref.max() > 1.5 * ref.min()  # the trials' norms differ


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
    got = [r.W, r.v, r.stopped, r.nonfinite, *r.history.values()]
    want = [ref.W, ref.v, ref.stopped, ref.nonfinite, *ref.history.values()]
    assert list(r.history) == list(ref.history)
    for name, a, b in zip(["W", "v", "stopped", "nonfinite", *r.history], got, want):
        assert a.device == torch.device("cpu") and torch.equal(a, b), name


def test_one_overflowing_trial_does_not_stop_the_others():
    """Trial 0 overflows at its first update (lp = 1.01, float32, large unnormalised step);
    trial 1 has a zero gradient (all token values 0): only trial 0 is flagged non-finite."""
    one = _v_blind_data(torch.float32)
    data = al.AttentionData(one.X.expand(2, 2, 2, 3), one.Y.expand(2, 2), one.z.expand(2, 2, 3),
                            torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]))
    with pytest.warns(RuntimeWarning, match="^train: 1 of 2 trials stopped"):
        r = al.train(data, loss="correlation", method="md", lp=1.01, lr=1e3, normalized=False,
                     steps=2, init={"W": torch.zeros(3, 3)})
    assert r.nonfinite.tolist() == [0, -1] and r.stopped.tolist() == [-1, 0]


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
