"""attnlib.svm.problems: each problem's answer against an oracle, and its invariances.

Oracles that share no code with attnlib.svm: the constraint rows written out with loops and
solved by the least-distance NNLS (tests/svm_oracles.py), the per-constraint cvxpy primals of
attnlib.svm.primal, the optimal tokens found by a loop over the scores, and exact invariances of
the problems (the order of tokens and inputs, the scale of tokens, queries and keys). The
instances are chosen so that a step done wrong changes the answer: masks that hide the unmasked
optimum, batches with n != B, a selection visible in one input and hidden in another, float32
tokens whose float32 differences round. Errors are checked for their meaning (the type, the
argument or the trial they name), not their wording.
"""

import re

import numpy as np
import pytest
import torch
from svm_oracles import F64, att_oracle, close, ldp

from attnlib import svm
from attnlib.data import AttentionData
from attnlib.sequences import SequenceData
from attnlib.svm import InfeasibleError, SolveConfig, UncertifiedError
from attnlib.svm.primal import att_svm_primal, head_svm_primal, prompt_svm_primal

REL = {"fro": 1e-6, "nuc": 1e-4, 1.5: 1e-4}


def _ldp(A, b):
    out = ldp(A, b)
    assert out is not None, "the oracle finds the instance infeasible"
    return out


def _with_multipliers(keep, lam, n, T):
    L = np.zeros((n, T))
    for (i, t), v in zip(keep, lam):
        L[i, t] = v
    return L


def _keep(alpha, n, T, mask):
    return [(i, t) for i in range(n) for t in range(T)
            if t != alpha[i] and (mask is None or mask[i][t])]


def _prompt_oracle(X, alpha, W=None, mask=None, rhs=None):
    """p-SVM (fro) with keys k_it = W' x_it: p (d,) and the multipliers (n,T)."""
    X = np.asarray(X, dtype=np.float64)
    n, T, _ = X.shape
    K = X if W is None else X @ np.asarray(W, dtype=np.float64)
    keep = _keep(alpha, n, T, mask)
    A = np.array([K[i, alpha[i]] - K[i, t] for i, t in keep])
    w, lam = _ldp(A, np.array([1.0 if rhs is None else rhs[i] for i, _ in keep]))
    return w, _with_multipliers(keep, lam, n, T)


def _argmax_tokens(X, Y, v, mask=None):
    """opt_i = argmax over visible t of Y_i v'x_it, by a loop."""
    X, Y, v = (np.asarray(a, dtype=np.float64) for a in (X, Y, v))
    return [int(np.argmax([Y[i] * float(v @ X[i, t]) if mask is None or mask[i][t] else -np.inf
                           for t in range(X.shape[1])])) for i in range(X.shape[0])]


def _rand(seed, shape):
    return torch.tensor(np.random.default_rng(seed).standard_normal(shape), **F64)


def _names(arg):
    """pytest.raises for a ValueError that names the argument ``arg`` first."""
    return pytest.raises(ValueError, match=rf"^{re.escape(arg)}: ")


# a mask that hides input 0's unmasked optimum (token 0 with v = e_1 and Y_0 = +1)
X_MASKED = torch.tensor([[[3.0, 0.0, 0.5], [1.0, 1.0, -1.0], [0.0, 2.0, 1.0]],
                         [[0.0, 1.0, 0.0], [-2.0, 0.5, 1.0], [-1.0, -1.0, 2.0]]], **F64)
Y_MASKED = torch.tensor([1.0, -1.0], **F64)
V_MASKED = torch.tensor([1.0, 0.0, 0.0], **F64)
MASK = torch.tensor([[False, True, True], [True, True, True]])
Z_MASKED = torch.tensor([[1.0, 0.5, -0.5], [0.3, -1.0, 1.0]], **F64)


