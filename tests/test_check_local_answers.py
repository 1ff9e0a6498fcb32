"""The write-it-yourself checks of chapters 3 and 4 (attnlib.check.local_answers, issue 14):
their oracles agree with the library on random cases, each diagnosed mistake is recognised,
and no feedback prints the expected value."""

import itertools
import re

import numpy as np
import pytest
import torch

import attnlib as al
from attnlib.check import local_answers as la

F64 = torch.float64


# -- chapter 3: the oracle against attnlib.optimality / attnlib.svm --------------------------
@pytest.mark.parametrize("n,T,d,seed,with_W", [(1, 3, 2, 0, False), (2, 3, 2, 1, False),
                                              (2, 3, 3, 2, True), (3, 2, 2, 3, True),
                                              (2, 4, 3, 4, False)])
def test_oracle_agrees_with_the_library(n, T, d, seed, with_W):
    data = al.random_data(n=n, T=T, d=d, seed=seed)
    W = (torch.eye(d, dtype=F64) + 0.4 * torch.randn(d, d, dtype=F64,
                                                     generator=torch.Generator().manual_seed(seed))
         if with_W else torch.eye(d, dtype=F64))
    table = al.enumerate_selections(data, param="p", W=W)
    X, Y, v = data.X.numpy(), data.Y.numpy(), data.v.numpy()
    for a, feas, lo in zip(table.alpha.tolist(), table.feasible.tolist(),
                           table.locally_optimal.tolist()):
        A, _ = la._prompt_rows(X, a, W.numpy())
        p = la.min_norm_point(A)
        assert (p is not None) == feas, a
        if feas:
            ref = al.prompt_svm(data, alpha=torch.tensor(a), W=W).numpy()
            np.testing.assert_allclose(p, ref, rtol=1e-5, atol=1e-6)
        assert la.locally_optimal_oracle(X, Y, v, a, W.numpy()) == lo, a
    assert any(table.locally_optimal.tolist())  # the cases say something
    if (n, T, d) == (2, 3, 2):
        assert not all(table.feasible.tolist())  # and some selections are infeasible


def test_min_norm_point_closed_forms():
    np.testing.assert_allclose(la.min_norm_point([[2.0, 0.0]]), [0.5, 0.0])  # one constraint
    np.testing.assert_allclose(la.min_norm_point([[1.0, 0.0], [0.0, 1.0]]), [1.0, 1.0])
    assert la.min_norm_point([[1.0, 0.0], [-1.0, 0.0]]) is None  # x >= 1 and -x >= 1
    with pytest.raises(ValueError, match="A must"):
        la.min_norm_point(np.zeros((0, 2)))


# -- chapter 3: the exercise's check ---------------------------------------------------------
@pytest.fixture(scope="module")
def inst():
    return al.random_data(n=2, T=3, d=2, seed=0)  # the instance of ch3-ex-locopt


def _variant(inst, **kw):
    X, Y, v = inst.X.numpy(), inst.Y.numpy(), inst.v.numpy()
    return {a for a in itertools.product(range(3), repeat=2)
            if la.locally_optimal_oracle(X, Y, v, a, **kw)}


def _no_expected(fb, truth):
    """The message names no selection of the true set that the answer lacks, and not the
    set itself."""
    text = str(fb)
    assert "{" + ", ".join(map(str, sorted(truth))) + "}" not in text


