"""attnlib.svm.engine on instances built to tell its steps apart (mutation testing, issue 12).

Each test compares the engine with an oracle that shares no code with it: the answer of a
one-dimensional instance worked out by hand, or the problem written out in cvxpy here (its
primal, solved to 1e-10). The instances are chosen so that a step done wrong changes the
answer: constraint rows of different norms (the Farkas test normalises each row), equality
rows on the conic Frobenius path, data far below unit scale.
"""

import re

import cvxpy as cp
import numpy as np
import pytest

from attnlib.svm import SolveConfig, engine
from attnlib.svm.engine import Infeasible, Rows, certify, farkas, solve_all, solve_many

TIGHT = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
CONIC = SolveConfig(fast=False)


def _one_d(A, b, C=None, c=None):
    """Rows of a one-dimensional w (A (m,1), C (m_eq,1))."""
    A = np.array(A, dtype=np.float64).reshape(-1, 1)
    C = None if C is None else np.array(C, dtype=np.float64).reshape(-1, 1)
    return Rows(A, np.array(b, dtype=np.float64), C,
                None if c is None else np.array(c, dtype=np.float64), (1,))


# rows of different norms: each pair is (feasible, infeasible) after normalising every row
# by its norm; a test that scales the right-hand side the wrong way flips one of the two
ROW_NORM_CASES = [
    # 2w >= 2 (w >= 1) and -0.5w >= -1 (w <= 2): w in [1, 2];  -0.5w >= -0.25: w <= 0.5
    (_one_d([2.0, -0.5], [2.0, -1.0]), _one_d([2.0, -0.5], [2.0, -0.25])),
    # 2w = 2 (w = 1) and -0.5w >= -1 (w <= 2);  2w = 6 (w = 3) and w <= 2
    (_one_d([-0.5], [-1.0], [2.0], [2.0]), _one_d([-0.5], [-1.0], [2.0], [6.0])),
    # 2w = 2 (w = 1) and w >= 0.8;  w >= 1.2
    (_one_d([1.0], [0.8], [2.0], [2.0]), _one_d([1.0], [1.2], [2.0], [2.0])),
    # -w >= -3 (w <= 3) and w = 2;  w = 4
    (_one_d([-1.0], [-3.0], [1.0], [2.0]), _one_d([-1.0], [-3.0], [1.0], [4.0])),
]


@pytest.mark.parametrize("k", range(len(ROW_NORM_CASES)))
def test_farkas_normalises_each_row_by_its_own_norm(k):
    feasible, infeasible = ROW_NORM_CASES[k]
    assert farkas(feasible, 1e6) is False
    assert farkas(infeasible, 1e6) is True
    # the same rows times any positive factor per row, and the whole instance at any scale
    for s in (1e-9, 1e-3, 1e3, 1e9):
        for r, want in ((feasible, False), (infeasible, True)):
            assert farkas(r._replace(A=r.A * s, b=r.b * s), 1e6) is want
            if r.C is not None:
                assert farkas(r._replace(C=r.C * s, c=r.c * s), 1e6) is want


def test_farkas_far_below_unit_scale():
    # w >= 2e-9 and w <= 1e-9: infeasible by a gap of 1e-9, i.e. by half of the data's scale
    inf = _one_d([1.0, -1.0], [2e-9, -1e-9])
    assert farkas(inf, 1e6) is True
    assert farkas(_one_d([1.0, -1.0], [1e-9, -2e-9]), 1e6) is False  # 1e-9 <= w <= 2e-9
    # equalities too: w = 1e-9 and w = 3e-9
    assert farkas(_one_d([], [], [1.0, 1.0], [1e-9, 3e-9]), 1e6) is True
    assert farkas(_one_d([], [], [1.0, 1.0], [1e-9, 1e-9]), 1e6) is False


