"""attnlib.check.local_answers: the write-it-yourself checks of chapters 3 and 4.

Chapter 3: the truth comes from attnlib.enumerate_selections (cvxpy SVMs), the check's own
least-distance oracle is compared with it and with hand-solved instances, and the mistaken
sets are the oracle's documented variants (the one that ignores the labels is the library's
set with every label +1). Chapter 4: the right step is written as a learner
would (torch autograd), the mistakes likewise. Each answer passes in any layout, each
mistake fails with a message that names it and carries its counts, never naming a selection
or an entry of the expected answer.
"""

import itertools
import math
import re

import numpy as np
import pytest
import torch
from check_helpers import assert_no_leak

import attnlib as al
from attnlib.check import check_joint_step, check_local_selections
from attnlib.check import local_answers as la

F64 = torch.float64
TITLE, JTITLE = "locally optimal selections (by hand)", "(v, p) after one joint normalised GD step"


def failed(fb, title, *facts):
    """A failed verdict: its title, a sentence, and each fact in its message."""
    assert not fb and fb.title == title and fb.message.endswith((".", "?")), fb
    assert all(f in fb.message for f in facts), (facts, fb.message)


# ---------------------------------------------------------------- chapter 3: the oracles
@pytest.mark.parametrize("n,T,d,seed,with_W", [(1, 3, 2, 0, False), (2, 3, 2, 1, False),
                                              (2, 3, 3, 2, True), (3, 2, 2, 3, True),
                                              (2, 4, 3, 4, False)])
def test_oracle_agrees_with_the_library(n, T, d, seed, with_W):
    data = al.random_data(n=n, T=T, d=d, seed=seed)
    g = torch.Generator().manual_seed(seed)
    W = torch.eye(d, dtype=F64) + 0.4 * with_W * torch.randn(d, d, dtype=F64, generator=g)
    table = al.enumerate_selections(data, param="p", W=W)
    X, Y, v = data.X.numpy(), data.Y.numpy(), data.v.numpy()
    for a, feas, lo in zip(table.alpha.tolist(), table.feasible.tolist(),
                           table.locally_optimal.tolist()):
        p = la.min_norm_point(la._prompt_rows(X, a, W.numpy())[0])
        assert (p is not None) == feas, a
        if feas:
            ref = al.prompt_svm(data, alpha=torch.tensor(a), W=W).numpy()
            np.testing.assert_allclose(p, ref, rtol=1e-5, atol=1e-6)
        assert la.locally_optimal_oracle(X, Y, v, a, W.numpy()) == lo, a
    assert any(table.locally_optimal.tolist())  # the cases say something
    assert (n, T, d) != (2, 3, 2) or not all(table.feasible.tolist())  # some infeasible


def test_min_norm_point_on_hand_solved_systems():
    """Closed forms: one row a: a / |a|²; A w ≥ b with b < 0: 0; w_1 ≥ 1 and −w_1 + δ w_2 ≥ 1:
    (1, 2/δ); x ≥ 1 and −x ≥ 1: None. Near-infeasible systems (δ → 0) give a point that
    satisfies A w ≥ 1 up to round-off, or None. Extended precision is read as float64."""
    L = np.longdouble
    for A, b, w in (([[2.0, 0.0]], None, [0.5, 0.0]), ([[2.0, 0.0]], [3.0], [1.5, 0.0]),
                    ([[2.0, 0.0, 0.0]], None, [0.5, 0, 0]), ([[1.0, 0], [0, 1.0]], None, [1, 1]),
                    (np.array([[2.0, 0.0]], dtype=L), None, [0.5, 0]),
                    ([[2.0, 0.0]], np.array([3.0], L), [1.5, 0])):
        got = la.min_norm_point(A, b)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, w, rtol=1e-15)
    np.testing.assert_array_equal(la.min_norm_point([[1.0, 0.0]], [-3.0]), [0.0, 0.0])
    assert la.min_norm_point([[1.0, 0.0], [-1.0, 0.0]]) is None
    for delta in (1e-1, 1e-2, 1e-3, 1e-4):
        np.testing.assert_allclose(la.min_norm_point([[1.0, 0.0], [-1.0, delta]]),
                                   [1.0, 2 / delta], rtol=1e-6)
    for delta in (1e-5, 1e-6, 1e-7, 1e-8, 1e-9):
        A = np.array([[1.0, 0.0], [-1.0, delta]])
        w = la.min_norm_point(A)
        assert w is None or (A @ w - 1).min() >= -1e-7 * (1 + np.abs(A).max() * np.abs(w).max())
    assert la.min_norm_point([[1.0, 0.0], [-1.0, 1e-9]]) is None  # nnls's point violates ~1.5
    with pytest.raises(ValueError, match=r"A must be a non-empty matrix \(m, d\)"):
        la.min_norm_point(np.zeros((0, 2)))
    with pytest.raises(ValueError, match=re.escape("b must have shape (1,), got (2,)")):
        la.min_norm_point([[2.0, 0.0]], [1.0, 1.0])


