"""al.check.check_md_direction (chapter 9): the ℓp-AttSVM's direction passes, every documented
mistake fails and is named.

Oracles written here in numpy: the margins (x_ia - x_it)^T W z_i, the optimal tokens
argmax_t Y_i v.x_it and the directional Bregman divergence D(A, B) = 1 - <sign(B̄)|B̄|^(p-1), Ā>
(bars: unit ℓp norm); the SVM directions come from al.att_svm (the check solves them again
itself). Random small instances (n = 3, T = 4, d = 5: any selection is feasible) carry the
branches; one trained instance (data seed 3) shows that plain gradient descent, which the old
correlation check let through, fails.
"""

import math
import re

import numpy as np
import pytest
import torch
from check_helpers import assert_no_leak

import attnlib as al

check = al.check.check_md_direction
P = 1.75
TITLE = "ℓ1.75-AttSVM direction"


def ddir(A, B, p):
    """Directional Bregman divergence D(Ā, B̄) = 1 - <sign(B̄)|B̄|^(p-1), Ā>, in numpy."""
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


@pytest.fixture(scope="module", params=[1, 4])
def inst(request):
    """A random instance, its optimal tokens and the AttSVMs of p = 1.75, 2 and 3 (which
    differ in the ℓ1.75 geometry)."""
    data = al.random_data(3, 4, 5, seed=request.param, dtype=torch.float64)
    X, Y, v = data.X.numpy(), data.Y.numpy(), data.v.numpy()
    opt = np.argmax(Y[:, None] * np.einsum("itd,d->it", X, v), -1)
    W = {q: al.att_svm(data, alpha=opt, norm=q).numpy() for q in (P, "fro", 3.0)}
    assert ddir(W[P], W["fro"], P) > 1e-3
    return data, opt, W


def test_lp_must_be_finite_above_one_and_not_two():
    data = al.random_data(3, 4, 5, seed=1, dtype=torch.float64)
    for lp in (1, 0.5, -3, math.inf, math.nan, 2, "2"):
        with pytest.raises(ValueError, match=r"lp must be a number > 1 other than 2, got "
                                             + re.escape(repr(float(lp)))):
            check(np.eye(5), data, lp)
    assert check(np.zeros((5, 5)), data, "1.75").title == TITLE  # read as a number


def test_the_lp_svm_passes_with_its_numbers(inst):
    """At any scale, as a list or in float32; D_dir to it is 0, to the ℓ2-AttSVM the oracle's,
    and the message gives both and the bound."""
    data, _, W = inst
    for A in (W[P], 1e-3 * W[P], W[P].tolist(), torch.tensor(W[P], dtype=torch.float32)):
        assert check(A, data, P)
    fb = check(7.0 * W[P], data, P)
    d = fb.details
    assert (fb.ok, fb.title, set(d), d["max_ddir"]) == (True, TITLE,
                                                        {"ddir_lp", "ddir_l2", "max_ddir"}, 2e-3)
    assert abs(d["ddir_lp"]) < 1e-6 and d["ddir_l2"] == pytest.approx(ddir(W["fro"], W[P], P),
                                                                       abs=1e-6)
    assert all(s in fb.message for s in (f"{d['ddir_lp']:.2e}", f"{d['ddir_l2']:.2e}", "0.002"))


MISTAKES = ["l2", "l3", "not along", "wrong tokens", "zero", "shape", "batch", "none"]


@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_mistake_fails_and_is_named(inst, mistake):
    """Gradient descent's direction (the ℓ2-AttSVM) and another exponent's: closest_p names it;
    near the ℓp-AttSVM but not along it: D_dir in the message, and the bound decides; tokens
    not selected: the count and the place of the smallest margin (oracle); zero, misshapen and
    missing answers: named, no details."""
    data, opt, W = inst
    unit = lambda A: A / np.linalg.norm(A)  # noqa: E731
    mix = unit(W[P]) + 0.1 * unit(np.random.default_rng(0).standard_normal((5, 5)))
    answer = {"l2": W["fro"], "l3": W[3.0], "not along": mix, "wrong tokens": -W[P],
              "zero": np.zeros((5, 5)), "shape": W[P][:, :4], "batch": W[P][None],
              "none": None}[mistake]
    fb = check(answer, data, P)
    assert (fb.ok, fb.title) == (False, TITLE)
    d, msg = fb.details, fb.message
    for unit_W in (W[P] / np.abs(W[P]).max(), W[P] / (np.abs(W[P]) ** P).sum() ** (1 / P)):
        assert_no_leak(msg, (W[P], unit_W), own=() if answer is None else answer)
    if mistake in ("l2", "l3", "not along"):
        D_p, D_2 = ddir(W[P], answer, P), ddir(W["fro"], answer, P)
        assert (d["ddir_lp"], d["ddir_l2"]) == (pytest.approx(D_p, abs=1e-6),
                                                pytest.approx(D_2, abs=1e-6))
        assert d["max_ddir"] == 2e-3 and f"{d['ddir_lp']:.2e}" in msg
    if mistake == "l2":
        assert d["closest_p"] == 2.0 and "closer to the ℓ2-AttSVM" in msg
        assert "gradient descent" in msg and f"{d['ddir_l2']:.2e}" in msg
    elif mistake == "l3":
        assert d["closest_p"] == 3.0 and "lp = 3 instead of 1.75" in msg
    elif mistake == "not along":
        assert 2e-3 < D_p < D_2 and (margins(data, mix, opt) > 0).all()
        assert "closest_p" not in d and "not yet along" in msg and "eps=0" in msg
        assert check(5.0 * mix, data, P).details == pytest.approx(d)  # W's scale is free
        fb = check(mix, data, P, max_ddir=d["ddir_lp"])  # D_dir <= max_ddir passes
        assert fb and fb.details["max_ddir"] == d["ddir_lp"]
        assert f"{d['ddir_lp']:g}" in fb.message
        assert not check(mix, data, P, max_ddir=0.5 * d["ddir_lp"])
    elif mistake == "wrong tokens":
        m = margins(data, answer, opt)
        i, t = np.unravel_index(np.argmin(m), m.shape)
        assert d == {"violations": 9} == {"violations": int((m <= 0).sum())}
        assert "does not select" in msg and f"sample {i + 1}, token {t + 1}" in msg
        assert f"[{i}, {t}]" in msg and "9 margins" in msg
    else:
        assert d == {} and {"zero": "W is zero", "shape": "(5, 5), yours has (5, 4)",
                            "batch": "(5, 5), yours has (1, 5, 5)",
                            "none": "W is None: you have not answered"}[mistake] in msg


