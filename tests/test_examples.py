"""Tests of attnlib.examples: each example has the properties its paper states.

The oracles are independent of the library: the official notebooks' recipes re-typed here,
the KKT conditions of the max-margin problems (``scipy.optimize.nnls`` for the multipliers),
and the KKT conditions of the λ-head's concave program on the simplex.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import nnls

import attnlib as al
import attnlib.examples as E

F64 = torch.float64


def assert_max_margin(A, w, tol=1e-12):
    """``w`` solves min ||w||^2 s.t. A w >= 1: feasible, and w = A_active^T lam with lam >= 0."""
    A, w = np.asarray(A, dtype=np.float64), np.asarray(w, dtype=np.float64)
    m = A @ w
    assert (m >= 1 - tol).all(), f"infeasible: margins {m}"
    active = np.abs(m - 1) <= 1e-9
    lam, resid = nnls(A[active].T, w)
    assert resid < 1e-10, f"not stationary: residual {resid}, multipliers {lam}"
    return np.flatnonzero(active)


# ----------------------------------------------------------------------------- constants
def test_official_constants():
    assert E.EPS == np.finfo(np.float64).eps == 2.0**-52 and type(E.EPS) is float
    assert E.MD_BUDGETS == {1.75: 1500, 2.0: 2000, 3.0: 20000}
    assert al.EPS is E.EPS and al.MD_BUDGETS is E.MD_BUDGETS


def test_examples_are_top_level_names_with_one_home():
    for name in E.__all__:
        assert getattr(al, name) is getattr(E, name)
        assert not hasattr(al.data, name), name  # data sits below examples


# ----------------------------------------------------------------------------- max-margin paper
@pytest.mark.parametrize("scores, gamma", [("global", [1.0, 0.9, 0.9]),
                                           ("local", [1.0, 0.9, 0.0])])
def test_three_token_example(scores, gamma):
    ex = E.three_token_example(scores, device="cpu")
    X, W = ex.data.X[0], ex.init["W"]
    assert (X @ ex.data.v).tolist() == gamma
    keys = (X @ W).numpy()  # the logits x_t^T W p see the key plane only
    for alpha, p in ex.known["p_mm"].items():
        A = keys[alpha] - np.delete(keys, alpha, axis=0)  # (x_alpha - x_t)^T W p >= 1
        active = assert_max_margin(A, p.numpy())
        others = [t for t in range(3) if t != alpha]
        assert [others[i] for i in active] == ex.known["support"][alpha]
        assert math.isclose(float(p @ p), ex.known["p_mm_sq_norm"][alpha], rel_tol=1e-12)
    assert ex.init["p"][:, 1].tolist() == ex.known["c"] == [1.0, 0.5, 0.0, -0.5, -1.0, -1.5]
    assert ex.settings == dict(param="p", method="gd", lr=0.1, steps=1000, normalized=True,
                               eps=1e-9, loss="logistic")


def test_three_token_local_optima():
    """alpha is locally optimal iff its score beats the scores of its support tokens."""
    for scores in ("global", "local"):
        ex = E.three_token_example(scores, device="cpu")
        gamma = (ex.data.X[0] @ ex.data.v).tolist()
        want = [a for a in range(3)
                if all(gamma[a] > gamma[t] for t in ex.known["support"][a])]
        assert ex.known["locally_optimal"] == want


def test_multi_input_example_recipe():
    ex = E.multi_input_example(device="cpu")
    X = ex.data.X
    assert X.shape == (3, 7, 3) and ex.data.Y.tolist() == [1.0] * 3
    g = torch.Generator().manual_seed(0)
    raw = torch.randn((3, 7, 3), generator=g) * 0.2
    raw[:, 0] += torch.tensor([1.0, 0.0, 0.0])
    raw[:, 1:4] += torch.tensor([-1.0, 1.0, 0.0])
    raw[:, 4:] += torch.tensor([-0.5, -0.5, 0.0])
    raw[:, 0, 2], raw[:, 1:, 2] = 1.0, 0.5
    assert torch.equal(X, raw.double())
    assert (X @ ex.data.v).argmax(-1).tolist() == ex.known["opt"] == [0, 0, 0]
    assert math.isclose(ex.known["p_mm_norm_official"], math.sqrt(2 * 0.31319))


def test_multi_input_example_reproduces_the_official_solver_log():
    # the notebook solves its p-SVM with W = I (score coordinate in the keys): cvxopt's
    # objective ½‖p‖² = 0.31319 (5 digits) is reproduced by the same seed-0 draw today
    ex = E.multi_input_example(device="cpu")
    X = ex.data.X.numpy()
    A_eye = X[:, :1] - X[:, 1:]  # (n, T-1, d): rows of the W = I constraints
    W = ex.init["W"].numpy()
    p_eye = al.prompt_svm(ex.data, W=torch.eye(3, dtype=torch.float64)).numpy()
    assert_max_margin(A_eye.reshape(-1, 3), p_eye)
    assert abs(0.5 * p_eye @ p_eye - ex.known["p_mm_half_sq_official"]) < 5e-6
    # the key-plane SVM (W = diag(1, 1, 0)) has the same direction in the plane
    p_key = al.prompt_svm(ex.data, W=ex.init["W"]).numpy()
    assert_max_margin((A_eye @ W).reshape(-1, 3), p_key)
    cos = p_eye[:2] @ p_key[:2] / np.linalg.norm(p_eye[:2]) / np.linalg.norm(p_key[:2])
    assert cos > 1 - 1e-10 and abs(0.5 * p_key @ p_key - 0.31319) > 0.05


@pytest.mark.parametrize("tight", [True, False])
def test_joint_example_svms(tight):
    ex = E.joint_example(tight=tight, device="cpu")
    X, Y = ex.data.X.numpy(), ex.data.Y.numpy()
    assert X[2, 1].tolist() == ([0.5, 1.0] if tight else [0.5, 1.5]) and (X[:, 0] == 0).all()
    # p-SVM: the second token (index 1) beats the origin in every input
    assert_max_margin(X[:, 1] - X[:, 0], ex.known["p_mm"].numpy())
    # v-SVM on the selected tokens: Y_i v^T x_i1 >= 1
    active = assert_max_margin(Y[:, None] * X[:, 1], ex.known["v_mm"].numpy())
    assert active.tolist() == ex.known["v_support"]
    if tight:
        assert torch.equal(ex.known["p_relax"], ex.known["p_mm"])
    else:  # the relaxed SVM keeps only the support inputs of v (0 and 1)
        assert_max_margin(X[[0, 1], 1] - X[[0, 1], 0], ex.known["p_relax"].numpy())
    assert ex.init["p"].tolist() == [0.0, -1.0] and ex.init["v"].tolist() == [-1.0, 0.0]


@pytest.mark.parametrize("C", [1.0, 7.0, 100.0])
def test_loss_example(C):
    ex = E.loss_example(C=C, device="cpu")
    X, W = ex.data.X.numpy(), ex.init["W"].numpy()
    assert ex.data.B is None and X[0, 1].tolist() == [1.0, 1.0, C]
    assert (X @ ex.data.v.numpy()).argmax(-1).tolist() == ex.known["opt"] == [1, 1]
    keys = X @ W
    assert_max_margin(keys[:, 1] - keys[:, 0], ex.known["p_mm"].numpy())


def test_loss_example_sweep_and_errors():
    ex = E.loss_example(device="cpu")
    assert ex.data.B == 11 and ex.data.X[:, 0, 1, 2].tolist() == ex.known["C"]
    assert ex.known["C"] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100]
    assert ex.init["p"].shape == (11, 3)
    for bad in ([[1, 2]], [1, float("nan")]):
        with pytest.raises(ValueError, match="^C: expected"):
            E.loss_example(C=bad)


# ----------------------------------------------------------------------------- TF-SVM paper
def test_visualization_examples_follow_the_official_recipes():
    for version, (T, seed, scale) in {1: (3, 1, 0.3), 2: (5, 3, 0.5)}.items():
        ex = E.visualization_example(version, device="cpu")
        g = torch.Generator().manual_seed(seed)
        v = torch.randn(2, generator=g)
        X = scale * torch.randn((2, T, 2), generator=g)
        if version == 1:
            X[0] += torch.tensor([-1.0, 0.0])
            X[1] += torch.tensor([1.0, 0.0])
        else:
            X[0, 0], X[1, 0] = torch.tensor([1.0, 0.5]), torch.tensor([1.0, -0.5])
            X[:, 1:] += torch.tensor([-1.0, 0.0])
        z = torch.randn((2, 2), generator=g)
        assert torch.equal(ex.data.X, X.double())
        assert torch.allclose(ex.data.v, (v / v.norm()).double(), atol=1e-7)
        assert torch.allclose(ex.data.z, (z / z.norm(dim=-1, keepdim=True)).double(), atol=1e-7)
        assert ex.settings["eps"] == ex.known["reg_KQ"] == E.EPS and ex.settings["steps"] == 2000
        assert ex.init["W"].abs().max() == 0 and ex.init["Q"].abs().max() == 0
        assert torch.allclose(ex.init["K"], 0.1 * torch.randn(
            (2, 2), generator=torch.Generator().manual_seed(seed)).double())
    with pytest.raises(ValueError, match="^version: expected 1 or 2"):
        E.visualization_example(3)


def test_relu_head_example_draws_like_the_official_code():
    ex = E.relu_head_example(d=4, seed=5, device="cpu")
    ref = al.random_data(3, 4, 4, seed=5, device="cpu")
    assert torch.allclose(ex.data.X, ref.X, atol=1e-15) and torch.equal(ex.data.Y, ref.Y)
    assert torch.allclose(ex.data.z, ref.z, atol=1e-15)
    g = torch.Generator().manual_seed(5)
    for shape in [(4,), (3,), (3, 4, 4), (3, 4)]:  # v, Y, X, z come first
        torch.randn(*shape, generator=g)
    V = torch.randn(4, 4, generator=g)
    assert torch.allclose(ex.init["V"], (V / V.norm()).double(), atol=1e-7)
    assert math.isclose(float(ex.init["V"].norm()), 1.0, rel_tol=1e-7)  # scaled in float32
    assert ex.init["u"].tolist() == [1.0] * 4 and ex.settings["steps"] == 2001
    with pytest.raises(ValueError, match="^d: expected an int >= 1"):
        E.relu_head_example(d=0)


def simplex_kkt(gamma, lam, s, tol=1e-12):
    """KKT of max gamma^T s - lam |s|^2 on the simplex: gamma_t - 2 lam s_t = tau where s_t > 0,
    <= tau where s_t = 0."""
    grad = gamma - 2 * lam * s
    on = s > 0
    tau = grad[on].mean()
    assert abs(s.sum() - 1) < tol and (s >= 0).all()
    assert np.abs(grad[on] - tau).max() < 1e-9 and (grad[~on] <= tau + 1e-9).all()


@given(gamma=st.lists(st.floats(-2, 2), min_size=2, max_size=7),
       lam=st.floats(0.05, 5))
def test_lambda_head_optimum_satisfies_kkt(gamma, lam):
    ex = E.lambda_head_example(lam=lam, gamma=gamma, device="cpu")
    s = ex.known["s_opt"].numpy()
    simplex_kkt(np.asarray(gamma), lam, s)
    assert ex.known["selected"] == np.flatnonzero(s > 0).tolist()
    assert torch.equal(ex.data.X[0], torch.eye(len(gamma), dtype=F64))
    assert ex.data.v.tolist() == list(map(float, gamma))


def test_lambda_head_bad_input():
    with pytest.raises(ValueError, match="^lam: expected"):
        E.lambda_head_example(lam=0)
    with pytest.raises(ValueError, match="^gamma: expected"):
        E.lambda_head_example(gamma=[1.0])


# ----------------------------------------------------------------------------- mirror-descent paper
@pytest.mark.parametrize("lp", [1.75, 2.0, 3.0])
def test_mirror_joint_example(lp):
    ex = E.mirror_joint_example(lp, device="cpu")
    X = [[[-2.7, 1.2], [1.4, 2.1], [1.3, -0.1]], [[0.4, -2.2], [-1.1, -0.4], [0.9, 0.1]]]
    assert ex.data.X.tolist() == X and ex.data.Y.tolist() == [1.0, -1.0]
    assert torch.equal(ex.data.z, ex.data.X[:, 0])
    assert ex.settings["steps"] == E.MD_BUDGETS[lp] and ex.settings["lp"] == lp
    assert ex.settings["eps"] == E.EPS and ex.known["steps"] == E.MD_BUDGETS
    assert ex.known["steps"] is not E.MD_BUDGETS  # a copy: editing it cannot move the budgets
    assert ex.known["selection"][lp] == ([0, 0] if lp == 3.0 else [1, 0])


def test_mirror_random_data():
    ex = E.mirror_random_data(seed=4, trials=2, device="cpu")
    ref = al.random_data(6, 8, 10, trials=2, seed=4, device="cpu")
    assert torch.equal(ex.data.X, ref.X) and torch.equal(ex.data.z, ref.z)
    W0 = torch.randn(2, 10, 10, generator=torch.Generator().manual_seed(10_004))
    assert torch.equal(ex.init["W"], W0.double())
    assert E.mirror_random_data(seed=4, device="cpu").init["W"].shape == (10, 10)
    assert ex.settings["method"] == "md" and ex.known["steps"] == E.MD_BUDGETS


@pytest.mark.parametrize("bad", [-1, 1.5, 2**70])
def test_seeded_examples_refuse_a_seed_torch_cannot_take(bad):
    """A seed outside a torch.Generator's range (or not an int) is a ValueError naming the
    seed, in every seeded example and in the digits split (was an overflow text, or -1 and
    1.5 accepted)."""
    import attnlib.realdata as realdata

    calls = [lambda: E.relu_head_example(seed=bad), lambda: E.mirror_random_data(seed=bad),
             lambda: realdata.split_indices(torch.arange(10), seed=bad)]
    for call in calls:
        with pytest.raises(ValueError, match=r"^seed: "):
            call()
    with pytest.raises(ValueError, match=r"^seed: "):  # its initialisation uses seed + 10,000
        E.mirror_random_data(seed=2**64 - 5)


def test_the_official_draws_do_not_follow_torchs_default_dtype():
    """The papers' data are drawn in float32, as the official notebooks draw them: after
    ``torch.set_default_dtype(torch.float64)`` every seeded example and random_data hold the
    same numbers (a float64 draw gives other numbers from the same generator)."""
    def draws():
        out = [E.multi_input_example(), E.visualization_example(1), E.visualization_example(2),
               E.relu_head_example(seed=3), E.mirror_random_data(seed=2)]
        tensors = [x for e in out for x in (e.data.X, e.data.z, e.data.v)]
        tensors += [x for e in out for x in e.init.values() if torch.is_tensor(x)]
        d = al.data.random_data(3, 4, 5, trials=2, seed=7)
        return tensors + [d.X, d.Y, d.z, d.v]

    want = draws()
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got = draws()
    finally:
        torch.set_default_dtype(old)
    assert len(got) == len(want)
    for a, b in zip(want, got):
        assert (a is None and b is None) or torch.equal(a, b)
