"""attnlib.check.heads_answers: the write-it-yourself checks of chapters 6 and 7.

The oracles are written here in NumPy: the proof's construction (u_i = pinv(D_i) 1 with
D_i the differences x_iα − x_it, W = Σ_i u_i w_iᵀ with w_i the dual vectors of the queries,
the columns of pinv(Z)), the margins (x_iα − x_it)ᵀ W z_i, and the finite part (the
minimum-norm solution, pinv, of the log-ratio equation of every in-set pair). On random
instances the true answer passes in any layout, and each documented mistake fails with a
message that names it and carries its numbers, never an entry of the expected matrix.
"""


import numpy as np
import pytest
import torch
from check_helpers import assert_no_leak

import attnlib as al
from attnlib.check import check_finite_part, check_unit_margins
from attnlib.check.heads_answers import finite_part_oracle, margins_oracle

TITLE, FTITLE = "unit margins (the construction)", "finite part W^fin"


def sentence(fb, title):
    """What every failed verdict shares: its title, and a message that reads on after
    "✗ not yet (title): " (a lowercase word or a symbol's name) and ends a sentence."""
    assert not fb and fb.title == title, fb
    first = fb.message.split()[0]
    assert first[0].islower() or first.isdigit() or first in ("W", "W_fin"), fb.message
    assert fb.message.endswith("."), fb.message


# ------------------------------------------------------------------------------ chapter 6
def instance(seed, n=3, T=4, d=3):
    data = al.random_data(n, T, d, seed=seed, device="cpu")
    alpha = np.random.default_rng(seed).integers(0, T, n)
    return data, data.X.numpy(), data.z.numpy(), alpha


def units(X, alpha, factor=1.0):
    """The columns u_i = factor_i pinv(D_i) 1: (x_iα − x_it)ᵀ u_i = factor_i for t ≠ α_i."""
    n, T, _ = X.shape
    cols = [np.linalg.pinv(X[i, alpha[i]] - X[i, np.arange(T) != alpha[i]]) @ np.ones(T - 1)
            for i in range(n)]
    return np.stack(cols, 1) * np.broadcast_to(factor, (n,))


def margins(X, Z, W, alpha):
    """The margins (n, T) from their definition, and the mask of the tokens t ≠ α_i."""
    n, T, _ = X.shape
    M = np.einsum("id,de,ie->i", X[np.arange(n), alpha], W, Z)[:, None] \
        - np.einsum("itd,de,ie->it", X, W, Z)
    return M, np.arange(T)[None] != alpha[:, None]


def scale(X, Z, W):
    """The tolerance's scale: 1e-6 (1 + max|X|² max|z| Σ|W|) bounds a margin's round-off."""
    return 1 + np.abs(X).max() ** 2 * np.abs(Z).max() * np.abs(W).sum()


SHAPES = [(3, 4, 3), (4, 5, 4), (2, 5, 4)]  # n = d (the book's case) and n < d


