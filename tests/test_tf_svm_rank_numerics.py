"""attnlib.experiments.tf_svm_rank: the official-style (K, Q) loop against the analytic
gradient of attnlib.models, and the nuclear gap's dependence on the numerics (chapter 5)."""

import math

import torch

import attnlib as al
from attnlib import models
from attnlib.experiments.tf_svm_rank import _nuclear_gap, nonunique_example, official_kq_loop


def test_official_kq_loop_takes_the_normalised_analytic_step():
    data = al.random_data(3, 4, 3, trials=2, seed=5)
    lr, reg = 0.1, 1e-3
    g = torch.Generator().manual_seed(7)  # the loop's own initialisation, drawn again
    K0, Q0 = ((torch.rand(2, 3, 3, generator=g, dtype=torch.float64) * 2 - 1) / math.sqrt(3)
              for _ in range(2))
    assert torch.allclose(official_kq_loop(data, steps=0, seed=7), K0 @ Q0.transpose(-1, -2))
    gK, gQ = models.grad_KQ(data.X, data.Y, data.z, K0, Q0, data.v, reg=reg)
    unit = lambda G: G / G.flatten(1).norm(dim=1)[:, None, None]  # noqa: E731
    K1, Q1 = K0 - lr * unit(gK), Q0 - lr * unit(gQ)
    W1 = official_kq_loop(data, steps=1, lr=lr, reg=reg, eps=0.0, seed=7)
    assert torch.allclose(W1, K1 @ Q1.transpose(-1, -2), atol=1e-12)


def test_nuclear_gap_is_zero_exactly_on_the_face_of_solutions():
    c = torch.tensor([-1.0, 0.0, 0.3, 1.0], dtype=torch.float64)
    face = torch.stack([torch.stack([torch.ones_like(c), c], -1),
                        torch.stack([c, torch.ones_like(c)], -1)], -2)  # [[1, c], [c, 1]]
    assert _nuclear_gap(3.0 * face).abs().max() < 1e-15  # any scale: unit margin first
    off = face.clone()
    off[:, 0, 1] += 0.1  # not symmetric: off the face
    assert (_nuclear_gap(off) > 1e-4).all()
    assert nonunique_example(2).X.shape == (2, 2, 2, 2)