def test_locally_optimal_oracle_tolerances_on_hand_solved_instances():
    """n = 1, W = diag(1, 0), v = e_2: keys are the first coordinate, scores the second.
    x_a = (10, 0); rows k_a − k_t = 1, 1 + eps, 10 − c: p = (1, 0), margins 1, 1 + eps,
    10 − c. A margin within 1e-6 max(1, max margin) of 1 is a support token; a support token
    scoring as high as the selected one (tokens 1 and 2 score ±1 > 0) breaks optimality."""
    W, v, Y = np.diag([1.0, 0.0]), np.array([0.0, 1.0]), np.array([1.0])

    def verdict(eps, c):
        X = np.array([[[10.0, 0.0], [9.0, -1.0], [9.0 - eps, 1.0], [c, -1.0]]])
        return la.locally_optimal_oracle(X, Y, v, (0,), W)

    assert verdict(5e-6, 0.0) is False  # max margin 10: 1 + 5e-6 is support
    assert verdict(1.8e-6, 8.5) is True  # max margin 1.5: 1 + 1.8e-6 is not
    assert verdict(1.2e-6, 8.5) is False
    X = np.array([[[1.0, 0.0], [0.0, 1.0]]])  # row (1, −1): p = (1/2, −1/2), margin 1
    assert la.locally_optimal_oracle(X, Y, np.array([1.0, 1.0]), (0,)) is False  # a tie
    assert la.locally_optimal_oracle(X, Y, np.array([1.0, 0.999]), (0,)) is True
    # float32 data read as float64: 1 + 2^-25 is 1 in float32, a tie float64 does not have
    X = np.array([[[1.0, 2.0**-25], [1.0, 0.0]]], dtype=np.float32)
    v, Y = np.ones(2, dtype=np.float32), np.ones(1, dtype=np.float32)
    assert la.locally_optimal_oracle(X, Y, v, (0,)) is True
    assert la.locally_optimal_oracle(X, Y, -v, (0,)) is False
    # W's entry 1 + 2^-60 is 1 in float64: both keys (2^40, 2^40), the SVM 0 ≥ 1 infeasible
    WL = np.array([[1, np.longdouble(1) + np.longdouble(2) ** -60], [1, 1]], dtype=np.longdouble)
    X = np.array([[[2.0**40, 0.0], [0.0, 2.0**40]]])
    assert la.locally_optimal_oracle(X, Y, np.array([1.0, 0.0]), (0,), WL) is False


# ------------------------------------------------------------- chapter 3: the exercise check
def library_truth(data, W=None):
    W = torch.eye(data.X.shape[-1], dtype=F64) if W is None else torch.as_tensor(W)
    lib = al.enumerate_selections(data, param="p", W=W)
    return {tuple(a) for a, ok in zip(lib.alpha.tolist(), lib.locally_optimal.tolist()) if ok}