@pytest.mark.parametrize("k", range(len(ROW_NORM_CASES)))
@pytest.mark.parametrize("config", [CONIC, SolveConfig()])
def test_one_dimensional_solves_by_hand(k, config):
    # the smallest |w| of the feasible interval, its multipliers by stationarity, and the
    # infeasible partner rejected with a certificate
    feasible, infeasible = ROW_NORM_CASES[k]
    w_want = {0: 1.0, 1: 1.0, 2: 1.0, 3: 2.0}[k]
    for norm in ("fro", "nuc", 1.5):
        r = feasible if norm != "nuc" else feasible._replace(shape=(1, 1))
        (W, lam), = solve_all([r], norm, config)
        assert W.shape == r.shape
        assert abs(float(W.reshape(-1)[0]) - w_want) < 1e-7
        if r.C is None:  # w = 1 is held by the row 2w >= 2 alone: lam = (grad / 2, 0)
            grad = {"fro": 1.0, "nuc": 1.0, 1.5: 1.5}[norm]  # d/dw of 1/2 w^2, |w|, |w|^1.5
            np.testing.assert_allclose(lam, [grad / 2, 0.0], atol=2e-6)  # tol 1e-6
        else:  # the equality row decides w; the inequality row is slack
            np.testing.assert_allclose(lam, [0.0], atol=2e-6)
        bad = infeasible if norm != "nuc" else infeasible._replace(shape=(1, 1))
        out, = solve_many([bad], norm, config)
        assert isinstance(out, Infeasible) and out.index == 0


def _primal(r, norm):
    """min ||w|| (fro, nuc) / sum |w|^p s.t. Aw >= b, Cw = c, written out: (w, lam, mu) with
    the multipliers of 1/2||w||^2 (fro), ||W||_* (nuc), sum |w_j|^p (lp)."""
    D = int(np.prod(r.shape))
    w = cp.Variable(D)
    ineq, eq = r.A @ w >= r.b, r.C @ w == r.c
    if norm == "fro":
        obj = 0.5 * cp.sum_squares(w)
    elif norm == "nuc":
        obj = cp.normNuc(cp.reshape(w, r.shape, order="C"))
    else:
        obj = cp.sum(cp.power(cp.abs(w), norm))
    cp.Problem(cp.Minimize(obj), [ineq, eq]).solve(**TIGHT)
    return w.value, ineq.dual_value, eq.dual_value


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.5])
@pytest.mark.parametrize("seed", range(2))
def test_equality_rows_on_the_conic_path_equal_the_primal(norm, seed):
    # 2 inequality and 2 equality rows for a 2x2 W (D = 4 = m + m_eq): the conic Frobenius
    # dual factors [A; C]' through a QR of all m + m_eq rows
    g = np.random.default_rng(seed)
    A, C = g.standard_normal((2, 4)), g.standard_normal((2, 4))
    r = Rows(A, np.ones(2), C, g.standard_normal(2), (2, 2))
    w_ref, lam_ref, mu_ref = _primal(r, norm)
    (W, lam), = solve_all([r], norm, SolveConfig())  # equality rows never go the fast way
    rel = 1e-6 if norm == "fro" else 1e-4  # lp/nuc: a 1e-6 duality gap, w to ~1e-4
    np.testing.assert_allclose(W.reshape(-1), w_ref, atol=rel * np.abs(w_ref).max())
    np.testing.assert_allclose(lam, lam_ref, atol=rel * max(1.0, np.abs(lam_ref).max()))
    assert np.abs(r.C @ W.reshape(-1) - r.c).max() < 1e-7
    if norm == "fro":  # stationarity: w = A'lam + C'mu recovers mu from the answer
        mu = np.linalg.lstsq(r.C.T, W.reshape(-1) - r.A.T @ lam, rcond=None)[0]
        np.testing.assert_allclose(mu, -mu_ref, atol=1e-6 * max(1.0, np.abs(mu_ref).max()))


def test_fast_frobenius_infeasibility_needs_no_conic_solve(monkeypatch):
    # the fast path proves infeasibility itself (NNLS + a verified Farkas check): neither a
    # cvxpy solve nor the cvxpy Farkas LP is called
    def forbidden(*args, **kw):
        raise AssertionError("the conic path was used")

    monkeypatch.setattr(engine, "_run", forbidden)
    monkeypatch.setattr(engine, "farkas", forbidden)
    r = Rows(np.array([[1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0]]), np.ones(2), None, None,
             (2, 2))
    for norm in ("fro", "nuc"):
        outs = solve_many([r, r], norm, SolveConfig())
        assert [type(o) for o in outs] == [Infeasible, Infeasible]
        assert [o.index for o in outs] == [0, 1]
    with pytest.raises(AssertionError, match="conic path"):
        solve_many([r], "fro", CONIC)  # and the oracle of this test can see the conic path


