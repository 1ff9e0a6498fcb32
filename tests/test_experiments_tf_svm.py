"""The experiments of "Transformers as SVMs" (chapters 5-8) at a tiny scale.

Each experiment runs with small settings and its numbers are checked against an independent
oracle: a numpy recomputation from the stored arrays, a looped (one trial at a time)
computation with other attnlib functions, a linear-programming feasibility test (scipy), or a
closed form. The paper-scale values are checked by the chapters (``res.require``).
"""

import inspect
import math

import numpy as np
import pytest
import torch

from attnlib import experiments as E
from attnlib.experiments import tf_svm, tf_svm_heads, tf_svm_rank

TF = ("tf_visualization", "tf_local_convergence", "tf_svm_rank", "tf_nuclear_nonunique",
      "tf_rank_cap", "tf_feasibility", "tf_global_fraction", "tf_global_equal_scores",
      "tf_multi_token", "tf_lambda_head", "tf_causal")


def _run(name, **settings):
    return E.run(name, cache=False, device="cpu", **settings)


def _cos(A, B):
    """Oracle: <A, B> / (|A| |B|) over the last two axes, plain numpy."""
    A, B = np.broadcast_arrays(np.asarray(A, float), np.asarray(B, float))
    return (A * B).sum((-2, -1)) / (np.linalg.norm(A, axis=(-2, -1))
                                    * np.linalg.norm(B, axis=(-2, -1)))


def _optimal(X, Y, v):
    """Oracle: argmax_t Y_i v.x_it, numpy."""
    return np.argmax(np.asarray(Y)[..., None] * np.einsum("...itd,...d->...it", X, v), -1)


def test_registered_in_book_order_with_typed_settings():
    names = [n for n in E.names() if E.get(n).paper.startswith("2308.16898")]
    assert names == list(TF)  # chapter 5, 6, 7, 8 order: the reproduction report's order
    assert [E.get(n).chapter for n in names] == [
        "05_w_vs_kq", "05_w_vs_kq", "05_w_vs_kq", "05_w_vs_kq", "05_w_vs_kq",
        "06_overparameterization",
        "06_overparameterization", "06_overparameterization", "07_nonlinear_heads",
        "07_nonlinear_heads", "08_sequences_causal"]
    for n in names:
        for p in inspect.signature(E.get(n).func).parameters.values():
            assert p.annotation is not inspect.Parameter.empty, (n, p.name)


@pytest.fixture(scope="module")
def vis():
    """tf_visualization, small, with six random layouts (seed 3), and the training runs it
    made (a spy on its trainer): read by the two tests below."""
    runs = []
    real = tf_svm.train

    def spy(data, param, **kw):
        r = real(data, param, **kw)
        runs.append((param, data, r))
        return r

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tf_svm, "train", spy)
        res = _run("tf_visualization", steps=300, layouts=6, seed=3)
    return res, runs


def test_visualization_against_numpy(vis):
    num, A = vis[0].numbers, vis[0].arrays
    W, K = A["hist_W"][-1], A["hist_KQ"][-1]
    assert num["corr_W_fro"] == pytest.approx(_cos(W, A["svm_W_fro"]), abs=1e-12)
    assert num["corr_KQ_nuc"] == pytest.approx(_cos(K, A["svm_KQ_nuc"]), abs=1e-12)
    # the SVM is that of GD's own selection: the largest softmax entry of the final W
    X, z = A["X"], A["z"]
    logits = np.einsum("itd,de,ie->it", X, W, z)
    np.testing.assert_array_equal(A["alpha_W"], logits.argmax(-1))
    # Att-SVM: every margin (x_ia - x_it)^T W z_i >= 1 for t != a, with equality somewhere
    Wf, a = A["svm_W_fro"], A["alpha_W"]
    gaps = np.einsum("itd,de,ie->it", X[np.arange(2), a][:, None] - X, Wf, z)
    gaps[np.arange(2), a] = np.inf
    assert gaps.min() == pytest.approx(1, abs=1e-6)
    np.testing.assert_allclose(A["ray_fro"], z @ Wf.T, atol=1e-12)
    np.testing.assert_allclose(A["path_W"][:, -1], z @ W.T, atol=1e-12)
    gam = A["scores"]
    opt = gam.argmax(-1)
    assert num["selects_opt"] == float((A["alpha_W"] == opt).all() and (A["alpha_KQ"] == opt).all())
    assert A["layouts_corr_W"].shape == (6,)
    assert num["layouts_corr_W_min"] == pytest.approx(A["layouts_corr_W"].min())