@pytest.fixture(scope="module")
def inst():
    data = al.random_data(n=2, T=3, d=2, seed=0)  # the instance of ch3-ex-locopt
    return data, library_truth(data)


def variant(data, **kw):
    X, Y, v = data.X.numpy(), data.Y.numpy(), data.v.numpy()
    n, T, _ = X.shape
    return {a for a in itertools.product(range(T), repeat=n)
            if la.locally_optimal_oracle(X, Y, v, a, **kw)}


def never_names(fb, n=2, T=3):
    """No selection (a tuple of n token indices, 0- or 1-based) is named in the message."""
    for a in itertools.product(range(T + 1), repeat=n):
        assert str(a) not in fb.message, (a, fb.message)


def test_local_selections_pass_in_any_layout(inst):
    data, truth = inst
    shown = "{" + ", ".join(map(str, sorted(truth))) + "}"
    flat = np.array(sorted(truth)).ravel()
    for answer, W in ((truth, None), (sorted(truth), np.eye(2)), (torch.tensor(flat), None),
                      (torch.tensor(sorted(truth)), torch.eye(2)), (flat, 2 * np.eye(2))):
        fb = check_local_selections(answer, data, W=W)  # 2 I scales every key: the same set
        assert fb and fb.title == TITLE and fb.details == {"n_locally_optimal": len(truth)}
        assert f"the {len(truth)} locally optimal selections among the 9: {shown}" in fb.message
    one = al.random_data(n=1, T=3, d=2, seed=0)  # n = 1: plain token indices
    assert check_local_selections({a for (a,) in library_truth(one)}, one)
    W = np.array([[1.0, 0.0], [0.0, 0.0]])  # rank 1: keys on a line, fewer feasible
    tW = library_truth(data, W)
    assert tW != truth and check_local_selections(tW, data, W=W)
    X, Y, v = data.X.numpy().astype(np.float32), data.Y.numpy(), data.v.numpy()
    assert tW == {a for a in itertools.product(range(3), repeat=2)
                  if la.locally_optimal_oracle(X, Y, v, a, W)}


MISTAKES = {"selections whose Att-SVM is infeasible": dict(feasible_only=False),
            "no token ever counted as a support token": dict(support="none"),
            "ignore the labels": dict(labels=False), "with every token": dict(support="all"),
            "active ones, margin exactly 1": dict(support="inactive")}


def test_local_selections_name_each_mistake(inst):
    data, truth = inst
    variants = {hint: variant(data, **kw) for hint, kw in MISTAKES.items()}
    unlabelled = library_truth(data.with_(Y=torch.ones_like(data.Y)))  # by cvxpy, not the oracle
    assert variants["ignore the labels"] == unlabelled
    variants["ignore the labels"] = unlabelled
    assert len({frozenset(s) for s in variants.values()} | {frozenset(truth)}) == len(MISTAKES) + 1
    for hint, wrong in variants.items():
        fb = check_local_selections(wrong, data)
        failed(fb, TITLE, hint)
        never_names(fb)


@pytest.mark.parametrize("seed", [0, 3])  # seed 3: the truth never selects token 2
def test_local_selections_name_one_based_indices(seed):
    data = al.random_data(n=2, T=3, d=2, seed=seed)
    truth = library_truth(data)
    fb = check_local_selections({tuple(u + 1 for u in a) for a in truth}, data)
    failed(fb, TITLE, "1-based", "(0..2)")
    never_names(fb)


