r"""The explorer of *Optimizing Attention with Mirror Descent* (arXiv 2410.14581), chapter 9.

:func:`mirror_descent`: slide the exponent p of ℓp mirror descent,
:math:`W_{k+1} = \nabla\psi^{-1}(\nabla\psi(W_k) - \eta\nabla\mathcal L(W_k))` with
:math:`\nabla\psi(W) = \mathrm{sign}(W)|W|^{p-1}`, and watch the iterates follow the
ℓp-AttSVM (or stall short of it once the gradient falls below the step's ε:
:func:`mirror_note` says which, from the data). It reads
the experiment ``md_path`` (:func:`attnlib.experiments.run`, cached) and
only draws. Chapters show it as ``al.explorers.mirror_descent(...)``.
"""

from __future__ import annotations

import functools

import numpy as np
from matplotlib.quiver import Quiver

from attnlib import plots
from attnlib.experiments import run
from attnlib.explorers.framework import Control, Explorer, show_progress, with_static
from attnlib.plots.plane import redraw_arrowheads

_C = plots.PALETTE  # the book's colour roles (attnlib.plots.style)

__all__ = ["mirror_descent", "mirror_data", "mirror_note", "MD_LP", "MD_LP_STATIC",
           "MD_ITERATIONS", "MD_ITERATIONS_STATIC", "MD_CAPTION", "MD_CLOSE", "MD_STALL",
           "MD_EPS", "MD_EPS_NAMES"]

#: the ε of the normalised step: the official code's 2⁻⁵² (the default), or 0 (exact steps)
MD_EPS = (2.0 ** -52, 0.0)
#: the explorer's ε control: its values as the reader reads them
MD_EPS_NAMES = {"2⁻⁵² (official)": 2.0 ** -52, "0": 0.0}


def _eps(eps) -> float:
    """ε as a float, from a float or from the name the explorer's control shows."""
    return float(MD_EPS_NAMES.get(eps, eps))


def _eps_name(eps) -> str:
    e = _eps(eps)
    return next(k for k, v in MD_EPS_NAMES.items() if v == e) if e in MD_EPS else f"{e:g}"

MD_LP = tuple(round(1.1 + 0.1 * j, 2) for j in range(20))  # 1.1 ... 3.0
#: the exponents on the website (the chapter's 1.75 among them; the page opens on it)
MD_LP_STATIC = (1.1, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0)
#: What the explorer shows at every setting (what depends on it is in ``mirror_note``).
MD_CAPTION = ("Move the exponent lp, the number of steps and the step's ε (the official value "
              "or zero). Panels: the iterates W(k) on the "
              "two largest entries of the ℓp-AttSVM, with the ℓp- and ℓ2-AttSVM rays; how "
              "sparse the iterate and the ℓp-AttSVM are; the divergence of the iterates' "
              "direction from both SVMs. The line under the figure gives this setting's "
              "numbers.")
MD_ITERATIONS = (0, 50, 100, 200, 300, 500, 750, 1000, 1500)
MD_ITERATIONS_STATIC = (100, 500, 1500)
#: ``mirror_note``: a divergence below MD_CLOSE reads "within MD_CLOSE of the ℓp-AttSVM"; a
#: drop by less than MD_STALL over the second half of the steps reads "stalled"
MD_CLOSE = 0.02
MD_STALL = 0.3
_RECORD = 10  # the iterate is recorded every _RECORD steps


