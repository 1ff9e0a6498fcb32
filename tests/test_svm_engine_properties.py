"""attnlib.svm.engine: what every certified answer satisfies, on every solve path.

The paths: the fast solvers (one NNLS for Frobenius, a batched interior point for nuclear), the
conic solve of CHUNK Frobenius instances as one problem, the conic solve of one instance (raw,
rescaled, then the next solver), and Farkas certificates for infeasibility. The oracles share no
code with the engine: the per-constraint cvxpy primal (attnlib.svm.primal, or written out here
for equality rows), the least-distance NNLS of tests/svm_oracles.py, one-dimensional instances
solved by hand, and exact invariances of the problem (row order, row scale, data scale,
rotations). The engine answers at a relative duality gap of 1e-6: W within ~1e-6 (Frobenius,
strongly convex) or ~1e-4 (nuclear, lp) of the optimum.
"""

import cvxpy as cp
import numpy as np
import pytest
from svm_oracles import TIGHT, att_rows, close, ldp

from attnlib.svm import SolveConfig, UncertifiedError, engine
from attnlib.svm.certificate import certify, farkas
from attnlib.svm.engine import CHUNK, Infeasible, Rows, solve_all, solve_many
from attnlib.svm.primal import att_svm_primal

NORMS = ["fro", "nuc", 1.5]
FAST, CONIC = SolveConfig(), SolveConfig(fast=False)
# (config, instances per call): fast solvers; conic, one by one; conic, CHUNK as one problem
PATHS = {"fast": (FAST, 1), "conic": (CONIC, 1), "chunk": (CONIC, CHUNK)}
REL = {"fro": 1e-6, "nuc": 1e-4, 1.5: 1e-4}  # W's certified accuracy, relative


def _att(seed, n=2, T=3, d=2):
    """A random Att-SVM as rows (rank-one A_k, b = 1) and its per-constraint primal W."""
    g = np.random.default_rng(seed)
    X, z = g.standard_normal((n, T, d)), g.standard_normal((n, d))
    alpha = g.integers(0, T, n)
    A, _ = att_rows(X, z, alpha)
    return Rows(A, np.ones(len(A)), None, None, (d, d)), (X, z, alpha)


def _primal_W(data, norm):
    """The oracle's W: the least-distance NNLS for fro (exact up to rounding; the cvxpy primal
    minimises the unsquared norm, its W ~1e-6 off), else the per-constraint primal."""
    if norm == "fro":
        A, _ = att_rows(*data)
        return ldp(A, np.ones(len(A)))[0].reshape(data[1].shape[1], -1)
    return att_svm_primal(*data, norm=norm)[1]


def _objective(w, shape, norm):
    """The dual objective b'lam at the optimum: ||w||^2 (fro), ||W||_* (nuc), p sum|w|^p."""
    if norm == "fro":
        return float(w @ w)
    if norm == "nuc":
        return float(np.linalg.norm(w.reshape(shape), "nuc"))
    return norm * float((np.abs(w) ** norm).sum())


def _solve(items, norm, path):
    """The answers (w, lam, solver) of ``items`` on ``path`` (repeated to fill a chunk)."""
    config, k = PATHS[path]
    outs = solve_many((items * k)[:max(k, len(items))], norm, config)
    assert not any(isinstance(o, Exception) for o in outs), outs
    return [(W.reshape(-1), lam, who) for W, lam, who in outs[:len(items)]]


# ----------------------------------------------------------------------------- answers
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("norm", NORMS)
def test_every_path_equals_the_primal_with_strong_duality(norm, path):
    instances = [_att(seed) for seed in range(3)]
    outs = _solve([r for r, _ in instances], norm, path)
    for (r, data), (w, lam, who) in zip(instances, outs):
        assert who == ("fast" if path == "fast" and norm != 1.5 else "CLARABEL")
        close(w, _primal_W(data, norm).reshape(-1), REL[norm])
        assert (lam >= 0).all() and (r.A @ w >= 1 - 1e-6).all()
        # zero duality gap and complementary slackness, stated by hand for each norm
        assert r.b @ lam == pytest.approx(_objective(w, r.shape, norm), rel=10 * REL[norm])
        assert abs(lam @ (r.A @ w - r.b)) <= 1e-6 * (r.b @ lam)
        if norm == "fro":  # and the multipliers of the least-distance program
            close(lam, ldp(r.A, r.b)[1], 1e-5)


