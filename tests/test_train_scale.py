"""attnlib.train at extreme token scales, its run status, and how its settings combine.

Normalised gradient descent takes steps of Frobenius norm exactly ``lr`` whatever the scale of
the gradient: the oracle for "the run did not stall" is the length of each step.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnlib as al
from attnlib.sequences import random_sequences, train_sequence
from attnlib.tokens import as_mask
from attnlib.train import TrainConfig


def _scaled(scale, dtype, attention="cross", seed=1):
    d = al.random_data(6, 4, 3, seed=seed, dtype=dtype, attention=attention)
    return al.AttentionData(d.X * scale, d.Y, d.z * scale, d.v)


@pytest.mark.parametrize("attention", ["cross", "self"])
@pytest.mark.parametrize("dtype, scale", [(torch.float32, 1e7), (torch.float64, 1e52),
                                          (torch.float64, 1e19)])
def test_normalised_steps_keep_their_length_at_huge_token_scales(dtype, scale, attention):
    """Tokens of norm 1e7 in float32 (1e52 in float64): the gradient's squared norm leaves the
    dtype; every step must still have length lr, and the recorded gradient norm be finite."""
    data = _scaled(scale, dtype, attention)
    r = al.train(data, steps=30, lr=0.1, record_every=1)
    steps = (r.history["W"][1:] - r.history["W"][:-1]).flatten(1).norm(dim=1).double()
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert torch.allclose(steps, torch.full_like(steps, 0.1), rtol=1e-4 if tol > 1e-6 else tol)
    assert torch.isfinite(r.history["grad_norm"]).all()
    assert r.status.ok and int(r.nonfinite) == -1 and not bool(r.stalled)


def test_a_gradient_beyond_the_dtype_is_flagged_and_named():
    """Tokens of norm 1e18 in float32: the gradient itself overflows. The trial stops, is
    flagged, and the warning names the gradient and the tokens' size, not lp."""
    data = _scaled(1e18, torch.float32)
    with pytest.warns(RuntimeWarning, match="gradient itself overflowed") as caught:
        r = al.train(data, steps=5, lr=0.1)
    text = str(caught[0].message)
    assert "lp=" not in text and "tokens as large as" in text and "e+17" in text
    assert int(r.nonfinite) == 0 and not r.status.ok and r.status.nonfinite == 1
    assert torch.isfinite(r.W).all()


def test_sequences_at_a_huge_scale_keep_moving():
    seqs = random_sequences(3, 4, 3, seed=0, dtype=torch.float32)
    big = type(seqs)(seqs.X * 1e7, seqs.Y, seqs.v)
    r = train_sequence(big, steps=20, lr=0.1, record_every=1)
    steps = (r.history["W"][1:] - r.history["W"][:-1]).flatten(1).norm(dim=1).double()
    assert torch.allclose(steps, torch.full_like(steps, 0.1), rtol=1e-4)
    assert r.status.ok


def test_status_counts_trials_that_turn_nonfinite():
    data = al.random_data(3, 4, 5, trials=2, seed=1, dtype=torch.float32)
    with pytest.warns(RuntimeWarning):
        r = al.train(data, method="md", lp=1.01, lr=10.0, steps=3,
                     init={"W": 0.1 * torch.ones(5, 5)})
    st = r.status
    assert (st.runs, st.nonfinite, st.first_nonfinite, st.ok) == (2, 2, 0, False)
    assert al.train(data, steps=3).status.ok


@pytest.mark.parametrize("kw", [dict(lr=50), dict(steps=500), dict(param="KQ"),
                                dict(normalized=False), dict(seed=3)])
def test_a_keyword_that_contradicts_the_config_is_an_error(kw):
    data = al.random_data(3, 2, 2, seed=0)
    with pytest.raises(ValueError, match=f"^config: given together with .*{next(iter(kw))}="):
        al.train(data, config=TrainConfig(steps=5), **kw)


def test_a_keyword_that_agrees_with_the_config_is_fine():
    data = al.random_data(3, 2, 2, seed=0)
    a = al.train(data, config=TrainConfig(steps=5, lr=0.5), steps=5, lr=0.5)
    b = al.train(data, steps=5, lr=0.5)
    assert torch.equal(a.W, b.W)


@pytest.mark.parametrize("mask", [[[0.5, 1.0]] * 3, torch.full((3, 2), 2.0),
                                  torch.tensor([[1, -1]] * 3)])
def test_a_mask_is_checked_as_tokens_checks_it(mask):
    """Values other than booleans or 0/1 are refused by train as by tokens.as_mask (0.5 was
    read as visible)."""
    data = al.random_data(3, 2, 2, seed=0)
    with pytest.raises(ValueError) as ours:
        al.train(data, steps=1, mask=mask)
    with pytest.raises(ValueError) as theirs:
        as_mask(mask, data.X)
    assert str(ours.value) == str(theirs.value) == "mask: expected booleans (True = visible token)"


def test_a_zero_one_mask_equals_a_boolean_one():
    data = al.random_data(3, 3, 2, seed=0)
    m = torch.tensor([[1, 1, 0], [1, 0, 1], [0, 1, 1]])
    a = al.train(data, steps=5, mask=m)
    b = al.train(data, steps=5, mask=m.bool())
    assert torch.equal(a.W, b.W)


@pytest.mark.parametrize("seed", [2**70, -1, 0.5])
def test_seed_is_a_torch_seed(seed):
    with pytest.raises(ValueError, match="^seed: expected an int >= 0"):
        TrainConfig(seed=seed)


@settings(max_examples=25, deadline=None)
@given(log10_scale=st.floats(-2, 60), seed=st.integers(0, 2**16),
       param=st.sampled_from(["W", "p"]))
def test_every_normalised_step_has_length_lr_at_any_token_scale(log10_scale, seed, param):
    """Metamorphic: scaling the tokens changes the trajectory but never the length of a
    normalised step (float64: the gradient stays finite up to tokens of norm 1e60 here)."""
    data = _scaled(10.0 ** log10_scale, torch.float64, seed=seed)
    r = al.train(data, param=param, steps=4, lr=0.25, record_every=1)
    P = r.history[param]
    steps = (P[1:] - P[:-1]).flatten(1).norm(dim=1)
    vanished = r.history["grad_norm"][:-1] == 0  # a step of an exactly zero gradient is zero
    assert torch.allclose(steps[~vanished], torch.full_like(steps[~vanished], 0.25), rtol=1e-9)
    assert r.status.ok
