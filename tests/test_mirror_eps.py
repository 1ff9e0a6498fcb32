"""md_convergence runs the official ε (float64 machine epsilon) by default, and ε matters.

With η_k = η/(‖G‖_q + ε), once ‖G‖_q is far below ε the step is about η‖G‖_q/ε: the
direction freezes. Oracle: the same runs through attnlib.train with explicit eps, and the
directional divergence in numpy.
"""

import inspect

import numpy as np
import pytest
import torch

import attnlib as al
from attnlib.examples import EPS
from attnlib.experiments import mirror, run


def test_default_is_the_official_eps():
    fn = getattr(mirror.convergence, "__wrapped__", mirror.convergence)
    assert inspect.signature(fn).parameters["eps"].default == EPS == 2.0 ** -52


@pytest.mark.slow
def test_eps_freezes_the_direction_at_p175():
    kw = dict(cache=False, trials=3, lps=(1.75,), steps=(1500,), records=10)
    off = run("md_convergence", eps=0.0, **kw)
    on = run("md_convergence", **kw)
    # once the gradient is below eps the run has (almost) stopped, so eps = 0 ends closer
    assert on.numbers["grad_final_p175"] < 0.1 * EPS
    assert off.numbers["ddir_p175"] < 0.5 * on.numbers["ddir_p175"]
    # recompute the eps run's final divergence independently
    ex = al.mirror_random_data(seed=1, trials=3)
    W = al.train(ex.data, param="W", method="md", lp=1.75, lr=0.1, steps=1500,
                 normalized=True, eps=EPS, init={"W": ex.init["W"]}).W.numpy()
    S = np.asarray(on.arrays["Wmm_0"])

    def unit(A):
        return A / (np.abs(A) ** 1.75).sum((-2, -1), keepdims=True) ** (1 / 1.75)

    D = 1 - (np.sign(unit(W)) * np.abs(unit(W)) ** 0.75 * unit(S)).sum((-2, -1))
    assert np.isclose(D.mean(), on.numbers["ddir_p175"], rtol=1e-6)
    assert torch.equal(torch.as_tensor(on.arrays["alpha_0"]), al.selected_tokens(
        ex.data, torch.as_tensor(W)))
