"""check's feedback, numeric and svm_answers layers at the places mutation testing found
untested (issue 12): lp-norm and non-identity-W prompt models whose support tokens are solved
by hand, non-optimal selections, tolerances met with equality by values exact in float64,
hints that need rtol=1e-8, and the full learner-facing messages.

Every expected value here is solved by hand in the comments (or by a NumPy loop), never by the
function under test.
"""

import math

import numpy as np
import pytest
import torch

from attnlib import check
from attnlib import data as D
from attnlib.check import feedback


def f64(*a):
    return torch.tensor(a[0] if len(a) == 1 else a, dtype=torch.float64)


def _says(fb, ok, text, **details):
    assert (fb.ok, str(fb)) == (ok, ("✓ correct" if ok else "✗ not yet") + f" {text}"), str(fb)
    for k, v in details.items():
        assert fb.details[k] == v


T_LOC = "(local optimality): "
# One sample, x0 = 0, x1 = (-2, -1), x2 = (-2.6, 0): for alpha = 0 the constraint rows are
# a1 = x0 - x1 = (2, 1), a2 = x0 - x2 = (2.6, 0). Scores with v = (-1, 3): gamma = (0, -1, 2.6).
#   l2 (fro): min |p| s.t. a1.p >= 1 alone gives p = a1/|a1|^2 = (0.4, 0.2), and a2.p = 1.04 > 1:
#     only token 1 (score -1 < 0) is a support token -> selection 0 is locally optimal.
#   l3: a1 alone gives p ~ sign(a1)|a1|^(1/2) = (1.414, 1)/3.828 = (0.369, 0.261), a2.p = 0.96
#     < 1, so a2 is active: p0 = 1/2.6, and a1 is active too (p1 = 1 - 2/2.6 = 0.2308 is the
#     smallest |p1| allowed): token 2 (score 2.6 >= 0) is a support token -> not locally optimal.
# The W-model with z = e1 is the same problem in W's first column (the other column is 0).
X_LP = f64([[[0.0, 0.0], [-2.0, -1.0], [-2.6, 0.0]]])
V_LP = f64(-1.0, 3.0)
WHY_LP = ("selection [0] is not locally optimal; you said it is. At sample 1, token 3 (Python"
          " index [0, 2]), a support token, the score 2.6 is ≥ 0, the score of the selected "
          "token (Python index 0).")


def test_hand_solved_lp_instance():
    """The claims of the comment above, in NumPy (an independent check of the hand solution)."""
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
    _says(check.check_locally_optimal(True, data, alpha=[0], param=param), True,
          T_LOC + "selection [0] is locally optimal.")
    _says(check.check_locally_optimal(False, data, alpha=[0], param=param, norm=3.0), True,
          T_LOC + "selection [0] is not locally optimal.")
    _says(check.check_locally_optimal(True, data, alpha=[0], param=param, norm=3.0), False,
          T_LOC + WHY_LP)


def test_locally_optimal_prompt_with_its_W():
    # keys K = X W with W = diag(1, 2): X = K W^-1 has x1 = (-2, -0.5); scores with
    # v = (-1, 6) are again (0, -1, 2.6). With W the rows are those of X_LP (token 2 a support
    # token under l3); with the identity instead the l3 solution for a1 = (2, 0.5) alone is
    # (sqrt 2, sqrt .5)/3.18 = (0.444, 0.222), a2.p = 1.16 > 1: locally optimal.
    data = D.AttentionData(f64([[[0.0, 0.0], [-2.0, -0.5], [-2.6, 0.0]]]), f64([1.0]),
                           v=f64(-1.0, 6.0))
    W = torch.diag(f64(1.0, 2.0))
    _says(check.check_locally_optimal(True, data, alpha=[0], param="p", W=W, norm=3.0), False,
          T_LOC + WHY_LP)
    _says(check.check_locally_optimal(True, data, alpha=[0], param="p", norm=3.0), True,
          T_LOC + "selection [0] is locally optimal.")
    _says(check.check_locally_optimal(True, data, alpha=[0], param="p", W=W), True,
          T_LOC + "selection [0] is locally optimal.")


