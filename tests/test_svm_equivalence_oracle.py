"""attnlib.svm.equivalence against the problem written out pair by pair.

The oracle states both parts of the generalised SVM equivalence as the chapter does, with
EVERY pair of tokens (not one reference member per set, as the library does): W_dir beats every
masked token by 1 and ties every pair inside a set, W_fin matches every log-ratio inside a set.
Solved with cvxpy to 1e-10, one instance at a time.
"""

import itertools

import cvxpy as cp
import numpy as np
import pytest
import torch

from attnlib import svm
from attnlib.svm import Equivalence, InfeasibleError

TIGHT = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
F64 = dict(dtype=torch.float64)


def _norm(W, norm):
    if norm == "fro":
        return cp.norm(W, "fro")
    if norm == "nuc":
        return cp.normNuc(W)
    return cp.pnorm(cp.vec(W, order="C"), norm)


def _oracle(X, z, O, s, norm):
    """(W_fin, W_dir) of one instance, every pair written out."""
    n, T, d = X.shape
    Wd, Wf = cp.Variable((d, d)), cp.Variable((d, d))
    dir_cons, fin_cons = [], []
    for i in range(n):
        inside = [t for t in range(T) if O[i, t]]
        for t in inside:
            for tau in range(T):
                if not O[i, tau]:
                    dir_cons.append((X[i, t] - X[i, tau]) @ Wd @ z[i] >= 1)
        for t, tau in itertools.combinations(inside, 2):
            dir_cons.append((X[i, t] - X[i, tau]) @ Wd @ z[i] == 0)
            fin_cons.append((X[i, tau] - X[i, t]) @ Wf @ z[i] == np.log(s[i, tau] / s[i, t]))
    cp.Problem(cp.Minimize(_norm(Wd, norm)), dir_cons).solve(**TIGHT)
    if fin_cons:
        cp.Problem(cp.Minimize(_norm(Wf, norm)), fin_cons).solve(**TIGHT)
        return Wf.value, Wd.value
    return np.zeros((d, d)), Wd.value


def _batch():
    g = np.random.default_rng(11)
    X = torch.tensor(g.standard_normal((2, 2, 4, 3)), **F64)  # B=2, n=2, T=4, d=3
    z = torch.tensor(g.standard_normal((2, 2, 3)), **F64)
    # sets of 3, 1 and 2 tokens, their first member not always token 0
    O = torch.tensor([[[False, True, True, True], [True, False, False, False]],
                      [[True, False, True, False], [False, False, True, True]]])
    s = torch.tensor(g.uniform(0.1, 1.0, (2, 2, 4)), **F64)
    return X, z, O, s


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.5])
def test_batched_equivalence_equals_the_pairwise_oracle(norm):
    X, z, O, s = _batch()
    eq = svm.svm_equivalence(X, O, s, norm=norm, z=z)
    assert isinstance(eq, Equivalence) and eq.W_fin.shape == eq.W_dir.shape == (2, 3, 3)
    rel = 1e-6 if norm == "fro" else 1e-4
    for b in range(2):
        W_fin, W_dir = _oracle(X[b].numpy(), z[b].numpy(), O[b].numpy(), s[b].numpy(), norm)
        for got, want in ((eq.W_fin[b], W_fin), (eq.W_dir[b], W_dir)):
            err = np.abs(got.numpy() - want).max()
            assert err <= rel * np.abs(want).max(), (b, err)
    # one trial at a time gives the same, and O / s given once apply to every trial
    one = svm.svm_equivalence(X[1], O[1], s[1], norm=norm, z=z[1])
    assert torch.allclose(one.W_dir, eq.W_dir[1], atol=1e-6 * eq.W_dir[1].abs().max())
    shared = svm.svm_equivalence(X, O[0], s[0], norm=norm, z=z)
    for b in range(2):
        W_fin, W_dir = _oracle(X[b].numpy(), z[b].numpy(), O[0].numpy(), s[0].numpy(), norm)
        assert np.abs(shared.W_dir[b].numpy() - W_dir).max() <= rel * np.abs(W_dir).max()
        assert np.abs(shared.W_fin[b].numpy() - W_fin).max() <= rel * np.abs(W_fin).max()


def test_single_member_sets_are_att_svm():
    X, z, _, s = _batch()
    alpha = torch.tensor([[1, 0], [3, 2]])
    O = torch.nn.functional.one_hot(alpha, 4).bool()
    eq = svm.svm_equivalence(X, O, s, z=z)
    assert (eq.W_fin == 0).all()
    W = svm.att_svm(X, z=z, alpha=alpha)
    assert torch.allclose(eq.W_dir, W, atol=1e-7 * W.abs().max())


def test_fit_is_the_least_squares_radius():
    X, z, O, s = _batch()
    eq = svm.svm_equivalence(X, O, s, z=z)
    g = torch.Generator().manual_seed(0)
    E = torch.randn(2, 3, 3, generator=g, **F64)
    Dn = eq.W_dir / eq.W_dir.norm(dim=(-2, -1), keepdim=True)
    E = E - (E * Dn).sum((-2, -1), keepdim=True) * Dn  # orthogonal to W_dir
    R = torch.tensor([3.7, -0.25], **F64).view(2, 1, 1)
    W = eq.W_fin + R * eq.W_dir + E
    assert torch.allclose(eq.fit(W), eq.W_fin + R * eq.W_dir, atol=1e-12)
    assert torch.allclose(eq.fit(W.float()), eq.W_fin + R * eq.W_dir, atol=1e-5)
    assert eq.fit(W.tolist()).dtype == torch.float64  # lists read in W_dir's dtype
    single = Equivalence(eq.W_fin[0], eq.W_dir[0])
    assert torch.allclose(single.fit(W[0]), eq.W_fin[0] + 3.7 * eq.W_dir[0], atol=1e-12)