def test_visualization_without_layouts():
    res = _run("tf_visualization", steps=200, layouts=0, example=1)
    assert math.isnan(res.numbers["layouts_corr_W_min"]) and res.arrays["layouts_corr_W"].size == 0
    assert res.arrays["X"].shape == (2, 3, 2)  # visualization.ipynb: T = 3


def test_local_convergence_against_looped_oracles():
    from attnlib import is_locally_optimal
    from attnlib.data import random_data

    B = 12  # seed 1: half of these runs end on a selection that is not locally optimal
    res = _run("tf_local_convergence", trials=B, steps=200, record_every=10, seed=1)
    A, num = res.arrays, res.numbers
    assert A["corr_W_fro"].shape == (B, 21) and A["prob_KQ"].shape == (B, 21)
    i100 = list(A["steps"]).index(100)
    assert num["prob_W_k100"] == pytest.approx(A["prob_W"][:, i100].mean())
    # k = min(1000, steps): the slope is read at the last step, 200
    assert num["norm_slope_k1000"] == pytest.approx(A["norm_W"][:, -1].mean() / 200)
    # normalised GD from W(0) = 0: ||W(k)|| <= lr k
    assert (A["norm_W"][:, -1] <= 0.1 * 200 + 1e-9).all()
    data = random_data(6, 8, 10, trials=B, seed=1, device="cpu")
    opt = _optimal(data.X.numpy(), data.Y.numpy(), data.v.numpy())
    assert num["frac_global_W"] == pytest.approx((A["alpha_W"] == opt).all(-1).mean())
    local = [bool(is_locally_optimal(data.trial(b), torch.as_tensor(A["alpha_W"][b])))
             for b in range(B)]  # solved again, one trial at a time
    assert 0 < np.mean(local) < 1  # the oracle sees both kinds
    assert num["frac_local_W"] == pytest.approx(np.mean(local))


def _lp_feasible(X, z, a):
    """Oracle: is {W : (x_ia - x_it)^T W z_i >= 1, t != a_i} non-empty? (scipy LP)."""
    from scipy.optimize import linprog

    n, T, d = X.shape
    rows = [np.outer(X[i, a[i]] - X[i, t], z[i]).ravel()
            for i in range(n) for t in range(T) if t != a[i]]
    out = linprog(np.zeros(d * d), A_ub=-np.array(rows), b_ub=-np.ones(len(rows)),
                  bounds=[(None, None)] * (d * d), method="highs")
    assert out.status in (0, 2)
    return out.status == 0


def test_feasibility_against_linear_programming():
    from attnlib.data import random_data

    at, below, trials = ((3, 3, 3),), ((6, 4, 2),), 6
    res = _run("tf_feasibility", trials=trials, at=at, below=below, progress=False)
    data = random_data(6, 4, 2, trials=trials, seed=7919 * 2, device="cpu")  # the 2nd cell
    X, z = data.X.numpy(), data.z.numpy()
    opt = _optimal(X, data.Y.numpy(), data.v.numpy())
    feasible = [_lp_feasible(X[b], z[b], opt[b]) for b in range(trials)]
    assert res.numbers["infeasible_n6_T4_d2"] == pytest.approx(1 - np.mean(feasible))
    assert res.numbers["feasible_opt_at"] == 1 and res.numbers["feasible_random_at"] == 1


