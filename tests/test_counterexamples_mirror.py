"""Chapter 9: the statements the book reconstructs from the p = 2 predecessors, or derives
itself, are tested by dropping one hypothesis at a time on small designed instances. Each
statement's check must fail without the hypothesis and pass with it.

Statements: the ℓp-AttSVM and its support tokens (local optimality depends on p); ℓp mirror
descent started in a cone around a locally optimal selection's ℓp-AttSVM keeps the selection
and turns to that SVM, and leaves a selection that is not locally optimal; the ℓp
regularisation path turns to the ℓp-AttSVM of the globally optimal tokens, and stays bounded
when that SVM is infeasible; the three ε regimes of the normalised step (ε = 0 with an exact
gradient converges, ε = 2⁻⁵² freezes the direction, autograd with ε = 0 loses it).

Oracles, none of them the library function under test: cvxpy (``pnorm``) for the ℓp-AttSVM and
its active constraints, a hand-written mirror-descent loop with a cancellation-free gradient
(checked against autograd), autograd of a plain torch loss, and a directional Bregman
divergence written out here. (The ℓp path's points themselves are checked against SLSQP in
test_lp_path.)
"""

import math

import cvxpy as cp
import numpy as np
import pytest
import torch

import attnlib as al
from attnlib.data import AttentionData

F64 = torch.float64
EPS = 2.0 ** -52  # the official code's ε


# ----------------------------------------------------------------------------- oracles
def rows(X, z, alpha):
    """ℓp-AttSVM constraint rows vec((x_{i alpha_i} - x_it) z_i^T), numpy (row-major)."""
    X, z = np.asarray(X, dtype=float), np.asarray(z, dtype=float)
    return np.stack([np.outer(X[i, alpha[i]] - X[i, t], z[i]).ravel()
                     for i in range(X.shape[0]) for t in range(X.shape[1]) if t != alpha[i]])


def svm_cvxpy(X, z, alpha, p):
    """min ||W||_p (entrywise) s.t. every margin >= 1, by cvxpy; W (d, d) and the margins."""
    A = rows(X, z, alpha)
    d = np.asarray(X).shape[-1]
    w = cp.Variable(d * d)
    cp.Problem(cp.Minimize(cp.pnorm(w, p)), [A @ w >= 1]).solve()
    return torch.tensor(w.value.reshape(d, d), dtype=F64), A @ w.value


def ddir(A, B, p):
    """D_dir(A, B) = 1 - <sign(B̄)|B̄|^(p-1), Ā>, bars: unit entrywise ℓp norm."""
    A = A / A.abs().pow(p).sum().pow(1 / p)
    B = B / B.abs().pow(p).sum().pow(1 / p)
    return float(1 - (torch.sign(B) * B.abs().pow(p - 1) * A).sum())


def scores(X, W, z):
    return torch.einsum("ntd,de,ne->nt", X, W, z)


def grad_exact(W, X, Y, z, v):
    """∇_W of mean_i log(1 + exp(-Y_i v^T X_i^T softmax(X_i W z_i))), with the softmax
    derivative written as s_t sum_u s_u (g_t - g_u): no cancellation when one s_t rounds to 1."""
    s = torch.softmax(scores(X, W, z), -1)
    g = X @ v
    f = (s * g).sum(-1)
    coef = s * (s[:, None, :] * (g[:, :, None] - g[:, None, :])).sum(-1)
    dl = -torch.sigmoid(-Y * f) * Y / len(Y)
    return torch.einsum("n,nt,ntd,ne->de", dl, coef, X, z)


def grad_autograd(W, X, Y, z, v):
    """The same gradient by autograd of the plain loss (the official code's way)."""
    W = W.clone().requires_grad_(True)
    s = torch.softmax(scores(X, W, z), -1)
    torch.nn.functional.softplus(-Y * (s * (X @ v)).sum(-1)).mean().backward()
    return W.grad


def md_loop(W0, data, p, steps, eps=0.0, lr=0.1, grad=grad_exact, keep=()):
    """Normalised ℓp mirror descent written out: dual step -lr G / (||G||_q + eps)."""
    q = p / (p - 1)
    W, theta, out = W0.clone(), torch.sign(W0) * W0.abs().pow(p - 1), {}
    for k in range(1, steps + 1):
        G = grad(W, data.X, data.Y, data.z, data.v)
        norm = G.abs().pow(q).sum().pow(1 / q) + eps
        if norm > 0:  # a gradient that underflowed to 0 (with eps = 0): no step
            theta = theta - lr * G / norm
            W = torch.sign(theta) * theta.abs().pow(1 / (p - 1))
        if k in keep:
            out[k] = W
    return W, out


