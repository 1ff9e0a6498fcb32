"""check_unit_margins' every branch, title and message (mutation testing, issue 12).

The construction is written here (u_i = pinv(D_i) 1, W = U Z^-T for n = d), so are the margins
(numpy), the tolerance scale 1 + max|X|^2 max|z| Σ|W| of the check's docstring contract, and
each diagnosed mistake.
"""

import re

import numpy as np
import pytest
import torch

import attnlib as al
from attnlib.check.heads_answers import check_unit_margins as check

TITLE = "unit margins (the construction)"
N, T, D = 3, 4, 3


@pytest.fixture(scope="module")
def ex():
    data = al.random_data(N, T, D, seed=0, device="cpu")
    X, Z = data.X.numpy(), data.z.numpy()
    alpha = np.array([1, 0, 3])
    return data, X, Z, alpha


def _u(X, alpha, factor=(1.0, 1.0, 1.0)):
    U = np.zeros((D, N))
    for i in range(N):
        Di = X[i, alpha[i]] - X[i, np.arange(T) != alpha[i]]
        U[:, i] = factor[i] * np.linalg.pinv(Di) @ np.ones(T - 1)
    return U


def _margins(X, Z, W, alpha):
    M = np.array([[(X[i, alpha[i]] - X[i, t]) @ W @ Z[i] for t in range(T)] for i in range(N)])
    return M, np.arange(T)[None] != alpha[:, None]


def _scale(X, Z, W):
    return 1 + np.abs(X).max() ** 2 * np.abs(Z).max() * np.abs(W).sum()


def _fails(fb, message):
    assert (fb.ok, fb.title, fb.message) == (False, TITLE, message), fb.message


def test_the_construction_passes_flat_or_not(ex):
    data, X, Z, alpha = ex
    W = _u(X, alpha) @ np.linalg.inv(Z.T)  # W z_i = u_i
    for answer in (W, W.ravel(), W.tolist(), torch.tensor(W)):
        fb = check(answer, data, alpha)
        assert (fb.ok, fb.title, fb.message) == (True, TITLE, "all 9 margins equal 1: W "
                                                 "separates the selection, every constraint "
                                                 "tight.")
    assert check(W, data, alpha[None])  # a selection of shape (1, n) holds n indices
    # the tolerance: margins 1 + eps pass for eps <= 1e-6 scale (scale ~ 1 + the answer's size)
    s = _scale(X, Z, W)
    assert s > 3
    assert check(W * (1 + 1e-6 * (s - 0.5)), data, alpha)
    assert not check(W * (1 + 1e-6 * (s + 0.5)), data, alpha)
    _fails(check(None, data, alpha),
           "W is None: you have not answered yet (replace the stub above).")
    _fails(check(W[:2], data, alpha), "W must have shape (d, d) = (3, 3), yours has (2, 3).")
    _fails(check(W.ravel()[:8], data, alpha),
           "W must have shape (d, d) = (3, 3), yours has (8,).")


def test_the_selection_is_validated(ex):
    data, _, _, alpha = ex
    for bad in ([1, -1, 3], [1, 0.5, 3], [1, 0, 4], [1, 0]):
        with pytest.raises(ValueError, match="^" + re.escape(
                f"alpha must hold n = 3 token indices in 0..3, got {np.asarray(bad, float)}")
                + "$"):
            check(np.eye(3), data, bad)


