"""Tests of attnlib.optimality against the definition, checked by brute force.

Oracle: for every selection of a tiny instance, the readable per-constraint cvxpy primal
(attnlib.svm.primal) gives W_mm (or says infeasible); support tokens are the margins within
1e-6 of the minimum; locally optimal = feasible and every support token scores strictly lower.
"""

import itertools

import numpy as np
import pytest
import torch

from attnlib import optimality, svm
from attnlib.data import AttentionData, random_data
from attnlib.svm.primal import att_svm_primal, prompt_svm_primal

PROMPT_W = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))


def _brute_force(data, norm="fro", param="W", W=None, mask=None):
    """(feasible, locally optimal) per selection, from the definition."""
    X, Y, v = data.X.numpy(), data.Y.numpy(), data.v.numpy()
    n, T, d = X.shape
    gamma = Y[:, None] * (X @ v)  # (n, T)
    vis = np.ones((n, T), dtype=bool) if mask is None else mask.numpy()
    out = []
    for a in itertools.product(range(T), repeat=n):
        if not vis[np.arange(n), a].all():
            out.append((False, False))
            continue
        if param == "W":
            val, Wm = att_svm_primal(X, data.z.numpy(), a, norm, mask=vis)
            logits = np.einsum("ntd,de,ne->nt", X, Wm, data.z.numpy()) if Wm is not None \
                else None
        else:
            Wf = np.eye(d) if W is None else W.numpy()
            val, p = prompt_svm_primal(X, a, Wf, norm)
            logits = X @ (Wf @ p) if p is not None else None
        if logits is None or not np.isfinite(val):
            out.append((False, False))
            continue
        marg = logits[np.arange(n), a][:, None] - logits  # (n, T)
        other = vis.copy()
        other[np.arange(n), a] = False
        sup = other & (marg <= marg[other].min() * (1 + 1e-6))
        ok = all(gamma[i, t] < gamma[i, a[i]] for i, t in zip(*np.nonzero(sup)))
        out.append((True, ok))
    return out


@pytest.mark.parametrize("seed,d,norm", [(0, 3, "fro"), (3, 2, "fro"), (1, 3, "nuc"),
                                         (4, 2, "nuc"), (2, 3, 1.5)])
def test_enumerate_selections_matches_brute_force(seed, d, norm):
    data = random_data(3 if d == 2 else 2, 3, d, seed=seed, device="cpu")  # d=2: n > d
    sel = optimality.enumerate_selections(data, norm)
    truth = _brute_force(data, norm)
    if d == 2:
        assert 0 < sel.feasible.sum() < len(sel.alpha)
    assert sel.feasible.tolist() == [f for f, _ in truth]
    assert sel.locally_optimal.tolist() == [lo for _, lo in truth]
    assert sel.globally_optimal.sum() == 1
    assert sel.locally_optimal[sel.globally_optimal].all()  # the optimal tokens are local


def test_masked_selections_match_brute_force():
    data = random_data(2, 4, 3, seed=5, device="cpu")
    mask = torch.tensor([[True, False, True, True], [True, True, True, False]])
    sel = optimality.enumerate_selections(data, mask=mask)
    truth = _brute_force(data, mask=mask)
    assert sel.feasible.tolist() == [f for f, _ in truth]
    assert sel.locally_optimal.tolist() == [lo for _, lo in truth]
    opt = sel.alpha[sel.globally_optimal][0]
    assert mask[torch.arange(2), opt].all()  # the optimal tokens among the visible ones
    for k in torch.nonzero(sel.feasible)[:, 0]:
        lo = optimality.is_locally_optimal(data, sel.alpha[k], mask=mask)
        assert type(lo) is bool and lo == bool(sel.locally_optimal[k])
    assert optimality.enumerate_selections(data, max_selections=16).alpha.shape == (16, 2)
    with pytest.raises(ValueError, match="4\\^2 = 16"):
        optimality.enumerate_selections(data, max_selections=15)


