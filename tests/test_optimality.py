"""Tests of attnlib.optimality against the definition, checked by brute force.

Oracle: for every selection of a tiny instance, the readable per-constraint cvxpy primal
(attnlib.svm.primal) gives W_mm (or says infeasible); support tokens are the margins within
1e-6 of the minimum; locally optimal = feasible and every support token scores strictly lower.
"""

import itertools

import cvxpy as cp
import numpy as np
import pytest
import torch

from attnlib import optimality, svm
from attnlib.data import AttentionData, random_data
from attnlib.svm.primal import att_svm_primal, prompt_svm_primal

_TIGHT = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def _norm(x, norm):
    return cp.norm(x, 2) if norm == "fro" else cp.pnorm(x, float(norm))


PROMPT_W = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))


def _oracle(data, a, norm="fro", param="W", W=None, mask=None):
    """(feasible, locally optimal) of one selection ``a``, from the definition."""
    X, Y, v = data.X.numpy(), data.Y.numpy(), data.v.numpy()
    n, T, d = X.shape
    gamma = Y[:, None] * (X @ v)  # (n, T)
    vis = np.ones((n, T), dtype=bool) if mask is None else np.asarray(mask)
    a = tuple(int(t) for t in a)
    if not vis[np.arange(n), a].all():
        return False, False
    if param == "W":
        val, Wm = att_svm_primal(X, data.z.numpy(), a, norm, mask=vis)
        logits = np.einsum("ntd,de,ne->nt", X, Wm, data.z.numpy()) if Wm is not None \
            else None
    else:
        Wf = np.eye(d) if W is None else np.asarray(W)
        if mask is None:
            val, p = prompt_svm_primal(X, a, Wf, norm)
        else:  # the p-SVM with hidden tokens left out, one constraint per visible token
            pv = cp.Variable(d)
            cons = [(X[i, a[i]] - X[i, t]) @ Wf @ pv >= 1
                    for i in range(n) for t in range(T) if t != a[i] and vis[i, t]]
            prob = cp.Problem(cp.Minimize(_norm(pv, norm)), cons)
            prob.solve(**_TIGHT)
            val, p = prob.value, pv.value
        logits = X @ (Wf @ p) if p is not None else None
    if logits is None or not np.isfinite(val):
        return False, False
    marg = logits[np.arange(n), a][:, None] - logits  # (n, T)
    other = vis.copy()
    other[np.arange(n), a] = False
    sup = other & (marg <= marg[other].min() * (1 + 1e-6))
    return True, all(gamma[i, t] < gamma[i, a[i]] for i, t in zip(*np.nonzero(sup)))


def _brute_force(data, norm="fro", param="W", W=None, mask=None):
    """(feasible, locally optimal) per selection, from the definition."""
    n, T = data.X.shape[:2]
    return [_oracle(data, a, norm, param, W, mask)
            for a in itertools.product(range(T), repeat=n)]


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
    with pytest.raises(ValueError, match="^tol: expected a finite number >= 0"):
        optimality.is_locally_optimal(data, [0, 0, 0], tol="small")


@pytest.mark.parametrize("call", [
    lambda X: optimality.is_locally_optimal(X, [0, 0, 0]),
    lambda X: optimality.enumerate_selections(X),
    lambda X: optimality.violations(X, torch.eye(5), [0, 0, 0]),
    lambda X: optimality.locally_optimal_from(X, torch.eye(5), [0, 0, 0]),
])
def test_tokens_alone_are_not_data(call):
    """Local optimality needs the labels and the head: bare tokens are refused by name."""
    X = random_data(3, 4, 5, seed=0, device="cpu").X
    with pytest.raises(ValueError, match="^data: expected an attnlib.AttentionData"):
        call(X)


# --- the prompt model, batched W, masks and tolerances through every path (mutation testing) ---


def test_prompt_model_lp_norm_and_identity_default_match_brute_force():
    # an instance where the p-SVM's norm changes a verdict: selection (2, 1) is locally
    # optimal under the l1.5 norm and not under the Euclidean one (brute force says so)
    data = random_data(2, 3, 3, seed=6, device="cpu")
    lp = [lo for _, lo in _brute_force(data, 1.5, param="p")]
    fro = [lo for _, lo in _brute_force(data, "fro", param="p")]
    assert lp != fro
    assert optimality.enumerate_selections(data, 1.5, param="p").locally_optimal.tolist() == lp
    sel = optimality.enumerate_selections(data, param="p")  # W default: the identity
    assert sel.locally_optimal.tolist() == fro
    assert sel.feasible.tolist() == [f for f, _ in _brute_force(data, param="p")]
    a = sel.alpha[7]
    assert optimality.is_locally_optimal(data, a, 1.5, param="p") is lp[7]
    assert optimality.is_locally_optimal(data, a, param="p") is fro[7]