# ---------------------------------------------------------------- designed instances
# One input, three tokens, query e_1: only the first column w of W matters, and the constraint
# rows of alpha = token 1 are u_t = x_1 - x_t. x_1 = 0, x_2 = -u_1, x_3 = -u_3.
U1 = np.array([1.0, 0.7, 0.0])


def one_input(u3, v, Y=1.0):
    X = torch.tensor(np.stack([np.zeros(3), -U1, -np.asarray(u3)]), dtype=F64)[None]
    return AttentionData(X, torch.tensor([Y], dtype=F64), torch.tensor([[1.0, 0.0, 0.0]],
                         dtype=F64), torch.tensor(v, dtype=F64))


# u_3 = (1.35, 0, 0): the ℓ2 solution of u_1.w >= 1 alone, u_1/|u_1|^2, has u_3-margin 0.906,
# the ℓ1.25 one, sign(u_1)|u_1|^4 scaled, has 1.156: token 3 is a support token for p = 2 only
NEAR = (1.35, 0.0, 0.0)
FAR = (3.0, 0.0, 0.0)  # token 3 far away: never a support token of alpha = token 1
V_LOCAL = (-0.2, 1.0, 0.0)  # gamma = (0, -0.5, +) : token 3 best, support token 2 worse
V_NOT_LOCAL = (0.2, -1.0, 0.0)  # gamma = (0, +0.5, -): the support token 2 beats token 1


# ================================================= the ℓp-AttSVM and its support tokens
@pytest.mark.parametrize("p", [1.25, 1.75, 3.0])
def test_lp_att_svm_is_the_cvxpy_solution(p):
    data = al.random_data(2, 3, 3, seed=4, device="cpu", dtype=F64)
    alpha = al.optimal_tokens(data)
    W_lib = al.att_svm(data, alpha=alpha, norm=p)
    W_ref, margins = svm_cvxpy(data.X, data.z, alpha.tolist(), p)
    assert margins.min() > 1 - 1e-6
    assert ddir(W_ref, W_lib, p) < 1e-6
    norm = W_lib.abs().pow(p).sum().pow(1 / p)
    assert float(norm) == pytest.approx(float(W_ref.abs().pow(p).sum().pow(1 / p)), rel=1e-4)


def test_local_optimality_depends_on_p():
    """The definition puts the ℓp solution in: its support tokens, hence local optimality,
    change with p. Token 3 is better than the selected token 1; it is a support token of the
    ℓ2-AttSVM (not locally optimal) but not of the ℓ1.25-AttSVM (locally optimal)."""
    data = one_input(NEAR, V_LOCAL)
    gamma = (data.Y[:, None] * (data.X @ data.v))[0]
    assert gamma[2] > gamma[0] > gamma[1]
    alpha = torch.tensor([0])
    for p, support_3 in ((1.25, False), (2.0, True)):
        _, margins = svm_cvxpy(data.X, data.z, [0], p)  # rows: tokens 2, 3
        assert abs(margins[0] - 1) < 1e-6  # token 2: support for both p
        assert (abs(margins[1] - 1) < 1e-6) == support_3
        assert bool(al.is_locally_optimal(data, alpha, norm=p)) == (not support_3)
    # with token 3 far away it is a support token for neither p: locally optimal for both
    far = one_input(FAR, V_LOCAL)
    assert all(bool(al.is_locally_optimal(far, alpha, norm=p)) for p in (1.25, 2.0))


# ================================================ mirror descent: the library and the loop
def test_md_iterates_are_the_hand_written_loop():
    ex = al.mirror_random_data(seed=1)
    W0 = ex.init["W"]
    for p, eps in ((1.75, 0.0), (1.25, EPS), (3.0, 0.0)):
        run = al.train(ex.data, param="W", method="md", lp=p, lr=0.1, steps=200,
                       normalized=True, eps=eps, init={"W": W0}, device="cpu", record_every=200)
        W_ref, _ = md_loop(W0, ex.data, p, 200, eps=eps)
        torch.testing.assert_close(run.W, W_ref, rtol=1e-9, atol=1e-12)