def _rotation(g, k):
    return np.linalg.qr(g.standard_normal((k, k)))[0]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("norm", NORMS)
def test_metamorphic_relations_on_every_path(norm, path):
    """Permuting rows permutes lam; scaling row k by c_k divides lam_k by c_k; A -> sA
    (s far outside the unit scale) gives w/s; b -> cb gives cw; a rotation of the rows that
    keeps the norm (Q for fro, U M V' for nuc, a signed permutation for lp) rotates w."""
    g = np.random.default_rng(5)
    r, _ = _att(7)
    (w, lam, _), = _solve([r], norm, path)
    m, D = r.A.shape
    perm = g.permutation(m)
    (wp, lp_, _), = _solve([r._replace(A=r.A[perm], b=r.b[perm])], norm, path)
    close(wp, w, REL[norm])
    close(lp_, lam[perm], 10 * REL[norm])
    c = g.uniform(0.1, 10.0, m)
    (wc, lc, _), = _solve([r._replace(A=r.A * c[:, None], b=r.b * c)], norm, path)
    close(wc, w, REL[norm])
    close(lc * c, lam, 10 * REL[norm])
    power = {"fro": 2.0, "nuc": 1.0, 1.5: 1.5}[norm]  # b'lam = ||w||^2, ||W||_*, p sum|w|^p
    for s in (1e-7, 1e-3, 1e5):
        (ws, ls, _), = _solve([r._replace(A=r.A * s)], norm, path)
        close(ws * s, w, REL[norm])
        close(ls * s**power, lam, 10 * REL[norm])
    (wb, _, _), = _solve([r._replace(b=3.0 * r.b)], norm, path)
    close(wb, 3.0 * w, REL[norm])
    d = r.shape[0]
    if norm == "fro":
        Q = _rotation(g, D)
        A2, want = r.A @ Q, Q.T @ w
    elif norm == "nuc":
        U, V = _rotation(g, d), _rotation(g, d)
        A2 = np.stack([(U @ a.reshape(d, d) @ V.T).ravel() for a in r.A])
        want = (U @ w.reshape(d, d) @ V.T).ravel()
    else:
        P, sign = g.permutation(D), g.choice([-1.0, 1.0], D)
        A2, want = r.A[:, P] * sign, w[P] * sign
    (w2, l2, _), = _solve([r._replace(A=A2)], norm, path)
    close(w2, want, REL[norm])
    close(l2, lam, 10 * REL[norm])


def _with_equalities(norm):
    """2 inequality and 2 equality rows for a 2x2 W, and the W of its written-out primal."""
    g = np.random.default_rng(11)
    r = Rows(g.standard_normal((2, 4)), np.ones(2), g.standard_normal((2, 4)),
             g.standard_normal(2), (2, 2))
    w = cp.Variable(4)
    obj = {"fro": cp.norm(w), "nuc": cp.normNuc(cp.reshape(w, (2, 2), order="C"))}.get(
        norm, cp.pnorm(w, 1.5))
    cp.Problem(cp.Minimize(obj), [r.A @ w >= r.b, r.C @ w == r.c]).solve(**TIGHT)
    return r, w.value


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("config", [FAST, CONIC])
def test_equality_rows_equal_the_written_out_primal(norm, config):
    # (Frobenius: the fast way eliminates the equalities, ldp_eq; else the conic path)
    r, w = _with_equalities(norm)
    (W, lam), = solve_all([r], norm, config)
    close(W.reshape(-1), w, REL[norm])
    assert np.abs(r.C @ W.reshape(-1) - r.c).max() < 1e-7 and (lam >= 0).all()


@pytest.mark.parametrize("config", [FAST, CONIC])
def test_one_dimensional_instances_solved_by_hand(config):
    # w in [1, 2] (rows 2w >= 2, -0.5w >= -1): w = 1, held by the first row alone, whose
    # multiplier is (d/dw of 1/2 w^2, |w|, |w|^1.5 at 1) / 2
    r = Rows(np.array([[2.0], [-0.5]]), np.array([2.0, -1.0]), None, None, (1,))
    for norm, grad in (("fro", 1.0), ("nuc", 1.0), (1.5, 1.5)):
        rr = r._replace(shape=(1, 1)) if norm == "nuc" else r
        (W, lam), = solve_all([rr], norm, config)
        assert W.shape == rr.shape and abs(W.item() - 1.0) < 1e-7
        np.testing.assert_allclose(lam, [grad / 2, 0.0], atol=2e-6)
        # with the equality w = 1.5 the inequality rows are slack: w = 1.5, lam = 0
        eq = rr._replace(C=np.ones((1, 1)), c=np.array([1.5]))
        (W, lam), = solve_all([eq], norm, config)
        assert abs(W.item() - 1.5) < 1e-7 and np.abs(lam).max() < 2e-6


