"""al.check.check_md_direction's every branch and message (mutation testing, issue 12).

Small instances (n = 3, T = 4, d = 5: any selection is feasible), no training. The oracles are
written here in numpy: the margins (x_ia - x_it)^T W z_i, the optimal tokens argmax Y_i v.x_it
and the directional Bregman divergence D(A, B) = 1 - <sign(B̄)|B̄|^(p-1), Ā> (bars: unit
ℓp norm); the SVM directions come from al.att_svm (the check solves them again itself).
"""

import math
import re

import numpy as np
import pytest
import torch

import attnlib as al

check = al.check.check_md_direction
P = 1.75


def ddir(A, B, p):
    A, B = np.asarray(A, float), np.asarray(B, float)
    A = A / (np.abs(A) ** p).sum() ** (1 / p)
    B = B / (np.abs(B) ** p).sum() ** (1 / p)
    return 1 - (np.sign(B) * np.abs(B) ** (p - 1) * A).sum()


def margins(data, W, alpha):
    X, z = data.X.numpy(), data.z.numpy()
    xa = X[np.arange(len(alpha)), alpha]
    m = np.einsum("itd,de,ie->it", xa[:, None] - X, np.asarray(W, float), z)
    m[np.arange(len(alpha)), alpha] = np.inf
    return m


@pytest.fixture(scope="module")
def ex():
    data = al.random_data(3, 4, 5, seed=1, dtype=torch.float64)
    X, Y, v = data.X.numpy(), data.Y.numpy(), data.v.numpy()
    opt = np.argmax(Y[:, None] * np.einsum("itd,d->it", X, v), -1)
    W_p = al.att_svm(data, alpha=opt, norm=P).numpy()
    W_2 = al.att_svm(data, alpha=opt, norm="fro").numpy()
    assert ddir(W_p, W_2, P) > 1e-3  # the two directions differ in the ℓp geometry
    return data, opt, W_p, W_2


def test_lp_must_be_finite_above_one_and_not_two(ex):
    data, _, W_p, _ = ex
    for lp in (1, 0.5, -3, math.inf, math.nan, 2, "2"):
        with pytest.raises(ValueError, match=re.escape(
                f"lp must be a number > 1 other than 2, got {float(lp)!r}")):
            check(W_p, data, lp)
    fb = check(W_p, data, "1.75")  # read as a number
    assert fb and fb.title == "ℓ1.75-AttSVM direction"


def test_the_lp_svm_passes_with_its_numbers(ex):
    data, opt, W_p, W_2 = ex
    for W in (W_p, 1e-3 * W_p, W_p.tolist(), torch.tensor(W_p, dtype=torch.float32)):
        fb = check(W, data, P)
        assert fb, fb
    fb = check(7.0 * W_p, data, P)
    assert fb.ok is True and fb.title == "ℓ1.75-AttSVM direction"
    d = fb.details
    assert set(d) == {"ddir_lp", "ddir_l2", "max_ddir"} and d["max_ddir"] == 2e-3
    assert abs(d["ddir_lp"]) < 1e-6
    assert d["ddir_l2"] == pytest.approx(ddir(W_2, W_p, P), abs=1e-6)
    assert fb.message == (f"all margins positive, D_dir to the ℓ1.75-AttSVM = {d['ddir_lp']:.2e}"
                          f" ≤ 0.002 and smaller than to the ℓ2-AttSVM ({d['ddir_l2']:.2e}).")


def test_the_l2_svm_fails_as_gradient_descent(ex):
    data, _, W_p, W_2 = ex
    fb = check(W_2, data, P)
    assert fb.ok is False and fb.title == "ℓ1.75-AttSVM direction"
    d = fb.details
    assert set(d) == {"ddir_lp", "ddir_l2", "max_ddir", "closest_p"}
    assert d["max_ddir"] == 2e-3 and d["closest_p"] == 2.0
    assert d["ddir_lp"] == pytest.approx(ddir(W_p, W_2, P), abs=1e-6)
    assert abs(d["ddir_l2"]) < 1e-6
    assert fb.message == (f"your W is closer to the ℓ2-AttSVM (D_dir = {d['ddir_l2']:.2e}) than "
                          f"to the ℓ1.75-AttSVM (D_dir = {d['ddir_lp']:.2e}): the direction "
                          "gradient descent finds (lp = 2), not ℓp mirror descent's.")


