"""Properties of attnlib.check that a reader can state in one line, on random instances and
against oracles written out here or shared with nothing in check: the mirror-descent step's
formula, the cvxpy primal of attnlib/svm/primal.py, and metamorphic relations (permuting the
tokens permutes the answer; scaling W, or v, by c > 0 changes no verdict).

Each hint of ``diagnose`` and ``check_md_step`` is asked for by making the mistake it names.
"""

import numpy as np
import pytest
import torch

from attnlib import check
from attnlib import data as D
from attnlib.check.numeric import diagnose
from attnlib.svm.primal import att_svm_primal, head_svm_primal, prompt_svm_primal

#: a phrase of each hint of diagnose
HINTS = {"one-based": "1-based", "transposed": "transpose", "sign": "wrong sign",
         "scale": "wrong scale", "rows": "rows are not", "columns": "columns are not"}


def kind(hint: str) -> str:
    """Which hint ``diagnose`` gave ("" for none)."""
    return next((k for k, phrase in HINTS.items() if phrase in hint), hint)


# -- diagnose: each mistake made on purpose ------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_diagnose_names_the_mistake_that_made_the_answer(seed):
    g = np.random.default_rng(seed)
    E = g.standard_normal((3, 3))  # not symmetric
    assert kind(diagnose(E, E)) == ""
    assert kind(diagnose(E.T, E)) == "transposed"
    assert kind(diagnose(-E, E)) == "sign"
    for c in (0.5, 2.0, 1 + 1e-4):
        assert kind(diagnose(c * E, E)) == "scale", c
    assert kind(diagnose((1 + 1e-7) * E, E)) == ""  # a scale within 1e-6 is no mistake
    # another direction, however close (1e-3 rad), is no scale mistake
    e = E.ravel()
    u = g.standard_normal(9)
    u -= (u @ e) / (e @ e) * e
    turned = np.cos(1e-3) * e + np.sin(1e-3) * u * np.linalg.norm(e) / np.linalg.norm(u)
    assert kind(diagnose(2 * turned.reshape(3, 3), E)) == ""
    idx = g.permutation(6)[:4]  # distinct token indices
    assert kind(diagnose(idx + 1, idx)) == "one-based"
    assert kind(diagnose(idx - 1, idx)) == ""
    P = g.uniform(0.1, 1.0, (3, 4))
    P /= P.sum(1, keepdims=True)  # rows sum to 1
    s = np.array([[0.5], [2.0], [3.0]])
    assert kind(diagnose(P * s, P)) == "rows"
    assert kind(diagnose((P * s).T, P.T)) == "columns"
    assert kind(diagnose([0.0, 0.4], [0.0, 0.2])) == ""  # one nonzero entry: no direction
    assert kind(diagnose([1.0], [1.0, 2.0])) == kind(diagnose([], [])) == ""


def test_diagnose_reads_within_its_tolerance():
    """A hint is given when the mistake explains the answer to within ``tol``, never below the
    floor 1e-9 (1 + max|exp|)."""
    g = np.random.default_rng(7)
    E = g.standard_normal(4)
    E /= np.abs(E).max()  # max |exp| = 1: the floor is 2e-9
    off = np.eye(4)[0]
    for tol in (0.0, 1e-6, 0.1):
        t = max(tol, 2e-9)
        assert kind(diagnose(-E + 0.75 * t * off, E, tol=tol)) == "sign", tol
        assert kind(diagnose(-E + 1.5 * t * off, E, tol=tol)) == "", tol
    entrywise = torch.tensor([1e-3, 0.0, 0.0, 0.0])
    assert kind(diagnose(-E + 5e-4 * off, E, tol=entrywise)) == "sign"
    assert kind(diagnose(-E + 5e-4 * off, E, tol=entrywise.flip(0))) == ""


# -- check_md_step: the formula passes, a step off by its tolerance fails, each mistake named ---
def power(x, e):
    return np.sign(x) * np.abs(x) ** e


