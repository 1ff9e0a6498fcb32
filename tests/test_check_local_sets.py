"""attnlib.check's sets of locally optimal selections (chapter 3) on instances solved by hand:
the prompt model's sets in the Frobenius and the l3 norm (X_LP, tests/check_helpers.py), the
W-model's sets checked by its independent NumPy oracle, each mistake's hint (infeasible
extras, how many are missing, out of range, shifted indices), and the oracle's score tie and
active-set tolerance.
"""


import numpy as np
import pytest
import torch
from check_helpers import E1, T_LOC, V_LP, X_LP, f64, lp_min_norm_2d, says

from attnlib import check
from attnlib import data as D

# -- the W-model's set of locally optimal selections: each mistake's hint in full ---------------
HINTS = [(dict(feasible_only=False), "You counted selections whose Att-SVM is infeasible: local "
          "optimality needs a feasible SVM first."),
         (dict(support="none"), "Your set is every selection with a feasible SVM: no token "
          "counted as a support token. Margins equal 1 only up to round-off; use a tolerance."),
         (dict(labels=False), "Your scores ignore the labels: γ_it = Y_i vᵀx_it."),
         (dict(support="all"), "You compared the selected token with every token; local "
          "optimality compares it only with its support tokens (margin 1).")]


@pytest.mark.parametrize("k", range(len(HINTS)))
def test_selection_set_hints_in_full(k):
    import itertools

    from attnlib import random_data
    from attnlib.check.svm_answers import w_locally_optimal_oracle as oracle
    kw, hint = HINTS[k]
    for seed in range(40):
        inst = random_data(n=3, T=3, d=2, seed=seed)
        args = (inst.X.numpy(), inst.z.numpy(), inst.Y.numpy(), inst.v.numpy())
        sets = [{a for a in itertools.product(range(3), repeat=3) if oracle(*args, a, **m)}
                for m in [{}] + [h[0] for h in HINTS]]
        if all(sets[k + 1] != s for j, s in enumerate(sets) if j != k + 1):
            break
    else:
        pytest.fail("no instance shows this mistake")
    says(check.check_locally_optimal(sets[k + 1], inst), False, T_LOC + hint)
    one_based = {tuple(u + 1 for u in s) for s in sets[0]}
    says(check.check_locally_optimal(one_based, inst), False,
         T_LOC + "your token indices look 1-based or out of range: tokens are numbered from 0 "
         "(0..2), as in Python.")


# -- the prompt model's sets of locally optimal selections (helper M5) ---------------------------
# X_LP with param="p", W = I: the p-SVM of selection a has rows x_a - x_t (t != a).
#   a = 0: Frobenius p = (0.4, 0.2), only token 1 (score -1 < 0) a support token: optimal;
#     l3: token 2 (score 2.6 >= 0) a support token (above): not optimal.
#   a = 1: rows (-2, -1), (0.6, -1); p = (0, -1) meets both with equality and is
#     3/13 (-2, -1) + 10/13 (0.6, -1) (multipliers > 0): token 0 (score 0 >= -1) a support
#     token, in any norm (the l3 solution also needs both rows, below): not optimal.
#   a = 2: rows (-2.6, 0), (-0.6, 1); the second alone gives p = (-0.6, 1)/1.36 (Frobenius)
#     or (-0.5288, 0.6827) (l3), and 2.6 * 0.441 = 1.147 >= 1, 2.6 * 0.5288 = 1.375 >= 1: only
#     token 1 (score -1 < 2.6) a support token: optimal.
# So the sets are {0, 2} (Frobenius) and {2} (l3).


def test_hand_solved_prompt_sets():
    x = X_LP[0].numpy()
    gamma = x @ V_LP.numpy()
    truth = {}
    for q in (2.0, 3.0):
        truth[q] = set()
        for a in range(3):
            rows = np.array([x[a] - x[t] for t in range(3) if t != a])
            others = [t for t in range(3) if t != a]
            p = lp_min_norm_2d(rows, q)
            support = [t for t, m in zip(others, rows @ p) if m <= 1 + 1e-9]
            if all(gamma[t] < gamma[a] for t in support):
                truth[q].add(a)
    assert truth == {2.0: {0, 2}, 3.0: {2}}
    rows1 = np.array([[-2.0, -1.0], [0.6, -1.0]])
    assert np.allclose(np.linalg.solve(rows1.T, [0.0, -1.0]), [3 / 13, 10 / 13])
    assert np.allclose(lp_min_norm_2d(np.array([[-2.6, 0.0], [-0.6, 1.0]]), 2.0),
                       np.array([-0.6, 1.0]) / 1.36)