@pytest.mark.parametrize("norm", NORMS)
def test_homogeneous_instances_are_answered_exactly(norm):
    # every b <= 0 and c = 0: w = 0 is feasible, hence optimal, with lam = 0, exactly
    g = np.random.default_rng(3)
    ineq = Rows(g.standard_normal((3, 4)), np.array([0.0, -1.0, -0.5]), None, None, (2, 2))
    for r in (ineq, ineq._replace(C=g.standard_normal((1, 4)), c=np.zeros(1))):
        for config in (FAST, CONIC):
            (W, lam), = solve_all([r], norm, config)
            assert (W == 0).all() and W.shape == (2, 2) and (lam == 0).all()


def test_a_failed_nuclear_group_is_answered_by_the_conic_path(monkeypatch):
    # two groups of the fast nuclear solver (3 rows; 2 rows and a masked zero row 0 >= -1):
    # whichever group's interior point fails, every answer equals the primal
    r, (X, z, alpha) = _att(2, n=1, T=4, d=2)
    masked = r._replace(A=r.A * np.array([[1.0], [1.0], [0.0]]), b=np.array([1.0, 1.0, -1.0]))
    mask = np.ones((1, 4), dtype=bool)
    mask[0, att_rows(X, z, alpha)[1][2][1]] = False  # the token of the third row
    want = [att_svm_primal(X, z, alpha, "nuc")[1], att_svm_primal(X, z, alpha, "nuc", mask)[1]]
    real = engine.nuclear_ipm
    for fail in (set(), {3}, {2}, {2, 3}):
        def ipm(u, v, b, *a, fail=fail):
            if b.shape[1] in fail:
                raise np.linalg.LinAlgError("planted")
            return real(u, v, b, *a)

        monkeypatch.setattr(engine, "nuclear_ipm", ipm)
        outs = solve_many([r, masked], "nuc", FAST)
        for (W, _, who), W_ref, k in zip(outs, want, (3, 2)):
            assert who == ("CLARABEL" if k in fail else "fast")
            close(W, W_ref, 1e-4)
        assert abs(outs[1][1][2]) < 1e-9  # the zero row has no multiplier


# ----------------------------------------------------------------------------- certificates
SPOIL = 1e-4  # above tol (1e-6), below first_order_tol (1e-3)


def _spoil(monkeypatch, which, by=SPOIL):
    """The answers of the conic solver calls numbered in ``which`` (None: all, "chunks": those
    of more than one instance) come back shrunk by ``by``; returns the calls' sizes."""
    real, calls = engine._run, []

    def run(comp, items, solver, opts, warm):
        status, out = real(comp, items, solver, opts, warm)
        calls.append(len(items))
        hit = which is None or (which == "chunks" and len(items) > 1) or \
            (isinstance(which, set) and len(calls) - 1 in which)
        if status == "solved" and hit:
            out = [(np.asarray(w) * (1 - by), lam, mu) for w, lam, mu in out]
        return status, out

    monkeypatch.setattr(engine, "_run", run)
    return calls


@pytest.mark.parametrize("norm", NORMS)
def test_a_spoiled_attempt_is_never_returned(monkeypatch, norm):
    """Whichever attempt's answer is off by 1e-4 (the chunk's, the first, the rescaled one),
    the engine returns the primal's answer from another attempt, or UncertifiedError."""
    instances = [_att(seed) for seed in range(CHUNK + 1)]  # a chunk, and one far below unit
    scale = [1.0] * CHUNK + [1e-6]  # scale (rescaled before its first attempt)
    items = [r._replace(A=r.A * s) for (r, _), s in zip(instances, scale)]
    calls = _spoil(monkeypatch, "chunks")
    outs = solve_many(items, norm, CONIC)
    assert max(calls) == (CHUNK if norm == "fro" else 1)  # the chunk path was taken
    for (_, data), (W, _, _), s in zip(instances, outs, scale):
        close(W * s, _primal_W(data, norm), REL[norm])
    for which in ({0}, {0, 1}):  # the first attempt(s) of the rescaled instance
        _spoil(monkeypatch, which)
        (W, _), = solve_all([items[-1]], norm, CONIC)
        close(W * 1e-6, _primal_W(instances[-1][1], norm), REL[norm])
    _spoil(monkeypatch, None)
    with pytest.raises(UncertifiedError) as err:
        solve_all([items[0], items[-1]], norm, CONIC)
    assert err.value.index == 0


