"""check_local_selections' every branch, title, message and detail (mutation testing, issue 12).

The truth comes from attnlib.enumerate_selections (cvxpy SVMs), not from the check's own
least-distance oracle; the mistaken sets from the oracle's documented variants.
"""

import itertools
import re

import numpy as np
import pytest
import torch

import attnlib as al
from attnlib.check import local_answers as la

check = al.check.check_local_selections
TITLE = "locally optimal selections (by hand)"


@pytest.fixture(scope="module")
def inst():
    data = al.random_data(n=2, T=3, d=2, seed=0)
    lib = al.enumerate_selections(data, param="p", W=torch.eye(2, dtype=torch.float64))
    truth = {tuple(a) for a, ok in zip(lib.alpha.tolist(), lib.locally_optimal.tolist()) if ok}
    return data, truth


def _variant(data, **kw):
    X, Y, v = data.X.numpy(), data.Y.numpy(), data.v.numpy()
    return {a for a in itertools.product(range(3), repeat=2)
            if la.locally_optimal_oracle(X, Y, v, a, **kw)}


def _fails(fb, message, details=None):
    assert (fb.ok, fb.title, fb.message) == (False, TITLE, message), fb.message
    if details is not None:
        assert fb.details == details


def test_right_answer_message_and_details(inst):
    data, truth = inst
    fb = check(truth, data)
    shown = "{" + ", ".join(map(str, sorted(truth))) + "}"
    assert (fb.ok, fb.title, fb.details) == (True, TITLE, {"n_locally_optimal": len(truth)})
    assert fb.message == (f"your test finds the {len(truth)} locally optimal selections among "
                          f"the 9: {shown}.")
    assert check(truth, data, W=np.eye(2)) and check(truth, data, W=torch.eye(2))
    # another key matrix changes the truth: W = 2 I scales every key, not the local optimality
    assert check(truth, data, W=2 * np.eye(2))


def test_each_mistake_and_bad_input_by_message(inst):
    data, truth = inst
    hints = [
        (_variant(data, feasible_only=False),
         "You counted selections whose Att-SVM is infeasible: local optimality needs a feasible "
         "SVM first (cvxpy reports status 'infeasible' and p.value is None)."),
        (_variant(data, support="none"),
         "Your set is exactly the selections with a feasible SVM: no token ever counted as a "
         "support token. A solver's margins equal 1 only up to round-off; compare |margin − 1| "
         "with a tolerance (e.g. 1e-5)."),
        (_variant(data, labels=False),
         "Your scores ignore the labels: γ_it = Y_i vᵀx_it, not vᵀx_it."),
        (_variant(data, support="all"),
         "You compared the selected token with every token of its input; local optimality "
         "compares it only with its support tokens (the margins of p^mm(α) equal to 1)."),
        (_variant(data, support="inactive"),
         "You compared with the tokens whose margin is above 1; the support tokens are the "
         "active ones, margin exactly 1."),
    ]
    for wrong, hint in hints:
        _fails(check(wrong, data), hint)
    one = "your token indices look 1-based: count tokens from 0, as Python does (0..2); the " \
          "prose's x_1 is token 0."
    _fails(check({tuple(u + 1 for u in a) for a in truth}, data), one)
    _fails(check({(1, 3)}, data), one)  # every index in 1..T: 1-based
    _fails(check({(0, 3)}, data), "token indices must lie in 0..2.")
    _fails(check({(1, -1)}, data), "token indices must lie in 0..2.")
    _fails(check(None, data),
           "answer is None: you have not answered yet (replace the stub above).")
    _fails(check({(0, 1, 2)}, data), "each selection must name 2 token(s), one per sample.")
    with pytest.raises(ValueError, match="^" + re.escape(
            "data must carry the head v (the scores are Y_i v^T x_it)") + "$"):
        check(truth, data.with_(v=None))
    with pytest.raises(ValueError, match="^" + re.escape(
            "W must have shape (d, d) = (2, 2), got (3, 3)") + "$"):
        check(truth, data, W=np.eye(3))
    big = al.random_data(n=2, T=65, d=2, seed=0)  # 65^2 = 4225 > 4096
    with pytest.raises(ValueError, match="^" + re.escape(
            "data: the check enumerates T^n = 4225 selections (at most 4096)") + "$"):
        check(truth, big)
    edge = al.random_data(n=2, T=64, d=2, seed=0)  # 64^2 = 4096: still enumerated
    _fails(check(None, edge),
           "answer is None: you have not answered yet (replace the stub above).")