# ----------------------------------------------------------------------------- answers
def test_att_svm_default_selection_is_the_masked_argmax():
    data = AttentionData(X_MASKED, Y_MASKED, z=Z_MASKED, v=V_MASKED)
    a_all = _argmax_tokens(X_MASKED, Y_MASKED, V_MASKED)
    a_vis = _argmax_tokens(X_MASKED, Y_MASKED, V_MASKED, MASK)
    assert a_all == [0, 1] and a_vis == [1, 1]  # the mask changes input 0's optimum
    W, lam = svm.att_svm(data, mask=MASK, return_dual=True)
    W_ref, L_ref = att_oracle(X_MASKED, Z_MASKED, a_vis, MASK)
    close(W, W_ref, 1e-6)
    close(lam, L_ref, 1e-5)
    close(svm.att_svm(data), att_oracle(X_MASKED, Z_MASKED, a_all)[0], 1e-6)
    for norm in ("nuc", 1.5):
        W = svm.att_svm(data, mask=MASK, norm=norm)
        close(W, att_svm_primal(X_MASKED.numpy(), Z_MASKED.numpy(), a_vis, norm,
                                MASK.numpy())[1], REL[norm])
    with _names("alpha"):
        svm.att_svm(X_MASKED, z=Z_MASKED)


def test_att_and_prompt_batched_with_a_shared_mask():
    X, z = _rand(1, (2, 2, 3, 3)), _rand(2, (2, 2, 3))
    alpha = [[1, 2], [2, 0]]
    W, lam = svm.att_svm(X, z=z, alpha=alpha, mask=MASK, return_dual=True)
    p, lp = svm.prompt_svm(X, alpha=alpha, mask=MASK, return_dual=True)
    assert W.shape == (2, 3, 3) and lam.shape == (2, 2, 3) and p.shape == (2, 3)
    for b in range(2):
        W_ref, L_ref = att_oracle(X[b], z[b], alpha[b], MASK)
        close(W[b], W_ref, 1e-6)
        close(lam[b], L_ref, 1e-5)
        p_ref, L_ref = _prompt_oracle(X[b], alpha[b], mask=MASK)
        close(p[b], p_ref, 1e-6)
        close(lp[b], L_ref, 1e-5)
    # the selected and the masked tokens have no constraint, hence no multiplier, in any norm
    off = ~MASK.expand(2, 2, 3).scatter(-1, torch.tensor(alpha)[..., None], False)
    for norm in ("nuc", 1.5):
        assert (svm.att_svm(X, z=z, alpha=alpha, mask=MASK, norm=norm, return_dual=True)[1][off]
                == 0).all()
    assert (svm.prompt_svm(X, alpha=alpha, mask=MASK, norm=1.5, return_dual=True)[1][off]
            == 0).all()
    # token 0 is visible to input 0 but hidden from input 1: selecting it there is an error
    # (checked input by input, not against input 0's visibility)
    hide = torch.tensor([[True, True, True], [False, True, True]])
    for a in ([[0, 0], [1, 1]], [0, 0]):
        with _names("alpha"):
            svm.att_svm(X, z=z, alpha=a, mask=hide)
        with _names("alpha"):
            svm.prompt_svm(X, alpha=a, mask=hide)


def test_float32_tokens_are_read_in_float64():
    # one constraint (x_0 - x_1) w z >= 1 in d = 1: w = 1 / (1 - c); in float32 1 - c rounds
    c = np.float32(3e-8)
    want = 1.0 / (1.0 - np.float64(c))
    assert abs(1.0 / np.float64(np.float32(1.0) - c) - want) > 1e-8  # float32 would show
    X = torch.tensor([[[1.0], [c]]], dtype=torch.float32)
    one = torch.ones(1, 1, dtype=torch.float32)
    for p in (svm.att_svm(X, z=one, alpha=[0], dtype=torch.float64),
              svm.prompt_svm(X, alpha=[0], dtype=torch.float64),
              svm.prompt_svm(X, alpha=[0], W=one, dtype="float64"),
              svm.prompt_svm(X.double(), alpha=[0], W=one, dtype=torch.float64)):
        assert p.dtype == torch.float64 and abs(p.item() - want) < 1e-13
    # float32 queries of a 2-d span in d = 3 (the solve works in that span): read in float64
    X3, z3 = _rand(13, (2, 3, 3)).float(), _rand(14, (2, 3)).float()
    W = svm.att_svm(X3, z=z3, alpha=[0, 1], dtype=torch.float64)
    close(W, att_oracle(X3.double(), z3.double(), [0, 1])[0], 1e-12)
    # default dtype: that of X; an explicit one for p and its multipliers
    assert svm.att_svm(X, z=one, alpha=[0]).dtype == torch.float32
    p, lam = svm.prompt_svm(X.double(), alpha=[0], dtype=torch.float32, return_dual=True)
    assert p.dtype == lam.dtype == torch.float32


