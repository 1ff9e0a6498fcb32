"""Tests of attnlib.data: validation, the random law (the examples: test_examples.py)."""

import numpy as np
import pytest
import torch

import attnlib.data as D


def test_shapes_and_properties(small_data, batched_data):
    d = small_data
    assert (d.n, d.T, d.d, d.B) == (4, 5, 6, None)
    assert d.dtype == torch.float64 and d.device.type == "cpu"
    b = batched_data
    assert b.B == 3 and b.X.shape == (3, 4, 5, 6) and b.z.shape == (3, 4, 6) and b.v.shape == (3, 6)
    one = d.batched()
    assert one.B == 1 and torch.equal(one.X[0], d.X)
    assert d.batched(5).X.shape == (5, 4, 5, 6)
    assert torch.equal(b.trial(2).X, b.X[2])


def test_random_law_unit_norms_and_labels():
    d = D.random_data(6, 8, 10, trials=5, seed=3, device="cpu")
    one = torch.ones((), dtype=torch.float64)
    assert torch.allclose(d.X.norm(dim=-1), one, atol=1e-14)
    assert torch.allclose(d.z.norm(dim=-1), one, atol=1e-14)
    assert torch.allclose(d.v.norm(dim=-1), one, atol=1e-14)
    assert set(d.Y.unique().tolist()) <= {-1.0, 1.0}


def test_random_data_trials_are_seeds():
    batch = D.random_data(6, 8, 10, trials=4, seed=7, device="cpu")
    for b in range(4):
        single = D.random_data(6, 8, 10, seed=7 + b, device="cpu")
        assert torch.equal(batch.trial(b).X, single.X)
        assert torch.equal(batch.trial(b).z, single.z)


def test_random_data_matches_official_generator():
    """Trial b is the TF-SVM notebooks' data_generator(seed) up to float32 rounding."""
    n, T, d, seed = 6, 8, 10, 5
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(d, generator=g)
    v /= v.norm()
    Y = 2 * torch.ones(n) * (torch.randn(n, generator=g) > 0) - 1
    X = torch.randn((n, T, d), generator=g)
    X /= X.norm(dim=-1, keepdim=True)
    Z = torch.randn((n, d), generator=g)
    Z /= Z.norm(dim=-1, keepdim=True)
    ours = D.random_data(n, T, d, seed=seed, device="cpu")
    assert torch.allclose(ours.X, X.double(), atol=1e-6)
    assert torch.allclose(ours.z, Z.double(), atol=1e-6)
    assert torch.allclose(ours.v, v.double(), atol=1e-6)
    assert torch.equal(ours.Y, Y.double())


def test_self_attention_query_is_first_token():
    d = D.random_data(3, 4, 5, seed=0, attention="self", device="cpu")
    assert torch.equal(d.z, d.X[:, 0])


def test_dtype_and_to():
    d = D.random_data(3, 4, 5, seed=0, device="cpu", dtype=torch.float32)
    assert d.dtype == torch.float32
    d64 = d.to(dtype=torch.float64)
    assert d64.dtype == torch.float64 and d64.Y.dtype == torch.float64


