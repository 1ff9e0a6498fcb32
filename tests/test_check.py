"""attnlib.check: right answers pass, wrong answers fail with a message saying where. (Every
message in full: test_check_messages.py.)"""

import math

import numpy as np
import pytest
import torch
from check_helpers import W_MM, toy_data

from attnlib import check, svm, tokens
from attnlib import data as D
from attnlib import examples as al_examples
from attnlib.check import feedback

toy = pytest.fixture(toy_data, name="toy")


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
