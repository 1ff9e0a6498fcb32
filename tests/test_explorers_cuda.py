"""The explorers and the figures on a GPU: what the book draws, computed on CUDA.

With CUDA the default device (``ATTNLIB_DEVICE=cuda``), every explorer a chapter shows is
built and drawn as the book's build does (the static renderer, here one page of two frames:
the chapter's setting and one changed control, the second drawn by the explorer's in-place
update when it has one), and once more live (``LiveExplorer.update``, as moving a control
does; needs ipywidgets); every experiment's figure, and the figure helpers the chapters call,
are drawn from a result computed on CUDA at tiny settings (those of
``tests/test_experiments_cuda.py``, which checks the experiments' numbers there). Each figure
is rendered to PNG, so that data matplotlib converts only when it draws is converted too.

Oracle: nothing raises (a CUDA tensor that reaches numpy or matplotlib, or meets a CPU tensor,
raises), and every page or figure has its frames and panels. The numbers are checked on the
CPU by the other tests. Every test is marked ``cuda`` (skipped without a GPU); the experiments
run in a cache of this module's own.
"""

from __future__ import annotations

import copy
import dataclasses
import io

import matplotlib.pyplot as plt
import pytest
import torch
from test_experiments_cuda import tiny_settings

import attnlib.experiments as E
from attnlib import explorers
from attnlib._runtime import default_device
from attnlib.explorers import StaticExplorer

pytestmark = pytest.mark.cuda
DEVICE = "cuda"  # the device under test (the default device of every test here)

# beyond the experiments' tiny settings (tests/test_experiments_cuda.py): what the explorers
# need to have something to show
MORE = {
    "md_text": dict(n=40),  # test sentences to show (the explorer opens on one)
    "tf_global_fraction": dict(ds=(2, 4)),  # two sizes for the sweep explorer's slider
}

# the explorers' functions that keep what they computed (cleared: computed here, on DEVICE)
_MEMOS = ("max_margin.token_plane_data", "max_margin._selection_data", "mirror.mirror_data",
          "tf_svm.parameterisation_data", "tf_svm._causal_result",
          "tf_svm_heads.global_share_runs", "tf_svm_heads.lambda_paths")


def _clear_memos():
    import importlib

    for path in _MEMOS:
        mod, name = path.split(".")
        getattr(importlib.import_module(f"attnlib.explorers.{mod}"), name).cache_clear()


@pytest.fixture(scope="module", autouse=True)
def on_device(tmp_path_factory):
    """CUDA the default device and an experiment cache of this module's own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTNLIB_DEVICE", DEVICE)
        mp.setenv("ATTNLIB_CACHE", str(tmp_path_factory.mktemp("cuda-cache")))
        assert default_device().type == DEVICE
        _clear_memos()
        yield
        _clear_memos()  # the next module's explorers compute on their own device
    plt.close("all")


def result(name: str):
    """Experiment ``name`` at its tiny settings, computed on DEVICE (cached in this module)."""
    return E.run(name, **{**tiny_settings(name, DEVICE), **MORE.get(name, {})})


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=30)
    plt.close(fig)
    return buf.getvalue()


# -- explorers ---------------------------------------------------------------------------------
def _res(name):
    return lambda: result(name)


# (id, explorer, its arguments in the chapter (a callable: results computed on first use),
# the changed control)
EXPLORERS = [
    ("softmax", "softmax_explorer", dict, dict(angle=45)),
    ("token_plane-ch2", "token_plane", lambda: dict(example="e2"), dict(loss="exp")),
    ("token_plane-ch3", "token_plane",
     lambda: dict(example="e1-local", iterations=1000,
                  static=dict(init=("all", 1, 2, 3, 4, 5, 6), iterations=(1000,),
                              normalized=(True,))), dict(init=2)),
    ("selection", "selection", lambda: dict(alpha=2), dict(score=0.6)),
    ("joint", "joint_explorer", lambda: dict(result=result("mm_e3_joint")),
     dict(iterations=10)),
    ("parameterisation", "parameterisation", dict, dict(iterations=100)),
    ("global_share", "global_share",
     lambda: dict(result=result("tf_global_fraction"), n=6, T=8, d=10), dict(d=20)),
    ("sweep", "sweep",
     lambda: dict(result=result("tf_global_fraction"), aside=None, ylabel="share",
                  curves={"global": "global", "local, not global": "local_only"}), None),
    ("lambda_head", "lambda_head", lambda: dict(lam=0.25, T=4), dict(lam=1.0)),
    ("causal", "causal_explorer", dict, dict(attention="bidirectional")),
    ("mirror", "mirror_descent", lambda: dict(lp=1.75), dict(iterations=500)),
    ("word_attention", "word_attention", lambda: dict(result=result("md_text")),
     dict(optimizer="gd")),
]


def _explorer(name, kwargs):
    """The explorer as the chapter calls it (``unshown``: the Explorer itself)."""
    return getattr(explorers, name)(**kwargs())


def _changed(ex, change):
    """The changed control: ``change``, or another value of the explorer's slider."""
    if change is not None:
        return change
    c = ex.controls[ex.slider[0]]
    return {c.name: next(v for v in c.values[::-1] if v != c.default)}