def test_generic_feedback_counts_and_examples(inst):
    data, truth = inst
    feasible = _variant(data, support="none")
    sels = set(itertools.product(range(3), repeat=2))
    extra_feasible = sorted(feasible - truth)
    extra_infeasible = sorted(sels - feasible)
    assert extra_feasible and extra_infeasible
    why_f = ("with a feasible Att-SVM but a support token that scores at least as high as the "
             "selected token. If your test saw no such support token, it missed one: a "
             "solver's margins equal 1 only up to round-off, so compare |margin − 1| with a "
             "tolerance")
    missing = ("2 locally optimal selections are missing from your set: are your tolerances "
               "too strict, or the score comparison reversed?")
    a = extra_feasible[0]
    _fails(check(truth | {a}, data),
           f"1 of your {len(truth) + 1} selections is not locally optimal: 1 {why_f}.",
           {"wrong": 1, "missing": 0})
    b = extra_infeasible[0]
    given = {b, *extra_infeasible[1:2]}
    _fails(check(given, data),
           f"{len(given)} of your {len(given)} selections are not locally optimal: {len(given)} "
           f"with an infeasible Att-SVM. {missing}",
           {"wrong": len(given), "missing": len(truth)})
    _fails(check(set(), data), missing, {"wrong": 0, "missing": len(truth)})


JTITLE = "(v, p) after one joint normalised GD step"


def test_joint_step_messages_titles_and_arguments():
    from test_check_local_answers import _autograd_step  # torch autograd, as a learner writes

    nt = al.examples.joint_example(tight=False).data
    F64 = torch.float64
    v0, p0, lr = torch.tensor([-1.0, 0.0], dtype=F64), torch.tensor([0.0, -1.0], dtype=F64), 0.1
    right = _autograd_step(nt, v0, p0, lr)
    fb = al.check.check_joint_step(right, v0, p0, nt, lr)
    assert (fb.ok, fb.title) == (True, JTITLE)
    assert fb.message == "all 4 entries within tolerance (rtol=1e-06, atol=1e-07)."
    p1 = right[1]
    vr = v0.clone().requires_grad_(True)
    s = torch.softmax(nt.X @ p0, -1)
    torch.nn.functional.softplus(-nt.Y * torch.einsum("it,itd,d->i", s, nt.X, vr)).mean() \
        .backward()
    v1 = v0 - lr * vr.grad / vr.grad.norm()
    hints = {
        "You moved up the gradients: a descent step subtracts η times each normalised "
        "gradient.": (2 * v0 - right[0], 2 * p0 - right[1]),
        "Your step is not normalised: divide each gradient by its own norm, as in the "
        "experiment of this chapter.": _autograd_step(nt, v0, p0, lr, normalise=None),
        "You normalised both gradients by one norm (of the pair): each is divided by its own "
        "norm, ∇_v L/‖∇_v L‖ and ∇_p L/‖∇_p L‖.": _autograd_step(nt, v0, p0, lr,
                                                               normalise="joint"),
        "Your p step used the updated v: take both gradients at the current (v, p), then "
        "step.": (v1, _autograd_step(nt, v1, p0, lr)[1]),
        "Your v step used the updated p: take both gradients at the current (v, p), then "
        "step.": (_autograd_step(nt, v0, p1, lr)[0], p1),
        "Your pair is in the order (p, v): answer (v_next, p_next).": right[::-1],
        "Your risk ignores the labels: the margin of sample i is Y_i f_i.":
            _autograd_step(nt, v0, p0, lr, labels=False),
        "Your softmax runs over the samples: attention normalises over the tokens t of each "
        "input (the last axis of X_i W p).": _autograd_step(nt, v0, p0, lr, softmax_dim=0),
    }
    for hint, wrong in hints.items():
        fb = al.check.check_joint_step(wrong, v0, p0, nt, lr)
        assert (fb.ok, fb.title) == (False, JTITLE) and fb.message.endswith(" " + hint), \
            fb.message
    for bad, msg in (
            (None, "vp_next is None: you have not answered yet (replace the stub above)."),
            (right[0], "answer with the pair (v_next, p_next)."),
            ((*right, right[0]), "answer with the pair (v_next, p_next)."),
            ((None, right[1]),
             "v_next is None: you have not answered yet (replace the stub above)."),
            ((right[0], None),
             "p_next is None: you have not answered yet (replace the stub above)."),
            ((right[0], torch.zeros(3)), "v_next and p_next must each hold d = 2 numbers."),
            (torch.zeros(3, 2), "answer with the pair (v_next, p_next).")):
        fb = al.check.check_joint_step(bad, v0, p0, nt, lr)
        assert (fb.ok, fb.title, fb.message) == (False, JTITLE, msg), fb.message
    assert al.check.check_joint_step((right[0][None], right[1][:, None]), v0, p0, nt, lr)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="^" + re.escape(
                f"lr must be a positive number, got {bad}") + "$"):
            al.check.check_joint_step(right, v0, p0, nt, bad)
    for v_, p_, W_ in ((torch.zeros(3), p0, None), (v0, torch.zeros(3), None),
                       (v0, p0, torch.eye(3))):
        shapes = (tuple(v_.shape), tuple(p_.shape), (2, 2) if W_ is None else (3, 3))
        with pytest.raises(ValueError, match="^" + re.escape(
                f"v and p must have shape (d,) = (2,) and W (d, d); got {shapes[0]}, "
                f"{shapes[1]}, {shapes[2]}") + "$"):
            al.check.check_joint_step(right, v_, p_, nt, lr, W=W_)
    assert al.check.check_joint_step(right, v0, p0, nt, lr, W=np.eye(2))
    assert not al.check.check_joint_step(right, v0, p0, nt, lr, W=np.diag([1.0, 3.0]))