def test_near_the_lp_svm_but_not_along_it(ex):
    data, _, W_p, W_2 = ex
    unit = lambda A: A / np.linalg.norm(A)  # noqa: E731
    noise = np.random.default_rng(0).standard_normal((5, 5))
    mix = unit(W_p) + 0.1 * unit(noise)  # nearer W_p, not along it
    D_p, D_2 = ddir(W_p, mix, P), ddir(W_2, mix, P)
    assert 2e-3 < D_p < D_2 and (margins(data, mix, ex[1]) > 0).all()
    fb = check(mix, data, P)
    assert (fb.ok, fb.title) == (False, "ℓ1.75-AttSVM direction")
    assert fb.details["ddir_lp"] == pytest.approx(D_p, abs=1e-6)
    assert fb.details["ddir_l2"] == pytest.approx(D_2, abs=1e-6)
    assert fb.message.startswith(f"your W is closer to the ℓ1.75-AttSVM than to the ℓ2-AttSVM "
                                 f"but not yet along it: D_dir = {fb.details['ddir_lp']:.2e} "
                                 "> 0.002.")
    fb = check(mix, data, P, max_ddir=1.5 * D_p)  # a looser threshold lets it through
    assert fb and fb.details["max_ddir"] == 1.5 * D_p and "≤ " + f"{1.5 * D_p:g}" in fb.message
    assert not check(mix, data, P, max_ddir=0.5 * D_p)


def test_margins_shape_zero_and_unanswered(ex):
    data, opt, W_p, _ = ex
    title = "ℓ1.75-AttSVM direction"
    for W, msg in ((np.zeros((5, 5)), "W is zero: it gives every token the same attention."),
                   (W_p[:, :4], "W must have shape (5, 5), yours has (5, 4)."),
                   (W_p[None], "W must have shape (5, 5), yours has (1, 5, 5)."),
                   (None, "W is None: you have not answered yet (replace the stub above).")):
        fb = check(W, data, P)
        assert (fb.ok, fb.title, fb.message, fb.details) == (False, title, msg, {})
    for W in (-W_p, W_p - 5 * np.eye(5), W_p + 3 * np.ones((5, 5))):
        m = margins(data, W, opt)
        bad = int((m <= 0).sum())
        if not bad:
            continue
        i, t = np.unravel_index(np.argmin(m), m.shape)
        fb = check(W, data, P)
        assert (fb.ok, fb.title, fb.details) == (False, title, {"violations": bad})
        assert fb.message == (f"your W does not select these tokens: {bad} margins are ≤ 0, "
                              f"the smallest at sample {i + 1}, token {t + 1} "
                              f"(Python index [{i}, {t}]).")
    assert int((margins(data, -W_p, opt) <= 0).sum()) == 9  # every margin of -W_p


def test_a_margin_of_exactly_zero_does_not_select(ex):
    data, opt, W_p, _ = ex
    X = data.X.clone()
    other = (int(opt[2]) + 1) % 4
    X[2, other] = X[2, int(opt[2])]  # a copy of the selected token: its margin is 0 for any W
    d2 = al.AttentionData(X, data.Y, data.z, data.v)
    W = 0.5 * W_p  # margins 0 (the copy) and in (0, 1) (half the support margins)
    fb = check(W, d2, P, alpha=opt)
    m = margins(d2, W, opt)
    assert m[2, other] == 0 and ((m > 0) & (m < 1)).any() and (m < 0).sum() == 0
    assert not fb and fb.details == {"violations": 1}
    assert fb.message == ("your W does not select these tokens: 1 margins are ≤ 0, the smallest "
                          f"at sample 3, token {other + 1} (Python index [2, {other}]).")


def test_an_explicit_selection_is_the_one_checked(ex):
    data, opt, W_p, _ = ex
    alpha = (opt + 1) % 4  # another selection (feasible: T - 1 = 3 < d = 5)
    W_a = al.att_svm(data, alpha=alpha, norm=P).numpy()
    assert (margins(data, W_a, alpha) > 0).all() and not (margins(data, W_a, opt) > 0).all()
    assert check(W_a, data, P, alpha.tolist())
    assert check(W_a, data, P, alpha=torch.tensor(alpha))
    assert not check(W_a, data, P)  # default: the optimal tokens, which W_a does not select
    assert not check(W_p, data, P, alpha)
    W_2a = al.att_svm(data, alpha=alpha, norm="fro").numpy()  # the ℓ2-AttSVM of that selection
    fb = check(W_2a, data, P, alpha)
    assert not fb and fb.message.startswith("your W is closer to the ℓ2-AttSVM")
    assert abs(fb.details["ddir_l2"]) < 1e-6


def test_the_threshold_itself_passes(ex):
    data, _, W_p, _ = ex
    noise = np.random.default_rng(0).standard_normal((5, 5))
    mix = W_p / np.linalg.norm(W_p) + 0.1 * noise / np.linalg.norm(noise)
    D_p = check(mix, data, P).details["ddir_lp"]
    assert check(mix, data, P).details["ddir_lp"] == D_p  # the same solves, the same number
    assert check(mix, data, P, max_ddir=D_p)  # D_dir ≤ max_ddir passes