def test_local_selections_count_what_is_wrong_by_kind(inst):
    """Extra selections are counted by kind (an infeasible Att-SVM, or a feasible one beaten
    by a support token), missing ones by number; none is named."""
    data, truth = inst
    feasible = variant(data, support="none")
    beaten = sorted(feasible - truth)
    infeasible = sorted(set(itertools.product(range(3), repeat=2)) - feasible)
    assert beaten and len(infeasible) >= 2
    k = len(truth)
    fb = check_local_selections(truth | {beaten[0]}, data)
    failed(fb, TITLE, f"1 of your {k + 1} selections is not locally optimal",
           "1 with a feasible Att-SVM but a support token", "it missed one", "tolerance")
    never_names(fb)
    assert "missing" not in fb.message and fb.details == {"wrong": 1, "missing": 0}
    fb = check_local_selections(set(infeasible[:2]), data)
    failed(fb, TITLE, "2 of your 2 selections are not locally optimal",
           "2 with an infeasible Att-SVM", f"{k} locally optimal selections are missing")
    never_names(fb)
    assert "missed one" not in fb.message and fb.details == {"wrong": 2, "missing": k}
    fb = check_local_selections({*infeasible[:1], *beaten[:1], *sorted(truth)[1:]}, data)
    failed(fb, TITLE, "1 with an infeasible Att-SVM and 1 with a feasible",
           "1 locally optimal selection is missing")
    never_names(fb)
    fb = check_local_selections(set(), data)
    failed(fb, TITLE, f"{k} locally optimal selections are missing")
    assert fb.details == {"wrong": 0, "missing": k}
    never_names(fb)


@pytest.mark.parametrize("answer,facts", [
    (None, ["answer is None"]), (3, ["a collection of selections", "tuple of 2 token",
                                     "e.g. {(0, 0)}"]),
    ({(0, 1): True}, ["not a dict"]), ({(0, 1.5)}, ["must be an integer"]),
    ({(0, 1, 2)}, ["name 2 token(s)"]), ({(0,)}, ["name 2 token(s)"]),
    ({(0, 3)}, ["must lie in 0..2"]), ({(1, -1)}, ["must lie in 0..2"]),
    ({(1, 3)}, ["1-based", "(0..2)"])])  # every index in 1..T: 1-based
def test_local_selections_read_the_answer(inst, answer, facts):
    failed(check_local_selections(answer, inst[0]), TITLE, *facts)


def test_local_selections_refuse_bad_reference_data(inst):
    data, truth = inst
    with pytest.raises(ValueError, match="must carry the head v"):
        check_local_selections(truth, data.with_(v=None))
    with pytest.raises(ValueError, match=re.escape("W must have shape (d, d) = (2, 2), got "
                                                   "(3, 3)")):
        check_local_selections(truth, data, W=np.eye(3))
    for n, T in ((2, 65), (1, 4097)):  # T^n > 4096 selections; 64^2 = 4096 still enumerated
        with pytest.raises(ValueError, match=rf"enumerates T\^n = {T ** n} selections"):
            check_local_selections(None, al.random_data(n=n, T=T, d=2, seed=0))
    failed(check_local_selections(None, al.random_data(n=2, T=64, d=2, seed=0)), TITLE,
           "answer is None")


# ---------------------------------------------------- chapter 4: one joint normalised step
def autograd_step(data, v, p, lr, W=None, *, normalise="own", softmax_dim=-1, labels=True,
                  reduce="mean"):
    """The step written as a learner would (torch autograd)."""
    W = torch.eye(len(p), dtype=F64) if W is None else W
    vr, pr = v.clone().requires_grad_(True), p.clone().requires_grad_(True)
    s = torch.softmax(data.X @ W @ pr, softmax_dim)
    f = torch.einsum("it,itd,d->i", s, data.X, vr)
    y = data.Y if labels else torch.ones_like(data.Y)
    getattr(torch.nn.functional.softplus(-y * f), reduce)().backward()
    gv, gp = vr.grad, pr.grad
    b = {"own": (gv.norm(), gp.norm()), "joint": (torch.cat([gv, gp]).norm(),) * 2,
         None: (1, 1)}[normalise]
    return v - lr * gv / b[0], p - lr * gp / b[1]


