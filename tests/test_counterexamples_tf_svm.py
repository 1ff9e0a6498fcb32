"""Chapters 6-8: every statement the book reconstructs (or derives itself) is tested by dropping
one hypothesis at a time on small designed instances. The statement's check must fail without
the hypothesis and pass with it; a hypothesis whose removal changes nothing is shown to be
superfluous (and the statement says so).

Oracles: a linear program (scipy's HiGHS) for feasibility, autograd of a plain torch loss for
gradients, cvxpy for a weighted max-margin problem, projected gradient descent for a
regularisation path, and exhaustive enumeration of selections.
"""

import itertools

import cvxpy as cp
import numpy as np
import pytest
import torch
from scipy.optimize import linprog

import attnlib as al
from attnlib.data import AttentionData
from attnlib.experiments.tf_svm_heads_path import circle_path_direction
from attnlib.experiments.tf_svm_overparam import equal_scores, equal_scores_trap, loss_excess

F64 = torch.float64


# ----------------------------------------------------------------------------- oracles
def lp_feasible(rows) -> bool:
    """Is there a w with rows @ w >= 1 (every margin at least 1)? A linear program."""
    A = np.asarray(rows, dtype=float)
    res = linprog(np.zeros(A.shape[1]), A_ub=-A, b_ub=-np.ones(len(A)),
                  bounds=[(None, None)] * A.shape[1], method="highs")
    assert res.status in (0, 2), res.message
    return res.status == 0


def att_rows(X, z, alpha):
    """Att-SVM constraint rows (x_{i alpha_i} - x_it) z_i^T, flattened, numpy."""
    X, z = np.asarray(X, dtype=float), np.asarray(z, dtype=float)
    return [np.outer(X[i, alpha[i]] - X[i, t], z[i]).ravel()
            for i in range(X.shape[0]) for t in range(X.shape[1]) if t != alpha[i]]


def every_selection_feasible(X, z):
    n, T = X.shape[:2]
    return all(lp_feasible(att_rows(X, z, a)) for a in itertools.product(range(T), repeat=n))


def plain_loss(W, X, Y, z, v, ell=lambda u: torch.nn.functional.softplus(-u)):
    """L(W) = mean_i ell(Y_i v^T X_i^T softmax(X_i W z_i)), written out in torch."""
    s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, z), -1)
    return ell(Y * (s * (X @ v)).sum(-1)).mean()


def autograd(W, *args, **kw):
    W = W.clone().requires_grad_(True)
    plain_loss(W, *args, **kw).backward()
    return W.grad


# ====================================================== ch6: feasibility under d >= max(T-1, n)
def test_feasibility_holds_for_every_selection_with_the_hypotheses():
    for seed in range(3):  # n = 2, T = 3, d = 2 = max(T - 1, n), general position
        D = al.random_data(2, 3, 2, seed=seed, device="cpu")
        assert every_selection_feasible(D.X, D.z)


def test_feasibility_fails_without_n_le_d():
    # n = 5 > d = 2 (T - 1 = 1 <= d): five rows (x_{i alpha_i} - x_it) z_i^T in the
    # 4-dimensional space of W are dependent, and flipping alpha_i flips the sign of row i,
    # so some selection makes the dependence nonnegative (a Farkas certificate)
    for s in range(3):
        D = al.random_data(5, 2, 2, seed=s, device="cpu")
        assert not every_selection_feasible(D.X, D.z)
    # the same tokens with the queries of only two inputs (n = 2 <= d): all feasible
    assert every_selection_feasible(D.X[:2], D.z[:2])


def test_feasibility_fails_without_T_minus_1_le_d():
    # n = 1, T = 4 > d + 1 = 3, tokens not on a sphere: a token inside the hull of the
    # others cannot be selected (unit tokens are all extreme, so the search uses raw ones)
    g = np.random.default_rng(0)
    found = sum(not every_selection_feasible(g.normal(size=(1, 4, 2)), g.normal(size=(1, 2)))
                for _ in range(10))
    assert found >= 1


def test_feasibility_fails_without_general_position():
    # n = 2 <= d = 2, T = 2, but z_1 = z_2 and opposite wishes: w >= 1 and -w >= 1
    X = np.array([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [1.0, 0.0]]])
    z = np.array([[1.0, 0.0], [1.0, 0.0]])
    assert not lp_feasible(att_rows(X, z, [0, 0]))
    z[1] = [1.0, 0.1]  # general position restored: feasible
    assert lp_feasible(att_rows(X, z, [0, 0]))


