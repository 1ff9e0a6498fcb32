"""attnlib.check on instances solved by hand (each solution in the comments, checked in NumPy
where it is not plain arithmetic): the lp and non-identity-W prompt models of X_LP
(tests/check_helpers.py), directions of selections that are not the optimal tokens, in their
own norm, the relaxed prompt SVM, check_value's known mistakes, margins exactly 0, the
enumeration limit, empty matrices, strict mode, float32 inputs.
"""

import math

import numpy as np
import pytest
import torch
from check_helpers import E1, T_LOC, V_LP, W_MM, X_LP, f64, lp_min_norm_2d, says, toy_data

from attnlib import check
from attnlib import data as D
from attnlib.check import feedback

WHY_LP = ("selection [0] is not locally optimal; you said it is. At sample 1, token 3 (Python"
          " index [0, 2]), a support token, the score 2.6 is ≥ 0, the score of the selected "
          "token (Python index 0).")


def test_hand_solved_lp_instance():
    """The hand solution of X_LP (its comment in tests/check_helpers.py), checked in NumPy."""
    a = (X_LP[0, 0] - X_LP[0, 1:]).numpy()  # rows a1, a2
    p2 = a[0] / (a[0] @ a[0])
    assert np.allclose(a @ p2, [1.0, 1.04])
    p3 = np.array([1 / 2.6, 1 - 2 / 2.6])
    assert np.allclose(a @ p3, [1.0, 1.0])
    # KKT for min |p|_3^3: grad = 3 sign(p) p^2 = lambda1 a1 + lambda2 a2 with lambdas >= 0
    lam = np.linalg.solve(a.T, 3 * p3**2)
    assert (lam > 0).all()
    gamma = X_LP[0].numpy() @ V_LP.numpy()
    assert np.allclose(gamma, [0.0, -1.0, 2.6])


@pytest.mark.parametrize("param", ["p", "W"])
def test_locally_optimal_depends_on_the_norm(param):
    z = None if param == "p" else f64([[1.0, 0.0]])
    data = D.AttentionData(X_LP, f64([1.0]), z=z, v=V_LP)
    says(check.check_locally_optimal(True, data, alpha=[0], param=param), True,
         T_LOC + "selection [0] is locally optimal.")
    says(check.check_locally_optimal(False, data, alpha=[0], param=param, norm=3.0), True,
         T_LOC + "selection [0] is not locally optimal.")
    says(check.check_locally_optimal(True, data, alpha=[0], param=param, norm=3.0), False,
         T_LOC + WHY_LP)


def test_locally_optimal_prompt_with_its_W():
    # keys K = X W with W = diag(1, 2): X = K W^-1 has x1 = (-2, -0.5); scores with
    # v = (-1, 6) are again (0, -1, 2.6). With W the rows are those of X_LP (token 2 a support
    # token under l3); with the identity instead the l3 solution for a1 = (2, 0.5) alone is
    # (sqrt 2, sqrt .5)/3.18 = (0.444, 0.222), a2.p = 1.16 > 1: locally optimal.
    data = D.AttentionData(f64([[[0.0, 0.0], [-2.0, -0.5], [-2.6, 0.0]]]), f64([1.0]),
                           v=f64(-1.0, 6.0))
    W = torch.diag(f64(1.0, 2.0))
    says(check.check_locally_optimal(True, data, alpha=[0], param="p", W=W, norm=3.0), False,
         T_LOC + WHY_LP)
    says(check.check_locally_optimal(True, data, alpha=[0], param="p", norm=3.0), True,
         T_LOC + "selection [0] is locally optimal.")
    says(check.check_locally_optimal(True, data, alpha=[0], param="p", W=W), True,
         T_LOC + "selection [0] is locally optimal.")


