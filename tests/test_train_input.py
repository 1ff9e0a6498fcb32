"""attnlib.train refuses bad input by name: every bad keyword and data, the device, and
prepare's exact messages; what it documents it accepts, with the documented defaults."""

import math
import re

import pytest
import torch
from train_helpers import F64, seeded_init

import attnlib as al
import attnlib.models as M
from attnlib.train import TrainConfig, regularization_path


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kw, word",
    [
        (dict(param="WQ"), "param"),
        (dict(method="adam"), "method"),
        (dict(lr=0.0), "lr"),
        (dict(lr=float("nan")), "lr"),
        (dict(steps=-1), "steps"),
        (dict(steps=2.5), "steps"),
        (dict(method="md", lp=1.0), "lp"),
        (dict(method="gd", lp=1.5), "lp"),
        (dict(loss="hinge"), "loss"),
        (dict(reg=1e-3), "reg"),
        (dict(reg=-1.0, param="KQ"), "reg"),
        (dict(eps=-1.0), "eps"),
        (dict(record_every=0), "record_every"),
        (dict(head="cubic"), "head"),
        (dict(head="relu"), "V"),
        (dict(param="W+v", head="lambda", init={"lam": 0.1}), "param"),
        (dict(init={"W": torch.zeros(5, 5)}), "init"),
        (dict(init={"W": torch.zeros(2, 6, 6), "p": torch.zeros(3, 6)}, param="v"), "init"),
        (dict(init={"Z": torch.zeros(6)}), "init"),
        (dict(init={"W": torch.full((6, 6), float("nan"))}), "init"),
        (dict(normalized=1), "normalized"),
        (dict(dtype=torch.int32), "dtype"),
        (dict(lr=True), "lr"),
        (dict(progress="yes"), "progress"),
        (dict(seed=1.5), "seed"),
    ],
)
def test_bad_input_raises(small_data, kw, word):
    with pytest.raises(ValueError, match=word):
        al.train(small_data, **{"steps": 2, **kw})