@pytest.mark.slow
def test_rank_counts_infeasible_apart():
    # (full_trials: the full-space re-solve, which this test does not read, at its minimum)
    res = _run("tf_svm_rank", trials=3, ds=(3, 5), cells=((5, 5), (15, 5)), official_trials=2,
               full_trials=1, progress=False)
    A, num = res.arrays, res.numbers
    assert A["fro_mean"].shape == (2, 2)
    # n=15, T=5, d=3: all infeasible -> no rank (NaN), infeasible share 1; the official
    # notebook's counting would call it rank 1
    assert A["infeasible"][1, 0] == 1 and math.isnan(A["fro_mean"][1, 0])
    assert num["artefact_n15_d3"] == 1
    # oracle for cell (5, 5), d = 5: solved one trial at a time, numpy's rank (relative tol)
    from attnlib.data import random_data
    from attnlib.svm import att_svm

    data = random_data(5, 5, 5, trials=3, seed=1000, device="cpu")
    opt = _optimal(data.X.numpy(), data.Y.numpy(), data.v.numpy())
    for key, norm in (("fro_mean", "fro"), ("nuc_mean", "nuc")):
        ranks = []
        for b in range(3):
            W = att_svm(data.trial(b), alpha=torch.as_tensor(opt[b]), norm=norm).numpy()
            ranks.append(np.linalg.matrix_rank(W, tol=1e-6 * np.linalg.norm(W, 2)))
        assert A[key][0, 1] == pytest.approx(np.mean(ranks))
    assert num["margin_err_max"] < 1e-6 and num["offspan_max"] < 1e-6
    # the official solver's ranks are inflated by noise, never below the accurate ones
    assert num["official_nuc_rank_n5_d5"] >= num["nuc_rank_n5_d5"]
    assert math.isnan(num["official_nuc_rank_n10_d10"])  # not in this tiny grid


def test_global_fraction_against_looped_oracle():
    from attnlib import att_svm, is_locally_optimal, selected_tokens, train
    from attnlib.data import random_data
    from attnlib.examples import EPS

    trials, steps = 4, 300
    res = _run("tf_global_fraction", trials=trials, ds=(2, 6), steps=steps, progress=False)
    A = res.arrays
    assert A["global"].shape == (1, 2) and A["cells"].tolist() == [[6, 8]]
    assert math.isnan(res.numbers["global_d10"])  # a d left out of the sweep
    for j, d in enumerate((2, 6)):
        data = random_data(6, 8, d, trials=trials, seed=100_003 * j, device="cpu")
        r = train(data, "W", lr=0.1, steps=steps, eps=EPS, record_every=steps, seed=j)
        glob = loc = 0
        for b in range(trials):  # one trial at a time, with the public functions
            one = data.trial(b)
            a = selected_tokens(one, r.W[b])
            try:
                W = att_svm(one, alpha=a, norm="fro")
            except RuntimeError:
                continue
            conv = _cos(r.W[b].numpy(), W.numpy()) > 0.95 and bool(is_locally_optimal(one, a))
            best = (a.numpy() == _optimal(one.X.numpy(), one.Y.numpy(), one.v.numpy())).all()
            glob += conv and best
            loc += conv and not best
        assert A["global"][0, j] == pytest.approx(glob / trials)
        assert A["local_only"][0, j] == pytest.approx(loc / trials)
    assert res.numbers["global_rise"] == pytest.approx(A["global"][0, 1] - A["global"][0, 0])


def _simplex_projection(u):
    """Oracle: Euclidean projection onto the probability simplex (sort-based)."""
    s = np.sort(u)[::-1]
    css = np.cumsum(s) - 1
    k = np.nonzero(s - css / np.arange(1, len(u) + 1) > 0)[0][-1]
    return np.maximum(u - css[k] / (k + 1), 0)


@pytest.mark.slow
def test_lambda_head_against_closed_form():
    # chapter 7 runs this experiment at the same (default) settings: through the experiment
    # cache it is computed once, here or there
    res = E.run("tf_lambda_head")
    A, num = res.arrays, res.numbers
    # orthonormal tokens: max gamma.s - lam |s|^2 over the simplex = proj(gamma / (2 lam))
    s_star = _simplex_projection(np.array([1.0, 0.8, 0.2, -0.5]) / (2 * 0.25))
    np.testing.assert_allclose(A["s_opt"], s_star, atol=1e-12)
    assert num["s_gap"] == pytest.approx(np.abs(A["s_final"] - s_star).max())
    assert num["s_gap"] < 0.02 and num["selected"] == 2
    assert num["err_eq"] == pytest.approx(1 - A["corr_eq"][-1])
    assert num["err_one_over_eq"] > 10


