"""attnlib.svm.problems on instances built to tell its steps apart (mutation testing, issue 12).

Every answer is compared with an oracle that shares no code with attnlib.svm: the constraint
rows written out here with plain loops and solved by one NNLS (the Lawson-Hanson least-distance
program, exact up to rounding), the optimal tokens found by a loop over the scores, or an
instance solved by hand. The instances are chosen so that a step done wrong changes the
answer: masks that hide the unmasked optimum, batches with n != B, a selection visible in one
input and hidden in another, float32 tokens whose float32 differences round.
"""

import re

import numpy as np
import pytest
import scipy.optimize
import torch

from attnlib import svm
from attnlib.data import AttentionData
from attnlib.sequences import SequenceData
from attnlib.svm import InfeasibleError, SolveConfig, UncertifiedError

F64 = dict(dtype=torch.float64)


def _ldp(A, b):
    """min ||w|| s.t. Aw >= b by one NNLS (Lawson & Hanson, ch. 23): (w, lam), lam >= 0 the
    multipliers of min ||w||^2 / 2 (w = A'lam)."""
    E = np.vstack([A.T, b[None, :]])
    f = np.zeros(A.shape[1] + 1)
    f[-1] = 1.0
    u, _ = scipy.optimize.nnls(E, f)
    r = E @ u - f
    assert np.linalg.norm(r) > 1e-10, "the oracle finds the instance infeasible"
    return -r[:-1] / r[-1], u / (1.0 - b @ u)


def _keep(alpha, n, T, mask):
    return [(i, t) for i in range(n) for t in range(T)
            if t != alpha[i] and (mask is None or mask[i][t])]


def _att_oracle(X, z, alpha, mask=None):
    """Att-SVM (fro): W (d,d) and the multipliers (n,T), rows written with loops."""
    X, z = np.asarray(X, dtype=np.float64), np.asarray(z, dtype=np.float64)
    n, T, d = X.shape
    keep = _keep(alpha, n, T, mask)
    A = np.array([np.outer(X[i, alpha[i]] - X[i, t], z[i]).ravel() for i, t in keep])
    w, lam = _ldp(A, np.ones(len(keep)))
    L = np.zeros((n, T))
    for (i, t), v in zip(keep, lam):
        L[i, t] = v
    return w.reshape(d, d), L


def _prompt_oracle(X, alpha, W=None, mask=None, rhs=None):
    """p-SVM (fro) with keys k_it = W' x_it: p (d,) and the multipliers (n,T)."""
    X = np.asarray(X, dtype=np.float64)
    n, T, d = X.shape
    K = X if W is None else X @ np.asarray(W, dtype=np.float64)
    keep = _keep(alpha, n, T, mask)
    A = np.array([K[i, alpha[i]] - K[i, t] for i, t in keep])
    b = np.array([1.0 if rhs is None else rhs[i] for i, _ in keep])
    w, lam = _ldp(A, b)
    L = np.zeros((n, T))
    for (i, t), v in zip(keep, lam):
        L[i, t] = v
    return w, L


def _argmax_tokens(X, Y, v, mask=None):
    """opt_i = argmax over visible t of Y_i v'x_it, by a loop."""
    X, Y, v = (np.asarray(a, dtype=np.float64) for a in (X, Y, v))
    out = []
    for i in range(X.shape[0]):
        s = [Y[i] * float(np.dot(v, X[i, t])) if mask is None or mask[i][t] else -np.inf
             for t in range(X.shape[1])]
        out.append(int(np.argmax(s)))
    return out


def _close(got, want, rel):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    err = np.abs(got - want).max()
    assert err <= rel * np.abs(want).max(), f"error {err:.3e}, scale {np.abs(want).max():.3e}"


def _rand(seed, shape):
    return torch.tensor(np.random.default_rng(seed).standard_normal(shape), **F64)


# a mask that hides input 0's unmasked optimum (token 0 with v = e_1 and Y_0 = +1)
X_MASKED = torch.tensor([[[3.0, 0.0, 0.5], [1.0, 1.0, -1.0], [0.0, 2.0, 1.0]],
                         [[0.0, 1.0, 0.0], [-2.0, 0.5, 1.0], [-1.0, -1.0, 2.0]]], **F64)