def test_answer_forms_and_the_oracles_arguments(inst):
    data, truth = inst
    _fails(check({(0, 1): True}, data), "answer with a set of selections (tuples), not a dict; "
                                         "e.g. {a for a in selections if locally_optimal(a)}.")
    _fails(check({(0, 1.5)}, data), "each token index must be an integer.")
    _fails(check(3, data), "answer must be a collection of selections, each a tuple of 2 token "
                           "indices, e.g. {(0, 0)}.")
    assert check(np.array(sorted(truth)).ravel(), data)  # a flat array of n-tuples
    one = al.random_data(n=1, T=3, d=2, seed=0)
    lib = al.enumerate_selections(one, param="p", W=torch.eye(2, dtype=torch.float64))
    t1 = {a[0] for a, ok in zip(lib.alpha.tolist(), lib.locally_optimal.tolist()) if ok}
    assert check(t1, one)  # n = 1: plain token indices
    # min_norm_point with its own right-hand side b, and its shape check
    np.testing.assert_allclose(la.min_norm_point([[2.0, 0.0]], [3.0]), [1.5, 0.0])
    with pytest.raises(ValueError, match="^" + re.escape("b must have shape (1,), got (2,)")
                       + "$"):
        la.min_norm_point([[2.0, 0.0]], [1.0, 1.0])
    # a key matrix other than the identity changes which selections are locally optimal
    W = np.array([[1.0, 0.0], [0.0, 0.0]])  # rank 1: keys on a line, fewer feasible
    libW = al.enumerate_selections(data, param="p", W=torch.as_tensor(W))
    tW = {tuple(a) for a, ok in zip(libW.alpha.tolist(), libW.locally_optimal.tolist()) if ok}
    X, Y, v = data.X.numpy(), data.Y.numpy(), data.v.numpy()
    mine = {a for a in itertools.product(range(3), repeat=2)
            if la.locally_optimal_oracle(X.astype(np.float32), Y, v, a, W)}
    assert mine == tW and tW != truth
    assert check(tW, data, W=W)


