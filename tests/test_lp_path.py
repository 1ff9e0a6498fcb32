"""regularization_path(norm=lp): the entrywise ℓp ball, against an independent oracle.

The oracle is scipy's SLSQP on min L(W) s.t. sum |W_jk|^p <= R^p (the loss written in numpy,
several starts, the best kept). At p = 2 the ℓp path is the Frobenius path exactly.
"""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

import attnlib as al
from attnlib.experiments import mirror_regpath
from attnlib.train import regularization_path


def numpy_loss(data):
    X, Y, z, v = (np.asarray(t) for t in (data.X, data.Y, data.z, data.v))
    d = X.shape[-1]

    def L(w):
        s = X @ w.reshape(d, d) @ z[:, :, None]
        s = s[..., 0] - s[..., 0].max(1, keepdims=True)
        a = np.exp(s) / np.exp(s).sum(1, keepdims=True)
        return np.log1p(np.exp(-Y * (a * (X @ v)).sum(1))).mean()

    return L


@pytest.mark.slow
@pytest.mark.parametrize("p", [1.25, 3.0])
def test_lp_path_matches_scipy(p):
    data = al.random_data(3, 4, 3, seed=2, dtype=torch.float64)
    radii = [0.5, 4.0]
    # (1000 steps: the path's points agree with those of 3000 steps to 1e-15)
    res = regularization_path(data, radii, norm=p, steps=1000)
    L = numpy_loss(data)
    rng = np.random.default_rng(0)
    for j, R in enumerate(radii):
        best = None
        for _ in range(6):
            x0 = rng.normal(size=9)
            x0 *= 0.9 * R / np.sum(np.abs(x0) ** p) ** (1 / p)
            # (the ball's exact gradient: with finite differences of |w|^p near 0 a third of
            # the starts at p = 1.25 ran past 600 iterations; with it every start converges
            # in at most ~180; a start that does not converge is dropped)
            o = minimize(L, x0, method="SLSQP", options=dict(ftol=1e-14, maxiter=600),
                         constraints=[{"type": "ineq",
                                       "fun": lambda w, R=R: R ** p - np.sum(np.abs(w) ** p),
                                       "jac": lambda w: -p * np.sign(w) * np.abs(w) ** (p - 1)}])
            if o.success and (best is None or o.fun < best.fun):
                best = o
        W = res.W[j].numpy().ravel()
        assert float(res.loss[j]) <= best.fun + 1e-9  # as good as the oracle's best
        assert np.abs(W - best.x).max() <= 1e-4 * np.abs(best.x).max()
        assert np.sum(np.abs(W) ** p) ** (1 / p) <= R * (1 + 1e-12)  # inside the ball
        assert L(W) == pytest.approx(float(res.loss[j]), rel=1e-10)


def test_p2_is_the_frobenius_path_and_errors():
    data = al.random_data(3, 4, 3, seed=1, dtype=torch.float64)
    a = regularization_path(data, [1.0, 5.0], norm=2.0, steps=300)
    b = regularization_path(data, [1.0, 5.0], steps=300)
    torch.testing.assert_close(a.W, b.W, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="norm"):
        regularization_path(data, [1.0], norm=1.0)
    with pytest.raises(ValueError, match="norm"):
        regularization_path(data, [1.0], param="KQ", norm=1.5)


def test_md_lp_path_small_turns_to_the_lp_svm():
    """The experiment's numbers recomputed from its arrays (numpy D_dir), and the path's
    direction closer to the lp- than to the l2-AttSVM at the largest radius."""
    fn = getattr(mirror_regpath.lp_path, "__wrapped__", mirror_regpath.lp_path)
    numbers, a = fn(trials=2, lps=(1.25,), radii=(1.0, 10.0, 100.0), steps=1000)
    W, S = np.asarray(a["W_0"]), np.asarray(a["svm_0"])

    def unit(A):
        return A / (np.abs(A) ** 1.25).sum((-2, -1), keepdims=True) ** 0.8

    D = 1 - (np.sign(unit(W)) * np.abs(unit(W)) ** 0.25 * unit(S)[:, None]).sum((-2, -1))
    np.testing.assert_allclose(np.asarray(a["ddir_p_0"]), D, atol=1e-12)
    assert numbers["ddir_falls"] == 1 and (np.diff(D.mean(0)) < 0).all()
    assert (D[:, -1] < np.asarray(a["ddir_2_0"])[:, -1]).all()
    assert numbers["matched_closer"] == 1.0
