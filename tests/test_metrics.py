"""Tests of attnlib.metrics against independent oracles (math in float64, loops, closed forms)."""

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import attnlib.metrics as MT

g = torch.Generator().manual_seed(0)
NAN = float("nan")


def rnd(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=g)


def corr_math(a, b):
    """<a, b> / (|a| |b|) in exact rational arithmetic, rounded once; 0 if either is zero."""
    a, b = [Fraction(float(x)) for x in np.ravel(a)], [Fraction(float(x)) for x in np.ravel(b)]
    na2, nb2 = sum(x * x for x in a), sum(x * x for x in b)
    if na2 == 0 or nb2 == 0:
        return 0.0
    dot = sum(x * y for x, y in zip(a, b))
    return math.copysign(math.sqrt(dot * dot / (na2 * nb2)), dot)


entries = st.floats(-10, 10, allow_nan=False, width=64)
vectors = st.integers(1, 12).flatmap(
    lambda k: st.tuples(arrays(np.float64, k, elements=entries),
                        arrays(np.float64, k, elements=entries)))
scales = st.floats(1e-20, 1e20) | st.floats(-1e20, -1e-20)


# ----------------------------------------------------------------------------- correlation
@given(vectors)
def test_correlation_equals_the_formula(ab):
    a, b = ab
    got = MT.correlation(a, b, dims=1)
    assert got.dtype == torch.float64
    assert math.isclose(float(got), corr_math(a, b), rel_tol=1e-12, abs_tol=1e-12)


@given(vectors, scales, scales, st.sampled_from([torch.float32, torch.float64]))
def test_correlation_is_scale_invariant(ab, c1, c2, dtype):
    a, b = ab
    a, b = a + 0.5 * np.sign(a + 1e-3), b + 0.5 * np.sign(b + 1e-3)  # no tiny entries
    A, B = torch.tensor(a, dtype=dtype), torch.tensor(b, dtype=dtype)
    ref = MT.correlation(A, B, dims=1)
    got = MT.correlation(c1 * A, c2 * B, dims=1)  # scaled entries up to 1e21, down to 1e-20
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert got.dtype == dtype and math.isfinite(float(got))
    assert math.isclose(float(got), math.copysign(1, c1 * c2) * float(ref), abs_tol=tol)


def test_correlation_extreme_scales():
    A = rnd(5, 5).float()
    one = torch.ones((), dtype=torch.float32)
    assert torch.allclose(MT.correlation(1e20 * A, A), one)
    assert torch.allclose(MT.correlation(1e-20 * A, A), one)
    assert torch.allclose(MT.correlation(1e-30 * A, 1e30 * A), one)
    assert torch.allclose(MT.correlation(-1e20 * A, A), -one)
    big = torch.tensor([3e38, -1e38, 2e38], dtype=torch.float32)  # near float32's max
    assert torch.allclose(MT.correlation(big, big), one)
    tiny = torch.tensor([1.0, 3.0]) * 2.0**-149  # the smallest subnormals (exact)
    assert tiny[0] > 0 and torch.allclose(MT.correlation(tiny, torch.tensor([1.0, 3.0])), one)
    # each object of a batch is rescaled on its own
    batch = torch.stack([1e-20 * A, 1e20 * A, A])
    assert torch.allclose(MT.correlation(batch, A), torch.ones(3))
    assert torch.allclose(MT.correlation(A, batch), torch.ones(3))


def test_correlation_power_of_two_rescaling_is_exact():
    """Ordinary inputs give the plain formula's digits (the regression numbers do not move)."""
    for seed in range(20):
        gen = torch.Generator().manual_seed(seed)
        A, B = (torch.randn(4, 6, 6, dtype=torch.float64, generator=gen),
                torch.randn(6, 6, dtype=torch.float64, generator=gen))
        ax = (-2, -1)
        plain = (A * B).sum(ax) / (torch.sqrt((A * A).sum(ax)) * torch.sqrt((B * B).sum(ax)))
        assert torch.equal(MT.correlation(A, B), plain)