def test_bad_data_raises(small_data):
    with pytest.raises(ValueError, match="data"):
        al.train(small_data.X, steps=1)
    with pytest.raises(ValueError, match="data.z"):
        al.train(al.AttentionData(small_data.X, small_data.Y, v=small_data.v), param="W")
    with pytest.raises(ValueError, match="data.v"):
        al.train(al.AttentionData(small_data.X, small_data.Y, z=small_data.z), param="W")
    with pytest.raises(ValueError, match="radii"):
        regularization_path(small_data, [1.0, -2.0])
    with pytest.raises(ValueError, match="mask"):
        al.train(small_data, steps=1, mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask"):
        al.train(small_data, steps=1, mask=torch.zeros(4, 5, dtype=torch.bool))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_request_without_cuda_raises(small_data):
    with pytest.raises(ValueError, match="device"):
        al.train(small_data, steps=1, device="cuda")


@pytest.mark.cuda
def test_cuda_matches_cpu():
    data = al.random_data(6, 8, 10, trials=8, seed=0, device="cpu")
    cpu = al.train(data, param="KQ", steps=200)
    gpu = al.train(data, param="KQ", steps=200, device="cuda")
    assert gpu.W.device.type == "cuda"
    assert torch.allclose(gpu.W.cpu(), cpu.W, rtol=1e-8, atol=1e-10)
    assert math.isfinite(float(gpu.history["loss"].sum()))


# ----------------------------------------------------------------------------- prepare's messages
def _no_z(d):
    return al.AttentionData(d.X, d.Y, v=d.v)


def _no_v(d):
    return al.AttentionData(d.X, d.Y, z=d.z)


_B2 = dict(trials=2, seed=0, device="cpu")
_KEYS = "['K', 'Q', 'V', 'W', 'b', 'lam', 'm', 'p', 'u', 'v']"


@pytest.mark.parametrize("make, kw, msg", [
    (lambda d: d.X, {}, "data: expected an attnlib.AttentionData, got Tensor"),
    (None, dict(init=[1]), "init: expected a dict of tensors, got list"),
    (None, dict(init={"Z": torch.zeros(6), "A": 1}),
     f"init: unknown key(s) ['A', 'Z']; expected some of {_KEYS}"),
    (None, dict(init={"W": torch.zeros(6)}),
     "init['W']: expected 2 dims (or one more for trials), got shape (6,)"),
    (None, dict(init={"p": torch.zeros(2, 3, 6)}, param="p"),
     "init['p']: expected 1 dims (or one more for trials), got shape (2, 3, 6)"),
    (None, dict(init={"W": torch.zeros(2, 6, 6), "p": torch.zeros(3, 6)}, param="v"),
     "init: the trials dimensions of data and init disagree: [2, 3]"),
    (lambda d: al.random_data(4, 5, 6, **_B2), dict(init={"W": torch.zeros(3, 6, 6)}),
     "init: the trials dimensions of data and init disagree: [2, 3]"),
    (None, dict(init={"W": torch.zeros(5, 5)}),
     "init['W']: expected shape (6, 6) (or with trials first), got (5, 5)"),
    (None, dict(init={"K": torch.zeros(6, 2), "Q": torch.zeros(6, 3)}, param="KQ"),
     "init['Q']: expected shape (6, 2) (or with trials first), got (6, 3)"),
    (None, dict(init={"m": 0}, param="KQ"), "init['m']: expected an int >= 1, got 0"),
    (None, dict(param="W+v", head="lambda", init={"lam": 0.1}),
     "param: 'W+v' trains v, which only the linear head has"),
    (_no_z, dict(param="v"), "init['p']: param 'v' needs query tokens data.z or a fixed prompt p"),
    (_no_z, dict(param="KQ"),
     "data.z: param 'KQ' needs query tokens z (use random_data or pass z)"),
    (_no_v, dict(param="W"), "data.v: the linear head needs v (or train it: param 'W+v' / 'p+v')"),
    (_no_v, dict(param="p", head="lambda", init={"lam": 0.2}),
     "data.v: the lambda head needs v (or train it: param 'W+v' / 'p+v')"),
    (None, dict(mask=torch.ones(3, 3, dtype=torch.bool)),
     "mask: expected shape (n, T) or (B, n, T) = (1, 4, 5), got (3, 3)"),
    (None, dict(mask=torch.ones(1, 2, 4, 5, dtype=torch.bool)),
     "mask: expected shape (n, T) or (B, n, T) = (1, 4, 5), got (1, 2, 4, 5)"),
    (None, dict(mask=torch.ones(4, 6, dtype=torch.bool)),
     "mask: expected shape (n, T) or (B, n, T) = (1, 4, 5), got (4, 6)"),
    (None, dict(mask=torch.zeros(4, 5, dtype=torch.bool).index_fill(1, torch.tensor([0]), 1)
                .index_fill(0, torch.tensor([2]), 0)),
     "mask: expected every input to see at least one token"),
])
def test_prepare_names_the_problem_exactly(small_data, make, kw, msg):
    data = small_data if make is None else make(small_data)
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        al.train(data, steps=1, **kw)


def test_prepare_accepts_what_it_documents(small_data):
    """The other side of each check: a fixed prompt for param 'v' without z; the relu head
    needs no v; a batched mask; float32 data trained in float64 equals float64 data."""
    p0 = torch.ones(6, dtype=F64)
    r = al.train(_no_z(small_data), param="v", init={"p": p0}, steps=3, lr=0.2)
    a = M.logits_prompt(small_data.X, torch.eye(6, dtype=F64), p0)
    L = M.risk(small_data.X, small_data.Y, M.softmax(a), r.v)
    assert torch.allclose(r.history["loss"][-1], L, rtol=1e-12)
    V = torch.randn(6, 3, dtype=F64, generator=torch.Generator().manual_seed(1))
    al.train(_no_v(small_data), head="relu", init={"V": V}, steps=2)
    mask = torch.ones(2, 4, 5, dtype=torch.bool)
    mask[1, :, 0] = False
    W0 = seeded_init(6)["W"]
    rb = al.train(small_data, init={"W": W0.expand(2, 6, 6)}, mask=mask, steps=4)
    r0 = al.train(small_data, init={"W": W0}, steps=4)
    r1 = al.train(small_data, init={"W": W0}, mask=mask[1], steps=4)
    assert torch.allclose(rb.W[0], r0.W, rtol=1e-12, atol=1e-14)
    assert torch.allclose(rb.W[1], r1.W, rtol=1e-12, atol=1e-14)
    assert not torch.allclose(r0.W, r1.W, rtol=1e-6)
    r32 = al.train(small_data.to("cpu", torch.float32), init={"W": W0}, steps=4, dtype=F64)
    assert r32.W.dtype == F64 and torch.allclose(r32.W, r0.W, rtol=1e-6)


def test_train_defaults_are_the_documented_ones(monkeypatch):
    """A call with every default equals one that spells the documented values out (the
    signature test above cannot see a wrapper's defaults; this call can)."""
    import tqdm.auto

    def no_bar(*a, **kw):
        raise AssertionError("a progress bar by default")

    monkeypatch.setattr(tqdm.auto, "tqdm", no_bar)
    data = al.random_data(2, 2, 2, seed=1, device="cpu")
    a = al.train(data)
    cfg = TrainConfig(param="W", method="gd", lr=0.1, steps=1000, normalized=True, lp=2.0,
                      loss="logistic", head="linear", reg=0.0, eps=0.0, record_every=10,
                      seed=0, progress=False)
    b = al.train(data, config=cfg)
    assert torch.equal(a.W, b.W) and a.settings == b.settings == cfg.settings()
    assert torch.equal(a.history["step"], torch.arange(0, 1001, 10))


def test_loop_runs_under_few_threads_with_the_step_size(batched_data, monkeypatch):
    """run() limits threads by the size of one step, B*n*T*max(T, d), on the data's device
    (tiny problems: one thread; big ones keep theirs)."""
    import importlib

    loop = importlib.import_module("attnlib.train.loop")  # attnlib.train is the function
    real, calls = loop.few_threads, []

    def few(work=None, device=None):
        calls.append((work, device))
        return real(work, device)

    monkeypatch.setattr(loop, "few_threads", few)
    al.train(batched_data, steps=2)  # B=3, n=4, T=5, d=6
    data = al.random_data(2, 7, 3, seed=0, device="cpu")  # T > d
    al.train(data, steps=2)
    assert calls == [(3 * 4 * 5 * 6, torch.device("cpu")), (1 * 2 * 7 * 7, torch.device("cpu"))]