@pytest.mark.parametrize("seed", range(3))
def test_margins_oracle_is_the_definition_and_token_margins(seed):
    data, X, Z, alpha = instance(seed, 4, 5, 3)
    W = np.random.default_rng(seed).standard_normal((3, 3))
    M = margins_oracle(X.astype(np.float32), Z.astype(np.float32), W.astype(np.float32), alpha)
    assert M.dtype == np.float64  # float32 inputs are read exactly, computed in float64
    f32 = [a.astype(np.float32).astype(float) for a in (X, Z, W)]
    np.testing.assert_allclose(M, margins(*f32[:2], f32[2], alpha)[0], rtol=0, atol=1e-13)
    lib = al.token_margins(data, torch.tensor(W), torch.as_tensor(alpha)).numpy()
    np.testing.assert_allclose(margins_oracle(X, Z, W, alpha), lib, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("shape", SHAPES)
def test_the_construction_passes_in_any_layout_up_to_the_tolerance(shape, seed):
    data, X, Z, alpha = instance(seed, *shape)
    n, T, d = shape
    W = units(X, alpha) @ np.linalg.pinv(Z).T
    for answer, sel in ((W, alpha), (W.ravel(), alpha.tolist()), (W.tolist(), alpha[None]),
                        (torch.tensor(W), torch.as_tensor(alpha))):
        fb = check_unit_margins(answer, data, sel)
        assert fb and fb.title == TITLE and f"all {n * (T - 1)} margins equal 1" in fb.message
        assert fb.message.endswith(".")
    for c in (1.0, 3.0):  # tokens c X and W / c: the same margins, a tolerance ~ c scale
        data_c = al.AttentionData(c * data.X, data.Y, z=data.z)
        s = scale(c * X, Z, W / c)  # margins 1 + eps: pass for eps <= 1e-6 scale, fail beyond
        assert check_unit_margins(W / c * (1 + 0.9e-6 * s), data_c, alpha)
        assert not check_unit_margins(W / c * (1 + 1.1e-6 * s), data_c, alpha)


def mistakes(X, Z, alpha, data):
    """Each documented mistake: (its keyword, the wrong W, the numbers the message carries)."""
    n, T, d = X.shape
    Zd = np.linalg.pinv(Z).T  # (n, d): the dual vectors as rows, W = U Zd
    U, W = units(X, alpha), units(X, alpha) @ np.linalg.pinv(Z).T
    one = alpha.copy()
    one[-1] = (one[-1] + 1) % T
    out = [("instead of α_i", units(X, (alpha + 1) % T) @ Zd, ["α_i + 1", str(list(range(n)))]),
           ("instead of α_i", units(X, (alpha - 1) % T) @ Zd, ["α_i − 1", str(list(range(n)))]),
           ("instead of α_i", units(X, one) @ Zd, ["α_i + 1", f"[{n - 1}]"]),
           ("transposed", W.T, []), ("sign is flipped", -W, ["−1"]),
           ("rather than 1", 0.5 * W, ["to 0.5 rather"]), ("rather than 1", 3 * W, ["to 3 "]),
           # equal up to 2e-7, within the tolerance: still all equal
           ("rather than 1", units(X, alpha, 2 + np.arange(n) * 1e-7) @ Zd, ["to 2 rather"]),
           ("orthonormal queries", U @ Z, [])]  # Σ_j u_j z_jᵀ: the queries, not their duals
    M, others = margins(X, Z, U @ Z, alpha)
    if M[others].min() >= 1 - 1e-6 * scale(X, Z, U @ Z):  # all margins >= 1: feasible first
        out[-1] = ("feasible point", U @ Z, [])
    if n == d:  # rows of pinv(Z) taken for its columns: Σ_j u_j (row j of pinv(Z))
        out.append(("columns, Z w_j = e_j", U @ np.linalg.pinv(Z), []))
    W_mm = al.att_svm(data, alpha=torch.as_tensor(alpha)).numpy()
    M, others = margins(X, Z, W_mm, alpha)
    above = int((M[others] > 1 + 1e-6 * scale(X, Z, W_mm)).sum())
    out.append(("feasible point", W_mm, [f"but {above} of {n * (T - 1)} exceed 1"]))
    f = np.ones(n)
    f[0] = 0.5  # input 0 off; input 1 off by half the tolerance: not listed
    f[1] += 0.5e-6 * scale(X, Z, units(X, alpha, f) @ Zd)
    for wrong in (W + 0.05, np.zeros((d, d)), units(X, alpha, 1 - np.arange(n) % 2 * 2) @ Zd,
                  units(X, alpha, f) @ Zd):
        M, others = margins(X, Z, wrong, alpha)
        off = others & (np.abs(M - 1) > 1e-6 * scale(X, Z, wrong))
        i, t = np.unravel_index(np.where(off, np.abs(M - 1), -1).argmax(), M.shape)
        rows = np.nonzero(off.any(1))[0].tolist()
        out.append(("margins differ from 1", wrong,
                    [f"{off.sum()} of {n * (T - 1)} margins", f"input(s) {rows}",
                     f"X[{i}, {t}] (yours {M[i, t]:.4g})"]))
    return out


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("shape", SHAPES)
def test_each_mistake_is_named_with_its_numbers(shape, seed):
    data, X, Z, alpha = instance(seed, *shape)
    W = units(X, alpha) @ np.linalg.pinv(Z).T
    for keyword, wrong, facts in mistakes(X, Z, alpha, data):
        fb = check_unit_margins(wrong, data, alpha)
        sentence(fb, TITLE)
        assert keyword in fb.message and all(f in fb.message for f in facts), (facts, fb)
        if keyword == "margins differ from 1":
            assert fb.details == {"off": int(facts[0].split()[0])}
        assert_no_leak(fb.message, W, own=wrong)


@pytest.mark.parametrize("mistake", ["orthonormal queries", "columns, Z w_j = e_j"])
def test_a_mistake_is_named_within_the_tolerance_only(mistake):
    """u_i right up to 0.9 × 1e-6 scale: still diagnosed; beyond it (by 5e-6): the generic
    count."""
    data, X, Z, alpha = instance(0)
    duals = Z if mistake == "orthonormal queries" else np.linalg.pinv(Z)
    s = scale(X, Z, units(X, alpha) @ duals)
    for eps, named in ((0.9e-6 * s, True), (1e-6 * s + 5e-6, False)):
        fb = check_unit_margins(units(X, alpha, 1 + eps) @ duals, data, alpha)
        assert (mistake in fb.message) is named and ("9 of 9 margins" in fb.message) is not named


def test_a_feasible_point_counts_only_margins_beyond_the_tolerance():
    """Margins 1.5 (input 0), 1 + 0.5e-6 scale (input 1: 1 within the tolerance), 1."""
    data, X, Z, alpha = instance(0)
    s = scale(X, Z, units(X, alpha, [1.5, 1, 1]) @ np.linalg.inv(Z.T))
    W = units(X, alpha, [1.5, 1 + 0.5e-6 * s, 1]) @ np.linalg.inv(Z.T)
    for k in (1, 1 - 0.5e-6 * s):  # and every margin at least 1 up to the tolerance
        fb = check_unit_margins(k * W, data, alpha)
        assert "feasible point" in fb.message and "but 3 of 9 exceed 1" in fb.message


def test_unit_margins_reads_its_arguments():
    data, X, Z, alpha = instance(0)
    fb = check_unit_margins(None, data, alpha)
    sentence(fb, TITLE)
    assert "W is None" in fb.message
    for bad, shape in ((np.eye(3)[:2], "(2, 3)"), (np.ones(8), "(8,)")):
        fb = check_unit_margins(bad, data, alpha)
        sentence(fb, TITLE)
        assert "shape (d, d) = (3, 3)" in fb.message and shape in fb.message
    for bad in ([1, -1, 3], [1, 0.5, 3], [1, 0, 4], [1, 0]):
        with pytest.raises(ValueError, match=r"alpha must hold n = 3 token indices in 0\.\.3"):
            check_unit_margins(np.eye(3), data, bad)
    with pytest.raises(ValueError, match="must carry the queries z"):
        check_unit_margins(np.eye(3), al.AttentionData(data.X, data.Y), alpha)


# ------------------------------------------------------------------------------ chapter 7
def attention(seed, n=3, T=4):
    """A final attention with known sets: masked tokens at tiny positive probabilities, one
    set with two tokens or more and one masked token at least."""
    rng = np.random.default_rng(seed)
    O = rng.random((n, T)) < 0.5
    O[np.arange(n), rng.integers(0, T, n)] = True
    O[0, :2], O[0, 2:] = True, False
    s = np.where(O, rng.random((n, T)) + 0.1, 10.0 ** rng.uniform(-14, -6, (n, T)))
    return s / s.sum(1, keepdims=True), O


def system(X, z, s, keep):
    """Every pair t < τ of each set: rows (x_iτ − x_it) z_iᵀ, log-ratios, pairs (i, t, τ)."""
    rows, logr, where = [], [], []
    for i in range(X.shape[0]):
        m = np.nonzero(keep[i])[0]
        for a in range(len(m)):
            for b in range(a + 1, len(m)):
                rows.append(np.outer(X[i, m[b]] - X[i, m[a]], z[i]).ravel())
                logr.append(np.log(s[i, m[b]] / s[i, m[a]]))
                where.append((i, int(m[a]), int(m[b])))
    return np.array(rows), np.array(logr), where


def finite(X, z, s, keep, rhs=None):
    C, logr, _ = system(X, z, s, keep)
    return (np.linalg.pinv(C) @ (logr if rhs is None else rhs)).reshape(X.shape[-1], -1)


def ex7():
    """The instance of the book's exercise ex-7-finite."""
    data = al.random_data(3, 4, 4, seed=7, device="cpu")
    s = np.array([[0.6, 0.4, 2e-9, 1e-12], [3e-10, 1.0, 1e-8, 4e-11], [0.2, 5e-7, 0.5, 0.3]])
    return data, data.X.numpy(), data.z.numpy(), s / s.sum(-1, keepdims=True)


@pytest.mark.parametrize("seed", range(4))
def test_finite_part_passes_in_any_layout_and_agrees_with_the_library(seed):
    data = al.random_data(3, 4, 4, seed=seed, device="cpu")
    X, z = data.X.numpy(), data.z.numpy()
    s, O = attention(seed)
    W = finite(X, z, s, O)
    lib = al.svm_equivalence(data, torch.as_tensor(O), torch.as_tensor(s)).W_fin.numpy()
    np.testing.assert_allclose(lib, W, rtol=0, atol=1e-10)
    np.testing.assert_allclose(finite_part_oracle(X, z, s), W, rtol=0, atol=1e-10)
    k = len(system(X, z, s, O)[1])
    for answer, probs in ((W, s), (W.tolist(), s.tolist()), (torch.tensor(W), torch.tensor(s))):
        fb = check_finite_part(answer, data, probs)
        assert fb and fb.title == FTITLE and f"all {k} in-set log-ratios" in fb.message


def finite_mistakes(X, z, s, O):
    """Each documented mistake: (its keyword, the wrong W_fin)."""
    W = finite(X, z, s, O)
    C, logr, where = system(X, z, s, O)
    diffs = np.array([s[i, b] - s[i, a] for i, a, b in where])
    R = np.random.default_rng(0).standard_normal(W.size)
    N = (R - np.linalg.pinv(C) @ (C @ R)).reshape(W.shape)  # orthogonal to S_fin
    return [("not the argmax", 0 * W), ("signs are flipped", -W), ("transposed", W.T),
            ("take the logarithm of the ratio", finite(X, z, s, O, diffs)),
            ("log base 10 or 2", W / np.log(10)), ("log base 10 or 2", W / np.log(2)),
            ("masked tokens", finite(X, z, s, s > 0)),
            *[("masked tokens", finite(X, z, s, s > 1e-9))] * bool((s[~O] > 1e-9).any()),
            ("not of minimum norm", W + N), ("in-set equations fail", W + 0.05)]


@pytest.mark.parametrize("seed", range(5))
def test_finite_part_names_each_mistake_with_its_numbers(seed):
    """Random attentions, the book's instance (seed 3), and one with a single masked token
    beside tokens of probability 0 (seed 4)."""
    if seed == 3:
        data, X, z, s = ex7()
        O = s > 1e-3
    elif seed == 4:
        data = al.random_data(2, 4, 4, seed=5, device="cpu")
        X, z = data.X.numpy(), data.z.numpy()
        s = np.array([[0.5, 0.3, 0.2 - 1e-5, 1e-5], [0.4, 0.6, 0.0, 0.0]])
        O = s > 1e-3
    else:
        data = al.random_data(3, 4, 4, seed=seed, device="cpu")
        X, z = data.X.numpy(), data.z.numpy()
        s, O = attention(seed)
    W = finite(X, z, s, O)
    C, logr, where = system(X, z, s, O)
    for keyword, wrong in finite_mistakes(X, z, s, O):
        fb = check_finite_part(wrong, data, s)
        sentence(fb, FTITLE)
        assert keyword in fb.message, (keyword, fb.message)
        assert_no_leak(fb.message, W, own=wrong)
        if keyword == "not of minimum norm":
            out = np.linalg.norm(wrong - W) / np.linalg.norm(wrong)
            assert f"{out:.0%} of its norm" in fb.message
            assert fb.details == {"outside": pytest.approx(out, rel=1e-6)}
        if keyword == "in-set equations fail":
            res = np.abs(C @ wrong.ravel() - logr)
            bad = int((res > 1e-6 * (1 + np.abs(logr))).sum())
            i, t, tau = where[int(res.argmax())]
            assert f"{bad} of {len(logr)} in-set" in fb.message and "gelsy" in fb.message
            assert f"input {i}, tokens ({t}, {tau})" in fb.message
            assert fb.details == {"failed": bad}


def test_finite_part_tolerances():
    """The equations hold up to 1e-6 (1 + |log-ratio|) each, the minimum norm up to 1e-6 of
    |W| outside S_fin, and W_fin = 0 (singleton sets) up to 1e-6 per entry."""
    data, X, z, s = ex7()
    C, logr, where = system(X, z, s, s > 1e-3)
    W = np.linalg.pinv(C) @ logr
    u = np.linalg.pinv(C) @ (1 + np.abs(logr))  # a move within S_fin
    q = np.abs(C @ u) / (1 + np.abs(logr))  # its residuals relative to 1 + |log-ratio|
    for eps, ok in ((0.9e-6, True), (1.1e-6, False)):
        assert bool(check_finite_part((W + eps / q.max() * u).reshape(4, 4), data, s)) is ok
    # equations 1..3 off by far, equation 0 by 0.9 or 1.5 times its tolerance: 3 or 4 fail
    for f, bad in ((0.9, 3), (1.5, 4)):
        r = np.array([f * 1e-6 * (1 + abs(logr[0])), 0.3, 0.5, 0.2])  # r3 = r2 - r1
        fb = check_finite_part((W + np.linalg.pinv(C) @ r).reshape(4, 4), data, s)
        assert f"{bad} of 4 in-set equations fail" in fb.message and fb.details["failed"] == bad
    assert np.linalg.norm(W) < 0.98  # outside S_fin: relative to |W|, not to 1
    R = np.random.default_rng(0).standard_normal(16)
    N = R - np.linalg.pinv(C) @ (C @ R)
    for f, ok in ((0.98e-6, True), (1.02e-6, False)):
        fb = check_finite_part((W + N * f * np.linalg.norm(W) / np.linalg.norm(N)).reshape(4, 4),
                               data, s)
        assert bool(fb) is ok and (ok or "not of minimum norm" in fb.message)
    single = al.random_data(2, 3, 3, seed=1, device="cpu")
    s1 = np.array([[1.0, 0.0, 0.0], [1e-9, 1e-9, 1.0 - 2e-9]])
    for entry, ok in ((0.9e-6, True), (1.1e-6, False)):
        fb = check_finite_part(np.full((3, 3), entry), single, s1)
        assert bool(fb) is ok and fb.title == FTITLE and "every set has one token" in fb.message
        assert ("zero matrix" in fb.message) is not ok
    assert check_finite_part(np.zeros((3, 3)), single, s1 + [[1e-6 - 1e-9, 0, 0], [0, 0, 0]])


def test_finite_part_any_minimum_norm_solver_passes():
    """lstsq with an SVD driver (gelsd) gives the pinv solution; the default (gelsy) may
    misjudge the rank of the wide system, and then fails with the gelsy hint."""
    data, X, z, s = ex7()
    C, logr, _ = system(X, z, s, s > 1e-3)
    C, b = torch.tensor(C), torch.tensor(logr)[:, None]
    assert check_finite_part(torch.linalg.lstsq(C, b, driver="gelsd").solution.reshape(4, 4),
                             data, s)
    w = torch.linalg.lstsq(C, b).solution.reshape(4, 4)
    fb = check_finite_part(w, data, s)
    assert fb or "gelsy" in fb.message


def test_finite_part_oracle_at_its_edges():
    """Singleton sets give zeros (d, d); a token at exactly the threshold is masked; float32
    inputs are computed in float64; T ≠ d."""
    data = al.random_data(2, 3, 4, seed=2, device="cpu")
    X, z = data.X.numpy(), data.z.numpy()
    single = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    assert finite_part_oracle(X, z, single).shape == (4, 4)
    assert not finite_part_oracle(X, z, single).any()
    for s in ([[0.7, 0.3, 0.0], [0.0, 0.0, 1.0]], [[0.6, 0.3, 0.1], [1e-3, 0.5, 0.499]],
              [[0.6, 0.4 - 1e-3, 1e-3], [0.2, 0.5, 0.3]]):
        s = np.array(s)
        np.testing.assert_allclose(finite_part_oracle(X, z, s), finite(X, z, s, s > 1e-3),
                                   rtol=0, atol=1e-10)
        assert check_finite_part(finite(X, z, s, s > 1e-3), data, s)
        if (s == 1e-3).any():  # the token at the threshold kept: a masked token
            assert "masked tokens" in check_finite_part(finite(X, z, s, s >= 1e-3), data, s).message
    _, X, z, s = ex7()
    f32 = [a.astype(np.float32) for a in (X, z, s)]
    W32 = finite_part_oracle(*f32)
    assert W32.dtype == np.float64
    f64 = [a.astype(float) for a in f32]
    np.testing.assert_allclose(W32, finite(*f64, f64[2] > 1e-3), rtol=0, atol=1e-10)


def test_finite_part_reads_its_arguments():
    data, X, z, s = ex7()
    fb = check_finite_part(None, data, s)
    sentence(fb, FTITLE)
    assert "W_fin is None" in fb.message
    fb = check_finite_part(np.eye(4)[:3], data, s)
    sentence(fb, FTITLE)
    assert "shape (d, d) = (4, 4)" in fb.message and "(3, 4)" in fb.message
    for bad in (s[:1], -s, s * (1 + 2e-6), s[:, :2]):
        with pytest.raises(ValueError, match=r"s must hold attention probabilities of shape "
                                             r"\(n, T\) = \(3, 4\)"):
            check_finite_part(np.zeros((4, 4)), data, bad)
    for th in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match=rf"threshold must be in \(0, 1\), got {th}"):
            check_finite_part(np.zeros((4, 4)), data, s, threshold=th)
    with pytest.raises(ValueError, match="must carry the queries z"):
        check_finite_part(np.zeros((4, 4)), al.AttentionData(data.X, data.Y), s)


def test_the_book_exercises_pass_with_the_oracles_answers():
    """ex-6-build and ex-7-finite, through al.check.*"""
    data = al.random_data(4, 5, 4, seed=3, device="cpu")
    alpha = np.array([4, 0, 2, 1])
    W = units(data.X.numpy(), alpha) @ np.linalg.pinv(data.z.numpy()).T
    assert al.check.check_unit_margins(W, data, alpha)
    data, X, z, s = ex7()
    assert al.check.check_finite_part(finite_part_oracle(X, z, s), data, s)