@given(vectors, st.data())
def test_correlation_is_permutation_invariant(ab, data):
    a, b = ab
    perm = np.array(data.draw(st.permutations(range(len(a)))))
    assert math.isclose(float(MT.correlation(a[perm], b[perm], dims=1)),
                        float(MT.correlation(a, b, dims=1)), rel_tol=1e-12, abs_tol=1e-14)


def test_correlation_batched_equals_looped():
    W, ref = rnd(4, 7, 5, 5), rnd(5, 5)
    c = MT.correlation(W, ref)
    assert c.shape == (4, 7)
    for i in range(4):
        for j in range(7):
            assert math.isclose(float(c[i, j]), corr_math(W[i, j], ref), rel_tol=1e-12)
    p = rnd(6, 3)
    c = MT.correlation(p, p[0])
    assert c.shape == (6,) and all(math.isclose(float(c[i]), corr_math(p[i], p[0]),
                                                rel_tol=1e-12) for i in range(6))


def test_correlation_dims():
    A, B = rnd(3, 3), rnd(3, 3)
    assert math.isclose(float(MT.correlation(A, B)), corr_math(A, B), rel_tol=1e-12)  # square
    rows = MT.correlation(A, B, dims=1)
    assert rows.shape == (3,) and all(
        math.isclose(float(rows[i]), corr_math(A[i], B[i]), rel_tol=1e-12) for i in range(3))
    K = rnd(2, 4, 3)
    assert MT.correlation(K, K[0], dims=2).shape == (2,)  # non-square matrices
    # matrices only when BOTH end in square dims
    assert MT.correlation(rnd(1, 3), rnd(3, 3)).shape == (3,)
    assert MT.correlation(rnd(3, 3), rnd(1, 3)).shape == (3,)
    assert MT.correlation(torch.ones(1, 1), rnd(5, 3, 1)).shape == (5, 3)
    assert MT.correlation(rnd(4, 3), rnd(3)).shape == (4,)  # non-square: vectors
    with pytest.raises(ValueError, match=r"^dims: expected 1 \(vectors\), 2 \(matrices\)"):
        MT.correlation(A, B, dims=3)
    with pytest.raises(ValueError, match=r"^A, B: expected the same last 1 dims"):
        MT.correlation(rnd(3), rnd(4))
    with pytest.raises(ValueError, match=r"^A, B: expected the same last 2 dims"):
        MT.correlation(rnd(3), rnd(3), dims=2)


def test_correlation_zero_nan_and_scalars():
    assert MT.correlation(torch.zeros(3), rnd(3)).item() == 0.0
    assert MT.correlation(rnd(3, 3), torch.zeros(3, 3)).item() == 0.0
    A = rnd(3, 4)
    A[1, 2] = NAN
    c = MT.correlation(A, rnd(4))
    assert torch.isfinite(c[[0, 2]]).all() and torch.isnan(c[1])  # NaN in -> NaN out, per row
    assert torch.isnan(MT.correlation(torch.tensor([NAN, 0.0]), torch.zeros(2)))
    assert torch.isnan(MT.correlation(torch.tensor([math.inf, 1.0]), torch.ones(2)))
    assert MT.correlation(np.float64(-2.0), torch.tensor(3.0)).item() == -1.0
    assert MT.correlation(np.array([1.0, 2.0]), [2.0, 4.0]).item() == pytest.approx(1.0)
    assert MT.correlation(np.ones(3, dtype=np.int64), np.ones(3)).item() == pytest.approx(1.0)
    ints = MT.correlation(torch.tensor([1, 2]), torch.tensor([2, 4]))  # integer tensors
    assert ints.dtype == torch.float64 and ints.item() == pytest.approx(1.0)
    assert MT.correlation([1.0, 2.0], [2.0, 3.0]).dtype == torch.float64  # lists: float64