def _page(ex, change) -> StaticExplorer:
    """The static page of the chapter's setting and the one changed control (two frames;
    every other control fixed at its default)."""
    ex = copy.copy(ex)
    ex.controls = {k: dataclasses.replace(c, static=(c.default,) + (
        (c.resolve(change[k]),) if k in change else ())) for k, c in ex.controls.items()}
    ex.static_dpi = 30
    ex.max_bytes = 1e9
    return StaticExplorer(ex)


@pytest.mark.parametrize("name, kwargs, change", [pytest.param(*e[1:], id=e[0])
                                                  for e in EXPLORERS])
def test_explorer_static_page_on_cuda(unshown, name, kwargs, change):
    ex = _explorer(name, kwargs)
    change = _changed(ex, change)
    st = _page(ex, change)
    assert len(st.frames) == 2 and all(st.frames) and st.images
    assert st.html.startswith('<div class="attnlib-explorer"')


@pytest.mark.parametrize("name, kwargs, change", [pytest.param(*e[1:], id=e[0])
                                                  for e in EXPLORERS])
def test_explorer_live_update_on_cuda(unshown, name, kwargs, change):
    pytest.importorskip("ipywidgets")
    from attnlib.explorers import LiveExplorer

    ex = _explorer(name, kwargs)
    change = _changed(ex, change)
    live = LiveExplorer(ex)
    first = live.png
    live.update(**change)
    assert live.png and live.png != first
    assert all(live.state[k] == ex.controls[k].resolve(v) for k, v in change.items())


def test_mirror_note_on_cuda():
    """Chapter 9's sentence under the explorer: p = 1.1 with and without the official ε."""
    from attnlib.explorers.mirror import mirror_note

    for eps in (0.0, 2.0 ** -52):
        assert mirror_note(1.1, 1500, eps=eps).startswith("p = 1.1, after 1500 steps")


def test_token_drag_on_cuda():
    """Chapter 2's drag explorer: its data (attnlib's answers, computed on the CPU as the
    page's own script does) and, with IPython, its HTML fragment."""
    from attnlib.explorers import token_drag as td

    data = td.token_drag_data("e2", lr=0.3, moves=td.MOVES[:2])
    assert len(data["references"]) == len(data["examples"]) + 2
    assert all(len(r["attnlib"]["p_end"]) == 2 for r in data["references"])
    pytest.importorskip("IPython")
    frag = td.token_drag(example="e2", lr=0.1, normalized=True, loss="logistic").data
    assert 'class="attnlib-drag"' in frag


# -- figures -----------------------------------------------------------------------------------
FIGURES = [n for n in E.names() if E.get(n).plot is not None]


@pytest.mark.parametrize("name", FIGURES)
def test_experiment_figure_on_cuda(name):
    res = result(name)
    assert res.params.get("device", DEVICE) == DEVICE
    fig = res.figure()
    assert fig.axes and _png(fig)