def test_each_mistake_gets_its_message(ex):
    data, X, Z, alpha = ex
    Zi = np.linalg.inv(Z.T)
    W = _u(X, alpha) @ Zi
    for shift, sign in ((1, "+"), (-1, "−")):
        wrong = _u(X, (alpha + shift) % T) @ Zi
        _fails(check(wrong, data, alpha),
               f"in input(s) [0, 1, 2] (counted from 0, as in X[i]) your W gives margin 1 to "
               f"token α_i {sign} 1 instead of "
               "α_i: alpha is 0-based, the selected token of input i is X[i, alpha[i]].")
    one = _u(X, np.array([alpha[0], alpha[1], 0])) @ Zi  # input 2 only: alpha + 1 mod T
    _fails(check(one, data, alpha),
           "in input(s) [2] (counted from 0, as in X[i]) your W gives margin 1 to token "
           "α_i + 1 instead of α_i: alpha is "
           "0-based, the selected token of input i is X[i, alpha[i]].")
    _fails(check(W.T, data, alpha),
           "your W is transposed: the margin is (x_iα − x_it)ᵀ W z_i, so the queries enter on "
           "the right (W z_i = u_i) and the token differences on the left.")
    _fails(check(-W, data, alpha),
           "every margin is −1: the sign is flipped; the margin is the selected token minus "
           "the other one, x_iα − x_it.")
    for k in (0.5, 2.0):
        _fails(check(k * W, data, alpha),
               f"all your margins are equal, to {k:.4g} rather than 1: the construction asks "
               "for margin exactly 1 (check the right-hand side of the equations for u_i, or a "
               "stray factor).")
    # equal up to 2e-7, within 1e-6 scale: still "equal"
    near = _u(X, alpha, (0.5, 0.5 + 1e-7, 0.5 + 2e-7)) @ Zi
    assert "all your margins are equal, to 0.5 rather than 1" in check(near, data, alpha).message
    _fails(check(_u(X, alpha) @ Z, data, alpha),  # u_j z_j^T summed: the queries, not duals
           "your u_i are right, but W z_i ≠ u_i: W = Σ_j u_j z_jᵀ works only for orthonormal "
           "queries. Use vectors w_j with w_jᵀ z_i = δ_ij (the rows of a left inverse of "
           "[z_1 ⋯ z_n], as in the proof).")
    _fails(check(_u(X, alpha) @ np.linalg.inv(Z), data, alpha),  # W Z = U: rows of pinv(Z)
           "your u_i are right, but W z_i ≠ u_i: you took the rows of the right inverse "
           "pinv(Z) of the queries' matrix Z (rows z_iᵀ); the dual vectors w_j are its "
           "columns, Z w_j = e_j.")


def test_a_feasible_point_and_the_generic_message(ex):
    data, X, Z, alpha = ex
    W_mm = al.att_svm(data, alpha=torch.as_tensor(alpha)).numpy()
    for k in (1.0, 1 - 0.5e-6 * _scale(X, Z, W_mm)):  # at least 1 up to the tolerance
        M, others = _margins(X, Z, k * W_mm, alpha)
        tol = 1e-6 * _scale(X, Z, k * W_mm)
        above = int((M[others] > 1 + tol).sum())
        assert 0 < above < 9 and ((M[others] > 1 + 1e-3) | (np.abs(M[others] - 1) < 1e-5)).all()
        _fails(check(k * W_mm, data, alpha),
               f"every margin is at least 1, so your W separates the selection, but {above} of "
               "9 exceed 1: this is a feasible point (an Att-SVM solution, perhaps), not the "
               "construction, which makes every margin exactly 1 without a solver.")
    W = _u(X, alpha) @ np.linalg.inv(Z.T)
    for wrong in (W + 0.05, np.zeros((3, 3)), W * np.array([[1.0], [1.0], [1.2]])):
        M, others = _margins(X, Z, wrong, alpha)
        off = others & (np.abs(M - 1) > 1e-6 * _scale(X, Z, wrong))
        far = np.where(off, np.abs(M - 1), -1.0)
        i, t = np.unravel_index(far.argmax(), far.shape)
        rows = sorted(set(np.nonzero(off.any(1))[0].tolist()))
        fb = check(wrong, data, alpha)
        _fails(fb, f"{int(off.sum())} of 9 margins differ from 1, in input(s) {rows} (counted "
                   f"from 0); the farthest is X[{i}, {t}] (yours {M[i, t]:.4g}). Check W z_i "
                   "for that "
                   "input: its differences x_iα − x_it must all give 1, with α_i counted from 0.")
        assert fb.details == {"off": int(off.sum())}


# ------------------------------------------------------------------------------ chapter 7
FTITLE = "finite part W^fin"


