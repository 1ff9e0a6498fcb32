"""attnlib.check's messages in full, for every kind of answer: the message is what a learner
reads, so each is pinned word for word on an instance solved by hand."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from check_helpers import W_MM, X1, says, toy_data

from attnlib import check
from attnlib import data as D
from attnlib import examples as al_examples
from attnlib.check import feedback

toy = pytest.fixture(toy_data, name="toy")


def test_value_messages_and_tolerances():
    says(check.check_value(0.5, 0.5), True,
         "(value): 0.5 within tolerance (rtol=1e-06, atol=1e-09).")
    says(check.check_value([1, 2, 3], [1.0, 2.0, 3.0]), True,
         "(value): all 3 entries within tolerance (rtol=1e-06, atol=1e-09).")
    says(check.check_value(0.98, 0.9901, rtol=1e-4, name="m"), False,
         "(m): m = 0.98 is too small (rtol=0.0001, atol=1e-09).")
    # the worst entry is the one furthest OUTSIDE its tolerance, not the largest difference
    says(check.check_value([100.5, 2.0], [100.0, 1.0], rtol=0.01, atol=0.0), False,
         "(value): 1 of 2 entries of value are off; the farthest is entry (2) (Python index [1]) "
         "(yours 2).",
         entries_off=1)
    says(check.check_value(None, 1.0, name="m"), False,
         "(m): m is None: you have not answered yet (replace the stub above).")
    says(check.check_value(1 + 2j, 1.0, name="m"), False,
         "(m): m must be real, got dtype torch.complex128.")
    says(check.check_value([math.inf], [1.0], name="m"), False, "(m): m contains NaN or Inf.")
    fb = check.check_value("abc", 1.0, name="m")
    assert not fb and str(fb).startswith("✗ not yet (m): m could not be read as an array (")
    says(check.check_value([1, 2], [[1.0, 2.0, 3.0]], name="m"), False,
         "(m): m must have shape (1, 3), yours has (2,).")
    # |answer - expected| <= atol + rtol |expected|, boundaries included
    assert check.check_value(1.5, 1.0, rtol=0.0, atol=0.5)
    assert not check.check_value(1.5 + 1e-12, 1.0, rtol=0.0, atol=0.5)
    assert check.check_value(2.1, 2.0, rtol=0.06, atol=0.0)
    assert not check.check_value(2.1, 2.0, rtol=0.04, atol=0.0)
    assert not check.check_value(2.1, -2.0, rtol=0.06, atol=0.0)
    # Python floats are read in float64 (torch would read a list in float32)
    assert check.check_value([1 / 3], 1 / 3, rtol=1e-13, atol=0.0)
    assert check.check_value(1 / 3, [1 / 3], rtol=1e-13, atol=0.0)


def test_rank_messages():
    W = torch.diag(torch.tensor([5.0, 4.0, 1e-12, 1e-13, 0.0], dtype=torch.float64))
    says(check.check_rank(2, W), True,
         "(rank): W has rank 2 (singular values above 1e-06·σ₁).", rank=2)
    says(check.check_rank(2.0, W.tolist()), True,
         "(rank): W has rank 2 (singular values above 1e-06·σ₁).")
    says(check.check_rank(3, W), False,
         "(rank): your rank is too high: count only the singular values above the relative "
         "tolerance 1e-06·σ₁; the tiny ones are round-off.", direction="high")
    says(check.check_rank(1, W), False,
         "(rank): your rank is too low: count every singular value above 1e-06·σ₁ (the "
         "threshold is relative to the largest one, σ₁), not only the large ones.",
         direction="low")
    says(check.check_rank(2.5, W), False, "(rank): a rank is a whole number ≥ 0, you said 2.5.")
    says(check.check_rank("two", W), False, "(rank): r must be a number, got 'two'.")
    says(check.check_rank(None, W), False,
         "(rank): r is None: you have not answered yet (replace the stub above).")
    says(check.check_rank(3, W, rtol=1e-13), True,
         "(rank): W has rank 3 (singular values above 1e-13·σ₁).", rank=3)
    assert check.check_rank(1, [[2.0, 0.0], [0.0, 2e-6]])  # 2e-6 = 1e-6 σ₁: not above
    with pytest.raises(ValueError, match=r"W must be a matrix, got shape \(3,\)"):
        check.check_rank(1, [1.0, 2.0, 3.0])


def test_md_step_messages():
    # lp = 3, W = (1, -2), G = (1, 1), lr = 1: dual (1, -4) - (1, 1) = (0, -5) -> (0, -sqrt 5)
    W = torch.tensor([[1.0, -2.0]], dtype=torch.float64)
    G = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    t = "(ℓ3 mirror-descent step): "
    says(check.check_md_step([[0.0, -math.sqrt(5)]], W, G, 1.0, 3), True,
         t + "W⁺ matches ∇ψ(W⁺) = ∇ψ(W) − η∇L to 0.0e+00.", max_error=0.0)
    off = t + ("1 of 2 entries are off; the largest error is at entry (1, 2) (Python index "
               "[0, 1]) (yours ")
    by_hand = (" Recompute that entry by hand: map W to the dual, take the step there, and map "
               "back.")
    says(check.check_md_step([[0.0, -2.2]], W, G, 1.0, 3), False,
         off + "-2.2)." + by_hand, entry=(0, 1))
    says(check.check_md_step([[0.0, -2.2]], W, G, 1.0, torch.tensor(3.0)), False,
         "(mirror step): 1 of 2 entries are off; the largest error is at entry (1, 2) "
         "(Python index [0, 1]) (yours -2.2)." + by_hand)
    says(check.check_md_step(W - G, W, G, 1.0, 3), False,
         off + "-3). This is a plain gradient step W − η∇L; mirror descent "
         "steps in the dual: map W by sign(W)|W|^(p−1), subtract η∇L, and map back by "
         "sign(·)|·|^(1/(p−1)).")
    says(check.check_md_step([[0.0, -5.0]], W, G, 1.0, 3), False,
         off + "-5). You stopped in the dual: map back with "
         "sign(·)|·|^(1/(p−1)).")
    says(check.check_md_step([[math.sqrt(2), -math.sqrt(3)]], W, G, 1.0, 3), False,
         t + "2 of 2 entries are off; the largest error is at entry (1, 1) (Python index [0, "
         "0]) (yours 1.41421). "
         "Check the sign of the gradient term: descent subtracts η∇L.",
         entry=(0, 0), max_error=pytest.approx(math.sqrt(2)))
    says(check.check_md_step(None, W, G, 1.0, 3), False,
         t + "W_next is None: you have not answered yet (replace the stub above).")
    says(check.check_md_step([[0.0]], W, G, 1.0, 3), False,
         t + "W_next must have W's shape (1, 2), yours has (1, 1).")
    # the tolerance is 1e-8 relative to the largest entry (absolute below 1)
    big = torch.tensor([[3e4, -1e4]], dtype=torch.float64)  # lp = 2: W+ = W - lr G
    assert check.check_md_step(big - G + 1e-5, big, G, 1.0, 2)
    assert not check.check_md_step(big - G + 1e-3, big, G, 1.0, 2)
    assert check.check_md_step([[0.0, -math.sqrt(5) + 2e-8]], W, G, 1.0, 3)  # 1e-8 * sqrt 5
    assert not check.check_md_step([[0.0, -math.sqrt(5) + 3e-8]], W, G, 1.0, 3)
    with pytest.raises(ValueError, match="lp must be > 1, got 1.0"):
        check.check_md_step(W, W, G, 1.0, 1)
    with pytest.raises(ValueError, match="lr must be > 0, got -1.0"):
        check.check_md_step(W, W, G, -1, 3)


def test_feedback_markdown_and_helpers():
    assert check.Feedback(True, "t", "m")._repr_markdown_() == "✓ **Correct** (t): m"
    md = check.Feedback(False, "a|b", "\\*_`[]<>#|x", strict=False)._repr_markdown_()
    assert md == "✗ **Not yet** (a\\|b): " + "".join("\\" + c for c in "\\*_`[]<>#|") + "x"
    assert repr(check.Feedback(True, "t", "m")) == "✓ correct (t): m"
    fb = feedback.fail("t", "m", a=1, b=(2, 3))
    assert not fb and fb.title == "t" and fb.message == "m" and fb.details == dict(a=1, b=(2, 3))
    r = feedback.reference([0.1, 1 / 3], "x")
    assert r.dtype == torch.float64 and r.tolist() == [0.1, 1 / 3]
    t, err = feedback.answer_tensor([1, 2], "a", dtype=None)
    assert err is None and t.dtype == torch.int64 and t.tolist() == [1, 2]
    t, err = feedback.answer_tensor(torch.tensor([1.0], requires_grad=True), "a")
    assert err is None and t.dtype == torch.float64 and not t.requires_grad
    # one_instance: the data on the CPU in float64, or a ValueError naming the problem
    one = D.random_data(2, 3, 4, seed=0, device="cpu", dtype=torch.float32)
    got = feedback.one_instance(one)
    assert got.X.dtype == torch.float64 and torch.equal(got.X, one.X.double())
    plain = SimpleNamespace(X=np.zeros((1, 2, 3)), Y=np.ones(1))  # no B, no .to(): as is
    assert feedback.one_instance(plain) is plain
    with pytest.raises(ValueError, match=r"data must hold one instance \(X of shape \(n,T,d\)\); "
                                         r"take one trial first: data.trial\(b\)"):
        feedback.one_instance(SimpleNamespace(X=np.zeros((2, 1, 2, 3)), Y=np.ones((2, 1))))
    with pytest.raises(ValueError, match="data must be an attnlib.AttentionData, got "
                                         "SimpleNamespace"):
        feedback.one_instance(SimpleNamespace(X=np.zeros((1, 2, 3))))


def test_svm_answer_messages(toy):
    # toy: alpha = 0 has W_mm = diag(1, 0) (norm 1); alpha = 1 has W z = (-1/2, 1/2)
    says(check.check_svm_direction(W_MM, toy, alpha=[0]), True,
         "(Att-SVM direction): all 2 margins positive and corr(W, W^mm) = 1.0000 ≥ 0.99 "
         "(Frobenius Att-SVM).", min_margin=1.0, constraints=2)
    says(check.check_svm_direction(W_MM, toy, alpha=[0], exact=True), True,
         "(Att-SVM solution): all 2 margin constraints hold (smallest margin 1) and the "
         "Frobenius norm 1 is the minimum.", norm=1.0)
    says(check.check_svm_direction(3.7 * W_MM, toy, alpha=[0], exact=True), False,
         "(Att-SVM solution): your W satisfies all 2 margin constraints but is not the "
         "smallest: every margin is above 1, so its Frobenius norm 3.7 can be lowered (scale"
         " it down until a margin is exactly 1).", norm=3.7)
    # within atol (relative and absolute) of the minimum norm is the minimum
    assert check.check_svm_direction(1.00005 * W_MM, toy, alpha=[0], exact=True)
    assert not check.check_svm_direction(1.0003 * W_MM, toy, alpha=[0], exact=True)
    assert check.check_svm_direction(1.0003 * W_MM, toy, alpha=[0], exact=True, atol=1e-3)
    W = torch.tensor([[1.0, 0.0], [-2.0, 0.0]], dtype=torch.float64)  # margins 3 and -1
    says(check.check_svm_direction(W, toy, alpha=[0]), False,
         "(Att-SVM direction): your W violates 1 of 2 margin constraints (x_iα_i − x_it)ᵀ W "
         "z_i > 0; the largest violation is at sample 1, token 3 (Python index [0, 2]) "
         "(margin -1; the selected token of that sample is token 1, Python index 0).",
         violations=1, constraints=2, worst=(0, 2), margin=-1.0)
    says(check.check_svm_direction(W, toy, alpha=[0], exact=True), False,
         "(Att-SVM solution): your W violates 1 of 2 margin constraints (x_iα_i − x_it)ᵀ W "
         "z_i ≥ 1; the largest violation is at sample 1, token 3 (Python index [0, 2]) "
         "(margin -1; the selected token of that sample is token 1, Python index 0).")
    half = torch.tensor([[1.0, 0.0], [0.5, 0.0]], dtype=torch.float64)  # W z = (1, .5)
    says(check.check_svm_direction(half, toy, alpha=[0]), False,
         "(Att-SVM direction): your W selects the right tokens (all 2 margins positive) but "
         "points elsewhere than the Frobenius max-margin direction: corr(W, W^mm) = 0.8944 "
         "< 0.99.", correlation=pytest.approx(2 / math.sqrt(5)), min_margin=0.5)
    assert check.check_svm_direction(half, toy, alpha=[0], min_corr=0.89)
    assert not check.check_svm_direction(half, toy, alpha=[0], min_corr=0.9)
    # exact: margins down to 1 - atol count as 1
    assert check.check_svm_direction(0.99995 * W_MM, toy, alpha=[0], exact=True)
    assert not check.check_svm_direction(0.999 * W_MM, toy, alpha=[0], exact=True)
    says(check.check_svm_direction(np.ones(3), toy, alpha=[0]), False,
         "(Att-SVM direction): W must have shape (2, 2), yours has (3,).")
    says(check.check_svm_direction(np.zeros((2, 2)), toy, alpha=[0]), False,
         "(Att-SVM direction): W is zero: it gives every token the same attention.")
    says(check.check_svm_direction(W_MM, toy, alpha=[0], norm="1.5"), True,
         "(Att-SVM direction): all 2 margins positive and corr(W, W^mm) = 1.0000 ≥ 0.99 "
         "(ℓ1.5 Att-SVM).")
    says(check.check_svm_direction(W_MM, toy, alpha=[0], norm="nuc", exact=True), True,
         "(Att-SVM solution): all 2 margin constraints hold (smallest margin 1) and the "
         "nuclear norm 1 is the minimum.")
    w1 = torch.tensor([[-0.5, 0.0], [0.5, 0.0]], dtype=torch.float64)
    says(check.check_svm_direction(w1, toy, alpha=[1], exact=True), True,
         "(Att-SVM solution): all 2 margin constraints hold (smallest margin 1) and the "
         "Frobenius norm 0.707107 is the minimum.")
    # the l_p norms differ from Frobenius: (1, 1)/2 has l1.5 norm 2^(1/1.5)/2
    lp = check.check_svm_direction(w1, toy, alpha=[1], norm=1.5, exact=True)
    assert lp and lp.details["norm"] == pytest.approx(2 ** (1 / 1.5) / 2)
    for bad in ("max", 1, None, "x"):
        with pytest.raises(ValueError, match="norm must be 'fro', 'nuc' or a number lp > 1, "
                                             f"got {bad!r}"):
            check.check_svm_direction(W_MM, toy, alpha=[0], norm=bad)
    no_z = D.AttentionData(X1, torch.tensor([1.0], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"data has no queries z \(the prompt model\): use "
                                         "check_prompt_direction"):
        check.check_svm_direction(W_MM, no_z)


def test_prompt_answer_messages():
    ex = al_examples.three_token_example("global")
    W, p_mm = ex.init["W"], ex.known["p_mm"]
    says(check.check_prompt_direction(p_mm[1], ex.data, W=W), False,
         "(p-SVM direction): your p violates 2 of 2 margin constraints (x_iα_i − x_it)ᵀ W p "
         "> 0; the largest violation is at sample 1, token 2 (Python index [0, 1]) (margin "
         "-1.1; the selected token of that sample is token 1, Python index 0).")
    says(check.check_prompt_direction(p_mm[0], ex.data, W=W, exact=True), True,
         "(p-SVM solution): all 2 margin constraints hold (smallest margin 1) and the "
         "Frobenius norm 0.995037 is the minimum.")
    # default W = identity: the p-SVM of x = (1, 0), (0, 1), (0, -1) for token 0 is (1, 0)
    one = D.AttentionData(X1, torch.tensor([1.0], dtype=torch.float64),
                          v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert check.check_prompt_direction([1.0, 0.0], one, exact=True)
    assert not check.check_prompt_direction([1.0, 0.0], one, W=2 * torch.eye(2), exact=True)


def test_selection_messages(toy):
    says(check.check_selection([0], toy), True,
         "(optimal tokens): all 1 samples pick a token of largest score.")
    says(check.check_selection(0, toy), True,
         "(optimal tokens): all 1 samples pick a token of largest score.")
    says(check.check_selection([1], toy), False,
         "(optimal tokens): 1 of 1 samples wrong; e.g. sample 1 (Python index 0): you chose "
         "token index 1 (score 0), but another token of that sample has a larger score. You "
         "picked the smallest, not the largest: use argmax (not argmin), and check the sign "
         "(the label Y_i). (If you counted from 1 instead: tokens are numbered from 0 in "
         "Python.)", wrong=[0])
    says(check.check_selection([0.5], toy), False,
         "(optimal tokens): alpha must hold integer token indices, yours has fractions.")
    says(check.check_selection([math.nan], toy), False,
         "(optimal tokens): alpha must hold integer token indices, yours has fractions.")
    assert check.check_selection([0.0], toy)
    says(check.check_selection([-1], toy), False,
         "(optimal tokens): sample 1 (Python index 0): token index -1 does not exist (tokens"
         " are 0-based, 0..2).")
    says(check.check_selection([3], toy), False,
         "(optimal tokens): sample 1 (Python index 0): token index 3 does not exist (tokens "
         "are 0-based, 0..2).")
    says(check.check_selection(None, toy), False,
         "(optimal tokens): alpha is None: you have not answered yet (replace the stub above).")
    says(check.check_selection([1], toy, W=torch.eye(2)), False,
         "(selected tokens): 1 of 1 samples wrong; e.g. sample 1 (Python index 0): you chose"
         " token index 1 (logit 0), but another token of that sample has a larger logit. You"
         " picked the smallest, not the largest: use argmax (not argmin), and check the sign"
         " (the label Y_i). (If you counted from 1 instead: tokens are numbered from 0 in "
         "Python.)", wrong=[0])
    says(check.check_selection([1], toy, p=[0.0, 1.0]), True,
         "(selected tokens): all 1 samples pick a token of largest logit.")
    assert not check.check_selection([1], toy, W=[[0.0, 0.0], [-1.0, 0.0]], p=[1.0, 0.0])
    assert check.check_selection([2], toy, W=[[0.0, 0.0], [-1.0, 0.0]], p=[1.0, 0.0])
    # ties: any maximiser counts; sample 1 scores (-0, -1) (label -1)
    tie = D.AttentionData(torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]],
                                        [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]],
                                       dtype=torch.float64),
                          torch.tensor([1.0, -1.0], dtype=torch.float64),
                          v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    for ok in ([1, 0], [0, 2], [1, 2]):
        says(check.check_selection(ok, tie), True, "(optimal tokens): all 2 samples pick a "
             "token of largest score (2 samples have ties: any maximiser counts).")
    says(check.check_selection([2, 1], tie), False,
         "(optimal tokens): 2 of 2 samples wrong; e.g. sample 1 (Python index 0): you chose "
         "token index 2 (score 0), but another token of that sample has a larger score. You "
         "picked the smallest, not the largest: use argmax (not argmin), and check the sign "
         "(the label Y_i). (If you counted from 1 instead: tokens are numbered from 0 in "
         "Python.)", wrong=[0, 1])  # [2, 1] - 1 = [1, 0] is right
    says(check.check_selection([1, 1], tie), False,
         "(optimal tokens): 1 of 2 samples wrong; e.g. sample 2 (Python index 1): you chose "
         "token index 1 (score -1), but another token of that sample has a larger score. You"
         " picked the smallest, not the largest: use argmax (not argmin), and check the sign"
         " (the label Y_i). (If you counted from 1 instead: tokens are numbered from 0 in "
         "Python.)", wrong=[1])
    says(check.check_selection([0, 1, 0], tie), False,
         "(optimal tokens): alpha must hold one token index per sample, shape (2,); yours has "
         "shape (3,).")
    near = D.AttentionData(torch.tensor([[[1.0, 0.0], [1.0 - 1e-13, 0.0]]], dtype=torch.float64),
                           torch.tensor([1.0], dtype=torch.float64),
                           v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert check.check_selection([1], near)  # within 1e-12 (1 + |best|): a tie
    far = D.AttentionData(torch.tensor([[[1.0, 0.0], [1.0 - 1e-11, 0.0]]], dtype=torch.float64),
                          torch.tensor([1.0], dtype=torch.float64),
                          v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    says(check.check_selection([0], far), True,
         "(optimal tokens): all 1 samples pick a token of largest score.")
    assert not check.check_selection([1], far)


def test_locally_optimal_messages(toy):
    # toy: alpha = 0 is the optimal tokens; alpha = 1 has support tokens {0, 2}, token 0
    # scores 1 > 0: not locally optimal; likewise alpha = 2
    t = "(local optimality): "
    says(check.check_locally_optimal(True, toy, alpha=[0]), True,
         t + "selection [0] is locally optimal.")
    says(check.check_locally_optimal(torch.tensor(True), toy, alpha=[0]), True,
         t + "selection [0] is locally optimal.")
    says(check.check_locally_optimal(0, toy, alpha=[1]), True,
         t + "selection [1] is not locally optimal.")
    says(check.check_locally_optimal(True, toy, alpha=[1]), False,
         t + "selection [1] is not locally optimal; you said it is. At sample 1, token 1 "
              "(Python index [0, 0]), a support token, the score 1 is ≥ 0, the score of the "
              "selected token (Python index 1).")
    says(check.check_locally_optimal(False, toy, alpha=[0]), False,
         t + "selection [0] is locally optimal; you said it is not. Every support token scores "
         "lower than its selected token.")
    says(check.check_locally_optimal("yes", toy, alpha=[0]), False,
         t + "answer must be True or False, got 'yes'.")
    says(check.check_locally_optimal(torch.tensor([True, True]), toy, alpha=[0]), False,
         t + "answer must be True or False, got tensor([True, True]).")
    says(check.check_locally_optimal(None, toy), False,
         t + "answer is None: you have not answered yet (replace the stub above).")
    ok_set = t + ("all 1 locally optimal selections among the 3, and no other "
                  "(independent NNLS check).")
    says(check.check_locally_optimal({0}, toy), True, ok_set)
    says(check.check_locally_optimal([(0,)], toy), True, ok_set)
    # wrong sets: counts and one example from the learner's own set, never the missing ones
    says(check.check_locally_optimal({0, 1}, toy), False,
         t + "1 of your 2 selections is not locally optimal: 1 with a feasible Att-SVM but a"
              " support token that scores at least as high as the selected token.",
              wrong=1, missing=0)
    says(check.check_locally_optimal(set(), toy), False,
         t + "1 locally optimal selection is missing from your set: are your tolerances too "
              "strict, or the score comparison reversed?", wrong=0, missing=1)
    says(check.check_locally_optimal({2, 1}, toy), False,
         t + "2 of your 2 selections are not locally optimal: 2 with a feasible Att-SVM but "
              "a support token that scores at least as high as the selected token. 1 locally "
              "optimal selection is missing from your set: are your tolerances too strict, or"
              " the score comparison reversed?", wrong=2, missing=1)
    says(check.check_locally_optimal(5, toy), False,
         t + "answer must be a collection of selections, e.g. {0, 1} for one sample or "
         "{(0, 0), (1, 0)} for two.")
    says(check.check_locally_optimal(["a"], toy), False,
         t + "answer must be a collection of selections, e.g. {0, 1} for one sample or "
         "{(0, 0), (1, 0)} for two.")
    says(check.check_locally_optimal({(0, 1)}, toy), False,
         t + "each selection must name 1 token(s), one per sample.")
    ex = al_examples.three_token_example("global")
    says(check.check_locally_optimal(True, ex.data, alpha=[1], param="p", W=ex.init["W"]),
         False, t + "selection [1] is not locally optimal; you said it is. At sample 1, "
                     "token 3 (Python index [0, 2]), a support token, the score 0.9 is ≥ 0.9,"
                     " the score of the selected token (Python index 1).")
    # the prompt model with W = identity: the same answer as the p-SVM by hand
    says(check.check_locally_optimal(True, toy, alpha=[1], param="p"), False,
         t + "selection [1] is not locally optimal; you said it is. At sample 1, token 1 "
              "(Python index [0, 0]), a support token, the score 1 is ≥ 0, the score of the "
              "selected token (Python index 1).")
    says(check.check_locally_optimal(True, toy, alpha=[0], param="p", norm=3.0), True,
         t + "selection [0] is locally optimal.")
    # two samples in the plane: T^n = 4 selections, tuples in the messages
    two = D.AttentionData(torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]],
                                       dtype=torch.float64),
                          torch.tensor([1.0, 1.0], dtype=torch.float64),
                          z=torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64),
                          v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    says(check.check_locally_optimal({(0, 1)}, two), True,
         t + "all 1 locally optimal selections among the 4, and no other (independent NNLS "
         "check).")
    says(check.check_locally_optimal({(0, 0), (1, 1)}, two), False,
         t + "2 of your 2 selections are not locally optimal: 2 with a feasible Att-SVM but "
              "a support token that scores at least as high as the selected token. 1 locally "
              "optimal selection is missing from your set: are your tolerances too strict, or"
              " the score comparison reversed?", wrong=2, missing=1)
    # an infeasible selection: two identical tokens cannot be separated
    same = D.AttentionData(torch.tensor([[[1.0, 0.0], [1.0, 0.0]]], dtype=torch.float64),
                           torch.tensor([1.0], dtype=torch.float64),
                           z=torch.tensor([[1.0, 0.0]], dtype=torch.float64),
                           v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    says(check.check_locally_optimal(True, same, alpha=[0]), False,
         t + "selection [0] is not locally optimal; you said it is. No solution satisfies its "
         "margin constraints: the selection is infeasible.")
    big = D.random_data(7, 4, 2, seed=0, device="cpu")  # 4^7 > 4096 selections
    with pytest.raises(ValueError, match=r"without alpha the check enumerates T\^n = 16384 "
                                         r"selections; pass alpha or use a smaller instance "
                                         r"\(T\^n <= 4096\)"):
        check.check_locally_optimal({0}, big)
    with pytest.raises(ValueError, match="alpha"):
        check.check_locally_optimal(True, toy, alpha=[5])
