"""Property-based tests of the public API (hypothesis): scale invariance, feasibility, validation.

* scale invariance -- scaling the tokens by c > 0 scales the Att-SVM answer by 1/c (its
  direction is unchanged, its norm is the optimal value over c, in every norm), the v-SVM's the
  same way; the optimal tokens do not move when the head is scaled; the correlation of two
  objects does not change when either is scaled by a positive number, and flips sign with a
  negative one;
* feasibility -- on a random instance that is feasible (d >= max(T-1, n), general position)
  ``att_svm`` returns a W whose every margin is >= 1 within the tolerance, recomputed here in
  numpy (not by the library); with the multipliers the Frobenius answer satisfies the KKT
  conditions; ``head_svm`` meets its margins too;
* validation -- one argument of a valid call is spoilt (NaN or Inf in a tensor, a wrong shape,
  labels outside {-1, +1}, a selection outside [0, T), a seed outside [0, 2**64)): the call
  raises ValueError and the message starts with the argument's name; never another exception.

Deterministic and database-free (``derandomize=True``); the file runs in well under a minute.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnlib as al
from attnlib import svm
from attnlib._validate import SEED_MAX
from attnlib._validate import seed as check_seed
from attnlib.data import AttentionData, random_data
from attnlib.metrics import correlation
from attnlib.sequences import random_sequences
from attnlib.tokens import optimal_tokens, scores, selected_tokens

FUZZ = settings(max_examples=25, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])
F64 = dict(dtype=torch.float64)


@st.composite
def feasible(draw):
    """A random Att-SVM instance that is feasible: d >= max(T-1, n), tokens in general
    position (random_data's Gaussian draw)."""
    n = draw(st.integers(1, 4))
    T = draw(st.integers(2, 4))
    d = draw(st.integers(max(T - 1, n, 2), 6))
    seed = draw(st.integers(0, 2**32))
    return random_data(n, T, d, seed=seed, device="cpu")


def _margins(X, z, W, alpha):
    """Every margin (x_{i alpha_i} - x_it)^T W z_i, t != alpha_i, in numpy."""
    X, z, W = (np.asarray(t, dtype=np.float64) for t in (X, z, W))
    out = []
    for i in range(X.shape[0]):
        a = int(alpha[i])
        for t in range(X.shape[1]):
            if t != a:
                out.append((X[i, a] - X[i, t]) @ W @ z[i])
    return np.array(out)


def _norm(W, norm):
    W = np.asarray(W, dtype=np.float64)
    if norm == "fro":
        return float(np.linalg.norm(W))
    if norm == "nuc":
        return float(np.linalg.norm(W, "nuc"))
    return float((np.abs(W) ** norm).sum() ** (1 / norm))


# ----------------------------------------------------------------------------- scale invariance
@FUZZ
@given(data=feasible(), log_c=st.floats(-3, 3), norm=st.sampled_from(["fro", "nuc", 1.5]))
def test_att_svm_scales_as_one_over_the_token_scale(data, log_c, norm):
    c = 10.0 ** log_c
    alpha = optimal_tokens(data)
    W = svm.att_svm(data.X, z=data.z, alpha=alpha, norm=norm)
    Wc = svm.att_svm(c * data.X, z=data.z, alpha=alpha, norm=norm)
    # the optimal value scales exactly as 1/c (the solution is unique for fro, not for nuc)
    assert math.isclose(c * _norm(Wc, norm), _norm(W, norm), rel_tol=1e-4)
    if norm == "fro":
        assert float(correlation(W, Wc)) > 1 - 1e-6
    assert _margins(c * data.X, data.z, Wc, alpha).min() >= 1 - 1e-5


@FUZZ
@given(data=feasible(), log_c=st.floats(-3, 3))
def test_head_svm_scales_and_optimal_tokens_ignore_the_head_scale(data, log_c):
    c = 10.0 ** log_c
    alpha = optimal_tokens(data)
    assert torch.equal(optimal_tokens(data.with_(v=c * data.v)), alpha)
    torch.testing.assert_close(scores(data.with_(v=c * data.v)), c * scores(data),
                               rtol=1e-12, atol=0)
    X = data.X
    if data.n > data.d:  # v-SVM feasible for d >= n
        return
    v = svm.head_svm(X, Y=data.Y, alpha=alpha)
    vc = svm.head_svm(c * X, Y=data.Y, alpha=alpha)
    torch.testing.assert_close(c * vc, v, rtol=1e-4, atol=1e-6 * float(v.abs().max()))


@FUZZ
@given(seed=st.integers(0, 2**32), dims=st.sampled_from([(5,), (3, 3), (2, 4, 4)]),
       log_c=st.floats(-250, 250), sign=st.sampled_from([1.0, -1.0]))
def test_correlation_is_invariant_under_scaling(seed, dims, log_c, sign):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(*dims, generator=g, **F64)
    B = torch.randn(*dims, generator=g, **F64)
    c = sign * 10.0 ** log_c
    r = correlation(A, B)
    torch.testing.assert_close(correlation(c * A, B), sign * r, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(correlation(A, c * B), sign * r, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(correlation(A, c * A), torch.full_like(r, sign), rtol=1e-12,
                               atol=0)
    assert bool((r.abs() <= 1).all())


@FUZZ
@given(data=feasible(), log_c=st.floats(-2, 2))
def test_selected_tokens_ignore_a_positive_scale_of_W(data, log_c):
    W = torch.randn(data.d, data.d, generator=torch.Generator().manual_seed(0), **F64)
    sel = selected_tokens(data, W)
    assert torch.equal(selected_tokens(data, 10.0 ** log_c * W), sel)


# ----------------------------------------------------------------------------- feasibility
@FUZZ
@given(data=feasible(), norm=st.sampled_from(["fro", "nuc", 1.5, 3.0]))
def test_att_svm_meets_every_margin(data, norm):
    alpha = optimal_tokens(data)
    W = svm.att_svm(data, alpha=alpha, norm=norm)
    assert W.shape == (data.d, data.d) and bool(torch.isfinite(W).all())
    assert _margins(data.X, data.z, W, alpha).min() >= 1 - 1e-5


@FUZZ
@given(data=feasible())
def test_frobenius_att_svm_meets_its_kkt_conditions(data):
    """W = sum lam_it (x_{i alpha_i} - x_it) z_i^T with lam >= 0, lam = 0 off the margin."""
    alpha = optimal_tokens(data)
    W, lam = svm.att_svm(data, alpha=alpha, return_dual=True)
    X, z, Wn, L = (t.numpy() for t in (data.X, data.z, W, lam))
    assert L.min() >= -1e-9 and np.all(L[np.arange(data.n), alpha.numpy()] == 0)
    G = sum(L[i, t] * np.outer(X[i, int(alpha[i])] - X[i, t], z[i])
            for i in range(data.n) for t in range(data.T))
    np.testing.assert_allclose(G, Wn, atol=1e-5 * max(1.0, np.abs(Wn).max()))
    for i in range(data.n):
        for t in range(data.T):
            if t != int(alpha[i]) and L[i, t] > 1e-6 * L.max():
                m = (X[i, int(alpha[i])] - X[i, t]) @ Wn @ z[i]
                assert abs(m - 1) <= 1e-4, (i, t, m)


@FUZZ
@given(data=feasible())
def test_head_svm_meets_every_margin(data):
    if data.n > data.d:
        return
    alpha = optimal_tokens(data)
    v = svm.head_svm(data, alpha=alpha).numpy()
    sel = data.X.numpy()[np.arange(data.n), alpha.numpy()]
    assert (data.Y.numpy() * (sel @ v)).min() >= 1 - 1e-5


# ----------------------------------------------------------------------------- validation
def _raises_naming(name, f, *args, **kw):
    with pytest.raises(ValueError) as err:  # any other type fails the test
        f(*args, **kw)
    assert str(err.value).startswith(f"{name}:"), (name, str(err.value))


BAD_VALUES = st.sampled_from([float("nan"), float("inf"), -float("inf")])


@FUZZ
@given(data=feasible(), field=st.sampled_from(["X", "Y", "z", "v"]), bad=BAD_VALUES,
       where=st.integers(0, 10**6))
def test_a_non_finite_entry_is_named(data, field, bad, where):
    t = getattr(data, field).clone()
    t.view(-1)[where % t.numel()] = bad
    kw = dict(X=data.X, Y=data.Y, z=data.z, v=data.v) | {field: t}
    _raises_naming(field, AttentionData, **kw)
    if field == "X":
        _raises_naming("X", svm.att_svm, t, z=data.z, alpha=optimal_tokens(data))
        _raises_naming("X", selected_tokens, t, torch.eye(data.d, **F64), z=data.z)
    if field == "z":
        _raises_naming("z", svm.att_svm, data.X, z=t, alpha=optimal_tokens(data))
    if field == "Y":
        _raises_naming("Y", svm.head_svm, data.X, Y=t, alpha=optimal_tokens(data))


@FUZZ
@given(data=feasible(), label=st.one_of(st.floats(-3, 3).filter(lambda y: abs(y) != 1),
                                        st.sampled_from([0.0, 2.0, -2.0, 0.5])),
       where=st.integers(0, 10**6))
def test_labels_outside_plus_minus_one_are_named(data, label, where):
    Y = data.Y.clone()
    Y[where % data.n] = label
    _raises_naming("Y", AttentionData, data.X, Y, data.z, data.v)
    _raises_naming("Y", svm.head_svm, data.X, Y=Y, alpha=optimal_tokens(data))


@FUZZ
@given(data=feasible(), extra=st.integers(1, 3),
       which=st.sampled_from(["z_n", "z_d", "Y_n", "v_d", "alpha_n", "alpha_T", "X_ndim"]))
def test_a_wrong_shape_is_named(data, extra, which):
    n, T, d = data.n, data.T, data.d
    alpha = optimal_tokens(data)
    if which == "z_n":
        _raises_naming("z", svm.att_svm, data.X, z=torch.zeros(n + extra, d, **F64), alpha=alpha)
        _raises_naming("z", AttentionData, data.X, data.Y, torch.zeros(n + extra, d), data.v)
    elif which == "z_d":
        _raises_naming("z", svm.att_svm, data.X, z=torch.zeros(n, d + extra, **F64), alpha=alpha)
    elif which == "Y_n":
        _raises_naming("Y", AttentionData, data.X, torch.ones(n + extra), data.z, data.v)
        _raises_naming("Y", svm.head_svm, data.X, Y=torch.ones(n + extra), alpha=alpha)
    elif which == "v_d":
        _raises_naming("v", AttentionData, data.X, data.Y, data.z, torch.ones(d + extra))
    elif which == "alpha_n":
        _raises_naming("alpha", svm.att_svm, data, alpha=torch.zeros(n + extra, dtype=torch.long))
    elif which == "alpha_T":
        bad = alpha.clone()
        bad[0] = T - 1 + extra
        _raises_naming("alpha", svm.att_svm, data, alpha=bad)
        bad[0] = -extra
        _raises_naming("alpha", svm.att_svm, data, alpha=bad)
    else:
        X = data.X.reshape(-1)[: extra * d].reshape(extra, d)  # 2-dim
        _raises_naming("X", svm.att_svm, X, z=data.z, alpha=alpha)
        _raises_naming("X", selected_tokens, X, torch.eye(d, **F64), z=data.z)


@FUZZ
@given(dims=st.sampled_from([(0, 3, 2), (2, 0, 2), (2, 3, 0), (0, 2, 3, 2)]))
def test_empty_tokens_are_named(dims):
    X = torch.zeros(*dims, **F64)
    z = torch.zeros(*dims[:-2], dims[-1], **F64)
    alpha = torch.zeros(dims[-3], dtype=torch.long)
    _raises_naming("X", svm.att_svm, X, z=z, alpha=alpha)
    _raises_naming("X", selected_tokens, X, torch.eye(dims[-1], **F64), z=z)
    _raises_naming("X", AttentionData, X, torch.ones(dims[-3]))


SEEDS_BAD = st.one_of(st.integers(SEED_MAX + 1, 2**200), st.integers(-(2**70), -1),
                      st.sampled_from([1.5, float("nan"), True, "3", None]))


@FUZZ
@given(seed=SEEDS_BAD)
def test_a_seed_outside_the_generator_range_is_named(seed):
    _raises_naming("seed", check_seed, seed)
    _raises_naming("seed", al.TrainConfig, seed=seed)
    data = random_data(2, 3, 4, seed=0, device="cpu")
    _raises_naming("seed", al.train, data, steps=1, seed=seed)
    _raises_naming("seed", al.regularization_path, data, [1.0], steps=1, seed=seed)
    _raises_naming("seed", random_data, 2, 3, 4, seed=seed)
    _raises_naming("seed", random_sequences, 2, 3, 4, seed=seed)


@FUZZ
@given(seed=st.one_of(st.integers(0, SEED_MAX), st.integers(0, 200).map(lambda k: SEED_MAX - k)),
       count=st.integers(1, 100))
def test_seeds_of_every_trial_fit_the_generator(seed, count):
    if seed + count - 1 <= SEED_MAX:
        assert check_seed(seed, count=count) == seed
        torch.Generator().manual_seed(seed + count - 1)  # the last trial's seed is a real one
        random_data(1, 2, 2, trials=count, seed=seed, device="cpu")
    else:
        _raises_naming("seed", check_seed, seed, count=count)
        _raises_naming("seed", random_data, 1, 2, 2, trials=count, seed=seed, device="cpu")


@FUZZ
@given(norm=st.one_of(st.floats(-10, 1), st.floats(4.0, 1e300, exclude_min=True),
                     st.sampled_from([float("inf"), float("nan"), "l2", None, True, 1e6])))
def test_a_bad_norm_is_named(norm):
    data = random_data(2, 3, 4, seed=0, device="cpu")
    _raises_naming("norm", svm.att_svm, data, norm=norm)
    _raises_naming("norm", svm.head_svm, data, norm=norm)


@FUZZ
@given(solver=st.one_of(st.sampled_from(["GUROBI", "MOSEK", "CPLEX", "ECOS", "nope", ""]),
                        st.text(min_size=1, max_size=8).filter(lambda s: s.upper() not in
                                                              ("CLARABEL", "SCS", "OSQP",
                                                               "SCIPY", "HIGHS"))))
def test_a_solver_that_is_not_installed_is_named(solver):
    data = random_data(2, 3, 4, seed=0, device="cpu")
    _raises_naming("solver", svm.att_svm, data, solver=solver)
    _raises_naming("solvers", svm.SolveConfig, solvers=(solver,))


@FUZZ
@given(name=st.sampled_from(["lr", "steps", "lp", "reg", "eps", "record_every", "param",
                             "method", "loss", "normalized"]),
       bad=st.sampled_from([float("nan"), float("inf"), -float("inf"), -1, -0.5, "1", "x",
                            [1.0], 1.5j]))
def test_a_bad_training_setting_is_named(name, bad):
    if name == "normalized" and bad in (-1, -0.5):
        bad = 0.5  # not a bool
    if name in ("steps", "record_every") and bad == -0.5:
        bad = 2.5
    data = random_data(2, 3, 4, seed=0, device="cpu")
    _raises_naming(name, al.train, data, **({"steps": 2} | {name: bad}))


@FUZZ
@given(a=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       b=st.lists(st.integers(1, 3), min_size=1, max_size=3), empty=st.booleans())
def test_correlation_of_shapes_that_do_not_fit_is_named(a, b, empty):
    """Objects (the last dimension, or the last two when both end square) must agree and the
    batch dimensions broadcast; else a ValueError naming A, B."""
    A, B = torch.ones(*a, **F64), torch.ones(*b, **F64)
    if empty:
        A, B = torch.ones(*a[:-1], 0, **F64), torch.ones(*a[:-1], 0, **F64)
    square = A.ndim >= 2 and B.ndim >= 2 and A.shape[-1] == A.shape[-2] \
        and B.shape[-1] == B.shape[-2]
    k = 2 if square else 1
    fits = not empty and A.shape[-k:] == B.shape[-k:]
    try:
        torch.broadcast_shapes(A.shape[:-k], B.shape[:-k])
    except RuntimeError:
        fits = False
    if fits:
        assert bool(torch.isfinite(correlation(A, B)).all())
    else:
        _raises_naming("A, B", correlation, A, B)