@pytest.mark.parametrize("scale", [0.01, 100.0])
@pytest.mark.parametrize("p", [1.5, 2.0, 3.0])
def test_md_step_against_its_formula(p, scale):
    g = np.random.default_rng(int(10 * p + scale))
    W, G, lr = scale * g.standard_normal((2, 3)), scale ** (p - 1) * g.standard_normal((2, 3)), 0.3
    step = power(power(W, p - 1) - lr * G, 1 / (p - 1))  # to the dual, step, back
    tol = 1e-8 * max(1.0, np.abs(step).max())  # the documented accuracy
    off = np.zeros((2, 3))
    off[1, 2] = 1.0
    assert check.check_md_step(step, W, G, lr, p)
    assert check.check_md_step(step + 0.5 * tol * off, W, G, lr, p)
    fb = check.check_md_step(step + 2 * tol * off, W, G, lr, p)
    assert not fb and fb.details["entry"] == (1, 2)
    assert fb.details["max_error"] == pytest.approx(2 * tol, rel=1e-3)
    said = lambda ans: check.check_md_step(ans, W, G, lr, p).message  # noqa: E731
    # -step, a tolerance away: diagnose reads it within the step's tolerance
    assert "wrong sign" in said(-step + 0.5 * tol * off)
    assert "descent subtracts" in said(power(power(W, p - 1) + lr * G, 1 / (p - 1)))
    if p != 2:
        plain = W - lr * G  # read within the tolerance, on its smallest entry too
        small = np.eye(6)[np.abs(plain).argmin()].reshape(2, 3)
        assert "plain gradient step" in said(plain + 0.5 * tol * small)
        assert "stopped in the dual" in said(power(W, p - 1) - lr * G)
        assert "swapped" in said(power(power(W, 1 / (p - 1)) - lr * G, p - 1))


def test_md_step_tolerance_is_inclusive():
    # W = G = 0 at p = 2: the step is 0 and the tolerance 1e-8 * max(1, 0) = 1e-8, exact
    Z = np.zeros((1, 2))
    assert check.check_md_step([[1e-8, 0.0]], Z, Z, 1.0, 2)
    assert not check.check_md_step([[2e-8, 0.0]], Z, Z, 1.0, 2)


# -- check_selection: every maximiser within the tie passes; argmin and 1-based are named ----------
def scored(*gammas):
    """One sample per tuple, token t at x = (gamma_t, 0), v = e1, Y = 1: scores = gammas."""
    X = torch.tensor([[[gm, 0.0] for gm in gs] for gs in gammas], dtype=torch.float64)
    return D.AttentionData(X, torch.ones(len(gammas), dtype=torch.float64),
                           v=torch.tensor([1.0, 0.0], dtype=torch.float64))


@pytest.mark.parametrize("seed", range(3))
def test_selection_against_argmax(seed):
    g = np.random.default_rng(seed)
    S = g.standard_normal((3, 5))
    data = scored(*S)
    best, worst = S.argmax(1), S.argmin(1)
    assert check.check_selection(best, data)
    fb = check.check_selection(worst, data)
    assert not fb and "argmax (not argmin)" in fb.message and fb.details["wrong"] == [0, 1, 2]
    S[:, 1] = S.max() + 1.0  # token 1 the best everywhere: the answer 2 counts from 1
    assert "numbered from 0" in check.check_selection([2, 2, 2], scored(*S)).message
    # ties are relative: 1e-12 (1 + |best|), so a near-tie passes at any size of the scores
    for top in (0.0, 3.0, -50.0):
        tie = 1e-12 * (1 + abs(top))
        assert check.check_selection([1], scored((top, top - 0.5 * tie)))
        assert not check.check_selection([1], scored((top, top - 2 * tie)))


# -- directions against the cvxpy primal, and invariant under permutations and scaling ------------
def permuted(data, perms):
    """The same instance with sample i's tokens in the order ``perms[i]``."""
    X = torch.stack([data.X[i, perm] for i, perm in enumerate(perms)])
    return D.AttentionData(X, data.Y, z=data.z, v=data.v)


@pytest.mark.parametrize("norm", ["fro", "nuc", 3.0])
def test_att_svm_direction_against_the_primal(norm):
    data = D.random_data(n=3, T=3, d=4, seed=11, device="cpu")
    alpha = [0, 1, 2]
    _, W = att_svm_primal(data.X.numpy(), data.z.numpy(), alpha, norm)
    assert check.check_svm_direction(W, data, alpha=alpha, norm=norm, exact=True)
    assert check.check_svm_direction(2.5 * W, data, alpha=alpha, norm=norm)
    assert not check.check_svm_direction(2.5 * W, data, alpha=alpha, norm=norm, exact=True)
    assert not check.check_svm_direction(-W, data, alpha=alpha, norm=norm)
    perms = [np.random.default_rng(i).permutation(3) for i in range(3)]
    moved = [int(np.flatnonzero(perm == a)[0]) for perm, a in zip(perms, alpha)]
    assert check.check_svm_direction(W, permuted(data, perms), alpha=moved, norm=norm,
                                     exact=True)


