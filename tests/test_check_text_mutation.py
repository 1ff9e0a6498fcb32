"""attnlib.check.text_answers: every branch, tolerance and message (mutation testing, issue 12).

The oracle here is torch, batched (the module computes in NumPy, one sentence at a time): the
statistics, the values of the diagnosed mistakes and the float32 ties, each from its
definition.
"""

import math
import re

import numpy as np
import pytest
import torch
from test_check_text_answers import _problem as _answers_problem

from attnlib.check import check_planted_attention as check
from attnlib.check.text_answers import planted_attention_oracle as oracle

TRANSPOSED = ("Your W is transposed: the logit of token t is x_tᵀ W z_i, keys on the left of W, "
              "the query on the right.")
ONE_BASED = ("Your positions look shifted by one: relevant[i] is already a 0-based Python index "
             "of the planted word, use it as it is.")
SUMMED = ("You summed over the sentences: the statistic is a mean, so divide by the number of "
          "sentences N.")
RAW = ("Your attention is not normalised: s_i = exp(a_i) / Σ_t exp(a_it), the softmax divides "
       "by the sum over the tokens.")
BEST = ("This is the attention on each sentence's most attended token, not on its planted word "
        "r_i.")


def _problem(seed=0, N=30, T=6, d=5, scale=2.0):
    """test_check_text_answers' instance, with a planted word at position 0 (the one-based
    mistake then reads position -1)."""
    W, X, z, r = _answers_problem(seed, N, T, d, scale)
    r[0] = 0
    return W, X, z, r


def _torch_oracle(W, X, z, r):
    rows, N = torch.arange(len(r)), len(r)
    a = torch.einsum("ntd,de,ne->nt", X, W, z)
    aT = torch.einsum("ntd,ed,ne->nt", X, W, z)
    s, sT = torch.softmax(a, -1), torch.softmax(aT, -1)
    top2 = a.topk(2, -1).values
    ties = int((top2[:, 0] - top2[:, 1] <= 1e-5 * (1 + a.abs().amax(-1))).sum())
    return dict(
        mass=float(s[rows, r].mean()), hit=float((s.argmax(-1) == r).double().mean()),
        ties=ties, N=N,
        mistakes_mass={TRANSPOSED: float(sT[rows, r].mean()),
                       ONE_BASED: float(s[rows, r - 1].mean()),
                       SUMMED: float(s[rows, r].sum()),
                       RAW: float(torch.exp(a[rows, r].clamp(max=700.0)).mean()),
                       BEST: float(s.amax(-1).mean())},
        mistakes_hit={TRANSPOSED: float((sT.argmax(-1) == r).double().mean()),
                      ONE_BASED: float((s.argmax(-1) == r - 1).double().mean()),
                      SUMMED: float((s.argmax(-1) == r).double().sum())})


def test_the_oracle_and_its_mistakes_from_their_definitions():
    W, X, z, r = _problem()
    o, t = oracle(W, X, z, r), _torch_oracle(W, X, z, r)
    assert o.keys() == t.keys() and (o["N"], o["ties"]) == (t["N"], t["ties"]) == (30, 0)
    assert o["mass"] == pytest.approx(t["mass"], rel=1e-12)
    assert o["hit"] == pytest.approx(t["hit"], rel=1e-12)
    for key in ("mistakes_mass", "mistakes_hit"):
        assert list(o[key]) == list(t[key])
        for hint, value in t[key].items():
            assert o[key][hint] == pytest.approx(value, rel=1e-12), hint
    assert o["mistakes_hit"][ONE_BASED] != o["mistakes_hit"][TRANSPOSED]