def test_output_dtype_and_messages():
    X, z, O, s = _batch()
    eq = svm.svm_equivalence(X, O, s, z=z, dtype=torch.float32)
    assert eq.W_fin.dtype == eq.W_dir.dtype == torch.float32
    ref = svm.svm_equivalence(X, O, s, z=z)
    assert torch.allclose(eq.W_dir.double(), ref.W_dir, atol=1e-6 * ref.W_dir.abs().max())

    def raises(arg, *args, **kw):  # a ValueError naming the argument at fault
        with pytest.raises(ValueError, match=f"^{arg}: "):
            svm.svm_equivalence(*args, **kw)

    raises("O", X, O.int(), s, z=z)  # not bool
    raises("O", X, O[0, :, :3], s, z=z)  # wrong shapes
    raises("O", X, O[None], s, z=z)
    raises("O", X[0], O, s[0], z=z[0])
    empty = O.clone()
    empty[1, 0] = False
    raises("O", X, empty, s, z=z)  # an input with no selected token
    raises("s", X, O, s[0, :, :3], z=z)
    raises("s", X[0], O[0], s, z=z[0])
    zero = s.clone()
    zero[1, 1, 3] = 0.0  # a member of a set (s outside the sets may be 0)
    raises("s", X, O, zero, z=z)
    outside = s.clone()
    outside[1, 1, 0] = 0.0
    svm.svm_equivalence(X, O, outside, z=z)
    full = O.clone()
    full[1] = True  # every token of every input of trial 1: no masked token, no W_dir
    with pytest.raises(ValueError, match="^O: .*trial 1"):
        svm.svm_equivalence(X, full, s, z=z)
    with pytest.raises(ValueError, match="^O: ") as err:
        svm.svm_equivalence(X[1], full[1], s[1], z=z[1])
    assert "trial" not in str(err.value)


def test_infeasible_parts_are_named():
    X, z, O, s = _batch()
    X = X.clone()
    X[1, 0, 1] = X[1, 0, 0]  # masked token 1 equals set member 0: no margin of 1 (trial 1)
    with pytest.raises(InfeasibleError, match="directional") as err:
        svm.svm_equivalence(X, O, s, z=z)
    assert "trial 1" in str(err.value) and "trial 0" not in str(err.value)
    # inside a set: equal tokens with different probabilities have no finite part (nuc/lp);
    # the Frobenius W_fin is the least-squares solution of the (inconsistent) system
    X, z, O, s = _batch()
    X = X[0].clone()
    X[0, 3] = X[0, 2]
    with pytest.raises(InfeasibleError, match="finite part"):
        svm.svm_equivalence(X, O[0], s[0], norm="nuc", z=z[0])


def test_fit_with_the_nuclear_parts_and_lists():
    # the nuclear W_fin is not orthogonal to W_dir (the Frobenius one is: it lies in the row
    # space of the equality rows, W_dir in their null space), so fit must subtract W_fin
    X, z, O, s = _batch()
    eq = svm.svm_equivalence(X, O, s, norm="nuc", z=z)
    assert ((eq.W_fin * eq.W_dir).sum((-2, -1)).abs() > 1e-3).any()
    R = torch.tensor([2.5, -1.5], **F64).view(2, 1, 1)
    W = eq.W_fin + R * eq.W_dir
    assert torch.allclose(eq.fit(W), W, atol=1e-12)
    assert torch.allclose(eq.fit(W.tolist()), W, atol=1e-12)  # read in float64, not float32


def test_finite_part_quietly_and_named(capsys, monkeypatch):
    X, z, O, s = _batch()
    svm.svm_equivalence(X, O, s, norm="nuc", z=z)  # no progress bar for the finite part
    assert capsys.readouterr().err == ""

    def uncertified(*args, **kw):
        raise svm.UncertifiedError("no certified answer")

    monkeypatch.setattr("attnlib.svm.problems.solve_all", uncertified)
    with pytest.raises(svm.UncertifiedError, match="finite part"):
        svm.svm_equivalence(X, O, s, norm="nuc", z=z)


def test_fit_reads_its_input_in_the_parts_dtype_and_device():
    # fit is algebra: given parts (no solve), the least-squares R by numpy. A float64 list is
    # read exactly (bit for bit what the tensor gives; float32 would round it by ~1e-8
    # relative, within allclose's default rtol), float32 parts give a float32 fit, and the
    # input goes to the parts' device (meta here: a CPU tensor would not mix with them)
    g = torch.Generator().manual_seed(3)
    W_fin, W_dir, W = (torch.randn(2, 3, 3, generator=g, **F64) for _ in range(3))
    W = W + 0.1  # entries not exact in float32
    R = np.einsum("bij,bij->b", W.numpy() - W_fin.numpy(), W_dir.numpy()) \
        / np.einsum("bij,bij->b", W_dir.numpy(), W_dir.numpy())
    expect = W_fin.numpy() + R[:, None, None] * W_dir.numpy()
    eq = Equivalence(W_fin, W_dir)
    np.testing.assert_allclose(eq.fit(W).numpy(), expect, rtol=0, atol=1e-14)
    assert torch.equal(eq.fit(W.tolist()), eq.fit(W))
    assert torch.equal(eq.fit(W.numpy()), eq.fit(W))
    eq32 = Equivalence(W_fin.float(), W_dir.float())
    for given in (W, W.tolist()):
        out = eq32.fit(given)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, torch.as_tensor(expect, dtype=torch.float32))
    meta = Equivalence(W_fin.to("meta"), W_dir.to("meta")).fit(W.tolist())
    assert meta.device.type == "meta" and meta.shape == (2, 3, 3) and meta.dtype == torch.float64
