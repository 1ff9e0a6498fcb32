r"""Figures and tables of *Optimizing Attention with Mirror Descent* (arXiv 2410.14581).

Each function takes a :class:`attnlib.experiments.Result` of one experiment of
:mod:`attnlib.experiments.mirror` and returns a matplotlib figure (``plot_*``) or a Markdown
table (``*_table``); nothing here trains or solves. The experiments name these functions as
their ``plot=``, so ``res.figure()`` draws them. The divergence drawn throughout is the
directional Bregman divergence of the ℓp potential :math:`\psi(W) = \frac1p\|W\|_p^p`,

.. math::

    D_{dir}(A, B) = 1 - \langle \nabla\psi(\bar B), \bar A \rangle, \qquad
    \bar A = A / \|A\|_p .

See chapters 9 (synthetic experiments) and 10 (real data).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlib import plots as _plots
from attnlib.plots.style import readable

__all__ = ["plot_regimes", "PAPER_IMDB", "plot_convergence", "plot_bias", "plot_bias_weights",
           "plot_bias_matrix", "plot_unnormalized", "plot_joint", "plot_digits", "plot_attention",
           "digits_table", "imdb_table", "plot_lp_path", "targets_table", "step_histogram",
           "FONT_SIZE"]

#: the smallest font of the book's figures of chapters 9-10 (points; every figure is at most
#: 9 inches wide, so the text stays legible when the page scales it to a phone's width)
FONT_SIZE = 11


_STYLES = ("-", "--", ":", "-.")


def step_histogram(ax, values: dict, *, xlabel: str, colors: dict | None = None, bins: int = 40,
                   range=(0.0, 1.0), logy: bool = True, legend: str = "upper right"):
    """Histograms drawn as outlines, one colour and one line style per entry of ``values``
    (overlaid filled bars of several colours blend into one another)."""
    for j, (label, v) in enumerate(values.items()):
        ax.hist(np.asarray(v, dtype=float).reshape(-1), bins=bins, range=range,
                histtype="step", lw=2.0, ls=_STYLES[j % len(_STYLES)], label=label,
                color=(colors or {}).get(label, _plots.COLORS[j % len(_plots.COLORS)]))
    if logy:
        _plots.log_y(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("number of entries")
    ax.legend(fontsize=FONT_SIZE, loc=legend)
    return ax



#: display name of each optimizer of the digits comparison (``lp`` filled in)
OPTIMIZER_NAMES = {"md": "ℓ{lp:g}-MD", "gd": "GD", "adam": "Adam"}


def plot_convergence(res):
    """Directional Bregman divergence to each ℓq-SVM along the ℓp-MD iterates (one panel per p).

    ``res`` is a result of ``md_convergence``. See chapter 9.
    """
    a = res.arrays
    lps = a["lps"]
    fig, axes = _plots.new_figure(len(lps), 1, figsize=(7.0, 2.9 * len(lps)))
    for j, (ax, lp) in enumerate(zip(np.atleast_1d(axes), lps)):
        steps = a[f"steps_{j}"]
        curves = {f"ℓ{q:g}-AttSVM": a[f"ddir_{j}"][i] for i, q in enumerate(lps)}
        _plots.curves(steps, curves, ax=ax, ylabel=r"$D_{dir}$", logy=True,
                      title=f"ℓ{lp:g}-MD iterates", legend="upper right",
                      xlabel="step k" if j == len(lps) - 1 else "")
    return readable(fig)


def plot_bias(res):
    """Left: mean D_dir of each ℓp run to each ℓq-SVM. Right: ``|W_jk|``/max|W| histograms.

    ``res`` is a result of ``md_bias``. See chapter 9.
    """
    a = res.arrays
    lps = a["lps"]
    fig, (ax1, ax2) = _plots.new_figure(1, 2, figsize=(9.0, 3.6))
    _plots.matrix_image(np.log10(a["ddir"]), ax=ax1, title=r"mean $D_{dir}$(ℓq-SVM, ℓp-MD)",
                        signed=False, values=a["ddir"], fmt="{:.1e}",
                        label=r"$\log_{10} D_{dir}$ (darker: closer)")
    ax1.set_xticks(range(len(lps)), [f"q={q:g}" for q in lps])
    ax1.set_yticks(range(len(lps)), [f"p={p:g}" for p in lps])
    ax1.set_xlabel("ℓq-AttSVM")
    ax1.set_ylabel("ℓp-MD run")
    _plots.histogram({f"p = {p:g}": a["rel_abs"][j] for j, p in enumerate(lps)}, ax=ax2,
                     bins=40, logy=True, xlabel=r"$|W_{jk}|\,/\max|W|$ (final iterates)",
                     range=(0.0, 1.0))
    return fig


def plot_bias_weights(res):
    """The entries ``|W_jk|``/max|W| of the final ℓp-MD iterates, one histogram per p.

    ``res`` is a result of ``md_bias``. See chapter 9 (its opening figure).
    """
    a = res.arrays
    fig, ax = _plots.new_figure(1, 1, figsize=(6.5, 3.8))
    step_histogram(ax, {f"p = {p:g}": a["rel_abs"][j] for j, p in enumerate(a["lps"])},
                   xlabel=r"$|W_{jk}|\,/\max|W|$ (final iterates)")
    return readable(fig)


def plot_bias_matrix(res):
    """Mean directional Bregman divergence of each ℓp-MD run (rows) to each ℓq-AttSVM (columns).

    ``res`` is a result of ``md_bias``. See chapter 9.
    """
    a = res.arrays
    lps = a["lps"]
    fig, ax = _plots.new_figure(1, 1, figsize=(5.6, 4.2))
    _plots.matrix_image(np.log10(a["ddir"]), ax=ax, title="",
                        signed=False, values=a["ddir"], fmt="{:.0e}",
                        label=r"$\log_{10} D_{dir}$ (darker: closer)")
    ax.set_xticks(range(len(lps)), [f"q = {q:g}" for q in lps])
    ax.set_yticks(range(len(lps)), [f"p = {p:g}" for p in lps])
    ax.set_xlabel(r"$\ell_q$-AttSVM")
    ax.set_ylabel(r"$\ell_p$ mirror-descent run")
    return readable(fig)


def plot_unnormalized(res):
    """Directional divergence to the matched SVM and ‖W‖_p for constant-step ℓp-MD.

    ``res`` is a result of ``md_unnormalized``. See chapter 9.
    """
    a = res.arrays
    fig, (ax1, ax2) = _plots.new_figure(2, 1, figsize=(7.0, 6.4))
    lab = [f"p = {p:g}" for p in a["lps"]]
    _plots.curves(a["steps"], dict(zip(lab, a["ddir"])), ax=ax1, logy=True, logx=True,
                  ylabel=r"$D_{dir}$ to the $\ell_p$-AttSVM", xlabel="",
                  title="constant step η = 10", legend="lower left")
    _plots.norm_curves(a["steps"], dict(zip(lab, a["norm"])), ax=ax2, logx=True,
                       title="", ylabel=r"$\|W(k)\|_p$")
    ax2.set_xlabel("step k")
    return readable(fig)


def plot_joint(res):
    """Joint (W, v) toy: W[0,0] vs W[0,1] and v[0] vs v[1] with the SVM rays, one colour per p.

    ``res`` is a result of ``md_joint``. See chapter 9.
    """
    a = res.arrays
    fig, (ax1, ax2) = _plots.new_figure(1, 2, figsize=(9.0, 4.4))
    for j, lp in enumerate(a["lps"]):
        c = _plots.COLORS[j % len(_plots.COLORS)]
        for ax, path, ray in ((ax1, a[f"W_path_{j}"][:, 0, :], a[f"W_mm_{j}"][0]),
                              (ax2, a[f"v_path_{j}"], a[f"v_mm_{j}"])):
            path = np.asarray(path)
            r = np.asarray(ray) / np.linalg.norm(ray) * np.linalg.norm(path[-1])
            ax.plot(path[:, 0], path[:, 1], color=c, lw=1.4, label=f"p = {lp:g}")
            ax.plot([0, r[0]], [0, r[1]], "--", color=c, lw=1.0)
    ax1.set_title("attention weights $W$", fontsize=FONT_SIZE)
    ax2.set_title("head $v$", fontsize=FONT_SIZE)
    ax1.set_xlabel(r"$W_{11}(k)$")
    ax1.set_ylabel(r"$W_{12}(k)$")
    ax2.set_xlabel(r"$v_1(k)$")
    ax2.set_ylabel(r"$v_2(k)$")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=FONT_SIZE, loc="best")
    return readable(fig)


def plot_digits(res):
    """Digits: ``|W_jk|``/max|W| histograms and validation accuracy curves per optimizer.

    ``res`` is a result of ``md_digits``. See chapter 10.
    """
    a = res.arrays
    fig, (ax1, ax2) = _plots.new_figure(2, 1, figsize=(7.0, 6.6))
    names = {k: v.format(lp=res.params["lp"]) for k, v in OPTIMIZER_NAMES.items()}
    # each optimizer in the colour it has in the text experiment (TEXT_NAMES' order)
    col = {names[k]: _plots.color_of(j) for k, j in (("md", 0), ("gd", 1), ("adam", 3))}
    step_histogram(ax1, {names[k]: a[f"rel_abs_{k}"] for k in names}, colors=col,
                   xlabel=r"$|W_{jk}|\,/\max|W|$ (selected models)")
    _plots.curves(a["curve_step"], {names[k]: a[f"curve_val_acc_{k}"].T for k in names}, ax=ax2,
                  ylabel="validation accuracy", xlabel="step", legend="lower right", colors=col)
    return readable(fig)


def plot_attention(res, images: int = 4):
    r"""Test digits and the attention :math:`\mathrm{softmax}(X W z)` of each optimizer's
    seed-0 model on its 16 patches.

    ``res`` is a result of ``md_digits``; ``images`` test digits are shown, one per row.
    See chapter 10.
    """
    from attnlib import realdata

    data = realdata.digits_tokens(split_seed=res.params["split_seed"])
    Xte, _, zte = data.part("test")
    X, z = Xte[:images].cpu(), zte[:images].cpu()  # drawn with the stored (numpy) weights
    keys = ("md", "gd", "adam")
    fig, axes = _plots.new_figure(images, 1 + len(keys), figsize=(2.0 * (1 + len(keys)),
                                                                  2.0 * images))
    axes = np.atleast_2d(axes)
    for i in range(images):
        pix = X[i, :, :4].reshape(4, 4, 2, 2).permute(0, 2, 1, 3).reshape(8, 8)
        axes[i, 0].imshow(pix.numpy(), cmap="gray_r")
        for c, k in enumerate(keys, start=1):
            W = torch.as_tensor(res.arrays[f"W_{k}"][:1], dtype=X.dtype)  # (1, d, d)
            s = torch.softmax(torch.einsum("td,de,e->t", X[i], W[0], z[i]), -1)
            axes[i, c].imshow(s.reshape(4, 4).numpy(), cmap="viridis", vmin=0, vmax=1)
            if i == 0:
                axes[i, c].set_title(OPTIMIZER_NAMES[k].format(lp=res.params["lp"]), fontsize=9)
    axes[0, 0].set_title("test image", fontsize=9)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    return fig


def digits_table(res) -> str:
    """The digits comparison of ``md_digits`` as Markdown: mean ± std over seeds (chapter 10)."""
    n = res.numbers
    S = res.params["seeds"]
    lines = ["| optimizer | lr (chosen on val.) | test acc. (%) | last-step test acc. (%) | "
             "near-zero W entries (%) | ‖W‖₁/‖W‖_F | attention entropy | top-1 attention |",
             "|---|---|---|---|---|---|---|---|"]

    def ms(key, scale=1.0, fmt=".1f"):
        return f"{scale * n[key]:{fmt}} ± {scale * n[key + '_std']:{fmt}}"

    for k in ("md", "gd", "adam"):
        name = OPTIMIZER_NAMES[k].format(lp=res.params["lp"])
        lines.append(f"| {name} | {n[k + '_lr']:g} | {ms(k + '_test_acc', 100)} | "
                     f"{ms(k + '_final_test_acc', 100)} | {ms(k + '_sparsity', 100)} | "
                     f"{ms(k + '_l1_over_fro', 1, '.2f')} | {ms(k + '_entropy', 1, '.2f')} | "
                     f"{ms(k + '_top1', 1, '.2f')} |")
    lines.append(f"\nMean ± standard deviation over {S} seeds (different initialisations).")
    return "\n".join(lines)


PAPER_IMDB = (
    # p, blocks = heads, max test acc (mean, std), last test acc (mean, std), runs
    (1.1, 3, 83.47, 0.09, 82.57, 0.19, 10), (1.1, 4, 83.36, 0.13, 82.93, 0.33, 10),
    (1.1, 6, 82.57, 0.15, 78.07, 9.87, 10), (2.0, 3, 81.66, 0.09, 80.61, 0.32, 10),
    (2.0, 4, 81.05, 0.17, 79.97, 0.46, 10), (2.0, 6, 81.03, 0.18, 80.11, 0.29, 10),
    (3.0, 3, 82.57, 0.10, 81.33, 0.23, 9), (3.0, 4, 82.40, 0.12, 80.91, 0.37, 10),
    (3.0, 6, 80.65, 0.13, 79.47, 0.32, 10),
)
"""The paper's IMDb test accuracies (%), from the official ``test_acc.ipynb`` outputs.