def test_farkas_finds_the_certificate_among_slack_rows():
    # w >= 1 and -w >= 1 contradict each other (lam = (1, 1, 0, 0)); the slack rows w >= -3,
    # -w >= -3 must get no weight: a multiplier of any sign, a multiplier forced up to 1, or a
    # search that ignores b (any point of {lam >= 0, A'lam = 0}) would miss it
    r = _one_d([1.0, -1.0, 1.0, -1.0], [1.0, 1.0, -3.0, -3.0])
    assert farkas(r, 1e6) is True
    assert farkas(r._replace(b=np.array([1.0, -1.5, -3.0, -3.0])), 1e6) is False  # w in [1, 1.5]
    # the same with the contradiction held by equalities: w = 1 and w = -1
    e = _one_d([1.0, -1.0], [-3.0, -3.0], [1.0, 1.0], [1.0, -1.0])
    assert farkas(e, 1e6) is True
    assert farkas(e._replace(c=np.array([1.0, 1.0])), 1e6) is False


def test_farkas_confirms_nothing_without_an_optimal_answer(monkeypatch):
    # a certificate is only read from an optimal LP answer: a solver error or another status
    # confirms nothing (the instance is then left uncertified, never called infeasible)
    r = _one_d([1.0, -1.0], [1.0, 1.0])
    assert farkas(r, 1e6) is True
    real = cp.Problem.solve

    def status_after(status):
        def solve(self, *args, **kw):
            out = real(self, *args, **kw)
            self._status = status
            return out
        return solve

    monkeypatch.setattr(cp.Problem, "solve", status_after("user_limit"))
    assert farkas(r, 1e6) is False
    monkeypatch.setattr(cp.Problem, "solve", status_after("optimal_inaccurate"))
    assert farkas(r, 1e6) is True

    def error(self, *args, **kw):
        raise cp.error.SolverError("no solver")

    monkeypatch.setattr(cp.Problem, "solve", error)
    assert farkas(r, 1e6) is False


def _masked_nuc_items():
    """Two 2x2 instances with 3 rank-one rows (u_k v_k^T, as Att-SVM's); the second has its
    last row masked (0 >= -1)."""
    g = np.random.default_rng(7)
    A = np.stack([np.outer(g.standard_normal(2), g.standard_normal(2)).ravel() for _ in range(3)])
    first = Rows(A, np.ones(3), None, None, (2, 2))
    second = Rows(A * np.array([[1.0], [1.0], [0.0]]), np.array([1.0, 1.0, -1.0]), None, None,
                  (2, 2))
    return first, second


def _nuc_primal(r):
    W = cp.Variable((2, 2))
    keep = np.linalg.norm(r.A, axis=1) > 0
    cons = [r.A[k] @ cp.vec(W, order="C") >= r.b[k] for k in np.nonzero(keep)[0]]
    prob = cp.Problem(cp.Minimize(cp.normNuc(W)), cons)
    prob.solve(**TIGHT)
    return W.value, np.array([c.dual_value for c in cons])


def test_fast_nuclear_with_a_zero_row_and_a_failed_group(monkeypatch):
    # a masked row (zero row, 0 >= -1) gets multiplier 0 and the fast solver still answers;
    # the two instances form two groups of the fast SDP (3 and 2 rows kept)
    items = _masked_nuc_items()
    outs = solve_many(list(items), "nuc", SolveConfig())
    assert [o[2] for o in outs] == ["fast", "fast"]
    for r, (W, lam, _) in zip(items, outs):
        W_ref, lam_ref = _nuc_primal(r)
        np.testing.assert_allclose(W, W_ref, atol=1e-4 * np.abs(W_ref).max())  # 1e-6 gap
        keep = np.linalg.norm(r.A, axis=1) > 0
        np.testing.assert_allclose(lam[keep], lam_ref, atol=1e-4 * np.abs(lam_ref).max())
        assert (lam[~keep] == 0).all()
    # the first group's SDP fails: it is left to Clarabel, the second is still answered fast
    real, calls = engine.nuclear_ipm, []

    def first_fails(*args):
        calls.append(len(args[2][0]))
        if len(calls) == 1:
            raise np.linalg.LinAlgError("singular")
        return real(*args)

    monkeypatch.setattr(engine, "nuclear_ipm", first_fails)
    outs = solve_many(list(items), "nuc", SolveConfig())
    assert calls == [3, 2]
    assert [o[2] for o in outs] == ["CLARABEL", "fast"]
    for r, (W, _, _) in zip(items, outs):
        W_ref = _nuc_primal(r)[0]
        np.testing.assert_allclose(W, W_ref, atol=1e-4 * np.abs(W_ref).max())