Y_MASKED = torch.tensor([1.0, -1.0], **F64)
V_MASKED = torch.tensor([1.0, 0.0, 0.0], **F64)
MASK = torch.tensor([[False, True, True], [True, True, True]])
Z_MASKED = torch.tensor([[1.0, 0.5, -0.5], [0.3, -1.0, 1.0]], **F64)


def test_att_svm_default_selection_is_the_masked_argmax():
    data = AttentionData(X_MASKED, Y_MASKED, z=Z_MASKED, v=V_MASKED)
    a_all = _argmax_tokens(X_MASKED, Y_MASKED, V_MASKED)
    a_vis = _argmax_tokens(X_MASKED, Y_MASKED, V_MASKED, MASK)
    assert a_all == [0, 1] and a_vis == [1, 1]  # the mask changes input 0's optimum
    W, lam = svm.att_svm(data, mask=MASK, return_dual=True)
    W_ref, L_ref = _att_oracle(X_MASKED, Z_MASKED, a_vis, MASK)
    _close(W, W_ref, 1e-6)
    _close(lam, L_ref, 1e-5)
    _close(svm.att_svm(data), _att_oracle(X_MASKED, Z_MASKED, a_all)[0], 1e-6)
    with pytest.raises(ValueError, match=r"^alpha: required when X is given without data \(no "
                       r"head v to find the optimal tokens\)$"):
        svm.att_svm(X_MASKED, z=Z_MASKED)


def test_att_svm_batched_with_a_shared_mask_and_its_messages():
    X = _rand(1, (2, 2, 3, 3))
    z = _rand(2, (2, 2, 3))
    alpha = [[1, 2], [2, 0]]
    W, lam = svm.att_svm(X, z=z, alpha=alpha, mask=MASK, return_dual=True)
    assert W.shape == (2, 3, 3) and lam.shape == (2, 2, 3)
    for b in range(2):
        W_ref, L_ref = _att_oracle(X[b], z[b], alpha[b], MASK)
        _close(W[b], W_ref, 1e-6)
        _close(lam[b], L_ref, 1e-5)
    # token 0 is visible to input 0 but hidden from input 1: selecting it there is an error
    # (checked input by input, not against input 0's visibility)
    hide = torch.tensor([[True, True, True], [False, True, True]])
    for a in ([[0, 0], [1, 1]], [0, 0]):
        with pytest.raises(ValueError, match=r"^alpha: a selected token is not visible under "
                           r"mask$"):
            svm.att_svm(X, z=z, alpha=a, mask=hide)
        with pytest.raises(ValueError, match=r"^alpha: a selected token is not visible under "
                           r"mask$"):
            svm.prompt_svm(X, alpha=a, mask=hide)


def test_att_svm_infeasible_messages():
    # input 0's tokens coincide: no W separates them
    X = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]], **F64)
    z = torch.tensor([[1.0, 0.0]], **F64)
    with pytest.raises(InfeasibleError, match=r"^Att-SVM \(fro\) is infeasible for the selection "
                       r"alpha=\[0\]: no W gives each selected token a logit margin >= 1 over "
                       r"the other tokens of its input\. For data in general position Att-SVM "
                       r"is feasible for every selection when d >= max\(T-1, n\) \(here n=1, "
                       r"T=2, d=2\)\.$"):
        svm.att_svm(X, z=z, alpha=[0])
    Xb = torch.stack([torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], **F64), X])
    with pytest.raises(InfeasibleError, match=r"^Att-SVM \(nuc\) is infeasible for the selection "
                       r"alpha=\[1\] \(trial 1\): no W gives each selected token a logit margin "
                       r">= 1 over the other visible tokens of its input\."):
        svm.att_svm(Xb, z=z, alpha=[[0], [1]], norm="nuc", mask=[[True, True]])


