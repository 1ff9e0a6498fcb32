"""al.check.check_md_direction (chapter 9, ex-svm): a gradient-descent answer must fail.

The old check (correlation with the ℓ1.75-AttSVM ≥ 0.99) passed plain GD (corr 0.9916 on
data seed 3); this one compares the answer with its own ℓp-AttSVM and with the ℓ2-AttSVM by
the directional Bregman divergence, recomputed here in numpy as the oracle.
"""

import numpy as np
import pytest
import torch

import attnlib as al


def ddir(A, B, p):
    """Directional Bregman divergence D(Ā, B̄) = 1 - <sign(B̄)|B̄|^(p-1), Ā>, in numpy."""
    A = np.asarray(A, float)
    B = np.asarray(B, float)
    A = A / (np.abs(A) ** p).sum() ** (1 / p)
    B = B / (np.abs(B) ** p).sum() ** (1 / p)
    return 1 - (np.sign(B) * np.abs(B) ** (p - 1) * A).sum()


@pytest.fixture(scope="module")
def ex():
    data = al.mirror_random_data(seed=3).data
    zero = {"W": torch.zeros(10, 10, dtype=torch.float64)}
    common = dict(param="W", lr=0.1, steps=1500, normalized=True, init=zero)
    md = al.train(data, method="md", lp=1.75, **common).W
    gd = al.train(data, method="gd", **common).W
    alpha = al.optimal_tokens(data)
    W_p = al.att_svm(data, alpha=alpha, norm=1.75)  # the two SVMs, solved once for the module
    W_2 = al.att_svm(data, alpha=alpha, norm="fro")
    return data, md, gd, W_p, W_2


def test_mirror_descent_answer_passes(ex):
    data, md, _, W_p, W_2 = ex
    fb = al.check.check_md_direction(md, data, 1.75)
    assert fb, str(fb)
    # the check solves the SVMs again: solver answers agree to ~1e-8
    assert fb.details["ddir_lp"] == pytest.approx(ddir(W_p, md, 1.75), abs=1e-7)
    assert fb.details["ddir_l2"] == pytest.approx(ddir(W_2, md, 1.75), abs=1e-7)
    assert ddir(W_p, md, 1.75) < ddir(W_2, md, 1.75)


def test_gradient_descent_answer_fails(ex):
    data, _, gd, W_p, W_2 = ex
    # the old correlation check lets it through ...
    assert al.check.check_svm_direction(gd, data, norm=1.75)
    # ... the new one does not: GD is closer to the l2-AttSVM, in the l1.75 geometry
    fb = al.check.check_md_direction(gd, data, 1.75)
    assert not fb and "closer to the ℓ2-AttSVM" in fb.message
    assert ddir(W_2, gd, 1.75) < ddir(W_p, gd, 1.75)


def test_the_svms_themselves_and_wrong_answers(ex):
    data, md, _, W_p, W_2 = ex
    assert al.check.check_md_direction(3.0 * W_p, data, 1.75)
    assert not al.check.check_md_direction(W_2, data, 1.75)
    # close to neither direction well enough: a mixture that is nearer the lp-SVM
    noise = torch.randn(10, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    mix = W_p / np.linalg.norm(W_p) + 0.03 * noise
    fb = al.check.check_md_direction(mix, data, 1.75)
    assert ddir(W_p, mix, 1.75) < ddir(W_2, mix, 1.75)
    assert ddir(W_p, mix, 1.75) > 2e-3
    assert not fb and "not yet along it" in fb.message
    # the answer must select the tokens: -W violates every margin
    fb = al.check.check_md_direction(-md, data, 1.75)
    assert not fb and "does not select" in fb.message
    assert not al.check.check_md_direction(None, data, 1.75)
    with pytest.raises(ValueError):
        al.check.check_md_direction(md, data, 2.0)


@pytest.mark.slow
def test_the_official_eps_answer_fails_and_a_wrong_exponent_is_named(ex):
    data = ex[0]
    zero = {"W": torch.zeros(10, 10, dtype=torch.float64)}
    common = dict(param="W", method="md", lr=0.1, steps=1500, normalized=True, init=zero)
    # with the official eps the direction freezes above the bound, however long one trains
    frozen = al.train(data, lp=1.75, eps=2.0 ** -52, **common).W
    fb = al.check.check_md_direction(frozen, data, 1.75)
    assert not fb and fb.details["max_ddir"] < fb.details["ddir_lp"] < fb.details["ddir_l2"]
    # trained with another exponent: the feedback names the one the answer is closest to
    other = al.train(data, lp=3.0, **common).W
    fb = al.check.check_md_direction(other, data, 1.75)
    assert not fb and fb.details["closest_p"] == 3.0
    gd = ex[2]
    assert al.check.check_md_direction(gd, data, 1.75).details["closest_p"] == 2.0
