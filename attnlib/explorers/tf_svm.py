"""Explorers of "Transformers as Support Vector Machines" (arXiv 2308.16898), chapters 5-8.

Most explorers READ the result of one of the chapter's experiments through
:func:`attnlib.experiments.run` (cached on disk, so the chapter computes it once) and only
draws; nothing is trained or solved on a control change:

- :func:`parameterisation` (chapter 5): W versus (K, Q) on the 2-D example, from
  ``tf_visualization``.
- :func:`sweep` (chapters 5-7): sweep curves over (n, T, d), from ``tf_svm_rank``,
  ``tf_global_fraction`` or ``tf_multi_token`` (or any result with ``ds``/``cells`` arrays).
- :func:`causal_explorer` (chapter 8): a sequence layer's attention while it trains, causal or
  bidirectional, from ``tf_causal``.

Two explorers recompute instead (in ``attnlib.explorers.tf_svm_heads``), on small batched
runs that take about a second: ``global_share`` (chapter 6: the share of GD runs that reach
the global direction, for the chosen n and T at every d) and ``lambda_head`` (chapter 7: the
attention paths of the λ-penalty head for the chosen strength λ and number of tokens T).
Each keeps what it computed (``functools.lru_cache``), so moving the slider back redraws at
once; on the static site every declared setting is computed once when the page is built.

The chapters show them as ``al.explorers.<name>(...)``; built on
:mod:`attnlib.explorers.framework`.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from .. import experiments, plots
from .. import sequences as SQ
from .._runtime import few_threads
from .._validate import to_numpy
from ..metrics import correlation
from ..plots.plane import ray_segments, redraw_arrowheads
from .framework import Control, Explorer, with_static

_C = plots.PALETTE  # the book's colour roles (attnlib.plots.style)

__all__ = ["parameterisation", "sweep", "causal_explorer", "parameterisation_data",
           "causal_runs"]


# -- parameterisation: W vs (K, Q) (chapter 5) -------------------------------------------------
_PM_ITER = (0, 10, 20, 50, 100, 200, 300, 500, 700, 1000)
_PM_RECORD = 10  # tf_visualization records every steps // 200 = 10 steps at its 2000 steps
#: The settings of the chapter's own run of ``tf_visualization`` (read from the cache).
_PM_CHAPTER = dict(example=2, lr=0.1, normalized=True)


def _corr(A, B):
    """Correlation :math:`\\langle A, B\\rangle / (\\|A\\|_F \\|B\\|_F)` of matrices (numpy)."""
    return to_numpy(correlation(torch.as_tensor(A), torch.as_tensor(B), dims=2))


@functools.lru_cache(maxsize=16)
def parameterisation_data(example: int = 2, lr: float = 0.1, normalized: bool = True) -> dict:
    """What :func:`parameterisation` draws, read from ``tf_visualization`` (cached).

    The chapter's settings read the chapter's run; other settings run the experiment with them
    and ``layouts=0`` (no random layouts). Returns, per run ``"W"`` and ``"KQ"``: the history
    ``H`` (S, d, d), both SVMs ``fro``, ``nuc`` of its final selection ``alpha``, the curves
    ``corr_fro``, ``corr_nuc`` (S,) and ``prob`` (S,); and ``X``, ``z``, ``gamma``, ``steps``.
    """
    settings = dict(example=int(example), lr=float(lr), normalized=bool(normalized))
    if settings != _PM_CHAPTER:
        settings["layouts"] = 0
    with few_threads():
        A = experiments.run("tf_visualization", **settings).arrays
    out = {}
    for name in ("W", "KQ"):
        H, fro, nuc = A[f"hist_{name}"], A[f"svm_{name}_fro"], A[f"svm_{name}_nuc"]
        out[name] = dict(H=H, fro=fro, nuc=nuc, alpha=np.asarray(A[f"alpha_{name}"]).astype(int),
                         corr_fro=_corr(H, fro), corr_nuc=_corr(H, nuc), prob=A[f"prob_{name}"])
    out.update(X=A["X"], z=A["z"], gamma=A["scores"], steps=A["steps"])
    return out


def parameterisation_note(example, param, iterations, lr, normalized) -> str:
    """The line under :func:`parameterisation`'s figure: 1 − corr of each shown run with
    each SVM at this iteration, read from the data."""
    d = parameterisation_data(int(example), float(lr), bool(normalized))
    k = min(int(iterations) // _PM_RECORD, len(d["steps"]) - 1)
    shown = ("W", "KQ") if param == "both" else (param,)
    parts = [f"{'W' if n == 'W' else 'KQᵀ'}: 1 − corr {1 - d[n]['corr_fro'][k]:.1e} with the "
             f"Frobenius SVM, {1 - d[n]['corr_nuc'][k]:.1e} with the nuclear one" for n in shown]
    return f"Iteration {int(d['steps'][k])}: " + "; ".join(parts) + "."


def _draw_parameterisation(fig, example, param, iterations, lr, normalized):
    d = parameterisation_data(int(example), float(lr), bool(normalized))
    k = int(iterations) // _PM_RECORD + 1
    ax0, ax1, ax2 = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=(1.15, 1, 1)))
    shown = ("W", "KQ") if param == "both" else (param,)
    R = np.linalg.norm(d["X"], axis=-1).max()  # paths drawn on the tokens' scale
    styles = {"W": (_C["W"], "fro", "Frobenius"), "KQ": (_C["KQ"], "nuc", "nuclear")}
    svm_name = {"fro": r"$W^{mm} z_i$", "nuc": r"$W^{mm}_\star z_i$"}  # the book's notation
    plots.token_scatter(d["X"], d["gamma"], ax=ax0, colorbar=False, annotate=False)
    moving = {}  # per run: its paths, start points, arrowheads and rays (for the update)
    for name in shown:
        color, key, norm_name = styles[name]
        Wz = _directions(d, name, k, R)
        n0, q0 = len(ax0.lines), len(ax0.collections)
        plots.trajectories(Wz, ax=ax0, color=color, arrow_every=max(1, k // 4),
                           label=f"{name}: " + r"$W(k)\,z_i/\|W(k)\|$")
        quiver = ax0.collections[-1] if len(ax0.collections) > q0 else None  # arrowheads
        plots.rays(d["z"] @ d[name][key].T, ax=ax0, colors=[color] * len(d["z"]), length=3 * R,
                   labels=[f"{norm_name} SVM: {svm_name[key]}"] + [None] * (len(d["z"]) - 1))
        lines = ax0.lines[n0:]
        m = len(Wz)
        moving[name] = dict(paths=lines[0:2 * m:2], starts=lines[1:2 * m:2], rays=lines[2 * m:],
                            quiver=quiver)
    plots.title(ax0, r"queries' directions $W z_i$ (scaled)")
    plots.square_view(ax0, np.concatenate([d["X"].reshape(-1, 2), np.zeros((1, 2))]), pad=0.4)
    ax0.legend(fontsize=7, loc="upper left")
    steps = d["steps"][:k]
    corr, colors, lstyles = {}, {}, {}
    for name in shown:
        color = styles[name][0]
        for key, ls in (("fro", "-"), ("nuc", "--")):
            lab = f"{'W' if name == 'W' else 'KQᵀ'} vs {styles['W' if key == 'fro' else 'KQ'][2]}"
            corr[lab], colors[lab], lstyles[lab] = d[name][f"corr_{key}"][:k], color, ls
    plots.correlation_curves(steps, corr, ax=ax1, one_minus=True, colors=colors,
                             styles=lstyles, title="1 − corr with each SVM", legend="lower left")
    ax1.set_ylim(1e-4, 2.5)
    probs = {f"{name}": d[name]["prob"][:k] for name in shown}
    plots.probability_curves(steps, probs, ax=ax2, title="largest softmax prob.",
                             colors={"W": _C["W"], "KQ": _C["KQ"]})
    for ax in (ax1, ax2):
        ax.set_xlim(0, max(200, int(iterations)))
    curves = list(ax1.lines) + list(ax2.lines)

    def update(**v):  # another iteration, step size or normalisation: the same pixels as a
        # new draw, with the paths, arrowheads, rays and curves moved in place
        if int(v["example"]) != int(example) or v["param"] != param:
            return False
        e = parameterisation_data(int(example), float(v["lr"]), bool(v["normalized"]))
        if not all(np.array_equal(e[key], d[key]) for key in ("X", "z", "gamma")):
            return False
        k = int(v["iterations"]) // _PM_RECORD + 1
        for name in shown:
            color, key, _ = styles[name]
            mv, Wz = moving[name], _directions(e, name, k, R)
            for b, (path, start) in enumerate(zip(mv["paths"], mv["starts"])):
                path.set_data(Wz[b, :, 0], Wz[b, :, 1])
                start.set_data([Wz[b, 0, 0]], [Wz[b, 0, 1]])
            mv["quiver"] = redraw_arrowheads(ax0, mv["quiver"], mv["starts"][-1], Wz,
                                                   [color] * len(Wz), max(1, k // 4))
            for ray, ends in zip(mv["rays"], ray_segments(e["z"] @ e[name][key].T, 3 * R)):
                ray.set_data(*ends)
        steps = e["steps"][:k]
        ys = [e[name][f"corr_{key}"][:k] for name in shown for key in ("fro", "nuc")]
        ys = [1.0 - y for y in ys] + [e[name]["prob"][:k] for name in shown]
        for line, y in zip(curves, ys):
            line.set_data(steps, y)
        for ax in (ax1, ax2):
            ax.set_xlim(0, max(200, int(v["iterations"])))
        return True

    return update


def _directions(d, name, k, R):
    """The queries' directions :math:`W(k) z_i / \\|W(k)\\|_F`, scaled by R: (n, k, 2)."""
    H = d[name]["H"][:k]  # (k, d, d)
    nrm = np.linalg.norm(H, axis=(-2, -1))[:, None, None]
    return np.einsum("sij,nj->nsi", H / np.where(nrm > 0, nrm, 1.0), d["z"]) * R


