"""Chapters 1-5: every statement the book reconstructs from arXiv 2306.13596 / 2308.16898 (or
derives itself) is tested by dropping one hypothesis at a time on small designed instances.
The statement's check must fail without the hypothesis and pass with it.

Statements (chapter, label):
  ch1 ``ch1-cor-diverge``  inf L = mean_i l(max_t gamma_it), approached along a selecting
                           direction, not attained (strictly decreasing l, a lower-scoring
                           token, feasibility)
  ch2 ``ch2-thm-gd``       the data condition (equal non-optimal scores) gives
                           <grad L(p), p_mm> < 0 at every p (no stationary point)
  ch2 ``ch2-rem-w``        W trained with one shared query p: W_mm = p_mm p^T / ||p||^2
  ch3 ``ch3-def-locopt``   the optimal selection is locally optimal (unique opt, feasibility)
  ch3 ``ch3-thm-local``    GD started in a narrow cone, far out, around p_mm(alpha) of a locally
                           optimal alpha keeps selecting alpha (strict scores, support tokens,
                           the cone, the radius)
  ch4 ``ch4-def-relaxed``  tight (every input a head support vector) => p_relax = p_mm
  ch5 ``prop-rank-n``      every Frobenius / nuclear optimum has its rows in span{z_i}
                           (a unitarily invariant norm)

Oracles, independent of the library function under test: cvxpy for every SVM, autograd of a
plain torch loss for gradients, an exact-gradient gradient-descent loop written here, and
grids for the one-dimensional infima.
"""

import functools

import cvxpy as cp
import numpy as np
import pytest
import torch

import attnlib as al
from attnlib.data import AttentionData
from attnlib.experiments import max_margin as mm

F64 = torch.float64
KEYS = torch.tensor([[-0.1, 1.0], [1.0, 0.0], [0.0, 0.0]], dtype=F64)  # E1's key plane
GLOBAL, LOCAL = (1.0, 0.9, 0.9), (1.0, 0.9, 0.0)


# ----------------------------------------------------------------------------- oracles
def svm_cvx(rows, rhs=None, norm="fro"):
    """min ||w|| s.t. rows @ w >= rhs (default 1), cvxpy; None if infeasible."""
    A = np.asarray(rows, dtype=float)
    b = np.ones(len(A)) if rhs is None else np.asarray(rhs, dtype=float)
    w = cp.Variable(A.shape[1])
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w)), [A @ w >= b])
    prob.solve(solver=cp.CLARABEL)
    return None if w.value is None or prob.status != "optimal" else w.value


def prompt_rows(K, alpha):
    """(k_{i alpha_i} - k_it) for every input i and t != alpha_i; K (n, T, d) numpy."""
    return [K[i, alpha[i]] - K[i, t] for i in range(K.shape[0]) for t in range(K.shape[1])
            if t != alpha[i]]


def locally_optimal_oracle(K, gamma, alpha, tol=1e-6):
    """Definition ch3-def-locopt with a cvxpy SVM: feasible, every support token below."""
    p = svm_cvx(prompt_rows(K, alpha))
    if p is None:
        return False
    return all(gamma[i, t] < gamma[i, alpha[i]] for i in range(K.shape[0])
               for t in range(K.shape[1]) if t != alpha[i]
               and (K[i, alpha[i]] - K[i, t]) @ p < 1 + tol)


def plain_risk(p, K, gamma, ell=lambda u: torch.nn.functional.softplus(-u)):
    """L(p) = mean_i ell(sum_t s_it gamma_it), s_i = softmax(K_i p), written out."""
    s = torch.softmax(torch.einsum("...ntd,...d->...nt", K, p), -1)
    return ell((s * gamma).sum(-1)).mean(-1)


def exact_gd(p0, gamma, steps, lr=0.1, K=KEYS):
    """Normalised GD on E1's risk with the gradient K^T (s * (gamma - Yf)) l'(Yf), the
    deviation gamma_t - Yf = sum_tau s_tau (gamma_t - gamma_tau) formed without cancellation."""
    p = p0.clone()
    for _ in range(steps):
        s = torch.softmax(p @ K.T, -1)
        dev = (s[..., None, :] * (gamma[:, None] - gamma[None, :])).sum(-1)
        g = -torch.sigmoid(-(s * gamma).sum(-1))[..., None] * ((s * dev) @ K)
        p = p - lr * g / g.norm(dim=-1, keepdim=True)
    return p