Unnormalised ℓp-MD on all parameters of 3-, 4- and 6-block transformers. Not reproduced here
(a GPU job); shown beside the book's digits table with its caveats: "max" is the best test
accuracy over epochs (selection on the test set), the 10 runs share one initialisation, and
the 6-block row comes from an earlier training configuration.
"""


def imdb_table() -> str:
    """The paper's IMDb table as Markdown (not asserted; see ``PAPER_IMDB``; chapter 10)."""
    lines = ["| optimizer | blocks = heads | max test acc. (%) | last test acc. (%) | runs |",
             "|---|---|---|---|---|"]
    for p, L, mx, smx, last, slast, runs in PAPER_IMDB:
        name = "GD (ℓ2)" if p == 2 else f"ℓ{p:g}-MD"
        lines.append(f"| {name} | {L} | {mx:.2f} ± {smx:.2f} | {last:.2f} ± {slast:.2f} | {runs} |")
    return "\n".join(lines)


def plot_lp_path(res):
    """The ℓp regularisation path: D_dir of W_R to the ℓp- and the ℓ2-AttSVM against R.

    ``res`` is a result of ``md_lp_path``; one colour per p, solid: to the ℓp-AttSVM, dashed:
    to the ℓ2-AttSVM (means over the data sets). See chapter 9.
    """
    a = res.arrays
    fig, ax = _plots.new_figure(1, 1, figsize=(5.6, 4.6))
    R = np.asarray(a["radii"])
    for j, lp in enumerate(a["lps"]):
        c = _plots.COLORS[j % len(_plots.COLORS)]
        ax.loglog(R, np.asarray(a[f"ddir_p_{j}"]).mean(0), "o-", color=c,
                  label=f"p = {lp:g}, to the ℓ{lp:g}-AttSVM")
        ax.loglog(R, np.asarray(a[f"ddir_2_{j}"]).mean(0), "s--", color=c,
                  label=f"p = {lp:g}, to the ℓ2-AttSVM")
    ax.set_xlabel(r"radius $R$ of the $\ell_p$ ball")
    ax.set_ylabel(r"$D_{dir}$(SVM, $W_R$)")
    ax.legend(fontsize=FONT_SIZE, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return readable(fig)


def targets_table(results, omit=()) -> str:
    """Markdown table of the targets of ``results`` (Results), as checked now: value, ✓/✗ and
    the kind of evidence (live / by construction), one row per target.

    ``omit`` lists ``(experiment, key)`` pairs a chapter does not check at its own scale (they
    are left out here; the reproduction page checks them at the paper's). See chapter 9.
    """
    def cell(t):
        return str(t).replace("|", "\\|")

    out = ["| Experiment | Target | Paper | Book | ✓/✗ | Evidence |",
           "|---|---|---|---|:-:|---|"]
    for res in results:
        for r in res.verdicts():
            if (r["experiment"], r["key"]) in omit:
                continue
            if r["ok"] is None:  # a conditional target these settings do not compute
                mark, book = "–", "not computed"
            else:
                mark, book = ("✓" if r["ok"] else "✗"), f"{r['book']:.4g}"
            out.append(f"| `{r['experiment']}` | {cell(r['what'])} | {cell(r['paper'])} | "
                       f"{book} | {mark} | {r['evidence']} |")
    return "\n".join(out)


#: the regimes of ``md_official_numerics`` as the figure names them
MD_REGIME_LABELS = {"exact_eps": r"exact gradient, $\varepsilon = 2^{-52}$",
                    "exact_0": r"exact gradient, $\varepsilon = 0$",
                    "auto_eps": r"autograd, $\varepsilon = 2^{-52}$ (official)",
                    "auto_0": r"autograd, $\varepsilon = 0$"}


def plot_regimes(res):
    r"""Normalised ℓp mirror descent under four numerical regimes: (a) :math:`D_{dir}` to
    the ℓp-AttSVM of each run's selection, (b) the gradient's Frobenius norm against the
    official ε (median over the data sets with the 10-90% band). ``res`` is a result of
    ``md_official_numerics``. See chapter 9.
    """
    a = res.arrays
    fig, (ax1, ax2) = _plots.new_figure(1, 2, figsize=(10.0, 4.2))
    colors = dict(zip(MD_REGIME_LABELS.values(), map(_plots.color_of, (1, 2, 4, 0))))
    lp = float(a["lp"])
    _plots.curves(a["steps"], {lab: a[f"{t}_ddir"] for t, lab in MD_REGIME_LABELS.items()},
                  ax=ax1, logy=True, colors=colors, legend="lower left",
                  ylabel=rf"$D_{{dir}}$ to the $\ell_{{{lp:g}}}$-AttSVM",
                  title="(a) direction")
    _plots.curves(a["steps"], {lab: a[f"{t}_grad"] for t, lab in MD_REGIME_LABELS.items()},
                  ax=ax2, logy=True, colors=colors, legend=None,
                  ylabel=r"$\|\nabla\mathcal{L}(W_k)\|_F$", title="(b) gradient")
    ax2.axhline(float(a["eps"]), color=_plots.color_of("ink"), ls=":", lw=1.2)
    ax2.annotate(r"$\varepsilon = 2^{-52}$", (float(a["steps"][-1]), float(a["eps"])),
                 xytext=(-4, 4), textcoords="offset points", ha="right", fontsize=9)
    return readable(fig)
