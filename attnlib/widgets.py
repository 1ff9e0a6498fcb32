"""Explorers: one figure code, two renderers (live ipywidgets | static HTML for the website).

Usage (for chapter authors)
---------------------------
One short call per explorer, in a code cell tagged ``explorer``::

    import attnlib as al
    al.widgets.token_plane(example="e1-local")

In Jupyter, JupyterLab, Colab or VS Code this cell shows **live** controls (sliders, dropdowns)
that recompute with attnlib on every change. When the book is built, the build sets
``ATTNLIB_EXPLORER=static`` and the same cell renders a **static** explorer: the figure is
precomputed over a declared grid of control settings and played by matplotlib's
``FuncAnimation.to_jshtml`` player (a slider with buttons, frames embedded as PNG, no kernel, no
network). Controls not on the slider become panels: one folded ``<details>`` block per setting,
the default one open. An explicit ``mode="live"`` or ``mode="static"`` overrides the variable.

Every explorer takes, besides its own settings, ``mode=None`` and returns an object that
displays itself (``LiveExplorer`` or ``StaticExplorer``). Its keyword arguments set the
*default* value of a control (``token_plane(loss="exp")``); a control's values are then the
declared list. ``.figure`` (live) is the current matplotlib figure, ``.update(**values)``
(live) redraws as a slider move would, ``.html`` (static) is the page fragment.

Explorers of the book (see each docstring):

- ``token_plane(example="e1-global", *, init="all", iterations=200, lr=0.1,
  normalized=True, loss="logistic")``: chapters 1-3; tokens, scores, GD paths of ``p``,
  max-margin rays, support tokens; examples "e1-global", "e1-local", "e2".
- ``parameterisation(example=2, *, param="both", iterations=1000, lr=0.1,
  normalized=True)``: chapter 5; ``W`` vs ``(K, Q)``, Frobenius vs nuclear SVM,
  correlation curves.
- ``selection(position="(0, 0)", *, score=0.0, alpha=1)``: chapter 3; which selections
  are locally optimal, their SVMs and support tokens.
- ``mirror_descent(lp=1.75, *, iterations=1500, seed=1, normalized=True)``: chapter 9;
  the exponent ``lp`` in [1.1, 3], sparsity histogram, Bregman curve.
- ``sweep(result="tf_svm_rank", *, curves=None, aside="infeasible", cell=None, d=None,
  ...)``: chapter 6; precomputed sweep curves over ``(n, T, d)``, the current point marked.

Every one also takes ``static={control: values}`` (the settings rendered on the site: the
slider's values, and one panel per combination of the others) and ``mode``.

Making a new explorer
---------------------
Write a draw function ``draw(fig, **values)`` that draws onto the empty matplotlib
:class:`~matplotlib.figure.Figure` it is given (``fig.subplots(...)`` then the functions of
:mod:`attnlib.plots`), declare the controls, and show::

    def draw(fig, lr, iterations):
        ax = fig.subplots()
        ...

    Explorer(draw, [Control("lr", (0.01, 0.1, 1.0), default=0.1),
                    Control("iterations", range(0, 201, 10), default=200)],
             name="my-explorer", slider="iterations").show()

Design
------
* One mechanism (:class:`Explorer`): the draw function and the controls; each control is a
  finite list of values with a default (``static=`` picks the subset rendered on the site).
  Live and static call the same ``draw``, so they show the same figure.
* Training is expensive, drawing is cheap: explorers cache their data (``functools.lru_cache``)
  keyed by the settings that need a recomputation; all initialisations are the trials
  dimension of ONE batched :func:`attnlib.train` call (``token_plane``: six runs at once), the
  trajectory is recorded once up to the largest iteration, and a slider over iterations or
  over runs only redraws. A setting that changes the training (step size, loss, ``lp``)
  retrains once per value, then comes from the cache.
* Live: ``ipywidgets`` controls, the figure shown as an ``ipywidgets.Image`` (PNG bytes; no
  flicker, works with any matplotlib backend), a status line that says "computing..." before a
  recomputation and the redraw time after, an ``Output`` area for progress bars (training
  progress appears there); sliders redraw on release (``continuous_update=False``), so drags
  do not queue redraws.
* Static: ``FuncAnimation(fig, ...).to_jshtml()``, then made deterministic and offline: the
  random 32-hex ids are replaced by ids derived from the explorer's name and a counter, the
  font-awesome stylesheet link (a network request) is removed and the button icons become
  plain characters. The frame resolution is lowered until the explorer fits ``max_bytes``
  (default 2 MB, so a page with two explorers stays under 5 MB).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from . import plots
from ._runtime import few_threads
from ._validate import to_numpy
from .data import (
    AttentionData,
    mirror_random_data,
    multi_input_example,
    three_token_example,
    visualization_example,
)
from .explore import (
    ENV_VAR,
    MODES,
    Control,
    Explorer,
    LiveExplorer,
    StaticExplorer,
    explorer_mode,
    show_progress,
    with_static,
)
from .metrics import bregman_direction, correlation
from .svm import att_svm, prompt_svm
from .tokens import enumerate_selections, optimal_tokens, scores, selected_tokens, support_tokens
from .train import train

__all__ = [
    "ENV_VAR", "MODES", "Control", "Explorer", "LiveExplorer", "StaticExplorer",
    "explorer_mode", "token_plane", "parameterisation", "selection", "mirror_descent", "sweep",
    "TOKEN_EXAMPLES", "SELECTION_POSITIONS",
]


def _cos(P, u):
    """Cosine of every row of ``P`` (..., k) with the vector ``u`` (k,)."""
    return to_numpy(correlation(torch.as_tensor(P), torch.as_tensor(u), dims=1))


# -- token plane (chapters 1-4) ---------------------------------------------------------------
#: Prompt-model examples of the max-margin paper: name -> (constructor, description).
TOKEN_EXAMPLES = {
    "e1-global": (lambda: three_token_example("global"),
                  "one input, 3 tokens, scores (1, .9, .9): every run finds the optimal token"),
    "e1-local": (lambda: three_token_example("local"),
                 "one input, 3 tokens, scores (1, .9, 0): runs split between two selections"),
    "e2": (multi_input_example, "3 inputs of 7 tokens, equal non-optimal scores"),
}
_TP_ITER = (0, 5, 10, 15, 20, 30, 40, 50, 60, 80, 100, 125, 150, 175, 200, 300, 500, 1000)
_TP_STATIC = (0, 10, 20, 40, 60, 100, 150, 200)  # 8 frames: a chapter's build budget
_TP_RECORD = 5


@functools.lru_cache(maxsize=32)
def _token_plane_data(example: str, lr: float, normalized: bool, loss: str) -> dict:
    """Train the example's six initialisations at once and solve its p-SVMs (cached)."""
    ex = TOKEN_EXAMPLES[example][0]()
    W = ex.init["W"]
    settings = {**ex.settings, "lr": lr, "normalized": normalized, "loss": loss,
                "steps": _TP_ITER[-1], "record_every": _TP_RECORD}
    with few_threads():
        res = train(ex.data, **settings, init=ex.init, progress=show_progress())  # 6 runs = trials
        sel = enumerate_selections(ex.data, param="p", W=W) if ex.data.T ** ex.data.n <= 27 \
            else None
        alphas = sel.alpha[sel.locally_optimal] if sel is not None else \
            optimal_tokens(ex.data)[None]
        dirs, support = [], []
        for a in alphas:
            p_mm = prompt_svm(ex.data, alpha=a, W=W)
            dirs.append(to_numpy(p_mm)[:2])
            z = p_mm.expand(ex.data.n, -1)  # the prompt model: every query is p
            support.append(to_numpy(support_tokens(ex.data.X, W, a, z=z)).astype(bool))
    opt = to_numpy(optimal_tokens(ex.data)).astype(int)
    labels, short = [], []
    for a in alphas:
        a = to_numpy(a).astype(int)
        kind = "global" if (a == opt).all() else "local"
        sel_txt = ",".join(str(t + 1) for t in a)
        short.append(f"pᵐᵐ(α={sel_txt})")  # unicode: mathtext costs 50 ms a label
        labels.append(f"{short[-1]}, {kind}")
    P = to_numpy(res.history["p"])[..., :2]  # (6, S, 2): the key plane (W = diag(1, 1, 0))
    return dict(X=to_numpy(ex.data.X)[..., :2], gamma=to_numpy(scores(ex.data)), P=P,
                steps=to_numpy(res.history["step"]), prob=to_numpy(res.history["max_prob"]),
                dirs=np.array(dirs), labels=labels, short=short, support=support[0],
                cos=np.stack([_cos(P, u) for u in dirs]),  # (k, 6, S)
                target=np.stack([_cos(P[:, -1], u) for u in dirs]).argmax(0),  # (6,)
                inits=to_numpy(ex.init["p"])[:, :2], info=TOKEN_EXAMPLES[example][1])