def e1(scores):
    """E1 as data: tokens (key; score), W = diag(1, 1, 0), v = e_3, Y = +1."""
    X = torch.cat([KEYS, torch.tensor(scores, dtype=F64)[:, None]], -1)[None]
    return AttentionData(X, torch.ones(1, dtype=F64), v=torch.tensor([0.0, 0, 1], dtype=F64))


W3 = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=F64))


def _library_p(cases, steps):
    """attnlib's trainer (normalised GD on p, eps = 0) from the starts (k, 2) of every
    (scores, starts) case, one batch of trials: the final p's key plane, per case."""
    X = torch.cat([e1(sc).X.expand(len(p0), -1, -1, -1) for sc, p0 in cases])
    P0 = torch.cat([p0 for _, p0 in cases])
    B = len(P0)
    data = AttentionData(X, torch.ones(B, 1, dtype=F64),
                         v=torch.tensor([0.0, 0, 1], dtype=F64).expand(B, 3))
    run = al.train(data, param="p", lr=0.1, steps=steps, eps=0.0, record_every=steps,
                   init={"W": W3, "p": torch.cat([P0, 0 * P0[:, :1]], -1)})
    return run.p[:, :2].cpu().split([len(p0) for _, p0 in cases])


# ===================================== ch1: the infimum is approached, never attained
def _bound(gamma, ell):
    return float(ell(gamma.amax(-1)).mean())


def _corollary_holds(K, gamma, u, ell, radii=(1, 4, 16), samples=2000):
    """The corollary's conclusion, checked: L(Ru) falls to within 1e-6 of the bound along u,
    and every sampled finite p (norms up to about 10, where float64 still resolves the
    excess) and every point of the ray has L(p) strictly above the bound."""
    b = _bound(gamma, ell)
    ray = [float(plain_risk(R * u, K, gamma, ell)) for R in radii]
    P = 3 * torch.randn(samples, K.shape[-1], generator=torch.Generator().manual_seed(0),
                        dtype=F64)
    cloud = plain_risk(P, K, gamma, ell)  # (samples,): one risk per row of P
    return ray[-1] - b < 1e-6 and all(r > b for r in ray) and bool((cloud > b).all())


def test_corollary_with_every_hypothesis():
    K, gamma = KEYS[None], torch.tensor([GLOBAL], dtype=F64)
    u = torch.tensor([-0.1, 1.0], dtype=F64) / 1.01  # selects x1: (k1 - k_t)^T u > 0
    assert _corollary_holds(K, gamma, u, lambda a: torch.nn.functional.softplus(-a))
    # the chapter's ray risks (the library, which normalises the directions it is given) are
    # the plain risk along the same rays
    radii = [0.0, 1.0, 4.0, 16.0]
    U = torch.tensor([[-0.1, 1.0], [2.0, 0.0]], dtype=F64)  # as the chapter passes them
    risk, _ = mm.ray_losses(al.examples.three_token_example("global"),
                            torch.cat([U, torch.zeros(2, 1, dtype=F64)], -1), radii)
    ref = [[float(plain_risk(R * q / q.norm(), K, gamma)) for R in radii] for q in U]
    np.testing.assert_allclose(np.asarray(risk), ref, rtol=1e-12)


def test_corollary_fails_without_a_strictly_decreasing_loss():
    # a hinge, flat beyond 0.95 < max gamma: a finite p already attains the bound's loss
    K, gamma = KEYS[None], torch.tensor([GLOBAL], dtype=F64)
    u = torch.tensor([-0.1, 1.0], dtype=F64) / 1.01
    hinge = lambda a: torch.relu(0.95 - a)  # noqa: E731
    assert not _corollary_holds(K, gamma, u, hinge)
    assert float(plain_risk(8 * u, K, gamma, hinge)) == 0.0  # attained at a finite p


def test_corollary_fails_without_a_lower_scoring_token():
    K, gamma = KEYS[None], torch.full((1, 3), 0.9, dtype=F64)  # every score equal
    u = torch.tensor([-0.1, 1.0], dtype=F64) / 1.01
    ell = lambda a: torch.nn.functional.softplus(-a)  # noqa: E731
    assert not _corollary_holds(K, gamma, u, ell)
    assert float(plain_risk(torch.zeros(2, dtype=F64), K, gamma, ell)) == \
        pytest.approx(_bound(gamma, ell), abs=1e-15)  # p = 0 attains it