def parameterisation(example: int = 2, *, param: str = "both", iterations: int = 1000,
                     lr: float = 0.1, normalized: bool = True, static: dict | None = None,
                     mode: str | None = None):
    r"""Explorer: W versus (K, Q), the Frobenius versus the nuclear-norm SVM.

    Reads the runs of the combined matrix :math:`W` and of the factors :math:`(K, Q)`
    (:math:`W = KQ^\top`) on the paper's 2-D example that the chapter's experiment
    ``tf_visualization`` computed (:func:`attnlib.experiments.run`, cached: the default
    settings are the chapter's own run; other settings compute and cache theirs, without the
    random layouts) and shows the first 1000 iterations: left,
    the tokens, the directions :math:`W(k) z_i/\|W(k)\|_F` of both queries and the rays
    :math:`W^{mm} z_i` of the Frobenius SVM (blue, for W) and :math:`W^{mm}_\star z_i` of the
    nuclear SVM (red, for (K,Q)), each for the selection its run ends on (after the
    experiment's 2000 steps); middle,
    :math:`1-\mathrm{corr}` of each run with both SVMs (solid: Frobenius, dashed: nuclear):
    each parameterisation approaches its own SVM; right, the largest softmax probability.
    See chapter 5.

    Parameters
    ----------
    example : {1, 2}
        The paper's ``visualization.ipynb`` (1) or ``visualization2.ipynb`` (2) layout.
    param : {"both", "W", "KQ"}
    iterations : int
        Iterations shown.
    lr, normalized
        Step size, normalised GD or not.
    static, mode
        As in :func:`attnlib.explorers.max_margin.token_plane`; default: the website shows
        both runs and offers the step size and every iteration of ``_PM_ITER`` (10 frames for
        the play button).
    """
    controls = [
        Control("example", (1, 2), default=example),
        Control("param", ("both", "W", "KQ"), default=param, label="trained"),
        Control("iterations", _PM_ITER, default=iterations),  # all 10 on the site: play
        Control("lr", (0.01, 0.1, 0.5), default=lr, label="step size",
                static=(0.01, 0.1, 0.5)),
        Control("normalized", (True, False), default=normalized),
    ]
    # the site: both runs, every iteration (play) and every step size (30 frames; the runs
    # alone would triple the frames and lower the resolution to fit the page's weight)
    static = {"param": ("both",), **(static or {})}
    ex = Explorer(_draw_parameterisation, with_static(controls, static),
                  name="parameterisation", slider="iterations", figsize=(11.5, 3.6),
                  margins=dict(left=0.05, right=0.98, wspace=0.28), note=parameterisation_note,
                  caption="W (blue) and (K, Q) (red) trained by gradient descent: their "
                          "directions against the Frobenius SVM (solid) and the nuclear SVM "
                          "(dashed). The line under the figure reads this setting.")
    return ex.show(mode)