def _draw_token_plane(fig, example, init, iterations, lr, normalized, loss):
    d = _token_plane_data(example, float(lr), bool(normalized), loss)
    k = int(iterations) // _TP_RECORD + 1  # recorded points up to `iterations`
    ax0, ax1, ax2 = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=(1.2, 1, 1)))
    hl = None if init == "all" else int(init) - 1
    plots.token_plane(d["X"], d["gamma"], paths=d["P"][:, :k], directions=d["dirs"],
                      direction_labels=d["labels"], support=d["support"], highlight=hl, ax=ax0,
                      title="tokens, paths of p(k), max-margin rays", colorbar=False,
                      ray_length=1e3)
    # the view follows the paths (zooming out as ||p|| grows), tokens always inside
    plots.square_view(ax0, np.concatenate([d["P"][:, :k].reshape(-1, 2), d["X"].reshape(-1, 2)]))
    runs = range(d["P"].shape[0]) if hl is None else [hl]
    steps = d["steps"][:k]
    # each run against the ray it ends closest to: 1 - cos on a log axis
    corr, colors = {}, {}
    for j, lab in enumerate(d["short"]):
        mine = [b for b in runs if d["target"][b] == j]
        if mine:
            corr[lab] = d["cos"][j, mine, :k]
            colors[lab] = plots.COLORS[j]  # the colour of its ray
    plots.correlation_curves(steps, corr, ax=ax1, one_minus=True, band="lines", colors=colors,
                             title="each run vs. the ray it approaches", legend="lower left")
    plots.probability_curves(steps, {"largest softmax prob.": d["prob"][list(runs), :k]},
                             ax=ax2, title="attention becomes one-hot", band="lines")
    for ax in (ax1, ax2):
        ax.set_xlim(0, max(200, int(iterations)))
    ax1.set_ylim(1e-5, 2.5)