# ============================================================ ch6: no stationary point
E1, E2 = torch.tensor([1.0, 0.0], dtype=F64), torch.tensor([0.0, 1.0], dtype=F64)
TOK = torch.stack([E1, -E1])  # x_1 = e_1, x_2 = -e_1


@pytest.mark.parametrize("case", ["dependent queries", "l' = 0 somewhere", "equal values"])
def test_each_hypothesis_of_no_stationary_point_is_needed(case):
    """The three stationary points of exercise ex-6-stationary at W = 0, each breaking one
    hypothesis; restoring the hypothesis makes the gradient at the same point non-zero."""
    W = torch.zeros(2, 2, dtype=F64)
    cube = lambda u: -(u ** 3)  # noqa: E731  strictly decreasing, l'(0) = 0
    if case == "dependent queries":
        X, Y, v = torch.stack([TOK, TOK]), torch.tensor([1.0, -1.0], dtype=F64), E1
        broken, fixed = (X, Y, torch.stack([E1, E1]), v), (X, Y, torch.stack([E1, E2]), v)
        # with z_2 = e_2 the second input's own direction is free: the gradient is not zero
        kw = {}
    elif case == "l' = 0 somewhere":
        broken = fixed = (TOK[None], torch.ones(1, dtype=F64), E1[None], E1)
        kw = {"ell": cube}
    else:
        broken, fixed = (TOK[None], torch.ones(1, dtype=F64), E1[None], E2), \
            (TOK[None], torch.ones(1, dtype=F64), E1[None], E1)
        kw = {}
    assert autograd(W, *broken, **kw).abs().max() < 1e-15
    if case == "l' = 0 somewhere":  # the logistic loss has l' < 0 everywhere
        assert autograd(W, *fixed).norm() > 0.1
    else:
        assert autograd(W, *fixed, **kw).norm() > 0.1


def test_tokens_need_no_general_position_for_no_stationary_point():
    """T - 1 > d: the argument holds anyway. With dual vectors w_i of the queries and
    D = sum_i Y_i v w_i^T, <grad L, D> = (1/n) sum_i l'_i Var_{s_i}(g_i) < 0 at every W."""
    n, T, d = 2, 6, 2
    data = al.random_data(n, T, d, seed=4, device="cpu")
    X, Y, z, v = data.X, data.Y, data.z, data.v
    D = sum(Y[i] * torch.outer(v, torch.linalg.pinv(z)[:, i]) for i in range(n))
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        W = 3 * torch.randn(d, d, generator=g, dtype=F64)
        G = autograd(W, X, Y, z, v)
        s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, z), -1)
        gv = X @ v
        f = (s * gv).sum(-1)
        var = (s * (gv - f[:, None]) ** 2).sum(-1)
        lp = -torch.sigmoid(-Y * f)
        assert float((G * D).sum()) == pytest.approx(float((lp * var).mean()), rel=1e-9)
        assert float((G * D).sum()) < 0


# ========================================= ch6: the loss need not reach inf L (L -> L_alpha)
def test_loss_tends_to_L_alpha_not_inf_L_on_a_non_global_selection():
    trap, alpha = equal_scores_trap()
    X, Y, z, v = trap.X, trap.Y, trap.z, trap.v
    gamma = Y[:, None] * (X @ v)
    inf_L = float(torch.nn.functional.softplus(-gamma.amax(-1)).mean())
    L_alpha = float(torch.nn.functional.softplus(-gamma[torch.arange(2), alpha]).mean())
    out = {}
    for name, sel in (("local", alpha), ("global", al.optimal_tokens(trap))):
        Wd = al.att_svm(trap, alpha=sel)
        run = al.train(trap, "W", lr=0.1, steps=1000, record_every=500, device="cpu",
                       init={"W": 5 * Wd / Wd.norm()})
        out[name] = [float(plain_loss(W, X, Y, z, v)) - inf_L for W in run.history["W"]]
        ex = loss_excess(AttentionData(X[None], Y[None], z[None], v[None]),
                         run.history["W"][None], sel[None])
        np.testing.assert_allclose(ex["excess"][0].numpy(), out[name], atol=1e-12)
    # the old statement "L(W(k)) -> inf L" fails on the locally optimal, non-global run ...
    assert L_alpha - inf_L > 1e-3
    assert out["local"][-1] == pytest.approx(L_alpha - inf_L, rel=1e-6)
    # ... and holds on the global one (the control): its excess keeps falling
    assert out["global"][-1] < 0.01 * (L_alpha - inf_L)
    assert out["global"][-1] < 0.5 * out["global"][1]