def test_the_cancellation_free_gradient_is_autograd_away_from_saturation():
    ex = al.mirror_random_data(seed=2)
    d = ex.data
    torch.testing.assert_close(grad_exact(ex.init["W"], d.X, d.Y, d.z, d.v),
                               grad_autograd(ex.init["W"], d.X, d.Y, d.z, d.v),
                               rtol=1e-10, atol=1e-14)


# ===================== the convergence theorem (local form): the locally optimal hypothesis
def _cone_run(v, p=1.75, R=10.0, steps=400):
    """Normalised ℓp-MD (ε = 0, the library's) from R (W̄^mm + a perturbation) on the FAR
    instance: the start's divergence, the final one, the final selection."""
    data = one_input(FAR, v)
    W_mm, _ = svm_cvxpy(data.X, data.z, [0], p)
    pert = torch.zeros(3, 3, dtype=F64)
    pert[:, 0] = torch.tensor([0.0, 0.3, 0.0])  # entries the gradient moves
    W0 = R * (W_mm / W_mm.abs().pow(p).sum().pow(1 / p) + pert)
    run = al.train(data, param="W", method="md", lp=p, lr=0.1, steps=steps, normalized=True,
                   eps=0.0, init={"W": W0}, device="cpu", record_every=steps)
    sel = int(scores(data.X, run.W, data.z)[0].argmax())
    return ddir(W_mm, W0, p), ddir(W_mm, run.W, p), sel, data, run.W


def test_md_turns_to_the_lp_svm_of_a_locally_optimal_selection():
    start, end, sel, data, W = _cone_run(V_LOCAL)
    gamma = (data.Y[:, None] * (data.X @ data.v))[0]
    assert gamma.argmax() != 0  # token 1 is locally, not globally, optimal
    assert sel == 0 and end < 0.02 * start


def test_md_leaves_a_selection_that_is_not_locally_optimal():
    start, end, sel, data, _ = _cone_run(V_NOT_LOCAL)
    assert not bool(al.is_locally_optimal(data, torch.tensor([0]), norm=1.75))
    assert sel != 0 and end > 1.0  # the same start, the same cone: it leaves


# ================================================== the ℓp regularisation path (remark)
P_PATH = 1.75
RADII = (1.0, 3.0, 10.0, 30.0)


def _path(data, radii=RADII):
    return al.regularization_path(data, radii, norm=P_PATH, steps=2000, lr=0.1, device="cpu")


def _infeasible():
    """Input 2 is input 1 scaled by 2 with the opposite label (see below: no ℓp-AttSVM)."""
    one = one_input(FAR, V_LOCAL)
    return AttentionData(torch.cat([one.X, 2 * one.X]), torch.tensor([1.0, -1.0], dtype=F64),
                         one.z.expand(2, 3), one.v)


# Each path is computed once for the module (a path's radii are one batch, and a radius's
# point depends only on the radii up to its own: RADII's points are the same with or without
# R = 100 added).
@pytest.fixture(scope="module")
def feasible_path():
    return _path(one_input(FAR, V_LOCAL))


@pytest.fixture(scope="module")
def infeasible_path():
    """R = 100 first, out of order (the path sorts the radii), then RADII."""
    return _path(_infeasible(), (100.0,) + RADII)


def test_path_turns_to_the_svm_of_the_globally_optimal_tokens(feasible_path):
    data = one_input(FAR, V_LOCAL)
    opt = int(al.optimal_tokens(data)[0])
    assert opt == 2
    W = feasible_path.W
    W_glob, _ = svm_cvxpy(data.X, data.z, [opt], P_PATH)
    W_loc, _ = svm_cvxpy(data.X, data.z, [0], P_PATH)  # locally optimal, not global
    D = [ddir(W_glob, w, P_PATH) for w in W]
    assert D[-1] < 1e-4 and all(b <= a + 1e-12 for a, b in zip(D, D[1:]))
    assert ddir(W_loc, W[-1], P_PATH) > 1.0  # the path ignores the local selection