def token_plane(example: str = "e1-global", *, init="all", iterations: int = 200,
                lr: float = 0.1, normalized: bool = True, loss: str = "logistic",
                static: dict | None = None, mode: str | None = None):
    r"""Explorer: gradient descent on the prompt token p, in the plane of the keys.

    Trains :math:`p` of the prompt model :math:`f(X) = v^\top X^\top \mathrm{softmax}(XWp)`
    from six initialisations (one batched :func:`attnlib.train` call) and shows, left, the
    tokens coloured by their score :math:`\gamma_{t}`, the paths of :math:`p(k)`, the rays of
    the p-SVM solutions :math:`p^{mm}(\alpha)` of every locally optimal selection and the
    support tokens of the first one; middle, :math:`1-\cos(p(k), p^{mm}(\alpha))` of each run
    against the ray it approaches; right, the largest softmax probability. See chapters 1-3.

    Parameters
    ----------
    example : {"e1-global", "e1-local", "e2"}
        The paper's examples (:data:`TOKEN_EXAMPLES`).
    init : "all" or int 1..6
        Highlight one of the six runs (curves then show that run).
    iterations : int
        Iterations shown (the static slider: 0 ... 200).
    lr, normalized, loss
        Step size, normalised GD or not, loss (``"logistic"``, ``"exp"``, ``"correlation"``).
    static : dict, optional
        Values rendered on the static site per control, e.g. ``{"init": ("all", 5)}`` (each
        combination of the non-slider controls becomes a panel).
    mode : {"live", "static"}, optional
        Default ``$ATTNLIB_EXPLORER`` or live.

    Returns
    -------
    LiveExplorer or StaticExplorer
    """
    controls = [
        Control("example", tuple(TOKEN_EXAMPLES), default=example),
        Control("init", ("all", 1, 2, 3, 4, 5, 6), default=init, label="run"),
        Control("iterations", _TP_ITER, default=iterations, static=_TP_STATIC),
        Control("lr", (0.01, 0.03, 0.1, 0.3, 1.0), default=lr, label="step size"),
        Control("normalized", (True, False), default=normalized),
        Control("loss", ("logistic", "exp", "correlation"), default=loss),
    ]
    ex = Explorer(_draw_token_plane, with_static(controls, static), name="token-plane",
                  slider="iterations", figsize=(11.5, 3.6),
                  margins=dict(left=0.05, right=0.98, wspace=0.28),
                  caption="Gradient descent on the prompt p: watch the paths turn toward a "
                          "max-margin ray and the attention become one-hot.")
    return ex.show(mode)