# ======================================= ch6: global directional convergence (rem-global-gd)
def _locally_optimal_selections(data):
    n, T = data.X.shape[:2]
    return [a for a in itertools.product(range(T), repeat=n)
            if bool(al.is_locally_optimal(data, torch.tensor(a)))]


def _stays(data, alpha, steps=1000, R=20.0):
    """corr of GD started on the direction of W^mm_alpha (norm R) with it after ``steps``."""
    Wd = al.att_svm(data, alpha=alpha)
    run = al.train(data, "W", lr=0.1, steps=steps, device="cpu", init={"W": R * Wd / Wd.norm()})
    return float(al.correlation(run.W, Wd))


def test_global_convergence_fails_without_the_no_other_local_selection_clause():
    trap, alpha = equal_scores_trap()
    n, T, d = trap.X.shape
    assert d >= max(T - 1, n)
    gam = trap.Y[:, None] * (trap.X @ trap.v)
    for i in range(n):  # (a): equal non-optimal scores
        rest = gam[i][gam[i] < gam[i].max()]
        assert torch.allclose(rest, rest[0].expand_as(rest), atol=1e-12)
    assert len(_locally_optimal_selections(trap)) >= 2  # the clause fails ...
    assert _stays(trap, alpha) > 0.999  # ... and GD converges to a non-global direction


def test_global_convergence_fails_without_equal_scores():
    base = al.random_data(2, 3, 2, trials=16, seed=1, device="cpu")
    found = 0
    for b in range(16):
        data = AttentionData(base.X[b], base.Y[b], base.z[b], base.v[b])
        opt = tuple(al.optimal_tokens(data).tolist())
        others = [a for a in _locally_optimal_selections(data) if a != opt]
        found += any(_stays(data, torch.tensor(a)) > 0.999 for a in others)
        if found:
            break
    assert found


def test_global_convergence_with_every_hypothesis():
    """Equal scores, d = max(T - 1, n), opt the only locally optimal selection (checked by
    enumeration): gradient descent from random starts reaches the global direction."""
    E = equal_scores(al.random_data(2, 3, 2, trials=12, seed=5, device="cpu"), 0.5)
    tested = 0
    for b in range(12):
        data = AttentionData(E.X[b], E.Y[b], E.z[b], E.v[b])
        opt = tuple(al.optimal_tokens(data).tolist())
        if _locally_optimal_selections(data) != [opt]:
            continue
        W_mm = al.att_svm(data, alpha=torch.tensor(opt))
        batch = AttentionData(*(t.expand(8, *t.shape) for t in (data.X, data.Y, data.z, data.v)))
        g = torch.Generator().manual_seed(b)
        W0 = 2 * torch.randn(8, 2, 2, generator=g, dtype=F64)
        run = al.train(batch, "W", lr=0.1, steps=1500, device="cpu", init={"W": W0})
        assert (al.correlation(run.W, W_mm.expand(8, 2, 2), dims=2) > 0.99).all()
        tested += 1
        if tested == 2:
            break
    assert tested == 2


# ================================== ch7: regularisation path with a nonlinear head (remark)
W_MM = torch.tensor([2.0, -1.0, -1.0], dtype=F64) / 6 ** 0.5  # Att-SVM direction, alpha = 1


def leaky(log_s):  # f = -s_2^2 - s_3: the derivative toward e_2 is 0
    return torch.logaddexp(2 * log_s[..., 1], log_s[..., 2])


def first_order(log_s):  # f = -s_2 - s_2^2 - s_3: every derivative strictly negative
    return torch.stack([log_s[..., 1], 2 * log_s[..., 1], log_s[..., 2]]).logsumexp(0)


def test_the_svm_direction_of_the_counterexample_is_the_library_att_svm():
    X = torch.eye(3, dtype=F64)[None]
    data = AttentionData(X, torch.ones(1, dtype=F64), X[:, 0], torch.zeros(3, dtype=F64))
    W = al.att_svm(data, alpha=torch.tensor([0]))
    u = W @ X[0, 0]
    assert float(u @ W_MM / u.norm()) == pytest.approx(1.0, abs=1e-6)


def test_circle_path_direction_against_projected_gradient_descent():
    R = 6.0
    w = torch.tensor([1.0, -0.5, -0.5], dtype=F64)
    for _ in range(4000):  # minimise the cost over the ball of radius R by projected GD
        w = w.detach().requires_grad_(True)
        leaky(torch.log_softmax(w, -1)).backward()
        with torch.no_grad():
            w = w - 0.05 * w.grad
            w = w - w.mean()
            w = w * min(1.0, R / float(w.norm()))
    assert float(w.norm()) == pytest.approx(R, rel=1e-6)  # the ball's constraint is active
    assert float(circle_path_direction(leaky, R) @ w / R) > 1 - 1e-6


