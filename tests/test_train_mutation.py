"""attnlib.train.config and attnlib.train.mirror: the cases mutation testing found untested
(issue 12). Oracles: the documented formula written out in float64, and the head's own name."""

import pytest
import torch

from attnlib import models as M
from attnlib.train.config import TrainConfig
from attnlib.train.mirror import LpMirrorDescent, normalized_step


def test_settings_name_a_head_object_by_its_name():
    head = M.make_head("relu", {"V": torch.eye(3)}, d=3)
    s = TrainConfig(head=head).settings()
    assert s["head"] == head.name == "relu" and "progress" not in s
    assert TrainConfig().settings()["head"] == "linear"


def test_keep_dual_message():
    w = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match=r"^keep_dual: expected True or False, got 1$"):
        LpMirrorDescent([w], lr=0.1, keep_dual=1)


@pytest.mark.parametrize("q", [2.0, 3.0])
def test_normalized_step_of_a_scaled_gradient_with_eps(q):
    # g is the gradient times exp(k): the step is lr G / (||G||_q + eps) with G = g exp(-k)
    g = torch.tensor([[3.0, -4.0, 1.0], [0.5, 0.25, -2.0]], dtype=torch.float64)
    k = torch.tensor([2.0, -1.5], dtype=torch.float64)
    lr, eps = 0.3, 0.7
    G = g * torch.exp(-k).unsqueeze(1)
    want = torch.stack([lr * G[b] / (G[b].abs().pow(q).sum() ** (1 / q) + eps)
                        for b in range(2)])
    got = normalized_step(g, lr, q, eps, log_scale=k)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=0)
