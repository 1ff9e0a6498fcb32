"""The other SVM problems on tiny instances (prompt, head, relaxed prompt, sequence, the SVM
equivalence) and svm.solve_each over trials (its fallback to SCS, the fast path), each against
an oracle that shares no code with attnlib.svm.engine: the cvxpy primal of attnlib.svm.primal,
closed forms of hand-made instances, and the least-distance program of tests/svm_oracles.py."""

import re

import cvxpy as cp
import numpy as np
import pytest
import torch
from svm_oracles import F64, TIGHT, att_oracle, close, ldp, tiny

from attnlib import svm
from attnlib.data import AttentionData
from attnlib.svm import InfeasibleError, SolveConfig, engine
from attnlib.svm.primal import att_svm_primal, head_svm_primal, prompt_svm_primal
from attnlib.svm.rows import matrix_rows


# ----------------------------------------------------------------------------- other problems
@pytest.mark.parametrize("norm", ["fro", 1.5])
def test_prompt_svm_equals_the_primal(norm):
    X, _ = tiny(60, n=2, T=3, d=4)  # n(T-1) = 4 rows in d = 4: feasible for any selection
    Wk = torch.eye(4, **F64) + torch.tensor(np.triu(np.full((4, 4), 0.3), 1))
    for W in (None, Wk):
        p, lam = svm.prompt_svm(X, alpha=[0, 2], W=W, norm=norm, return_dual=True)
        _, p_ref = prompt_svm_primal(X.numpy(), np.array([0, 2]),
                                     None if W is None else W.numpy(), norm)
        close(p, p_ref, 1e-6 if norm == "fro" else 1e-4)
        assert lam.shape == (2, 3) and lam[0, 0] == 0 and lam[1, 2] == 0
    # the batched W of a batch of trials
    Xb, _ = tiny(61, n=2, T=3, d=4, B=2)
    Wb = torch.stack([Wk, Wk.T])
    pb = svm.prompt_svm(Xb, alpha=[[0, 1], [2, 2]], W=Wb, norm=norm)
    for b, a in enumerate(([0, 1], [2, 2])):
        _, p_ref = prompt_svm_primal(Xb[b].numpy(), np.array(a), Wb[b].numpy(), norm)
        close(pb[b], p_ref, 1e-6 if norm == "fro" else 1e-4)


def test_prompt_svm_frobenius_dual_is_the_oracle():
    X, _ = tiny(62, n=2, T=3, d=4)
    alpha = [1, 0]
    p, lam = svm.prompt_svm(X, alpha=alpha, return_dual=True)
    Xn = X.numpy()
    keep = [(i, t) for i in range(2) for t in range(3) if t != alpha[i]]
    A = np.array([Xn[i, alpha[i]] - Xn[i, t] for i, t in keep])
    w, lv = ldp(A, np.ones(len(A)))
    close(p, w, 1e-6)
    close([float(lam[i, t]) for i, t in keep], lv, 1e-5)


def test_head_svm_closed_form_and_primal():
    # Y_i v^T x_i >= 1 with x = (2, 0) (Y = 1) and (0, -4) (Y = -1): v = (1/2, 1/4)
    X = torch.tensor([[[2.0, 0.0], [9.0, 9.0]], [[5.0, 5.0], [0.0, -4.0]]], **F64)
    for norm in ("fro", 3.0):
        v, lam = svm.head_svm(X, Y=[1, -1], alpha=[0, 1], norm=norm, return_dual=True)
        close(v, [0.5, 0.25], 1e-6)
        _, v_ref = head_svm_primal(X.numpy(), np.array([1.0, -1.0]), np.array([0, 1]), norm)
        close(v, v_ref, 1e-6)
        # fro: v = sum lam_i Y_i x_i -> lam = (1/4, 1/16); lp: p |v|^(p-1) = that sum
        want = [0.25, 1 / 16] if norm == "fro" else [3 * 0.25 / 2, 3 * 0.0625 / 4]
        close(lam, want, 1e-5)
    data = AttentionData(X, torch.tensor([1.0, -1.0]), v=torch.tensor([1.0, -1.0]))
    # the default selection: Y_i v^T x_it is largest at token 0 of both inputs
    torch.testing.assert_close(svm.head_svm(data), svm.head_svm(X, Y=[1, -1], alpha=[0, 0]))
    with pytest.raises(InfeasibleError, match=r"^v-SVM \(fro\) is infeasible for the selection "
                       r"alpha=\[0, 0\]: the selected tokens are not linearly separable by "
                       r"their labels through the origin\. For tokens in general position it "
                       r"is feasible when d >= n \(here n=2, d=2\)\.$"):
        svm.head_svm(torch.tensor([[[1.0, 0.0]], [[2.0, 0.0]]], **F64), Y=[1, -1],
                     alpha=[0, 0])


