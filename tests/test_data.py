"""Tests of attnlib.data: validation, the random law, the hand-made examples."""

import math

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
        (dict(X=torch.zeros(2, 3, 4), Y=torch.tensor([1.0, 0.0])), "Y"),
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
        (dict(n=2, T=3, d=2.5), "d"),
        (dict(n=2, T=3, d=2, trials=0), "trials"),
        (dict(n=2, T=3, d=2, attention="both"), "attention"),
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


def test_three_token_example():
    ex = D.three_token_example("local", device="cpu")
    X = ex.data.X
    gamma = X[0] @ ex.data.v
    assert gamma.tolist() == [1.0, 0.9, 0.0]
    # p_mm(alpha=1) satisfies its constraints with equality on token 3 (index 2)
    k = X[0] @ ex.init["W"]
    p = ex.known["p_mm"][0]
    assert torch.allclose((k[0] - k[2]) @ p, torch.tensor(1.0, dtype=X.dtype))
    assert (k[0] - k[1]) @ p > 1
    assert ex.init["p"].shape == (6, 3)


def test_multi_input_example_recipe():
    ex = D.multi_input_example(device="cpu")
    X = ex.data.X
    assert X.shape == (3, 7, 3)
    assert torch.all(X[:, 0, 2] == 1) and torch.all(X[:, 1:, 2] == 0.5)
    g = torch.Generator().manual_seed(0)
    raw = torch.randn((3, 7, 3), generator=g) * 0.2
    assert torch.allclose(X[:, 0, :2].float(), raw[:, 0, :2] + torch.tensor([1.0, 0.0]))
    assert torch.allclose(X[:, 4:, :2].float(), raw[:, 4:, :2] - 0.5)
    assert torch.allclose(X[:, 1:4, :2].float(), raw[:, 1:4, :2] + torch.tensor([-1.0, 1.0]))


def test_joint_and_loss_examples():
    ex = D.joint_example(tight=False, device="cpu")
    assert ex.data.X[2, 1].tolist() == [0.5, 1.5]
    assert ex.known["p_relax"].tolist() == [1.0, 0.0]
    le = D.loss_example(device="cpu")
    assert le.data.B == 11 and le.data.X[-1, 0, 1, 2] == 100
    assert D.loss_example(C=3, device="cpu").data.B is None
    with pytest.raises(ValueError, match="C"):
        D.loss_example(C=[[1, 2]])


def test_visualization_and_mirror_examples():
    v2 = D.visualization_example(2, device="cpu")
    assert v2.data.X[0, 0].tolist() == [1.0, 0.5] and v2.data.T == 5
    assert D.visualization_example(1, device="cpu").data.T == 3
    mj = D.mirror_joint_example(3.0, device="cpu")
    assert torch.equal(mj.data.z, mj.data.X[:, 0]) and mj.settings["steps"] == 20000
    mr = D.mirror_random_data(seed=1, trials=2, device="cpu")
    assert mr.init["W"].shape == (2, 10, 10) and mr.data.B == 2


def test_lambda_head_example_optimum():
    ex = D.lambda_head_example(lam=0.25, gamma=(1.0, 0.8, 0.2, -0.5), device="cpu")
    s = ex.known["s_opt"]
    assert math.isclose(float(s.sum()), 1.0) and ex.known["selected"] == [0, 1]
    # the mixture beats every vertex of the simplex for f = gamma^T s - lam ||s||^2
    gam = ex.data.v
    f = gam @ s - 0.25 * s @ s
    assert f > gam.max() - 0.25