def step_case(which):
    """The chapter's example (W = I), or a random instance with a key matrix W ≠ I."""
    if which == "chapter":
        return (al.examples.joint_example(tight=False).data, torch.tensor([-1.0, 0.0], dtype=F64),
                torch.tensor([0.0, -1.0], dtype=F64), 0.1, None)
    data = al.random_data(n=3, T=4, d=3, seed=1)
    g = torch.Generator().manual_seed(1)
    W = torch.eye(3, dtype=F64) + 0.3 * torch.randn(3, 3, dtype=F64, generator=g)
    return (data, torch.randn(3, dtype=F64, generator=g), torch.randn(3, dtype=F64, generator=g),
            0.2, W)


def test_joint_step_of_the_library_passes():
    """attnlib's own joint training (param "p+v", one normalised step) passes; two steps do
    not."""
    ex = al.examples.joint_example(tight=False)
    r = al.train(ex.data, param="p+v", lr=0.1, steps=1, normalized=True, init=dict(ex.init))
    assert check_joint_step((r.v, r.p), ex.init["v"], ex.init["p"], ex.data, 0.1)
    data, v0, p0, lr, W = step_case("random")
    for steps in (1, 2):
        r = al.train(data, param="p+v", lr=lr, steps=steps, normalized=True,
                     init={"W": W, "v": v0, "p": p0})
        assert bool(check_joint_step((r.v, r.p), v0, p0, data, lr, W=W)) is (steps == 1)


@pytest.mark.parametrize("which", ["chapter", "random"])
def test_joint_step_passes_in_any_layout_up_to_the_tolerance(which):
    data, v0, p0, lr, W = step_case(which)
    d = len(v0)
    right = autograd_step(data, v0, p0, lr, W)
    for answer in (right, [t.tolist() for t in right], torch.stack(right),
                   torch.stack(right).numpy(), (right[0][None], right[1][:, None]),
                   autograd_step(data, v0, p0, lr, W, reduce="sum")):  # normalised: a sum too
        fb = check_joint_step(answer, v0, p0, data, lr, W=W)
        assert fb and fb.title == JTITLE and f"all {2 * d} entries" in fb.message
    t = 1e-7 + 1e-6 * right[1].abs()  # |answer − right| <= 1e-7 + 1e-6 |right|
    assert check_joint_step((right[0], right[1] + 0.9 * t), v0, p0, data, lr, W=W)
    fb = check_joint_step((right[0], right[1] - 1.1 * t), v0, p0, data, lr, W=W)
    failed(fb, JTITLE, f"{d} of {2 * d} entries of (v_next, p_next) stacked are off")
    assert_no_leak(fb.message, right, own=(right[0], right[1] - 1.1 * t))
    assert fb.details == {"entries_off": d}
    off = right[1].clone()
    off[0] += 0.5  # one entry off, no known mistake
    fb = check_joint_step((right[0], off), v0, p0, data, lr, W=W)
    failed(fb, JTITLE, f"1 of {2 * d} entries", "entry (2, 1) (Python index [1, 0])",
           f"(yours {float(off[0]):.6g})")
    assert_no_leak(fb.message, right, own=(right[0], off))
    assert fb.details == {"entries_off": 1}
    if W is None:  # another key matrix, another step
        assert check_joint_step(right, v0, p0, data, lr, W=np.eye(2))
        assert not check_joint_step(right, v0, p0, data, lr, W=np.diag([1.0, 3.0]))


@pytest.mark.parametrize("which", ["chapter", "random"])
def test_joint_step_names_each_mistake(which):
    data, v0, p0, lr, W = step_case(which)
    right = autograd_step(data, v0, p0, lr, W)
    v1, p1 = right
    cases = {"moved up": (2 * v0 - v1, 2 * p0 - p1),
             "not normalised": autograd_step(data, v0, p0, lr, W, normalise=None),
             "one norm (of the pair)": autograd_step(data, v0, p0, lr, W, normalise="joint"),
             "p step used the updated v": (v1, autograd_step(data, v1, p0, lr, W)[1]),
             "v step used the updated p": (autograd_step(data, v0, p1, lr, W)[0], p1),
             "order (p, v)": right[::-1],
             "ignores the labels": autograd_step(data, v0, p0, lr, W, labels=False),
             "softmax runs over the samples": autograd_step(data, v0, p0, lr, W, softmax_dim=0)}
    for hint, wrong in cases.items():
        fb = check_joint_step(wrong, v0, p0, data, lr, W=W)
        failed(fb, JTITLE, hint)
        assert_no_leak(fb.message, right, own=wrong)