def test_local_selections_right_and_each_mistake(inst):
    truth = _variant(inst)
    lib = al.enumerate_selections(inst, param="p", W=torch.eye(2, dtype=F64))
    assert truth == {tuple(a) for a, ok in zip(lib.alpha.tolist(), lib.locally_optimal.tolist())
                     if ok}
    ok = al.check.check_local_selections(truth, inst)
    assert ok and "locally optimal" in ok.message
    assert al.check.check_local_selections(sorted(truth), inst)  # a list of tuples is fine
    assert al.check.check_local_selections(torch.tensor(sorted(truth)), inst)
    cases = {
        "infeasible": _variant(inst, feasible_only=False),
        "no token ever counted as a support token": _variant(inst, support="none"),
        "ignore the labels": _variant(inst, labels=False),
        "with every token": _variant(inst, support="all"),
        "active ones": _variant(inst, support="inactive"),
        "1-based": {tuple(u + 1 for u in a) for a in truth},
    }
    assert len({frozenset(s) for s in cases.values()} | {frozenset(truth)}) == len(cases) + 1
    for hint, wrong in cases.items():
        fb = al.check.check_local_selections(wrong, inst)
        assert not fb and hint in fb.message, (hint, fb.message)
        _no_expected(fb, truth)


def test_local_selections_generic_feedback_and_bad_input(inst):
    truth = _variant(inst)
    fb = al.check.check_local_selections(set(), inst)  # no mistake variant is empty
    assert not fb and "missing" in fb.message
    assert not any(str(a) in fb.message for a in truth)
    wrong = next(a for a in itertools.product(range(3), repeat=2) if a not in truth
                 and a in _variant(inst, support="none"))
    fb = al.check.check_local_selections(truth | {wrong}, inst)
    assert not fb and "missed one" in fb.message and "1 with a feasible Att-SVM" in fb.message
    assert str(wrong) not in fb.message  # a count and a kind, never the selection itself
    _no_expected(fb, truth)
    for bad, what in [(None, "not answered"), (3, "collection"), ({(0,)}, "2 token"),
                      ({(0, 1.5)}, "integer"), ({(0, -1)}, "0..2"), ({(0, 1): True}, "dict")]:
        fb = al.check.check_local_selections(bad, inst)
        assert not fb and what in fb.message, (bad, fb.message)
    with pytest.raises(ValueError, match="head v"):
        al.check.check_local_selections(truth, inst.with_(v=None))
    with pytest.raises(ValueError, match="W must"):
        al.check.check_local_selections(truth, inst, W=torch.eye(3))


# -- chapter 4: one joint normalised GD step -------------------------------------------------
def _autograd_step(data, v, p, lr, *, normalise="own", softmax_dim=-1, labels=True,
                   reduce="mean"):
    """The step written as a learner would (torch autograd)."""
    vr, pr = v.clone().requires_grad_(True), p.clone().requires_grad_(True)
    s = torch.softmax(data.X @ pr, softmax_dim)
    f = torch.einsum("it,itd,d->i", s, data.X, vr)
    y = data.Y if labels else torch.ones_like(data.Y)
    getattr(torch.nn.functional.softplus(-y * f), reduce)().backward()
    gv, gp = vr.grad, pr.grad
    if normalise == "own":
        return v - lr * gv / gv.norm(), p - lr * gp / gp.norm()
    if normalise == "joint":
        b = torch.cat([gv, gp]).norm()
        return v - lr * gv / b, p - lr * gp / b
    return v - lr * gv, p - lr * gp


def test_joint_step_oracle_agrees_with_the_library():
    """attnlib's own joint training (param "p+v", one normalised step) passes the check, on
    the chapter's example and on random instances with a non-identity W."""
    ex = al.examples.joint_example(tight=False)
    r = al.train(ex.data, param="p+v", lr=0.1, steps=1, normalized=True, init=dict(ex.init))
    assert al.check.check_joint_step((r.v, r.p), ex.init["v"], ex.init["p"], ex.data, 0.1)
    for seed in range(3):
        data = al.random_data(n=3, T=4, d=3, seed=seed)
        g = torch.Generator().manual_seed(seed)
        W = torch.eye(3, dtype=F64) + 0.3 * torch.randn(3, 3, dtype=F64, generator=g)
        v0, p0 = torch.randn(3, dtype=F64, generator=g), torch.randn(3, dtype=F64, generator=g)
        r = al.train(data, param="p+v", lr=0.2, steps=1, normalized=True,
                     init={"W": W, "v": v0, "p": p0})
        assert al.check.check_joint_step((r.v, r.p), v0, p0, data, 0.2, W=W)
        other = al.train(data, param="p+v", lr=0.2, steps=2, normalized=True,
                         init={"W": W, "v": v0, "p": p0})
        assert not al.check.check_joint_step((other.v, other.p), v0, p0, data, 0.2, W=W)


