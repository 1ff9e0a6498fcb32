"""The smallest Att-SVMs: one input, one token, one dimension, against the cvxpy primal.

With T = 1 no token competes with the selected one, the SVM has no margin constraint and
W = 0 is its solution in every norm (value 0, no multiplier). With T = 2 and d = 1 the one
constraint ``(x_a - x_t) W z >= 1`` gives ``|W| = 1 / |(x_a - x_t) z|`` in every norm.
Both through the batched per-trial solve (:func:`attnlib.svm.solve_each`, the path of the
experiments, fast solvers included) and :func:`att_svm`, compared with
:mod:`attnlib.svm.primal` (one cvxpy constraint per token).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlib.data import AttentionData
from attnlib.svm import SolveConfig, att_svm, solve_each
from attnlib.svm.primal import att_svm_primal

NORMS = ["fro", "nuc", 1.5, 3.0]


def _data(X, z):
    X = torch.as_tensor(X, dtype=torch.float64)
    z = torch.as_tensor(z, dtype=torch.float64)
    n = X.shape[-3]
    Y = torch.ones(X.shape[:-2], dtype=torch.float64)
    v = torch.ones(X.shape[-1], dtype=torch.float64)
    return AttentionData(X, Y, z, v) if n else None


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("norm", NORMS)
def test_one_token_svm_is_zero_in_solve_each(norm, fast):
    # B = 2 trials of n = T = d = 1 (tf_rank_cap's smallest allowed setting)
    data = _data([[[[0.7]]], [[[-2.0]]]], [[[1.3]], [[0.4]]])
    sol = solve_each(data, torch.zeros(2, 1, dtype=torch.long), norm,
                     config=SolveConfig(solvers=("CLARABEL", "SCS"), fast=fast))
    value, W = att_svm_primal(np.array([[[0.7]]]), np.array([[1.3]]), [0], norm)
    assert value == pytest.approx(0.0, abs=1e-8) and np.allclose(W, 0, atol=1e-8)
    assert sol.feasible.all() and not sol.failed.any() and not sol.fallback.any()
    assert torch.equal(sol.W, torch.zeros(2, 1, 1, dtype=torch.float64))
    assert torch.equal(sol.lam, torch.zeros(2, 1, 1, dtype=torch.float64))


@pytest.mark.parametrize("norm", NORMS)
def test_one_token_att_svm_is_zero(norm):
    data = _data([[[0.7]]], [[1.3]])
    W, lam = att_svm(data, alpha=torch.zeros(1, dtype=torch.long), norm=norm,
                     return_dual=True)
    assert torch.equal(W, torch.zeros(1, 1, dtype=W.dtype)) and not lam.any()


@pytest.mark.parametrize("norm", NORMS)
def test_two_tokens_one_dimension_match_the_primal(norm):
    X, z = np.array([[[0.7], [-0.5]]]), np.array([[2.0]])  # (x_a - x_t) z = 2.4
    value, Wp = att_svm_primal(X, z, [0], norm)
    sol = solve_each(_data(X[None], z[None]), torch.zeros(1, 1, dtype=torch.long), norm)
    assert sol.feasible.all()
    assert float(sol.W[0, 0, 0]) == pytest.approx(1 / 2.4, rel=1e-6)
    assert float(sol.W[0, 0, 0]) == pytest.approx(float(Wp[0, 0]), rel=1e-5)
    assert value == pytest.approx(1 / 2.4, rel=1e-6)
    # the one margin constraint is active: its multiplier is positive, the selected one 0
    assert float(sol.lam[0, 0, 1]) > 0 and float(sol.lam[0, 0, 0]) == 0


@pytest.mark.parametrize("norm", [4.0 + 1e-9, 5.0, 16.0, 1e6, 1e300])
def test_a_large_exponent_is_refused_naming_norm_and_the_range(norm):
    """Above MAX_LP the power cones' answers are seldom certified (lp = 1e6 was an
    UncertifiedError after four attempts): a ValueError naming norm and the range instead."""
    data = _data([[[0.7], [-0.5]]], [[2.0]])
    alpha = torch.zeros(1, dtype=torch.long)
    for call in (lambda: att_svm(data, alpha=alpha, norm=norm),
                 lambda: solve_each(_data([[[[0.7], [-0.5]]]], [[[2.0]]]),
                                    torch.zeros(1, 1, dtype=torch.long), norm)):
        with pytest.raises(ValueError, match=r"^norm: an entrywise lp norm is supported for "
                                             r"1 < lp <= 4 \(.*\), got "):
            call()


def test_max_lp_is_certified_and_the_settings_bound_agrees():
    from attnlib.experiments import settings
    from attnlib.svm.config import MAX_LP

    assert settings.MAX_LP == MAX_LP == 4.0
    X, z = np.array([[[0.7], [-0.5]]]), np.array([[2.0]])
    W = att_svm(_data(X, z), alpha=torch.zeros(1, dtype=torch.long), norm=MAX_LP)
    assert float(W[0, 0]) == pytest.approx(1 / 2.4, rel=1e-6)