def _ex7():
    data = al.random_data(3, 4, 4, seed=7, device="cpu")
    s = np.array([[0.6, 0.4, 2e-9, 1e-12], [3e-10, 1.0, 1e-8, 4e-11], [0.2, 5e-7, 0.5, 0.3]])
    return data, data.X.numpy(), data.z.numpy(), s / s.sum(-1, keepdims=True)


def _system(X, z, s, keep):
    """Every pair t < τ of each set, in input then token order: rows, log-ratios, pairs."""
    rows, logr, where = [], [], []
    for i in range(X.shape[0]):
        m = np.nonzero(keep[i])[0]
        for a in range(len(m)):
            for b in range(a + 1, len(m)):
                rows.append(np.outer(X[i, m[b]] - X[i, m[a]], z[i]).ravel())
                logr.append(np.log(s[i, m[b]] / s[i, m[a]]))
                where.append((i, int(m[a]), int(m[b])))
    return np.array(rows), np.array(logr), where


def _ffails(fb, message):
    assert (fb.ok, fb.title, fb.message) == (False, FTITLE, message), fb.message


def test_finite_part_messages():
    data, X, z, s = _ex7()
    C, logr, where = _system(X, z, s, s > 1e-3)
    assert len(logr) == 4
    W = (np.linalg.pinv(C) @ logr).reshape(4, 4)
    from attnlib.check import check_finite_part as fcheck
    fb = fcheck(W, data, s)
    assert (fb.ok, fb.title, fb.message) == (True, FTITLE, "all 4 in-set log-ratios are "
                                             "reproduced and W_fin lies in S_fin (minimum "
                                             "norm).")
    _ffails(fcheck(None, data, s),
            "W_fin is None: you have not answered yet (replace the stub above).")
    _ffails(fcheck(W[:3], data, s), "W_fin must have shape (d, d) = (4, 4), yours has (3, 4).")
    _ffails(fcheck(np.zeros((4, 4)), data, s),
            "your W_fin is zero, but some set O_i holds several tokens: O_i = {t : s_it > 10⁻³}, "
            "a threshold, not the argmax.")
    _ffails(fcheck(-W, data, s),
            "the signs are flipped: the logit difference (x_iτ − x_it)ᵀ W z_i must equal "
            "log(s_iτ / s_it), the larger logit for the larger probability.")
    _ffails(fcheck(W.T, data, s), "your W_fin is transposed: the logit of token t is x_itᵀ W "
                                  "z_i, the query on the right.")
    diff = np.array([s[i, b] - s[i, a] for i, a, b in where])
    _ffails(fcheck((np.linalg.pinv(C) @ diff).reshape(4, 4), data, s),
            "your logit differences equal the differences of the probabilities: softmax ratios "
            "are exponentials of logit differences, so take the logarithm of the ratio.")
    for base in (10.0, 2.0):
        _ffails(fcheck(W / np.log(base), data, s),
                "your ratios are in log base 10 or 2: the softmax is built on exp, so take the "
                "natural logarithm (torch.log).")
    wrong = W + 0.05
    res = np.abs(C @ wrong.ravel() - logr)
    bad = int((res > 1e-6 * (1 + np.abs(logr))).sum())
    i, t, tau = where[int(res.argmax())]
    fb = fcheck(wrong, data, s)
    _ffails(fb, f"{bad} of 4 in-set equations fail; the farthest is input {i}, tokens ({t}, "
                f"{tau}), all counted from 0 as in X[i, t]. Check that your sets are "
                "O_i = {t : s_it > 10⁻³} and that each "
                "equation uses the tokens of one input with its own query. If you used "
                "torch.linalg.lstsq: its default CPU driver (gelsy) can misjudge the rank of a "
                "wide C and return a non-solution; use torch.linalg.pinv.")
    assert fb.details == {"failed": bad}
    R = np.random.default_rng(0).standard_normal(16)
    N = (R - np.linalg.pinv(C) @ (C @ R)).reshape(4, 4)  # orthogonal to S_fin
    out = np.linalg.norm(N) / np.linalg.norm(W + N)
    fb = fcheck(W + N, data, s)
    _ffails(fb, f"every in-set ratio is reproduced, but W_fin is not of minimum norm: "
                f"{out:.0%} of its norm lies outside S_fin (the span of the matrices (x_iτ − "
                "x_it) z_iᵀ). Take the minimum-norm solution (torch.linalg.pinv, or "
                "numpy.linalg.lstsq).")
    assert fb.details == {"outside": pytest.approx(out, rel=1e-6)}
    low = np.linalg.pinv(_system(X, z, s, s > 1e-9)[0]) @ _system(X, z, s, s > 1e-9)[1]
    _ffails(fcheck(low.reshape(4, 4), data, s),
            "your W_fin also reproduces the ratios of the masked tokens (s_it ≤ 10⁻³): they are "
            "not in the selected sets, and fitting them pushes W out of S_fin.")