def test_causal_against_numpy():
    from attnlib.sequences import random_sequences

    res = _run("tf_causal", trials=2, n=2, T=4, d=10, steps=300)
    num, A = res.numbers, res.arrays
    assert A["corr_causal"].shape == (2, 16) and A["hist_causal"].shape == (2, 16, 10, 10)
    data = random_sequences(2, 4, 10, trials=2, seed=0, device="cpu")
    X, Y, v = data.X.numpy(), data.Y.numpy(), data.v.numpy()
    visible = np.tril(np.ones((4, 4), bool))
    gam = Y[..., None] * np.einsum("bitd,bd->bit", X, v)[:, :, None, :]  # (B, n, k, t)
    np.testing.assert_array_equal(A["opt_causal"], np.where(visible, gam, -np.inf).argmax(-1))
    logits = np.einsum("bitd,bde,bike->bikt", X, A["hist_causal"][:, -1], X)
    np.testing.assert_array_equal(A["alpha_causal"],
                                  np.where(visible, logits, -np.inf).argmax(-1))
    assert num["opt_share_causal"] == pytest.approx((A["alpha_causal"] == A["opt_causal"]).mean())
    assert num["corr_causal_final"] == pytest.approx(A["corr_causal"][:, -1].mean())
    assert num["corr_causal_final"] > 0.9 and num["corr_full_final"] > 0.9


def test_official_nuclear_rank_is_noisy_upper_bound():
    from attnlib.data import random_data
    from attnlib.svm import att_svm
    from attnlib.tokens import optimal_tokens

    data = random_data(5, 5, 5, trials=2, seed=4, device="cpu")
    alpha = optimal_tokens(data)
    official = tf_svm_rank.official_nuclear_rank(data, alpha)
    accurate = torch.linalg.matrix_rank(att_svm(data, alpha=alpha, norm="nuc"), rtol=1e-6)
    assert (official >= accurate.numpy()).all()


def _e4_candidates(d, B, seed):
    from attnlib.experiments.multi_token import relu_candidates

    return relu_candidates(d, 3, 4, B, seed, "cpu")


def _final_softmax(data, W):
    from attnlib import models as M

    return torch.exp(M.log_softmax(M.logits(data.X, W, data.z)))


@pytest.mark.slow
@pytest.mark.parametrize("d", [4, 10])
def test_multi_token_fast_trainer_decides_as_train(d):
    # the kernel-coordinate trainer against attnlib.train (the straightforward path): the
    # same filter decision for every candidate, the same iterates, the same frozen runs
    from attnlib.experiments.multi_token import train_relu_candidates, train_relu_reference
    from attnlib.tokens import cleanly_masked

    data, V, W0 = _e4_candidates(d, 48, seed=3)  # 15 (d=4) and 8 (d=10) runs kept, 3 frozen (d=4)
    fast = train_relu_candidates(data, V, W0, steps=2001, record_every=500)
    ref = train_relu_reference(data, V, W0, steps=2001, record_every=500)
    keep_fast = cleanly_masked(_final_softmax(data, fast.W))
    keep_ref = cleanly_masked(_final_softmax(data, ref.W))
    assert torch.equal(keep_fast, keep_ref) and keep_ref.any() and not keep_ref.all()
    assert torch.equal(fast.steps, ref.history["step"])
    H, H_ref = fast.iterates(), ref.history["W"]  # (B, S, d, d)
    rel = (H - H_ref).flatten(2).norm(dim=-1) / H_ref.flatten(2).norm(dim=-1)
    assert rel[:, 0].max() < 1e-14 and rel[:, 1].median() < 1e-12  # W(0), W(500): rounding
    assert rel[keep_ref, -1].median() < 1e-10  # (rounding grows on a few runs, not the typical)
    assert torch.equal(fast.exited >= 0, ref.stopped >= 0)  # frozen: a zero update


def test_multi_token_early_exit_changes_nothing():
    from attnlib.experiments.multi_token import train_relu_candidates

    data, V, W0 = _e4_candidates(4, 200, seed=1)
    out = train_relu_candidates(data, V, W0, steps=600, record_every=100, exit_every=25)
    stay = train_relu_candidates(data, V, W0, steps=600, record_every=100, exit_every=None)
    ex = out.exited >= 0
    assert ex.any() and not ex.all() and (stay.exited < 0).all()
    H, H_stay = out.iterates(), stay.iterates()
    assert torch.equal(H[ex], H_stay[ex])  # a frozen run's iterates are those it would have
    assert torch.allclose(H[~ex], H_stay[~ex], rtol=1e-12, atol=1e-12)
    # an exited run's update is exactly zero: its recorded iterates repeat after the exit
    k = int(out.exited[ex][0])
    b = int(torch.nonzero(ex)[0])
    later = out.steps > k
    assert (H[b, later] == H[b, -1]).all()