def test_the_next_solver_answers_at_its_own_tolerance(monkeypatch):
    # every answer off by 1e-4: Clarabel's are rejected (tol 1e-6), SCS's (first-order,
    # certified at 1e-3) accepted; off by 1e-2, none is
    r, data = _att(4)
    config = SolveConfig(fast=False, solvers=("CLARABEL", "SCS"))
    _spoil(monkeypatch, None)
    (W, _, who), = solve_many([r], "fro", config)
    assert who == "SCS"
    close(W, _primal_W(data, "fro"), config.first_order_tol)
    _spoil(monkeypatch, None, by=1e-2)
    assert isinstance(solve_many([r], "fro", config)[0], UncertifiedError)


def test_a_spoiled_fast_answer_with_equality_rows_is_never_returned(monkeypatch):
    # the fast way of equality rows (ldp_eq) answers at tol: off by 1e-4, its answer is
    # rejected and the conic path answers, equal to the written-out primal
    r, w = _with_equalities("fro")
    assert solve_many([r], "fro", FAST)[0][2] == "fast"  # the fast way is taken
    real = engine.ldp_eq

    def spoiled(*rows):
        status, *sol = real(*rows)
        return (status, sol[0] * (1 - SPOIL), *sol[1:]) if status == "solved" else (status, *sol)

    monkeypatch.setattr(engine, "ldp_eq", spoiled)
    (W, _, who), = solve_many([r], "fro", FAST)
    assert who == "CLARABEL"
    close(W.reshape(-1), w, REL["fro"])


def test_certify_measures_relative_violations():
    """Shrinking the optimum by e violates the active margins by exactly e and leaves a
    duality gap 2e - e^2; scaling a row leaves its violation unchanged; b = 0 rows and
    equality rows are measured against ||row|| ||w||."""
    r, _ = _att(6)
    w, lam = ldp(r.A, r.b)
    assert certify(r, w, lam, np.zeros(0), "fro", 1e-9).ok
    for e in (1e-3, 1e-5):
        c = certify(r, w * (1 - e), lam, np.zeros(0), "fro", 1e-6)
        assert c.margin == pytest.approx(e, rel=1e-6) and c.gap == pytest.approx(2 * e - e * e)
        assert c.ok is (e <= 1e-6)
        k = np.random.default_rng(0).uniform(0.01, 100.0, len(r.b))
        scaled = r._replace(A=r.A * k[:, None], b=r.b * k)
        assert certify(scaled, w * (1 - e), lam / k, np.zeros(0), "fro", 1e-6).margin \
            == pytest.approx(e, rel=1e-6)
    w0 = np.array([-0.5, 0.25])  # violates 3 w1 >= 0 by 1.5 and 4 w2 = 0 by 1
    zero = Rows(np.array([[3.0, 0.0], [0.0, 1.0]]), np.array([0.0, -10.0]),
                np.array([[0.0, 4.0]]), np.zeros(1), (2,))
    assert certify(zero, w0, np.zeros(2), np.zeros(1), "fro", 1).margin == pytest.approx(
        max(1.5 / (3 * np.linalg.norm(w0)), 1.0 / (4 * np.linalg.norm(w0))))
    assert not certify(r, w * np.nan, lam, np.zeros(0), "fro", 1.0).ok


# ----------------------------------------------------------------------------- infeasibility
def _one_d(A, b, C=None, c=None):
    C = None if C is None else np.array(C, dtype=float).reshape(-1, 1)
    return Rows(np.array(A, dtype=float).reshape(-1, 1), np.array(b, dtype=float), C,
                None if c is None else np.array(c, dtype=float), (1,))


