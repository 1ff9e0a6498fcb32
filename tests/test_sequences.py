"""Tests for attnlib.sequences: sequence / causal self-attention (chapter 8)."""

import numpy as np
import pytest
import torch

import attnlib.models as M
from attnlib import sequences as S


@pytest.fixture
def data():
    return S.random_sequences(3, 5, 4, trials=2, seed=1, device="cpu")


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("loss", ["logistic", "exp", "correlation"])
def test_gradient_matches_autograd(data, causal, loss):
    W = torch.randn(2, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    L, grad = S.sequence_grad(data, W, causal, loss)
    Wr = W.clone().requires_grad_(True)
    L_auto = S.sequence_loss(data, Wr, causal, loss)
    (g_auto,) = torch.autograd.grad(L_auto.sum(), Wr)
    torch.testing.assert_close(L, L_auto.detach(), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(grad, g_auto, rtol=1e-10, atol=1e-14)


def test_causal_mask_hides_future_tokens(data):
    W = torch.randn(2, 4, 4, dtype=torch.float64)
    s = S.sequence_softmax(data.X, W, causal=True)
    future = ~S.causal_mask(5, True)
    assert (s[..., future] == 0).all()
    torch.testing.assert_close(s.sum(-1), torch.ones_like(s.sum(-1)))
    # changing the last token changes no prediction but the last position's
    X2 = data.X.clone()
    X2[..., -1, :] = torch.randn_like(X2[..., -1, :])
    other = S.SequenceData(X2, data.Y, data.v)
    f1, f2 = S.sequence_output(data, W), S.sequence_output(other, W)
    torch.testing.assert_close(f1[..., :-1], f2[..., :-1], rtol=0, atol=0)
    assert not torch.allclose(f1[..., -1], f2[..., -1])
    # bidirectional attention does see it
    g1, g2 = S.sequence_output(data, W, causal=False), S.sequence_output(other, W, causal=False)
    assert not torch.allclose(g1[..., 0], g2[..., 0])


def test_optimal_tokens_are_visible(data):
    alpha = S.sequence_optimal_tokens(data, causal=True)
    k = torch.arange(5)
    assert (alpha <= k).all() and (alpha[..., 0] == 0).all()
    full = S.sequence_optimal_tokens(data, causal=False)
    gam = data.Y[..., None] * torch.einsum("bitd,bd->bit", data.X, data.v)[..., None, :]
    assert torch.equal(full, gam.argmax(-1))


def test_query_pairs_reproduce_logits(data):
    W = torch.randn(2, 4, 4, dtype=torch.float64)
    Xp, z, mask = S.query_pairs(data, causal=True)
    assert Xp.shape == (2, 15, 5, 4) and z.shape == (2, 15, 4) and mask.shape == (15, 5)
    a_pairs = torch.einsum("bptd,bde,bpe->bpt", Xp, W, z)
    a_seq = S.sequence_logits(data.X, W, causal=False).reshape(2, 15, 5)
    torch.testing.assert_close(a_pairs, a_seq)
    assert torch.equal(mask, S.causal_mask(5).repeat(3, 1))


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_batched_equals_looped(data, param):
    kw = dict(param=param, steps=60, lr=0.1, reg=1e-3 if param == "KQ" else 0.0,
              record_every=20)
    g = torch.Generator().manual_seed(0)  # (the same start whatever ran before)
    init = ({"W": 0.1 * torch.randn(2, 4, 4, dtype=torch.float64, generator=g)}
            if param == "W" else
            {k: 0.3 * torch.randn(2, 4, 4, dtype=torch.float64, generator=g) for k in "KQ"})
    batched = S.train_sequence(data, init=init, **kw)
    for b in range(2):
        one = S.train_sequence(data.trial(b), init={k: t[b] for k, t in init.items()}, **kw)
        # (60 normalised steps of a bilinear model amplify the rounding of a batched against a
        # single matrix product to ~1e-9; a batching mistake moves W by O(1))
        torch.testing.assert_close(batched.W[b], one.W, rtol=1e-7, atol=1e-9)
        torch.testing.assert_close(batched.history["max_prob"][b], one.history["max_prob"],
                                   rtol=1e-10, atol=1e-12)
    assert batched.history["W"].shape == (2, 4, 4, 4)
    assert batched.history["step"].tolist() == [0, 20, 40, 60]


def test_loss_falls_and_attention_saturates_without_nan():
    data = S.random_sequences(2, 4, 6, trials=3, seed=2, device="cpu")
    res = S.train_sequence(data, steps=1500, record_every=500)
    loss, W = res.history["loss"], res.W
    assert torch.isfinite(W).all() and torch.isfinite(loss).all()
    assert (loss[:, -1] < loss[:, 0]).all()
    assert (res.history["max_prob"][:, -1] > 0.999).all()
    # the normalised step keeps moving the norm by lr per step until the gradient underflows
    norms = res.history["W"].flatten(-2).norm(dim=-1)
    assert (norms[:, -1] > 100).all()


def _position_loop_loss(data, W, causal, loss):
    """The risk by an explicit loop over sequences and positions (no mask, no pairs)."""
    n, T = data.n, data.T
    terms = []
    for i in range(n):
        for k in range(T):
            seen = data.X[i, :k + 1] if causal else data.X[i]  # (t, d)
            s = torch.softmax(seen @ W @ data.X[i, k], dim=0)
            f = s @ (seen @ data.v)
            terms.append(M.loss_value(data.Y[i, k] * f, loss))
    return torch.stack(terms).mean()


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("param, normalized", [("W", True), ("W", False), ("KQ", True)])
def test_training_matches_a_loop_over_positions(causal, param, normalized):
    data = S.random_sequences(2, 4, 5, seed=3, device="cpu")
    g = torch.Generator().manual_seed(4)
    init = {k: torch.randn(5, 5, generator=g, dtype=torch.float64)
            for k in (("W",) if param == "W" else ("K", "Q"))}
    lr, steps, reg = 0.2, 4, 0.01 if param == "KQ" else 0.0
    res = S.train_sequence(data, param=param, causal=causal, lr=lr, steps=steps,
                           normalized=normalized, init=init, reg=reg, record_every=1)
    P = {k: t.clone() for k, t in init.items()}
    for _ in range(steps):
        P = {k: t.detach().requires_grad_(True) for k, t in P.items()}
        W = P["W"] if param == "W" else P["K"] @ P["Q"].T
        L = _position_loop_loss(data, W, causal, "logistic")
        L = L + reg * sum(t.pow(2).sum() for k, t in P.items() if k in "KQ")
        grads = torch.autograd.grad(L, list(P.values()))
        P = {k: t - (lr * gr / gr.norm() if normalized else lr * gr)
             for (k, t), gr in zip(P.items(), grads)}
    W = P["W"] if param == "W" else P["K"] @ P["Q"].T
    torch.testing.assert_close(res.W, W.detach(), rtol=1e-10, atol=1e-12)
    L0 = _position_loop_loss(data, init["W"] if param == "W" else init["K"] @ init["Q"].T,
                             causal, "logistic")
    torch.testing.assert_close(res.history["loss"][0], L0, rtol=1e-12, atol=0)


def test_numpy_scalars_and_selected_tokens():
    data = S.random_sequences(2, 4, 5, seed=1, device="cpu")
    a = S.train_sequence(data, lr=np.float64(0.1), steps=np.int64(30), record_every=10)
    b = S.train_sequence(data, lr=0.1, steps=30, record_every=10)
    assert torch.equal(a.W, b.W) and a.history["step"].tolist() == [0, 10, 20, 30]
    logits = S.sequence_logits(data.X, a.W, causal=True)
    assert torch.equal(S.sequence_selected_tokens(data, a.W), logits.argmax(-1))


def test_bad_input_raises():
    with pytest.raises(ValueError, match="Y: expected labels"):
        S.SequenceData(torch.zeros(2, 3, 4, dtype=torch.float64),
                       torch.zeros(2, 3, dtype=torch.float64), torch.ones(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="v: expected shape"):
        S.SequenceData.of(torch.zeros(2, 3, 4), torch.ones(2, 3), torch.ones(5), device="cpu")
    with pytest.raises(ValueError, match="X: contains NaN"):
        S.SequenceData.of(torch.full((2, 3, 4), float("nan")), torch.ones(2, 3), torch.ones(4),
                          device="cpu")
    data = S.random_sequences(2, 3, 4, device="cpu")
    with pytest.raises(ValueError, match="param"):
        S.train_sequence(data, param="p")
    with pytest.raises(ValueError, match="lr"):
        S.train_sequence(data, lr=0)
    with pytest.raises(ValueError, match="steps"):
        S.train_sequence(data, steps=-1)
    with pytest.raises(ValueError, match="loss"):
        S.train_sequence(data, loss="hinge")
    with pytest.raises(ValueError, match="data"):
        S.train_sequence(data.X)
    with pytest.raises(ValueError, match="n: expected"):
        S.random_sequences(0, 3, 4)
    with pytest.raises(ValueError, match="trials"):
        S.random_sequences(2, 3, 4, trials=0)


@pytest.mark.parametrize("shape", [(2, 0, 3), (0, 3, 3), (2, 3, 0)])
def test_empty_sequences_are_refused(shape):
    n, T, d = shape
    with pytest.raises(ValueError, match=r"^X: expected at least one .*n, T, d >= 1"):
        S.SequenceData(torch.ones(n, T, d, dtype=torch.float64),
                       torch.ones(n, T, dtype=torch.float64), torch.ones(d, dtype=torch.float64))


@pytest.mark.parametrize("T", [-2, 0, 2.5, "3"])
def test_causal_mask_needs_a_positive_length(T):
    with pytest.raises(ValueError, match="^T: expected an int >= 1"):
        S.causal_mask(T)
    with pytest.raises(ValueError, match="^causal: expected True or False"):
        S.causal_mask(3, causal="yes")
    assert S.causal_mask(3.0).tolist() == S.causal_mask(3).tolist()


def test_sequence_data_shares_the_sizes_and_trials_of_attention_data(data):
    """SequenceData and AttentionData read n, T, d, B and trials from one home."""
    from attnlib.data import AttentionData, TokenData

    assert isinstance(data, TokenData) and issubclass(AttentionData, TokenData)
    assert (data.B, data.n, data.T, data.d) == (2, 3, 5, 4)
    assert (data.dtype, data.device.type) == (torch.float64, "cpu")
    one = data.trial(-1)
    assert type(one) is S.SequenceData and one.B is None
    assert torch.equal(one.X, data.X[1]) and torch.equal(one.Y, data.Y[1])
    assert torch.equal(one.v, data.v[1])
    with pytest.raises(ValueError, match=r"^b: expected an int >= -2 and <= 1, got 2"):
        data.trial(2)
    with pytest.raises(ValueError, match=r"^b: expected data with a trials dimension"):
        one.trial(0)
    with pytest.raises(ValueError, match=r"^seed: expected an int >= 0"):
        S.random_sequences(2, 3, 4, seed=2**70)