def test_float32_tokens_are_read_in_float64():
    # one constraint (x_0 - x_1) w z >= 1 in d = 1: w = 1 / (1 - c); in float32 1 - c rounds
    c = np.float32(3e-8)
    want = 1.0 / (1.0 - np.float64(c))
    assert abs(1.0 / np.float64(np.float32(1.0) - c) - want) > 1e-8  # float32 would show
    X = torch.tensor([[[1.0], [c]]], dtype=torch.float32)
    one = torch.ones(1, 1, dtype=torch.float32)
    W = svm.att_svm(X, z=one, alpha=[0], dtype=torch.float64)
    assert W.dtype == torch.float64 and abs(W.item() - want) < 1e-13
    p = svm.prompt_svm(X, alpha=[0], dtype=torch.float64)
    assert p.dtype == torch.float64 and abs(p.item() - want) < 1e-13
    p = svm.prompt_svm(X, alpha=[0], W=one, dtype="float64")
    assert abs(p.item() - want) < 1e-13
    # a float32 W: its keys are formed in float64 too
    p = svm.prompt_svm(X.double(), alpha=[0], W=one, dtype=torch.float64)
    assert abs(p.item() - want) < 1e-13
    # float32 queries of a 2-d span in d = 3 (the solve works in that span): read in float64
    X3, z3 = _rand(13, (2, 3, 3)).float(), _rand(14, (2, 3)).float()
    W = svm.att_svm(X3, z=z3, alpha=[0, 1], dtype=torch.float64)
    _close(W, _att_oracle(X3.double(), z3.double(), [0, 1])[0], 1e-12)
    # default dtype: that of X; an explicit one for p and its multipliers
    assert svm.att_svm(X, z=one, alpha=[0]).dtype == torch.float32
    p, lam = svm.prompt_svm(X.double(), alpha=[0], dtype=torch.float32, return_dual=True)
    assert p.dtype == lam.dtype == torch.float32


def test_prompt_svm_mask_default_selection_and_batches():
    data = AttentionData(X_MASKED, Y_MASKED, v=V_MASKED)
    a_vis = _argmax_tokens(X_MASKED, Y_MASKED, V_MASKED, MASK)
    Wk = torch.eye(3, **F64) + torch.tensor(np.triu(np.full((3, 3), 0.4), 1))
    p, lam = svm.prompt_svm(data, W=Wk, mask=MASK, return_dual=True)
    p_ref, L_ref = _prompt_oracle(X_MASKED, a_vis, Wk, MASK)
    _close(p, p_ref, 1e-6)
    _close(lam, L_ref, 1e-5)
    with pytest.raises(ValueError, match=r"^alpha: required when X is given without data \(no "
                       r"head v\)$"):
        svm.prompt_svm(X_MASKED)
    with pytest.raises(ValueError, match=r"^norm: expected 'fro' or a float lp > 1, got "
                       r"'nuc'$"):
        svm.prompt_svm(X_MASKED, alpha=[1, 2], norm="nuc")
    # B = 2 trials of n = 3 inputs (T = 2, d = 4: n(T-1) <= d), one W per trial, a shared mask
    Xb = _rand(3, (2, 3, 2, 4))
    Wb = torch.stack([torch.eye(4, **F64), torch.eye(4, **F64) + 0.3 * _rand(4, (4, 4))])
    mask = torch.tensor([[True, True], [True, False], [True, True]])
    alpha = [[0, 0, 1], [1, 0, 0]]
    pb, lb = svm.prompt_svm(Xb, alpha=alpha, W=Wb, mask=mask, return_dual=True)
    assert pb.shape == (2, 4) and lb.shape == (2, 3, 2)
    for b in range(2):
        p_ref, L_ref = _prompt_oracle(Xb[b], alpha[b], Wb[b], mask)
        _close(pb[b], p_ref, 1e-6)
        _close(lb[b], L_ref, 1e-5)


def test_prompt_svm_fixed_W_checks():
    X = _rand(5, (2, 3, 2))
    with pytest.raises(ValueError, match=r"^W: expected shape \(d,d\)=\(2,2\) or \(B,d,d\), got "
                       r"\(3, 3\)$"):
        svm.prompt_svm(X, alpha=[0, 0], W=torch.eye(3))
    with pytest.raises(ValueError, match=r"^W: expected shape \(d,d\)=\(2,2\) or \(B,d,d\), got "
                       r"\(1, 2, 2, 2\)$"):
        svm.prompt_svm(X, alpha=[0, 0], W=torch.ones(1, 2, 2, 2))
    with pytest.raises(ValueError, match=r"^W: contains NaN or Inf$"):
        svm.prompt_svm(X, alpha=[0, 0], W=[[1.0, 0.0], [0.0, float("nan")]])
    batch = r"^W: a batch of W needs data with the same trials dimension B$"
    with pytest.raises(ValueError, match=batch):  # unbatched data
        svm.prompt_svm(X, alpha=[0, 0], W=torch.eye(2).expand(2, 2, 2))
    with pytest.raises(ValueError, match=batch):  # B = 2 trials, 3 W
        svm.prompt_svm(X.expand(2, 2, 3, 2), alpha=[0, 0], W=torch.eye(2).expand(3, 2, 2))