# (feasible, infeasible) pairs of rows of different norms: normalising by the wrong norm, or
# mixing up the sides, flips one of the two
PAIRS = [
    # 1 <= w <= 2  |  w >= 1 and w <= 1/2
    (_one_d([2.0, -0.5], [2.0, -1.0]), _one_d([2.0, -0.5], [2.0, -0.25])),
    # w = 1 and w <= 2  |  w = 3 and w <= 2
    (_one_d([-0.5], [-1.0], [2.0], [2.0]), _one_d([-0.5], [-1.0], [2.0], [6.0])),
    # w = 1 and w >= 0.8  |  w = 1 and w >= 1.2
    (_one_d([1.0], [0.8], [2.0], [2.0]), _one_d([1.0], [1.2], [2.0], [2.0])),
    # the contradiction w >= 1, w <= -1 among slack rows w >= -3, w <= 3 (lam must be 0 there)
    (_one_d([1.0, -1.0, 1.0, -1.0], [1.0, -1.5, -3.0, -3.0]),
     _one_d([1.0, -1.0, 1.0, -1.0], [1.0, 1.0, -3.0, -3.0])),
]


@pytest.mark.parametrize("k", range(len(PAIRS)))
def test_farkas_is_invariant_under_row_and_data_scaling(k):
    """Feasibility does not change when a row (A_k, b_k) is scaled by any c_k > 0, nor when
    all right-hand sides are (the feasible set scales with them)."""
    g = np.random.default_rng(k)
    for r, want in zip(PAIRS[k], (False, True)):
        for s in (1e-12, 1e-3, 1.0, 1e9):
            ca, cc = 10.0 ** g.uniform(-6, 6, len(r.b)), 10.0 ** g.uniform(-6, 6, 1)
            rows = r._replace(A=r.A * ca[:, None], b=r.b * ca)
            rhs = r._replace(b=r.b * s)
            if r.C is not None:
                rows, rhs = rows._replace(C=r.C * cc, c=r.c * cc), rhs._replace(c=r.c * s)
            assert farkas(rows, 1e6) is want and farkas(rhs, 1e6) is want, (s, want)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("config", [FAST, CONIC])
def test_infeasible_instances_are_named_on_every_path(norm, config):
    # CHUNK + 1 instances, two of them infeasible (w1 >= 1 and -w1 >= 1) at scales 1e-9, 1e9
    items = [_att(seed)[0] for seed in range(CHUNK + 1)]
    bad = Rows(np.eye(4)[[0, 0]] * np.array([[1.0], [-1.0]]), np.ones(2), None, None, (2, 2))
    bad_at = {2: 1e-9, 7: 1e9}
    for j, s in bad_at.items():
        items[j] = bad._replace(A=bad.A * s)
    outs = solve_many(items, norm, config)
    for j, o in enumerate(outs):
        assert isinstance(o, Infeasible) == (j in bad_at)
        assert j not in bad_at or o.index == j
    with pytest.raises(Infeasible) as err:
        solve_all(items, norm, config)
    assert err.value.index == 2


def test_farkas_confirms_nothing_without_an_optimal_answer(monkeypatch):
    r = PAIRS[0][1]
    real = cp.Problem.solve

    def with_status(status):
        def solve(self, *args, **kw):
            out = real(self, *args, **kw)
            self._status = status
            return out
        return solve

    for status, want in (("user_limit", False), ("optimal_inaccurate", True)):
        monkeypatch.setattr(cp.Problem, "solve", with_status(status))
        assert farkas(r, 1e6) is want
    monkeypatch.setattr(cp.Problem, "solve", lambda *a, **k: (_ for _ in ()).throw(
        cp.error.SolverError("planted")))
    assert farkas(r, 1e6) is False


def test_a_solvers_verdict_is_believed_only_with_a_certificate(monkeypatch):
    feasible, infeasible = PAIRS[0]
    # "infeasible" for a feasible instance: no answer, and no InfeasibleError either
    monkeypatch.setattr(engine, "_run", lambda *a: ("infeasible", None))
    with pytest.raises(UncertifiedError) as err:
        engine.solve_one(feasible, 1.5, FAST, index=6)
    assert not isinstance(err.value, Infeasible) and err.value.index == 6
    # a solver that fails on every attempt: Farkas decides
    monkeypatch.setattr(engine, "_run", lambda *a: ("failed", "planted"))
    with pytest.raises(Infeasible) as err:
        engine.solve_one(infeasible, 1.5, FAST, index=5)
    assert err.value.index == 5
    with pytest.raises(UncertifiedError) as err:
        engine.solve_one(feasible, 1.5, FAST, index=4)
    assert err.value.index == 4
