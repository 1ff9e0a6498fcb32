"""Figures and tables of the mirror-descent paper (attnlib.figures.mirror).

Each function gets a small hand-made result (arrays, numbers, settings) and is checked
against those inputs: what each panel draws is the array it was given, and every table cell
is the number it was given, formatted.
"""

from types import SimpleNamespace

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnlib.figures import mirror as F

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _res(arrays, params=None, numbers=None):
    return SimpleNamespace(arrays=arrays, params=params or {}, numbers=numbers or {})


def _lines(ax):
    """Labelled curves by label (a "(median, 10-90%)" suffix of a band curve dropped)."""
    return {ln.get_label().removesuffix(" (median, 10-90%)"): np.asarray(ln.get_ydata())
            for ln in ax.get_lines() if not ln.get_label().startswith("_")}


def test_plot_convergence_draws_each_ddir_curve():
    rng = np.random.default_rng(0)
    lps = np.array([1.75, 2.0])
    arrays = {"lps": lps}
    for j in range(2):
        arrays[f"steps_{j}"] = np.arange(1, 6) * 10
        arrays[f"ddir_{j}"] = rng.uniform(0.01, 1, (2, 3, 5))  # (q, trials, checkpoints)
    fig = F.plot_convergence(_res(arrays))
    assert len(fig.axes) == 2
    for j, ax in enumerate(fig.axes):
        assert ax.get_title() == f"ℓ{lps[j]:g}-MD iterates"
        got = _lines(ax)
        for i, q in enumerate(lps):  # the median over trials of D_dir to the lq-SVM
            np.testing.assert_allclose(got[f"ℓ{q:g}-AttSVM"],
                                       np.median(arrays[f"ddir_{j}"][i], 0))


def test_plot_bias_shows_log_ddir_matrix_sequential_with_its_numbers():
    from attnlib import plots

    ddir = np.array([[0.001, 0.1, 0.2], [0.05, 0.02, 0.3], [0.4, 0.2, 0.03]])
    rel = np.random.default_rng(1).uniform(0, 1, (3, 50))
    fig = F.plot_bias(_res({"lps": np.array([1.25, 2.0, 3.0]), "ddir": ddir, "rel_abs": rel}))
    ax = fig.axes[0]
    img = ax.get_images()[0]
    np.testing.assert_allclose(np.asarray(img.get_array()), np.log10(ddir))
    assert img.get_cmap().name == plots.SCORE_CMAP  # log10 D_dir < 0: not a signed scale
    assert [t.get_text() for t in ax.get_yticklabels()] == ["p=1.25", "p=2", "p=3"]
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
             for t in ax.texts}
    assert cells[(0, 0)] == "1.0e-03" and cells[(2, 1)] == "2.0e-01"
    assert ax.get_xlabel() == "ℓq-AttSVM" and ax.get_ylabel() == "ℓp-MD run"
    with pytest.raises(ValueError, match="values"):
        plots.matrix_image(ddir, values=ddir[:2])


def test_plot_unnormalized_curves_are_the_arrays():
    steps = np.array([1, 3, 10, 30])
    ddir = np.random.default_rng(2).uniform(0.01, 1, (2, 3, 4))
    norm = np.random.default_rng(3).uniform(1, 5, (2, 3, 4))
    fig = F.plot_unnormalized(_res({"lps": np.array([1.25, 2.0]), "steps": steps,
                                    "ddir": ddir, "norm": norm}))
    np.testing.assert_allclose(_lines(fig.axes[0])["p = 1.25"], np.median(ddir[0], 0))
    np.testing.assert_allclose(_lines(fig.axes[1])["p = 2"], np.median(norm[1], 0))