def test_finite_part_all_positive_tokens_one_masked_one_zero():
    # one masked token (1e-5) and one token of probability 0: fitting every positive token is
    # the masked-token mistake (found at threshold 0, where the zero token stays out)
    data = al.random_data(2, 4, 4, seed=5, device="cpu")
    X, z = data.X.numpy(), data.z.numpy()
    s = np.array([[0.5, 0.3, 0.2 - 1e-5, 1e-5], [0.4, 0.6, 0.0, 0.0]])
    from attnlib.check import check_finite_part as fcheck
    C, logr, _ = _system(X, z, s, s > 0)
    W_all = (np.linalg.pinv(C) @ logr).reshape(4, 4)
    _ffails(fcheck(W_all, data, s),
            "your W_fin also reproduces the ratios of the masked tokens (s_it ≤ 10⁻³): they are "
            "not in the selected sets, and fitting them pushes W out of S_fin.")


def test_finite_part_singletons_arguments_and_float32_oracle():
    from attnlib.check import check_finite_part as fcheck
    from attnlib.check.heads_answers import finite_part_oracle
    data = al.random_data(2, 3, 3, seed=1, device="cpu")
    s = np.array([[1.0, 0.0, 0.0], [1e-9, 1e-9, 1.0 - 2e-9]])
    fb = fcheck(np.full((3, 3), 0.9e-6), data, s)
    assert (fb.ok, fb.title, fb.message) == (True, FTITLE, "every set has one token, so W_fin "
                                             "= 0.")
    fb = fcheck(np.full((3, 3), 1.1e-6), data, s)
    assert (fb.ok, fb.title, fb.message) == (False, FTITLE, "every set has one token: no ratio "
                                             "to reproduce, so the minimum-norm W_fin is the "
                                             "zero matrix.")
    assert fcheck(np.zeros((3, 3)), data, s + np.array([[1e-6 - 1e-9, 0, 0], [0, 0, 0]]))
    for bad in (s[:1], -s, s * (1 + 2e-6), s[:, :2]):
        with pytest.raises(ValueError, match="^" + re.escape(
                "s must hold attention probabilities of shape (n, T) = (2, 3)") + "$"):
            fcheck(np.zeros((3, 3)), data, bad)
    for th in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="^" + re.escape(
                f"threshold must be in (0, 1), got {th}") + "$"):
            fcheck(np.zeros((3, 3)), data, s, threshold=th)
    with pytest.raises(ValueError, match="^" + re.escape(
            "data must carry the queries z (AttentionData with z)") + "$"):
        fcheck(np.zeros((3, 3)), al.AttentionData(data.X, data.Y), s)
    # float32 inputs: the oracle computes in float64 from the same float32 values
    _, X, z, s7 = _ex7()
    X32, z32, s32 = X.astype(np.float32), z.astype(np.float32), s7.astype(np.float32)
    W32 = finite_part_oracle(X32, z32, s32)
    C, logr, _ = _system(X32.astype(float), z32.astype(float), s32.astype(float),
                         s32.astype(float) > 1e-3)
    assert W32.dtype == np.float64
    np.testing.assert_allclose(W32.ravel(), np.linalg.pinv(C) @ logr, rtol=0, atol=1e-10)