@pytest.mark.parametrize("norm", ["fro", 3.0])
def test_prompt_direction_against_the_primal(norm):
    data = D.random_data(n=2, T=3, d=5, seed=12, device="cpu")
    Wk = torch.eye(5, dtype=torch.float64) + 0.4 * torch.randn(
        5, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    alpha = [2, 0]
    _, p = prompt_svm_primal(data.X.numpy(), alpha, W=Wk.numpy(), norm=norm)
    assert check.check_prompt_direction(p, data, alpha=alpha, W=Wk, norm=norm, exact=True)
    assert not check.check_prompt_direction(p, data, alpha=alpha, norm=norm, exact=True)
    # W scaled by c: the constraints scale by c, the minimiser by 1/c
    assert check.check_prompt_direction(p / 4, data, alpha=alpha, W=4 * Wk, norm=norm, exact=True)


@pytest.mark.parametrize(("param", "norm"), [("W", "fro"), ("p", "fro"), ("p", 3.0)])
def test_local_optimality_is_invariant_under_permutation_and_scaling(param, norm):
    """The verdict on each selection of a random instance does not change when the tokens are
    permuted (the selection with them), v is scaled by 3 or the prompt model's W by 1/4."""
    data = D.random_data(n=2, T=3, d=2, seed=5, device="cpu")
    W = torch.tensor([[1.0, 0.3], [-0.2, 0.8]], dtype=torch.float64) if param == "p" else None
    perms = [np.array([2, 0, 1]), np.array([1, 2, 0])]
    inv = [np.argsort(perm) for perm in perms]
    is_local = lambda d, a, **kw: check.check_locally_optimal(  # noqa: E731
        True, d, alpha=a, norm=norm, param=param, **kw).ok
    scaled_v = D.AttentionData(data.X, data.Y, z=data.z, v=3 * data.v)
    verdicts = []
    for a in np.ndindex(3, 3):
        a = list(a)
        verdict = is_local(data, a, W=W)
        verdicts.append(verdict)
        assert is_local(permuted(data, perms), [int(inv[i][t]) for i, t in enumerate(a)],
                        W=W) == verdict, a
        assert is_local(scaled_v, a, W=W) == verdict, a
        if W is not None:
            assert is_local(data, a, W=W / 4) == verdict, a
    assert any(verdicts)  # the optimal tokens at least


# -- the relaxed prompt SVM against the cvxpy primals, each mistake made on purpose ---------------
@pytest.mark.parametrize("with_W", [False, True])
def test_relaxed_prompt_against_the_primal(with_W):
    """p^relax is the p-SVM whose inputs off the head's support need margin 0, not 1: computed
    here from the head's primal (its support inputs) and the prompt's primal with those
    right-hand sides."""
    for seed in range(50):  # an instance with an input off the head's support
        g = np.random.default_rng(seed)
        X, Y, alpha = g.standard_normal((3, 3, 5)), np.array([1.0, -1.0, 1.0]), [0, 2, 1]
        X[:, :, 0] += 2 * Y[:, None] * (np.arange(3)[None, :] == np.array(alpha)[:, None])
        _, v = head_svm_primal(X, Y, alpha)
        support = Y * (X[np.arange(3), alpha] @ v) <= 1 + 1e-6
        if not support.all():
            break
    assert not support.all()
    W = np.eye(5) + 0.3 * g.standard_normal((5, 5)) if with_W else None
    _, p_relax = prompt_svm_primal(X, alpha, W=W, rhs=support.astype(float))
    _, p_mm = prompt_svm_primal(X, alpha, W=W)
    data = D.AttentionData(torch.tensor(X), torch.tensor(Y), v=torch.tensor(v))
    said = lambda p: check.check_relaxed_prompt(p, data, alpha=alpha, W=W, atol=1e-5)  # noqa: E731
    assert said(p_relax)
    assert "This is p^mm" in said(p_mm).message
    assert "points the wrong way" in said(-p_relax).message
    assert "This is v^mm" in said(v).message
    assert not said(1.1 * p_relax)  # feasible, but not the shortest