def test_batched_prompt_model_with_a_W_per_trial_and_an_infeasible_trial():
    # W differs per trial and changes the verdict of the same selection; the third trial's
    # selection is infeasible, so the batch falls back to one solve per trial
    one = random_data(3, 3, 2, seed=3, device="cpu")
    Ws = torch.randn(3, 2, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    data = one.batched(3)
    for alpha in ([[0, 0, 0]] * 3, [[0, 0, 0], [0, 0, 0], [1, 0, 0]]):
        alpha = torch.tensor(alpha)
        truth = [_oracle(one, alpha[b], param="p", W=Ws[b]) for b in range(3)]
        got = optimality.is_locally_optimal(data, alpha, param="p", W=Ws)
        assert got.dtype == torch.bool and got.tolist() == [lo for _, lo in truth]
        assert len({lo for _, lo in truth[:2]}) == 2  # W changes the verdict
    assert truth[2] == (False, False)  # the infeasible trial
    # one W for every trial (2-d W) on the fallback path: trial 0's W throughout
    got = optimality.is_locally_optimal(data, alpha, param="p", W=Ws[1])
    assert got.tolist() == [_oracle(one, alpha[b], param="p", W=Ws[1])[1] for b in range(3)]


@pytest.mark.parametrize("param,seed,alpha", [("p", 1, (0, 1, 0)), ("W", 0, (1, 1, 1))])
def test_masks_reach_every_solve(param, seed, alpha):
    # a selection that is infeasible (param p) / not locally optimal (W) with every token
    # visible and feasible and locally optimal with token 2 of input 0 hidden (brute force)
    one = random_data(3, 3, 2, seed=seed, device="cpu")
    mask = torch.tensor([[True, True, False], [True, True, True], [True, True, True]])
    assert _oracle(one, alpha, param=param, mask=mask) == (True, True)
    assert _oracle(one, alpha, param=param)[1] is False
    assert optimality.is_locally_optimal(one, alpha, param=param, mask=mask) is True
    assert optimality.is_locally_optimal(one, alpha, param=param) is False
    # batched: an infeasible second trial forces the per-trial fallback; the mask given
    # once (n,T) or per trial (B,n,T, the second trial's with every token visible)
    data = one.batched(2)
    bad = next(a for a in itertools.product(range(3), repeat=3)
               if a[0] != 2 and not _oracle(one, a, param=param, mask=mask)[0])
    both = torch.tensor([alpha, bad])
    got = optimality.is_locally_optimal(data, both, param=param, mask=mask)
    assert got.tolist() == [True, False]
    per = torch.stack([mask, torch.ones_like(mask)])
    got = optimality.is_locally_optimal(data, torch.tensor([alpha, alpha]), param=param,
                                        mask=per)
    assert got.tolist() == [True, False]
    assert optimality.is_locally_optimal(data, both, param=param, mask=per).tolist() == [
        True, _oracle(one, bad, param=param)[1]]


def _tolerance_data(v, infeasible_second=False):
    """test_locally_optimal_from_tolerances's instance (selected token 0; margins of the SVM
    solution: token 1 exactly 1, token 2 1 + 5e-5); optionally batched with a second trial
    whose token 1 equals token 0 (margin 0 for every W: infeasible)."""
    X = torch.tensor([[[0.0, 0.0], [-1.0, 0.0], [-1.0 - 5e-5, 2.0]]], dtype=torch.float64)
    z = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    if infeasible_second:
        X2 = X.clone()
        X2[0, 1] = X2[0, 0]
        X = torch.stack([X, X2])
    return AttentionData(X, torch.tensor([1.0]), z=z, v=torch.tensor(v))


def test_tolerances_reach_every_path():
    alpha = torch.tensor([0])
    # scores 0, -1, 2 - 5e-5: token 2 beats the selection and is a support token only at
    # tol 1e-4; with v = (1e-11, 1) token 1 (a support token) ties within score_tol
    d = _tolerance_data([1.0, 1.0])
    assert optimality.is_locally_optimal(d, alpha) is True
    assert optimality.is_locally_optimal(d, alpha, tol=1e-4) is False
    assert optimality.enumerate_selections(d, tol=1e-4).locally_optimal[0].item() is False
    assert optimality.enumerate_selections(d).locally_optimal[0].item() is True
    t = _tolerance_data([1e-11, 1.0])
    assert optimality.is_locally_optimal(t, alpha) is False
    assert optimality.is_locally_optimal(t, alpha, score_tol=0.0) is True
    assert optimality.enumerate_selections(t, score_tol=0.0).locally_optimal[0].item() is True
    # batched with an infeasible trial: the per-trial fallback keeps both tolerances
    db = _tolerance_data([1.0, 1.0], infeasible_second=True)
    assert optimality.is_locally_optimal(db, alpha).tolist() == [True, False]
    assert optimality.is_locally_optimal(db, alpha, tol=1e-4).tolist() == [False, False]
    tb = _tolerance_data([1e-11, 1.0], infeasible_second=True)
    assert optimality.is_locally_optimal(tb, alpha).tolist() == [False, False]
    assert optimality.is_locally_optimal(tb, alpha, score_tol=0.0).tolist() == [True, False]
    with pytest.raises(ValueError,
                       match=r"^score_tol: expected a finite number >= 0, got -1e-09$"):
        optimality.is_locally_optimal(d, alpha, score_tol=-1e-9)
    with pytest.raises(ValueError, match=r"^tol: expected a finite number >= 0, got nan$"):
        optimality.enumerate_selections(d, tol=float("nan"))
    assert optimality.is_locally_optimal(d, alpha, tol=0.0, score_tol=0.0) is True  # 0 allowed


@pytest.mark.parametrize("param", ["W", "p"])
def test_an_uncertified_svm_is_never_a_verdict(param, monkeypatch):
    # an SVM that can be neither certified nor confirmed infeasible leaves local optimality
    # undecided: the error reaches the caller (never reported as feasible/optimal or not)
    def uncertified(*args, **kw):
        raise svm.UncertifiedError("Att-SVM: no certified answer")

    monkeypatch.setattr(svm, "att_svm" if param == "W" else "prompt_svm", uncertified)
    data = random_data(2, 2, 2, seed=0, device="cpu")
    with pytest.raises(svm.UncertifiedError, match="no certified answer"):
        optimality.is_locally_optimal(data, [0, 0], param=param)
    with pytest.raises(svm.UncertifiedError):
        optimality.is_locally_optimal(data.batched(2), [0, 0], param=param)
    with pytest.raises(svm.UncertifiedError):
        optimality.enumerate_selections(data, param=param)


def test_messages_and_selection_table():
    data = random_data(2, 3, 2, seed=0, device="cpu")
    with pytest.raises(ValueError, match=r"^param: expected 'W' or 'p', got 'KQ'$"):
        optimality.enumerate_selections(data, param="KQ")
    with pytest.raises(ValueError, match=r"^data: T\^n = 3\^2 = 9 selections exceed "
                                         r"max_selections=8$"):
        optimality.enumerate_selections(data, max_selections=8)
    with pytest.raises(ValueError, match=r"^data: enumerate_selections needs unbatched data "
                                         r"\(n,T,d\)$"):
        optimality.enumerate_selections(data.batched(2))
    sel = optimality.enumerate_selections(data, max_selections=9)
    assert sel.alpha.dtype == torch.long
    assert sel.alpha.tolist() == [list(a) for a in itertools.product(range(3), repeat=2)]
    for f in sel[1:]:
        assert f.dtype == torch.bool and f.shape == (9,)
    opt = optimal_tokens_oracle(data)
    assert sel.globally_optimal.tolist() == [list(a) == opt for a in sel.alpha.tolist()]


def optimal_tokens_oracle(data):
    gamma = data.Y.numpy()[:, None] * (data.X.numpy() @ data.v.numpy())
    return gamma.argmax(-1).tolist()


def test_prompt_model_tolerances_and_exact_ties():
    # the tolerance instance read as a prompt model (W = I): the p-SVM's answer p = (1, 0) has
    # margins 1 (token 1) and 1 + 5e-5 (token 2), the same as Att-SVM's there
    alpha = torch.tensor([0])
    d = _tolerance_data([1.0, 1.0])
    assert _oracle(d, [0], param="p") == (True, True)
    assert optimality.is_locally_optimal(d, alpha, param="p") is True
    assert optimality.is_locally_optimal(d, alpha, param="p", tol=1e-4) is False
    # an exact tie (token 1 scores 0, as the selected token) violates the strict inequality
    # even with score_tol = 0
    t = _tolerance_data([0.0, 1.0])
    for param in ("W", "p"):
        assert optimality.is_locally_optimal(t, alpha, param=param, score_tol=0.0) is False


def test_batched_with_more_tokens_than_inputs():
    # n = 2 inputs, T = 3 tokens (n != T), different data per trial, against the oracle
    data = random_data(2, 3, 3, trials=3, seed=4, device="cpu")
    alpha = torch.tensor([[0, 1], [2, 2], [1, 0]])
    for param in ("W", "p"):
        truth = [_oracle(data.trial(b), alpha[b], param=param)[1] for b in range(3)]
        assert optimality.is_locally_optimal(data, alpha, param=param).tolist() == truth
    assert len(set(truth)) == 2  # both verdicts occur


def test_max_selections_boundary():
    # T^n = 4097 selections: one more than the default limit (only token 0 visible, so that
    # a wrongly accepted instance would be answered quickly)
    data = random_data(1, 4097, 2, seed=0, device="cpu")
    mask = torch.zeros(1, 4097, dtype=torch.bool)
    mask[0, 0] = True
    with pytest.raises(ValueError, match=r"= 4097 selections exceed max_selections=4096$"):
        optimality.enumerate_selections(data, mask=mask)
    sel = optimality.enumerate_selections(data, mask=mask, max_selections=4097)
    assert sel.feasible.tolist() == [True] + [False] * 4096
