"""The explorers of chapters 6 and 7 that recompute: where gradient descent ends as the
dimension grows (:func:`global_share`, chapter 6) and the attention of the λ head
(:func:`lambda_head`, chapter 7), with the runs behind them (:func:`global_share_runs`,
:func:`lambda_paths`) and the opening figure of chapter 7 (:func:`plot_lambda_paths`).
The chapters show them as ``al.explorers.global_share(...)`` and
``al.explorers.lambda_head(...)``.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from .. import plots
from .._runtime import few_threads
from .._validate import to_numpy
from ..metrics import correlation
from .framework import Control, Explorer, with_static

_C = plots.PALETTE  # the book's colour roles (attnlib.plots.style)

__all__ = ["global_share", "lambda_head", "global_share_runs", "lambda_paths", "best_attention",
           "plot_lambda_paths"]


# -- over-parameterisation: where gradient descent ends, recomputed (chapter 6) ----------------
_GS_DS = (2, 3, 4, 5, 6, 8, 10, 12, 15, 20)
_GS_STEPS, _GS_LR = 500, 0.1
_FONT = 11  # the explorers' text, in points (readable on a phone)


def _gd_logits(K, g, Y, a, lr, steps):
    """Normalised GD on W for a batch, in the coordinates where a step is cheapest.

    W enters the logistic risk only through the logits :math:`a_{it} = x_{it}^\\top W z_i`, so
    a gradient step moves W along the matrices :math:`x_{it} z_i^\\top` and the logits by the
    kernel :math:`K = [(x_{it}^\\top x_{ju})(z_i^\\top z_j)]` times the loss derivatives.
    ``K`` (B, nT, nT), ``g`` the values :math:`v^\\top x_{it}` (B, n, T), ``Y`` (B, n),
    ``a`` the initial logits (B, n, T). Returns the final logits and the coefficients
    ``beta`` (B, nT) with :math:`W = W(0) + \\sum_{it}\\beta_{it} x_{it} z_i^\\top`."""
    B, n, T = a.shape
    beta = np.zeros((B, n * T))
    for _ in range(steps):
        s = np.exp(a - a.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        f = (s * g).sum(-1)  # (B, n)
        c = ((-Y / (1.0 + np.exp(Y * f)))[..., None] * s * (g - f[..., None])).reshape(B, -1)
        Kc = np.matmul(K, c[..., None])[..., 0] / n
        step = lr / (np.sqrt(np.maximum((c * Kc).sum(-1) / n, 0.0)) + 1e-300)
        a = a - (step[:, None] * Kc).reshape(B, n, T)
        beta -= step[:, None] * c / n
    return a, beta


@functools.lru_cache(maxsize=32)
def global_share_runs(n: int = 6, T: int = 8, runs: int = 16, steps: int = _GS_STEPS,
                      seed: int = 0) -> dict:
    """What :func:`global_share` draws: ``runs`` random instances (n, T, d) for every d of
    ``_GS_DS``, each trained by ``steps`` steps of normalised GD on W (step 0.1, the default
    random start), then classified as the chapter's sweep does: *global* when the final
    selection α is the optimal one, its Att-SVM feasible, α locally optimal and
    corr(W, W^mm_α) > 0.95; *local* when the same holds for another selection; else *neither*.

    All d are trained in one batched call (about 0.1 s), then one SVM solve per d. Returns
    ``ds`` and, per d, the shares ``global``, ``local``, ``other`` (P,) and the per-run
    ``corr_own`` (corr with the SVM of the run's own selection) and ``corr_opt`` (with the
    global W^mm; NaN where infeasible) and the class ``kind`` (0 global, 1 local, 2 neither).
    """
    from ..data import AttentionData, random_data
    from ..optimality import locally_optimal_from
    from ..svm import solve_each
    from ..tokens import optimal_tokens

    datas, K, g, Y, a0, W0 = [], [], [], [], [], []
    with few_threads():
        for j, d in enumerate(_GS_DS):
            data = random_data(n, T, d, trials=runs, seed=seed + 1000 * j, device="cpu")
            X, y, z, v = (t.numpy() for t in (data.X, data.Y, data.z, data.v))
            w0 = np.random.default_rng(seed + j).uniform(-d ** -0.5, d ** -0.5, (runs, d, d))
            Xf, zf = X.reshape(runs, n * T, d), np.repeat(z, T, axis=1)
            K.append((Xf @ Xf.transpose(0, 2, 1)) * (zf @ zf.transpose(0, 2, 1)))
            g.append(np.einsum("bntd,bd->bnt", X, v))
            Y.append(y)
            a0.append(np.einsum("bntd,bde,bne->bnt", X, w0, z))
            W0.append(w0)
            datas.append(data)
        a, beta = _gd_logits(np.concatenate(K), np.concatenate(g), np.concatenate(Y),
                             np.concatenate(a0), _GS_LR, int(steps))
        out = {k: [] for k in ("global", "local", "other", "corr_own", "corr_opt", "kind")}
        for j, data in enumerate(datas):
            sl = slice(j * runs, (j + 1) * runs)
            X, z = data.X.numpy(), data.z.numpy()
            d = X.shape[-1]
            W = torch.as_tensor(W0[j] + np.einsum("bi,bid,bie->bde", beta[sl],
                                                  X.reshape(runs, n * T, d),
                                                  np.repeat(z, T, axis=1)))
            alpha = torch.as_tensor(a[sl].argmax(-1))
            opt = optimal_tokens(data)
            is_opt = (alpha == opt).all(-1)
            own = solve_each(data, alpha, "fro")
            ok, Wmm = own.feasible.clone(), own.W.to(torch.float64)
            corr_own = correlation(W, Wmm.nan_to_num(0.0), dims=2).nan_to_num(0.0)
            local = ok.clone()
            if ok.any():
                sub = AttentionData(data.X[ok], data.Y[ok], data.z[ok], data.v[ok])
                local[ok] = locally_optimal_from(sub, Wmm[ok].to(sub.X), alpha[ok], tol=1e-4)
            conv = ok & local & (corr_own > 0.95)
            glob = solve_each(data, opt, "fro")
            corr_opt = torch.where(glob.feasible, correlation(
                W, glob.W.to(torch.float64).nan_to_num(0.0), dims=2), torch.nan)
            kind = torch.full((runs,), 2)
            kind[conv & ~is_opt] = 1
            kind[conv & is_opt] = 0
            for c, key in enumerate(("global", "local", "other")):
                out[key].append(float((kind == c).double().mean()))
            out["corr_own"].append(corr_own.numpy())
            out["corr_opt"].append(corr_opt.numpy())
            out["kind"].append(kind.numpy())
    return {"ds": np.array(_GS_DS), **{k: np.array(v) for k, v in out.items()}}


def global_share_note(n, T, d, runs=16, steps=_GS_STEPS, seed=0) -> str:
    """The line under :func:`global_share`'s figure, read from the runs."""
    r = global_share_runs(int(n), int(T), int(runs), int(steps), int(seed))
    j = list(_GS_DS).index(int(d))
    k = r["kind"][j]
    thr = max(int(T) - 1, int(n))
    side = "at or above" if int(d) >= thr else "below"
    return (f"d = {int(d)} ({side} max(T − 1, n) = {thr}): {int((k == 0).sum())} of {len(k)} "
            f"runs reach the global direction, {int((k == 1).sum())} a locally optimal one, "
            f"{int((k == 2).sum())} neither.")