# ----------------------------------------------------------------------------- lp norm
@given(arrays(np.float64, st.integers(1, 10), elements=entries),
       st.sampled_from([1.0, 1.1, 1.5, 2.0, 3.0, 7.5]))
def test_lp_norm_equals_the_formula(a, lp):
    m = max(abs(float(x)) for x in a)  # factored out so the oracle's powers do not underflow
    ref = m * math.fsum((abs(float(x)) / m) ** lp for x in a) ** (1 / lp) if m else 0.0
    assert math.isclose(float(MT.lp_norm(a, lp, dims=1)), ref, rel_tol=1e-12, abs_tol=1e-300)


@given(arrays(np.float64, (3, 3), elements=st.floats(0.5, 2)), scales,
       st.sampled_from([torch.float32, torch.float64]), st.sampled_from([1.1, 2.0, 3.0]))
def test_lp_norm_is_scale_safe(a, c, dtype, lp):
    A = torch.tensor(a, dtype=dtype)
    got, ref = MT.lp_norm(c * A, lp), abs(c) * MT.lp_norm(A, lp).double()
    assert math.isclose(float(got), float(ref), rel_tol=1e-5 if dtype == torch.float32 else 1e-12)


def test_lp_norm_tiny_and_huge_entries():
    for scale, dtype in [(1e-60, torch.float64), (1e-20, torch.float32), (1e20, torch.float32)]:
        A = torch.tensor([1.0, 2.0, 3.0], dtype=dtype)
        ref = float(scale) * (1 + 2**7.5 + 3**7.5) ** (1 / 7.5)
        got = float(MT.lp_norm(scale * A, 7.5))
        assert math.isclose(got, ref, rel_tol=1e-5 if dtype == torch.float32 else 1e-12)


def test_lp_norm_batched_nan_inf_and_bad_lp():
    W = rnd(4, 3, 3)
    n, rows = MT.lp_norm(W, 1.5), MT.lp_norm(W, 1.5, dims=1)
    assert rows.shape == (4, 3)
    for b in range(4):
        ref = math.fsum(abs(float(x)) ** 1.5 for x in W[b].flatten()) ** (1 / 1.5)
        assert math.isclose(float(n[b]), ref, rel_tol=1e-12)
        for i in range(3):
            ref = math.fsum(abs(float(x)) ** 1.5 for x in W[b, i]) ** (1 / 1.5)
            assert math.isclose(float(rows[b, i]), ref, rel_tol=1e-12)
    assert MT.lp_norm(torch.zeros(2, 2), 2.0).item() == 0.0
    assert torch.isnan(MT.lp_norm(torch.tensor([NAN, 1.0]), 2.0))
    assert MT.lp_norm(torch.tensor([math.inf, 1.0]), 2.0).item() == math.inf
    assert torch.isnan(MT.lp_norm(torch.tensor([math.inf, NAN]), 2.0))
    with pytest.raises(ValueError, match=r"^lp: expected a finite number >= 1, got 0.5$"):
        MT.lp_norm(W, 0.5)


# ----------------------------------------------------------------------------- sparsity
def sparsity_loop(W, rel):
    flat = [abs(float(x)) for x in np.ravel(W)]
    top = max(flat)
    return sum(x < rel * top for x in flat) / len(flat)


@given(arrays(np.float64, (2, 4, 4), elements=entries), st.sampled_from([1e-3, 0.01, 0.3]),
       scales)
def test_sparsity_counts_and_is_scale_free(W, rel, c):
    got = MT.sparsity(W, rel)
    assert got.shape == (2,)
    for b in range(2):
        assert float(got[b]) == sparsity_loop(W[b], rel)
    if np.abs(W).max() > 0:
        assert torch.equal(MT.sparsity(abs(c) * torch.tensor(W), rel),
                           MT.sparsity(torch.tensor(W) * abs(c), rel))