def test_joint_step_reads_its_arguments():
    data, v0, p0, lr, _ = step_case("chapter")
    right = autograd_step(data, v0, p0, lr)
    for bad, fact in ((None, "vp_next is None"), (right[0], "the pair (v_next, p_next)"),
                      ((*right, right[0]), "the pair"), (torch.zeros(3, 2), "the pair"),
                      ((None, right[1]), "v_next is None"), ((right[0], None), "p_next is None"),
                      ((right[0], torch.zeros(3)), "must each hold d = 2 numbers")):
        failed(check_joint_step(bad, v0, p0, data, lr), JTITLE, fact)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=f"lr must be a positive number, got {bad}"):
            check_joint_step(right, v0, p0, data, bad)
    for v_, p_, W_, shapes in ((torch.zeros(3), p0, None, "(3,), (2,), (2, 2)"),
                               (v0, torch.zeros(3), None, "(2,), (3,), (2, 2)"),
                               (v0, p0, torch.eye(3), "(2,), (2,), (3, 3)")):
        with pytest.raises(ValueError, match=re.escape(
                f"v and p must have shape (d,) = (2,) and W (d, d); got {shapes}")):
            check_joint_step(right, v_, p_, data, lr, W=W_)


def test_joint_risk_oracle_is_the_definition_even_with_huge_logits():
    """Against a loop over samples and tokens; sample 0's logits ~1 beside the others' ~1e4
    (each sample shifted by its own max); float32 and long double computed in float64."""
    data = al.random_data(n=3, T=4, d=3, seed=1)  # T != d
    X, Y = data.X.numpy(), data.Y.numpy()
    X[0] *= 1e-4
    g = np.random.default_rng(0)
    V, P = g.standard_normal((2, 3)), 4000 * g.standard_normal((2, 3))
    W = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.25], [0.1, 0.0, 1.0]])

    def loop(v, p, W=None):
        W, total = np.eye(3) if W is None else W, 0.0
        for i in range(3):
            a = [X[i, t] @ W @ p for t in range(4)]
            e = [math.exp(x - max(a)) for x in a]
            total += np.logaddexp(0.0, -Y[i] * sum(e[t] / sum(e) * (X[i, t] @ v)
                                                    for t in range(4)))
        return total / 3

    r = la.joint_risk_oracle(X, Y, V, P)
    assert r.shape == (2,) and np.isfinite(r).all()
    np.testing.assert_allclose(r, [loop(V[b], P[b]) for b in range(2)], rtol=1e-10)
    r = la.joint_risk_oracle(X, Y, V[0], P[0] / 4000, W)  # unbatched: one number
    assert r.shape == () and r == pytest.approx(loop(V[0], P[0] / 4000, W), rel=1e-12)
    f32 = [a.astype(np.float32) for a in (X, Y, V, P / 4000, W)]
    r32 = la.joint_risk_oracle(*f32[:4], W=f32[4])
    assert r32.dtype == np.float64
    assert np.array_equal(r32, la.joint_risk_oracle(*(a.astype(float) for a in f32)))
    for args in ((X.astype(np.longdouble), Y, V[0], P[0], W), (X, Y, V[0], P[0],
                                                                W.astype(np.longdouble))):
        rl = la.joint_risk_oracle(*args)
        assert rl.dtype == np.float64 and rl == la.joint_risk_oracle(X, Y, V[0], P[0], W)