_KIND = (("global $W^{mm}$", "target", "o"), ("locally optimal, not global", "other", "s"),
         ("neither", "support", "^"))


def _draw_global_share(fig, n, T, d, runs, steps, seed, chapter):
    r = global_share_runs(int(n), int(T), int(runs), int(steps), int(seed))
    ds, j = r["ds"], list(_GS_DS).index(int(d))
    ax0, ax1 = fig.subplots(1, 2)
    thr = max(int(T) - 1, int(n))
    ax0.axvspan(thr, ds[-1] + 1, color=_C["axis"], alpha=0.6, lw=0)
    rings = []
    for (_label, role, marker), key, ls in zip(_KIND, ("global", "local", "other"),
                                              ("-", "--", ":")):
        ax0.plot(ds, r[key], ls, marker=marker, ms=5, lw=2, color=_C[role])
        rings += ax0.plot([ds[j]], [r[key][j]], marker, ms=13, mfc="none", mec="k", mew=1.5)
    if chapter is not None and (int(n), int(T)) == chapter[0]:
        ax0.plot(chapter[1], chapter[2], color="k", lw=1,
                 label="global, chapter's sweep\n(50 runs, 2000 steps)")
        ax0.legend(fontsize=_FONT, loc="center right", framealpha=0.9)
    ax0.set_xlim(ds[0] - 0.5, ds[-1] + 0.5)
    ax0.set_ylim(-0.03, 1.03)
    ax0.set_xlabel("dimension d", fontsize=_FONT)
    ax0.set_ylabel("share of runs", fontsize=_FONT)
    ax0.set_title(f"n = {int(n)}, T = {int(T)}; shaded: $d \\geq \\max(T-1, n)$",
                  fontsize=_FONT)
    ax0.tick_params(labelsize=_FONT)
    points = [ax1.plot([], [], marker, ms=7, ls="none", color=_C[role], alpha=0.8)[0]
              for _label, role, marker in _KIND]
    ax1.axhline(0.95, color=_C["ink"], lw=0.8, ls=":")
    ax1.set_xlim(-1.05, 1.05)
    ax1.set_ylim(-1.05, 1.05)
    ax1.set_xlabel("corr with the global $W^{mm}$", fontsize=_FONT)
    ax1.set_ylabel("corr with $W^{mm}_\\alpha$ of its selection", fontsize=_FONT)
    ax1.tick_params(labelsize=_FONT)

    def show(j):
        """The runs at the j-th d: the rings on the left, the points, counts and title on
        the right (the rest of the figure does not depend on d)."""
        for ring, key in zip(rings, ("global", "local", "other")):
            ring.set_data([ds[j]], [r[key][j]])
        k, own, opt = r["kind"][j], r["corr_own"][j], r["corr_opt"][j]
        for c, (line, (label, _role, _marker)) in enumerate(zip(points, _KIND)):
            m = (k == c) & np.isfinite(opt)
            line.set_data(opt[m], own[m])
            line.set_label(f"{label}: {int((k == c).sum())}")
        hidden = int((~np.isfinite(opt)).sum())
        ax1.set_title(f"the {len(k)} runs at d = {int(ds[j])}" + (
            f" ({hidden} not shown: no global SVM)" if hidden else ""), fontsize=_FONT)
        ax1.legend(fontsize=_FONT, loc="lower left", framealpha=0.9)

    show(j)

    def update(n2, T2, d2):  # another d at the same (n, T): the same pixels as a new draw
        if (int(n2), int(T2)) != (int(n), int(T)):
            return False
        show(list(_GS_DS).index(int(d2)))
        return True

    return lambda n, T, d: update(n, T, d)