def test_oracles_in_float64_and_at_their_edges():
    from attnlib.check import check_finite_part as fcheck
    from attnlib.check.heads_answers import finite_part_oracle, margins_oracle
    _, X, z, s = _ex7()
    W = np.random.default_rng(1).standard_normal((4, 4))
    alpha = np.array([0, 1, 2])
    M = margins_oracle(X.astype(np.float32), z.astype(np.float32), W.astype(np.float32), alpha)
    X64, z64, W64 = (a.astype(np.float32).astype(float) for a in (X, z, W))
    expect = np.array([[(X64[i, alpha[i]] - X64[i, t]) @ W64 @ z64[i] for t in range(4)]
                       for i in range(3)])
    assert M.dtype == np.float64
    np.testing.assert_allclose(M, expect, rtol=0, atol=1e-13)
    # singleton sets: zeros of shape (d, d); one pair: its minimum-norm solution; a token at
    # exactly the threshold is masked
    d3 = al.random_data(2, 3, 4, seed=2, device="cpu")  # T = 3 != d = 4
    X3, z3 = d3.X.numpy(), d3.z.numpy()
    single = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    assert finite_part_oracle(X3, z3, single).shape == (4, 4)
    assert not finite_part_oracle(X3, z3, single).any()
    for s3 in (np.array([[0.7, 0.3, 0.0], [0.0, 0.0, 1.0]]),
               np.array([[0.6, 0.3, 0.1], [1e-3, 0.5, 0.499]]),
               np.array([[0.6, 0.4 - 1e-3, 1e-3], [0.2, 0.5, 0.3]])):
        C, logr, _ = _system(X3, z3, s3, s3 > 1e-3)
        W3 = (np.linalg.pinv(C) @ logr).reshape(4, 4)
        np.testing.assert_allclose(finite_part_oracle(X3, z3, s3), W3, rtol=0, atol=1e-10)
        fb = fcheck(W3, d3, s3)
        assert fb and fb.message.startswith(f"all {len(logr)} in-set log-ratios")
    # the equations' tolerance 1e-6 (1 + |log-ratio|), moved within the span S_fin
    data, X, z, s = _ex7()
    C, logr, _ = _system(X, z, s, s > 1e-3)
    W = np.linalg.pinv(C) @ logr
    assert np.abs(logr).max() > 0.3
    u = np.linalg.pinv(C) @ (1 + np.abs(logr))  # a move within S_fin
    q = np.abs(C @ u) / (1 + np.abs(logr))  # its residuals relative to 1 + |log-ratio|
    k = int(q.argmax())
    assert np.abs(logr[k]) > 0.1
    for eps, ok in ((0.9e-6, True), (1.1e-6, False)):
        moved = W + eps / q[k] * u
        assert bool(fcheck(moved.reshape(4, 4), data, s)) is ok


def test_diagnoses_at_their_tolerances_and_the_generic_count(ex):
    data, X, Z, alpha = ex
    # u_i right up to 3e-7 (within 1e-6 scale, beyond allclose's default atol 1e-8 and beyond
    # 1e-6 / scale): still diagnosed; off by 1e-6 scale + 5e-6: not (allclose's default rtol
    # 1e-5 would take it)
    for mistake, hint in ((Z, "orthonormal queries"), (np.linalg.inv(Z), "columns, Z w_j = e_j")):
        W = _u(X, alpha) * (1 + 3e-7) @ mistake
        assert 1e-6 * _scale(X, Z, W) > 3e-6
        assert hint in check(W, data, alpha).message
        s = _scale(X, Z, _u(X, alpha) @ mistake)
        W = _u(X, alpha) * (1 + 1e-6 * s + 5e-6) @ mistake
        fb = check(W, data, alpha)
        assert hint not in fb.message and fb.message.startswith("9 of 9 margins differ")
    # inputs 1 and 2 off (margins 1.5 and -0.2), input 0 off by 1e-7 only (within 1e-6 scale)
    W = _u(X, alpha, (1 + 1e-7, 1.5, -0.2)) @ np.linalg.inv(Z.T)
    M, others = _margins(X, Z, W, alpha)
    far = np.where(others, np.abs(M - 1), -1.0)
    i, t = np.unravel_index(far.argmax(), far.shape)
    assert i == 2 and np.abs(M[1][others[1]] + 1).max() > np.abs(M[2][others[2]] + 1).max()
    fb = check(W, data, alpha)  # input 2's margins tie at -0.2: any of its tokens
    assert (fb.ok, fb.title, fb.details) == (False, TITLE, {"off": 6})
    assert re.fullmatch(r"6 of 9 margins differ from 1, in input\(s\) \[1, 2\] \(counted from "
                        r"0\); the farthest is X\[2, [0-3]\] \(yours -0\.2\)\. Check W z_i for "
                        r"that input: its differences x_iα − x_it must all give 1, with α_i "
                        r"counted from 0\.", fb.message), fb.message
    assert (i, round(M[i, t], 6)) == (2, -0.2)