def test_prompt_direction_of_a_non_optimal_selection():
    # x = (1, 0), (0, 1), (0, -1), W = I, v = (1, 0): the optimal token is 0 (p^mm = (1, 0)).
    # For alpha = 1: -p0 + p1 >= 1 and 2 p1 >= 1 -> p^mm = (-1/2, 1/2), both active.
    data = D.AttentionData(f64([[[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]]), f64([1.0]),
                           v=f64(1.0, 0.0))
    assert check.check_prompt_direction([-0.5, 0.5], data, alpha=[1])
    fb = check.check_prompt_direction([-1.5, 0.5], data, alpha=[1])  # right tokens, other way
    assert not fb and fb.details["correlation"] == pytest.approx(2 / math.sqrt(5))
    # with W = diag(1, 2): -p0 + 2 p1 >= 1 and 4 p1 >= 1 -> p^mm = (-1, 2)/5 (only the first
    # active: 4 * 2/5 = 1.6)
    W = torch.diag(f64(1.0, 2.0))
    assert check.check_prompt_direction([-1.0, 2.0], data, alpha=[1], W=W)
    assert not check.check_prompt_direction([-0.5, 0.5], data, alpha=[1], W=W)


def test_svm_margin_and_tie_boundaries():
    # the toy (tests/check_helpers.py): W = c W_MM has both margins c
    toy = toy_data()
    assert check.check_svm_direction(0.75 * W_MM, toy, alpha=[0], exact=True, atol=0.25)
    # a margin exactly 0 is a violation of a direction
    fb = check.check_svm_direction(f64([[1.0, 0.0], [1.0, 0.0]]), toy, alpha=[0])
    assert not fb and fb.details["violations"] == 1 and "(margin 0;" in fb.message


@pytest.mark.parametrize("T", [4096, 4097])
def test_enumeration_limit_is_4096(T):
    data = D.AttentionData(torch.zeros(1, T, 1, dtype=torch.float64), f64([1.0]),
                           z=f64([[1.0]]), v=f64([1.0]))
    if T == 4096:  # allowed: the malformed answer is feedback before any SVM is solved
        says(check.check_locally_optimal({(0, 0)}, data), False,
             T_LOC + "each selection must name 1 token(s), one per sample.")
    else:
        with pytest.raises(ValueError, match=r"^without alpha the check enumerates T\^n = 4097 "
                                             r"selections; pass alpha or use a smaller instance "
                                             r"\(T\^n <= 4096\)$"):
            check.check_locally_optimal({(0, 0)}, data)


# -- numeric: empty matrices, feedback, strict -------------------------------------------------
def test_rank_of_an_empty_matrix():
    for W in (torch.zeros(0, 0), torch.zeros(0, 3)):
        says(check.check_rank(0, W), True,
             "(rank): W has rank 0 (singular values above 1e-06·σ₁).", rank=0)
    says(check.check_rank(1, torch.zeros(0, 3)), False,
         "(rank): your rank is too high: count only the singular values above the relative "
         "tolerance 1e-06·σ₁; the tiny ones are round-off.", direction="high")


def test_strict_message_and_markdown():
    with pytest.raises(ValueError) as e:
        check.strict("yes")
    assert str(e.value) == "on: expected True, False or None, got 'yes'"
    # only \ * _ ` [ ] < > # | are escaped: letters (X) are not
    md = check.Feedback(True, "XX", "XaX|")._repr_markdown_()
    assert md == "✓ **Correct** (XX): XaX\\|"
    assert feedback.reference(np.float32(0.1), "x").item() == float(np.float32(0.1))


# -- check_relaxed_prompt: a hand-solved instance ----------------------------------------------
# Sample 0: x = (1, 0), (0, 1); sample 1: x = (2, 0), (0, -1); Y = (1, 1), v = (1, 0): the optimal
# tokens are (0, 0). Head SVM: min |v| s.t. v0 >= 1, 2 v0 >= 1 -> v^mm = (1, 0), v-margins 1, 2:
# only sample 0 is a support input. W = I: p0 - p1 >= 1 (support) and 2 p0 + p1 >= 0: the first
# alone gives p^relax = (1/2, -1/2) (second margin 1/2). p^mm (both >= 1): p0 - p1 = 1,
# 2 p0 + p1 = 1 -> (2/3, -1/3). W = diag(1, 2): rows (1, -2) and (2, 2): p^relax solves
# p0 - 2 p1 = 1, p0 + p1 = 0 -> (1/3, -1/3) (KKT weights 2/9, 1/18 > 0); p^mm solves
# p0 - 2 p1 = 1, 2 p0 + 2 p1 = 1 -> (2/3, -1/6) (weights 5/18, 7/36).
RELAX = D.AttentionData(f64([[[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, -1.0]]]),
                        f64([1.0, 1.0]), v=f64(1.0, 0.0))
T_REL = "(p^relax): "


def test_relaxed_prompt_messages():
    ok = T_REL + "your p_relax is the minimum-norm point of the relaxed constraints " \
                 "(independent NNLS check)."
    says(check.check_relaxed_prompt([0.5, -0.5], RELAX), True, ok)
    says(check.check_relaxed_prompt([0.5, -0.5], RELAX, alpha=[0, 0]), True, ok)
    # within atol + 1e-5 |p|: 5.5e-6 <= 1e-6 + 5e-6, but not <= 1e-7 + 5e-6
    says(check.check_relaxed_prompt([0.5 + 5.5e-6, -0.5], RELAX), True, ok)
    assert not check.check_relaxed_prompt([0.5 + 5.5e-6, -0.5], RELAX, atol=1e-7)
    says(check.check_relaxed_prompt([0.5, -0.4], RELAX), False,
         T_REL + "your p_relax violates a constraint: input 1, token 2 (Python index [0, 1])"
                  " has margin 0.9, it needs ≥ 1 (a support input of the head).")
    says(check.check_relaxed_prompt([0.2, -1.0], RELAX), False,
         T_REL + "your p_relax violates a constraint: input 2, token 2 (Python index [1, 1])"
                  " has margin -0.6, it needs ≥ 0 (not a support input).")
    # both violated: the smaller margin is named (-0.2 at input 1 < 0.8 at input 0)
    says(check.check_relaxed_prompt([0.0, -0.2], RELAX), False,
         T_REL + "your p_relax violates a constraint: input 2, token 2 (Python index [1, 1])"
                  " has margin -0.2, it needs ≥ 0 (not a support input).")
    says(check.check_relaxed_prompt([1.0, -1.0], RELAX), False,
         T_REL + "your p_relax satisfies the relaxed constraints but is not the shortest such "
         "point: which constraints are active at the minimum? (KKT: p is a non-negative "
         "combination of their rows).")
    says(check.check_relaxed_prompt([1.0, 0.0, 0.0], RELAX), False,
         T_REL + "p_relax must have shape (2,), yours has (3,).")
    says(check.check_relaxed_prompt(None, RELAX), False,
         T_REL + "p_relax is None: you have not answered yet (replace the stub above).")
    same = D.AttentionData(f64([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]]),
                           f64([1.0, -1.0]), v=f64(1.0, 0.0))
    with pytest.raises(ValueError) as e:
        check.check_relaxed_prompt([1.0, 0.0], same, alpha=[0, 0])
    assert str(e.value) == "data: the SVMs of this selection are infeasible"