def test_prompt_svm_keys_default_selection_and_batches():
    data = AttentionData(X_MASKED, Y_MASKED, v=V_MASKED)
    a_vis = _argmax_tokens(X_MASKED, Y_MASKED, V_MASKED, MASK)
    Wk = torch.eye(3, **F64) + torch.tensor(np.triu(np.full((3, 3), 0.4), 1))  # not symmetric
    p, lam = svm.prompt_svm(data, W=Wk, mask=MASK, return_dual=True)
    p_ref, L_ref = _prompt_oracle(X_MASKED, a_vis, Wk, MASK)
    close(p, p_ref, 1e-6)
    close(lam, L_ref, 1e-5)
    # B = 2 trials of n = 3 inputs (T = 2, d = 4: n(T-1) <= d), one W per trial
    Xb = _rand(3, (2, 3, 2, 4))
    Wb = torch.stack([torch.eye(4, **F64), torch.eye(4, **F64) + 0.3 * _rand(4, (4, 4))])
    alpha = [[0, 0, 1], [1, 0, 0]]
    for norm in ("fro", 1.5):
        pb = svm.prompt_svm(Xb, alpha=alpha, W=Wb, norm=norm)
        for b in range(2):
            want = prompt_svm_primal(Xb[b].numpy(), alpha[b], Wb[b].numpy(), norm)[1]
            close(pb[b], want, 1e-5 if norm == "fro" else REL[norm])
    X = _rand(5, (2, 3, 2))
    for arg, kw in (("alpha", {}), ("norm", dict(alpha=[0, 0], norm="nuc")),
                    ("W", dict(alpha=[0, 0], W=torch.eye(3))),
                    ("W", dict(alpha=[0, 0], W=[[1.0, 0.0], [0.0, float("nan")]])),
                    ("W", dict(alpha=[0, 0], W=torch.eye(2).expand(2, 2, 2)))):  # B W, no B
        with _names(arg):
            svm.prompt_svm(X, **kw)
    with _names("W"):  # B = 2 trials, 3 W
        svm.prompt_svm(X.expand(2, 2, 3, 2), alpha=[0, 0], W=torch.eye(2).expand(3, 2, 2))


def test_head_svm_batches_defaults_and_checks():
    X = _rand(9, (2, 3, 2, 4))
    Y = torch.tensor([1.0, -1.0, 1.0], **F64)  # shared by both trials
    v = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], **F64)
    vb, lb = svm.head_svm(AttentionData(X, Y, v=v), return_dual=True)
    assert vb.shape == (2, 4) and lb.shape == (2, 3)
    for b in range(2):
        a = _argmax_tokens(X[b], Y, v[b])
        w, lam = _ldp(np.array([Y[i].item() * X[b, i, a[i]].numpy() for i in range(3)]),
                      np.ones(3))
        close(vb[b], w, 1e-6)
        close(lb[b], lam, 1e-5)
        v3 = svm.head_svm(X[b], Y=Y, alpha=a, norm=3.0)
        close(v3, head_svm_primal(X[b].numpy(), Y.numpy(), a, 3.0)[1], REL[1.5])
    assert svm.head_svm(X, Y=Y, alpha=[0, 0, 0], dtype=torch.float32).dtype == torch.float32
    for arg, kw in (("Y", dict(alpha=[0, 0, 0])), ("Y", dict(Y=[1.0, -1.0], alpha=[0, 0, 0])),
                    ("Y", dict(Y=torch.ones(1, 2, 3), alpha=[0, 0, 0])),
                    ("Y", dict(Y=[1.0, 0.5, 1.0], alpha=[0, 0, 0])), ("alpha", dict(Y=Y)),
                    ("norm", dict(Y=Y, alpha=[0, 0, 0], norm="nuc"))):
        with _names(arg):
            svm.head_svm(X, **kw)