def test_solve_one_alone():
    # one instance through every attempt, without the fast path or chunks: (W, lam) by hand
    feasible, infeasible = ROW_NORM_CASES[0]  # w in [1, 2], held by the row 2w >= 2
    W, lam = engine.solve_one(feasible, "fro", SolveConfig(), index=3)
    np.testing.assert_allclose(W, [1.0], atol=1e-8)
    np.testing.assert_allclose(lam, [0.5, 0.0], atol=1e-8)
    with pytest.raises(Infeasible) as err:
        engine.solve_one(infeasible, 1.5, SolveConfig(), index=3)
    assert err.value.index == 3 and str(err.value) == "instance 3 is infeasible"
    with pytest.raises(Infeasible) as err:
        engine.solve_one(infeasible, "fro", SolveConfig())
    assert err.value.index == 0


def test_farkas_is_scale_free_down_to_1e_12():
    # three directions around the origin (rows of norms 1, 2, 0.5): a_k'w >= b_k > 0 for all k
    # is impossible (a positive combination of the rows is 0); at 1e-12 the certificate's b'lam
    # is ~1e-12 while the LP leaves A'lam ~1e-16: only the normalisation of b keeps it >= 1e6
    th = np.array([0.3, 2.5, 4.4])
    A = np.stack([np.cos(th), np.sin(th)], 1) * np.array([[1.0], [2.0], [0.5]])
    C = np.stack([np.cos(th), np.sin(th)], 1)  # three equalities in 2-d: consistent only for
    w0 = np.array([0.7, -0.2])  # c in the range of C
    for s in (1e-12, 1.0, 1e12):
        b = s * np.array([1.0, 2.0, 0.5])
        assert farkas(Rows(A, b, None, None, (2,)), 1e6) is True
        assert farkas(Rows(A, -b, None, None, (2,)), 1e6) is False  # w = 0 is feasible
        c = s * (C @ w0)
        assert farkas(Rows(np.zeros((0, 2)), np.zeros(0), C, c, (2,)), 1e6) is False
        c[0] += s * 0.5  # off the range of C
        assert farkas(Rows(np.zeros((0, 2)), np.zeros(0), C, c, (2,)), 1e6) is True


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.5])
def test_homogeneous_instances_are_answered_exactly(norm):
    # every b <= 0 (some exactly 0) and c = 0: w = 0 is feasible, hence optimal, with lam = 0;
    # exactly, without a solver (whose ~1e-9 answer has a 0/0 relative duality gap)
    g = np.random.default_rng(3)
    A = g.standard_normal((3, 4))
    ineq = Rows(A, np.array([0.0, -1.0, -0.5]), None, None, (2, 2))
    both = ineq._replace(C=g.standard_normal((1, 4)), c=np.zeros(1))
    for r in (ineq, both):
        for config in (CONIC, SolveConfig()):
            (W, lam), = solve_all([r], norm, config)
            assert W.shape == (2, 2) and (W == 0).all()
            assert lam.shape == (3,) and (lam == 0).all()
    # a nonzero right-hand side (b > 0, or c != 0) is no longer homogeneous
    (W, _), = solve_all([both._replace(c=np.ones(1))], norm, SolveConfig())
    assert abs((both.C @ W.reshape(-1))[0] - 1.0) < 1e-6


