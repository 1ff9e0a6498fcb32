"""Explorers of "Transformers as SVMs" (chapters 5-8): they read experiment results.

Each explorer's figure is drawn (``Explorer.figure``) and compared with a direct computation
(numpy) from the data: the rows a sweep shows for a cell, the selected and optimal tokens the
causal explorer marks, the SVM of the run's own selection in the parameterisation explorer.
"""

import numpy as np
import pytest
import torch

from attnlib import experiments as E
from attnlib.explorers import tf_svm as X
from attnlib.explorers import tf_svm_heads as H


@pytest.fixture(autouse=True)
def _cache(module_cache, unshown):
    X.parameterisation_data.cache_clear()
    X._causal_result.cache_clear()


def _sweep_arrays():
    ds = np.array([2, 4, 8])
    cells = np.array([[3, 4], [5, 6]])
    return dict(ds=ds, cells=cells, fro_mean=np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
                nuc_mean=np.array([[0.5, 1.5, 2.5], [3.5, 4.5, 5.5]]),
                infeasible=np.array([[0.9, 0.1, 0.0], [1.0, 0.6, 0.0]]))


def test_sweep_draws_the_chosen_cell():
    A = _sweep_arrays()
    ex = X.sweep(A)  # default cell: the first, default d: the middle one
    left = ex.figure().axes[0]
    ys = [ln.get_ydata() for ln in left.lines if len(ln.get_xdata()) == 3]
    assert any(np.allclose(y, A["fro_mean"][0]) for y in ys)
    assert any(np.allclose(y, np.minimum(3, A["ds"])) for y in ys)  # the rank bound min(n, d)
    ys = [ln.get_ydata() for ln in ex.figure(cell="n=5, T=6").axes[0].lines
          if len(ln.get_xdata()) == 3]
    assert any(np.allclose(y, A["nuc_mean"][1]) for y in ys)
    assert not any(np.allclose(y, A["fro_mean"][0]) for y in ys)


def test_sweep_rejects_unknown_arrays():
    with pytest.raises(ValueError, match="no array 'nope'"):
        X.sweep(_sweep_arrays(), curves={"x": "nope"}).figure()
    with pytest.raises(ValueError, match="'ds'"):
        X.sweep({"fro_mean": np.zeros(3)}).figure()


def test_sweep_reads_an_experiment_by_name():
    res = E.run("tf_global_fraction", trials=2, ds=(2, 4), steps=20, progress=False,
                device="cpu")
    ex = X.sweep("tf_global_fraction", trials=2, ds=(2, 4), steps=20, progress=False,
                 device="cpu", curves={"global": "global"}, aside=None)
    np.testing.assert_allclose(ex.figure().axes[0].lines[0].get_ydata(), res.arrays["global"][0])


@pytest.mark.slow
def test_parameterisation_reads_the_experiment():
    d = X.parameterisation_data(2, 0.5, True)  # not the chapter's settings: no layouts
    res = E.run("tf_visualization", example=2, lr=0.5, normalized=True, layouts=0)
    assert res.cached  # the explorer's run is the cached experiment result
    Xt, z = d["X"], d["z"]
    for name in ("W", "KQ"):
        H = d[name]["H"][1:]  # W(0) = 0 for the W run: no direction yet
        logits = np.einsum("itd,de,ie->it", Xt, H[-1], z)
        np.testing.assert_array_equal(d[name]["alpha"], logits.argmax(-1))  # GD's selection
        cos = (H * d[name]["fro"]).sum((-2, -1)) / (
            np.linalg.norm(H, axis=(-2, -1)) * np.linalg.norm(d[name]["fro"]))
        np.testing.assert_allclose(d[name]["corr_fro"][1:], cos, atol=1e-12)
    ex = X.parameterisation(lr=0.5)
    assert len(ex.figure().axes) == 3
    assert ex.figure(param="W", iterations=100).axes[1].get_xlim()[1] == 200  # >= 200 shown