@pytest.mark.slow
def test_multi_token_quota_stops_the_stream_and_counts_in_seed_order():
    # oracle: the official loop, one seed at a time through attnlib.train, stopping at the
    # candidate that fills the quota; the fast stream (chunks of 16) must keep the same runs
    # and count the same candidates, skipped seeds and frozen runs
    from attnlib.experiments.multi_token import train_relu_reference
    from attnlib.svm import att_svm, svm_equivalence
    from attnlib.tokens import cleanly_masked, selected_sets

    quota = 3
    num, A = tf_svm_heads.tf_multi_token(accepted=quota, ds=(4,), record_every=1000, chunk=16,
                                   workers=2, progress=False, device="cpu")
    data, V, W0 = _e4_candidates(4, 64, seed=1)  # the first batch: 64 seeds at this quota
    ref = train_relu_reference(data, V, W0, steps=2001, record_every=2001)
    s = _final_softmax(data, ref.W)
    kept, tried, skipped, frozen = [], 0, 0, 0
    for b in range(64):
        if (data.Y[b] > 0).all():
            skipped += 1
            continue
        tried += 1
        frozen += int(ref.stopped[b] >= 0)
        if cleanly_masked(s[b]):
            one = data.trial(b)
            svm_equivalence(one, selected_sets(s[b]), s[b])  # feasible (raises otherwise)
            att_svm(one, alpha=s[b].argmax(-1), norm="fro")
            kept.append(b)
        if len(kept) == quota:
            break
    assert len(kept) == quota
    assert (num["tried_d4"], num["skipped_d4"], num["exited_d4"]) == (tried, skipped, frozen)
    assert num["trained_d4"] < 64 - (data.Y > 0).all(-1).sum()  # stopped inside the batch
    assert num["trained_d4"] >= tried
    assert num["rate_d4"] == quota / tried
    # one row per kept run, records at k = 0, 1000, 2000, 2001
    assert A["corr_eq"].shape == (quota, 4) and A["max_masked"].shape == (quota,)
    assert (A["max_masked"] <= 1e-6).all()  # accepted runs separate cleanly
    assert num["eq_mean_d4"] == pytest.approx((1 - A["corr_eq"][:, -1]).mean())
    rows = {r["key"]: r for r in E.Result("tf_multi_token", {}, num).verdicts()}
    assert math.isnan(rows["eq_mean_d10"]["book"]) and not rows["eq_mean_d10"]["ok"]  # not run
    one = tf_svm_heads.tf_multi_token(accepted=quota, ds=(4,), record_every=1000, chunk=16,
                                workers=1, progress=False, device="cpu")[0]
    # threads change nothing: the same counts; the SVM-based means agree to the solver's
    # accuracy (cvxpy's solve depends on what the process solved before, ~1e-8 relative)
    assert one.keys() == num.keys()
    assert one == {k: pytest.approx(v, rel=1e-6, abs=1e-12, nan_ok=True) for k, v in num.items()}


def test_visualization_layouts_against_cvxpy_svms(vis):
    # the random layouts' correlations are those of each run's final W with *its* SVM: the
    # Frobenius one for W, the nuclear one for (K,Q), each solved here by the cvxpy primal
    # (one constraint per token) for the selection read off the final W by numpy
    from attnlib.svm.primal import att_svm_primal

    res, runs = vis
    A = res.arrays
    layout = [(p, d, r) for p, d, r in runs if d.X.dim() == 4]  # the batched layout runs
    assert [p for p, _, _ in layout] == ["W", "KQ"]
    for (param, data, r), norm in zip(layout, ("fro", "nuc")):
        X, z, Wk = (np.asarray(t.detach().cpu(), float) for t in (data.X, data.z, r.W))
        corr = A[f"layouts_corr_{param}"]
        assert corr.shape == (6,)
        apart = []  # |corr with its SVM - corr with the other norm's SVM| per layout
        for b in range(6):
            alpha = np.einsum("itd,de,ie->it", X[b], Wk[b], z[b]).argmax(-1)
            own, other = (_cos(Wk[b], att_svm_primal(X[b], z[b], alpha, norm=nm)[1])
                          for nm in (norm, {"fro": "nuc", "nuc": "fro"}[norm]))
            apart.append(abs(own - other))
            assert corr[b] == pytest.approx(own, abs=1e-4), (param, b)
        assert max(apart) > 1e-2  # a swapped norm would show in some layout