def test_numpy_input_and_shared_fields():
    X = np.random.default_rng(0).normal(size=(2, 3, 4, 5))
    data = D.AttentionData(X, [1, -1, 1], z=np.ones((3, 5)), v=np.ones(5))
    assert data.B == 2 and data.Y.shape == (2, 3) and data.z.shape == (2, 3, 5)
    assert data.dtype == torch.float64


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(X=torch.zeros(3, 4), Y=torch.ones(3)), "X"),
        (dict(X=torch.zeros(2, 3, 4), Y=torch.ones(3)), "Y"),
        (dict(X=torch.zeros(2, 3, 4), Y=torch.tensor([1.0, 0.0])),
         r"^Y: expected labels in \{-1, \+1\}, got values such as \[0.0\]"),
        (dict(X=torch.zeros(2, 3, 4), Y=np.array([1, 2])), r"^Y: expected labels in"),
        (dict(X=torch.zeros(2, 3, 4, 5, 6), Y=torch.ones(2)),
         r"^X: expected shape \(n,T,d\) or \(B,n,T,d\), got \(2, 3, 4, 5, 6\)"),
        (dict(X=torch.zeros(2, 0, 4), Y=torch.ones(2)), r"^X: expected every dimension >= 1"),
        (dict(X=torch.full((2, 3, 4), float("nan")), Y=torch.ones(2)), "X"),
        (dict(X=torch.zeros(2, 3, 4), Y=torch.ones(2), z=torch.zeros(2, 3)), "z"),
        (dict(X=torch.zeros(2, 3, 4), Y=torch.ones(2), v=torch.zeros(3)), "v"),
        (dict(X=torch.zeros(2, 3, 4), Y=torch.ones(2), v=torch.tensor([1.0, float("inf"), 0, 0])),
         "v"),
        (dict(X=torch.zeros(2, 2, 3, 4), Y=torch.ones(3, 2)), "Y"),
    ],
)
def test_bad_data_raises(kwargs, word):
    with pytest.raises(ValueError, match=word):
        D.AttentionData(**kwargs)


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(n=0, T=3, d=2), "n"),
        (dict(n=2, T=3, d=2.5), r"^d: expected an int >= 1, got 2.5"),
        (dict(n=True, T=3, d=2), r"^n: expected an int >= 1, got True"),
        (dict(n=2, T=3, d=2, seed=1.5), r"^seed: expected an int >= 0 and <= \d+, got 1.5"),
        (dict(n=2, T=3, d=2, trials=0), "trials"),
        (dict(n=2, T=3, d=2, attention="both"), r"^attention: expected one of \('cross', 'self'\)"),
        (dict(n=2, T=3, d=2, dtype=torch.int64), "dtype"),
        (dict(n=2, T=3, d=2, device="nonsense"), "device"),
    ],
)
def test_bad_random_data_raises(kwargs, word):
    with pytest.raises(ValueError, match=word):
        D.random_data(**kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_request_without_cuda_raises():
    with pytest.raises(ValueError, match="device"):
        D.random_data(2, 3, 4, device="cuda")
    assert D.default_device().type == "cpu"


@pytest.mark.cuda
def test_cuda_reproducible():
    cpu = D.random_data(6, 8, 10, trials=3, seed=0, device="cpu")
    gpu = D.random_data(6, 8, 10, trials=3, seed=0, device="cuda")
    assert torch.equal(gpu.X.cpu(), cpu.X)


def test_numpy_and_torch_scalars_accepted():
    a = D.random_data(np.int64(3), torch.tensor(4), 5, trials=np.int32(2), seed=np.int64(7),
                      device="cpu")
    b = D.random_data(3, 4, 5, trials=2, seed=7, device="cpu")
    assert torch.equal(a.X, b.X) and a.B == 2
    assert a.batched(np.int64(2)) is a and torch.equal(a.trial(np.int64(1)).X, b.X[1])
    assert torch.equal(a.trial(-1).X, b.X[1])


def test_trial_and_batched_bounds():
    b = D.random_data(3, 4, 5, trials=2, seed=0, device="cpu")
    with pytest.raises(ValueError, match=r"^b: expected an int >= -2 and <= 1, got 2"):
        b.trial(2)
    with pytest.raises(ValueError, match=r"^B: expected 1 or 2 \(the data has 2 trials\), got 3$"):
        b.batched(3)
    with pytest.raises(ValueError, match=r"^B: expected an int >= 1"):
        b.trial(0).batched(0)
    with pytest.raises(ValueError, match=r"^b: expected data with a trials dimension"):
        b.trial(0).trial(0)
    with pytest.raises(ValueError, match=r"^fields: expected some of X, Y, z, v, got \['W'\]$"):
        b.with_(W=1)
    assert torch.equal(b.with_(Y=-b.Y).Y, -b.Y)


def test_official_draw_order():
    """v, Y, X, z from one generator, in this order; self-attention draws no z."""
    g1, g2 = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    v, Y, X, z = D.official_draw(3, 4, 5, g1, "cross")
    rv, rY, rX, rz = (torch.randn(5, generator=g2), torch.randn(3, generator=g2),
                      torch.randn(3, 4, 5, generator=g2), torch.randn(3, 5, generator=g2))
    assert torch.equal(v, rv) and torch.equal(X, rX) and torch.equal(z, rz)
    assert torch.equal(Y, 2.0 * (rY > 0).double() - 1.0)
    assert D.official_draw(3, 4, 5, torch.Generator(), "self")[3] is None


def test_device_policy_reexported():
    import attnlib._runtime as R
    import attnlib._validate as V

    assert D.default_device is R.default_device and D.resolve_device is R.resolve_device
    assert D.resolve_dtype is R.resolve_dtype and D.as_tensor is V.as_tensor
    assert D.random_data(2, 2, 2).device == R.default_device()  # the one default


@pytest.mark.parametrize("seed, trials", [(2**70, None), (-1, None), (2**64 - 2, 3)])
def test_seed_is_a_generator_seed(seed, trials):
    """Every trial's seed must fit a torch.Generator (0 .. 2**64 - 1): a clear ValueError, not
    an overflow from inside torch."""
    with pytest.raises(ValueError, match=r"^seed: expected an int >= 0 and <= \d+, got -?\d+$"):
        D.random_data(2, 3, 4, trials=trials, seed=seed, device="cpu")
    assert D.random_data(2, 3, 4, trials=2, seed=2**64 - 2, device="cpu").B == 2