def global_share(result=None, *, n: int = 6, T: int = 8, d: int = 10, runs: int = 16,
                 steps: int = _GS_STEPS, seed: int = 0, static: dict | None = None,
                 mode: str | None = None):
    r"""Explorer (chapter 6): how often gradient descent reaches the global direction, as the
    dimension d, the number of inputs n and of tokens T change, recomputed.

    For the chosen (n, T), ``runs`` random instances per d are trained by normalised GD on W
    (:func:`global_share_runs`: all d in one batched call, then one SVM solve per d; about
    a second per (n, T) the first time, cached after) and classified as the chapter's sweep
    does. Left: the share of runs that reach the global :math:`W^{mm}`, a locally optimal
    :math:`W^{mm}_\alpha`, or neither, against d, the over-parameterised range
    :math:`d \ge \max(T-1, n)` shaded, the current d ringed (and, at the chapter's (n, T),
    the chapter's sweep ``result`` as a black line). Right: every run at the current d, its
    correlation with the global :math:`W^{mm}` against that with the SVM of its own final
    selection. The play button steps through d.

    Parameters
    ----------
    result : Result, optional
        The chapter's ``tf_global_fraction`` result (its global share is overlaid).
    n, T, d : int
        Initial inputs (2, 3, 4, 6), tokens (4, 6, 8) and dimension (``_GS_DS``).
    runs, steps, seed
        Runs per d, GD steps (fewer than the chapter's 2000: the explorer redraws in about a
        second), seed of the first instance.
    static, mode
        As in :func:`parameterisation`; default: the website offers n in {3, 6}, T in {4, 8}
        and every d.
    """
    chapter = None
    if result is not None:
        A = result.arrays
        cell = tuple(int(v) for v in np.asarray(A["cells"])[0])
        chapter = (cell, np.asarray(A["ds"]), np.asarray(A["global"]).reshape(-1))

    def draw(fig, n, T, d):
        return _draw_global_share(fig, n, T, d, runs, steps, seed, chapter)

    def note(n, T, d):
        return global_share_note(n, T, d, runs, steps, seed)

    controls = [Control("n", (2, 3, 4, 6), default=n, label="inputs n", static=(3, 6)),
                Control("T", (4, 6, 8), default=T, label="tokens T", static=(4, 8)),
                Control("d", _GS_DS, default=d, label="dimension d")]
    ex = Explorer(draw, with_static(controls, static), name="global-share", slider="d",
                  play="d", figsize=(9.0, 4.0), fps=2.0, note=note,
                  margins=dict(left=0.08, right=0.98, bottom=0.15, top=0.86, wspace=0.32),
                  caption="Choose n and T, then move d (or press play): the shares are "
                          "recomputed from fresh gradient-descent runs. Above the threshold "
                          "d = max(T − 1, n) (shaded) most runs reach the global direction.")
    return ex.show(mode)