@functools.lru_cache(maxsize=48)
def mirror_data(lp: float, seed: int, normalized: bool, eps: float = 0.0) -> dict:
    """The arrays behind one setting of :func:`mirror_descent`: the experiment ``md_path``.

    Returns ``H`` (S, d, d) the iterates, ``steps`` (S,), ``svm_lp`` and ``svm_2`` (d, d),
    ``entries`` [(row, column), (row, column)] of the ℓp-SVM's two largest entries, ``D_lp``
    and ``D_2`` (S,) the directional Bregman divergences to both SVMs and ``alpha`` (n,).
    """
    res = run("md_path", lp=float(lp), seed=int(seed), normalized=bool(normalized),
              steps=MD_ITERATIONS[-1], record_every=_RECORD, eps=float(eps),
              progress=show_progress())
    a = res.arrays
    return dict(H=a["W"], svm_lp=a["svm_lp"], svm_2=a["svm_2"], steps=a["steps"],
                entries=[(int(r), int(c)) for r, c in a["entries"]], D_lp=a["D_lp"],
                D_2=a["D_2"], alpha=a["alpha"].astype(int), grad=a["grad"])


def _num(x: float) -> str:
    """A divergence as the note prints it: three decimals, or two digits below 1e-3."""
    return f"{x:.3f}" if abs(x) >= 1e-3 else f"{x:.1e}"