def test_relaxed_prompt_svm_against_the_oracle():
    # the v-SVM of x = (1, 0), (2, 0) (both Y = 1) is v = (1, 0), margins 1 and 2: only input
    # 0 is a support vector, so p must beat input 0's other token by 1 and input 1's by 0
    X0 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [3.0, 0.0]]], **F64)
    Xb = torch.stack([X0, X0.flip(-1)])  # trial 1: the same with the coordinates swapped
    p, lam = svm.relaxed_prompt_svm(AttentionData(Xb, torch.tensor([1.0, 1.0])), alpha=[0, 0],
                                    return_dual=True)
    assert p.shape == (2, 2) and lam.shape == (2, 2, 2)
    for b in range(2):
        p_ref, L_ref = _prompt_oracle(Xb[b], [0, 0], rhs=[1.0, 0.0])
        close(p[b], p_ref, 1e-7)
        close(lam[b], L_ref, 1e-6)
    close(p[0], [0.0, -1.0], 1e-7)  # by hand: (1, -1)p >= 1, -p_1 >= 0
    data = AttentionData(X0, torch.tensor([1.0, 1.0]), v=torch.tensor([1.0, 0.0]))
    assert _argmax_tokens(X0, [1.0, 1.0], [1.0, 0.0]) == [0, 1]  # the default selection
    close(svm.relaxed_prompt_svm(data), _prompt_oracle(X0, [0, 1], rhs=[1.0, 0.0])[0], 1e-7)
    Wk = torch.tensor([[1.0, 0.5], [0.0, 2.0]], **F64)  # keys W'x
    close(svm.relaxed_prompt_svm(data, alpha=[0, 0], W=Wk),
          _prompt_oracle(X0, [0, 0], Wk, rhs=[1.0, 0.0])[0], 1e-7)
    # a v_mm whose margins are 1.5 and 3: with tol 0.5 input 0 is a support vector, with 0.25
    # none is (and p = 0)
    close(svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=[1.5, 0.0], tol=0.5),
          _prompt_oracle(X0, [0, 0], rhs=[1.0, 0.0])[0], 1e-7)
    assert svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=[1.5, 0.0], tol=0.25).abs().max() \
        < 1e-7
    d32 = AttentionData(X0.float(), torch.tensor([1.0, 1.0]), v=torch.tensor([1.0, 0.0]))
    p32 = svm.relaxed_prompt_svm(d32, alpha=[0, 0], v_mm=torch.tensor([1.0, 0.0], **F64))
    assert p32.dtype == torch.float32
    close(p32, [0.0, -1.0], 1e-7)
    for v_mm in ([1.0, 0.0, 0.0], [[1.0, 0.0]], [float("nan"), 0.0]):
        with _names("v_mm"):
            svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=v_mm)


def _seq_oracle(X, alpha, causal):
    """SAtt-SVM (fro) of one sequence set: every (i, k) is an input with query x_ik."""
    X = np.asarray(X, dtype=np.float64)
    n, T, d = X.shape
    mask = [[t <= k or not causal for t in range(T)] for _ in range(n) for k in range(T)]
    return att_oracle(np.repeat(X, T, axis=0), X.reshape(n * T, d),
                       np.asarray(alpha).reshape(-1), mask)


def test_sequence_svm_default_selection_batches_and_checks():
    X = _rand(10, (2, 3, 3))
    X = X / X.norm(dim=-1, keepdim=True)
    Y = torch.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]], **F64)
    v = torch.tensor([0.5, -1.0, 0.2], **F64)
    for causal in (False, True):
        # alpha[i, k] = argmax over t visible to k of Y_ik v'x_it, by a loop
        alpha = [[max((t for t in range(3) if t <= k or not causal),
                      key=lambda t: Y[i, k].item() * float(v @ X[i, t])) for k in range(3)]
                 for i in range(2)]
        W_ref, L_ref = _seq_oracle(X, alpha, causal)
        W, lam = svm.sequence_svm(X, Y=Y, v=v, causal=causal, return_dual=True)
        close(W, W_ref, 1e-6)
        close(lam, L_ref.reshape(2, 3, 3), 1e-5)
        if not causal:  # the same labels and head from an object that carries them
            close(svm.sequence_svm(SequenceData(X, Y, v)), W_ref, 1e-6)
    Xb = X[:, None]  # a batch: B = 2 trials of n = 1 sequence, each its own problem
    sel = [[[0, 0, 2]], [[0, 1, 1]]]
    Wb, lb = svm.sequence_svm(Xb, sel, causal=True, return_dual=True)
    assert Wb.shape == (2, 3, 3) and lb.shape == (2, 1, 3, 3)
    for b in range(2):
        close(Wb[b], _seq_oracle(Xb[b], sel[b], True)[0], 1e-6)
    for arg, args, kw in (("alpha", ([[1, 1, 1], [0, 0, 0]],), dict(causal=True)),
                          ("alpha", (), dict(Y=Y)), ("alpha", (), dict(v=v)),
                          ("Y", (), dict(Y=[1.0, -1.0], v=v)), ("alpha", ([0, 0],), {}),
                          ("alpha", ([[0.0, 0.5, 0.0], [0.0] * 3],), {}),
                          ("alpha", ([[0, 3, 0], [0, 0, 0]],), {}),
                          ("alpha", ([[0, -1, 0], [0, 0, 0]],), {}),
                          ("Y", (), dict(Y=Y * float("nan"), v=v)),
                          ("v", (), dict(Y=Y, v=v * float("inf")))):
        with _names(arg):
            svm.sequence_svm(X, *args, **kw)