def _causal_oracle(n, T, d, W, causal):
    """Selected and optimal tokens of trial 0, recomputed with numpy from the data law."""
    from attnlib.sequences import random_sequences

    data = random_sequences(n, T, d, trials=1, seed=0, device="cpu")
    Xs, Y, v = data.X.numpy()[0], data.Y.numpy()[0], data.v.numpy()[0]
    visible = np.tril(np.ones((T, T), bool)) if causal else np.ones((T, T), bool)
    logits = np.einsum("itd,de,ike->ikt", Xs, W, Xs)
    gam = Y[..., None] * (Xs @ v)[:, None, :]
    return (np.where(visible, logits, -np.inf).argmax(-1),
            np.where(visible, gam, -np.inf).argmax(-1))


@pytest.mark.parametrize("attention", ["causal", "bidirectional"])
def test_causal_explorer_marks_selected_and_optimal_tokens(attention):
    fig = X.causal_explorer(n=2, T=3, d=4, steps=200).figure(attention=attention, sequence=1,
                                                             iterations=200)
    runs = X.causal_runs(2, 3, 4, 200, 0)
    sel, opt = _causal_oracle(2, 3, 4, runs[attention]["H"][-1], attention == "causal")
    ax0 = fig.axes[0]
    dots, crosses = ax0.lines[0], ax0.lines[1]
    np.testing.assert_array_equal(dots.get_xdata(), sel[1])
    np.testing.assert_array_equal(crosses.get_xdata(), opt[1])
    if attention == "causal":
        assert (sel <= np.arange(3)).all()  # a query never selects a token after it


def test_causal_explorer_reads_a_given_result():
    res = E.run("tf_causal", trials=2, n=1, T=3, d=4, steps=100, device="cpu")
    shown = X.causal_explorer(result=res, trial=1).figure().axes[0].images[0].get_array()
    from attnlib.sequences import sequence_softmax

    s = sequence_softmax(torch.as_tensor(res.arrays["X"][1]),
                         torch.as_tensor(res.arrays["hist_causal"][1, -1]), True).numpy()[0]
    np.testing.assert_allclose(shown, s, atol=1e-12)


def test_static_page_renders():
    ex = X.causal_explorer(n=1, T=3, d=4, steps=200)
    ex.static_dpi = 40  # the frames of the page, smaller (the pixels: test_static_speed.py)
    st = ex.static()  # attention x 1 sequence x iterations 0, 100, 200
    assert st.sizes == (2, 1, 3) and len(st.frames) == 6 and "<img" in st._repr_html_()