def test_plot_joint_ray_is_the_svm_direction():
    path_W = np.cumsum(np.ones((5, 2, 2)), 0)  # (S, 2, 2), W(k) = k * ones
    path_v = np.stack([np.arange(5.0), 2 * np.arange(5.0)], 1)  # (S, 2)
    arrays = {"lps": np.array([2.0]), "W_path_0": path_W, "v_path_0": path_v,
              "W_mm_0": np.array([[3.0, 4.0], [0.0, 0.0]]), "v_mm_0": np.array([1.0, 0.0])}
    fig = F.plot_joint(_res(arrays))
    ray = fig.axes[0].get_lines()[1]  # dashed: the SVM direction scaled to the last iterate
    end = np.array([ray.get_xdata()[1], ray.get_ydata()[1]])
    np.testing.assert_allclose(end, np.array([3.0, 4.0]) / 5 * np.linalg.norm([5.0, 5.0]))
    vray = fig.axes[1].get_lines()[1]
    np.testing.assert_allclose([vray.get_xdata()[1], vray.get_ydata()[1]],
                               [np.linalg.norm([4.0, 8.0]), 0.0])


def _digits_numbers():
    n = {}
    for i, k in enumerate(("md", "gd", "adam")):
        for m in ("test_acc", "final_test_acc", "sparsity", "l1_over_fro", "entropy", "top1"):
            n[f"{k}_{m}"] = 0.1 * (i + 1) + 0.01 * len(m)
            n[f"{k}_{m}_std"] = 0.001 * (i + 1)
        n[f"{k}_lr"] = [0.3, 3.0, 0.01][i]
    return n


def test_digits_table_cells_are_the_numbers():
    n = _digits_numbers()
    table = F.digits_table(_res({}, params={"seeds": 5, "lp": 1.1}, numbers=n))
    rows = [r for r in table.splitlines() if r.startswith("| ℓ") or r.startswith("| GD")
            or r.startswith("| Adam")]
    assert [r.split("|")[1].strip() for r in rows] == ["ℓ1.1-MD", "GD", "Adam"]
    gd = [c.strip() for c in rows[1].split("|")[1:-1]]
    assert gd[1] == "3" and gd[2] == f"{100 * n['gd_test_acc']:.1f} ± 0.2"
    assert gd[5] == f"{n['gd_l1_over_fro']:.2f} ± 0.00"
    assert "over 5 seeds" in table


def test_imdb_table_has_every_paper_row():
    lines = F.imdb_table().splitlines()[2:]
    assert len(lines) == len(F.PAPER_IMDB)
    for line, (p, L, mx, smx, last, slast, runs) in zip(lines, F.PAPER_IMDB):
        cells = [c.strip() for c in line.split("|")[1:-1]]
        assert cells == ["GD (ℓ2)" if p == 2 else f"ℓ{p:g}-MD", str(L), f"{mx:.2f} ± {smx:.2f}",
                         f"{last:.2f} ± {slast:.2f}", str(runs)]


def test_plot_digits_and_attention(monkeypatch):
    import torch

    from attnlib import realdata
    rng = np.random.default_rng(4)
    arrays = {"curve_step": np.array([0, 25, 50])}
    for k in ("md", "gd", "adam"):
        arrays[f"rel_abs_{k}"] = rng.uniform(0, 1, 40)
        arrays[f"curve_val_acc_{k}"] = rng.uniform(0.5, 1, (3, 2))  # (checkpoints, seeds)
        arrays[f"W_{k}"] = rng.normal(size=(2, 20, 20))
    res = _res(arrays, params={"lp": 1.1, "split_seed": 0})
    fig = F.plot_digits(res)
    np.testing.assert_allclose(_lines(fig.axes[1])["GD"], arrays["curve_val_acc_gd"].mean(1))
    data = realdata.digits_tokens(split_seed=0)
    X, _, z = data.part("test")
    fig = F.plot_attention(res, images=2)
    assert len(fig.axes) == 2 * 4
    W = torch.as_tensor(arrays["W_gd"][0], dtype=X.dtype)
    s = torch.softmax(X[1] @ W @ z[1], -1).reshape(4, 4).numpy()  # row 1, column GD
    np.testing.assert_allclose(np.asarray(fig.axes[1 * 4 + 2].get_images()[0].get_array()), s,
                               rtol=1e-6)