def test_sparsity_cases():
    W = torch.tensor([[1.0, 0.0], [0.005, -2.0]])
    assert MT.sparsity(W, 0.01).item() == 0.5  # 0 and 0.005 < 0.02
    assert MT.sparsity(W, 0.002).item() == 0.25
    assert MT.sparsity(W[0], 0.01, dims=1).item() == 0.5
    assert MT.sparsity(W, 0.002, dims=1).tolist() == [0.5, 0.0]  # per row
    assert MT.sparsity(torch.zeros(2, 2), 0.01).item() == 0.0
    W[0, 0] = NAN
    assert torch.isnan(MT.sparsity(W, 0.01))
    rows = MT.sparsity(W, 0.01, dims=1)  # NaN only where the NaN is
    assert torch.isnan(rows[0]) and rows[1].item() == 0.5
    with pytest.raises(ValueError, match=r"^rel: expected"):
        MT.sparsity(W, -1)
    with pytest.raises(ValueError, match=r"^dims: expected one of"):
        MT.sparsity(W, 0.1, dims=3)


# ----------------------------------------------------------------------------- Bregman
def bregman_loop(W, V, lp):
    w, v = [float(x) for x in np.ravel(W)], [float(x) for x in np.ravel(V)]
    return math.fsum(abs(a) ** lp / lp + (lp - 1) / lp * abs(b) ** lp
                     - math.copysign(abs(b) ** (lp - 1), b) * a for a, b in zip(w, v))


@pytest.mark.parametrize("lp", [1.1, 1.75, 2.0, 3.0])
def test_bregman_equals_the_formula(lp):
    W, V = rnd(3, 4, 4), rnd(3, 4, 4)
    D = MT.bregman(W, V, lp)
    for b in range(3):
        assert math.isclose(float(D[b]), bregman_loop(W[b], V[b], lp), rel_tol=1e-12)
    assert MT.bregman(W, W, lp).abs().max() < 1e-12
    v = rnd(5)
    assert math.isclose(float(MT.bregman(2 * v, v, lp)), bregman_loop(2 * v, v, lp),
                        rel_tol=1e-12)
    assert MT.bregman_divergence is MT.bregman
    assert torch.equal(MT.bregman(W, V), MT.bregman(W, V, 2.0))  # the default is p = 2


@pytest.mark.parametrize("lp", [1.1, 1.75, 3.0])
def test_bregman_direction_is_the_divergence_of_unit_matrices(lp):
    W, V = rnd(3, 6, 6), rnd(3, 6, 6)
    Wn = W / MT.lp_norm(W, lp)[:, None, None]
    Vn = V / MT.lp_norm(V, lp)[:, None, None]
    got = MT.bregman_direction(W, 7 * V, lp)
    for b in range(3):
        assert math.isclose(float(got[b]), bregman_loop(Wn[b], Vn[b], lp), rel_tol=1e-10)
    assert MT.bregman_direction(W, 5 * W, lp).abs().max() < 1e-12
    assert MT.bregman_direction(W[0], torch.zeros(6, 6), lp) == 1.0  # a zero matrix stays 0
    assert MT.directional_bregman is MT.bregman_direction
    # scale-free in both arguments, also for objects of lp-norm below 1
    assert torch.allclose(MT.bregman_direction(1e-3 * W, 1e-4 * V, lp),
                          MT.bregman_direction(W, V, lp), rtol=1e-12)
    # dims=1: rows of a square matrix are separate vectors
    rows = MT.bregman_direction(W[0], V[0], lp, dims=1)
    for i in range(6):
        a = W[0, i] / MT.lp_norm(W[0, i], lp)
        b = V[0, i] / MT.lp_norm(V[0, i], lp)
        assert math.isclose(float(rows[i]), bregman_loop(a, b, lp), rel_tol=1e-10)