# -- the explorers that recompute (chapters 6 and 7) -------------------------------------------
def _gd_on_W(X, Y, z, v, W, lr, steps):
    """Normalised GD on W written directly (numpy), the oracle of ``_gd_logits``."""
    n = X.shape[1]
    for _ in range(steps):
        a = np.einsum("btd,de,be->bt", X, W, z)
        s = np.exp(a - a.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        g = X @ v
        f = (s * g).sum(-1)
        lp = -1.0 / (1.0 + np.exp(Y * f))  # logistic loss l(u) = log(1 + e^-u), l'(Y f)
        G = np.einsum("b,bt,btd,be->de", lp * Y, s * (g - f[:, None]), X, z) / n
        W = W - lr * G / np.linalg.norm(G)
    return W


def test_gd_in_logit_coordinates_is_gd_on_W():
    rng = np.random.default_rng(0)
    n, T, d = 3, 4, 5
    X, z, v = rng.normal(size=(n, T, d)), rng.normal(size=(n, d)), rng.normal(size=d)
    Y, W0 = np.array([1.0, -1.0, 1.0]), rng.normal(size=(d, d)) * 0.3
    W_ref = _gd_on_W(X, Y, z, v, W0, 0.1, 60)
    Xf, zf = X.reshape(n * T, d), np.repeat(z, T, axis=0)
    K = (Xf @ Xf.T) * (zf @ zf.T)
    a0 = np.einsum("btd,de,be->bt", X, W0, z)
    a, beta = X_gd(K, X @ v, Y, a0)
    W = W0 + np.einsum("i,id,ie->de", beta[0], Xf, zf)
    np.testing.assert_allclose(W, W_ref, atol=1e-10)
    np.testing.assert_allclose(a[0], np.einsum("btd,de,be->bt", X, W_ref, z), atol=1e-10)


def X_gd(K, g, Y, a0):
    return H._gd_logits(K[None], g[None], Y[None], a0[None], 0.1, 60)


def test_global_share_classifies_each_run():
    from attnlib.data import random_data
    from attnlib.svm import solve_each
    from attnlib.tokens import optimal_tokens

    r = H.global_share_runs(n=2, T=3, runs=4, steps=200)
    np.testing.assert_allclose(r["global"] + r["local"] + r["other"], 1.0)
    assert r["kind"].shape == (len(H._GS_DS), 4)
    for j in range(len(H._GS_DS)):
        np.testing.assert_allclose(r["global"][j], (r["kind"][j] == 0).mean())
        # a global run correlates > 0.95 with the global SVM (its own selection is opt)
        glob = r["kind"][j] == 0
        assert (r["corr_opt"][j][glob] > 0.95).all()
        assert (r["corr_own"][j][r["kind"][j] < 2] > 0.95).all()
    data = random_data(2, 3, 20, trials=4, seed=1000 * (len(H._GS_DS) - 1), device="cpu")
    feasible = solve_each(data, optimal_tokens(data), "fro").feasible.numpy()
    assert np.isfinite(r["corr_opt"][-1]).tolist() == feasible.tolist()


def test_global_share_recomputes_with_n_and_T():
    ex = H.global_share(n=2, T=4, d=6, runs=4, steps=100)
    left = ex.figure().axes[0]
    r = H.global_share_runs(2, 4, 4, 100)
    assert any(np.allclose(ln.get_ydata(), r["global"]) for ln in left.lines)
    r2 = H.global_share_runs(3, 6, 4, 100)
    ys = [ln.get_ydata() for ln in ex.figure(T=6, n=3).axes[0].lines if len(ln.get_xdata()) > 1]
    assert any(np.allclose(y, r2["other"]) for y in ys)
    assert "max(T − 1, n) = 5" in H.global_share_note(3, 6, 6, 4, 100)


@pytest.mark.parametrize("lam", [0.0, 0.1, 0.25, 1.0])
def test_lambda_paths_reach_the_best_attention(lam):
    from attnlib.examples import lambda_head_example

    r = H.lambda_paths(lam, 4)
    if lam > 0:  # the same optimum as the chapter's example (its own simplex projection)
        ref = lambda_head_example(lam=lam).known["s_opt"].numpy()
        np.testing.assert_allclose(H.best_attention(H._LH_GAMMA[:4], lam), ref, atol=1e-12)
    else:
        np.testing.assert_array_equal(r["s_opt"], [1, 0, 0, 0])
    np.testing.assert_allclose(r["s"].sum(-1), 1.0)
    assert np.abs(r["s"][-1] - r["s_opt"]).max() < 0.03
    assert np.abs(r["s"][0] - 0.25).max() == 0  # W(0) = 0: uniform attention


def test_lambda_head_redraws_for_lam_and_T():
    ex = H.lambda_head(lam=0.25, T=4, iterations=100)
    ys = [ln.get_ydata() for ln in ex.figure().axes[0].lines]
    np.testing.assert_allclose(ys[0], H.lambda_paths(0.25, 4)["s"][:101, 0])
    bars = [p.get_height() for p in ex.figure(lam=1.0, T=8).axes[1].patches]
    np.testing.assert_allclose(bars, H.lambda_paths(1.0, 8)["s"][100])


def test_play_controls_have_at_least_ten_frames():
    from attnlib.explorers import StaticExplorer

    for ex in (H.lambda_head(), H.global_share(n=2, T=4, runs=2, steps=20),
               X.parameterisation(lr=0.5)):
        assert ex.play, ex.name
        assert len(StaticExplorer._static(ex.controls[ex.play], True)) >= 10, ex.name