# ----------------------------------------------------------------------------- invariances
@pytest.mark.parametrize("norm", ["fro", "nuc", 1.5])
def test_att_svm_invariances(norm):
    """Reordering inputs and tokens (alpha relabelled) changes nothing but the multipliers'
    order; W(cX, z) = W/c, W(X, cz) = W/c, W(cX, cz) = W/c^2."""
    g = np.random.default_rng(20)
    X, z = _rand(21, (3, 4, 3)), _rand(22, (3, 3))
    alpha = torch.tensor([2, 0, 3])
    W, lam = svm.att_svm(X, z=z, alpha=alpha, norm=norm, return_dual=True)
    ps, pt = torch.tensor(g.permutation(3)), torch.tensor(g.permutation(4))
    Wp, lp = svm.att_svm(X[ps][:, pt], z=z[ps], alpha=torch.argsort(pt)[alpha[ps]], norm=norm,
                         return_dual=True)
    close(Wp, W, REL[norm])
    close(lp, lam[ps][:, pt], 10 * REL[norm])
    for cx, cz in ((1e-3, 1.0), (1.0, 7.0), (1e3, 1e3), (1e-4, 1e-4)):
        close(svm.att_svm(X * cx, z=z * cz, alpha=alpha, norm=norm) * cx * cz, W, REL[norm])


def test_prompt_head_and_sequence_invariances():
    """p(cX) = p/c, p(X, keys cW) = p/c, v(cX) = v/c, W_seq(cX) = W_seq/c^2; reordering the
    inputs and tokens changes nothing."""
    g = np.random.default_rng(30)
    X = _rand(31, (2, 3, 4))
    alpha, Y = torch.tensor([1, 2]), torch.tensor([1.0, -1.0], **F64)
    Wk = torch.eye(4, **F64) + 0.3 * _rand(32, (4, 4))
    ps, pt = torch.tensor(g.permutation(2)), torch.tensor(g.permutation(3))
    Xp, ap = X[ps][:, pt], torch.argsort(pt)[alpha[ps]]
    p = svm.prompt_svm(X, alpha=alpha, W=Wk)
    close(svm.prompt_svm(X * 1e3, alpha=alpha, W=Wk) * 1e3, p, 1e-6)
    close(svm.prompt_svm(X, alpha=alpha, W=Wk * 1e-3) * 1e-3, p, 1e-6)
    close(svm.prompt_svm(Xp, alpha=ap, W=Wk), p, 1e-6)
    v = svm.head_svm(X, Y=Y, alpha=alpha)
    close(svm.head_svm(X * 1e-3, Y=Y, alpha=alpha) * 1e-3, v, 1e-6)
    close(svm.head_svm(Xp, Y=Y[ps], alpha=ap), v, 1e-6)
    Xs = X / X.norm(dim=-1, keepdim=True)
    sel = torch.tensor([[0, 2, 1], [1, 1, 0]])
    Ws = svm.sequence_svm(Xs, sel)
    close(svm.sequence_svm(Xs * 1e2, sel) * 1e4, Ws, 1e-6)
    close(svm.sequence_svm(Xs[ps], sel[ps]), Ws, 1e-6)


