"""Feedback that diagnoses without giving the answer: attnlib.check names
the common mistakes (1-based indices, a transposed W, a flipped sign, a missing
normalisation, a known wrong answer such as p^mm for p^relax) and never prints the expected
value."""

import torch

import attnlib.data as D
import attnlib.examples as EX
from attnlib import check
from attnlib.check.numeric import diagnose

F = torch.float64


def _no_value(fb, *values):
    assert not fb
    for v in values:
        assert f"{v:.6g}" not in fb.message and f"{v:.4g}" not in fb.message, fb.message


def test_diagnose_common_mistakes():
    W = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0], [0.0, 4.0, 1.0]], dtype=F)
    assert "1-based" in diagnose(torch.tensor([3, 1, 2]) + 1, torch.tensor([3, 1, 2]))
    assert "transpose" in diagnose(W.T, W)
    assert "wrong sign" in diagnose(-W, W)
    assert "normalisation" in diagnose(7 * W, W)
    P = torch.softmax(W, dim=1)
    assert "rows are not normalised" in diagnose(torch.exp(W), P)
    assert "columns are not normalised" in diagnose(torch.exp(W),
                                                   torch.exp(W) / torch.exp(W).sum(0))
    assert diagnose(W + 0.3, W) == ""  # an unrelated error: no guess
    assert diagnose(torch.ones(2), torch.ones(3)) == ""  # other shape: no guess
    assert diagnose(W, W.T.clone()) != "" and diagnose(W + W.T, W + W.T) == ""


def test_check_value_never_prints_the_expected_value():
    exp = torch.tensor([[0.25, 0.75], [0.6, 0.4]], dtype=F)
    fb = check.check_value(exp.T, exp, name="P")  # shows the student's entry, not exp's
    assert not fb and "transpose" in fb.message and "(yours 0.75)" in fb.message
    assert "expected" not in fb.message and "0.6" not in fb.message
    fb = check.check_value(0.3, 0.4, name="acc")
    _no_value(fb, 0.4)
    assert "too small" in fb.message
    p_mm, p_relax = torch.tensor([1.0, 0.0], dtype=F), torch.tensor([0.6, 0.8], dtype=F)
    fb = check.check_value(p_mm, p_relax, name="p^relax", mistakes={
        "This is p^mm, the SVM direction without the head's weights: solve the relaxed SVM.":
            p_mm})
    _no_value(fb, 0.6, 0.8)
    assert "This is p^mm" in fb.message
    assert check.check_value(p_relax, p_relax, mistakes={"never": p_mm})


def test_selection_and_local_optimality_do_not_reveal_the_answer():
    data = D.random_data(5, 4, 3, seed=1, device="cpu")
    opt = (data.Y[:, None] * (data.X @ data.v)).argmax(-1)
    worst = (data.Y[:, None] * (data.X @ data.v)).argmin(-1)
    fb = check.check_selection(worst, data)
    assert not fb and "smallest, not the largest" in fb.message
    assert "another token of that sample" in fb.message
    if bool((opt + 1 < data.T).all()):
        assert "1-based" in check.check_selection(opt + 1, data).message
    ex = EX.three_token_example("local")
    fb = check.check_locally_optimal(set(), ex.data, param="p", W=ex.init["W"])
    assert not fb and "you missed 2 locally optimal selections" in fb.message
    assert "{" not in fb.message and fb.details["missing"] == 2
