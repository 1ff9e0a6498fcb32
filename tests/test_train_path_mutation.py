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


@pytest.mark.parametrize("lp", [1.5, 3.0])
def test_lp_path_two_steps_by_hand(data, lp):
    """Two steps of the ℓp path written out per radius: mirror step in the dual with the
    normalised gradient (dual ℓq norm) times eta_k rho^(p-1), rho the iterate's ℓp norm (at
    the zero start R or, if smaller, 1 / max ||x_it|| ||z_i||; the dual of the radius-rho
    sphere has radius rho^(p-1)), back through the inverse mirror map, rescaled into the
    ball."""
    import attnlib.models as M

    radii, lr, q = [0.5, 3.0], 0.4, lp / (lp - 1)
    res = regularization_path(data, radii, norm=lp, steps=2, lr=lr)
    for j, R in enumerate(radii):
        W = torch.zeros(3, 3, dtype=torch.float64)
        for k in range(2):
            eta = lr * (1 - (1 - 1e-3) * k)
            Wg = W.clone().requires_grad_(True)
            L = M.risk(data.X, data.Y, M.softmax(M.logits(data.X, Wg, data.z)), data.v)
            (G,) = torch.autograd.grad(L, Wg)
            lip = float((data.X.norm(dim=-1) * data.z.norm(dim=-1)[:, None]).max())
            rho = float(W.norm(p=lp)) or min(R, 1 / lip)
            dual = W.sign() * W.abs() ** (lp - 1) - eta * rho ** (lp - 1) * G / G.norm(p=q)
            W = dual.sign() * dual.abs() ** (1 / (lp - 1))
            W = W * min(1.0, R / float(W.norm(p=lp)))
        torch.testing.assert_close(res.W[j], W, rtol=1e-10, atol=1e-13)