def test_a_failing_solver_is_reported_for_its_instance(monkeypatch):
    """A solver that raises on every attempt: an UncertifiedError for that instance, one line
    long, naming the solver and what it said."""

    def error(self, *args, **kw):
        raise cp.error.SolverError("no convergence\ntraceback follows")

    monkeypatch.setattr(cp.Problem, "solve", error)
    for index in (0, 4):
        with pytest.raises(engine.UncertifiedError) as err:
            engine.solve_one(_one_d([2.0, -0.5], [2.0, -1.0]), 1.5, SolveConfig(), index=index)
        msg = str(err.value)
        assert err.value.index == index and "\n" not in msg
        assert "CLARABEL" in msg and "no convergence" in msg


def test_infeasibility_is_decided_by_one_solve_and_its_certificate(monkeypatch):
    """An instance the solver reports infeasible is proved so at once: whatever the scale of
    its rows, one solve and one Farkas certificate, not one per attempt."""
    runs, checks = [], []
    real_run, real_farkas = engine._run, engine.farkas
    monkeypatch.setattr(engine, "_run", lambda *a: runs.append(1) or real_run(*a))
    monkeypatch.setattr(engine, "farkas", lambda *a: checks.append(1) or real_farkas(*a))
    for s in (1e-6, 1.0, 2.0, 1e6):  # w >= 1/s and w <= -1/s
        runs.clear(), checks.clear()
        with pytest.raises(Infeasible):
            engine.solve_one(_one_d([s, -s], [1.0, 1.0]), 1.5, SolveConfig())
        assert (len(runs), len(checks)) == (1, 1), s


def test_which_rows_the_first_attempt_sees(monkeypatch):
    # rows whose largest norm lies inside rescale_outside = (lo, hi), boundaries included, are
    # first solved as given (rescaled only after a failed attempt); outside, rescaled first
    seen = []
    real = engine._run

    def record(comp, items, solver, opts, warm):
        seen.append(float(np.abs(items[0].A).max()))
        return real(comp, items, solver, opts, warm)

    monkeypatch.setattr(engine, "_run", record)
    cfg = SolveConfig(rescale_outside=(1e-2, 1e2))
    for s, first in ((1e-2, 1e-2), (1e2, 1e2), (1.0, 1.0), (1e-3, 1.0), (1e3, 1.0)):
        seen.clear()
        (W, _), = solve_all([_one_d([s, -s], [1.0, -3.0])], 1.5, cfg)  # w in [1/s, 3/s]
        assert seen[0] == pytest.approx(first, rel=1e-12)
        assert abs(W[0] - 1.0 / s) < 1e-6 / s


def test_unit_scale_rows_are_not_solved_twice(monkeypatch):
    # with the largest row norm exactly 1 there is no rescaled copy to try: 3 attempts, not 6
    def error(self, *args, **kw):
        raise cp.error.SolverError("no answer")

    monkeypatch.setattr(cp.Problem, "solve", error)
    with pytest.raises(engine.UncertifiedError, match="after 3 attempts"):
        engine.solve_one(_one_d([1.0, -0.5], [1.0, -1.0]), 1.5, SolveConfig())


def test_progress_bar_only_when_asked(capsys):
    r = _one_d([2.0, -0.5], [2.0, -1.0])
    for call in (solve_all, solve_many):
        call([r, r], 1.5, SolveConfig())  # default: no bar
        assert capsys.readouterr().err == ""
        call([r, r], 1.5, SolveConfig(), progress=False, desc="XYZ")
        assert capsys.readouterr().err == ""
        call([r, r], 1.5, SolveConfig(), progress=True)  # default label
        err = capsys.readouterr().err
        assert re.search(r"(^|\r)SVM: 100%.*\| 2/2 ", err), err
        call([r, r], 1.5, SolveConfig(), True, "XYZ")
        assert re.search(r"(^|\r)XYZ: 100%.*\| 2/2 ", capsys.readouterr().err)