def test_relaxed_prompt_with_its_W():
    W = torch.diag(f64(1.0, 2.0))
    says(check.check_relaxed_prompt([1 / 3, -1 / 3], RELAX, W=W), True,
         T_REL + "your p_relax is the minimum-norm point of the relaxed constraints "
         "(independent NNLS check).")
    assert not check.check_relaxed_prompt([0.5, -0.5], RELAX, W=W)
    # margins with W: 0.2 + 0.8 = 1 (input 0), 0.4 - 0.8 = -0.4 (input 1)
    says(check.check_relaxed_prompt([0.2, -0.4], RELAX, W=W), False,
         T_REL + "your p_relax violates a constraint: input 2, token 2 (Python index [1, 1])"
                  " has margin -0.4, it needs ≥ 0 (not a support input).")
    p, v = check.svm_answers.relaxed_prompt_oracle(RELAX.X.float().numpy(),
                                                   RELAX.Y.float().numpy(), [0, 0], W.numpy())
    assert np.allclose(p, [1 / 3, -1 / 3]) and np.allclose(v, [1.0, 0.0])


# -- check_value's known mistakes, diagnose's hint and the side of a scalar ----------------------
def test_value_mistakes_and_side():
    says(check.check_value(3.0, 2.0, mistakes={"You used p^mm.": 3.0}), False,
         "(value): value = 3 is too large (rtol=1e-06, atol=1e-09). You used p^mm.")
    says(check.check_value(1.0, 2.0, mistakes={"You used p^mm.": 3.0}), False,
         "(value): value = 1 is too small (rtol=1e-06, atol=1e-09).")
    # a mistake of another size is skipped; the first match wins; |2.5 - 2| = 0.5 is exactly
    # atol + rtol |2| = 0.25 + 0.125 * 2 (exact in float64): a match
    says(check.check_value(2.5, 10.0, atol=0.25, rtol=0.125,
                            mistakes={"A.": [2.5, 2.5], "B.": 2.0, "C.": 2.5}), False,
         "(value): value = 2.5 is too small (rtol=0.125, atol=0.25). B.")


def test_value_passes_its_tolerance_to_diagnose():
    # -ans is 1e-6 from exp: within tol = 1e-9 + 1e-6 * 2 but not diagnose's default 1e-9
    says(check.check_value([-1.0, -2.000001], [1.0, 2.0]), False,
         "(value): 2 of 2 entries of value are off; the farthest is entry (2) (Python index "
         "[1]) (yours -2). "
         "Your answer has the wrong sign.", entries_off=2)