# -- parameterisation: W vs (K, Q) (chapter 5) -------------------------------------------------
_PM_ITER = (0, 10, 20, 50, 100, 200, 300, 500, 700, 1000)
_PM_RECORD = 10


def _corr(A, B):
    """Correlation :math:`\\langle A, B\\rangle / (\\|A\\|_F \\|B\\|_F)` of matrices (numpy)."""
    return to_numpy(correlation(torch.as_tensor(A), torch.as_tensor(B), dims=2))


@functools.lru_cache(maxsize=16)
def _param_data(version: int, lr: float, normalized: bool) -> dict:
    """Train W and (K, Q) on the 2-D example and solve both SVMs of each final selection."""
    ex = visualization_example(version)
    data, eps = ex.data, ex.settings["eps"]
    kw = dict(lr=lr, normalized=normalized, steps=_PM_ITER[-1], eps=eps,
              record_every=_PM_RECORD, loss="logistic")
    out = {}
    with few_threads():
        kw["progress"] = show_progress()
        runs = {"W": train(data, "W", init={"W": ex.init["W"]}, **kw),
                "KQ": train(data, "KQ", init={"K": ex.init["K"], "Q": ex.init["Q"]},
                               reg=ex.known["reg_KQ"], **kw)}
        for name, res in runs.items():
            alpha = selected_tokens(data, res.W)
            H = to_numpy(res.history["W"])  # (S, d, d)
            fro = to_numpy(att_svm(data, alpha=alpha, norm="fro"))
            nuc = to_numpy(att_svm(data, alpha=alpha, norm="nuc"))
            out[name] = dict(H=H, fro=fro, nuc=nuc, alpha=to_numpy(alpha).astype(int),
                             corr_fro=_corr(H, fro), corr_nuc=_corr(H, nuc),
                             prob=to_numpy(res.history["max_prob"]))
    out.update(X=to_numpy(data.X), z=to_numpy(data.z), gamma=to_numpy(scores(data)),
               steps=to_numpy(runs["W"].history["step"]))
    return out


def _draw_parameterisation(fig, example, param, iterations, lr, normalized):
    d = _param_data(int(example), float(lr), bool(normalized))
    k = int(iterations) // _PM_RECORD + 1
    ax0, ax1, ax2 = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=(1.15, 1, 1)))
    shown = ("W", "KQ") if param == "both" else (param,)
    R = np.linalg.norm(d["X"], axis=-1).max()  # paths drawn on the tokens' scale
    styles = {"W": ("tab:blue", "fro", "Frobenius"), "KQ": ("tab:red", "nuc", "nuclear")}
    plots.token_scatter(d["X"], d["gamma"], ax=ax0, colorbar=False, annotate=False)
    for name in shown:
        color, key, norm_name = styles[name]
        H = d[name]["H"][:k]  # (k, d, d)
        nrm = np.linalg.norm(H, axis=(-2, -1))[:, None, None]
        Wz = np.einsum("sij,nj->nsi", H / np.where(nrm > 0, nrm, 1.0), d["z"]) * R  # (n, k, 2)
        plots.trajectories(Wz, ax=ax0, color=color, arrow_every=max(1, k // 4),
                           label=f"{name}: W(k) z_i / ‖W(k)‖")
        plots.rays(d["z"] @ d[name][key].T, ax=ax0, colors=[color] * len(d["z"]), length=3 * R,
                   labels=[f"{norm_name} SVM: Wᵐᵐ z_i"] + [None] * (len(d["z"]) - 1))
    plots.title(ax0, "queries' directions W z_i (scaled)")
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
                             colors={"W": "tab:blue", "KQ": "tab:red"})
    for ax in (ax1, ax2):
        ax.set_xlim(0, max(200, int(iterations)))