def test_certify_measures_each_row_against_its_own_norm():
    # rows with b = 0 (and equalities) are measured relative to ||row|| ||w||, row by row
    r = Rows(np.array([[1.0, 0.0], [0.0, 3.0]]), np.array([0.0, -10.0]),
             np.array([[1.0, 1.0], [0.0, 4.0]]), np.array([2.0, 0.0]), (2,))
    w = np.array([-0.5, 0.25])  # row 0: -0.5 >= 0 violated; C rows: -0.25 vs 2, 1.0 vs 0
    c = certify(r, w, np.zeros(2), np.zeros(2), "fro", 1e-6)
    wn = np.linalg.norm(w)
    want = max(0.5 / (1.0 * wn),  # inequality row 0, ||A_0|| = 1
               2.25 / max(2.0, np.sqrt(2.0) * wn),  # equality 0
               1.0 / max(0.0, 4.0 * wn))  # equality 1, ||C_1|| = 4
    assert c.margin == pytest.approx(want, rel=1e-12)
    assert c.ok is False
    ineq = certify(r._replace(C=None, c=None), w, np.zeros(2), np.zeros(0), "fro", 1e-6)
    assert ineq.margin == pytest.approx(0.5 / wn, rel=1e-12)  # ||A_0|| = 1, not ||A||
    assert certify(r, np.array([np.nan, 0.0]), np.zeros(2), np.zeros(2), "fro", 1e-6).ok \
        is False
    ok = Rows(np.array([[2.0, 0.0]]), np.array([4.0]), None, None, (2,))
    assert certify(ok, np.array([2.0, 0.0]), np.ones(1), np.zeros(0), "fro", 1e-12).ok is True


def test_row_scale_without_rows():
    assert engine._row_scale(Rows(np.zeros((0, 2)), np.zeros(0), None, None, (2,))) == 1.0
    assert engine._row_scale(Rows(np.zeros((0, 2)), np.zeros(0), np.zeros((0, 2)),
                                  np.zeros(0), (2,))) == 1.0


def test_solver_verdicts_without_certificates(monkeypatch):
    # a solver that always says "infeasible" for a feasible instance: one Farkas check (its
    # verdict is kept), no answer, an UncertifiedError naming the instance
    calls = []
    real_farkas = engine.farkas
    monkeypatch.setattr(engine, "farkas", lambda *a: calls.append("farkas") or real_farkas(*a))
    monkeypatch.setattr(engine, "_run", lambda *a: ("infeasible", None))
    with pytest.raises(engine.UncertifiedError, match="reported infeasible, but no Farkas") as e:
        engine.solve_one(_one_d([2.0, -2.0], [1.0, -3.0]), 1.5, SolveConfig(), index=6)
    assert calls == ["farkas"] and e.value.index == 6
    # a solver that always fails on an infeasible instance: Farkas decides at the end
    monkeypatch.setattr(engine, "_run", lambda *a: ("failed", "status 'user_limit'"))
    with pytest.raises(Infeasible) as e:
        engine.solve_one(_one_d([2.0, -2.0], [1.0, 1.0]), 1.5, SolveConfig(), index=5)
    assert e.value.index == 5


def test_an_answer_the_certificate_rejects_is_never_returned(monkeypatch):
    # every answer fails its certificate: the notes give its three numbers
    monkeypatch.setattr(engine, "certify",
                        lambda *a: engine.Certificate(False, 1.0, 2.0, 3.0))
    with pytest.raises(engine.UncertifiedError) as e:
        engine.solve_one(_one_d([1.0, -0.5], [1.0, -1.0]), 1.5, SolveConfig())
    assert "CLARABEL: margin violation 1.0e+00, duality gap 2.0e+00, dual violation 3.0e+00" \
        in str(e.value)


def test_certify_gap_and_dual_by_hand():
    # min ||w|| s.t. 2 w1 >= 4: w = (2, 0); lam = 0.5 gives b'lam = 2 < ||w||^2 = 4
    r = Rows(np.array([[2.0, 0.0]]), np.array([4.0]), None, None, (2,))
    c = certify(r, np.array([2.0, 0.0]), np.full(1, 0.5), np.zeros(0), "fro", 1e-6)
    assert c.gap == pytest.approx(2.0 / 4.0)  # relative to the larger of the two
    # small numbers: 0.2 w1 >= 0.04, w = (0.2, 0), lam = 1.5: gap 0.02 / 0.06, not / 1
    s = Rows(np.array([[0.2, 0.0]]), np.array([0.04]), None, None, (2,))
    c = certify(s, np.array([0.2, 0.0]), np.full(1, 1.5), np.zeros(0), "fro", 1e-6)
    assert c.gap == pytest.approx(0.02 / 0.06)
    # a negative multiplier relative to the largest one (2): 0.1 / 2
    rr = Rows(np.array([[2.0, 0.0], [0.0, 1.0]]), np.array([4.0, -1.0]), None, None, (2,))
    neg = certify(rr, np.array([4.0, -0.1]), np.array([2.0, -0.1]), np.zeros(0), "fro", 1e-6)
    assert neg.dual == pytest.approx(0.1 / 2.0)  # w = A'lam exactly: only the sign counts