def test_corollary_fails_without_feasibility():
    # two inputs on the line (d = 1) wanting opposite keys: no u selects both optimal tokens,
    # and the infimum (a grid over p, the oracle) stays above the bound
    K = torch.tensor([[[1.0], [-1.0]], [[1.0], [-1.0]]], dtype=F64)
    gamma = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=F64)
    ell = lambda a: torch.nn.functional.softplus(-a)  # noqa: E731
    grid = torch.linspace(-60, 60, 24001, dtype=F64)
    s = torch.softmax(grid[:, None, None] * K[None, ..., 0], -1)  # (grid, n, T), d = 1
    inf_L = float(ell((s * gamma).sum(-1)).mean(-1).min())
    assert inf_L - _bound(gamma, ell) > 0.05
    for u in (torch.ones(1, dtype=F64), -torch.ones(1, dtype=F64)):
        assert not _corollary_holds(K, gamma, u, ell)
    # control: flip input 2's scores (feasible again); the conclusion holds along u = +1
    assert _corollary_holds(K, gamma[[0, 0]], torch.ones(1, dtype=F64), ell)


# ====================== ch2: equal non-optimal scores => <grad L(p), p_mm> < 0 everywhere
def _inner_products(scores, P):
    """<grad L(p), p_mm> at every row of P: autograd of the plain risk; p_mm from the
    library (prompt_svm), checked against cvxpy."""
    data = e1(scores)
    p_mm = al.prompt_svm(data, alpha=torch.tensor([0]), W=W3)[:2]
    ref = svm_cvx(prompt_rows(KEYS[None].numpy(), [0]))
    np.testing.assert_allclose(p_mm.numpy(), ref, atol=1e-6)
    gamma = torch.tensor([scores], dtype=F64)
    P = P.clone().requires_grad_(True)
    plain_risk(P, KEYS[None], gamma).sum().backward()  # row j of P.grad: grad L at P[j]
    return P.grad @ p_mm


GRID = torch.stack(torch.meshgrid(torch.linspace(-6, 6, 41, dtype=F64),
                                  torch.linspace(-6, 6, 41, dtype=F64), indexing="ij"), -1)
GRID = GRID.reshape(-1, 2)


def test_no_stationary_point_with_equal_non_optimal_scores():
    assert float(_inner_products(GLOBAL, GRID).max()) < 0


def test_no_stationary_point_fails_without_equal_scores():
    # local scores (1, 0.9, 0): near p_mm(2) = (1, 0) the gradient points along p_mm
    assert float(_inner_products(LOCAL, GRID).max()) > 1e-3


def test_gd_reaches_p_mm_with_the_data_condition_and_not_without():
    """The theorem's conclusion from the six official starts p(0) = (0, c): every run ends on
    x1 with equal non-optimal scores, and not every run without them (the exact-gradient
    loop of this file, and attnlib's trainer on the same starts)."""
    c = torch.tensor([1.0, 0.5, 0.0, -0.5, -1.0, -1.5], dtype=F64)
    p0 = torch.stack([torch.zeros_like(c), c], -1)
    lib = _library_p(((GLOBAL, p0), (LOCAL, p0)), steps=1000)
    for (scores, all_x1), p_lib in zip(((GLOBAL, True), (LOCAL, False)), lib):
        p = exact_gd(p0, torch.tensor(scores, dtype=F64), steps=1000)
        np.testing.assert_allclose(p_lib.numpy(), p.numpy(), atol=1e-6)
        sel = (p @ KEYS.T).argmax(-1)
        assert bool((sel == 0).all()) is all_x1


# ========================================= ch2: W with one shared query is rank one
def _w_svm_cvx(X, z, alpha):
    d = X.shape[-1]
    W = cp.Variable((d, d))
    cons = [(X[i, alpha[i]] - X[i, t]) @ W @ z[i] >= 1
            for i in range(X.shape[0]) for t in range(X.shape[1]) if t != alpha[i]]
    cp.Problem(cp.Minimize(cp.sum_squares(W)), cons).solve(solver=cp.CLARABEL)
    return W.value


def _rank_one_formula_is_the_svm(data, alpha, p0):
    p_mm = svm_cvx(prompt_rows(data.X.numpy(), alpha.tolist()))  # prompt SVM, W = I
    formula = np.outer(p_mm, p0) / (p0 @ p0)
    lib = al.att_svm(data, alpha=alpha).numpy()
    ref = _w_svm_cvx(data.X.numpy(), data.z.numpy(), alpha.tolist())
    np.testing.assert_allclose(lib, ref, atol=1e-5)  # the library's W-SVM, against cvxpy
    return np.allclose(formula, ref, atol=1e-5)