@pytest.mark.parametrize(("norm", "given", "ok", "text", "missing", "extra"), [
    ("fro", {0, 2}, True, "the locally optimal selections are exactly {0, 2}.", None, None),
    ("fro", set(), False, "you missed 2 locally optimal selections.", 2, []),
    ("fro", {0}, False, "you missed 1 locally optimal selection.", 1, []),
    ("fro", {0, 1}, False, "{1} is not locally optimal; you missed 1 locally optimal selection.",
     1, [(1,)]),
    ("fro", {0, 1, 2}, False, "{1} is not locally optimal.", 0, [(1,)]),
    (3.0, {2}, True, "the locally optimal selections are exactly {2}.", None, None),
    (3.0, {0, 1}, False, "{0, 1} are not locally optimal; you missed 1 locally optimal "
     "selection.", 1, [(0,), (1,)]),
    (3.0, {0, 2}, False, "{0} is not locally optimal.", 0, [(0,)]),
])
def test_prompt_set_messages(norm, given, ok, text, missing, extra):
    data = D.AttentionData(X_LP, f64([1.0]), v=V_LP)
    details = {} if ok else dict(missing=missing, extra=extra)
    says(check.check_locally_optimal(given, data, param="p", norm=norm), ok, T_LOC + text,
         **details)


def test_prompt_set_of_two_samples():
    # the sample twice: a selection with different tokens has rows x_a - x_b and x_b - x_a,
    # infeasible; (a, a) is the one-sample problem, so the set is {(0, 0), (2, 2)}
    data = D.AttentionData(torch.cat([X_LP, X_LP]), f64([1.0, 1.0]), v=V_LP)
    says(check.check_locally_optimal({(0, 0), (2, 2)}, data, param="p"), True,
         T_LOC + "the locally optimal selections are exactly {(0, 0), (2, 2)}.")
    says(check.check_locally_optimal({(2, 2), (1, 1)}, data, param="p"), False,
         T_LOC + "{(1, 1)} is not locally optimal; you missed 1 locally optimal selection.",
         missing=1, extra=[(1, 1)])


# -- the W-model's sets: infeasible extras, how many are missing, out of range (helper M5) -------
# z = e1 makes the W-model the prompt problem in W's first column, so X_LP's set is {0, 2}
# (test_hand_solved_prompt_sets). The sample twice: a mixed selection (a, b), a != b, has rows
# x_a - x_b and x_b - x_a (infeasible), so the set is {(0, 0), (2, 2)}, every (a, a) feasible.


def _twice(X):
    return D.AttentionData(torch.cat([X, X]), f64([1.0, 1.0]), z=torch.cat([E1, E1]), v=V_LP)


@pytest.mark.parametrize(("given", "text", "wrong", "missing"), [
    ({(0, 0), (2, 2), (0, 1)}, "1 of your 3 selections is not locally optimal: 1 with an "
                               "infeasible Att-SVM.", 1, 0),
    ({(1, 1)}, "1 of your 1 selections is not locally optimal: 1 with a feasible Att-SVM but "
               "a support token that scores at least as high as the selected token. 2 locally"
               " optimal selections are missing from your set: are your tolerances too "
               "strict, or the score comparison reversed?", 1, 2),
    ({(0, 0)}, "1 locally optimal selection is missing from your set: are your tolerances too"
               " strict, or the score comparison reversed?", 0, 1),
])
def test_w_set_messages(given, text, wrong, missing):
    says(check.check_locally_optimal(given, _twice(X_LP)), False, T_LOC + text, wrong=wrong,
         missing=missing)


def test_w_set_shifted_down_is_not_one_based():
    # tokens reordered (x1, x2, x0): the set is {(1, 1), (2, 2)}; {(0, 0), (1, 1)} is it
    # shifted down by one, a plain mistake (token 0 is the old x1), not 1-based indices
    data = _twice(X_LP[:, [1, 2, 0]])
    says(check.check_locally_optimal({(1, 1), (2, 2)}, data), True,
         T_LOC + "all 2 locally optimal selections among the 9, and no other (independent "
         "NNLS check).")
    says(check.check_locally_optimal({(0, 0), (1, 1)}, data), False,
         T_LOC + "1 of your 2 selections is not locally optimal: 1 with a feasible Att-SVM "
                  "but a support token that scores at least as high as the selected token. 1 "
                  "locally optimal selection is missing from your set: are your tolerances "
                  "too strict, or the score comparison reversed?")


