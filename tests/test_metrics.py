"""Tests of attnlib.metrics."""

import pytest
import torch

import attnlib.metrics as MT

g = torch.Generator().manual_seed(0)


def rnd(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=g)


def test_correlation_matrices_and_vectors():
    W = rnd(4, 7, 5, 5)
    ref = rnd(5, 5)
    c = MT.correlation(W, ref)
    assert c.shape == (4, 7)
    Wf, rf = W.reshape(4, 7, 25), ref.reshape(25)
    assert torch.allclose(c, (Wf @ rf) / (Wf.norm(dim=-1) * rf.norm()))
    assert torch.allclose(MT.correlation(ref, 3 * ref), torch.tensor(1.0, dtype=torch.float64))
    p = rnd(6, 3)
    assert MT.correlation(p, p[0]).shape == (6,)
    assert MT.correlation(rnd(3, 3), rnd(3, 3), dims=1).shape == (3,)
    assert MT.correlation(torch.zeros(3), rnd(3)) == 0
    with pytest.raises(ValueError, match="dims"):
        MT.correlation(p, p, dims=3)
    with pytest.raises(ValueError, match="A, B"):
        MT.correlation(rnd(3), rnd(4))


@pytest.mark.parametrize("lp", [1.1, 1.75, 2.0, 3.0])
def test_bregman_sanity(lp):
    W, V = rnd(3, 6, 6), rnd(3, 6, 6)
    D = MT.bregman(W, V, lp)
    assert (D >= -1e-12).all() and MT.bregman(W, W, lp).abs().max() < 1e-10
    Dd = MT.bregman_direction(W, V, lp)
    assert ((Dd >= -1e-12) & (Dd <= 2 + 1e-12)).all()
    # equals the full divergence of the lp-normalised matrices
    Wn = W / MT.lp_norm(W, lp)[:, None, None]
    Vn = V / MT.lp_norm(V, lp)[:, None, None]
    assert torch.allclose(Dd, MT.bregman(Wn, Vn, lp), atol=1e-12)
    assert MT.bregman_direction(W, 5 * W, lp).abs().max() < 1e-12


def test_bregman_at_p2():
    W, V = rnd(4, 4), rnd(4, 4)
    assert torch.allclose(MT.bregman(W, V, 2.0), 0.5 * ((W - V) ** 2).sum(), atol=1e-12)
    assert torch.allclose(MT.bregman_direction(W, V, 2.0), 1 - MT.correlation(W, V), atol=1e-12)
    with pytest.raises(ValueError, match="lp"):
        MT.bregman(W, V, 1.0)


def test_numerical_rank_relative():
    U = rnd(8, 3)
    W = U @ rnd(3, 8)
    assert MT.numerical_rank(W) == 3
    assert MT.numerical_rank(1e-9 * W) == 3  # scale-free
    noisy = W + 1e-9 * rnd(8, 8)
    assert MT.numerical_rank(noisy, rtol=1e-6) == 3 and MT.numerical_rank(noisy, rtol=1e-12) == 8
    assert MT.numerical_rank(torch.stack([W, torch.eye(8, dtype=torch.float64)])).tolist() == [3, 8]
    assert MT.numerical_rank(torch.zeros(3, 3)) == 0
    with pytest.raises(ValueError, match="W"):
        MT.numerical_rank(torch.ones(3))


def test_max_prob():
    s = torch.softmax(rnd(2, 5, 4), -1)
    assert torch.allclose(MT.max_prob(s), s.amax(-1).mean(-1))
    assert MT.max_prob(s, "none").shape == (2, 5) and MT.max_prob(s, "min").shape == (2,)
    with pytest.raises(ValueError, match="reduce"):
        MT.max_prob(s, "max")