def test_certify_exact_answers_at_tol_zero_and_lp_gap_at_any_scale():
    # an exactly representable answer passes even at tol = 0 (every check is "<= tol")
    r = Rows(np.array([[2.0, 0.0]]), np.array([4.0]), None, None, (2,))
    assert certify(r, np.array([2.0, 0.0]), np.ones(1), np.zeros(0), "fro", 0.0).ok is True
    # lp: the relative gap of a wrong multiplier is the same at every scale of the instance
    # (w -> k w, mu -> k^(p-1) mu): min sum |w|^3 s.t. w1 + w2 = 2k, w = (k, k), mu = 3k^2
    gaps = []
    for k in (1.0, 0.1, 0.01):
        rp = Rows(np.zeros((0, 2)), np.zeros(0), np.array([[1.0, 1.0]]), np.array([2.0 * k]),
                  (2,))
        assert certify(rp, np.full(2, k), np.zeros(0), np.full(1, 3.0 * k * k), 3.0, 1e-9).ok
        gaps.append(certify(rp, np.full(2, k), np.zeros(0), np.full(1, 3.3 * k * k), 3.0,
                            1e-9).gap)
    assert gaps[0] > 1e-3 and gaps[1] == pytest.approx(gaps[0]) == gaps[2]


def test_frobenius_chunks_of_eight_on_the_conic_path(monkeypatch):
    # CHUNK Frobenius instances of one shape are solved as ONE problem of 8 pieces by the
    # first solver; the rest, and every nuclear instance, one by one (the answers are the
    # same either way: this pins the work done, against the documented batching)
    seen = []
    real = engine._run

    def record(comp, items, solver, opts, warm):
        seen.append((len(comp.pieces), len(items), solver))
        return real(comp, items, solver, opts, warm)

    monkeypatch.setattr(engine, "_run", record)
    cfg = SolveConfig(fast=False, rescale_outside=(1e-2, 1e2))
    for s in (1e-2, 1.0, 1e2):  # row scales inside rescale_outside, boundaries included
        rows = [_one_d([s, -s], [1.0 + j, -20.0]) for j in range(8)]  # w in [(1+j)/s, 20/s]
        for n_items, want in ((8, [(8, 8, "CLARABEL")]),
                              (9, [(8, 8, "CLARABEL"), (1, 1, "CLARABEL")])):
            seen.clear()
            items = rows + [rows[0]] * (n_items - 8)
            outs = solve_many(items, "fro", cfg)
            assert seen == want, (s, n_items)
            for j, (W, _, solver) in enumerate(outs):
                assert solver == "CLARABEL"
                assert abs(W[0] - (1.0 + j % 8) / s) < 1e-6 / s
    seen.clear()
    r = Rows(np.array([[1.0, 0.0, 0.0, 0.0]]), np.ones(1), None, None, (2, 2))
    solve_many([r] * 8, "nuc", cfg)
    assert seen == [(1, 1, "CLARABEL")] * 8


def test_primal_oracles_default_to_the_euclidean_norm():
    # one constraint e1' W e2 >= 1 (x_0 = e1, x_1 = 0, z = e2): W = e1 e2', ||W|| = 1; the
    # v-SVM v' e1 >= 1: v = e1
    from attnlib.svm.primal import att_svm_primal, head_svm_primal

    X = np.array([[[1.0, 0.0], [0.0, 0.0]]])
    val, W = att_svm_primal(X, np.array([[0.0, 1.0]]), [0])
    assert val == pytest.approx(1.0, abs=1e-8)
    np.testing.assert_allclose(W, [[0.0, 1.0], [0.0, 0.0]], atol=1e-8)
    val, v = head_svm_primal(X, np.array([1.0]), [0])
    assert val == pytest.approx(1.0, abs=1e-8)
    np.testing.assert_allclose(v, [1.0, 0.0], atol=1e-8)
