"""ch3 ex-enumerate and ch4 ex-relax are checked against independent NumPy (NNLS) oracles,
which agree with the library on random cases; each common mistake is diagnosed and no
message gives the expected answer."""

import itertools

import numpy as np
import pytest
import torch

import attnlib as al
from attnlib.check import svm_answers as sa

INST = al.random_data(n=2, T=4, d=3, seed=3)


def _truth(inst, **kw):
    X, z, Y, v = (inst.X.numpy(), inst.z.numpy(), inst.Y.numpy(), inst.v.numpy())
    sels = itertools.product(range(inst.T), repeat=inst.n)
    return {a for a in sels if sa.w_locally_optimal_oracle(X, z, Y, v, a, **kw)}


@pytest.mark.parametrize("seed", range(6))
def test_w_oracle_agrees_with_library(seed):
    inst = al.random_data(n=2, T=3, d=3, seed=seed)
    table = al.enumerate_selections(inst)
    lib = {tuple(a) for a in table.alpha[table.locally_optimal].tolist()}
    assert _truth(inst) == lib


@pytest.mark.parametrize("seed", range(6))
def test_relaxed_oracle_agrees_with_library(seed):
    data = al.random_data(n=4, T=3, d=4, seed=seed)
    alpha = al.optimal_tokens(data)
    try:
        lib = al.relaxed_prompt_svm(data, alpha=alpha)
    except al.svm.InfeasibleError:  # infeasible head SVM: the oracle must say so too
        assert sa.relaxed_prompt_oracle(data.X.numpy(), data.Y.numpy(), alpha.tolist())[0] \
            is None
        return
    p, _ = sa.relaxed_prompt_oracle(data.X.numpy(), data.Y.numpy(), alpha.tolist())
    np.testing.assert_allclose(p, lib.numpy(), atol=1e-5)
    assert sa.check_relaxed_prompt(lib, data, alpha=alpha).ok


def test_enumerate_check_does_not_call_the_library(monkeypatch):
    truth = _truth(INST)
    def boom(*a, **k):
        raise AssertionError("the check used the library")
    monkeypatch.setattr(al.optimality, "enumerate_selections", boom)
    monkeypatch.setattr(al.svm, "att_svm", boom)
    assert al.check.check_locally_optimal(truth, INST).ok


MISTAKES = [(dict(feasible_only=False), "infeasible"), (dict(support="none"), "tolerance"),
            (dict(labels=False), "labels"), (dict(support="all"), "support tokens")]


@pytest.mark.parametrize("k", range(len(MISTAKES)))
def test_enumerate_mistakes_diagnosed(k):
    kw, word = MISTAKES[k]
    for seed in range(40):  # the first instance where this mistake is told from the others
        inst = al.random_data(n=3, T=3, d=2, seed=seed)
        wrong = _truth(inst, **kw)
        if wrong != _truth(inst) and all(wrong != _truth(inst, **m) for m, _ in MISTAKES[:k]):
            break
    else:
        pytest.fail("no instance shows this mistake")
    fb = al.check.check_locally_optimal(wrong, inst)
    assert not fb.ok and word in fb.message, fb.message


def test_enumerate_feedback_never_lists_the_answer():
    truth = _truth(INST)
    one_based = {tuple(u + 1 for u in s) for s in truth}
    assert "1-based" in al.check.check_locally_optimal(one_based, INST).message
    for k in range(len(truth)):
        part = set(sorted(truth)[:k])
        fb = al.check.check_locally_optimal(part, INST)
        assert not fb.ok and f"{len(truth) - k} locally optimal" in fb.message
        for s in truth - part:
            assert str(s) not in fb.message


NT = al.examples.joint_example(tight=False).data
OPT = torch.tensor([1, 1, 1])


def test_relax_mistakes_diagnosed_without_the_answer():
    p, v = sa.relaxed_prompt_oracle(NT.X.numpy(), NT.Y.numpy(), OPT.tolist())
    p_mm, _ = sa.relaxed_prompt_oracle(NT.X.numpy(), NT.Y.numpy(), OPT.tolist(), relaxed=False)
    assert al.check.check_relaxed_prompt(torch.tensor(p), NT, alpha=OPT).ok
    cases = [(p_mm, "p^mm"), (-p, "wrong way"), (v, "v^mm"), (2 * p, "not the shortest"),
             (0.5 * p, "violates")]
    for ans, word in cases:
        fb = al.check.check_relaxed_prompt(torch.tensor(ans), NT, alpha=OPT)
        assert not fb.ok and word in fb.message, fb.message
        for num in (f"{p[0]:.4g}", f"{p[0]:.2f}"):
            assert f"({num}" not in fb.message and f"[{num}" not in fb.message
        assert "expected" not in fb.message