def test_huge_logits_ties_and_the_float32_margin():
    W, X, z, r = _problem(1, N=4, T=3, d=2)
    X, z, W = X.clone(), z.clone(), torch.eye(2, dtype=torch.float64)
    z[:] = torch.tensor([1.0, 0.0])
    # sentence 0: logits (900, 0, -1): exp capped at 700 for the unnormalised mistake
    X[0] = torch.tensor([[900.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    r[0] = 0
    # ties: top two logits within 1e-5 (1 + max |a|) = 3e-5 here. Sentence 1: 2 and
    # 2 + 2.5e-5 (a tie); sentence 2: 2 and 2 + 3.5e-5 (no tie); sentence 3: exactly equal
    X[1] = torch.tensor([[2.0, 0.0], [2.0 + 2.5e-5, 0.0], [0.0, 0.0]])
    X[2] = torch.tensor([[2.0, 0.0], [2.0 + 3.5e-5, 0.0], [0.0, 0.0]])
    X[3] = torch.tensor([[1.0, 0.0], [1.0, 5.0], [0.5, 0.0]])
    o, t = oracle(W, X, z, r), _torch_oracle(W, X, z, r)
    assert o["ties"] == t["ties"] == 2
    assert o["mistakes_mass"][RAW] == pytest.approx(t["mistakes_mass"][RAW], rel=1e-12)
    assert math.isfinite(o["mistakes_mass"][RAW]) and o["mistakes_mass"][RAW] > 1e303
    assert o["mass"] == pytest.approx(t["mass"], rel=1e-12)


def test_arguments_are_validated_with_their_messages():
    W, X, z, r = _problem(N=4, T=3, d=2)
    bad_shapes = ((W, X[0], z), (W[:1], X, z), (W, X, z[:3]), (W, X, z[:, :1]),
                  (W[None], X, z))
    for W_, X_, z_ in bad_shapes:
        with pytest.raises(ValueError, match=re.escape(
                f"X must be (N,T,d), W (d,d) and z (N,d); got {tuple(X_.shape)}, "
                f"{tuple(W_.shape)}, {tuple(z_.shape)}")):
            oracle(W_, X_, z_, r)
    for rel in (r[:3], r.double() + 0.5, torch.tensor([0, 1, 2, 3]), torch.tensor([0, -1, 2, 0]),
                r[None]):
        with pytest.raises(ValueError, match=re.escape(
                "relevant must hold N = 4 token positions in 0..2")):
            check((0.5, 0.5), W, X, z, rel)
    assert oracle(W, X, z, r.double())["N"] == 4  # integral floats are positions
    assert oracle(W, X, z, torch.tensor([0, 1, 2, 2]))["N"] == 4  # T - 1 is a position


def test_answers_messages_details_and_tolerances():
    W, X, z, r = _problem()
    t = _torch_oracle(W, X, z, r)
    mass, hit = t["mass"], t["hit"]
    title = "attention on the planted word"
    fb = check((mass, hit), W, X, z, r)
    assert (fb.ok, fb.title, fb.details) == (True, title, {"N": 30, "ties": 0})
    assert fb.message == ("mass and hit rate match the definition, computed sentence by "
                          "sentence over 30 sentences.")
    assert check([mass * (1 + 0.5e-4), hit], W, X, z, r)  # rtol 1e-4 on the mass
    assert check([mass + 0.9e-6 - 1e-4 * mass, hit], W, X, z, r)  # atol 1e-6 on top
    fb = check((mass * (1 + 2e-4), hit), W, X, z, r)
    assert (fb.ok, fb.title, fb.details) == (False, title, {"N": 30, "ties": 0})
    assert fb.message == f"mass = {mass * (1 + 2e-4):.6g} is too large (rtol=0.0001, atol=1e-06)."
    fb = check((mass, hit - 1 / 30), W, X, z, r)
    assert fb.message == f"hit rate = {hit - 1 / 30:.6g} is too small (rtol=0, atol=0.0166667)."
    fb = check((mass * 2, hit + 2 / 30), W, X, z, r)
    assert fb.message == (f"mass = {mass * 2:.6g} is too large (rtol=0.0001, atol=1e-06). "
                          f"hit rate = {hit + 2 / 30:.6g} is too large (rtol=0, "
                          "atol=0.0166667).")
    for answer, msg in (
            (None, "stats is None: you have not answered yet (replace the stub above)."),
            (np.array([mass, hit]), "answer with the pair (mass, hit)."),
            ((mass, hit, 0.0), "answer with the pair (mass, hit)."),
            ((mass,), "answer with the pair (mass, hit)."),
            ((None, hit), "mass is None: you have not answered yet (replace the stub above)."),
            ((mass, None), "hit is None: you have not answered yet (replace the stub above)."),
            ((mass, [hit, hit]), "hit must be one number (the mean over the sentences), yours "
                                 "has shape (2,)."),
            ((torch.ones(1, 2), hit), "mass must be one number (the mean over the sentences), "
                                      "yours has shape (1, 2).")):
        fb = check(answer, W, X, z, r)
        assert (fb.ok, fb.title, fb.message, fb.details) == (False, title, msg, {})
    for i, name in enumerate(("mass", "hit")):
        answer = [mass, hit]
        answer[i] = float("nan")
        fb = check(answer, W, X, z, r)
        assert (fb.ok, fb.title) == (False, title)
        assert fb.message == (f"{name} is not finite: exp of the logits overflows. The softmax "
                              "divides exp(a_it) by Σ_t exp(a_it), after subtracting the "
                              "largest logit (torch.softmax does both).")
    fb = check(("abc", hit), W, X, z, r)
    assert fb.message.startswith("mass could not be read as an array")
    assert check((torch.tensor([mass]), np.float32(hit)), W, X, z, r)  # one number, any form


def test_each_mistake_is_named_once_or_per_number():
    W, X, z, r = _problem(3)
    t = _torch_oracle(W, X, z, r)
    mass = t["mass"]
    for hint in (TRANSPOSED, ONE_BASED, SUMMED):  # both numbers wrong the same way
        fb = check((t["mistakes_mass"][hint], t["mistakes_hit"][hint]), W, X, z, r)
        assert not fb and fb.message.count(hint) == 1 and fb.message.count("is too") == 2
        assert fb.message.index(hint) < fb.message.index("hit rate =")  # named with the mass
        assert fb.message.endswith(" (rtol=0, atol=0.0166667).")  # not after the hit rate
    fb = check((t["mistakes_mass"][RAW], t["mistakes_hit"][SUMMED]), W, X, z, r)
    assert fb.message.count(RAW) == 1 and fb.message.count(SUMMED) == 1
    fb = check((mass, t["mistakes_hit"][SUMMED]), W, X, z, r)
    assert fb.message.endswith(" " + SUMMED) and "mass" not in fb.message
