"""Tests of attnlib.svm.solve_each: per-trial solves equal the batched solve, infeasible and
failed trials are flagged without stopping the rest, fallbacks are reported."""

import math

import pytest
import torch

from attnlib import svm
from attnlib.data import AttentionData, random_data
from attnlib.svm import SolveConfig
from attnlib.tokens import optimal_tokens, token_margins


@pytest.mark.parametrize("norm", ["fro", 1.5])
def test_per_trial_equals_batched(norm):
    data = random_data(4, 5, 6, trials=3, seed=0, device="cpu")
    alpha = optimal_tokens(data)
    sol = svm.solve_each(data, alpha, norm)
    W = svm.att_svm(data, alpha=alpha, norm=norm).double()
    # lp answers depend on the warm start at the certified accuracy (~1e-5 relative)
    torch.testing.assert_close(sol.W, W, rtol=0, atol=(1e-8 if norm == "fro" else 1e-4)
                               * float(W.abs().max()))
    assert sol.feasible.tolist() == [True] * 3
    assert not sol.failed.any() and not sol.fallback.any()


def _with_infeasible_trial():
    """Trial 1 selects the middle one of three collinear tokens: infeasible."""
    X = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]], dtype=torch.float64).repeat(3, 1,
                                                                                         1, 1)
    X[2, 0, :, 1] = torch.tensor([0.0, 1.0, -1.0])
    z = torch.tensor([[1.0, 0.0]], dtype=torch.float64).expand(3, 1, 2)
    return AttentionData(X, torch.ones(3, 1, dtype=torch.float64), z=z), \
        torch.tensor([[2], [1], [1]])


def test_infeasible_trial_is_flagged_and_the_rest_solved():
    data, alpha = _with_infeasible_trial()
    sol = svm.solve_each(data, alpha)
    assert sol.feasible.tolist() == [True, False, True]
    assert not sol.failed.any()
    assert torch.isnan(sol.W[1]).all() and torch.isfinite(sol.W[[0, 2]]).all()
    torch.testing.assert_close(sol.W[2], svm.att_svm(data.trial(2), alpha=alpha[2]).double())


def test_failed_and_fallback_trials():
    data = random_data(3, 4, 5, trials=2, seed=1, device="cpu")
    alpha = optimal_tokens(data)
    sol = svm.solve_each(data, alpha, config=SolveConfig(solvers=("CLARABEL",), max_iters=1))
    assert sol.failed.tolist() == [True, True] and not sol.feasible.any()
    assert torch.isnan(sol.W).all()
    # OSQP cannot solve the nuclear SDP: every trial falls back to Clarabel
    sol = svm.solve_each(data, alpha, "nuc", config=SolveConfig(solvers=("OSQP", "CLARABEL")))
    assert sol.fallback.tolist() == [True, True] and sol.feasible.all()
    conic = SolveConfig(fast=False)  # the same solver (a nuclear optimum need not be unique)
    torch.testing.assert_close(sol.W, svm.att_svm(data, alpha=alpha, norm="nuc",
                                                  config=conic).double())


def test_scs_fallback_is_certified_at_its_tolerance():
    data = random_data(3, 4, 5, trials=1, seed=2, device="cpu")
    alpha = optimal_tokens(data)
    sol = svm.solve_each(data, alpha, "nuc", config=SolveConfig(solvers=("OSQP", "SCS")))
    assert sol.fallback.tolist() == [True] and sol.feasible.all()
    m = token_margins(data, sol.W, alpha)
    assert float(m.masked_fill(m == 0, math.inf).min()) >= 1 - 1e-3
    W0 = svm.att_svm(data, alpha=alpha, norm="nuc").double()
    assert float((sol.W - W0).abs().max()) <= 1e-2 * float(W0.abs().max())


def test_bad_inputs():
    data = random_data(3, 4, 5, trials=2, seed=0, device="cpu")
    with pytest.raises(ValueError, match="trials"):
        svm.solve_each(data.trial(0), torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="alpha"):
        svm.solve_each(data, torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="config"):
        svm.solve_each(data, optimal_tokens(data), config="SCS")


def test_known_feasible_trials_skip_the_feasibility_check_with_the_same_answers(monkeypatch):
    from attnlib.data import random_data
    from attnlib.svm import engine, solve_each
    from attnlib.tokens import optimal_tokens

    data = random_data(10, 5, 4, trials=12, seed=3, device="cpu")  # some infeasible
    alpha = optimal_tokens(data)
    ref = solve_each(data, alpha, "nuc")
    calls = []
    real = engine.ldp
    monkeypatch.setattr(engine, "ldp", lambda A, b: calls.append(1) or real(A, b))
    got = solve_each(data, alpha, "nuc", feasible=ref.feasible)
    assert len(calls) == int((~ref.feasible).sum())  # the LDP only where not known
    assert torch.equal(got.feasible, ref.feasible) and torch.equal(got.failed, ref.failed)
    assert torch.equal(got.W.nan_to_num(7.0), ref.W.nan_to_num(7.0))
    # a trial wrongly declared feasible is still found infeasible (certified either way)
    wrong = solve_each(data, alpha, "nuc", feasible=torch.ones(12, dtype=torch.bool))
    assert torch.equal(wrong.feasible, ref.feasible)
