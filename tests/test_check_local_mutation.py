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
    why_f = ("a support token scores at least as high as the selected token. If your test saw "
             "no such token, it missed a support token: a solver's margins equal 1 only up to "
             "round-off, so compare |margin − 1| with a tolerance")
    missing = ("At least one locally optimal selection is missing from your set: are your "
               "tolerances too strict, or the score comparison reversed?")
    a = extra_feasible[0]
    _fails(check(truth | {a}, data),
           f"1 of your {len(truth) + 1} selections is not locally optimal; for example {a}: "
           f"{why_f}.", {"wrong": 1, "missing": 0})
    b = extra_infeasible[0]
    given = {b, *extra_infeasible[1:2]}
    _fails(check(given, data),
           f"{len(given)} of your {len(given)} selections are not locally optimal; for example "
           f"{min(given)}: its Att-SVM is infeasible. {missing}",
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