# -- the λ head: attention paths, recomputed (chapter 7) ---------------------------------------
#: Token scores of the λ-head explorer: T tokens take the first T (the chapter's example is
#: the first four).
_LH_GAMMA = (1.0, 0.8, 0.2, -0.5, 0.5, 0.0, 0.65, -0.2)
_LH_ITERS = (0, 5, 10, 20, 50, 100, 200, 300, 500, 1000, 1500, 2000)


def best_attention(gamma, lam: float) -> np.ndarray:
    r"""The best attention of the λ head, :math:`\arg\max_{s \in \Delta}\ \sum_t s_t\gamma_t -
    \lambda\|s\|^2` (orthonormal tokens): the projection of :math:`\gamma/(2\lambda)` onto the
    simplex (sparsemax); for λ = 0 (a linear head) the one-hot of the best token."""
    gam = np.asarray(to_numpy(gamma), dtype=float)
    if lam <= 0:
        return np.eye(gam.size)[int(gam.argmax())]
    y = gam / (2.0 * lam)
    u = np.sort(y)[::-1]
    css = np.cumsum(u)
    k = np.nonzero(u - (css - 1) / np.arange(1, y.size + 1) > 0)[0][-1]
    return np.maximum(y - (css[k] - 1) / (k + 1), 0.0)