def test_relaxed_prompt_svm_closed_form():
    # v-SVM: x_1 = (1, 0) (Y=1), x_2 = (2, 0) (Y=1): v = (1, 0), only input 1 is a support
    # vector; p must beat input 1's other token by 1 and input 2's by 0
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [3.0, 0.0]]], **F64)
    data = AttentionData(X, torch.tensor([1.0, 1.0]))
    p = svm.relaxed_prompt_svm(data, alpha=[0, 0])
    # rows (1, -1) p >= 1, (-1, 0) p >= 0: p = (0, -1)
    torch.testing.assert_close(p, torch.tensor([0.0, -1.0], **F64), atol=1e-7, rtol=0)
    _, p_ref = prompt_svm_primal(X.numpy(), np.array([0, 0]), rhs=np.array([1.0, 0.0]))
    np.testing.assert_allclose(p.numpy(), p_ref, atol=1e-7)
    # v_mm = (1/2, 0): margins 1/2 and 1, both count: the p-SVM, (1,-1)p >= 1, -p1 >= 1
    p2 = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=torch.tensor([0.5, 0.0], **F64))
    torch.testing.assert_close(p2, torch.tensor([-1.0, -2.0], **F64), atol=1e-7, rtol=0)
    # tol: a margin within 1 + tol counts as a support vector, one above it does not
    one = torch.tensor([1.0, 0.0], **F64)
    p3 = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=one * (1 + 0.5e-6), tol=1e-6)
    torch.testing.assert_close(p3, torch.tensor([0.0, -1.0], **F64), atol=1e-7, rtol=0)
    p4 = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=one * (1 + 2e-6), tol=1e-6)
    assert p4.abs().max() < 1e-7  # no margin required: p = 0
    p5 = svm.relaxed_prompt_svm(data, alpha=[0, 0], v_mm=one * (1 + 2e-6), tol=1e-5)
    torch.testing.assert_close(p5, torch.tensor([0.0, -1.0], **F64), atol=1e-7, rtol=0)


def test_sequence_svm_is_att_svm_on_every_query():
    X, _ = tiny(70, n=1, T=3, d=3)
    X = X / X.norm(dim=-1, keepdim=True)
    alpha = torch.tensor([[0, 0, 2]])
    for causal in (False, True):
        W, lam = svm.sequence_svm(X, alpha, causal=causal, return_dual=True)
        assert lam.shape == (1, 3, 3)
        Wv = cp.Variable((3, 3))
        cons = [(X[0, alpha[0, k]] - X[0, t]).numpy() @ Wv @ X[0, k].numpy() >= 1
                for k in range(3) for t in range(3)
                if t != alpha[0, k] and (t <= k or not causal)]
        cp.Problem(cp.Minimize(cp.sum_squares(Wv)), cons).solve(**TIGHT)
        np.testing.assert_allclose(W.numpy(), Wv.value, atol=1e-6 * np.abs(Wv.value).max())
        if causal:
            assert lam[0, 0].abs().max() == 0 and lam[0, 1, 2] == 0
    # query x_0 = (1, 0) selects x_1: W11 >= 1; query x_1 = (2, 0) selects x_0: -2 W11 >= 1
    Xc = torch.tensor([[[1.0, 0.0], [2.0, 0.0]]], **F64)
    with pytest.raises(InfeasibleError, match=r"^SAtt-SVM \(fro, causal=False\) is infeasible "
                       r"for the selection alpha=\[\[1, 0\]\]: no W separates"):
        svm.sequence_svm(Xc, torch.tensor([[1, 0]]))
    svm.sequence_svm(Xc, torch.tensor([[1, 1]]))  # both select x_1: feasible


def test_svm_equivalence_against_the_primal():
    X, z = tiny(80, n=2, T=3, d=2)
    O = torch.tensor([[True, True, False], [False, False, True]])
    s = torch.tensor([[0.6, 0.4, 0.0], [0.0, 0.0, 1.0]], **F64)
    Xn, zn = X.numpy(), z.numpy()
    for norm in ("fro", "nuc", 1.5):
        eq = svm.svm_equivalence(X, O, s, norm=norm, z=z)
        Wd = cp.Variable((2, 2))
        cons = [(Xn[0, 0] - Xn[0, 2]) @ Wd @ zn[0] >= 1, (Xn[0, 1] - Xn[0, 2]) @ Wd @ zn[0] >= 1,
                (Xn[0, 1] - Xn[0, 0]) @ Wd @ zn[0] == 0,
                (Xn[1, 2] - Xn[1, 0]) @ Wd @ zn[1] >= 1, (Xn[1, 2] - Xn[1, 1]) @ Wd @ zn[1] >= 1]
        nrm = {"fro": lambda W: cp.norm(W, "fro"), "nuc": cp.normNuc}.get(
            norm, lambda W: cp.pnorm(cp.vec(W, order="C"), 1.5))
        cp.Problem(cp.Minimize(nrm(Wd)), cons).solve(**TIGHT)
        close(eq.W_dir, Wd.value, 1e-4)
        Wf = cp.Variable((2, 2))
        cp.Problem(cp.Minimize(nrm(Wf)), [(Xn[0, 1] - Xn[0, 0]) @ Wf @ zn[0]
                                          == np.log(0.4 / 0.6)]).solve(**TIGHT)
        close(eq.W_fin, Wf.value, 1e-4)
    single = svm.svm_equivalence(X, O & torch.tensor([True, False, True]), s.clamp(min=0.1), z=z)
    assert single.W_fin.abs().max() == 0
    with pytest.raises(ValueError, match="selects every token"):
        svm.svm_equivalence(X, torch.ones(2, 3, dtype=torch.bool), s + 0.1, z=z)