def test_prompt_direction_of_a_non_optimal_selection():
    # x = (1, 0), (0, 1), (0, -1), W = I, v = (1, 0): the optimal token is 0 (p^mm = (1, 0)).
    # For alpha = 1: -p0 + p1 >= 1 and 2 p1 >= 1 -> p^mm = (-1/2, 1/2), both active.
    data = D.AttentionData(f64([[[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]]), f64([1.0]),
                           v=f64(1.0, 0.0))
    _says(check.check_prompt_direction([-0.5, 0.5], data, alpha=[1]), True,
          "(p-SVM direction): all 2 margins positive and corr(p, p^mm) = 1.0000 ≥ 0.99 "
          "(Frobenius p-SVM).")
    _says(check.check_prompt_direction([-1.5, 0.5], data, alpha=[1]), False,
          "(p-SVM direction): your p selects the right tokens (all 2 margins positive) but "
          "points elsewhere than the Frobenius max-margin direction: corr(p, p^mm) = 0.8944 "
          "< 0.99.", correlation=pytest.approx(2 / math.sqrt(5)))
    # with W = diag(1, 2): -p0 + 2 p1 >= 1 and 4 p1 >= 1 -> p^mm = (-1, 2)/5 (only the first
    # active: 4 * 2/5 = 1.6)
    W = torch.diag(f64(1.0, 2.0))
    assert check.check_prompt_direction([-1.0, 2.0], data, alpha=[1], W=W)
    assert not check.check_prompt_direction([-0.5, 0.5], data, alpha=[1], W=W)


# -- exact tolerance boundaries (values exact in float64) ----------------------------------------
def test_md_step_tolerance_boundary_is_inclusive():
    # lp = 2, W = G = 0: the step is 0 and the tolerance 1e-8 * max(1, 0) = 1e-8 exactly
    Z = torch.zeros(1, 2, dtype=torch.float64)
    _says(check.check_md_step([[1e-8, 0.0]], Z, Z, 1.0, 2), True,
          "(ℓ2 mirror-descent step): W⁺ matches ∇ψ(W⁺) = ∇ψ(W) − η∇L to 1.0e-08.",
          max_error=1e-8)
    # an entry off by exactly the tolerance is not counted as off
    _says(check.check_md_step([[1e-8, 1.0]], Z, Z, 1.0, 2), False,
          "(ℓ2 mirror-descent step): 1 of 2 entries are off; the largest error is at entry "
          "(1, 2) (Python index [0, 1]) (yours 1). Recompute that entry by hand: map W to the"
          " dual, take the step there, and map back.", entry=(0, 1), max_error=1.0)


def test_md_step_hints_are_relative_to_1e_8():
    # lp = 3, W = (1, -2), G = (1, 1), lr = 1: the step is (0, -sqrt 5), the plain gradient
    # step (0, -3). An answer 1e-6 from it is within rtol 1e-5 but not 1e-8: no hint.
    W, G = f64([[1.0, -2.0]]), f64([[1.0, 1.0]])
    _says(check.check_md_step([[0.0, -3.0 + 1e-6]], W, G, 1.0, 3), False,
          "(ℓ3 mirror-descent step): 1 of 2 entries are off; the largest error is at entry "
          "(1, 2) (Python index [0, 1]) (yours -3). Recompute that entry by hand: map W to "
          "the dual, take the step there, and map back.")
    # the dual point (0, -5) and the sign-flipped step (sqrt 2, -sqrt 3), likewise
    for ans in ([[0.0, -5.0 + 1e-5]], [[math.sqrt(2) + 1e-5, -math.sqrt(3)]]):
        fb = check.check_md_step(ans, W, G, 1.0, 3)
        assert not fb and fb.message.endswith("Recompute that entry by hand: map W to the "
                                              "dual, take the step there, and map back.")


def test_svm_margin_and_tie_boundaries():
    # toy: x = (1, 0), (0, 1), (0, -1), z = e1; W = c [[1, 0], [0, 0]] has both margins c
    toy = D.AttentionData(f64([[[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]]), f64([1.0]),
                          z=f64([[1.0, 0.0]]), v=f64(1.0, 0.0))
    W_MM = f64([[1.0, 0.0], [0.0, 0.0]])
    _says(check.check_svm_direction(0.75 * W_MM, toy, alpha=[0], exact=True, atol=0.25), True,
          "(Att-SVM solution): all 2 margin constraints hold (smallest margin 0.75) and the "
          "Frobenius norm 0.75 is the minimum.")
    # a margin exactly 0 is a violation of a direction
    _says(check.check_svm_direction(f64([[1.0, 0.0], [1.0, 0.0]]), toy, alpha=[0]), False,
          "(Att-SVM direction): your W violates 1 of 2 margin constraints (x_iα_i − x_it)ᵀ W "
          "z_i > 0; the largest violation is at sample 1, token 2 (Python index [0, 1]) "
          "(margin 0; the selected token of that sample is token 1, Python index 0).", violations=1)


def test_selection_tie_boundary():
    # scores (0, -1e-12): best - tie = 0 - 1e-12 (1 + 0) = -1e-12 exactly, a tie
    data = D.AttentionData(f64([[[0.0, 0.0], [-1e-12, 0.0]]]), f64([1.0]), v=f64(1.0, 0.0))
    _says(check.check_selection([1], data), True,
          "(optimal tokens): all 1 samples pick a token of largest score (1 samples have ties: "
          "any maximiser counts).")
    _says(check.check_selection([0], data), True,
          "(optimal tokens): all 1 samples pick a token of largest score (1 samples have ties: "
          "any maximiser counts).")


@pytest.mark.parametrize("T", [4096, 4097])
def test_enumeration_limit_is_4096(T):
    data = D.AttentionData(torch.zeros(1, T, 1, dtype=torch.float64), f64([1.0]),
                           z=f64([[1.0]]), v=f64([1.0]))
    if T == 4096:  # allowed: the malformed answer is feedback before any SVM is solved
        _says(check.check_locally_optimal({(0, 0)}, data), False,
              T_LOC + "each selection must name 1 token(s), one per sample.")
    else:
        with pytest.raises(ValueError, match=r"^without alpha the check enumerates T\^n = 4097 "
                                             r"selections; pass alpha or use a smaller instance "
                                             r"\(T\^n <= 4096\)$"):
            check.check_locally_optimal({(0, 0)}, data)


# -- numeric: empty matrices, feedback, strict -------------------------------------------------
def test_rank_of_an_empty_matrix():
    for W in (torch.zeros(0, 0), torch.zeros(0, 3)):
        _says(check.check_rank(0, W), True,
              "(rank): W has rank 0 (singular values above 1e-06·σ₁).", rank=0)
    _says(check.check_rank(1, torch.zeros(0, 3)), False,
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


# -- diagnose: every hint in full, and where it must stay silent --------------------------------
ONE_BASED = ("Your indices look 1-based: attnlib counts samples, tokens and steps from 0 "
             "(Python indexing).")
TRANSPOSED = ("Your matrix is the transpose of the right one: check which index runs over keys "
              "(x) and which over queries (z) in x^T W z.")
SIGN = "Your answer has the wrong sign."
SCALE = ("Your answer points the right way but has the wrong scale: a normalisation is missing "
         "or extra.")


def _rows(what):
    return (f"Your {what} are not normalised: divide each by its sum (a softmax or a "
            "probability vector sums to 1).")


def test_diagnose_hints():
    from attnlib.check.numeric import diagnose
    assert diagnose([1, 2], [0, 1]) == ONE_BASED
    assert diagnose([-1, 0], [0, 1]) == ""  # shifted the other way: not 1-based
    assert diagnose([2, 3], [0, 1]) == ""
    assert diagnose([1.5, 2.5], [0.5, 1.5]) == ""  # not integers
    E = [[0.1, 0.2], [0.3, 0.4]]  # not symmetric, entries below 1
    assert diagnose(np.array(E).T, E) == TRANSPOSED
    assert diagnose([[0.1, 0.2, 0.0], [0.3, 0.4, 0.0]], [[0.1, 0.3], [0.2, 0.4], [0.0, 0.0]]) \
        == ""  # other shape
    assert diagnose([[-0.5]], [[0.5]]) == SIGN
    assert diagnose([-0.25, -0.5], [0.25, 0.5]) == SIGN  # max |exp| < 1
    assert diagnose([0.0, 0.0], [0.0, 0.0]) == ""  # zero: no sign
    assert diagnose([0.05, 0.1], [0.1, 0.2]) == SCALE  # both norms below 1
    assert diagnose([0.2, 0.4], [0.1, 0.2]) == SCALE
    assert diagnose([0.0, 0.4], [0.0, 0.2]) == ""  # one nonzero entry: no direction
    assert diagnose([0.2, 0.1], [0.1, 0.2]) == ""  # another direction
    assert diagnose([0.1, 0.2], [0.1, 0.2]) == ""
    assert diagnose([0.1 * (1 + 5e-7), 0.2 * (1 + 5e-7)], [0.1, 0.2]) == ""  # scale within 1e-6
    assert diagnose([0.1 * (1 + 2e-6), 0.2 * (1 + 2e-6)], [0.1, 0.2]) == SCALE
    # rows / columns: the expected rows sum to 1, the answer's rows are multiples of them
    P = np.array([[0.25, 0.75], [0.5, 0.5]])
    assert diagnose(P * [[2.0], [4.0]], P) == _rows("rows")
    Q = P.T  # columns sum to 1
    assert diagnose(Q * [[2.0, 4.0]], Q) == _rows("columns")
    assert diagnose(P * [[2.0], [-2.0]], P) == _rows("rows")  # a negative sum divides too
    assert diagnose(P * [[2.0], [0.0]], P) == ""  # a zero row cannot be normalised
    assert diagnose([[0.5, 1.0]], [[0.25, 0.5]]) == SCALE  # one row: the scale hint first
    assert diagnose([], []) == ""
    assert diagnose([1.0], [1.0, 2.0]) == ""


def test_diagnose_tolerance():
    from attnlib.check.numeric import diagnose
    # tol bounds |ans - exp| entrywise (inclusive); a floor of 1e-9 (1 + max|exp|) applies
    assert diagnose([-1.5, -2.0], [1.0, 2.0]) == ""
    assert diagnose([-1.5, -2.0], [1.0, 2.0], tol=0.5) == SIGN
    assert diagnose([-1.5, -2.0], [1.0, 2.0], tol=0.25) == ""
    assert diagnose([-1.0 - 2e-9, -2.0], [1.0, 2.0], tol=0.0) == SIGN  # floor 3e-9
    assert diagnose([-1.0 - 4e-9, -2.0], [1.0, 2.0], tol=0.0) == ""
    assert diagnose([-1.0 - 4e-9, -2.0], [1.0, 2.0], tol=torch.tensor([1e-8, 0.0])) == SIGN


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
    _says(check.check_relaxed_prompt([0.5, -0.5], RELAX), True, ok)
    _says(check.check_relaxed_prompt([0.5, -0.5], RELAX, alpha=[0, 0]), True, ok)
    # within atol + 1e-5 |p|: 5.5e-6 <= 1e-6 + 5e-6, but not <= 1e-7 + 5e-6
    _says(check.check_relaxed_prompt([0.5 + 5.5e-6, -0.5], RELAX), True, ok)
    assert not check.check_relaxed_prompt([0.5 + 5.5e-6, -0.5], RELAX, atol=1e-7)
    _says(check.check_relaxed_prompt([2 / 3, -1 / 3], RELAX), False,
          T_REL + "This is p^mm: every input keeps margin ≥ 1. In p^relax an input that is not "
          "a support vector of the head (v-margin > 1) only needs margin ≥ 0.")
    _says(check.check_relaxed_prompt([-0.5, 0.5], RELAX), False,
          T_REL + "Your p points the wrong way: the selected token must win, "
          "(k_iα_i − k_it)ᵀp ≥ 0, not ≤ 0.")
    _says(check.check_relaxed_prompt([1.0, 0.0], RELAX), False,
          T_REL + "This is v^mm, the head's SVM; p^relax is the prompt's.")
    _says(check.check_relaxed_prompt([0.5, -0.4], RELAX), False,
          T_REL + "your p_relax violates a constraint: input 1, token 2 (Python index [0, 1])"
                  " has margin 0.9, it needs ≥ 1 (a support input of the head).")
    _says(check.check_relaxed_prompt([0.2, -1.0], RELAX), False,
          T_REL + "your p_relax violates a constraint: input 2, token 2 (Python index [1, 1])"
                  " has margin -0.6, it needs ≥ 0 (not a support input).")
    # both violated: the smaller margin is named (-0.2 at input 1 < 0.8 at input 0)
    _says(check.check_relaxed_prompt([0.0, -0.2], RELAX), False,
          T_REL + "your p_relax violates a constraint: input 2, token 2 (Python index [1, 1])"
                  " has margin -0.2, it needs ≥ 0 (not a support input).")
    _says(check.check_relaxed_prompt([1.0, -1.0], RELAX), False,
          T_REL + "your p_relax satisfies the relaxed constraints but is not the shortest such "
          "point: which constraints are active at the minimum? (KKT: p is a non-negative "
          "combination of their rows).")
    _says(check.check_relaxed_prompt([1.0, 0.0, 0.0], RELAX), False,
          T_REL + "p_relax must have shape (2,), yours has (3,).")
    _says(check.check_relaxed_prompt(None, RELAX), False,
          T_REL + "p_relax is None: you have not answered yet (replace the stub above).")
    same = D.AttentionData(f64([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]]),
                           f64([1.0, -1.0]), v=f64(1.0, 0.0))
    with pytest.raises(ValueError) as e:
        check.check_relaxed_prompt([1.0, 0.0], same, alpha=[0, 0])
    assert str(e.value) == "data: the SVMs of this selection are infeasible"


def test_relaxed_prompt_with_its_W():
    W = torch.diag(f64(1.0, 2.0))
    _says(check.check_relaxed_prompt([1 / 3, -1 / 3], RELAX, W=W), True,
          T_REL + "your p_relax is the minimum-norm point of the relaxed constraints "
          "(independent NNLS check).")
    assert not check.check_relaxed_prompt([0.5, -0.5], RELAX, W=W)
    _says(check.check_relaxed_prompt([2 / 3, -1 / 6], RELAX, W=W), False,
          T_REL + "This is p^mm: every input keeps margin ≥ 1. In p^relax an input that is not "
          "a support vector of the head (v-margin > 1) only needs margin ≥ 0.")
    # margins with W: 0.2 + 0.8 = 1 (input 0), 0.4 - 0.8 = -0.4 (input 1)
    _says(check.check_relaxed_prompt([0.2, -0.4], RELAX, W=W), False,
          T_REL + "your p_relax violates a constraint: input 2, token 2 (Python index [1, 1])"
                  " has margin -0.4, it needs ≥ 0 (not a support input).")
    p, v = check.svm_answers.relaxed_prompt_oracle(RELAX.X.float().numpy(),
                                                   RELAX.Y.float().numpy(), [0, 0], W.numpy())
    assert np.allclose(p, [1 / 3, -1 / 3]) and np.allclose(v, [1.0, 0.0])


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
    _says(check.check_locally_optimal(sets[k + 1], inst), False, T_LOC + hint)
    one_based = {tuple(u + 1 for u in s) for s in sets[0]}
    _says(check.check_locally_optimal(one_based, inst), False,
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
def _lp_min_norm_2d(rows, q):
    """min |p|_q s.t. rows @ p >= 1 for 2 rows in 2-d: each row alone or both equal to 1."""
    cands = [np.linalg.solve(rows, np.ones(2))]
    for a in rows:
        u = np.sign(a) * np.abs(a) ** (1 / (q - 1))
        cands.append(u / (a @ u))
    ok = [p for p in cands if (rows @ p >= 1 - 1e-12).all()]
    return min(ok, key=lambda p: (np.abs(p) ** q).sum())


def test_hand_solved_prompt_sets():
    x = X_LP[0].numpy()
    gamma = x @ V_LP.numpy()
    truth = {}
    for q in (2.0, 3.0):
        truth[q] = set()
        for a in range(3):
            rows = np.array([x[a] - x[t] for t in range(3) if t != a])
            others = [t for t in range(3) if t != a]
            p = _lp_min_norm_2d(rows, q)
            support = [t for t, m in zip(others, rows @ p) if m <= 1 + 1e-9]
            if all(gamma[t] < gamma[a] for t in support):
                truth[q].add(a)
    assert truth == {2.0: {0, 2}, 3.0: {2}}
    rows1 = np.array([[-2.0, -1.0], [0.6, -1.0]])
    assert np.allclose(np.linalg.solve(rows1.T, [0.0, -1.0]), [3 / 13, 10 / 13])
    assert np.allclose(_lp_min_norm_2d(np.array([[-2.6, 0.0], [-0.6, 1.0]]), 2.0),
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
    _says(check.check_locally_optimal(given, data, param="p", norm=norm), ok, T_LOC + text,
          **details)


def test_prompt_set_of_two_samples():
    # the sample twice: a selection with different tokens has rows x_a - x_b and x_b - x_a,
    # infeasible; (a, a) is the one-sample problem, so the set is {(0, 0), (2, 2)}
    data = D.AttentionData(torch.cat([X_LP, X_LP]), f64([1.0, 1.0]), v=V_LP)
    _says(check.check_locally_optimal({(0, 0), (2, 2)}, data, param="p"), True,
          T_LOC + "the locally optimal selections are exactly {(0, 0), (2, 2)}.")
    _says(check.check_locally_optimal({(2, 2), (1, 1)}, data, param="p"), False,
          T_LOC + "{(1, 1)} is not locally optimal; you missed 1 locally optimal selection.",
          missing=1, extra=[(1, 1)])


# -- check_value's known mistakes, diagnose's hint and the side of a scalar ----------------------
def test_value_mistakes_and_side():
    _says(check.check_value(3.0, 2.0, mistakes={"You used p^mm.": 3.0}), False,
          "(value): value = 3 is too large (rtol=1e-06, atol=1e-09). You used p^mm.")
    _says(check.check_value(1.0, 2.0, mistakes={"You used p^mm.": 3.0}), False,
          "(value): value = 1 is too small (rtol=1e-06, atol=1e-09).")
    # a mistake of another size is skipped; the first match wins; |2.5 - 2| = 0.5 is exactly
    # atol + rtol |2| = 0.25 + 0.125 * 2 (exact in float64): a match
    _says(check.check_value(2.5, 10.0, atol=0.25, rtol=0.125,
                            mistakes={"A.": [2.5, 2.5], "B.": 2.0, "C.": 2.5}), False,
          "(value): value = 2.5 is too small (rtol=0.125, atol=0.25). B.")


def test_value_passes_its_tolerance_to_diagnose():
    # -ans is 1e-6 from exp: within tol = 1e-9 + 1e-6 * 2 but not diagnose's default 1e-9
    _says(check.check_value([-1.0, -2.000001], [1.0, 2.0]), False,
          "(value): 2 of 2 entries of value are off; the farthest is entry (2) (Python index "
          "[1]) (yours -2). "
          "Your answer has the wrong sign.", entries_off=2)


# -- check_md_step: swapped exponents, the 1e-8 floor, the hints' atol, diagnose's arguments -----
def test_md_step_swapped_exponents():
    # lp = 3, W = (9, -4), G = (2, 0), lr = 1/2: swapped, 9^(1/2) - 1 = 2 -> 2^2 = 4 and
    # -(4^(1/2)) = -2 -> -(2^2) = -4; the step is (sqrt(81 - 1), -4): entry (0, 0) off only
    W, G = f64([[9.0, -4.0]]), f64([[2.0, 0.0]])
    assert math.isclose(math.sqrt(80.0), 8.94427191, rel_tol=1e-9)
    _says(check.check_md_step([[4.0, -4.0]], W, G, 0.5, 3), False,
          "(ℓ3 mirror-descent step): 1 of 2 entries are off; the largest error is at entry "
          "(1, 1) (Python index [0, 0]) (yours 4). The two exponents are swapped: to the dual"
          " with |·|^(p−1), back to the primal with |·|^(1/(p−1)).", entry=(0, 0))
    # at p = 2 both maps are the identity: the same numbers are a plain (wrong) step, no hint
    fb = check.check_md_step([[4.0, -4.0]], W, G, 0.5, 2)
    assert not fb and "swapped" not in fb.message


def test_md_step_tolerance_floor_and_hint_atol():
    # W = 0.5, G = 0: the step is 0.5 (0.25^(1/2), exact); tol = 1e-8 * max(1, 0.5) = 1e-8
    _says(check.check_md_step([[0.5 + 1.8e-8]], f64([[0.5]]), f64([[0.0]]), 1.0, 3), False,
          "(ℓ3 mirror-descent step): 1 of 1 entries are off; the largest error is at entry "
          "(1, 1) (Python index [0, 0]) (yours 0.5). Recompute that entry by hand: map W to "
          "the dual, take the step there, and map back.")
    # W = 100, G = 1: the step sqrt(9999) = 99.995 sets tol ~ 1e-6; the plain step 99 plus
    # 1.5e-6 is within tol + 1e-8 * 99 but not 1e-8 + 1e-8 * 99
    _says(check.check_md_step([[99.0 + 1.5e-6]], f64([[100.0]]), f64([[1.0]]), 1.0, 3), False,
          "(ℓ3 mirror-descent step): 1 of 1 entries are off; the largest error is at entry "
          "(1, 1) (Python index [0, 0]) (yours 99). This is a plain gradient step W − η∇L; "
          "mirror descent steps in the dual: map W by sign(W)|W|^(p−1), subtract η∇L, and map"
          " back by sign(·)|·|^(1/(p−1)).")


def test_md_step_asks_diagnose_with_its_tolerance():
    # W = (4, 1), G = (1, 0), lr = 1, lp = 3: the step is (sqrt 15, 1); an answer 1e-8 from
    # its negative is within tol = 1e-8 sqrt 15 but not diagnose's default 1e-9 floor
    r = math.sqrt(15.0)
    _says(check.check_md_step([[-r + 1e-8, -1.0 + 1e-8]], f64([[4.0, 1.0]]), f64([[1.0, 0.0]]),
                              1.0, 3), False,
          "(ℓ3 mirror-descent step): 2 of 2 entries are off; the largest error is at entry "
          "(1, 1) (Python index [0, 0]) (yours -3.87298). Your answer has the wrong sign.")


# -- check_selection: the smallest-score hint and its boundaries ----------------------------------
def _scored(*gammas):
    """One sample per tuple, token t at x = (gamma_t, 0), v = e1, Y = 1: scores = gammas."""
    X = f64([[[g, 0.0] for g in gs] for gs in gammas])
    return D.AttentionData(X, torch.ones(len(gammas), dtype=torch.float64), v=f64(1.0, 0.0))


def test_selection_hints():
    data = _scored((1.0, 0.5, 0.0, -1.0))
    _says(check.check_selection([3], data), False,
          "(optimal tokens): 1 of 1 samples wrong; e.g. sample 1 (Python index 0): you chose "
          "token index 3 (score -1), but another token of that sample has a larger score. You"
          " picked the smallest, not the largest: use argmax (not argmin), and check the sign"
          " (the label Y_i).", wrong=[0])
    _says(check.check_selection([2], data), False,
          "(optimal tokens): 1 of 1 samples wrong; e.g. sample 1 (Python index 0): you chose "
          "token index 2 (score 0), but another token of that sample has a larger score.",
          wrong=[0])
    # scores (0, -1, -1 + 1e-12): token 2 is within the tie 1e-12 (1 + 0) of the smallest
    m = -1.0 + 1e-12
    _says(check.check_selection([2], _scored((0.0, -1.0, m))), False,
          f"(optimal tokens): 1 of 1 samples wrong; e.g. sample 1 (Python index 0): you chose "
          f"token index 2 (score {m:.4g}), but another token of that sample has a larger "
          "score. You picked the smallest, not the largest: use argmax (not argmin), and "
          "check the sign (the label Y_i).", wrong=[0])
    # 1-based: sample 1's token 0 scores -1e-12 = best - tie exactly (still a maximiser)
    _says(check.check_selection([1, 1], _scored((1.0, 0.0, -1.0), (-1e-12, 0.0, -5.0))), False,
          "(optimal tokens): 1 of 2 samples wrong; e.g. sample 1 (Python index 0): you chose "
          "token index 1 (score 0), but another token of that sample has a larger score. Your"
          " indices look 1-based: tokens are numbered from 0.", wrong=[0])


def test_selection_tie_scales_with_the_best_score():
    # best 0: tie 1e-12, a token 1.5e-12 below is wrong (2e-12 would forgive it)
    assert not check.check_selection([1], _scored((0.0, -1.5e-12)))
    # best 3: tie 4e-12, a token 2e-12 below is a tie
    _says(check.check_selection([1], _scored((3.0, 3.0 - 2e-12))), True,
          "(optimal tokens): all 1 samples pick a token of largest score (1 samples have ties: "
          "any maximiser counts).")


# -- the W-model's sets: infeasible extras, how many are missing, out of range (helper M5) -------
# z = e1 makes the W-model the prompt problem in W's first column, so X_LP's set is {0, 2}
# (test_hand_solved_prompt_sets). The sample twice: a mixed selection (a, b), a != b, has rows
# x_a - x_b and x_b - x_a (infeasible), so the set is {(0, 0), (2, 2)}, every (a, a) feasible.
E1 = f64([[1.0, 0.0]])


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
    _says(check.check_locally_optimal(given, _twice(X_LP)), False, T_LOC + text, wrong=wrong,
          missing=missing)


def test_w_set_shifted_down_is_not_one_based():
    # tokens reordered (x1, x2, x0): the set is {(1, 1), (2, 2)}; {(0, 0), (1, 1)} is it
    # shifted down by one, a plain mistake (token 0 is the old x1), not 1-based indices
    data = _twice(X_LP[:, [1, 2, 0]])
    _says(check.check_locally_optimal({(1, 1), (2, 2)}, data), True,
          T_LOC + "all 2 locally optimal selections among the 9, and no other (independent "
          "NNLS check).")
    _says(check.check_locally_optimal({(0, 0), (1, 1)}, data), False,
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
    _says(check.check_locally_optimal({0}, line), True,
          T_LOC + "all 1 locally optimal selections among the 3, and no other (independent NNLS "
          "check).")
    _says(check.check_locally_optimal({2}, line), False,
          T_LOC + "1 of your 1 selections is not locally optimal: 1 with a feasible Att-SVM "
                  "but a support token that scores at least as high as the selected token. 1 "
                  "locally optimal selection is missing from your set: are your tolerances "
                  "too strict, or the score comparison reversed?")
    for given in ({5}, {3}, {0, 3}, {-1}):
        _says(check.check_locally_optimal(given, line), False, T_LOC + OUT_OF_RANGE)


def test_why_local_of_the_w_model_uses_its_queries():
    # sample 0 is X_LP with z = e1, sample 1 has x = (0, 0), (0, -3), (0, -3) with z = e2:
    # the W-model decouples into W's two columns, and selection (1, 0) is feasible; token 0
    # of sample 0 is a support token scoring 0 >= -1 (test_hand_solved_prompt_sets, a = 1).
    # One shared prompt p would need p1 >= 1/3 (sample 1) and -2 p0 - p1 >= 1,
    # 0.6 p0 - p1 >= 1 (sample 0, so p1 <= -1): the prompt model is infeasible there.
    X2 = torch.cat([X_LP, f64([[[0.0, 0.0], [0.0, -3.0], [0.0, -3.0]]])])
    data = D.AttentionData(X2, f64([1.0, 1.0]), z=f64([[1.0, 0.0], [0.0, 1.0]]), v=V_LP)
    _says(check.check_locally_optimal(True, data, alpha=[1, 0]), False,
          T_LOC + "selection [1, 0] is not locally optimal; you said it is. At sample 1, "
                  "token 1 (Python index [0, 0]), a support token, the score 0 is ≥ -1, the "
                  "score of the selected token (Python index 1).")


# -- directions of a selection that is not the optimal one, in the selection's own norm ---------
def test_directions_solve_the_given_selection_in_the_given_norm():
    # X_LP, selection 2 (prompt model): the l3 p-SVM needs only the row (-0.6, 1) (above)
    x = X_LP[0].numpy()
    p3 = _lp_min_norm_2d(np.array([x[2] - x[0], x[2] - x[1]]), 3.0)
    assert f"{(np.abs(p3) ** 3).sum() ** (1 / 3):g}" == "0.775335"
    data = D.AttentionData(X_LP, f64([1.0]), v=V_LP)
    _says(check.check_prompt_direction(p3, data, alpha=[2], norm=3.0, exact=True), True,
          "(p-SVM solution): all 2 margin constraints hold (smallest margin 1) and the ℓ3 norm "
          "0.775335 is the minimum.")
    # the Frobenius solution (-0.6, 1)/1.36 points 0.99297 along it (corr), l3 norm 0.784...
    p2 = np.array([-0.6, 1.0]) / 1.36
    assert math.isclose(p2 @ p3 / np.linalg.norm(p2) / np.linalg.norm(p3), 0.99297, abs_tol=1e-5)
    assert check.check_prompt_direction(p3, data, alpha=[2], norm=3.0, min_corr=0.999)
    n3 = (np.abs(p2) ** 3).sum() ** (1 / 3)
    _says(check.check_prompt_direction(p2, data, alpha=[2], norm=3.0, exact=True), False,
          "(p-SVM solution): your p satisfies all 2 margin constraints, its smallest margin is "
          "exactly 1, and yet it is not the ℓ3 minimiser: another p meets the constraints with "
          "a smaller ℓ3 norm. Scaling will not help; solve the SVM with the ℓ3 norm (the "
          "minimiser of another norm is a different point).")
    assert f"{n3:.6g}" != "0.775335"
    # W-model, z = e1, selection 1 (not the optimal token 2): W^mm = (0, -1) e1^T (above)
    data = D.AttentionData(X_LP, f64([1.0]), z=E1, v=V_LP)
    W1 = f64([[0.0, 0.0], [-1.0, 0.0]])
    _says(check.check_svm_direction(W1, data, alpha=[1]), True,
          "(Att-SVM direction): all 2 margins positive and corr(W, W^mm) = 1.0000 ≥ 0.99 "
          "(Frobenius Att-SVM).")
    _says(check.check_svm_direction(W1, data, alpha=[1], exact=True), True,
          "(Att-SVM solution): all 2 margin constraints hold (smallest margin 1) and the "
          "Frobenius norm 1 is the minimum.")


# -- check_relaxed_prompt: a margin exactly 1 - atol, and two equal violations -------------------
def test_relaxed_prompt_margin_boundaries():
    # p = (0.75, -0.25 + 2^-10): input 0's margin p0 - p1 = 1 - 2^-10 = 1 - atol exactly (not a
    # violation), input 1's 2 p0 + p1 > 0; not within atol of p^relax, p^mm, -p^relax, v^mm
    _says(check.check_relaxed_prompt([0.75, -0.25 + 2**-10], RELAX, atol=2**-10), False,
          T_REL + "your p_relax satisfies the relaxed constraints but is not the shortest such "
          "point: which constraints are active at the minimum? (KKT: p is a non-negative "
          "combination of their rows).")
    # p = (-0.5, 0.25): margins -0.75 (input 0) and -1 + 0.25 = -0.75 (input 1): the first named
    _says(check.check_relaxed_prompt([-0.5, 0.25], RELAX), False,
          T_REL + "your p_relax violates a constraint: input 1, token 2 (Python index [0, 1])"
                  " has margin -0.75, it needs ≥ 1 (a support input of the head).")


# -- diagnose: the floor's 1.0, zero answers, one column, small row sums, a float64 tol -----------
def test_diagnose_edges():
    from attnlib.check.numeric import diagnose
    # floor 1e-9 (1 + 1) = 2e-9 < 2.5e-9: not the wrong sign (with 2 + 1 it would be)
    assert diagnose([-(1 + 2.5e-9), -0.5], [1.0, 0.5], tol=0.0) == ""
    assert diagnose([0.0, 0.0], [1.0, 2.0]) == ""  # a zero answer has no direction
    assert diagnose([[2.0], [3.0]], [[1.0], [1.0]]) == ""  # one column: rows are not checked
    assert diagnose([[0.25, 0.25], [0.1, 0.3]], [[0.5, 0.5], [0.25, 0.75]]) == (
        "Your rows are not normalised: divide each by its sum (a softmax or a probability "
        "vector sums to 1).")  # row sums 0.5 and 0.4, below 1
    # tol = 0.1 in float64: 0.1000000005 is outside it (float32 0.1 would be 0.10000000149)
    assert diagnose([-1.1000000005, -2.0], [1.0, 2.0], tol=0.1) == ""
    assert diagnose([-1.1000000005, -2.0], [1.0, 2.0], tol=0.1000000015) == (
        "Your answer has the wrong sign.")


# -- _direction: the answer's name and the title, details, the inclusive min_corr ---------------
def test_direction_messages_and_details():
    data = D.AttentionData(X_LP, f64([1.0]), z=E1, v=V_LP)
    _says(check.check_svm_direction(None, data), False,
          "(Att-SVM direction): W is None: you have not answered yet (replace the stub above).")
    _says(check.check_prompt_direction(None, data), False,
          "(p-SVM direction): p is None: you have not answered yet (replace the stub above).")
    W1 = f64([[0.0, 0.0], [-1.0, 0.0]])  # W^mm of selection 1 (above), Frobenius norm 1
    fb = check.check_svm_direction(W1, data, alpha=[1], exact=True)
    assert fb.details["optimal_norm"] == pytest.approx(1.0, abs=1e-6)
    corr = check.check_svm_direction(W1, data, alpha=[1]).details["correlation"]
    assert check.check_svm_direction(W1, data, alpha=[1], min_corr=corr)  # corr >= min_corr
    with pytest.raises(ValueError) as e:
        check.check_svm_direction(W1, D.AttentionData(X_LP, f64([1.0]), v=V_LP))
    assert str(e.value) == "data has no queries z (the prompt model): use check_prompt_direction"


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


def test_diagnose_scale_hint_needs_cos_above_1_minus_1e_9():
    from attnlib.check.numeric import diagnose
    # ans = (1, 1 + e), exp = (1, 1): cos = 1 - e^2/8 + ..., and this e (found by a search
    # over floats) makes it exactly 1 - 1e-9 in float64; the norms differ by e/2 >> 1e-6
    e = 8.94467127173994e-05
    ans, exp = f64(1.0, 1.0 + e), f64(1.0, 1.0)
    assert float((ans * exp).sum()) / (float(ans.norm()) * float(exp.norm())) == 1 - 1e-9
    assert diagnose(ans, exp) == ""
    assert diagnose(f64(1.0, 1.0 + 0.9999 * e), exp) == (
        "Your answer points the right way but has the wrong scale: a normalisation is missing "
        "or extra.")