# ----------------------------------------------------------------------------- errors, settings
def test_infeasible_errors_name_the_trial():
    # trial 1 of 2: input 0's tokens coincide (att, p); x and -x both labelled +1 (v)
    good = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], **F64)
    bad = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]], **F64)
    z = torch.tensor([[1.0, 0.0]], **F64)
    heads = torch.tensor([[[[1.0, 0.0]], [[0.0, 1.0]]], [[[1.0, 0.0]], [[-1.0, 0.0]]]], **F64)
    cases = [(lambda X, **k: svm.att_svm(X, z=z, alpha=[0], **k), torch.stack([good, bad])),
             (lambda X, **k: svm.prompt_svm(X, alpha=[0], **k), torch.stack([good, bad])),
             (lambda X, **k: svm.head_svm(X, Y=[1.0, 1.0], alpha=[0, 0], **k), heads)]
    for call, Xb in cases:
        for norm in ("fro", 1.5):
            with pytest.raises(InfeasibleError) as err:
                call(Xb, norm=norm)
            assert "trial 1" in str(err.value) and "trial 0" not in str(err.value)
            with pytest.raises(InfeasibleError) as err:
                call(Xb[1], norm=norm)
            assert "trial" not in str(err.value)


def test_settings_reach_the_solve_and_errors_name_the_problem():
    X, z = _rand(11, (2, 3, 3)), _rand(12, (2, 3))
    Y = torch.tensor([1.0, -1.0], **F64)
    data = AttentionData(X, Y, v=torch.tensor([1.0, 0.0, 0.0], **F64))
    W, lam = svm.att_svm(X, z=z, alpha=[0, 1], return_dual=True, dtype=torch.float32)
    assert W.dtype == lam.dtype == torch.float32
    v, lv = svm.head_svm(X, Y=Y, alpha=[0, 1], return_dual=True, dtype=torch.float32)
    assert v.dtype == lv.dtype == torch.float32
    assert svm.sequence_svm(X, [[0, 1, 2], [2, 2, 0]], dtype="float32").dtype == torch.float32
    # a solver that cannot solve the problem (SCIPY has no SOCP/SDP): the error says which
    # problem failed, whether the solver is given by name or in a SolveConfig
    calls = {"Att-SVM": lambda **k: svm.att_svm(X, z=z, alpha=[0, 1], **k),
             "p-SVM": lambda **k: svm.prompt_svm(X, alpha=[0, 1], **k),
             "v-SVM": lambda **k: svm.head_svm(data, alpha=[0, 1], **k),
             "relaxed p-SVM": lambda **k: svm.relaxed_prompt_svm(data, alpha=[0, 1],
                                                                 v_mm=[1.0, 0, 0], **k),
             "Att-SVM ": lambda **k: svm.sequence_svm(X, [[0, 1, 2], [2, 2, 0]], **k)}
    for name, call in calls.items():
        for kw in (dict(solver="SCIPY"), dict(config=SolveConfig(solvers=("SCIPY",)))):
            with pytest.raises(UncertifiedError, match=f"^{name.strip()}: "):
                call(**kw)
    # the relaxed problem solves its v-SVM with the same settings first
    with pytest.raises(UncertifiedError, match="^v-SVM: "):
        svm.relaxed_prompt_svm(data, alpha=[0, 1], solver="SCIPY")


def test_progress_bars_only_when_asked_and_named(capsys):
    X, z = _rand(6, (2, 2, 3, 3)), _rand(7, (2, 2, 3))
    data = AttentionData(X, torch.tensor([[1.0, -1.0], [1.0, 1.0]]), v=_rand(8, (3,)))
    calls = {"Att-SVM": lambda **k: svm.att_svm(X, z=z, alpha=[0, 1], **k),
             "p-SVM": lambda **k: svm.prompt_svm(X, alpha=[0, 1], **k),
             "v-SVM": lambda **k: svm.head_svm(data, alpha=[0, 1], **k),
             "relaxed p-SVM": lambda **k: svm.relaxed_prompt_svm(data, alpha=[0, 1], **k),
             "Att-SVM ": lambda **k: svm.sequence_svm(X, [[0, 1, 2], [2, 2, 0]], **k)}
    for label, call in calls.items():
        call()
        call(progress=False)
        assert capsys.readouterr().err == ""
        call(progress=True)
        assert re.search(rf"(^|[\r\n]){re.escape(label.strip())}: ", capsys.readouterr().err)