def test_joint_risk_oracle_from_its_definition_and_more_forms(inst):
    import math
    data, truth = inst
    assert check(torch.tensor(np.array(sorted(truth)).ravel()), data)  # a flat tensor
    with pytest.raises(ValueError, match="T\\^n = 4097 selections"):
        check(None, al.random_data(n=1, T=4097, d=2, seed=0))
    d4 = al.random_data(n=3, T=4, d=3, seed=1)  # T != d
    X, Y = d4.X.numpy(), d4.Y.numpy()
    X[0] *= 1e-4  # sample 0's logits ~1 beside the others' ~1e4 (p below)
    g = np.random.default_rng(0)
    V, P = g.standard_normal((2, 3)), 4000 * g.standard_normal((2, 3))

    def loop(v, p):
        total = 0.0
        for i in range(3):
            a = [X[i, t] @ p for t in range(4)]
            e = [math.exp(x - max(a)) for x in a]
            f = sum(e[t] / sum(e) * (X[i, t] @ v) for t in range(4))
            total += np.logaddexp(0.0, -Y[i] * f)
        return total / 3

    # float32 data is computed in float64: the same as its values cast first
    f32 = [a.astype(np.float32) for a in (X, Y, V, P / 4000)]
    W32 = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.25], [0.1, 0.0, 1.0]], dtype=np.float32)
    r32 = la.joint_risk_oracle(*f32, W=W32)
    r64 = la.joint_risk_oracle(*(a.astype(float) for a in f32), W=W32.astype(float))
    assert r32.dtype == np.float64 and np.array_equal(r32, r64)
    r = la.joint_risk_oracle(X, Y, V, P)
    assert r.shape == (2,)
    assert np.isfinite(r).all()
    for b in range(2):
        assert r[b] == pytest.approx(loop(V[b], P[b]), rel=1e-10)


def test_joint_step_generic_message_names_the_stacked_pair_and_counts_entries():
    from test_check_local_answers import _autograd_step

    nt = al.examples.joint_example(tight=False).data
    F64 = torch.float64
    v0, p0, lr = torch.tensor([-1.0, 0.0], dtype=F64), torch.tensor([0.0, -1.0], dtype=F64), 0.1
    v1, p1 = _autograd_step(nt, v0, p0, lr)
    off = p1.clone()
    off[0] += 0.5  # one entry off, no known mistake
    fb = al.check.check_joint_step((v1, off), v0, p0, nt, lr)
    assert (fb.ok, fb.title, fb.details) == (False, JTITLE, {"entries_off": 1})
    assert fb.message.startswith(
        f"1 of 4 entries of (v_next, p_next) stacked are off; the farthest is entry (2, 1) "
        f"(Python index [1, 0]) (yours {float(off[0]):.6g})."), fb.message


def test_one_based_diagnosis_when_the_truth_never_uses_the_last_token():
    data = al.random_data(n=2, T=3, d=2, seed=3)
    lib = al.enumerate_selections(data, param="p", W=torch.eye(2, dtype=torch.float64))
    truth = {tuple(a) for a, ok in zip(lib.alpha.tolist(), lib.locally_optimal.tolist()) if ok}
    assert truth and max(max(a) for a in truth) < 2  # shifted by one, every index stays in 0..2
    _fails(check({tuple(u + 1 for u in a) for a in truth}, data),
           "your token indices look 1-based: count tokens from 0, as Python does (0..2); the "
           "prose's x_1 is token 0.")


def test_oracles_tolerances_on_hand_solved_instances():
    # n = 1, W = diag(1, 0): keys are the first coordinate, scores (v = e_2) the second.
    # x_a = (10, 0); rows k_a - k_t = 1, 1 + eps, 10 - c: p = (1, 0), margins 1, 1 + eps, 10 - c
    W, v, Y = np.diag([1.0, 0.0]), np.array([0.0, 1.0]), np.array([1.0])

    def verdict(eps, c):
        X = np.array([[[10.0, 0.0], [9.0, -1.0], [9.0 - eps, 1.0], [c, -1.0]]])
        return la.locally_optimal_oracle(X, Y, v, (0,), W)

    # the largest margin M = 10: tolerance 1e-6 M = 1e-5, so 1 + 5e-6 is a support token
    # scoring above the selected one (1 > 0): not locally optimal
    assert verdict(5e-6, 0.0) is False
    # M = 1.5: tolerance 1.5e-6; 1 + 1.8e-6 is not a support token: locally optimal
    assert verdict(1.8e-6, 8.5) is True
    assert verdict(1.2e-6, 8.5) is False
    # a support token scoring exactly as high as the selected one breaks strictness
    X = np.array([[[1.0, 0.0], [0.0, 1.0]]])  # row (1, -1): p = (1/2, -1/2), margin 1
    assert la.locally_optimal_oracle(X, Y, np.array([1.0, 1.0]), (0,)) is False
    assert la.locally_optimal_oracle(X, Y, np.array([1.0, 0.999]), (0,)) is True