def _entries(vp):
    return {f"{float(x):.6g}" for t in vp for x in torch.as_tensor(t).reshape(-1)}


def test_joint_step_right_and_each_mistake():
    nt = al.examples.joint_example(tight=False).data
    v0, p0, lr = torch.tensor([-1.0, 0.0], dtype=F64), torch.tensor([0.0, -1.0], dtype=F64), 0.1
    right = _autograd_step(nt, v0, p0, lr)
    assert al.check.check_joint_step(right, v0, p0, nt, lr)
    assert al.check.check_joint_step([right[0].tolist(), right[1].tolist()], v0, p0, nt, lr)
    # a sum instead of the mean gives the same normalised step: not a mistake
    assert al.check.check_joint_step(_autograd_step(nt, v0, p0, lr, reduce="sum"), v0, p0, nt,
                                     lr)
    vr = v0.clone().requires_grad_(True)
    s = torch.softmax(nt.X @ p0, -1)
    torch.nn.functional.softplus(-nt.Y * torch.einsum("it,itd,d->i", s, nt.X, vr)).mean() \
        .backward()
    v1 = v0 - lr * vr.grad / vr.grad.norm()
    seq = (v1, _autograd_step(nt, v1, p0, lr)[1])  # the p step at the updated v
    cases = {
        "moved up": (2 * v0 - right[0], 2 * p0 - right[1]),
        "not normalised": _autograd_step(nt, v0, p0, lr, normalise=None),
        "one norm": _autograd_step(nt, v0, p0, lr, normalise="joint"),
        "updated v": seq,
        "order (p, v)": right[::-1],
        "ignores the labels": _autograd_step(nt, v0, p0, lr, labels=False),
        "over the samples": _autograd_step(nt, v0, p0, lr, softmax_dim=0),
    }
    shown = _entries(right)
    for hint, wrong in cases.items():
        fb = al.check.check_joint_step(wrong, v0, p0, nt, lr)
        assert not fb and hint in fb.message, (hint, fb.message)
        numbers = set(re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", fb.message))
        leaked = (numbers & shown) - _entries(wrong)
        assert not leaked, (hint, leaked)  # never an expected entry
    for bad, what in [(None, "not answered"), (right[0], "pair"), ((right[0], None), "None"),
                      ((right[0], torch.zeros(3)), "d = 2")]:
        fb = al.check.check_joint_step(bad, v0, p0, nt, lr)
        assert not fb and what in fb.message, (bad, fb.message)
    with pytest.raises(ValueError, match="lr"):
        al.check.check_joint_step(right, v0, p0, nt, 0.0)
    with pytest.raises(ValueError, match="shape"):
        al.check.check_joint_step(right, torch.zeros(3), p0, nt, lr)


def test_joint_step_v_step_at_updated_p_and_stacked_pair():
    """Review R1: the v step taken at the updated p (the mirror image of a recognised mistake)
    got no diagnosis, and the pair stacked as a (2, d) tensor was refused."""
    nt = al.examples.joint_example(tight=False).data
    v0, p0, lr = torch.tensor([-1.0, 0.0], dtype=F64), torch.tensor([0.0, -1.0], dtype=F64), 0.1
    right = _autograd_step(nt, v0, p0, lr)
    p1 = right[1]
    seq = (_autograd_step(nt, v0, p1, lr)[0], p1)  # the v step at the updated p
    fb = al.check.check_joint_step(seq, v0, p0, nt, lr)
    assert not fb and "updated p" in fb.message, fb.message
    assert al.check.check_joint_step(torch.stack(right), v0, p0, nt, lr)
    assert al.check.check_joint_step(torch.stack(right).numpy(), v0, p0, nt, lr)