def test_prompt_svm_infeasible_messages():
    X = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]], **F64)  # two equal keys
    with pytest.raises(InfeasibleError, match=r"^p-SVM \(fro\) is infeasible for the selection "
                       r"alpha=\[0\]: no single prompt p gives each selected key the required "
                       r"margin over the other keys of its input\. For keys in general position "
                       r"it is feasible for every selection when d >= n\(T-1\) \(here n=1, T=2, "
                       r"d=2; Att-SVM with queries z_i is feasible when d >= max\(T-1, n\)\)\.$"):
        svm.prompt_svm(X, alpha=[0])
    Xb = torch.stack([torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], **F64), X])
    with pytest.raises(InfeasibleError, match=r"^p-SVM \(1\.5\) is infeasible for the selection "
                       r"alpha=\[1\] \(trial 1\): no single prompt"):
        svm.prompt_svm(Xb, alpha=[[0], [1]], norm=1.5)


def test_progress_bars_name_the_problem(capsys):
    X = _rand(6, (2, 2, 3, 3))
    z = _rand(7, (2, 2, 3))
    data = AttentionData(X, torch.tensor([[1.0, -1.0], [1.0, 1.0]]), v=_rand(8, (3,)))
    calls = {"Att-SVM": lambda pr: svm.att_svm(X, z=z, alpha=[0, 1], progress=pr),
             "p-SVM": lambda pr: svm.prompt_svm(X, alpha=[0, 1], progress=pr),
             "v-SVM": lambda pr: svm.head_svm(data, alpha=[0, 1], progress=pr),
             "relaxed p-SVM": lambda pr: svm.relaxed_prompt_svm(data, alpha=[0, 1], progress=pr),
             "Att-SVM ": lambda pr: svm.sequence_svm(X, [[0, 1, 2], [2, 2, 0]], progress=pr)}
    svm.att_svm(X, z=z, alpha=[0, 1])
    svm.prompt_svm(X, alpha=[0, 1])
    svm.head_svm(data, alpha=[0, 1])
    svm.relaxed_prompt_svm(data, alpha=[0, 1])
    assert capsys.readouterr().err == ""  # no bar by default
    for label, call in calls.items():
        call(False)
        assert capsys.readouterr().err == ""
        call(True)
        assert re.search(rf"(^|[\r\n]){re.escape(label.strip())}: ", capsys.readouterr().err)


def test_head_svm_batches_defaults_and_checks():
    X = _rand(9, (2, 3, 2, 4))
    Y = torch.tensor([1.0, -1.0, 1.0], **F64)  # shared by both trials
    v = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], **F64)
    data = AttentionData(X, Y, v=v)
    vb, lb = svm.head_svm(data, return_dual=True)
    assert vb.shape == (2, 4) and lb.shape == (2, 3)
    for b in range(2):
        a = _argmax_tokens(X[b], Y, v[b])
        rows = np.array([Y[i].item() * X[b, i, a[i]].numpy() for i in range(3)])
        w, lam = _ldp(rows, np.ones(3))
        _close(vb[b], w, 1e-6)
        _close(lb[b], lam, 1e-5)
    _close(svm.head_svm(X, Y=Y, alpha=[[0, 0, 1], [1, 1, 0]])[1],
           _ldp(np.array([Y[i].item() * X[1, i, t].numpy() for i, t in enumerate([1, 1, 0])]),
                np.ones(3))[0], 1e-6)
    assert svm.head_svm(X, Y=Y, alpha=[0, 0, 0], dtype=torch.float32).dtype == torch.float32
    with pytest.raises(ValueError, match=r"^Y: the labels are needed \(pass Y= or data with "
                       r"data\.Y\)$"):
        svm.head_svm(X, alpha=[0, 0, 0])
    with pytest.raises(ValueError, match=r"^Y: expected shape \(n,\)=\(3,\) or \(B,n\), got "
                       r"\(2,\)$"):
        svm.head_svm(X, Y=[1.0, -1.0], alpha=[0, 0, 0])
    with pytest.raises(ValueError, match=r"^Y: expected shape \(n,\)=\(3,\) or \(B,n\), got "
                       r"\(1, 2, 3\)$"):
        svm.head_svm(X, Y=torch.ones(1, 2, 3), alpha=[0, 0, 0])
    with pytest.raises(ValueError, match=r"^Y: labels must be -1 or \+1$"):
        svm.head_svm(X, Y=[1.0, 0.5, 1.0], alpha=[0, 0, 0])
    with pytest.raises(ValueError, match=r"^alpha: required when the data has no head v "
                       r"\(data\.v is None\)$"):
        svm.head_svm(AttentionData(X, Y))