def mirror_note(lp, iterations, seed=1, normalized=True, eps=0.0) -> str:
    """The line under :func:`mirror_descent`'s figure, from the data: the directional Bregman
    divergences to both SVMs at this setting, and what the direction does. It has reached
    the ℓp-AttSVM when its divergence is below ``MD_CLOSE``; otherwise, from 200 steps on, it
    has stalled when the divergence fell by less than ``MD_STALL`` over the second half of
    the steps, else it is still converging. A stall with ε > 0 after the gradient fell below ε
    is put down to ε (the steps shrink in proportion), with the advice to set it to 0."""
    d = mirror_data(float(lp), int(seed), bool(normalized), _eps(eps))
    k = int(iterations) // _RECORD
    dl, d2 = float(d["D_lp"][k]), float(d["D_2"][k])
    name = f"ℓ{float(lp):g}-AttSVM"
    text = (f"p = {float(lp):g}, after {int(iterations)} steps: divergence {_num(dl)} from "
            f"the {name}, {_num(d2)} from the ℓ2-AttSVM")
    if abs(float(lp) - 2.0) < 1e-9:
        text += " (at p = 2 they are the same SVM)"
    else:
        text += f" (closer to the {name if dl < d2 else 'ℓ2-AttSVM'})"
    if dl < MD_CLOSE:
        return text + f": within {MD_CLOSE:g} of the {name}."
    if int(iterations) >= 200:
        drop = 1.0 - dl / max(float(d["D_lp"][k // 2]), 1e-300)
        if drop < MD_STALL:
            how = "did not fall" if drop < 0.005 else f"fell by only {100 * drop:.0f}%"
            text += (f": stalled short of the {name}, the divergence {how} over the "
                     f"last {int(iterations) - k // 2 * _RECORD} steps")
            e = _eps(eps)
            below = np.flatnonzero(np.asarray(d["grad"][:k + 1]) < e) if e > 0 else []
            if len(below):
                return text + (f". The cause is the step's ε, not p: the gradient fell below "
                               f"ε = {_eps_name(eps).split(' ')[0]} at step "
                               f"{int(d['steps'][below[0]])}, and from then on each step is "
                               "shortened in proportion (set ε to 0).")
            return text + "."
        return text + ": still converging."
    return text + "."


def _draw_mirror(fig, lp, iterations, seed, normalized, eps=0.0):
    lp = float(lp)
    d = mirror_data(lp, int(seed), bool(normalized), _eps(eps))
    k = int(iterations) // _RECORD + 1
    ax0, ax1, ax2 = fig.subplots(1, 3)
    # (a) the iterates on the two largest entries of the lp-SVM solution, with the SVM rays
    (r0, c0), (r1, c1) = d["entries"]
    rows, cols = [r0, r1], [c0, c1]
    P = d["H"][:k][:, rows, cols]  # (k, 2)
    plots.trajectories(P, ax=ax0, color="0.3", arrow_every=max(1, k // 5), label="W(k)")
    path, start = ax0.lines[0], ax0.lines[1]  # drawn first: the path, then its start point
    quiver = next((c for c in ax0.collections if isinstance(c, Quiver)), None)
    rays = np.stack([d["svm_lp"][rows, cols], d["svm_2"][rows, cols]])
    full = d["H"][:, rows, cols]
    L = max(np.linalg.norm(full[-1]), 1.0)
    plots.rays(rays, ax=ax0, length=1.2 * L, colors=[_C["target"], _C["other"]],
               labels=[f"ℓ{lp:g}-AttSVM", "ℓ2-AttSVM"])
    unit = rays / np.maximum(np.linalg.norm(rays, axis=1, keepdims=True), 1e-300)
    plots.square_view(ax0, np.concatenate([full, np.zeros((1, 2)), unit * L]))
    plots.scaled_labels(ax0, f"W[{r0 + 1},{c0 + 1}]", f"W[{r1 + 1},{c1 + 1}]")
    ax0.legend(fontsize=7, loc="upper left")
    plots.title(ax0, "iterates on the SVM's two largest entries", fontsize=9)
    # (b) sparsity: |W_ij| / max |W| of the iterate and of the lp-SVM solution
    Wk = d["H"][k - 1]
    rel = {f"W({int(iterations)})": np.abs(Wk) / max(np.abs(Wk).max(), 1e-300),
           f"ℓ{lp:g}-AttSVM": np.abs(d["svm_lp"]) / np.abs(d["svm_lp"]).max()}
    plots.histogram(rel, ax=ax1, bins=20, range=(0.0, 1.0), xlabel=r"$|W_{jk}|\,/\max|W|$")
    bars = ax1.containers[0]  # the iterate's histogram (the first entry of ``rel``)
    ax1.set_ylim(0, 100)
    plots.title(ax1, "entries: sparse for lp → 1")
    # (c) the directional Bregman divergence to the lp-SVM and to the l2-SVM
    steps = d["steps"][:k]
    plots.curves(steps, {f"to ℓ{lp:g}-AttSVM": d["D_lp"][:k], "to ℓ2-AttSVM": d["D_2"][:k]},
                 ax=ax2, logy=True, ylabel="directional Bregman div.",
                 colors={f"to ℓ{lp:g}-AttSVM": _C["target"], "to ℓ2-AttSVM": _C["other"]},
                 title="divergence from each SVM direction", legend="lower left")
    ax2.set_xlim(0, MD_ITERATIONS[-1])
    ax2.set_ylim(1e-4, 2.5)
    curves = ax2.lines[:2]

    def update(lp2, iterations2, seed2, normalized2, eps2):
        """Another number of steps of the same run: the path and its arrowheads, the
        iterate's histogram and legend entry, the divergence curves (the view, the SVMs and
        everything else stay); the same pixels as a new draw."""
        nonlocal quiver
        if (float(lp2), int(seed2), bool(normalized2), _eps(eps2)) != (
                lp, int(seed), bool(normalized), _eps(eps)):
            return False
        k = int(iterations2) // _RECORD + 1
        P = d["H"][:k][:, rows, cols]
        path.set_data(P[:, 0], P[:, 1])
        quiver = redraw_arrowheads(ax0, quiver, start, P[None], ["0.3"],
                                         max(1, k // 5))
        Wk = d["H"][k - 1]
        counts, _ = np.histogram((np.abs(Wk) / max(np.abs(Wk).max(), 1e-300)).reshape(-1),
                                 bins=20, range=(0.0, 1.0))
        for bar, h in zip(bars, counts):
            bar.set_height(float(h))
        bars[0].set_label(f"W({int(iterations2)})")  # the bar the legend shows
        for text in ax1.get_legend().get_texts():
            if text.get_text().startswith("W("):
                text.set_text(f"W({int(iterations2)})")
        for line, key in zip(curves, ("D_lp", "D_2")):
            line.set_data(d["steps"][:k], d[key][:k])
        return True

    return lambda lp, iterations, seed, normalized, eps: update(lp, iterations, seed,
                                                               normalized, eps)


def mirror_descent(lp: float = 1.75, *, iterations: int = 1500, seed: int = 1,
                   normalized: bool = True, eps: float = 0.0, static: dict | None = None,
                   mode: str | None = None):
    r"""Explorer: ℓp mirror descent and the ℓp-AttSVM, for an exponent ``lp`` in [1.1, 3].

    Trains W by normalised ℓp mirror descent from :math:`W(0) = 0` on the paper's synthetic
    data (:func:`attnlib.examples.mirror_random_data`: n=6, T=8, d=10) and solves the ℓp- and the
    ℓ2-AttSVM of the final selection. Left, the iterates on the entries
    :math:`(W_{12}, W_{34})` with both SVM rays; middle, the histogram of
    :math:`|W_{ij}|/\max|W|` of the iterate and of the ℓp-SVM solution (sparse as
    :math:`p \to 1`, flat for :math:`p > 2`); right, the directional Bregman divergence
    :math:`1 - \langle \mathrm{sign}(\bar W_k)|\bar W_k|^{p-1}, \bar W^{mm}\rangle` (bars: unit
    ℓp norm) to the ℓp-SVM (the smaller one) and to the ℓ2-SVM. Close to :math:`p = 1` the
    normalised steps saturate the softmax within a few hundred steps; the gradient then falls
    below the step's :math:`\varepsilon = 2^{-52}` (the official code's value), the steps
    become tiny and the direction freezes (seed 1, p = 1.1, 1500 steps: divergence ≈ 0.12,
    frozen since about step 300; with :math:`\varepsilon = 0`, ≈ 2e-4): the stall comes from
    :math:`\varepsilon`, not from the exponent. The explorer therefore opens at
    :math:`\varepsilon = 0` (every step of length η, attnlib's exact gradient); the official
    value is the other setting of its ε control. See chapter 9.

    The training and the SVMs are the experiment ``md_path``
    (:mod:`attnlib.experiments.mirror_path`), read through :func:`attnlib.experiments.run`
    (cached on disk): every setting is computed once, and a slider move only redraws.

    Parameters
    ----------
    lp : float
        Exponent in {1.1, 1.2, ..., 3.0} (the website: ``MD_LP_STATIC``, opening at ``lp``).
    iterations : int
        Iterations shown (the website: ``MD_ITERATIONS_STATIC``).
    seed : {1, 2, 3}
        The data set.
    normalized : bool
        Normalised steps (the paper's synthetic runs) or plain ones.
    eps : {2**-52, 0.0} or the control's names ``MD_EPS_NAMES``
        The ε added to the gradient's dual norm in the normalised step: 0 (default), with
        which the direction keeps turning near p = 1, or the official code's 2⁻⁵² (both on
        the website).
    static : dict, optional
        ``{control: values}``: the settings rendered on the static site.
    mode : {"live", "static", "both"}, optional
        As in :func:`attnlib.explorers.explorer_mode`.
    """
    controls = [
        Control("lp", tuple(sorted(set(MD_LP) | set(MD_LP_STATIC))), default=lp,
                static=MD_LP_STATIC, label="exponent lp", continuous=False),
        Control("iterations", MD_ITERATIONS, default=iterations),
        Control("seed", (1, 2, 3), default=seed, label="data seed"),
        Control("normalized", (True, False), default=normalized),
        Control("eps", tuple(MD_EPS_NAMES), default=_eps_name(eps), static=tuple(MD_EPS_NAMES),
                label="step ε"),
    ]
    static = {"iterations": MD_ITERATIONS_STATIC, **(static or {})}
    ex = Explorer(_draw_mirror, with_static(controls, static), name="mirror-descent",
                  slider="lp", fast="iterations", figsize=(11.5, 3.6),
                  margins=dict(left=0.05, right=0.98),
                  caption=MD_CAPTION, note=mirror_note)
    return ex.show(mode)