def test_finite_part_generic_count_and_the_norm_outside():
    from attnlib.check import check_finite_part as fcheck
    data, X, z, s = _ex7()
    C, logr, where = _system(X, z, s, s > 1e-3)
    assert where == [(0, 0, 1), (2, 0, 2), (2, 0, 3), (2, 2, 3)]
    W = np.linalg.pinv(C) @ logr
    tail = (" Check that your sets are O_i = {t : s_it > 10⁻³} and that each equation uses the "
            "tokens of one input with its own query. If you used torch.linalg.lstsq: its "
            "default CPU driver (gelsy) can misjudge the rank of a wide C and return a "
            "non-solution; use torch.linalg.pinv.")
    # residuals (e0, 0.3, 0.5, 0.2) (set 2's rows: r3 = r2 - r1): equation 0 holds up to e0
    for e0, bad in ((0.0, 3), (0.9e-6 * (1 + abs(logr[0])), 3), (1.5e-6 * (1 + abs(logr[0])), 4)):
        wrong = W + np.linalg.pinv(C) @ np.array([e0, 0.3, 0.5, 0.2])
        fb = fcheck(wrong.reshape(4, 4), data, s)
        _ffails(fb, f"{bad} of 4 in-set equations fail; the farthest is input 2, tokens (0, "
                    "3), all counted from 0 as in X[i, t]." + tail)
        assert fb.details == {"failed": bad}
    # a part outside S_fin of 1.02e-6 of the norm (|W| < 1: relative to |W|, not to 1)
    assert np.linalg.norm(W) < 0.98
    R = np.random.default_rng(0).standard_normal(16)
    N = R - np.linalg.pinv(C) @ (C @ R)
    N *= 1.02e-6 * np.linalg.norm(W) / np.linalg.norm(N)
    out = np.linalg.norm(N) / np.linalg.norm(W + N)
    assert 1.0e-6 < out and out * np.linalg.norm(W + N) < 1e-6
    fb = fcheck((W + N).reshape(4, 4), data, s)
    assert not fb and fb.message.startswith("every in-set ratio is reproduced, but W_fin is not")


def test_feasible_point_counts_only_margins_beyond_the_tolerance(ex):
    # input 0's margins all 1.5, input 1's all 1 + 0.5e-6 scale (within the tolerance: they
    # count as 1, not as exceeding it, though they exceed 1 + 1e-6 / scale), input 2's all 1
    data, X, Z, alpha = ex
    s0 = _scale(X, Z, _u(X, alpha, (1.5, 1.0, 1.0)) @ np.linalg.inv(Z.T))
    W = _u(X, alpha, (1.5, 1 + 0.5e-6 * s0, 1.0)) @ np.linalg.inv(Z.T)
    M, others = _margins(X, Z, W, alpha)
    s = _scale(X, Z, W)
    assert int((M[others] > 1 + 1e-6 * s).sum()) == 3
    assert int((M[others] > 1 + 1e-6 / s).sum()) == 6
    _fails(check(W, data, alpha),
           "every margin is at least 1, so your W separates the selection, but 3 of 9 exceed 1: "
           "this is a feasible point (an Att-SVM solution, perhaps), not the construction, "
           "which makes every margin exactly 1 without a solver.")