def parameterisation(example: int = 2, *, param: str = "both", iterations: int = 1000,
                     lr: float = 0.1, normalized: bool = True, static: dict | None = None,
                     mode: str | None = None):
    r"""Explorer: W versus (K, Q), the Frobenius versus the nuclear-norm SVM.

    Trains the combined matrix :math:`W` and the factors :math:`(K, Q)` (:math:`W = KQ^\top`)
    on the paper's 2-D example (:func:`attnlib.data.visualization_example`) and shows, left,
    the tokens, the directions :math:`W(k) z_i/\|W(k)\|_F` of both queries and the rays
    :math:`W^{mm} z_i` of the Frobenius SVM (blue, for W) and :math:`W^{mm}_\star z_i` of the
    nuclear SVM (red, for (K,Q)), each for the selection its run ends on; middle,
    :math:`1-\mathrm{corr}` of each run with both SVMs (solid: Frobenius, dashed: nuclear):
    each parameterisation approaches its own SVM; right, the largest softmax probability.
    See chapter 5.

    Parameters
    ----------
    example : {1, 2}
        The paper's ``visualization.ipynb`` (1) or ``visualization2.ipynb`` (2) layout.
    param : {"both", "W", "KQ"}
    iterations : int
        Iterations shown (the static slider).
    lr, normalized
        Step size, normalised GD or not.
    static, mode
        As in :func:`token_plane`.
    """
    controls = [
        Control("example", (1, 2), default=example),
        Control("param", ("both", "W", "KQ"), default=param, label="trained"),
        Control("iterations", _PM_ITER, default=iterations,
                static=(0, 20, 50, 100, 200, 500, 1000)),
        Control("lr", (0.01, 0.1, 0.5), default=lr, label="step size"),
        Control("normalized", (True, False), default=normalized),
    ]
    ex = Explorer(_draw_parameterisation, with_static(controls, static),
                  name="parameterisation", slider="iterations", figsize=(11.5, 3.6),
                  margins=dict(left=0.05, right=0.98, wspace=0.28),
                  caption="W (blue) goes to the Frobenius SVM, (K, Q) (red) to the nuclear one.")
    return ex.show(mode)


# -- selection: which token selections are locally optimal (chapter 3) --------------------------
#: Positions offered for token 3 (the two others are those of the paper's 3-token example).
SELECTION_POSITIONS = {"(0, 0)": (0.0, 0.0), "(0.6, 0.6)": (0.6, 0.6),
                       "(-0.6, -0.4)": (-0.6, -0.4), "(0.4, -0.8)": (0.4, -0.8),
                       "(0.45, 0.5)": (0.45, 0.5)}  # the last: between x1 and x2
_SEL_SCORES = (0.0, 0.3, 0.6, 0.9, 0.95, 1.0, 1.2)


@functools.lru_cache(maxsize=64)
def _selection_data(position: str, score: float) -> dict:
    """Every selection of the 3-token input: feasible? locally optimal? its p-SVM."""
    x3 = SELECTION_POSITIONS[position]
    X = torch.tensor([[[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [x3[0], x3[1], score]]],
                     dtype=torch.float64)
    data = AttentionData(X, torch.ones(1, dtype=torch.float64),
                           v=torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))
    W = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))
    with few_threads():
        sel = enumerate_selections(data, param="p", W=W)
        rows = []
        for a, feas, loc, glob in zip(sel.alpha, sel.feasible, sel.locally_optimal,
                                      sel.globally_optimal):
            row = dict(alpha=int(a[0]), feasible=bool(feas), local=bool(loc),
                       globally=bool(glob), p=None, support=None)
            if feas:
                p_mm = prompt_svm(data, alpha=a, W=W)
                row["p"] = to_numpy(p_mm)[:2]
                row["support"] = to_numpy(support_tokens(X, W, a, z=p_mm[None])).astype(bool)
            rows.append(row)
    return dict(X=to_numpy(X)[..., :2], gamma=to_numpy(scores(data)), rows=rows)