def _three_token(g3):
    X = torch.tensor([[[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [0.0, 0.0, g3]]], dtype=torch.float64)
    return AttentionData(X, torch.tensor([1.0]), v=torch.tensor([0.0, 0.0, 1.0]))


def test_prompt_model_three_token_example():
    # E1 of the max-margin paper (prompt model, W = diag(1,1,0)); book's {1} / {1,2}, 0-based
    for g3, expected in [(0.9, [True, False, False]), (0.0, [True, True, False])]:
        data = _three_token(g3)
        sel = optimality.enumerate_selections(data, param="p", W=PROMPT_W)
        assert sel.locally_optimal.tolist() == expected
        assert [lo for _, lo in _brute_force(data, param="p", W=PROMPT_W)] == expected
        for a, lab in zip(sel.alpha, expected):
            assert optimality.is_locally_optimal(data, a, param="p", W=PROMPT_W) == lab


def test_batched_equals_looped_with_an_infeasible_trial():
    one = random_data(3, 3, 2, seed=3, device="cpu")  # d < n: some selections infeasible
    sel = optimality.enumerate_selections(one)
    pick = torch.cat([torch.nonzero(sel.feasible)[:3, 0], torch.nonzero(~sel.feasible)[:3, 0]])
    alpha, B = sel.alpha[pick], len(pick)  # (B, n): feasible, then infeasible selections
    data = one.batched(B)
    looped = [optimality.is_locally_optimal(data.trial(b), alpha[b]) for b in range(B)]
    assert optimality.is_locally_optimal(data, alpha).tolist() == looped
    assert looped == sel.locally_optimal[pick].tolist()
    feas = [svm_feasible(data.trial(b), alpha[b]) for b in range(B)]
    assert feas == [True] * 3 + [False] * (B - 3) and B > 3


def svm_feasible(data, alpha):
    try:
        svm.att_svm(data, alpha=alpha)
    except svm.InfeasibleError:
        return False
    return True


def test_locally_optimal_from_tolerances():
    # one input, selected token 0; margins of W_mm: token 1 exactly 1, token 2 1 + 5e-5
    X = torch.tensor([[[0.0, 0.0], [-1.0, 0.0], [-1.0 - 5e-5, 2.0]]], dtype=torch.float64)
    z = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    alpha = torch.tensor([0])

    def data(v):
        return AttentionData(X, torch.tensor([1.0]), z=z, v=torch.tensor(v))

    W = svm.att_svm(data([1.0, 1.0]), alpha=alpha)
    d = data([1.0, 1.0])  # scores 0, -1, 2 - 5e-5: only token 2 beats the selection
    assert bool(optimality.locally_optimal_from(d, W, alpha))  # token 2 not support at 1e-6
    assert not bool(optimality.locally_optimal_from(d, W, alpha, tol=1e-4))
    assert optimality.violations(d, W, alpha, tol=1e-4).tolist() == [[False, False, True]]
    assert not optimality.violations(d, 7.0 * W, alpha).any()  # any scale of W_mm
    # token 1 (a support token) scores 1e-11 below the selection: a tie within score_tol
    d = data([1e-11, 1.0])
    assert not bool(optimality.locally_optimal_from(d, W, alpha))
    assert bool(optimality.locally_optimal_from(d, W, alpha, score_tol=0.0))
    # batched W and data: (B,) result
    db = d.batched(2)
    assert optimality.locally_optimal_from(db, torch.stack([W, W]), alpha.expand(2, 1),
                                           score_tol=0.0).tolist() == [True, True]


def test_bad_inputs():
    data = random_data(3, 4, 5, seed=0, device="cpu")
    with pytest.raises(ValueError, match="param"):
        optimality.is_locally_optimal(data, [0, 0, 0], param="KQ")
    with pytest.raises(ValueError, match="max_selections"):
        optimality.enumerate_selections(data, max_selections=10)
    with pytest.raises(ValueError, match="tol"):
        optimality.is_locally_optimal(data, [0, 0, 0], tol=-1.0)
    with pytest.raises(ValueError, match="unbatched"):
        optimality.enumerate_selections(random_data(2, 2, 3, trials=2, seed=0, device="cpu"))
