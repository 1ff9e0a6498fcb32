"""attnlib.train.path: the cases mutation testing found untested (issue 12, item 8):
the ``norm`` messages in full, and the (K, Q) path's Frobenius-only rule at both sides."""

import re

import pytest
import torch

import attnlib as al
from attnlib.train import regularization_path


@pytest.fixture
def data():
    return al.random_data(3, 4, 3, seed=1, device="cpu", dtype=torch.float64)


@pytest.mark.parametrize("kw, msg", [
    (dict(norm=1.0), "norm: expected a finite number > 1, got 1.0"),
    (dict(param="KQ", norm=3.0), "norm: the (K,Q) path is Frobenius only, got norm=3.0"),
    (dict(param="KQ", norm=1.5), "norm: the (K,Q) path is Frobenius only, got norm=1.5"),
])
def test_norm_messages(data, kw, msg):
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        regularization_path(data, [1.0], steps=2, **kw)


def test_kq_path_accepts_norm_2_as_frobenius(data):
    a = regularization_path(data, [1.0, 3.0], param="KQ", norm=2.0, steps=20)
    b = regularization_path(data, [1.0, 3.0], param="KQ", steps=20)
    torch.testing.assert_close(a.K, b.K, rtol=0, atol=0)
    torch.testing.assert_close(a.W, b.W, rtol=0, atol=0)