def test_w_svm_is_rank_one_with_a_shared_query():
    jt = al.examples.joint_example(tight=True).data
    p0 = np.array([1.0, 0.5])
    data = jt.with_(z=torch.tensor(p0).expand(jt.n, 2), v=torch.tensor([0.0, 1.0]))
    assert _rank_one_formula_is_the_svm(data, torch.tensor([1, 1, 1]), p0)


def test_w_svm_is_not_the_formula_with_per_input_queries():
    jt = al.examples.joint_example(tight=True).data
    p0 = np.array([1.0, 0.5])
    z = torch.tensor([[1.0, 0.5], [1.0, 0.5], [0.2, 1.0]], dtype=F64)  # input 3's own query
    data = jt.with_(z=z, v=torch.tensor([0.0, 1.0]))
    assert not _rank_one_formula_is_the_svm(data, torch.tensor([1, 1, 1]), p0)


# =================================== ch3: the optimal selection is locally optimal
@pytest.mark.parametrize("case", ["hypotheses", "tied optimum", "infeasible optimum"])
def test_optimal_selection_is_locally_optimal_only_with_its_hypotheses(case):
    K = KEYS[None].clone()
    scores = {"hypotheses": (1.0, 0.9, 0.0), "tied optimum": (1.0, 0.9, 1.0),
              "infeasible optimum": (0.0, 0.1, 1.0)}[case]
    if case == "infeasible optimum":  # x3 on the segment between x1 and x2: never on top
        K[0, 2] = 0.5 * (K[0, 0] + K[0, 1])
    gamma = np.array([scores])
    opt = [0] if case != "infeasible optimum" else [2]
    oracle = locally_optimal_oracle(K.numpy(), gamma, opt)
    X = torch.cat([K[0], torch.tensor(scores, dtype=F64)[:, None]], -1)[None]
    data = AttentionData(X, torch.ones(1, dtype=F64), v=torch.tensor([0.0, 0, 1], dtype=F64))
    lib = bool(al.is_locally_optimal(data, torch.tensor(opt), param="p", W=W3))
    assert lib is oracle is (case == "hypotheses")


# ========================= ch3: local convergence needs each of its four hypotheses
def _cone(p_mm_deg, start_deg, R):
    """Starts at norm R, start_deg degrees from p_mm(alpha) (whose angle is p_mm_deg)."""
    a = torch.deg2rad(torch.tensor(p_mm_deg + np.asarray(start_deg), dtype=F64))
    return R * torch.stack([torch.cos(a), torch.sin(a)], -1)


# The tests' starts: (scores, starts, alpha); p_mm(3) = (-1, -1.1), checked against cvxpy below
CONE = {"every hypothesis": (LOCAL, _cone(0.0, [1.0, 2.0, 3.0, 4.0], 8.0), 1),
        "tied support token": (GLOBAL, _cone(0.0, [1.0, 2.0, 3.0, 4.0], 8.0), 1),
        "better support token": (LOCAL, _cone(float(np.degrees(np.arctan2(-1.1, -1.0))),
                                              [-1.0, 0.0, 1.0], 8.0), 2),
        "wide cone": (LOCAL, _cone(0.0, [10.0], 8.0), 1),
        "too close": (LOCAL, _cone(0.0, [1.0], 1.0), 1)}


@functools.cache
def _library_cone_runs():
    """attnlib's trainer from every start of CONE, 2,000 steps, as one batch."""
    return dict(zip(CONE, _library_p([c[:2] for c in CONE.values()], steps=2000)))


def _stays(case):
    """Normalised GD (the exact-gradient loop) from the case's starts: does every run still
    select x_{alpha + 1} at the end? attnlib's trainer must end on the same points."""
    scores, p0, alpha = CONE[case]
    p = exact_gd(p0, torch.tensor(scores, dtype=F64), steps=2000)
    np.testing.assert_allclose(_library_cone_runs()[case].numpy(), p.numpy(), atol=1e-6)
    return bool(((p @ KEYS.T).argmax(-1) == alpha).all())


def test_local_convergence_with_every_hypothesis():
    # alpha = 2 is locally optimal under the local scores (library and oracle agree)
    assert bool(al.is_locally_optimal(e1(LOCAL), torch.tensor([1]), param="p", W=W3))
    assert locally_optimal_oracle(KEYS[None].numpy(), np.array([LOCAL]), [1])
    # narrow cone (within 4 degrees, the tail cone is 5.7) on the side of x1, R = 8
    assert _stays("every hypothesis")


def test_local_convergence_fails_with_a_tied_support_token():
    assert not locally_optimal_oracle(KEYS[None].numpy(), np.array([GLOBAL]), [1])
    assert not _stays("tied support token")