@functools.lru_cache(maxsize=64)
def lambda_paths(lam: float = 0.25, T: int = 4, steps: int = 2000, lr: float = 1.0,
                 normalized: bool = False) -> dict:
    r"""What :func:`lambda_head` draws: gradient descent on W for the λ head
    :math:`f = v^\top h - \lambda\|h\|^2` on one input with T orthonormal tokens (scores
    ``_LH_GAMMA[:T]``), query :math:`z = x_1`, the correlation loss :math:`-f` and
    :math:`W(0) = 0`. Then :math:`W(k) = a(k) z^\top` with the logits :math:`a = W z`, and a
    step on W is the same step on a (:math:`\|z\| = 1`), so the run is a loop over T numbers
    (a few hundredths of a second). Default: plain GD with step 1, whose attention converges
    smoothly (normalised steps, as in the chapter's experiment, end in a zigzag of the size of
    the step around :math:`s^*`). Returns ``steps`` (S+1,), the attention ``s`` (S+1, T), the
    best attention ``s_opt`` (T,) and the scores ``gamma``."""
    gam = np.asarray(_LH_GAMMA[:int(T)], dtype=float)
    a = np.zeros(int(T))
    S = np.empty((int(steps) + 1, int(T)))
    for k in range(int(steps) + 1):
        s = np.exp(a - a.max())
        s /= s.sum()
        S[k] = s
        gs = gam - 2.0 * float(lam) * s  # ∇_s f
        grad = -(s * gs - s * (s @ gs))  # ∇_a (−f) = −(diag(s) − s sᵀ) ∇_s f
        nrm = np.linalg.norm(grad) if normalized else 1.0
        if nrm > 0:
            a = a - float(lr) * grad / nrm
    return dict(steps=np.arange(int(steps) + 1), s=S, s_opt=best_attention(gam, float(lam)),
                gamma=gam)


def lambda_note(lam, T, iterations) -> str:
    """The line under :func:`lambda_head`'s figure, read from the run."""
    r = lambda_paths(float(lam), int(T))
    k = int(iterations)
    kept = int((r["s_opt"] > 0).sum())
    gap = float(np.abs(r["s"][k] - r["s_opt"]).max())
    return (f"λ = {float(lam):g}, T = {int(T)}: the best attention keeps {kept} token"
            f"{'s' if kept > 1 else ''}; at iteration {k} the attention is within {gap:.3f} "
            "of it (largest entry).")


def _draw_lambda(fig, lam, T, iterations):
    r = lambda_paths(float(lam), int(T))
    k = int(iterations)
    ax0, ax1 = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=(1.3, 1)))
    styles = ("-", "--", "-.", ":")
    paths = []
    for t in range(int(T)):
        c = plots.color_of(t)
        paths += ax0.plot(r["steps"][:k + 1], r["s"][:k + 1, t], styles[t % 4], color=c, lw=2,
                          label=f"$x_{{{t + 1}}}$")
        ax0.axhline(r["s_opt"][t], color=c, lw=0.8, ls=":")
    ax0.set_xscale("symlog", linthresh=10)
    ax0.set_xlim(0, _LH_ITERS[-1])
    ax0.set_ylim(-0.02, 1.02)
    ax0.set_xlabel("iteration k", fontsize=_FONT)
    ax0.set_ylabel("attention $s_t(k)$", fontsize=_FONT)
    ax0.set_title("attention paths (dotted: best $s^*$)", fontsize=_FONT)
    ax0.tick_params(labelsize=_FONT)
    ax0.legend(fontsize=_FONT, loc="upper left", ncol=2 if int(T) > 4 else 1)
    x = np.arange(int(T))
    bars = ax1.bar(x, r["s"][k], 0.6, color=[plots.color_of(t) for t in range(int(T))],
                   label=f"GD at k = {k}")
    ax1.plot(x, r["s_opt"], "_", color="k", ms=22, mew=2.5, label="best $s^*$")
    ax1.set_xticks(x, [f"$x_{{{t + 1}}}$" for t in x])
    ax1.set_ylim(0, 1.02)
    ax1.set_xlabel("token", fontsize=_FONT)
    ax1.set_title(f"attention at k = {k}", fontsize=_FONT)
    ax1.tick_params(labelsize=_FONT)
    legend = ax1.legend(fontsize=_FONT, loc="upper right")

    def update(lam2, T2, iterations):  # another iteration: move the paths, bars and titles
        if float(lam2) != float(lam) or int(T2) != int(T):
            return False
        k = int(iterations)
        for t, line in enumerate(paths):
            line.set_data(r["steps"][:k + 1], r["s"][:k + 1, t])
        for bar, h in zip(bars, r["s"][k]):
            bar.set_height(h)
        for text in legend.get_texts():
            if text.get_text().startswith("GD at k"):
                text.set_text(f"GD at k = {k}")
        ax1.set_title(f"attention at k = {k}", fontsize=_FONT)
        return True

    return lambda lam, T, iterations: update(lam, T, iterations)