def test_oracles_compute_in_float64():
    # float32 data is read as float64: x_a . v = 1 + 2^-25 rounds to 1 in float32, a tie with
    # the support token's score 1 that float64 does not have (the gap 2^-25 >> 1e-10)
    X = np.array([[[1.0, 2.0**-25], [1.0, 0.0]]], dtype=np.float32)  # row (0, 2^-25): active
    v, Y = np.ones(2, dtype=np.float32), np.ones(1, dtype=np.float32)
    assert la.locally_optimal_oracle(X, Y, v, (0,)) is True
    assert la.locally_optimal_oracle(X, Y, -v, (0,)) is False
    # extended precision is rounded to float64 first
    L = np.longdouble
    # W's entry 1 + 2^-60 is 1 in float64: W = all ones gives both tokens the key
    # (2^40, 2^40), the constraint 0 >= 1 is infeasible (in long double the keys differ by 2^-20)
    X = np.array([[[2.0**40, 0.0], [0.0, 2.0**40]]])
    WL = np.array([[1, L(1) + L(2) ** -60], [1, 1]], dtype=L)
    assert la.locally_optimal_oracle(X, Y, np.array([1.0, 0.0]), (0,), WL) is False
    for A, b in ((np.array([[2.0, 0.0]], dtype=L), None), ([[2.0, 0.0]], np.array([3.0], L))):
        w = la.min_norm_point(A, b)
        assert w.dtype == np.float64
        np.testing.assert_allclose(w, [0.5 if b is None else 1.5, 0.0], rtol=1e-15)
    d4 = al.random_data(n=2, T=3, d=2, seed=1)
    X, Y = d4.X.numpy(), d4.Y.numpy()
    v, p, W = np.array([0.5, -1.0]), np.array([1.0, 2.0]), np.array([[1.0, 0.5], [0.0, 2.0]])
    r = la.joint_risk_oracle(X, Y, v, p, W)
    for args in ((X.astype(L), Y, v, p, W), (X, Y, v, p, W.astype(L))):
        rl = la.joint_risk_oracle(*args)
        assert rl.dtype == np.float64 and rl == r
    # unbatched: one number, from the definition (a loop)
    s = [np.exp(X[i] @ W @ p - (X[i] @ W @ p).max()) for i in range(2)]
    f = [s[i] / s[i].sum() @ X[i] @ v for i in range(2)]
    assert r.shape == () and r == pytest.approx(np.mean(np.logaddexp(0.0, -Y * f)), rel=1e-12)


def test_min_norm_point_round_off_guard_and_signs():
    # A w >= b with b < 0: w = 0 is feasible and of norm 0
    np.testing.assert_array_equal(la.min_norm_point([[1.0, 0.0]], [-3.0]), [0.0, 0.0])
    # m = 1 row, d = 3 (more unknowns than rows + 1): (1/2, 0, 0)
    np.testing.assert_allclose(la.min_norm_point([[2.0, 0.0, 0.0]]), [0.5, 0.0, 0.0])
    # w_1 >= 1, -w_1 + delta w_2 >= 1: by hand w = (1, 2 / delta), |w| grows as delta -> 0
    for delta in (1e-1, 1e-2, 1e-3, 1e-4):
        A = np.array([[1.0, 0.0], [-1.0, delta]])
        np.testing.assert_allclose(la.min_norm_point(A), [1.0, 2 / delta], rtol=1e-6)
    # whatever is returned satisfies A w >= 1 up to the round-off allowance; at delta = 1e-9
    # nnls's point violates a constraint by ~1.5, so the guard answers None
    for delta in (1e-5, 1e-6, 1e-7, 1e-8, 1e-9):
        A = np.array([[1.0, 0.0], [-1.0, delta]])
        w = la.min_norm_point(A)
        assert w is None or (A @ w - 1).min() >= -1e-7 * (1 + np.abs(A).max() * np.abs(w).max())
    assert la.min_norm_point(np.array([[1.0, 0.0], [-1.0, 1e-9]])) is None