def test_local_convergence_fails_when_a_better_token_is_a_support_token():
    # alpha = 3: feasible (p_mm(3) = (-1, -1.1)), its support tokens x1, x2 score higher
    p3 = svm_cvx(prompt_rows(KEYS[None].numpy(), [2]))
    np.testing.assert_allclose(p3, [-1.0, -1.1], atol=1e-6)  # the direction CONE starts from
    assert not _stays("better support token")


@pytest.mark.slow
def test_local_convergence_fails_outside_the_cone_or_too_close():
    assert not _stays("wide cone")  # 10 degrees from p_mm, R = 8
    assert not _stays("too close")  # the narrow cone (1 degree), R = 1


# ===================================== ch4: tight => p_relax = p_mm, and only then
def _relax_vs_mm(tight):
    d = al.examples.joint_example(tight=tight).data
    opt = torch.tensor([1, 1, 1])
    v_mm = al.head_svm(d, alpha=opt)
    X = d.X.numpy()
    sel = X[:, 1]
    margins = d.Y.numpy() * (sel @ v_mm.numpy())
    support = np.abs(margins - 1) < 1e-6
    rows = prompt_rows(X, [1, 1, 1])
    rhs = [1.0 if support[i] else 0.0 for i in range(3)]  # one non-opt token per input
    relax_ref, mm_ref = svm_cvx(rows, rhs), svm_cvx(rows)
    lib = al.relaxed_prompt_svm(d.with_(v=v_mm), alpha=opt, v_mm=v_mm).numpy()
    np.testing.assert_allclose(lib, relax_ref, atol=1e-6)
    return bool(support.all()), np.allclose(relax_ref, mm_ref, atol=1e-6)


def test_relaxed_svm_equals_att_svm_when_tight():
    assert _relax_vs_mm(tight=True) == (True, True)


def test_relaxed_svm_differs_when_not_tight():
    assert _relax_vs_mm(tight=False) == (False, False)


# ============================ ch5: every optimum has its rows in span{z_i}
def _offspan_of_optima(data, norm):
    """The largest ||W (I - P_Z)||_F over (near-)optimal W of the norm's SVM: cvxpy finds the
    optimum, then maximises a random off-span functional over the optimal face (relative
    slack 1e-7 on the norm)."""
    X, z = data.X.numpy(), data.z.numpy()
    n, T, d = X.shape
    alpha = al.optimal_tokens(data).tolist()
    P = z.T @ np.linalg.pinv(z.T)  # projection on span{z_i}
    W = cp.Variable((d, d))
    cons = [(X[i, alpha[i]] - X[i, t]) @ W @ z[i] >= 1 for i in range(n) for t in range(T)
            if t != alpha[i]]
    f = {"nuc": cp.normNuc, "fro": lambda M: cp.norm(M, "fro"),
         "l1": lambda M: cp.sum(cp.abs(M))}[norm]
    opt = cp.Problem(cp.Minimize(f(W)), cons).solve(solver=cp.CLARABEL)
    G = np.random.default_rng(0).normal(size=(d, d)) @ (np.eye(d) - P)
    cp.Problem(cp.Maximize(cp.trace(G.T @ W)), cons + [f(W) <= opt * (1 + 1e-7)]) \
        .solve(solver=cp.CLARABEL)
    return np.linalg.norm(W.value @ (np.eye(d) - P)) / np.linalg.norm(W.value), opt


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_every_optimum_lies_in_the_span_of_the_queries(norm):
    data = al.random_data(2, 3, 4, seed=1, device="cpu")  # n = 2 queries in d = 4
    off, opt = _offspan_of_optima(data, norm)
    assert off < 1e-2  # slack 1e-7 allows an off-span part of order sqrt(1e-7)
    lib = al.att_svm(data, norm=norm)  # the library's solution: same optimum, in the span
    val = float(torch.linalg.matrix_norm(lib, "nuc" if norm == "nuc" else "fro"))
    assert val == pytest.approx(opt, rel=1e-5)
    z = data.z.numpy()
    assert np.linalg.norm(lib.numpy() @ (np.eye(4) - z.T @ np.linalg.pinv(z.T))) < 1e-6


def test_optima_leave_the_span_without_a_unitarily_invariant_norm():
    # the entrywise l1 norm: projecting onto span{z_i} can increase it, and an optimum
    # with an off-span part exists
    data = al.random_data(2, 3, 4, seed=1, device="cpu")
    off, _ = _offspan_of_optima(data, "l1")
    assert off > 0.05