def test_relaxed_prompt_svm_batches_and_checks():
    # trial 0: v-SVM support inputs {0}; the relaxed problem asks margin 0 of input 1
    X0 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [3.0, 0.0]]], **F64)
    Xb = torch.stack([X0, X0.flip(-1)])  # trial 1: the same with the coordinates swapped
    data = AttentionData(Xb, torch.tensor([1.0, 1.0]))
    p, lam = svm.relaxed_prompt_svm(data, alpha=[0, 0], return_dual=True)
    assert p.shape == (2, 2) and lam.shape == (2, 2, 2)
    for b in range(2):
        p_ref, L_ref = _prompt_oracle(Xb[b], [0, 0], rhs=[1.0, 0.0])
        _close(p[b], p_ref, 1e-7)
        _close(lam[b], L_ref, 1e-6)
    _close(p[0], [0.0, -1.0], 1e-7)  # by hand: (1, -1)p >= 1, -p_1 >= 0
    # the default selection is the optimal tokens of v = (1, 0) (Y v'x largest), the default
    # v_mm the v-SVM of that selection: (1, 0), margins 1 and 3, so input 1 asks margin 0
    dv = AttentionData(X0, torch.tensor([1.0, 1.0]), v=torch.tensor([1.0, 0.0]))
    assert _argmax_tokens(X0, [1.0, 1.0], [1.0, 0.0]) == [0, 1]
    _close(svm.relaxed_prompt_svm(dv), _prompt_oracle(X0, [0, 1], rhs=[1.0, 0.0])[0], 1e-7)
    with pytest.raises(ValueError, match=r"^v_mm: expected shape \(d,\)=\(2,\) or \(B,d\), got "
                       r"\(3,\)$"):
        svm.relaxed_prompt_svm(dv, alpha=[0, 0], v_mm=[1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"^v_mm: expected shape \(d,\)=\(2,\) or \(B,d\), got "
                       r"\(1, 2\)$"):
        svm.relaxed_prompt_svm(dv, alpha=[0, 0], v_mm=[[1.0, 0.0]])
    assert svm.relaxed_prompt_svm(dv, alpha=[0, 0], dtype="float32").dtype == torch.float32


def _seq_oracle(X, alpha, causal):
    """SAtt-SVM (fro) of one sequence set: every (i, k) is an input with query x_ik."""
    X = np.asarray(X, dtype=np.float64)
    n, T, d = X.shape
    Xp = np.repeat(X, T, axis=0)  # input i*T + k has the tokens of sequence i
    mask = [[t <= k or not causal for t in range(T)] for _ in range(n) for k in range(T)]
    return _att_oracle(Xp, X.reshape(n * T, d), np.asarray(alpha).reshape(-1), mask)


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
        assert alpha == ([[1, 2, 1], [2, 2, 0]] if not causal else [[0, 0, 1], [0, 1, 0]])
        W_ref, L_ref = _seq_oracle(X, alpha, causal)
        W, lam = svm.sequence_svm(X, Y=Y, v=v, causal=causal, return_dual=True)
        _close(W, W_ref, 1e-6)
        _close(lam, L_ref.reshape(2, 3, 3), 1e-5)
    # a batch: B = 2 trials of n = 1 sequence, each its own problem
    Xb = X[:, None]
    sel = [[[0, 0, 2]], [[0, 1, 1]]]
    Wb, lb = svm.sequence_svm(Xb, sel, causal=True, return_dual=True)
    assert Wb.shape == (2, 3, 3) and lb.shape == (2, 1, 3, 3)
    for b in range(2):
        W_ref, L_ref = _seq_oracle(Xb[b], sel[b], True)
        _close(Wb[b], W_ref, 1e-6)
        _close(lb[b], L_ref.reshape(1, 3, 3), 1e-5)
    with pytest.raises(ValueError, match=r"^alpha: with causal=True query k can only select a "
                       r"token t <= k$"):
        svm.sequence_svm(X, [[1, 1, 1], [0, 0, 0]], causal=True)
    with pytest.raises(ValueError, match=r"^alpha: give the selection, or labels Y \(n,T\) and "
                       r"head v$"):
        svm.sequence_svm(X, Y=Y)
    with pytest.raises(ValueError, match=r"^Y: expected one label per position, shape "
                       r"\(n,T\)=\(2,3\), got \(2,\)$"):
        svm.sequence_svm(X, Y=[1.0, -1.0], v=v)
    with pytest.raises(ValueError, match=r"^alpha: expected shape \(n,T\)=\(2,3\) or \(B,n,T\), "
                       r"got \(2,\)$"):
        svm.sequence_svm(X, [0, 0])
    with pytest.raises(ValueError, match=r"^alpha: expected integer token indices$"):
        svm.sequence_svm(X, [[0.0, 0.5, 0.0], [0.0, 0.0, 0.0]])
    for bad in (-1, 3):
        with pytest.raises(ValueError, match=r"^alpha: token indices must lie in \[0, 3\)$"):
            svm.sequence_svm(X, [[0, bad, 0], [0, 0, 0]])


def test_sequence_svm_reads_sequence_data_and_forwards_its_settings(capsys):
    X = _rand(10, (2, 3, 3))
    X = X / X.norm(dim=-1, keepdim=True)
    Y = torch.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]], **F64)
    v = torch.tensor([0.5, -1.0, 0.2], **F64)
    alpha = [[1, 2, 1], [2, 2, 0]]  # the optimal tokens of (Y, v), see the test above
    W_ref = _seq_oracle(X, alpha, False)[0]
    # Y and v from an object that carries them (as SequenceData does), defaults otherwise
    W = svm.sequence_svm(SequenceData(X, Y, v))
    assert isinstance(W, torch.Tensor) and W.dtype == torch.float64
    assert capsys.readouterr().err == ""  # no progress bar by default
    _close(W, W_ref, 1e-6)
    # integer-valued float selections are selections; float32 tokens with a float64 head
    _close(svm.sequence_svm(X, torch.tensor(alpha, dtype=torch.float64)), W_ref, 1e-6)
    W32 = svm.sequence_svm(X.float(), Y=Y, v=[0.5, -1.0, 0.2])
    assert W32.dtype == torch.float32
    _close(W32, _seq_oracle(X.float().double(), alpha, False)[0], 1e-5)
    # batched labels (B, n, T) with batched tokens
    Wb = svm.sequence_svm(X.expand(2, 2, 3, 3), Y=Y.expand(2, 2, 3), v=v)
    _close(Wb[1], W_ref, 1e-6)
    with pytest.raises(ValueError, match=r"^alpha: give the selection, or labels Y \(n,T\) and "
                       r"head v$"):
        svm.sequence_svm(X, v=v)  # plain tokens: no labels anywhere
    with pytest.raises(ValueError, match=r"^Y: contains NaN or Inf$"):
        svm.sequence_svm(X, Y=Y * float("nan"), v=v)
    with pytest.raises(ValueError, match=r"^v: contains NaN or Inf$"):
        svm.sequence_svm(X, Y=Y, v=v * float("inf"))
    # the solver, the config, the output dtype and the norm reach the solve
    with pytest.raises(UncertifiedError, match=r"^Att-SVM: "):
        svm.sequence_svm(X, alpha, solver="SCIPY")
    with pytest.raises(UncertifiedError, match=r"^Att-SVM: "):
        svm.sequence_svm(X, alpha, config=SolveConfig(solvers=("SCIPY",)))
    assert svm.sequence_svm(X, alpha, dtype=torch.float32).dtype == torch.float32
    Wn = svm.sequence_svm(X, alpha, norm="nuc")
    Xn = X.numpy()
    margins = [(Xn[i, alpha[i][k]] - Xn[i, t]) @ Wn.numpy() @ Xn[i, k]
               for i in range(2) for k in range(3) for t in range(3) if t != alpha[i][k]]
    assert min(margins) > 1 - 1e-6
    nuc = np.linalg.norm(Wn.numpy(), "nuc")
    assert nuc < np.linalg.norm(W_ref, "nuc") - 1e-3  # the Frobenius answer is not optimal