def _draw_selection(fig, position, score, alpha):
    d = _selection_data(position, float(score))
    ax0, ax1 = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=(1.0, 1.25)))
    me = d["rows"][int(alpha) - 1]
    dirs, labels, colors = [], [], []
    for r in d["rows"]:
        if r["feasible"]:
            dirs.append(r["p"])
            kind = "global" if r["globally"] else ("locally optimal" if r["local"] else "not l.o.")
            labels.append(f"α={r['alpha'] + 1}: {kind}")
            colors.append(plots.COLORS[r["alpha"]] if r["local"] else "0.6")
    plots.token_scatter(d["X"], d["gamma"], ax=ax0, colorbar=False, selected=[me["alpha"]],
                        support=me["support"][None] if me["feasible"] else None)
    if dirs:
        plots.rays(np.array(dirs), ax=ax0, labels=labels, colors=colors, length=5.0)
    for t, x in enumerate(d["X"][0]):
        ax0.annotate(f"x{t + 1}", x, xytext=(-14, -12), textcoords="offset points", fontsize=8)
    plots.square_view(ax0, np.concatenate([d["X"][0], np.zeros((1, 2))]), pad=0.6)
    ax0.legend(fontsize=7, loc="upper right")
    plots.title(ax0, f"selection α={int(alpha)}: selected (black) and support (orange) tokens",
                fontsize=9)
    ax1.axis("off")
    cells = []
    for r in d["rows"]:
        sup = ", ".join(f"x{t + 1}" for t in np.flatnonzero(r["support"][0])) \
            if r["feasible"] else "—"
        cells.append([f"α = {r['alpha'] + 1}", "yes" if r["feasible"] else "no",
                      f"{np.linalg.norm(r['p']):.3f}" if r["feasible"] else "—", sup,
                      "yes" if r["local"] else "no", "yes" if r["globally"] else "no"])
    table = ax1.table(cellText=cells, colLabels=["selection", "SVM feasible", "‖pᵐᵐ‖",
                                                 "support", "locally opt.", "global"],
                      loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.scale(1.0, 1.6)
    for j in range(6):
        table[int(alpha), j].set_facecolor("#fde9e7")
    plots.title(ax1, "α is locally optimal when every support token scores below x_α",
                fontsize=9)


def selection(position: str = "(0, 0)", *, score: float = 0.0, alpha: int = 1,
              static: dict | None = None, mode: str | None = None):
    r"""Explorer: which token selections are locally optimal?

    One input with three tokens: :math:`x_1 = (-0.1, 1)` (score 1) and :math:`x_2 = (1, 0)`
    (score 0.9) as in the paper's example, and :math:`x_3` at a position and with a score the
    reader picks. For every selection :math:`\alpha` the p-SVM is solved; left, the tokens, the
    rays :math:`p^{mm}(\alpha)` (grey: feasible but not locally optimal) and, for the chosen
    :math:`\alpha`, its selected and support tokens; right, the table: feasible,
    :math:`\|p^{mm}\|`, support tokens :math:`\mathcal T(\alpha)`, locally optimal, global.
    With :math:`x_3 = (0,0)`: score 0 makes :math:`\alpha = 2` locally optimal, score 0.9
    does not (a tie with a support token). See chapter 3.

    Parameters
    ----------
    position : str
        Key of :data:`SELECTION_POSITIONS` (a panel on the static site, see ``static``).
    score : float
        Score :math:`\gamma_3` of token 3 (the static slider).
    alpha : {1, 2, 3}
        The selection whose support tokens are shown.
    static, mode
        As in :func:`token_plane`; e.g. ``static={"position": ("(0, 0)", "(0.6, 0.6)")}``.
    """
    controls = [
        Control("position", tuple(SELECTION_POSITIONS), default=position, label="x3 at"),
        Control("score", _SEL_SCORES, default=score, label="score of x3"),
        Control("alpha", (1, 2, 3), default=alpha, label="selection α"),
    ]
    ex = Explorer(_draw_selection, with_static(controls, static), name="selection",
                  slider="score", figsize=(10.5, 3.8),
                  margins=dict(left=0.04, right=0.99, wspace=0.05, bottom=0.1),
                  caption="Change the score of x3 and watch which selections stay locally "
                          "optimal.")
    return ex.show(mode)


# -- mirror descent: the exponent lp (chapter 9) ----------------------------------------------
_MD_LP = tuple(round(1.1 + 0.1 * j, 2) for j in range(20))  # 1.1 ... 3.0
_MD_LP_STATIC = (1.1, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0)
_MD_ITER = (0, 50, 100, 200, 300, 500, 750, 1000, 1500)
_MD_RECORD = 10


def _bregman_dir(A, B, lp):
    """Directional Bregman divergence of ``A`` (the SVM) from ``B`` (..., d, d) (numpy)."""
    return to_numpy(bregman_direction(torch.as_tensor(A), torch.as_tensor(B), lp, dims=2))


def _att_svm_robust(data, alpha, norm):
    """Att-SVM with Clarabel, else SCS (Clarabel can fail on lp close to 1), else NaN."""
    for solver in ("CLARABEL", "SCS"):
        try:
            return to_numpy(att_svm(data, alpha=alpha, norm=norm, solver=solver))
        except RuntimeError:
            continue
    return np.full((data.d, data.d), np.nan)


@functools.lru_cache(maxsize=48)
def _mirror_data(lp: float, seed: int, normalized: bool) -> dict:
    """lp mirror descent from W(0) = 0 on the paper's synthetic data; the lp- and l2-SVMs."""
    ex = mirror_random_data(seed)
    data = ex.data
    method = "gd" if lp == 2.0 else "md"
    with few_threads():
        res = train(data, "W", method=method, lp=lp, lr=0.1, normalized=normalized,
                       steps=_MD_ITER[-1], eps=2.220446049250313e-16, record_every=_MD_RECORD,
                       progress=show_progress(),
                       init={"W": torch.zeros(data.d, data.d, dtype=data.dtype)})
        alpha = selected_tokens(data, res.W)
        svm_lp = _att_svm_robust(data, alpha, float(lp) if lp != 2.0 else "fro")
        svm_2 = _att_svm_robust(data, alpha, "fro")
    H = to_numpy(res.history["W"])  # (S, d, d)
    big = np.argsort(np.nan_to_num(np.abs(svm_lp)).ravel())[-2:][::-1]
    entries = [divmod(int(j), data.d) for j in big]
    return dict(H=H, svm_lp=svm_lp, svm_2=svm_2, steps=to_numpy(res.history["step"]),
                entries=entries,
                D_lp=_bregman_dir(svm_lp, H, lp), D_2=_bregman_dir(svm_2, H, lp),
                alpha=to_numpy(alpha).astype(int))


def _draw_mirror(fig, lp, iterations, seed, normalized):
    lp = float(lp)
    d = _mirror_data(lp, int(seed), bool(normalized))
    k = int(iterations) // _MD_RECORD + 1
    ax0, ax1, ax2 = fig.subplots(1, 3)
    # (a) the iterates on the two largest entries of the lp-SVM solution, with the SVM rays
    (r0, c0), (r1, c1) = d["entries"]
    rows, cols = [r0, r1], [c0, c1]
    P = d["H"][:k][:, rows, cols]  # (k, 2)
    plots.trajectories(P, ax=ax0, color="0.3", arrow_every=max(1, k // 5), label="W(k)")
    rays = np.stack([d["svm_lp"][rows, cols], d["svm_2"][rows, cols]])
    full = d["H"][:, rows, cols]
    L = max(np.linalg.norm(full[-1]), 1.0)
    plots.rays(rays, ax=ax0, length=1.2 * L, colors=["tab:red", "tab:blue"],
               labels=[f"ℓ{lp:g}-AttSVM", "ℓ2-AttSVM"])
    unit = rays / np.maximum(np.linalg.norm(rays, axis=1, keepdims=True), 1e-300)
    plots.square_view(ax0, np.concatenate([full, np.zeros((1, 2)), unit * L]))
    ax0.set_xlabel(f"W[{r0 + 1},{c0 + 1}]")
    ax0.set_ylabel(f"W[{r1 + 1},{c1 + 1}]")
    ax0.legend(fontsize=7, loc="upper left")
    plots.title(ax0, "iterates on the SVM's two largest entries", fontsize=9)
    # (b) sparsity: |W_ij| / max |W| of the iterate and of the lp-SVM solution
    Wk = d["H"][k - 1]
    rel = {f"W({int(iterations)})": np.abs(Wk) / max(np.abs(Wk).max(), 1e-300),
           f"ℓ{lp:g}-AttSVM": np.abs(d["svm_lp"]) / np.abs(d["svm_lp"]).max()}
    plots.histogram(rel, ax=ax1, bins=20, range=(0.0, 1.0), xlabel="|W_ij| / max |W|")
    ax1.set_ylim(0, 100)
    plots.title(ax1, "entries: sparse for lp → 1")
    # (c) the directional Bregman divergence to the lp-SVM and to the l2-SVM
    steps = d["steps"][:k]
    plots.curves(steps, {f"to ℓ{lp:g}-AttSVM": d["D_lp"][:k], "to ℓ2-AttSVM": d["D_2"][:k]},
                 ax=ax2, logy=True, ylabel="directional Bregman div.",
                 colors={f"to ℓ{lp:g}-AttSVM": "tab:red", "to ℓ2-AttSVM": "tab:blue"},
                 title="divergence from each SVM direction", legend="lower left")
    ax2.set_xlim(0, _MD_ITER[-1])
    ax2.set_ylim(1e-4, 2.5)


def mirror_descent(lp: float = 1.75, *, iterations: int = 1500, seed: int = 1,
                   normalized: bool = True, static: dict | None = None,
                   mode: str | None = None):
    r"""Explorer: ℓp mirror descent and the ℓp-AttSVM, for an exponent ``lp`` in [1.1, 3].

    Trains W by normalised ℓp mirror descent from :math:`W(0) = 0` on the paper's synthetic
    data (:func:`attnlib.data.mirror_random_data`: n=6, T=8, d=10) and solves the ℓp- and the
    ℓ2-AttSVM of the final selection. Left, the iterates on the entries
    :math:`(W_{12}, W_{34})` with both SVM rays; middle, the histogram of
    :math:`|W_{ij}|/\max|W|` of the iterate and of the ℓp-SVM solution (sparse as
    :math:`p \to 1`, flat for :math:`p > 2`); right, the directional Bregman divergence
    :math:`1 - \langle \mathrm{sign}(\bar W_k)|\bar W_k|^{p-1}, \bar W^{mm}\rangle` (bars: unit
    ℓp norm) to the ℓp-SVM (the smaller one) and to the ℓ2-SVM. Close to :math:`p = 1` the
    normalised steps saturate the softmax within about 100 steps and the direction then moves
    very slowly (seed 1, p = 1.1: divergence ≈ 0.12 after 1500 steps, against 0.38 to the
    ℓ2-SVM). See chapter 9.

    Parameters
    ----------
    lp : float
        Exponent in {1.1, 1.2, ..., 3.0} (the static slider: 1.1, 1.25, 1.5, 1.75, 2, 2.5, 3).
    iterations : int
        Iterations shown (live; the static site shows the last).
    seed : {1, 2, 3}
        The data set.
    normalized : bool
        Normalised steps (the paper's synthetic runs) or plain ones.
    static, mode
        As in :func:`token_plane`.
    """
    controls = [
        Control("lp", tuple(sorted(set(_MD_LP) | set(_MD_LP_STATIC))), default=lp,
                static=_MD_LP_STATIC, label="exponent lp", continuous=False),
        Control("iterations", _MD_ITER, default=iterations),
        Control("seed", (1, 2, 3), default=seed, label="data seed"),
        Control("normalized", (True, False), default=normalized),
    ]
    ex = Explorer(_draw_mirror, with_static(controls, static), name="mirror-descent",
                  slider="lp", figsize=(11.5, 3.6), margins=dict(left=0.05, right=0.98),
                  caption="Slide the exponent lp: the iterates follow the ℓp-AttSVM, whose "
                          "entries get sparse as lp approaches 1.")
    return ex.show(mode)


# -- sweeps over (n, T, d) (chapter 6) --------------------------------------------------------
def _sweep_arrays(result, settings):
    if isinstance(result, str):
        from . import experiments

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
        As in :func:`token_plane`.
    **settings
        Settings of the experiment when ``result`` is a name. Prefer passing the Result your
        chapter computed: ``res = al.experiments.run("tf_svm_rank", trials=20)`` then
        ``al.widgets.sweep(res)``; the default settings run the paper's full grid (minutes).

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