def test_path_without_first_order_hypothesis_misses_the_svm():
    u = circle_path_direction(leaky, 1000.0)
    assert float(u @ W_MM) < 0.87  # -> sqrt(3)/2, not 1
    # oracle: the weighted max-margin problem 2 m_2 >= 1, m_3 >= 1 (cvxpy)
    w = cp.Variable(3)
    cp.Problem(cp.Minimize(cp.sum_squares(w)), [2 * (w[0] - w[1]) >= 1, w[0] - w[2] >= 1]).solve()
    ref = torch.tensor(w.value, dtype=F64)
    assert float(u @ ref / ref.norm()) > 0.9999


def test_path_with_first_order_hypothesis_turns_to_the_svm():
    assert float(circle_path_direction(first_order, 1000.0) @ W_MM) > 0.9999


def test_path_without_a_single_best_token_turns_elsewhere():
    """A mixture-best head, f = gamma^T s - lambda ||s||^2 with gamma = (1, 0.8, 0),
    lambda = 0.25: s* = (0.7, 0.3, 0), and the path turns to W^dir ~ (1, 1, -2), not to the
    Att-SVM of the best token."""
    gamma = torch.tensor([1.0, 0.8, 0.0], dtype=F64)

    def mixture(log_s):  # log(1 - f) >= log(0): the loss is increasing in 1 - f
        s = log_s.exp()
        return torch.log1p(-(s @ gamma - 0.25 * (s * s).sum(-1)))

    u = circle_path_direction(mixture, 1000.0)
    assert float(u @ W_MM) < 0.6
    assert float(u @ torch.tensor([1.0, 1.0, -2.0], dtype=F64) / 6 ** 0.5) > 0.999


def test_path_without_feasibility_stays_bounded():
    """Two inputs sharing the query with opposite wishes (Att-SVM infeasible): the minimiser
    over the ball stops growing, so W(R)/R -> 0 and there is no direction to converge to."""
    w = torch.linspace(-50, 50, 200_001, dtype=F64)
    L = 0.5 * (torch.nn.functional.softplus(-torch.tanh(w))
               + torch.nn.functional.softplus(torch.tanh(2 * w)))
    best = [float(w[(w.abs() <= R)][L[w.abs() <= R].argmin()].abs()) / R for R in (1, 10, 50)]
    assert best[-1] < 0.02 and best[0] > best[-1]


# ================================ ch8: the sequence Att-SVM is feasible once d >= nT
def seq_rows(X, alpha, causal):
    X = np.asarray(X, dtype=float)  # (n, T, d)
    rows = []
    for i in range(X.shape[0]):
        for k in range(X.shape[1]):
            vis = range(k + 1) if causal else range(X.shape[1])
            rows += [np.outer(X[i, alpha[i][k]] - X[i, t], X[i, k]).ravel()
                     for t in vis if t != alpha[i][k]]
    return rows


def _selections(T, causal):
    ranges = [range(k + 1) if causal else range(T) for k in range(T)]
    return [[list(a)] for a in itertools.product(*ranges)]


def test_sequence_feasibility_with_d_ge_nT():
    X = al.random_data(1, 3, 3, seed=2, device="cpu").X.numpy()  # n T = 3 = d
    for causal in (False, True):
        assert all(lp_feasible(seq_rows(X, a, causal)) for a in _selections(3, causal))


def test_sequence_feasibility_fails_below_nT_and_causal_is_weaker():
    strict = 0
    for seed in range(8):
        X = al.random_data(1, 3, 2, seed=seed, device="cpu").X.numpy()  # d = 2 < n T = 3
        full = {tuple(a[0]): lp_feasible(seq_rows(X, a, False)) for a in _selections(3, False)}
        assert not all(full.values())  # the dimension condition is needed
        causal_ok = {a: lp_feasible(seq_rows(X, [list(a)], True)) for a in full
                     if all(a[k] <= k for k in range(3))}
        # causal constraints are a subset: bidirectional-feasible implies causal-feasible ...
        assert all(causal_ok[a] for a in causal_ok if full[a])
        strict += any(causal_ok[a] and not full[a] for a in causal_ok)
    assert strict >= 1  # ... and not conversely (the inclusion is strict somewhere)