def test_head_and_relaxed_forward_their_settings():
    X0 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [3.0, 0.0]]], **F64)
    data = AttentionData(X0, torch.tensor([1.0, 1.0]), v=torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"^norm: expected 'fro' or a float lp > 1, got "
                       r"'nuc'$"):
        svm.head_svm(data, norm="nuc")
    bad = SolveConfig(solvers=("SCIPY",))
    for kw in (dict(solver="SCIPY"), dict(config=bad)):
        with pytest.raises(UncertifiedError, match=r"^v-SVM: "):
            svm.head_svm(data, **kw)
        # the relaxed problem solves its v-SVM with the same settings, then its own
        with pytest.raises(UncertifiedError, match=r"^v-SVM: "):
            svm.relaxed_prompt_svm(data, alpha=[0, 0], **kw)
        with pytest.raises(UncertifiedError, match=r"^relaxed p-SVM: "):
            svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=[1.0, 0.0], **kw)
    # a margin of exactly 1 + tol counts as a support vector (tol = 0.5 is exact)
    p = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=[1.5, 0.0], tol=0.5)
    _close(p, _prompt_oracle(X0, [0, 0], rhs=[1.0, 0.0])[0], 1e-7)
    p = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=[1.5, 0.0], tol=0.25)
    assert p.abs().max() < 1e-7  # no input is a support vector: nothing to separate
    # a fixed W: keys W'x
    Wk = torch.tensor([[1.0, 0.5], [0.0, 2.0]], **F64)
    p = svm.relaxed_prompt_svm(data, alpha=[0, 0], W=Wk)
    _close(p, _prompt_oracle(X0, [0, 0], Wk, rhs=[1.0, 0.0])[0], 1e-7)
    # float32 data with a float64 v_mm and a float32 v_mm with float64 data
    d32 = AttentionData(X0.float(), torch.tensor([1.0, 1.0]), v=torch.tensor([1.0, 0.0]))
    p32 = svm.relaxed_prompt_svm(d32, alpha=[0, 0], v_mm=torch.tensor([1.0, 0.0], **F64))
    assert p32.dtype == torch.float32
    _close(p32, [0.0, -1.0], 1e-7)
    p = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=torch.tensor([1.0, 0.0]).float())
    _close(p, [0.0, -1.0], 1e-7)
    with pytest.raises(ValueError, match=r"^v_mm: contains NaN or Inf$"):
        svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=[float("nan"), 0.0])
    # one selection per trial
    db = AttentionData(torch.stack([X0, X0]), torch.tensor([1.0, 1.0]))
    pb = svm.relaxed_prompt_svm(db, alpha=[[0, 0], [1, 0]])
    _close(pb[1], _prompt_oracle(X0, [1, 0], rhs=[1.0, 1.0])[0], 1e-7)