# -- sweeps over (n, T, d) (chapters 5-7) ----------------------------------------------------
def _sweep_arrays(result, settings):
    if isinstance(result, str):
        result = experiments.run(result, **settings)
    arrays = result.arrays if hasattr(result, "arrays") else result
    if not isinstance(arrays, dict) or "ds" not in arrays:
        raise ValueError("result must be an experiment name, a Result or a dict of arrays "
                         "with 'ds' (sizes d) and optionally 'cells' ((n, T) pairs)")
    return arrays


def sweep(result="tf_svm_rank", *, curves=None, aside="infeasible", cell: str | None = None,
          d: int | None = None, ylabel: str | None = None, logy: bool = False,
          reference: bool | None = None, static: dict | None = None, mode: str | None = None,
          **settings):
    r"""Explorer: precomputed sweep curves over (n, T, d), the current point marked.

    Left, the quantities ``curves`` against :math:`d` for the chosen :math:`(n, T)` (default
    for ``"tf_svm_rank"``: the mean rank of the Frobenius and the nuclear Att-SVM solutions,
    with :math:`\min(n, d)` dotted); right, the quantity ``aside`` (default: the fraction of
    infeasible instances) against :math:`d` for every :math:`(n, T)`. Nothing is trained on
    a control change: the sweep is computed once (cached by :mod:`attnlib.experiments`).
    See chapter 6.

    Parameters
    ----------
    result : str, Result or dict
        An experiment name run with ``**settings`` through :func:`attnlib.experiments.run`
        (cached), its Result, or its arrays: ``ds`` (P,), ``cells`` (C, 2) and arrays
        (C, P) (or (P,) without cells).
    curves : dict {label: array name}, optional
        Default ``{"Frobenius": "fro_mean", "nuclear": "nuc_mean"}``.
    aside : str or None
        Array shown for every cell on the right (None: no right panel).
    cell : str, optional
        Initial ``"n=.., T=.."`` (a dropdown; panels on the static site).
    d : int, optional
        Initial size d (the static slider).
    ylabel : str, optional
        Label of the left panel's y axis (default: the rank's for the rank sweep, else none).
    logy : bool
        Log scale on the left panel (e.g. for ``1 - corr`` curves).
    reference : bool, optional
        Draw :math:`\min(n, d)` (the bound on the rank); default: when ``curves`` has
        ``fro_mean``.
    static, mode
        As in :func:`attnlib.explorers.max_margin.token_plane` (default: every cell and d).
    **settings
        Settings of the experiment when ``result`` is a name. Prefer passing the Result your
        chapter computed: ``res = al.experiments.run("tf_svm_rank", trials=20)`` then
        ``al.explorers.sweep(res)``; the default settings run the paper's full grid (minutes).

    Examples
    --------
    ``sweep(res_global, curves={"global": "global", "local, not global": "local_only"},
    aside=None, ylabel="fraction of runs")`` for ``tf_global_fraction``.
    """
    arrays = _sweep_arrays(result, settings)
    curves = curves or {"Frobenius": "fro_mean", "nuclear": "nuc_mean"}
    ds = tuple(int(x) for x in np.asarray(arrays["ds"]).reshape(-1))
    cells = [tuple(int(v) for v in c) for c in np.asarray(arrays.get("cells", [[0, 0]]))]
    names = tuple(f"n={n}, T={T}" for n, T in cells)
    for key in list(curves.values()) + ([aside] if aside else []):
        if key not in arrays:
            raise ValueError(f"curves/aside: the result has no array {key!r}; it has "
                             f"{sorted(arrays)}")

    def row(key, j):
        a = np.asarray(arrays[key], dtype=float)
        return a if a.ndim == 1 else a[j]

    if reference is None:
        reference = "fro_mean" in curves.values()
    if ylabel is None:
        ylabel = "mean rank (feasible instances)" if reference else ""

    def draw(fig, cell, d):
        j = names.index(cell)
        n = cells[j][0]
        axes = fig.subplots(1, 2 if aside else 1, squeeze=False)[0]
        vals = {lab: row(key, j) for lab, key in curves.items()}
        styles = {lab: "--" if k else "-" for k, lab in enumerate(vals)}
        plots.sweep_curves(ds, vals, ax=axes[0], current=d, styles=styles, xlabel="d",
                           ylabel=ylabel, title=cell, legend="lower right")
        if logy:
            plots.log_y(axes[0])
        if reference:
            axes[0].plot(ds, np.minimum(n, ds), ":", color="0.5", label="min(n, d)")
            axes[0].legend(fontsize=8, loc="lower right")
        if aside:
            other = {nm: row(aside, i) for i, nm in enumerate(names)}
            plots.sweep_curves(ds, other, ax=axes[1], current=(cell, d), xlabel="d",
                               ylabel=aside.replace("_", " "), title=f"{aside} for every (n, T)",
                               legend="upper right")

    controls = [Control("cell", names, default=cell or names[0], label="(n, T)"),
                Control("d", ds, default=d if d is not None else ds[len(ds) // 2])]
    if len(names) > 1 and (static is None or "cell" not in static):
        static = {**(static or {}), "cell": names}
    ex = Explorer(draw, with_static(controls, static), name="sweep", slider="d",
                  figsize=(9.5, 3.5), margins=dict(left=0.07, right=0.98, wspace=0.25),
                  caption="Move d: the marked points are the current size.")
    return ex.show(mode)


# -- causal attention (chapter 8) -------------------------------------------------------------
@functools.lru_cache(maxsize=4)
def _causal_result(n: int, T: int, d: int, steps: int, seed: int):
    """One data set of ``tf_causal`` with these sizes (the disk cache, then memory)."""
    with few_threads():
        return experiments.run("tf_causal", trials=1, n=n, T=T, d=d, steps=steps, seed=seed,
                               record_every=20, device="cpu")


def causal_runs(n: int = 2, T: int = 6, d: int = 16, steps: int = 2000, seed: int = 0,
                trial: int = 0, result=None) -> dict:
    """What :func:`causal_explorer` draws: one data set of ``tf_causal`` (cached).

    ``result`` is a ``tf_causal`` Result (e.g. the chapter's) whose trial ``trial`` is shown;
    by default the experiment is run (cached) with ``trials=1`` and the given sizes. Returns
    ``X`` (n, T, d) and, per attention ``"causal"`` / ``"bidirectional"``: the history ``H``
    (S, d, d), ``steps`` (S,), the final selection ``alpha`` (n, T), the curve ``corr`` (S,)
    against the matching sequence SVM, and ``opt`` (n, T), the optimal visible tokens.
    """
    A = (result if result is not None else _causal_result(n, T, d, steps, seed)).arrays
    out = {"X": A["X"][trial]}
    for name, key in (("causal", "causal"), ("bidirectional", "full")):
        out[name] = dict(H=A[f"hist_{key}"][trial], steps=A["steps"],
                         alpha=A[f"alpha_{key}"][trial], corr=A[f"corr_{key}"][trial],
                         opt=A[f"opt_{key}"][trial])
    return out


def causal_explorer(n: int = 2, T: int = 6, d: int = 16, steps: int = 2000, seed: int = 0,
                    mode: str | None = None, *, result=None, trial: int = 0):
    """Explorer (chapter 8): the attention matrix of a sequence self-attention layer while it
    trains, causal or bidirectional, and its correlation with the matching sequence SVM.

    Left: :math:`s_{ik\\cdot}` for every query k (rows) of sequence i, with the token each
    query ends on (dot) and its optimal visible token (cross). Right: 1 − corr(W(k), SAtt-SVM
    of the final selection), the current iteration marked. The runs are read from the
    experiment ``tf_causal`` (:func:`causal_runs`): by default one data set of the given sizes
    (computed once and cached), or trial ``trial`` of a ``tf_causal`` ``result`` (the
    chapter's). Built on :class:`attnlib.explorers.Explorer` (live in Jupyter; on the
    website the attention, up to 4 sequences and 6 iterations, 0 ... ``steps``).
    """
    if result is not None:
        steps = int(result.params["steps"])
        n, T = np.asarray(result.arrays["X"]).shape[1:3]

    def attention_at(attention, sequence, iterations):
        runs = causal_runs(n, T, d, steps, seed, trial, result)
        r = runs[attention]
        k = int(np.searchsorted(r["steps"], int(iterations)))
        W = torch.as_tensor(r["H"][k])
        X = torch.as_tensor(runs["X"])
        s = to_numpy(SQ.sequence_softmax(X, W, attention == "causal"))[int(sequence)]  # (T, T)
        return r, k, s

    def draw(fig, attention, sequence, iterations):
        r, k, s = attention_at(attention, sequence, iterations)
        ax0, ax1 = fig.subplots(1, 2)
        image = ax0.imshow(s, vmin=0, vmax=1, cmap="Blues")
        q = np.arange(T)
        ax0.plot(r["alpha"][int(sequence)], q, "o", color=_C["target"], ms=5, label="final α_ik")
        ax0.plot(r["opt"][int(sequence)], q, "x", color="k", ms=6,
                 label="optimal visible token")
        ax0.set_xlabel("token t")
        ax0.set_ylabel("query k")
        ax0.set_title(f"attention s_ik at step {int(r['steps'][k])}", fontsize=10)
        ax0.legend(fontsize=7, loc="lower left")
        plots.correlation_curves(r["steps"], {f"{attention} GD vs its SVM": r["corr"]}, ax=ax1,
                                 one_minus=True, mark=int(iterations), legend="upper right")
        mark = ax1.lines[-1]  # the current iteration's vertical line, drawn last

        def update(attention2, sequence2, iterations2):  # another iteration: same axes
            if attention2 != attention or int(sequence2) != int(sequence):
                return False
            r2, k2, s2 = attention_at(attention2, sequence2, iterations2)
            image.set_data(s2)
            ax0.set_title(f"attention s_ik at step {int(r2['steps'][k2])}", fontsize=10)
            mark.set_xdata([float(iterations2)] * 2)
            return True

        return lambda attention, sequence, iterations: update(attention, sequence, iterations)

    its = tuple(range(0, steps + 1, 100))
    # 11 frames for the play button: every tenth of the run
    shown = tuple(sorted({round(steps * j / 1000) * 100 for j in range(11)} & set(its)))
    controls = [Control("attention", ("causal", "bidirectional"), default="causal",
                        static=("causal", "bidirectional")),
                Control("sequence", tuple(range(n)), default=0, static=tuple(range(min(n, 4)))),
                Control("iterations", its, default=steps, continuous=True, static=shown)]
    return Explorer(draw, controls, name="causal", slider="iterations", figsize=(9.0, 3.6),
                    caption="Move the iterations: each query's attention concentrates on "
                            "its selected token, and W turns toward the sequence SVM.").show(mode)
