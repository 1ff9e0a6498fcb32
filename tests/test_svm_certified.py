"""Every solve path of attnlib.svm.engine returns only answers certified at its own tolerance.

Each test makes one path's solver answer slightly wrong (the solution shrunk by a relative
1e-4, so the active margins are 1 - 1e-4) and checks what comes back: the exact answer (from
another path) or an UncertifiedError, never the wrong one. The oracle is the per-constraint
cvxpy primal of attnlib.svm.primal, which shares no code with the engine.
"""

import numpy as np
import pytest
import torch

from attnlib import svm
from attnlib.svm import SolveConfig, UncertifiedError, engine
from attnlib.svm.primal import att_svm_primal

SHRINK = 1e-4  # above tol (1e-6), below first_order_tol (1e-3)
CLARABEL_ONLY = dict(solvers=("CLARABEL",))


def _instances(seed, B):
    """B random feasible Att-SVM instances, n=2, T=3, d=2 (4 constraints, 4 unknowns)."""
    g = np.random.default_rng(seed)
    X = torch.tensor(g.standard_normal((B, 2, 3, 2)), dtype=torch.float64)
    z = torch.tensor(g.standard_normal((B, 2, 2)), dtype=torch.float64)
    alpha = torch.tensor(g.integers(0, 3, (B, 2)))
    return X, z, alpha


def _oracle(X, z, alpha, norm):
    return np.stack([att_svm_primal(X[b].numpy(), z[b].numpy(), alpha[b].numpy(), norm)[1]
                     for b in range(len(X))])


def _assert_exact(W, X, z, alpha, norm):
    want = _oracle(X, z, alpha, norm)
    err = np.abs(W.numpy() - want).max(axis=(1, 2)) / np.abs(want).max(axis=(1, 2))
    assert err.max() < SHRINK / 10, f"relative errors {err}"


RUN = engine._run


def _spoil_runs(monkeypatch, chunks_only=False, shrink=SHRINK):
    """The conic solver's answers come back shrunk (only those of chunks, k > 1, or all)."""

    def spoiled(comp, items, solver, opts, warm):
        status, out = RUN(comp, items, solver, opts, warm)
        if status == "solved" and (len(items) > 1 or not chunks_only):
            out = [(np.asarray(w) * (1 - shrink), lam, mu) for w, lam, mu in out]
        return status, out

    monkeypatch.setattr(engine, "_run", spoiled)


def test_chunked_answers_are_certified_at_the_solvers_tolerance(monkeypatch):
    X, z, alpha = _instances(0, 11)  # one chunk of 8 Frobenius problems, then 3 alone
    _spoil_runs(monkeypatch, chunks_only=True)
    W = svm.att_svm(X, z=z, alpha=alpha, config=SolveConfig(fast=False, **CLARABEL_ONLY))
    _assert_exact(W, X, z, alpha, "fro")  # each chunk member was re-solved alone


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.5])
def test_a_single_wrong_answer_is_never_returned(monkeypatch, norm):
    X, z, alpha = _instances(1, 1)
    _spoil_runs(monkeypatch)
    with pytest.raises(UncertifiedError):
        svm.att_svm(X[0], z=z[0], alpha=alpha[0], norm=norm,
                    config=SolveConfig(fast=False, **CLARABEL_ONLY))


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_fast_answers_are_certified_at_tol(monkeypatch, norm):
    X, z, alpha = _instances(2, 3)
    ldp, ipm = engine.ldp, engine.nuclear_ipm

    def ldp_shrunk(A, b):
        status, *sol = ldp(A, b)
        return (status, sol[0] * (1 - SHRINK), sol[1]) if status == "solved" else (status, *sol)

    def ipm_shrunk(*args, **kw):
        M, lam, done = ipm(*args, **kw)
        return M * (1 - SHRINK), lam, done

    monkeypatch.setattr(engine, "ldp", ldp_shrunk)
    monkeypatch.setattr(engine, "nuclear_ipm", ipm_shrunk)
    W = svm.att_svm(X, z=z, alpha=alpha, norm=norm, config=SolveConfig(**CLARABEL_ONLY))
    _assert_exact(W, X, z, alpha, norm)  # the conic path answered instead


def test_first_order_answers_are_certified_at_their_own_tolerance(monkeypatch):
    """SCS (about 1e-4 accurate) is certified at first_order_tol: a 1e-4 error passes, a
    1e-2 error does not."""
    X, z, alpha = _instances(3, 1)
    config = SolveConfig(fast=False, solvers=("SCS",))
    _spoil_runs(monkeypatch)
    W = svm.att_svm(X[0], z=z[0], alpha=alpha[0], config=config)
    want = _oracle(X, z, alpha, "fro")[0]
    assert np.abs(W.numpy() - want).max() / np.abs(want).max() < config.first_order_tol
    _spoil_runs(monkeypatch, shrink=1e-2)
    with pytest.raises(UncertifiedError):
        svm.att_svm(X[0], z=z[0], alpha=alpha[0], config=config)