def test_bregman_at_p2_closed_forms():
    W, V = rnd(4, 4), rnd(4, 4)
    assert torch.allclose(MT.bregman(W, V, 2.0), 0.5 * ((W - V) ** 2).sum(), atol=1e-12)
    assert torch.allclose(MT.bregman_direction(W, V, 2.0), 1 - MT.correlation(W, V), atol=1e-12)
    assert torch.equal(MT.bregman_direction(W, V), MT.bregman_direction(W, V, 2.0))
    for bad in (1.0, 0.5, True, NAN):
        with pytest.raises(ValueError, match=r"^lp: expected a finite number > 1"):
            MT.bregman(W, V, bad)
        with pytest.raises(ValueError, match=r"^lp: expected a finite number > 1"):
            MT.bregman_direction(W, V, bad)


# ----------------------------------------------------------------------------- rank, max prob
def test_numerical_rank_relative():
    U = rnd(8, 3)
    W = U @ rnd(3, 8)
    assert MT.numerical_rank(W) == 3
    assert MT.numerical_rank(1e-9 * W) == 3  # scale-free
    noisy = W + 1e-9 * rnd(8, 8)
    assert MT.numerical_rank(noisy, rtol=1e-6) == 3 and MT.numerical_rank(noisy, rtol=1e-12) == 8
    assert MT.numerical_rank(torch.stack([W, torch.eye(8, dtype=torch.float64)])).tolist() == [3, 8]
    assert MT.numerical_rank(torch.zeros(3, 3)) == 0
    # the threshold is strict and relative to the top singular value
    D = torch.diag(torch.tensor([1.0, 1e-3, 1e-6], dtype=torch.float64))
    assert MT.numerical_rank(D, rtol=1e-3).item() == 1
    assert MT.numerical_rank(D, rtol=0.99e-3).item() == 2
    with pytest.raises(ValueError, match="^W: expected a matrix"):
        MT.numerical_rank(torch.ones(3))
    with pytest.raises(ValueError, match="^rtol: expected a finite number > 0"):
        MT.numerical_rank(W, rtol=0)


def test_max_prob_reductions_against_loops():
    s = torch.softmax(3 * rnd(3, 2, 5, 4), -1)  # two leading dims
    per = [[[max(s[c, b, i].tolist()) for i in range(5)] for b in range(2)] for c in range(3)]
    assert MT.max_prob(s, "none").tolist() == per
    assert torch.allclose(MT.max_prob(s), torch.tensor(
        [[math.fsum(r) / 5 for r in q] for q in per], dtype=torch.float64), rtol=1e-14)
    assert MT.max_prob(s, "min").tolist() == [[min(r) for r in q] for q in per]
    one = s[0, 0]  # (n, T): a single set of inputs
    assert MT.max_prob(one, "none").tolist() == per[0][0]
    with pytest.raises(ValueError, match=r"^reduce: expected one of \('mean', 'min', 'none'\)"):
        MT.max_prob(s, "max")
    with pytest.raises(ValueError, match=r"^s: expected shape \(\.\.\., n, T\)"):
        MT.max_prob(torch.ones(3))


@pytest.mark.parametrize("A, B, msg", [
    (torch.ones(3, 2, 2), torch.ones(4, 2, 2), "batch dimensions that broadcast"),
    (torch.ones(0), torch.ones(0), "non-empty"),
    ([], [], "non-empty"),
    (torch.ones(2, 0, 0), torch.ones(2, 0, 0), "non-empty"),
])
def test_correlation_names_shapes_it_cannot_pair(A, B, msg):
    with pytest.raises(ValueError, match=f"^A, B: expected {msg}"):
        MT.correlation(A, B)


def test_numerical_rank_of_a_nonfinite_matrix_is_nan():
    """NaN in gives NaN out, matrix by matrix: the other matrices of a batch keep their rank."""
    W = torch.stack([torch.eye(3, dtype=torch.float64), torch.full((3, 3), float("nan")),
                     torch.diag(torch.tensor([1.0, 0.0, math.inf], dtype=torch.float64))])
    r = MT.numerical_rank(W)
    assert r[0] == 3 and math.isnan(r[1]) and math.isnan(r[2])
    assert math.isnan(MT.numerical_rank(torch.full((2, 2), float("nan"))))