def _chapter_figures():
    """The figure helpers the chapters call, with the results they pass (tiny, on DEVICE)."""
    from attnlib.explorers.tf_svm_heads import plot_lambda_paths
    from attnlib.figures import max_margin as mm
    from attnlib.figures import mirror, mirror_text, reviews, tf_svm, tf_svm_heads
    from attnlib.figures.max_margin_local import plot_local_regpath

    r = result
    return {
        "plot_e1-global": lambda: mm.plot_e1(r("mm_e1_basins"), panels=["global"]),
        "plot_e1-local": lambda: mm.plot_e1(r("mm_e1_basins"), panels=["local"]),
        "plot_e2-paths": lambda: mm.plot_e2(r("mm_e2_multi_input"), panels=["paths"]),
        "plot_e2-prob": lambda: mm.plot_e2(r("mm_e2_multi_input"), panels=["prob", "norm"]),
        "plot_e3-tight": lambda: mm.plot_e3(r("mm_e3_joint"), panels=["tight", "nontight"]),
        "plot_e3-prob": lambda: mm.plot_e3(r("mm_e3_joint"), panels=["prob"]),
        "plot_local_regpath-circle": lambda: plot_local_regpath(r("mm_local_regpath"),
                                                                panels=["circle"]),
        "plot_local_regpath-paths": lambda: plot_local_regpath(r("mm_local_regpath"),
                                                               panels=["valley", "paths"]),
        "plot_spectra": lambda: tf_svm.plot_spectra(r("tf_local_convergence")),
        "plot_multi_errors": lambda: tf_svm_heads.plot_multi_errors(r("tf_multi_token")),
        "plot_lambda_paths": lambda: plot_lambda_paths(lams=(0.0, 0.25)),
        "plot_causal_attention": lambda: tf_svm.plot_causal_attention(r("tf_causal")),
        "plot_bias_weights": lambda: mirror.plot_bias_weights(r("md_bias")),
        "plot_bias_matrix": lambda: mirror.plot_bias_matrix(r("md_bias")),
        "plot_attention": lambda: mirror.plot_attention(r("md_digits")),
        "plot_sentence_grid": lambda: mirror_text.plot_sentence_grid(r("md_text")),
        "plot_sentences": lambda: mirror_text.plot_sentences(r("md_text"), sentences=2),
        "plot_digit_overlay": lambda: mirror_text.plot_digit_overlay(r("md_digits")),
        "plot_probe_attention": lambda: reviews.plot_probe_attention(r("md_reviews")),
    }


@pytest.mark.parametrize("helper", list(_chapter_figures()))
def test_chapter_figure_on_cuda(helper):
    fig = _chapter_figures()[helper]()
    assert fig.axes and _png(fig)


def test_joint_example_figure_as_chapter_4_draws_it():
    """Chapter 4's picture of its joint example: the data on the default device (CUDA), the
    SVMs computed from it, the selection a CPU tensor as the chapter writes it."""
    import attnlib as al
    from attnlib.figures.max_margin_local import plot_joint_example

    ex_nt = al.examples.joint_example(tight=False).data
    assert ex_nt.X.device.type == DEVICE
    opt3 = torch.tensor([1, 1, 1])  # the second token of every input
    v_ex = al.head_svm(ex_nt, alpha=opt3)
    fig = plot_joint_example(ex_nt, v_ex, al.prompt_svm(ex_nt, alpha=opt3),
                             al.relaxed_prompt_svm(ex_nt.with_(v=v_ex), alpha=opt3, v_mm=v_ex))
    assert fig.axes and _png(fig)


def test_plots_take_cuda_tensors():
    """``attnlib.plots`` (and ``mid_margin_line``) take tensors on any device (chapter 1
    passes the example's)."""
    import attnlib as al
    from attnlib import plots
    from attnlib.figures.tf_svm import mid_margin_line

    ex = al.examples.three_token_example("global")
    X, g = ex.data.X[0, :, :2], al.tokens.scores(ex.data)[0]
    assert X.device.type == DEVICE
    P = torch.stack([torch.linspace(0, 1, 7, device=X.device)] * 2, -1)[None]  # (1, 7, 2)
    fig, ax = plots.new_figure()
    plots.token_plane(X, g, paths=P, directions=X[:2], ax=ax, title="tokens")
    plots.token_scatter(X, g, ax=ax, optimal=al.tokens.optimal_tokens(ex.data),
                        selected=torch.tensor([0], device=X.device), colorbar=False)
    plots.rays([X[0], X[1]], ax=ax, origin=torch.zeros(2, device=X.device), length=2.0)
    plots.square_view(ax, X)
    fig2, axes = plots.new_figure(1, 3)
    steps = torch.arange(7, device=X.device)
    plots.curves(steps, {"p": P[0, :, 0]}, ax=axes[0], mark=steps[3])
    plots.histogram({"a": g, "b": g + 1}, ax=axes[1])
    plots.matrix_image(ex.data.X[0], ax=axes[2], values=ex.data.X[0])
    assert mid_margin_line(X[0], X[1]).shape == (2, 2)
    assert _png(fig) and _png(fig2)