@pytest.mark.slow
def test_path_without_feasibility_stays_bounded(infeasible_path, feasible_path):
    """Input 2 is input 1 scaled by 2 with the opposite label: its best token is 2, input 1's
    is 3, and their rows (x_3 - x_2) z^T and 2 (x_2 - x_3) z^T contradict (no ℓp-AttSVM). The
    minimiser over the ball stops growing: ||W_R||_p < R, so W_R / R -> 0."""
    data = _infeasible()
    opt = al.optimal_tokens(data).tolist()
    assert opt == [2, 1]
    A = rows(data.X, data.z, opt)
    assert np.allclose(A[3], -2 * A[1])  # the contradiction
    norms = infeasible_path.W[1:].abs().pow(P_PATH).sum((-1, -2)).pow(1 / P_PATH)  # RADII
    assert float(norms[-1]) < 0.25 * RADII[-1]
    assert float(norms[-1]) == pytest.approx(float(norms[-2]), rel=1e-3)
    # the control: with the hypothesis (one input, feasible) the ball's constraint is active
    norms_ok = feasible_path.W.abs().pow(P_PATH).sum((-1, -2)).pow(1 / P_PATH)
    torch.testing.assert_close(norms_ok, torch.tensor(RADII, dtype=F64), rtol=1e-6, atol=0)


@pytest.mark.slow
def test_path_loss_does_not_increase_with_the_radius_on_the_infeasible_instance(
        infeasible_path):
    """A point of a smaller ball lies in a larger one, so the path's loss cannot increase with
    R. Steps scaled by R^(p-1) alone left R = 100 on a flat, saturated point of the boundary
    (token 1 selected for both inputs, loss log 2 against 0.590 at R = 30); the path's
    minimiser is interior (norm 2.19) for every R >= 3, and every radius must reach it."""
    res = infeasible_path  # radii (100,) + RADII, out of order: the path sorts them
    loss = res.loss[[1, 2, 3, 4, 0]]
    assert bool((loss.diff() <= 1e-12).all())
    assert float(loss[-1]) < math.log(2) - 0.1
    norms = res.W.abs().pow(P_PATH).sum((-1, -2)).pow(1 / P_PATH)
    torch.testing.assert_close(norms[[2, 3, 4, 0]], norms[2].expand(4), rtol=1e-3, atol=0)
    assert float(norms[0]) < 0.05 * 100.0
    # R = 100 alone (no smaller radius to continue from): the step on the iterate's own
    # scale reaches the same minimiser
    alone = _path(_infeasible(), (100.0,))
    assert float(alone.loss[0]) == pytest.approx(float(loss[-1]), abs=1e-8)


# ========================================================= the ε of the normalised step
@pytest.mark.slow
def test_three_regimes_of_eps_and_the_gradient():
    """Seed 1 of the paper's generator, p = 1.75, W(0) = 0, 1,500 steps: the direction
    converges to the ℓ1.75-AttSVM of its selection (D_dir <= 2e-3, chapter 9's exercise bound)
    only with both hypotheses, ε = 0 and a gradient without cancellation. With ε = 2⁻⁵² it
    freezes; with autograd and ε = 0 it is lost; autograd with ε = 2⁻⁵² freezes too."""
    ex = al.mirror_random_data(seed=1)
    data, p, W0 = ex.data, 1.75, torch.zeros(10, 10, dtype=F64)
    runs = {name: md_loop(W0, data, p, 1500, eps=eps, grad=grad, keep=(300, 1500))[1]
            for name, eps, grad in (("exact_0", 0.0, grad_exact), ("exact_eps", EPS, grad_exact),
                                    ("auto_0", 0.0, grad_autograd))}
    alpha = torch.softmax(scores(data.X, runs["exact_0"][1500], data.z), -1).argmax(-1)
    for r in runs.values():  # the same selection in every regime
        assert torch.equal(torch.softmax(scores(data.X, r[1500], data.z), -1).argmax(-1), alpha)
    W_mm, margins = svm_cvxpy(data.X, data.z, alpha.tolist(), p)
    assert margins.min() > 1 - 1e-6
    D = {name: [ddir(W_mm, r[k], p) for k in (300, 1500)] for name, r in runs.items()}
    assert D["exact_0"][1] < 2e-3 and D["exact_0"][1] < 0.1 * D["exact_0"][0]  # converges
    assert D["exact_eps"][1] > 2e-3  # without ε = 0: frozen above the bound
    assert D["auto_0"][1] > 3 * D["auto_0"][0] and D["auto_0"][1] > 0.05  # lost: it rises
    # (the library, the chapter's algorithm, in the same two regimes of ε, W(0) = 0, 1,500
    # steps, against the same bound: test_check_md_direction, on data seed 3)
