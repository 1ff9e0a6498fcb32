"""attnlib.check: right answers pass, wrong answers fail with a message saying where."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attnlib import check, svm, tokens
from attnlib import data as D
from attnlib import examples as al_examples
from attnlib.check import feedback

# One sample, three tokens in the plane, query z = e1: the Att-SVM for alpha = 0 is
# W z = (1, 0), i.e. W_mm = [[1, 0], [0, 0]] (constraints w0 - w1 >= 1 and w0 + w1 >= 1).
X1 = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]], dtype=torch.float64)
W_MM = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)


@pytest.fixture
def toy():
    return D.AttentionData(X1, torch.tensor([1.0], dtype=torch.float64),
                            z=torch.tensor([[1.0, 0.0]], dtype=torch.float64),
                            v=torch.tensor([1.0, 0.0], dtype=torch.float64))


@pytest.fixture
def rand():
    return D.random_data(n=4, T=5, d=8, seed=3)


def test_feedback_is_truthy_and_prints(toy):
    fb = check.check_svm_direction(W_MM, toy, alpha=[0])
    assert fb and fb.ok
    assert str(fb).startswith("✓ correct")
    assert fb._repr_markdown_().startswith("✓ **Correct**")
    md = check.Feedback(False, "rank", "x_i * y_i")._repr_markdown_()
    assert md == "✗ **Not yet** (rank): x\\_i \\* y\\_i"  # no accidental emphasis
    bad = check.check_svm_direction(-W_MM, toy, alpha=[0])
    assert not bad
    assert str(bad).startswith("✗ not yet")


def test_svm_direction_closed_form(toy):
    assert check.check_svm_direction(3.7 * W_MM, toy, alpha=[0])  # any positive scale
    assert check.check_svm_direction(W_MM, toy, alpha=[0], exact=True)
    fb = check.check_svm_direction(3.7 * W_MM, toy, alpha=[0], exact=True)
    assert not fb and "not the smallest" in fb.message and "3.7" in fb.message


def test_svm_direction_names_the_worst_violation(toy):
    W = torch.tensor([[1.0, 0.0], [-2.0, 0.0]], dtype=torch.float64)  # W z = (1, -2)
    fb = check.check_svm_direction(W, toy, alpha=[0])
    # margins: token 1: 1 - (-2) = 3 > 0; token 2: 1 - 2 = -1 <= 0
    assert not fb
    assert "violates 1 of 2 margin constraints" in fb.message
    assert "sample 1, token 3 (Python index [0, 2])" in fb.message  # counted as the text counts
    assert fb.details["worst"] == (0, 2) and fb.details["margin"] == pytest.approx(-1.0)


def test_svm_direction_wrong_direction_on_random_data(rand):
    alpha = tokens.optimal_tokens(rand)
    W_mm = torch.as_tensor(svm.att_svm(rand, alpha=alpha))
    assert check.check_svm_direction(W_mm, rand)  # default alpha: optimal tokens
    assert check.check_svm_direction(W_mm, rand, exact=True)
    # add U with U z_i = 0 for every i (n=4 < d=8): same margins, larger norm, other direction
    z = torch.as_tensor(rand.z, dtype=torch.float64)  # (n, d)
    P = z.T @ torch.linalg.pinv(z.T)  # projector onto span{z_i}
    R = torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    W_off = W_mm + 3 * W_mm.norm() * R @ (torch.eye(8, dtype=torch.float64) - P) / R.norm()
    fb = check.check_svm_direction(W_off, rand)
    assert not fb and "corr(W, W^mm)" in fb.message and "margins positive" in fb.message
    fb = check.check_svm_direction(W_off, rand, exact=True)
    assert not fb and "not the Frobenius minimiser" in fb.message  # its margins are W_mm's
    assert "scale it down" not in fb.message


def test_svm_direction_nuclear(rand):
    alpha = tokens.optimal_tokens(rand)
    W_nuc = svm.att_svm(rand, alpha=alpha, norm="nuc")
    assert check.check_svm_direction(W_nuc, rand, norm="nuc", exact=True)
    fb = check.check_svm_direction(svm.att_svm(rand, alpha=alpha), rand, norm="nuc", exact=True)
    assert not fb and "nuclear norm" in fb.message
    # the Frobenius solution's smallest margin is already 1: scaling cannot help
    assert "not the nuclear minimiser" in fb.message and "scale it down" not in fb.message
    fb = check.check_svm_direction(2 * W_nuc, rand, norm="nuc", exact=True)
    assert not fb and "scale it down" in fb.message  # here it can


def test_selection_by_argmin_is_named_as_such():
    """The exercise's data: token 0 scores 1, the others tie at 0.5, so argmin picks token 1,
    which is also argmax + 1: the hint must name the argmin first."""
    ex = al_examples.multi_input_example()
    scores = ex.data.Y[:, None] * (ex.data.X @ ex.data.v)
    fb = check.check_selection(scores.argmin(-1), ex.data)
    assert not fb and "smallest, not the largest: use argmax" in fb.message
    assert fb.message.index("smallest") < fb.message.index("counted from 1")


def test_feedback_places_count_from_one_like_the_text():
    from attnlib.check.feedback import position

    assert position((0, 2), ("sample", "token")) == "sample 1, token 3 (Python index [0, 2])"
    assert position((1, 0)) == "entry (2, 1) (Python index [1, 0])"


def test_svm_direction_answer_errors_are_feedback(toy):
    fb = check.check_svm_direction(None, toy, alpha=[0])
    assert not fb and "not answered" in fb.message
    fb = check.check_svm_direction(np.ones(3), toy, alpha=[0])
    assert not fb and "must have shape (2, 2), yours has (3,)" in fb.message
    fb = check.check_svm_direction(np.zeros((2, 2)), toy, alpha=[0])
    assert not fb and "zero" in fb.message
    fb = check.check_svm_direction(np.full((2, 2), math.nan), toy, alpha=[0])
    assert not fb and "NaN" in fb.message


def test_reference_errors_raise(toy):
    with pytest.raises(ValueError, match="norm"):
        check.check_svm_direction(W_MM, toy, alpha=[0], norm="max")
    with pytest.raises(ValueError, match="alpha"):
        check.check_svm_direction(W_MM, toy, alpha=[3])
    with pytest.raises(ValueError, match="data"):
        check.check_svm_direction(W_MM, object(), alpha=[0])


def test_strict_mode_raises(toy, monkeypatch):
    monkeypatch.setattr(feedback, "_STRICT", {"on": None})  # follow the environment variable
    monkeypatch.delenv(check.STRICT_ENV, raising=False)
    assert not check.is_strict()
    assert not check.check_svm_direction(-W_MM, toy, alpha=[0])  # feedback, no exception
    monkeypatch.setenv(check.STRICT_ENV, "0")
    assert not check.is_strict()
    monkeypatch.setenv(check.STRICT_ENV, "1")  # the grader's switch
    assert check.is_strict()
    assert check.check_svm_direction(W_MM, toy, alpha=[0])
    with pytest.raises(AssertionError, match="violates"):
        check.check_svm_direction(-W_MM, toy, alpha=[0])
    assert check.strict(False) is False  # the explicit setting wins over the environment
    assert not check.check_svm_direction(-W_MM, toy, alpha=[0])
    assert check.strict() is False  # None leaves it
    assert check.strict(True) is True
    monkeypatch.delenv(check.STRICT_ENV)
    with pytest.raises(AssertionError, match="not yet"):
        check.Feedback(False, "t", "m")
    assert not check.Feedback(False, "t", "m", strict=False)  # per check
    check.strict(False)
    with pytest.raises(AssertionError):
        check.Feedback(False, "t", "m", strict=True)
    assert check.Feedback(True, "t", "m", strict=True)
    with pytest.raises(ValueError, match="on"):
        check.strict("yes")


def test_selection(rand):
    opt = tokens.optimal_tokens(rand)
    assert check.check_selection(opt, rand)
    wrong = opt.clone()
    wrong[2] = (wrong[2] + 1) % 5
    fb = check.check_selection(wrong, rand)
    assert not fb and "1 of 4 samples wrong" in fb.message
    assert "sample 3 (Python index 2)" in fb.message
    assert fb.details["wrong"] == [2]
    fb = check.check_selection([0, 1, 2], rand)
    assert not fb and "shape (4,)" in fb.message
    fb = check.check_selection([0, 1, 2, 9], rand)
    assert not fb and "token index 9 does not exist" in fb.message
    W = torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    sel = tokens.selected_tokens(rand, W)
    assert check.check_selection(sel, rand, W=W)
    assert check.check_selection(sel.tolist(), rand, W=W)  # lists are fine


@pytest.mark.parametrize("scores", ["global", "local"])
def test_locally_optimal_three_token_example(scores):
    # the first paper's 3-token prompt example: scores (1, .9, .9) -> {0}; (1, .9, 0) -> {0, 1}
    ex = al_examples.three_token_example(scores)
    W = ex.init["W"]
    right = set(ex.known["locally_optimal"])
    assert check.check_locally_optimal(right, ex.data, param="p", W=W)
    fb = check.check_locally_optimal({0, 1, 2}, ex.data, param="p", W=W)
    assert not fb and "not locally optimal" in fb.message
    fb = check.check_locally_optimal({0}, ex.data, param="p", W=W)
    assert bool(fb) == (scores == "global")
    if scores == "local":
        assert "you missed 1 locally optimal selection" in fb.message
    else:  # why selection 1 is not locally optimal: its support token 2 scores as high
        fb = check.check_locally_optimal(True, ex.data, alpha=[1], param="p", W=W)
        assert not fb and "sample 1, token 3 (Python index [0, 2]), a support token, the " \
            "score 0.9 is ≥ 0.9" in fb.message


def test_prompt_direction_three_token_example():
    ex = al_examples.three_token_example("global")
    W = ex.init["W"]
    p_mm = ex.known["p_mm"][0]  # (-0.1, 1, 0) / 1.01
    assert check.check_prompt_direction(p_mm, ex.data, W=W, exact=True)
    assert check.check_prompt_direction(10 * p_mm, ex.data, W=W)
    fb = check.check_prompt_direction(ex.known["p_mm"][1], ex.data, W=W)  # selects token 1
    assert not fb and "violates" in fb.message and "sample 1, token 2" in fb.message
    fb = check.check_prompt_direction(p_mm + torch.tensor([0.0, 0.0, 5.0],
                                                          dtype=torch.float64), ex.data, W=W)
    assert not fb and "corr(p, p^mm)" in fb.message  # the score axis is invisible to W


def test_locally_optimal_bool(rand):
    opt = tokens.optimal_tokens(rand)
    assert check.check_locally_optimal(True, rand, alpha=opt)  # the optimal selection is
    fb = check.check_locally_optimal(False, rand, alpha=opt)
    assert not fb and "is locally optimal; you said it is not" in fb.message
    assert not check.check_locally_optimal("yes", rand, alpha=opt)
    assert not check.check_locally_optimal(None, rand, alpha=opt)


def test_rank():
    g = torch.Generator().manual_seed(1)
    W = torch.randn(6, 2, generator=g, dtype=torch.float64) @ torch.randn(2, 6, generator=g,
                                                                          dtype=torch.float64)
    assert check.check_rank(2, W)
    assert check.check_rank(torch.tensor(2), W.numpy())
    fb = check.check_rank(6, W)
    assert not fb and "too high" in fb.message and "round-off" in fb.message
    fb = check.check_rank(1, W)
    assert not fb and "too low" in fb.message
    for wrong in (0, 1, 3, 4, 6):  # a wrong answer learns which way, never the rank
        fb = check.check_rank(wrong, W)
        assert "2" not in fb.message.replace("σ₁", "") and "rank" not in fb.details
    assert not check.check_rank(None, W)


@pytest.mark.parametrize("lp", [1.1, 1.75, 2.0, 3.0])
def test_md_step(lp):
    g = torch.Generator().manual_seed(2)
    W = torch.randn(4, 4, generator=g, dtype=torch.float64)
    G = torch.randn(4, 4, generator=g, dtype=torch.float64)
    dual = W.sign() * W.abs() ** (lp - 1) - 0.1 * G
    W_next = dual.sign() * dual.abs() ** (1 / (lp - 1))
    assert check.check_md_step(W_next, W, G, 0.1, lp)
    if lp == 2.0:  # at p = 2 mirror descent is gradient descent
        assert check.check_md_step(W - 0.1 * G, W, G, 0.1, lp)
        return
    fb = check.check_md_step(W - 0.1 * G, W, G, 0.1, lp)
    assert not fb and "plain gradient step" in fb.message and "entry (" in fb.message
    fb = check.check_md_step(dual, W, G, 0.1, lp)
    assert not fb and "stopped in the dual" in fb.message
    dual_up = W.sign() * W.abs() ** (lp - 1) + 0.1 * G
    fb = check.check_md_step(dual_up.sign() * dual_up.abs() ** (1 / (lp - 1)), W, G, 0.1, lp)
    assert not fb and "sign of the gradient" in fb.message
    with pytest.raises(ValueError, match="lp"):
        check.check_md_step(W, W, G, 0.1, 1.0)


def test_value():
    assert check.check_value(0.99010, 0.990099, rtol=1e-4, name="||p_mm||^2")
    fb = check.check_value(0.98, 0.99010, rtol=1e-4, name="||p_mm||^2")
    assert not fb and "too small" in fb.message and "||p_mm||^2" in fb.message
    assert "0.99" not in fb.message  # never the expected value
    assert check.check_value([1, 2, 3], np.array([1.0, 2.0, 3.0]))
    fb = check.check_value([1, 2, 4], [1.0, 2.0, 3.0])
    assert not fb and "1 of 3 entries" in fb.message
    assert "entry (3) (Python index [2])" in fb.message
    fb = check.check_value([1, 2], [1.0, 2.0, 3.0])
    assert not fb and "shape (3,)" in fb.message
    assert not check.check_value(None, 1.0)


def test_scale_shapes_and_reference_errors():
    g = torch.Generator().manual_seed(1)
    W = torch.randn(6, 2, generator=g, dtype=torch.float64) @ torch.randn(2, 6, generator=g,
                                                                          dtype=torch.float64)
    for c in (1e-3, 1e3):  # the rank is relative to sigma_1, at any scale
        assert check.check_rank(2, c * W)
    assert check.check_rank(0, torch.zeros(3, 3))
    assert check.check_value([[1.0, 2.0]], [1.0, 2.0])  # same entries, other shape: fine
    with pytest.raises(ValueError, match=r"grad must have W's shape \(4, 4\), got \(3, 3\)"):
        check.check_md_step(torch.ones(4, 4), torch.ones(4, 4), torch.ones(3, 3), 0.1, 1.5)
    with pytest.raises(ValueError, match="lr must be > 0"):
        check.check_md_step(torch.ones(2), torch.ones(2), torch.ones(2), 0.0, 1.5)
    rand = D.random_data(2, 3, 4, trials=2, seed=0, device="cpu")
    with pytest.raises(ValueError, match="data must hold one instance"):
        check.check_svm_direction(torch.eye(4), rand)
    with pytest.raises(ValueError, match="data must be an attnlib.AttentionData"):
        check.check_selection([0, 0], object())
    # tiny steps: the hints compare within an absolute tolerance too
    W0 = torch.full((2, 2), 1e-3, dtype=torch.float64)
    G = torch.full((2, 2), 1e-3, dtype=torch.float64)
    fb = check.check_md_step(W0 - 1e-3 * G, W0, G, 1e-3, 3.0)
    assert not fb and "plain gradient step" in fb.message


# -- every message in full: the message is what a learner reads -------------------------------
def _says(fb, ok, text, **details):
    assert bool(fb) is ok and fb.ok is ok
    assert str(fb) == ("✓ correct" if ok else "✗ not yet") + f" {text}"
    for k, v in details.items():
        assert fb.details[k] == v


def test_value_messages_and_tolerances():
    _says(check.check_value(0.5, 0.5), True,
          "(value): 0.5 within tolerance (rtol=1e-06, atol=1e-09).")
    _says(check.check_value([1, 2, 3], [1.0, 2.0, 3.0]), True,
          "(value): all 3 entries within tolerance (rtol=1e-06, atol=1e-09).")
    _says(check.check_value(0.98, 0.9901, rtol=1e-4, name="m"), False,
          "(m): m = 0.98 is too small (rtol=0.0001, atol=1e-09).")
    # the worst entry is the one furthest OUTSIDE its tolerance, not the largest difference
    _says(check.check_value([100.5, 2.0], [100.0, 1.0], rtol=0.01, atol=0.0), False,
          "(value): 1 of 2 entries of value are off; the farthest is entry (2) (Python index [1]) "
          "(yours 2).",
          entries_off=1)
    _says(check.check_value(None, 1.0, name="m"), False,
          "(m): m is None: you have not answered yet (replace the stub above).")
    _says(check.check_value(1 + 2j, 1.0, name="m"), False,
          "(m): m must be real, got dtype torch.complex128.")
    _says(check.check_value([math.inf], [1.0], name="m"), False, "(m): m contains NaN or Inf.")
    fb = check.check_value("abc", 1.0, name="m")
    assert not fb and str(fb).startswith("✗ not yet (m): m could not be read as an array (")
    _says(check.check_value([1, 2], [[1.0, 2.0, 3.0]], name="m"), False,
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
    _says(check.check_rank(2, W), True,
          "(rank): W has rank 2 (singular values above 1e-06·σ₁).", rank=2)
    _says(check.check_rank(2.0, W.tolist()), True,
          "(rank): W has rank 2 (singular values above 1e-06·σ₁).")
    _says(check.check_rank(3, W), False,
          "(rank): your rank is too high: count only the singular values above the relative "
          "tolerance 1e-06·σ₁; the tiny ones are round-off.", direction="high")
    _says(check.check_rank(1, W), False,
          "(rank): your rank is too low: count every singular value above 1e-06·σ₁ (the "
          "threshold is relative to the largest one, σ₁), not only the large ones.",
          direction="low")
    _says(check.check_rank(2.5, W), False, "(rank): a rank is a whole number ≥ 0, you said 2.5.")
    _says(check.check_rank("two", W), False, "(rank): r must be a number, got 'two'.")
    _says(check.check_rank(None, W), False,
          "(rank): r is None: you have not answered yet (replace the stub above).")
    _says(check.check_rank(3, W, rtol=1e-13), True,
          "(rank): W has rank 3 (singular values above 1e-13·σ₁).", rank=3)
    assert check.check_rank(1, [[2.0, 0.0], [0.0, 2e-6]])  # 2e-6 = 1e-6 σ₁: not above
    with pytest.raises(ValueError, match=r"W must be a matrix, got shape \(3,\)"):
        check.check_rank(1, [1.0, 2.0, 3.0])


def test_md_step_messages():
    # lp = 3, W = (1, -2), G = (1, 1), lr = 1: dual (1, -4) - (1, 1) = (0, -5) -> (0, -sqrt 5)
    W = torch.tensor([[1.0, -2.0]], dtype=torch.float64)
    G = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    t = "(ℓ3 mirror-descent step): "
    _says(check.check_md_step([[0.0, -math.sqrt(5)]], W, G, 1.0, 3), True,
          t + "W⁺ matches ∇ψ(W⁺) = ∇ψ(W) − η∇L to 0.0e+00.", max_error=0.0)
    off = t + ("1 of 2 entries are off; the largest error is at entry (1, 2) (Python index "
               "[0, 1]) (yours ")
    by_hand = (" Recompute that entry by hand: map W to the dual, take the step there, and map "
               "back.")
    _says(check.check_md_step([[0.0, -2.2]], W, G, 1.0, 3), False,
          off + "-2.2)." + by_hand, entry=(0, 1))
    _says(check.check_md_step([[0.0, -2.2]], W, G, 1.0, torch.tensor(3.0)), False,
          "(mirror step): 1 of 2 entries are off; the largest error is at entry (1, 2) "
          "(Python index [0, 1]) (yours -2.2)." + by_hand)
    _says(check.check_md_step(W - G, W, G, 1.0, 3), False,
          off + "-3). This is a plain gradient step W − η∇L; mirror descent "
          "steps in the dual: map W by sign(W)|W|^(p−1), subtract η∇L, and map back by "
          "sign(·)|·|^(1/(p−1)).")
    _says(check.check_md_step([[0.0, -5.0]], W, G, 1.0, 3), False,
          off + "-5). You stopped in the dual: map back with "
          "sign(·)|·|^(1/(p−1)).")
    _says(check.check_md_step([[math.sqrt(2), -math.sqrt(3)]], W, G, 1.0, 3), False,
          t + "2 of 2 entries are off; the largest error is at entry (1, 1) (Python index [0, "
          "0]) (yours 1.41421). "
          "Check the sign of the gradient term: descent subtracts η∇L.",
          entry=(0, 0), max_error=pytest.approx(math.sqrt(2)))
    _says(check.check_md_step(None, W, G, 1.0, 3), False,
          t + "W_next is None: you have not answered yet (replace the stub above).")
    _says(check.check_md_step([[0.0]], W, G, 1.0, 3), False,
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
    _says(check.check_svm_direction(W_MM, toy, alpha=[0]), True,
          "(Att-SVM direction): all 2 margins positive and corr(W, W^mm) = 1.0000 ≥ 0.99 "
          "(Frobenius Att-SVM).", min_margin=1.0, constraints=2)
    _says(check.check_svm_direction(W_MM, toy, alpha=[0], exact=True), True,
          "(Att-SVM solution): all 2 margin constraints hold (smallest margin 1) and the "
          "Frobenius norm 1 is the minimum.", norm=1.0)
    _says(check.check_svm_direction(3.7 * W_MM, toy, alpha=[0], exact=True), False,
          "(Att-SVM solution): your W satisfies all 2 margin constraints but is not the "
          "smallest: every margin is above 1, so its Frobenius norm 3.7 can be lowered (scale"
          " it down until a margin is exactly 1).", norm=3.7)
    # within atol (relative and absolute) of the minimum norm is the minimum
    assert check.check_svm_direction(1.00005 * W_MM, toy, alpha=[0], exact=True)
    assert not check.check_svm_direction(1.0003 * W_MM, toy, alpha=[0], exact=True)
    assert check.check_svm_direction(1.0003 * W_MM, toy, alpha=[0], exact=True, atol=1e-3)
    W = torch.tensor([[1.0, 0.0], [-2.0, 0.0]], dtype=torch.float64)  # margins 3 and -1
    _says(check.check_svm_direction(W, toy, alpha=[0]), False,
          "(Att-SVM direction): your W violates 1 of 2 margin constraints (x_iα_i − x_it)ᵀ W "
          "z_i > 0; the largest violation is at sample 1, token 3 (Python index [0, 2]) "
          "(margin -1; the selected token of that sample is token 1, Python index 0).",
          violations=1, constraints=2, worst=(0, 2), margin=-1.0)
    _says(check.check_svm_direction(W, toy, alpha=[0], exact=True), False,
          "(Att-SVM solution): your W violates 1 of 2 margin constraints (x_iα_i − x_it)ᵀ W "
          "z_i ≥ 1; the largest violation is at sample 1, token 3 (Python index [0, 2]) "
          "(margin -1; the selected token of that sample is token 1, Python index 0).")
    half = torch.tensor([[1.0, 0.0], [0.5, 0.0]], dtype=torch.float64)  # W z = (1, .5)
    _says(check.check_svm_direction(half, toy, alpha=[0]), False,
          "(Att-SVM direction): your W selects the right tokens (all 2 margins positive) but "
          "points elsewhere than the Frobenius max-margin direction: corr(W, W^mm) = 0.8944 "
          "< 0.99.", correlation=pytest.approx(2 / math.sqrt(5)), min_margin=0.5)
    assert check.check_svm_direction(half, toy, alpha=[0], min_corr=0.89)
    assert not check.check_svm_direction(half, toy, alpha=[0], min_corr=0.9)
    # exact: margins down to 1 - atol count as 1
    assert check.check_svm_direction(0.99995 * W_MM, toy, alpha=[0], exact=True)
    assert not check.check_svm_direction(0.999 * W_MM, toy, alpha=[0], exact=True)
    _says(check.check_svm_direction(np.ones(3), toy, alpha=[0]), False,
          "(Att-SVM direction): W must have shape (2, 2), yours has (3,).")
    _says(check.check_svm_direction(np.zeros((2, 2)), toy, alpha=[0]), False,
          "(Att-SVM direction): W is zero: it gives every token the same attention.")
    _says(check.check_svm_direction(W_MM, toy, alpha=[0], norm="1.5"), True,
          "(Att-SVM direction): all 2 margins positive and corr(W, W^mm) = 1.0000 ≥ 0.99 "
          "(ℓ1.5 Att-SVM).")
    _says(check.check_svm_direction(W_MM, toy, alpha=[0], norm="nuc", exact=True), True,
          "(Att-SVM solution): all 2 margin constraints hold (smallest margin 1) and the "
          "nuclear norm 1 is the minimum.")
    w1 = torch.tensor([[-0.5, 0.0], [0.5, 0.0]], dtype=torch.float64)
    _says(check.check_svm_direction(w1, toy, alpha=[1], exact=True), True,
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
    _says(check.check_prompt_direction(p_mm[1], ex.data, W=W), False,
          "(p-SVM direction): your p violates 2 of 2 margin constraints (x_iα_i − x_it)ᵀ W p "
          "> 0; the largest violation is at sample 1, token 2 (Python index [0, 1]) (margin "
          "-1.1; the selected token of that sample is token 1, Python index 0).")
    _says(check.check_prompt_direction(p_mm[0], ex.data, W=W, exact=True), True,
          "(p-SVM solution): all 2 margin constraints hold (smallest margin 1) and the "
          "Frobenius norm 0.995037 is the minimum.")
    # default W = identity: the p-SVM of x = (1, 0), (0, 1), (0, -1) for token 0 is (1, 0)
    one = D.AttentionData(X1, torch.tensor([1.0], dtype=torch.float64),
                          v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert check.check_prompt_direction([1.0, 0.0], one, exact=True)
    assert not check.check_prompt_direction([1.0, 0.0], one, W=2 * torch.eye(2), exact=True)


def test_selection_messages(toy):
    _says(check.check_selection([0], toy), True,
          "(optimal tokens): all 1 samples pick a token of largest score.")
    _says(check.check_selection(0, toy), True,
          "(optimal tokens): all 1 samples pick a token of largest score.")
    _says(check.check_selection([1], toy), False,
          "(optimal tokens): 1 of 1 samples wrong; e.g. sample 1 (Python index 0): you chose "
          "token index 1 (score 0), but another token of that sample has a larger score. You "
          "picked the smallest, not the largest: use argmax (not argmin), and check the sign "
          "(the label Y_i). (If you counted from 1 instead: tokens are numbered from 0 in "
          "Python.)", wrong=[0])
    _says(check.check_selection([0.5], toy), False,
          "(optimal tokens): alpha must hold integer token indices, yours has fractions.")
    _says(check.check_selection([math.nan], toy), False,
          "(optimal tokens): alpha must hold integer token indices, yours has fractions.")
    assert check.check_selection([0.0], toy)
    _says(check.check_selection([-1], toy), False,
          "(optimal tokens): sample 1 (Python index 0): token index -1 does not exist (tokens"
          " are 0-based, 0..2).")
    _says(check.check_selection([3], toy), False,
          "(optimal tokens): sample 1 (Python index 0): token index 3 does not exist (tokens "
          "are 0-based, 0..2).")
    _says(check.check_selection(None, toy), False,
          "(optimal tokens): alpha is None: you have not answered yet (replace the stub above).")
    _says(check.check_selection([1], toy, W=torch.eye(2)), False,
          "(selected tokens): 1 of 1 samples wrong; e.g. sample 1 (Python index 0): you chose"
          " token index 1 (logit 0), but another token of that sample has a larger logit. You"
          " picked the smallest, not the largest: use argmax (not argmin), and check the sign"
          " (the label Y_i). (If you counted from 1 instead: tokens are numbered from 0 in "
          "Python.)", wrong=[0])
    _says(check.check_selection([1], toy, p=[0.0, 1.0]), True,
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
        _says(check.check_selection(ok, tie), True, "(optimal tokens): all 2 samples pick a "
              "token of largest score (2 samples have ties: any maximiser counts).")
    _says(check.check_selection([2, 1], tie), False,
          "(optimal tokens): 2 of 2 samples wrong; e.g. sample 1 (Python index 0): you chose "
          "token index 2 (score 0), but another token of that sample has a larger score. You "
          "picked the smallest, not the largest: use argmax (not argmin), and check the sign "
          "(the label Y_i). (If you counted from 1 instead: tokens are numbered from 0 in "
          "Python.)", wrong=[0, 1])  # [2, 1] - 1 = [1, 0] is right
    _says(check.check_selection([1, 1], tie), False,
          "(optimal tokens): 1 of 2 samples wrong; e.g. sample 2 (Python index 1): you chose "
          "token index 1 (score -1), but another token of that sample has a larger score. You"
          " picked the smallest, not the largest: use argmax (not argmin), and check the sign"
          " (the label Y_i). (If you counted from 1 instead: tokens are numbered from 0 in "
          "Python.)", wrong=[1])
    _says(check.check_selection([0, 1, 0], tie), False,
          "(optimal tokens): alpha must hold one token index per sample, shape (2,); yours has "
          "shape (3,).")
    near = D.AttentionData(torch.tensor([[[1.0, 0.0], [1.0 - 1e-13, 0.0]]], dtype=torch.float64),
                           torch.tensor([1.0], dtype=torch.float64),
                           v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert check.check_selection([1], near)  # within 1e-12 (1 + |best|): a tie
    far = D.AttentionData(torch.tensor([[[1.0, 0.0], [1.0 - 1e-11, 0.0]]], dtype=torch.float64),
                          torch.tensor([1.0], dtype=torch.float64),
                          v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    _says(check.check_selection([0], far), True,
          "(optimal tokens): all 1 samples pick a token of largest score.")
    assert not check.check_selection([1], far)


def test_locally_optimal_messages(toy):
    # toy: alpha = 0 is the optimal tokens; alpha = 1 has support tokens {0, 2}, token 0
    # scores 1 > 0: not locally optimal; likewise alpha = 2
    t = "(local optimality): "
    _says(check.check_locally_optimal(True, toy, alpha=[0]), True,
          t + "selection [0] is locally optimal.")
    _says(check.check_locally_optimal(torch.tensor(True), toy, alpha=[0]), True,
          t + "selection [0] is locally optimal.")
    _says(check.check_locally_optimal(0, toy, alpha=[1]), True,
          t + "selection [1] is not locally optimal.")
    _says(check.check_locally_optimal(True, toy, alpha=[1]), False,
          t + "selection [1] is not locally optimal; you said it is. At sample 1, token 1 "
              "(Python index [0, 0]), a support token, the score 1 is ≥ 0, the score of the "
              "selected token (Python index 1).")
    _says(check.check_locally_optimal(False, toy, alpha=[0]), False,
          t + "selection [0] is locally optimal; you said it is not. Every support token scores "
          "lower than its selected token.")
    _says(check.check_locally_optimal("yes", toy, alpha=[0]), False,
          t + "answer must be True or False, got 'yes'.")
    _says(check.check_locally_optimal(torch.tensor([True, True]), toy, alpha=[0]), False,
          t + "answer must be True or False, got tensor([True, True]).")
    _says(check.check_locally_optimal(None, toy), False,
          t + "answer is None: you have not answered yet (replace the stub above).")
    ok_set = t + ("all 1 locally optimal selections among the 3, and no other "
                  "(independent NNLS check).")
    _says(check.check_locally_optimal({0}, toy), True, ok_set)
    _says(check.check_locally_optimal([(0,)], toy), True, ok_set)
    # wrong sets: counts and one example from the learner's own set, never the missing ones
    _says(check.check_locally_optimal({0, 1}, toy), False,
          t + "1 of your 2 selections is not locally optimal: 1 with a feasible Att-SVM but a"
              " support token that scores at least as high as the selected token.",
              wrong=1, missing=0)
    _says(check.check_locally_optimal(set(), toy), False,
          t + "1 locally optimal selection is missing from your set: are your tolerances too "
              "strict, or the score comparison reversed?", wrong=0, missing=1)
    _says(check.check_locally_optimal({2, 1}, toy), False,
          t + "2 of your 2 selections are not locally optimal: 2 with a feasible Att-SVM but "
              "a support token that scores at least as high as the selected token. 1 locally "
              "optimal selection is missing from your set: are your tolerances too strict, or"
              " the score comparison reversed?", wrong=2, missing=1)
    _says(check.check_locally_optimal(5, toy), False,
          t + "answer must be a collection of selections, e.g. {0, 1} for one sample or "
          "{(0, 0), (1, 0)} for two.")
    _says(check.check_locally_optimal(["a"], toy), False,
          t + "answer must be a collection of selections, e.g. {0, 1} for one sample or "
          "{(0, 0), (1, 0)} for two.")
    _says(check.check_locally_optimal({(0, 1)}, toy), False,
          t + "each selection must name 1 token(s), one per sample.")
    ex = al_examples.three_token_example("global")
    _says(check.check_locally_optimal(True, ex.data, alpha=[1], param="p", W=ex.init["W"]),
          False, t + "selection [1] is not locally optimal; you said it is. At sample 1, "
                     "token 3 (Python index [0, 2]), a support token, the score 0.9 is ≥ 0.9,"
                     " the score of the selected token (Python index 1).")
    # the prompt model with W = identity: the same answer as the p-SVM by hand
    _says(check.check_locally_optimal(True, toy, alpha=[1], param="p"), False,
          t + "selection [1] is not locally optimal; you said it is. At sample 1, token 1 "
              "(Python index [0, 0]), a support token, the score 1 is ≥ 0, the score of the "
              "selected token (Python index 1).")
    _says(check.check_locally_optimal(True, toy, alpha=[0], param="p", norm=3.0), True,
          t + "selection [0] is locally optimal.")
    # two samples in the plane: T^n = 4 selections, tuples in the messages
    two = D.AttentionData(torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]],
                                       dtype=torch.float64),
                          torch.tensor([1.0, 1.0], dtype=torch.float64),
                          z=torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64),
                          v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    _says(check.check_locally_optimal({(0, 1)}, two), True,
          t + "all 1 locally optimal selections among the 4, and no other (independent NNLS "
          "check).")
    _says(check.check_locally_optimal({(0, 0), (1, 1)}, two), False,
          t + "2 of your 2 selections are not locally optimal: 2 with a feasible Att-SVM but "
              "a support token that scores at least as high as the selected token. 1 locally "
              "optimal selection is missing from your set: are your tolerances too strict, or"
              " the score comparison reversed?", wrong=2, missing=1)
    # an infeasible selection: two identical tokens cannot be separated
    same = D.AttentionData(torch.tensor([[[1.0, 0.0], [1.0, 0.0]]], dtype=torch.float64),
                           torch.tensor([1.0], dtype=torch.float64),
                           z=torch.tensor([[1.0, 0.0]], dtype=torch.float64),
                           v=torch.tensor([1.0, 0.0], dtype=torch.float64))
    _says(check.check_locally_optimal(True, same, alpha=[0]), False,
          t + "selection [0] is not locally optimal; you said it is. No solution satisfies its "
          "margin constraints: the selection is infeasible.")
    big = D.random_data(7, 4, 2, seed=0, device="cpu")  # 4^7 > 4096 selections
    with pytest.raises(ValueError, match=r"without alpha the check enumerates T\^n = 16384 "
                                         r"selections; pass alpha or use a smaller instance "
                                         r"\(T\^n <= 4096\)"):
        check.check_locally_optimal({0}, big)
    with pytest.raises(ValueError, match="alpha"):
        check.check_locally_optimal(True, toy, alpha=[5])