def lambda_head(lam: float = 0.25, T: int = 4, *, iterations: int = 2000,
                static: dict | None = None, mode: str | None = None):
    r"""Explorer (chapter 7): gradient descent with the λ-penalty head, recomputed for the head's
    strength λ and the number of tokens T.

    One input, T orthonormal tokens with scores ``_LH_GAMMA[:T]`` (T = 4: the chapter's
    example), head :math:`f = v^\top h - \lambda\|h\|^2`: :func:`lambda_paths` trains W by
    gradient descent from W = 0 (2000 steps, a few hundredths of a second, cached). Left: the
    attention :math:`s_t(k)` of every token against the iteration, with the best attention
    :math:`s^*` (dotted); right: the attention at the current iteration against :math:`s^*`.
    λ = 0 is a linear head: all attention goes to the best token; a larger λ keeps more tokens.
    The play button steps through the iterations (12 frames).

    Parameters
    ----------
    lam : {0, 0.1, 0.25, 0.5, 1}
    T : {2, 3, 4, 6, 8}
    iterations : int
        Initial iteration shown (``_LH_ITERS``).
    static, mode
        As in :func:`parameterisation`; default: the website offers λ in {0, 0.25, 1},
        T in {4, 8} and every iteration.
    """
    controls = [Control("lam", (0.0, 0.1, 0.25, 0.5, 1.0), default=float(lam),
                        label="head strength λ", static=(0.0, 0.25, 1.0)),
                Control("T", (2, 3, 4, 6, 8), default=int(T), label="tokens T", static=(4, 8)),
                Control("iterations", _LH_ITERS, default=int(iterations),
                        label="iterations")]
    ex = Explorer(_draw_lambda, with_static(controls, static), name="lambda-head",
                  slider="iterations", figsize=(9.0, 4.0), fps=3.0, note=lambda_note,
                  margins=dict(left=0.08, right=0.98, bottom=0.15, top=0.86, wspace=0.25),
                  caption="Choose the head's strength λ and the number of tokens T: gradient "
                          "descent is rerun. Press play: the attention converges to the best "
                          "attention s*, one token for λ = 0, several for a larger λ.")
    return ex.show(mode)


def plot_lambda_paths(lams=(0.0, 0.25), T: int = 4, steps: int = 2000):
    """Chapter 7, the opening picture: the attention s_t(k) of every token while normalised GD
    trains W, one panel per head strength λ (λ = 0: a linear head), with the best attention
    s* dotted. The runs are :func:`lambda_paths` (W(0) = 0, the
    chapter's scores (1, 0.8, 0.2, −0.5) for T = 4); a few hundredths of a second each."""
    fig, axes = plots.new_figure(1, len(lams), figsize=(4.3 * len(lams) + 0.2, 3.8), sharey=True)
    styles = ("-", "--", "-.", ":")
    for j, (ax, lam) in enumerate(zip(np.atleast_1d(axes), lams)):
        r = lambda_paths(float(lam), int(T), int(steps))
        for t in range(int(T)):
            ax.plot(r["steps"], r["s"][:, t], styles[t % 4], color=plots.color_of(t), lw=2,
                    label=rf"$x_{{{t + 1}}}$ ($\gamma = {r['gamma'][t]:g}$)")
            ax.axhline(r["s_opt"][t], color=plots.color_of(t), lw=0.9, ls=":")
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlim(0, steps)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("iteration k")
        ax.set_title("linear head (λ = 0)" if lam == 0 else f"λ head, λ = {lam:g}")
        if j == 0:
            ax.set_ylabel("attention $s_t(k)$")
            ax.legend(loc="center left", fontsize=_FONT)
    return plots.readable(fig)