def test_a_margin_of_exactly_zero_does_not_select(inst):
    data, opt, W = inst
    X = data.X.clone()
    other = (int(opt[2]) + 1) % 4
    X[2, other] = X[2, int(opt[2])]  # a copy of the selected token: its margin is 0 for any W
    d2 = al.AttentionData(X, data.Y, data.z, data.v)
    half = 0.5 * W[P]  # margins 0 (the copy) and in (0, 1) (half the support margins)
    m = margins(d2, half, opt)
    assert m[2, other] == 0 and ((m > 0) & (m < 1)).any() and (m < 0).sum() == 0
    fb = check(half, d2, P, alpha=opt)
    assert not fb and fb.details == {"violations": 1}
    assert f"1 margins are ≤ 0, the smallest at sample 3, token {other + 1}" in fb.message


def test_an_explicit_selection_is_the_one_checked(inst):
    data, opt, W = inst
    alpha = (opt + 1) % 4  # another selection (feasible: T - 1 = 3 < d = 5)
    W_a = al.att_svm(data, alpha=alpha, norm=P).numpy()
    assert (margins(data, W_a, alpha) > 0).all() and not (margins(data, W_a, opt) > 0).all()
    assert check(W_a, data, P, torch.tensor(alpha))
    fb = check(W_a, data, P)  # default: the optimal tokens, which W_a selects only in part
    some = int((margins(data, W_a, opt) <= 0).sum())
    assert 0 < some < 9 and fb.details == {"violations": some} and f"{some} margins" in fb.message
    assert check(W_a, data, P, alpha.tolist())  # a selection as a list
    assert not check(W[P], data, P, alpha)
    fb = check(al.att_svm(data, alpha=alpha, norm="fro").numpy(), data, P, alpha)
    assert not fb and fb.details["closest_p"] == 2.0 and abs(fb.details["ddir_l2"]) < 1e-6


# ----------------------------------------------------------------------------- trained answers
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


def test_mirror_descent_passes_and_gradient_descent_fails(ex):
    """Mirror descent's answer passes; gradient descent's, which a correlation >= 0.99 with
    the ℓ1.75-AttSVM lets through, is closer to the ℓ2-AttSVM in the ℓ1.75 geometry."""
    data, md, gd, W_p, W_2 = ex
    fb = check(md, data, 1.75)
    assert fb, str(fb)
    # the check solves the SVMs again: solver answers agree to ~1e-8
    assert fb.details["ddir_lp"] == pytest.approx(ddir(W_p, md, 1.75), abs=1e-7)
    assert fb.details["ddir_l2"] == pytest.approx(ddir(W_2, md, 1.75), abs=1e-7)
    assert ddir(W_p, md, 1.75) < ddir(W_2, md, 1.75)
    assert al.check.check_svm_direction(gd, data, norm=1.75)
    fb = check(gd, data, 1.75)
    assert not fb and fb.details["closest_p"] == 2.0
    assert ddir(W_2, gd, 1.75) < ddir(W_p, gd, 1.75)


@pytest.mark.slow
def test_the_official_eps_answer_fails_and_a_wrong_exponent_is_named(ex):
    data = ex[0]
    zero = {"W": torch.zeros(10, 10, dtype=torch.float64)}
    common = dict(param="W", method="md", lr=0.1, steps=1500, normalized=True, init=zero)
    # with the official eps the direction freezes above the bound, however long one trains
    frozen = al.train(data, lp=1.75, eps=2.0 ** -52, **common).W
    fb = check(frozen, data, 1.75)
    assert not fb and fb.details["max_ddir"] < fb.details["ddir_lp"] < fb.details["ddir_l2"]
    # trained with another exponent: the feedback names the one the answer is closest to
    other = al.train(data, lp=3.0, **common).W
    assert check(other, data, 1.75).details["closest_p"] == 3.0
