"""Tests of attnlib.train.path: the regularisation path (chapter 2)."""

import pytest
import torch

import attnlib as al
from attnlib.train import regularization_path

F64 = torch.float64


def test_regularization_path_turns_to_max_margin():
    ex = al.three_token_example("global", device="cpu")
    path = regularization_path(ex.data, [1, 4, 16], param="p", init={"W": ex.init["W"]},
                               steps=800)
    c = al.correlation(path.p, ex.known["p_mm"][0])
    assert torch.allclose(path.p.norm(dim=-1), torch.tensor([1.0, 4, 16], dtype=F64))
    assert c[0] < c[1] < c[2] and c[2] > 0.99
    W = regularization_path(al.random_data(3, 4, 6, trials=2, device="cpu"), [2.0, 8.0],
                            steps=50)
    assert W.W.shape == (2, 2, 6, 6) and W.loss.shape == (2, 2)
    assert (W.loss[:, 1] < W.loss[:, 0]).all()


def test_path_solution_is_stationary_on_the_ball():
    """At the solution the gradient points out of the ball: -grad L is parallel to W (KKT)."""
    data = al.random_data(3, 4, 5, seed=2, device="cpu")
    path = regularization_path(data, [0.5], steps=3000)
    W = path.W[0]
    G = al.models.grad_W(data.X, data.Y, data.z, W, data.v)
    assert torch.allclose(W.norm(), torch.tensor(0.5, dtype=F64))
    assert al.correlation(-G, W) > 1 - 1e-6


def test_path_bad_input(small_data):
    with pytest.raises(ValueError, match="param"):
        regularization_path(small_data, [1.0], param="v")
    with pytest.raises(ValueError, match="steps"):
        regularization_path(small_data, [1.0], steps=0)