OUT_OF_RANGE = ("your token indices look 1-based or out of range: tokens are numbered from 0 "
                "(0..2), as in Python.")


def test_w_set_on_a_line():
    # x = (1, 0), (0, 0), (-1, 0), v = e1: scores (1, 0, -1); token 1 is between the others
    # (infeasible); token 0's and token 2's support token is token 1, scoring 0 < 1 (optimal)
    # and 0 >= -1 (not): the set is {0}. {2} is that set shifted up by two, not 1-based.
    line = D.AttentionData(f64([[[1.0, 0.0], [0.0, 0.0], [-1.0, 0.0]]]), f64([1.0]), z=E1,
                           v=f64(1.0, 0.0))
    says(check.check_locally_optimal({0}, line), True,
         T_LOC + "all 1 locally optimal selections among the 3, and no other (independent NNLS "
         "check).")
    says(check.check_locally_optimal({2}, line), False,
         T_LOC + "1 of your 1 selections is not locally optimal: 1 with a feasible Att-SVM "
                  "but a support token that scores at least as high as the selected token. 1 "
                  "locally optimal selection is missing from your set: are your tolerances "
                  "too strict, or the score comparison reversed?")
    for given in ({5}, {3}, {0, 3}, {-1}):
        says(check.check_locally_optimal(given, line), False, T_LOC + OUT_OF_RANGE)


def test_why_local_of_the_w_model_uses_its_queries():
    # sample 0 is X_LP with z = e1, sample 1 has x = (0, 0), (0, -3), (0, -3) with z = e2:
    # the W-model decouples into W's two columns, and selection (1, 0) is feasible; token 0
    # of sample 0 is a support token scoring 0 >= -1 (test_hand_solved_prompt_sets, a = 1).
    # One shared prompt p would need p1 >= 1/3 (sample 1) and -2 p0 - p1 >= 1,
    # 0.6 p0 - p1 >= 1 (sample 0, so p1 <= -1): the prompt model is infeasible there.
    X2 = torch.cat([X_LP, f64([[[0.0, 0.0], [0.0, -3.0], [0.0, -3.0]]])])
    data = D.AttentionData(X2, f64([1.0, 1.0]), z=f64([[1.0, 0.0], [0.0, 1.0]]), v=V_LP)
    says(check.check_locally_optimal(True, data, alpha=[1, 0]), False,
         T_LOC + "selection [1, 0] is not locally optimal; you said it is. At sample 1, "
                  "token 1 (Python index [0, 0]), a support token, the score 0 is ≥ -1, the "
                  "score of the selected token (Python index 1).")


# -- the NumPy W-model oracle: its score tie 1e-10 and the active-set tolerance ------------------
def test_w_oracle_tie_and_active_set_tolerance():
    from attnlib.check.svm_answers import w_locally_optimal_oracle as oracle
    z, Y = np.array([[1.0, 0.0]]), np.array([1.0])
    # the line x = (1, 0), (0, 0), (-1, 0), selection 0: W^mm = e1 e1^T, token 1 the support
    # token (margin 1; token 2 has margin 2). v = (s, 0): scores (s, 0, -s); token 1 ties
    # (0 >= s - 1e-10) for s = 1e-10 exactly and for s = 0.75e-10, labels used or not
    line = np.array([[[1.0, 0.0], [0.0, 0.0], [-1.0, 0.0]]])
    for s in (1e-10, 0.75e-10):
        for labels in (True, False):
            assert oracle(line, z, Y, np.array([s, 0.0]), (0,), labels=labels) is False
    assert oracle(line, z, Y, np.array([1.0, 0.0]), (0,)) is True
    # token 2 at (-0.0005, 5) has margin 1.0005 and scores 4.9995 >= 1 (v = (1, 1)); a token
    # at (-999, 0) (margin 1000) scales the active-set tolerance to 1e-6 * 1000: active
    A = np.array([[[1.0, 0.0], [0.0, 0.0], [-0.0005, 5.0], [-999.0, 0.0]]])
    assert oracle(A, z, Y, np.array([1.0, 1.0]), (0,)) is False
    # without it, margin 1 + 1.5e-6 is above 1 + 1e-6 * max(1, 1 + 1.5e-6): not active
    B = np.array([[[1.0, 0.0], [0.0, 0.0], [-0.0000015, 5.0]]])
    assert oracle(B, z, Y, np.array([1.0, 1.0]), (0,)) is True
