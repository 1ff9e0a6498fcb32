r"""Explorers of *Max-Margin Token Selection in Attention Mechanism* (arXiv 2306.13596).

Four explorers of chapters 1-4, built on :mod:`attnlib.explorers.framework`; each reads the
cached result of an experiment (:func:`attnlib.experiments.run`) and only draws:

- :func:`softmax_explorer` (chapter 1): move the prompt :math:`p` and watch the softmax.
- :func:`token_plane` (chapters 1-3): GD paths of :math:`p` and the max-margin rays
  (experiment ``mm_token_plane``, one result per example, step size, normalisation, loss).
- :func:`selection` (chapter 3): which selections are locally optimal (``mm_selection``).
- :func:`joint_explorer` (chapter 4): the joint (v, p) paths of E3 (``mm_e3_joint``).

Chapters show them as ``al.explorers.<name>(...)``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from matplotlib.quiver import Quiver

from attnlib import plots
from attnlib.examples import three_token_example
from attnlib.experiments import run
from attnlib.experiments.max_margin_measures import SELECTION_POSITIONS, TOKEN_EXAMPLES, ray_losses
from attnlib.explorers.framework import Control, Explorer, show_progress, with_static
from attnlib.plots.plane import redraw_arrowheads
from attnlib.tokens import scores

_C = plots.PALETTE  # the book's colour roles (attnlib.plots.style)

__all__ = ["token_plane", "token_plane_data", "approached_ray", "selection", "softmax_explorer",
           "joint_explorer", "TOKEN_EXAMPLES", "SELECTION_POSITIONS"]


# -- token plane (chapters 1-3) ---------------------------------------------------------------
_TP_ITER = (0, 5, 10, 15, 20, 30, 40, 50, 60, 80, 100, 125, 150, 175, 200, 300, 500, 1000)
_TP_RECORD = 5
#: What the website offers of each control of :func:`token_plane` (the chapters' prose names
#: step size, normalisation, loss and, in chapter 3, the run): 48 settings per chapter
TP_STATIC = {"iterations": (10, 50, 200, 1000), "lr": (0.1, 1.0), "normalized": (True, False),
             "loss": ("logistic", "exp", "correlation")}


def approached_ray(cos) -> np.ndarray:
    r"""The ray each run approaches: :math:`\arg\max_j \cos(p_b(K), p^{mm}(\alpha_j))`.

    ``cos`` (k rays, runs, S recorded steps) -> (runs,) index of the ray closest in angle to
    the run's last recorded point.
    """
    return np.asarray(cos)[:, :, -1].argmax(0)


@functools.lru_cache(maxsize=32)
def token_plane_data(example: str = "e1-global", lr: float = 0.1, normalized: bool = True,
                     loss: str = "logistic") -> dict:
    """What :func:`token_plane` draws: the arrays of experiment ``mm_token_plane`` (cached),
    the ray labels, and ``target``, the ray each run approaches (:func:`approached_ray`)."""
    res = run("mm_token_plane", example=example, lr=float(lr), normalized=bool(normalized),
              loss=loss, steps=_TP_ITER[-1], record_every=_TP_RECORD, progress=show_progress())
    a = res.arrays
    opt = np.asarray(a["optimal"]).astype(int)
    labels, short = [], []
    for alpha in np.asarray(a["alphas"]).astype(int):
        kind = "global" if (alpha == opt).all() else "local"
        sel_txt = ",".join(str(t + 1) for t in alpha)
        short.append(f"pᵐᵐ(α={sel_txt})")  # unicode: mathtext costs 50 ms a label
        labels.append(f"{short[-1]}, {kind}")
    f = lambda k: np.asarray(a[k], dtype=float)  # noqa: E731
    return dict(X=f("X"), gamma=f("gamma"), P=f("P"), steps=f("steps"), prob=f("prob"),
                dirs=f("dirs"), labels=labels, short=short,
                support=np.asarray(a["support"]).astype(bool), cos=f("cos"),
                target=approached_ray(a["cos"]), inits=f("inits"),
                info=TOKEN_EXAMPLES[example][1])


def token_plane_note(example, init, iterations, lr, normalized, loss) -> str:
    """The line under :func:`token_plane`'s figure: this setting's numbers, read from the data."""
    d = token_plane_data(example, float(lr), bool(normalized), loss)
    k = int(iterations) // _TP_RECORD  # the recorded point at `iterations`
    runs = list(range(d["P"].shape[0])) if init == "all" else [int(init) - 1]
    gap = np.array([1.0 - d["cos"][d["target"][b], b, k] for b in runs])
    prob = d["prob"][runs, k]
    ends = ", ".join(f"run {b + 1} → {d['short'][d['target'][b]]}" for b in runs) \
        if len(runs) <= 2 or len(set(d["target"][runs])) > 1 else \
        f"every run → {d['short'][d['target'][runs[0]]]}"
    return (f"After {int(iterations)} iterations: {ends}; 1 − cos to that ray "
            f"{gap.min():.1e} … {gap.max():.1e}; largest softmax probability "
            f"{prob.min():.3f} … {prob.max():.3f}.")


def _draw_token_plane(fig, example, init, iterations, lr, normalized, loss):
    d = token_plane_data(example, float(lr), bool(normalized), loss)
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

    # in-place redraw for another iteration, step size, normalisation or loss of the same
    # example and run, when every run approaches the same ray (same curves and legend):
    # the paths, arrowheads, view, curves and x limits move; the same pixels as a new draw
    B = d["P"].shape[0]
    paths, starts = ax0.lines[0:2 * B:2], ax0.lines[1:2 * B:2]  # drawn first, in run order
    quiver = [c for c in ax0.collections if isinstance(c, Quiver)]
    quiver = quiver[0] if quiver else None
    path_colors = [line.get_color() for line in paths]
    corr_lines, prob_lines = list(ax1.lines), list(ax2.lines)
    targets = [d["target"][b] for b in runs]
    order = [b for j in range(len(d["short"])) for b in runs if d["target"][b] == j]

    def update(**v):
        nonlocal quiver
        if v["example"] != example or v["init"] != init:
            return False
        e = token_plane_data(v["example"], float(v["lr"]), bool(v["normalized"]), v["loss"])
        if [e["target"][b] for b in runs] != targets or not all(
                np.array_equal(e[key], d[key]) for key in ("X", "gamma", "dirs", "support")):
            return False
        k = int(v["iterations"]) // _TP_RECORD + 1
        P = e["P"][:, :k]
        for b in range(B):
            paths[b].set_data(P[b, :, 0], P[b, :, 1])
            starts[b].set_data([P[b, 0, 0]], [P[b, 0, 1]])
        quiver = redraw_arrowheads(ax0, quiver, starts[-1], P, path_colors)
        plots.square_view(ax0, np.concatenate([P.reshape(-1, 2), e["X"].reshape(-1, 2)]))
        steps = e["steps"][:k]
        for line, b in zip(corr_lines, order):
            line.set_data(steps, 1.0 - e["cos"][e["target"][b], b, :k])
        for line, b in zip(prob_lines, runs):
            line.set_data(steps, e["prob"][b, :k])
        for ax in (ax1, ax2):
            ax.set_xlim(0, max(200, int(v["iterations"])))
        return True

    return update


def token_plane(example: str = "e1-global", *, init="all", iterations: int = 200,
                lr: float = 0.1, normalized: bool = True, loss: str = "logistic",
                static: dict | None = None, mode: str | None = None):
    r"""Explorer: gradient descent on the prompt token p, in the plane of the keys.

    Shows the runs of experiment ``mm_token_plane``: :math:`p` of the prompt model
    :math:`f(X) = v^\top X^\top \mathrm{softmax}(XWp)` trained from six initialisations (one
    batched :func:`attnlib.train` call); left, the tokens coloured by their score
    :math:`\gamma_{t}`, the paths of :math:`p(k)`, the rays of the p-SVM solutions
    :math:`p^{mm}(\alpha)` of every locally optimal selection and the support tokens of the
    first one; middle, :math:`1-\cos(p(k), p^{mm}(\alpha))` of each run against the ray it
    approaches; right, the largest softmax probability. See chapters 1-3.

    Parameters
    ----------
    example : {"e1-global", "e1-local", "e2"}
        The paper's examples (``TOKEN_EXAMPLES``).
    init : "all" or int 1..6
        Highlight one of the six runs (curves then show that run).
    iterations : int
        Iterations shown (the static slider: 0 ... 200).
    lr, normalized, loss
        Step size, normalised GD or not, loss (``"logistic"``, ``"exp"``, ``"correlation"``).
    static : dict, optional
        Values rendered on the static site per control, e.g. ``{"init": ("all", 5)}`` (the
        site precomputes every combination; default ``TP_STATIC``: iterations, step size,
        normalisation and loss, the example and the run fixed at theirs).
    mode : {"live", "static", "both"}, optional
        Default ``$ATTNLIB_EXPLORER`` or live.

    Returns
    -------
    LiveExplorer or StaticExplorer
    """
    controls = [
        Control("example", tuple(TOKEN_EXAMPLES), default=example),
        Control("init", ("all", 1, 2, 3, 4, 5, 6), default=init, label="run"),
        Control("iterations", _TP_ITER, default=iterations),
        Control("lr", (0.01, 0.03, 0.1, 0.3, 1.0), default=lr, label="step size"),
        Control("normalized", (True, False), default=normalized),
        Control("loss", ("logistic", "exp", "correlation"), default=loss),
    ]
    ex = Explorer(_draw_token_plane, with_static(controls, {**TP_STATIC, **(static or {})}),
                  name="token-plane", slider="iterations", figsize=(11.5, 3.6),
                  margins=dict(left=0.05, right=0.98, wspace=0.28), note=token_plane_note,
                  caption="Gradient descent on the prompt p from six starts. Panels: the "
                          "tokens, the paths of p and the max-margin rays; 1 − cos of each run "
                          "to the ray it ends closest to; the largest softmax probability. The "
                          "line under the figure reads this setting.")
    return ex.show(mode)


# -- selection (chapter 3) --------------------------------------------------------------------
_SEL_SCORES = (0.0, 0.3, 0.6, 0.9, 0.95, 1.0, 1.2)


@functools.lru_cache(maxsize=64)
def _selection_data(position: str, score: float) -> dict:
    """Rows of the selection table from experiment ``mm_selection`` (cached)."""
    a = run("mm_selection", position=position, score=float(score)).arrays
    rows = []
    for u in range(len(a["alpha"])):
        feas = bool(a["feasible"][u])
        rows.append(dict(alpha=int(a["alpha"][u]), feasible=feas,
                         local=bool(a["locally_optimal"][u]),
                         globally=bool(a["globally_optimal"][u]),
                         p=np.asarray(a["p_mm"][u], dtype=float) if feas else None,
                         support=np.asarray(a["support"][u]).astype(bool) if feas else None))
    return dict(X=np.asarray(a["X"], dtype=float), gamma=np.asarray(a["gamma"], dtype=float),
                rows=rows)


def _draw_selection(fig, position, score, alpha):
    d = _selection_data(position, float(score))
    ax0, ax1 = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=(1.0, 1.2)))
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
        cells.append([f"{r['alpha'] + 1}", "yes" if r["feasible"] else "no",
                      f"{np.linalg.norm(r['p']):.3f}" if r["feasible"] else "—", sup,
                      "yes" if r["local"] else "no", "yes" if r["globally"] else "no"])
    table = ax1.table(cellText=cells, colLabels=["α", "feasible", "‖pᵐᵐ‖",
                                                 "support", "loc. opt.", "global"],
                      loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(10)
    table.scale(1.0, 2.0)
    for j in range(6):
        table[int(alpha), j].set_facecolor("#fde9e7")
    plots.title(ax1, "locally optimal: every support token\nscores below the selected x_α",
                fontsize=10)


def selection(position: str = "(0, 0)", *, score: float = 0.0, alpha: int = 1,
              static: dict | None = None, mode: str | None = None):
    r"""Explorer: which token selections are locally optimal?

    One input with three tokens: :math:`x_1 = (-0.1, 1)` (score 1) and :math:`x_2 = (1, 0)`
    (score 0.9) as in the paper's example, and :math:`x_3` at a position and with a score the
    reader picks (experiment ``mm_selection``). For every selection :math:`\alpha` the p-SVM
    is solved; left, the tokens, the rays :math:`p^{mm}(\alpha)` (grey: feasible but not
    locally optimal) and, for the chosen :math:`\alpha`, its selected and support tokens;
    right, the table: feasible, :math:`\|p^{mm}\|`, support tokens :math:`\mathcal T(\alpha)`,
    locally optimal, global. With :math:`x_3 = (0,0)`: score 0 makes :math:`\alpha = 2`
    locally optimal, score 0.9 does not (a tie with a support token). See chapter 3.

    Parameters
    ----------
    position : str
        Key of ``SELECTION_POSITIONS`` (a panel on the static site, see ``static``).
    score : float
        Score :math:`\gamma_3` of token 3 (the static slider).
    alpha : {1, 2, 3}
        The selection whose support tokens are shown.
    static, mode
        As in :func:`token_plane`; default: every position and score (the website's
        controls), the selection fixed at ``alpha``.
    """
    controls = [
        Control("position", tuple(SELECTION_POSITIONS), default=position, label="x3 at"),
        Control("score", _SEL_SCORES, default=score, label="score of x3"),
        Control("alpha", (1, 2, 3), default=alpha, label="selection α"),
    ]
    static = {"position": tuple(SELECTION_POSITIONS), **(static or {})}
    ex = Explorer(_draw_selection, with_static(controls, static), name="selection",
                  slider="score", figsize=(9.0, 3.6),
                  margins=dict(left=0.07, right=0.99, wspace=0.05, bottom=0.14),
                  caption="Change the score of x3 and watch which selections stay locally "
                          "optimal.")
    return ex.show(mode)


# -- softmax (chapter 1) ----------------------------------------------------------------------
def _softmax_at(ex, angle, norm):
    """The prompt p (2,), the softmax s (T,) and the loss of p = norm·(cos angle, sin angle)."""
    u = torch.tensor([[math.cos(math.radians(angle)), math.sin(math.radians(angle)), 0.0]],
                     dtype=torch.float64)
    risk, s = ray_losses(ex, u, [norm])
    return norm * u[0, :2].numpy(), s[0, 0, 0].numpy(), float(risk[0, 0])  # s: the one input


def _draw_softmax(fig, angle, norm):
    """Chapter 1 explorer: p = norm·(cos angle, sin angle) on the 3-token example."""
    ex = three_token_example("global", device="cpu")
    p, s, loss = _softmax_at(ex, angle, norm)
    gamma = scores(ex.data)[0].numpy()
    ax0, ax1 = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=(1.1, 1)))
    plots.token_scatter(ex.data.X[0, :, :2], gamma, ax=ax0, colorbar=False)
    arrow = ax0.annotate("", xy=p, xytext=(0, 0),
                         arrowprops=dict(arrowstyle="-|>", color=_C["target"], lw=1.8))
    label = ax0.text(*(p * 1.05), "p", color=_C["target"], fontsize=11)
    ax0.set_aspect("equal", adjustable="box")
    ax0.set_title("tokens (plane) and the prompt p", fontsize=10)
    bars = ax1.bar([f"$x_{t + 1}$\nγ={g:g}" for t, g in enumerate(gamma)], s,
                   color=[_C["target"], _C["other"], _C["third"]])
    ax1.set_ylim(0, 1.05)
    ax1.set_ylabel("attention probability")

    def show(p, s, loss, norm):
        """What moves with p: the arrow, its label, the view, the bars and the title."""
        arrow.xy = p
        label.set_position(p * 1.05)
        lim = max(1.3, 1.1 * norm)
        ax0.set_xlim(-lim, lim)
        ax0.set_ylim(-lim, lim)
        for bar, h in zip(bars, s):
            bar.set_height(h)
        f = float((s * gamma).sum())
        ax1.set_title(f"softmax s;  Y f = Σ s γ = {f:.3f},  loss = {loss:.3f}", fontsize=9)

    show(p, s, loss, norm)

    def update(angle2, norm2):  # another norm along the same angle: the same pixels
        if angle2 != angle:
            return False
        show(*_softmax_at(ex, angle2, norm2), norm2)
        return True

    return lambda angle, norm: update(angle, norm)


def softmax_explorer(mode=None):
    """Explorer of chapter 1: move the prompt p (angle and norm) and watch the softmax.

    The 3-token example with scores (1, 0.9, 0.9); the risk and the attention come from
    :func:`attnlib.experiments.max_margin.ray_losses` (no training). The static site offers
    six angles (0°, the direction of x2, to 270°, with the optimal 96°) and every norm,
    opening at 96° and norm 1. See chapter 1.
    """
    angles = tuple(range(0, 360, 15)) + (96,)
    controls = [Control("angle", tuple(sorted(angles)), default=96, label="angle of p (°)",
                        static=(0, 45, 96, 135, 180, 270), continuous=True),
                Control("norm", (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0), default=1.0,
                        label="‖p‖", continuous=True)]
    return Explorer(_draw_softmax, controls, name="softmax-concentrates", slider="norm",
                    figsize=(9.0, 3.6), caption="Move p: along the max-margin direction the "
                    "softmax piles onto the best token as ‖p‖ grows.").show(mode)


# -- joint (v, p) (chapter 4) -----------------------------------------------------------------
_JOINT_ITER = (0, 10, 20, 30, 40, 50, 75, 100, 150, 200, 300, 500, 1000)


def _draw_joint(fig, example, iterations, arrays):
    """Chapter 4 explorer: E3 paths of p and v up to ``iterations``, cosines beside."""
    a = arrays
    j = 0 if example == "tight" else 1
    k = int(np.searchsorted(a["steps"], iterations, side="right"))
    ax0, ax1 = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=(1.1, 1)))
    plots.token_scatter(a["X"][j], ax=ax0, colorbar=False, annotate=False)
    paths = []  # (path line, start point, quiver, colour, key) of p and of v
    if k > 1:
        for key, color, label in (("p_path", _C["target"], "p"), ("v_path", _C["other"], "v")):
            n_lines, n_coll = len(ax0.lines), len(ax0.collections)
            plots.trajectories(a[key][j, :k], ax=ax0, color=color, label=label)
            quiver = next((c for c in ax0.collections[n_coll:] if isinstance(c, Quiver)), None)
            paths.append([ax0.lines[n_lines], ax0.lines[n_lines + 1], quiver, color, key])
    dirs = [a["p_relax"][j], a["v_mm"][j], a["p_mm"][j]]
    plots.rays(dirs, ax=ax0, labels=[r"$p^{relax}$", r"$v^{mm}$", r"$p^{mm}$"],
               colors=[_C["target"], _C["other"], "0.6"], length=25)
    ax0.set_aspect("equal", adjustable="box")
    ax0.set_xlim(-3, 25)
    ax0.set_ylim(-5, 23)
    ax0.legend(fontsize=7, loc="upper right")
    ax0.set_title(f"{example}: paths of p (red) and v (blue)", fontsize=10)
    curves = {r"cos$(p, p^{relax})$": a["cos_p_relax"][j],
              r"cos$(p, p^{mm})$": a["cos_p_mm"][j], r"cos$(v, v^{mm})$": a["cos_v"][j]}
    plots.curves(a["steps"], curves, ax=ax1, one_minus=True, logy=True, mark=iterations,
                 ylabel="1 − cos", title="distance to the SVM directions",
                 colors=dict(zip(curves, (_C["target"], "0.6", _C["other"]))))  # as the rays
    ax1.set_ylim(1e-6, 2.5)
    mark = ax1.lines[-1]  # the current iteration's vertical line, drawn last

    def update(example2, iterations2):
        """Another iteration of the same example, with paths drawn before and after: the
        paths, their arrowheads and the mark move; the same pixels as a new draw."""
        k2 = int(np.searchsorted(a["steps"], iterations2, side="right"))
        inside = [a["steps"][0] <= float(t) <= a["steps"][-1] for t in (iterations, iterations2)]
        if example2 != example or k <= 1 or k2 <= 1 or not all(inside):
            return False  # (a mark outside the recorded steps widens the x axis)
        for path in paths:
            line, start, quiver, color, key = path
            P = a[key][j, :k2]
            line.set_data(P[:, 0], P[:, 1])
            path[2] = redraw_arrowheads(ax0, quiver, start, P[None], [color])
        mark.set_xdata([float(iterations2)] * 2)
        return True

    return lambda example, iterations: update(example, iterations)


def joint_explorer(result=None, mode=None):
    """Explorer of chapter 4: the joint (v, p) paths of E3, tight or non-tight, over time.

    Draws from the arrays of ``mm_e3_joint`` (``result``, or the cached run at its defaults
    when None); the static site's slider is the iteration. See chapter 4.
    """
    res = run("mm_e3_joint") if result is None else result
    draw = functools.partial(_draw_joint, arrays=res.arrays)
    controls = [Control("example", ("tight", "non-tight"), default="non-tight",
                        static=("tight", "non-tight")),
                Control("iterations", _JOINT_ITER, default=200, continuous=True,
                        static=(0, 20, 50, 100, 200, 500, 1000))]
    a = res.arrays

    def note(example, iterations):
        j = 0 if example == "tight" else 1
        k = int(np.searchsorted(a["steps"], iterations, side="right")) - 1
        c = {key: 1.0 - float(a[key][j][k]) for key in ("cos_v", "cos_p_relax", "cos_p_mm")}
        return (f"{example}, iteration {int(a['steps'][k])}: 1 − cos(v, vᵐᵐ) = "
                f"{c['cos_v']:.1e}, 1 − cos(p, pʳᵉˡᵃˣ) = {c['cos_p_relax']:.1e}, "
                f"1 − cos(p, pᵐᵐ) = {c['cos_p_mm']:.1e}.")

    return Explorer(draw, controls, name="joint-head", slider="iterations", figsize=(9.5, 3.8),
                    note=note, caption="Joint training of the head v and the prompt p: "
                    "v heads for vᵐᵐ; p heads for pʳᵉˡᵃˣ, which equals pᵐᵐ only in the "
                    "tight example.").show(mode)