def test_att_prompt_head_forward_settings_and_messages():
    X = _rand(11, (2, 3, 3))
    z = _rand(12, (2, 3))
    W, lam = svm.att_svm(X, z=z, alpha=[0, 1], return_dual=True, dtype=torch.float32)
    assert W.dtype == lam.dtype == torch.float32
    bad = SolveConfig(solvers=("SCIPY",))
    for kw in (dict(solver="SCIPY"), dict(config=bad)):
        with pytest.raises(UncertifiedError, match=r"^Att-SVM: "):
            svm.att_svm(X, z=z, alpha=[0, 1], **kw)
        with pytest.raises(UncertifiedError, match=r"^p-SVM: "):
            svm.prompt_svm(X, alpha=[0, 1], **kw)
    Y = torch.tensor([1.0, -1.0], **F64)
    v, lv = svm.head_svm(X, Y=Y, alpha=[0, 1], return_dual=True, dtype=torch.float32)
    assert v.dtype == lv.dtype == torch.float32
    with pytest.raises(ValueError, match=r"^Y: contains NaN or Inf$"):
        svm.head_svm(X, Y=[1.0, float("nan")], alpha=[0, 1])
    with pytest.raises(ValueError, match=r"^alpha: required when the data has no head v "
                       r"\(data\.v is None\)$"):
        svm.head_svm(X, Y=Y)  # plain tokens, no data object
    # trial 1: both selected tokens on one line through the origin with opposite labels
    Xb = torch.stack([X[:, :1], torch.tensor([[[1.0, 0.0, 0.0]], [[2.0, 0.0, 0.0]]], **F64)])
    with pytest.raises(InfeasibleError, match=r"^v-SVM \(fro\) is infeasible for the selection "
                       r"alpha=\[0, 0\] \(trial 1\): the selected tokens"):
        svm.head_svm(Xb, Y=[1.0, -1.0], alpha=[0, 0])