# ----------------------------------------------------------------------------- solve_each
def _trials(B=2):
    X, z = tiny(90, n=2, T=3, d=2, B=B)
    return AttentionData(X, torch.ones(B, 2, **F64), z=z), torch.zeros(B, 2, dtype=torch.long)


def test_solve_each_types_defaults_and_messages(capsys):
    data, alpha = _trials()
    sol = svm.solve_each(data, alpha)
    assert capsys.readouterr().err == ""  # no progress bar by default
    assert sol.W.dtype == sol.lam.dtype == torch.float64
    assert sol.feasible.dtype == sol.failed.dtype == sol.fallback.dtype == torch.bool
    assert sol.feasible.tolist() == [True, True] and not sol.fallback.any()
    for b in range(2):
        W_ref, lam_ref = att_oracle(data.X[b], data.z[b], [0, 0])
        close(sol.W[b], W_ref, 1e-6)
        close(sol.lam[b], lam_ref, 1e-5)
    svm.solve_each(data, alpha, progress=True)
    assert re.search(r"(^|[\r\n])SVM: ", capsys.readouterr().err)  # the bar's label
    svm.solve_each(data, alpha, progress=True, desc="my trials")
    assert "my trials" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^data: solve_each needs data with a trials dimension "
                       r"\(B,n,T,d\)$"):
        svm.solve_each(data.trial(0), alpha)
    with pytest.raises(ValueError, match=r"^alpha: expected shape \(B,n\) with B=2, got "
                       r"\(3, 2\)$"):
        svm.solve_each(data, torch.zeros(3, 2, dtype=torch.long))


def test_solve_each_falls_back_to_scs_by_default(monkeypatch):
    # Clarabel fails on every lp instance: the default config's SCS answers, certified at 1e-3
    data, alpha = _trials()
    real = engine._run

    def clarabel_fails(comp, items, solver, opts, warm):
        if solver == "CLARABEL":
            return "failed", "planted"
        return real(comp, items, solver, opts, warm)

    monkeypatch.setattr(engine, "_run", clarabel_fails)
    sol = svm.solve_each(data, alpha, 1.5)
    assert sol.feasible.tolist() == [True, True] and sol.fallback.tolist() == [True, True]
    assert not sol.failed.any()
    for b in range(2):
        _, W_ref = att_svm_primal(data.X[b].numpy(), data.z[b].numpy(), np.zeros(2, int), 1.5)
        close(sol.W[b], W_ref, 1e-2)
    sol = svm.solve_each(data, alpha, 1.5, config=SolveConfig())  # Clarabel only
    assert sol.failed.tolist() == [True, True] and not sol.feasible.any()


def test_fast_solvers_answer_fro_and_nuc_and_agree_with_the_oracles():
    # the fast path (svm.fast) certifies its own answers: "fast" is recorded as the solver
    # (an answer it dropped would be re-solved by Clarabel and tagged "CLARABEL")
    X, z = tiny(95, n=2, T=3, d=2, B=3)
    items = []
    for b in range(3):
        Xn, zn = X[b].numpy(), z[b].numpy()
        D = Xn[:, :1, :] - Xn  # alpha = 0
        active = np.ones((2, 3), dtype=bool)
        active[:, 0] = False
        items.append((b, D, zn, active))
    for norm in ("fro", "nuc"):
        outs = engine.solve_many([matrix_rows(D, zn, ac, norm) for _, D, zn, ac in items],
                                 norm, SolveConfig())
        assert [o[2] for o in outs] == ["fast"] * 3
        for b, (W, lam, _) in enumerate(outs):
            if norm == "fro":
                W_ref, _ = att_oracle(X[b], z[b], [0, 0])
            else:
                _, W_ref = att_svm_primal(X[b].numpy(), z[b].numpy(), np.zeros(2, int), "nuc")
            close(W, W_ref, 1e-6 if norm == "fro" else 1e-4)
            assert lam.shape == (6,) and lam.min() >= 0 and lam[[0, 3]].max() == 0