# -- directions of a selection that is not the optimal one, in the selection's own norm ---------
def test_directions_solve_the_given_selection_in_the_given_norm():
    # X_LP, selection 2 (prompt model): the l3 p-SVM needs only the row (-0.6, 1) (above)
    x = X_LP[0].numpy()
    p3 = lp_min_norm_2d(np.array([x[2] - x[0], x[2] - x[1]]), 3.0)
    data = D.AttentionData(X_LP, f64([1.0]), v=V_LP)
    fb = check.check_prompt_direction(p3, data, alpha=[2], norm=3.0, exact=True)
    assert fb and fb.details["optimal_norm"] == pytest.approx(np.linalg.norm(p3, 3), rel=1e-6)
    # the Frobenius solution (-0.6, 1)/1.36 points along it up to corr 0.993, not 0.999
    p2 = np.array([-0.6, 1.0]) / 1.36
    assert check.check_prompt_direction(p2, data, alpha=[2], norm=3.0)
    assert not check.check_prompt_direction(p2, data, alpha=[2], norm=3.0, min_corr=0.999)
    says(check.check_prompt_direction(p2, data, alpha=[2], norm=3.0, exact=True), False,
         "(p-SVM solution): your p satisfies all 2 margin constraints, its smallest margin is "
         "exactly 1, and yet it is not the ℓ3 minimiser: another p meets the constraints with "
         "a smaller ℓ3 norm. Scaling will not help; solve the SVM with the ℓ3 norm (the "
         "minimiser of another norm is a different point).")
    # W-model, z = e1, selection 1 (not the optimal token 2): W^mm = (0, -1) e1^T (above)
    data = D.AttentionData(X_LP, f64([1.0]), z=E1, v=V_LP)
    W1 = f64([[0.0, 0.0], [-1.0, 0.0]])
    assert check.check_svm_direction(W1, data, alpha=[1])
    assert check.check_svm_direction(W1, data, alpha=[1], exact=True)


# -- check_relaxed_prompt: a margin exactly 1 - atol, and two equal violations -------------------
def test_relaxed_prompt_margin_boundaries():
    # p = (0.75, -0.25 + 2^-10): input 0's margin p0 - p1 = 1 - 2^-10 = 1 - atol exactly (not a
    # violation), input 1's 2 p0 + p1 > 0; not within atol of p^relax, p^mm, -p^relax, v^mm
    says(check.check_relaxed_prompt([0.75, -0.25 + 2**-10], RELAX, atol=2**-10), False,
         T_REL + "your p_relax satisfies the relaxed constraints but is not the shortest such "
         "point: which constraints are active at the minimum? (KKT: p is a non-negative "
         "combination of their rows).")
    # p = (-0.5, 0.25): margins -0.75 (input 0) and -1 + 0.25 = -0.75 (input 1): the first named
    says(check.check_relaxed_prompt([-0.5, 0.25], RELAX), False,
         T_REL + "your p_relax violates a constraint: input 1, token 2 (Python index [0, 1])"
                  " has margin -0.75, it needs ≥ 1 (a support input of the head).")


# -- _direction: the answer's name and the title, details, the inclusive min_corr ---------------
def test_direction_messages_and_details():
    data = D.AttentionData(X_LP, f64([1.0]), z=E1, v=V_LP)
    assert "(Att-SVM direction): W is None" in str(check.check_svm_direction(None, data))
    assert "(p-SVM direction): p is None" in str(check.check_prompt_direction(None, data))
    W1 = f64([[0.0, 0.0], [-1.0, 0.0]])  # W^mm of selection 1 (above), Frobenius norm 1
    fb = check.check_svm_direction(W1, data, alpha=[1], exact=True)
    assert fb.details["optimal_norm"] == pytest.approx(1.0, abs=1e-6)
    corr = check.check_svm_direction(W1, data, alpha=[1]).details["correlation"]
    assert check.check_svm_direction(W1, data, alpha=[1], min_corr=corr)  # corr >= min_corr
    with pytest.raises(ValueError) as e:
        check.check_svm_direction(W1, D.AttentionData(X_LP, f64([1.0]), v=V_LP))
    assert str(e.value) == "data has no queries z (the prompt model): use check_prompt_direction"


# -- float32 inputs are computed in float64 --------------------------------------------------------
def test_float32_inputs_are_read_as_float64():
    from attnlib.check.svm_answers import w_locally_optimal_oracle as oracle
    r = feedback.reference(torch.tensor([0.1], dtype=torch.float32), "x")
    assert r.dtype == torch.float64 and float(r[0]) == float(np.float32(0.1))
    # x0 = (1, 2^-30), x1 = (0, 1), v = (1, 1): scores 1 + 2^-30 and 1 (float64); token 1, the
    # only constraint, is a support token and 1 < 1 + 2^-30 - 1e-10: locally optimal. In
    # float32 1 + 2^-30 rounds to 1, a tie.
    f32 = lambda a: np.array(a, dtype=np.float32)
    X = f32([[[1.0, 2.0**-30], [0.0, 1.0]]])
    assert oracle(X, f32([[1.0, 0.0]]), f32([1.0]), f32([1.0, 1.0]), (0,)) is True
