"""Figures of the book: data in, figure out (no training here).

Every function takes arrays (numpy arrays, torch tensors or nested lists) and draws them with
matplotlib. Each one accepts ``ax=`` to draw into an existing axes (as the explorers of
:mod:`attnlib.explorers` do) and otherwise makes its own figure; it always returns the
:class:`matplotlib.figure.Figure`. Figures are made without ``pyplot`` (no global figure
registry, nothing to close) and show themselves as PNG in Jupyter.

The pictures, and the chapters that use them:

* :func:`token_plane`: tokens of one or more inputs in the plane, coloured by their score
  :math:`\\gamma_{it} = Y_i v^\\top x_{it}`, the max-margin rays, the support tokens and
  gradient-descent trajectories of :math:`p` or :math:`W z_i` (chapters 1-5, 9). It is
  :func:`token_scatter` + :func:`rays` + :func:`trajectories`.
* :func:`curves` (with :func:`correlation_curves`, :func:`probability_curves`,
  :func:`norm_curves`): quantities against the iteration, mean and a band over trials
  (chapters 2-10).
* :func:`histogram`: distributions, e.g. of :math:`|W_{jk}|` for the sparsity of mirror
  descent (chapter 9).
* :func:`sweep_curves`: a swept quantity against a size (n, T or d), one curve per setting, the
  current point marked (chapter 6).
* :func:`matrix_image`: a matrix as a signed colour image (chapters 5, 9).
"""

from __future__ import annotations

import warnings

import numpy as np
from matplotlib.figure import Figure

from ._validate import to_numpy

__all__ = [
    "BookFigure", "new_figure", "title", "log_y", "square_view", "token_scatter", "rays",
    "trajectories", "token_plane", "curves", "correlation_curves", "probability_curves",
    "norm_curves", "histogram", "sweep_curves", "matrix_image",
]

#: Colours of the book: red = the (globally) optimal / target direction, blue = the other.
COLORS = ("tab:red", "tab:blue", "tab:green", "tab:orange", "tab:purple", "tab:brown",
          "tab:pink", "tab:olive", "tab:cyan", "tab:gray")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
SCORE_CMAP = "viridis"


class BookFigure(Figure):
    """A matplotlib Figure that displays itself as a PNG in Jupyter (no pyplot needed)."""

    def _repr_png_(self):
        import io

        buf = io.BytesIO()
        self.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()


def title(ax, text, fontsize=10):
    """An axes title at a fixed height (matplotlib's automatic placement measures every tick
    label: a third of a redraw)."""
    ax.set_title(text, fontsize=fontsize, y=1.0, pad=4)


title_ = title  # for functions whose ``title`` argument shadows it


def _power_of_ten(y, _pos=None):
    if y <= 0:
        return ""
    e = np.log10(y)
    return f"1e{int(round(e))}" if abs(e - round(e)) < 1e-9 else f"{y:g}"


def log_y(ax):
    """Log y axis without mathtext labels and minor ticks (both are slow to lay out)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10.0, numticks=7))
    ax.yaxis.set_major_formatter(FuncFormatter(_power_of_ten))
    ax.yaxis.set_minor_locator(NullLocator())


def square_view(ax, pts, pad=0.1, margin=0.3):
    """Equal-aspect square limits around the points ``pts`` (k, 2).

    The square is centred on the points' bounding box; its half side is half the box's larger
    side times ``1 + pad``, plus ``margin`` (so a single point still gets a view).
    """
    pts = _2d(pts, "pts", 2)  # (k, 2)
    lo, hi = pts.min(0), pts.max(0)
    c, r = (lo + hi) / 2, (hi - lo).max() / 2 * (1 + pad) + margin
    ax.set_xlim(c[0] - r, c[0] + r)
    ax.set_ylim(c[1] - r, c[1] + r)
    ax.set_aspect("equal", adjustable="box")


def new_figure(nrows=1, ncols=1, *, figsize=None, **subplot_kw):
    """A :class:`BookFigure` with a grid of axes: returns ``(fig, axes)`` like ``plt.subplots``."""
    if figsize is None:
        figsize = (3.6 * ncols + 0.4, 3.2 * nrows)
    fig = BookFigure(figsize=figsize, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True, **subplot_kw)
    return fig, axes


def _np(a, name="array"):
    """``a`` (torch tensor, numpy array or list) as a float numpy array."""
    if a is None:
        return None
    try:
        return np.asarray(to_numpy(a), dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric array-like, got {type(a).__name__}") from err


def _axes(ax, figsize=None):
    if ax is None:
        fig, ax = new_figure(figsize=figsize or (4.2, 3.6))
    return ax.figure, ax


def _2d(a, name, ndim):
    """Check that ``a`` has ``ndim`` dimensions (adding leading ones) and a last dimension 2."""
    a = _np(a, name)
    while a.ndim < ndim:
        a = a[None]
    if a.ndim != ndim or a.shape[-1] != 2:
        raise ValueError(f"{name} must have shape (..., 2) with at most {ndim} dims, "
                         f"got {tuple(a.shape)}")
    return a


def token_scatter(X, scores=None, *, ax=None, optimal=None, selected=None, support=None,
                  annotate=True, vmin=None, vmax=None, colorbar=True, size=70):
    """Tokens in the plane, coloured by score.

    Parameters
    ----------
    X : array (T, 2) or (n, T, 2)
        Token positions (keys) of one input or of ``n`` inputs; input ``i`` gets marker
        ``MARKERS[i]``.
    scores : array (T,) or (n, T), optional
        Token scores :math:`\\gamma_{it} = Y_i v^\\top x_{it}`, shown as colours.
    optimal : array of int (n,), optional
        Index of each input's optimal token (drawn with a star). Default: argmax of ``scores``.
    selected : array of int (n,), optional
        A selection :math:`\\alpha`: these tokens get a thick black edge.
    support : bool array (n, T), optional
        Support tokens of the selection (constraint active): a dashed ring.
    annotate : bool
        Write the score next to each token.

    Returns
    -------
    Figure
    """
    fig, ax = _axes(ax)
    X = _2d(X, "X", 3)  # (n, T, 2)
    n, T, _ = X.shape
    g = None if scores is None else _np(scores, "scores").reshape(-1, T)
    if g is not None and g.shape[0] != n:
        raise ValueError(f"scores must have shape (n, T) = ({n}, {T}), got {g.shape}")
    if optimal is None and g is not None:
        optimal = g.argmax(-1)
    lo = vmin if vmin is not None else (g.min() if g is not None else 0.0)
    hi = vmax if vmax is not None else (g.max() if g is not None else 1.0)
    if hi <= lo:
        hi = lo + 1.0
    sc = None
    for i in range(n):
        c = g[i] if g is not None else COLORS[i % len(COLORS)]
        sc = ax.scatter(X[i, :, 0], X[i, :, 1], c=c, cmap=SCORE_CMAP if g is not None else None,
                        vmin=lo if g is not None else None, vmax=hi if g is not None else None,
                        marker=MARKERS[i % len(MARKERS)], s=size, edgecolors="0.2",
                        linewidths=0.6, zorder=3, label=f"input {i + 1}" if n > 1 else None)
        if optimal is not None:
            o = int(np.asarray(optimal).reshape(-1)[i])
            ax.scatter(X[i, o, 0], X[i, o, 1], marker="*", s=3.2 * size, c="none",
                       edgecolors="tab:red", linewidths=1.2, zorder=4)
        if annotate and g is not None:
            for t in range(T):
                ax.annotate(f"{g[i, t]:.2g}", X[i, t], xytext=(4, 4), textcoords="offset points",
                            fontsize=7, color="0.25")
    if selected is not None:
        sel = np.asarray(_np(selected, "selected"), dtype=int).reshape(-1)
        ax.scatter(X[np.arange(n), sel, 0], X[np.arange(n), sel, 1], s=1.6 * size,
                   facecolors="none", edgecolors="black", linewidths=2.0, zorder=5)
    if support is not None:
        sup = np.asarray(_np(support, "support"), dtype=bool).reshape(n, T)
        pts = X[sup]
        ax.scatter(pts[:, 0], pts[:, 1], s=4 * size, facecolors="none", edgecolors="tab:orange",
                   linewidths=1.4, linestyles="--", zorder=2, label="support tokens")
    if colorbar and g is not None and sc is not None:
        fig.colorbar(sc, ax=ax, shrink=0.8, label="score γ")
    ax.set_aspect("equal", adjustable="datalim")
    ax.axhline(0, color="0.85", lw=0.6, zorder=0)
    ax.axvline(0, color="0.85", lw=0.6, zorder=0)
    return fig


def rays(directions, *, ax=None, labels=None, colors=None, length=None, origin=(0.0, 0.0),
         linestyle="--"):
    """Max-margin rays: dashed half-lines from ``origin`` along each direction.

    Parameters
    ----------
    directions : array (k, 2)
        Directions, e.g. :math:`p^{mm}(\\alpha)` or :math:`W^{mm} z_i`; they are normalised.
    length : float, optional
        Length of each ray; default: reach the current data limits.

    Returns
    -------
    Figure
    """
    fig, ax = _axes(ax)
    D = _2d(directions, "directions", 2)  # (k, 2)
    norms = np.linalg.norm(D, axis=-1, keepdims=True)
    D = D / np.where(norms > 0, norms, 1.0)
    if length is None:
        ax.autoscale_view()
        x0, x1 = ax.get_xlim()
        y0, y1 = ax.get_ylim()
        length = float(np.hypot(max(abs(x0), abs(x1)), max(abs(y0), abs(y1))))
    o = np.asarray(origin, dtype=float)
    for j, d in enumerate(D):
        color = colors[j] if colors is not None else COLORS[j % len(COLORS)]
        label = labels[j] if labels is not None else None
        ax.plot([o[0], o[0] + length * d[0]], [o[1], o[1] + length * d[1]], linestyle=linestyle,
                color=color, lw=1.5, label=label, zorder=1)
    return fig


def trajectories(P, *, ax=None, color="0.35", arrow_every=None, highlight=None, label=None,
                 lw=1.0):
    """Trajectories in the plane (e.g. of :math:`p(k)` or :math:`W(k) z_i`) with arrowheads.

    Parameters
    ----------
    P : array (S, 2) or (B, S, 2)
        ``B`` trajectories of ``S`` recorded points.
    arrow_every : int, optional
        Distance in recorded points between arrowheads (default: about 6 per trajectory).
    highlight : int, optional
        Index of a trajectory drawn thick and in red (the others grey).

    Returns
    -------
    Figure
    """
    fig, ax = _axes(ax)
    P = _2d(P, "P", 3)  # (B, S, 2)
    B, S, _ = P.shape
    step = arrow_every or max(1, S // 6)
    heads = []  # (x, y, dx, dy, colour) of every arrowhead: one quiver call draws them all
    for b in range(B):
        hl = highlight is not None and b == highlight
        c = "tab:red" if hl else color
        ax.plot(P[b, :, 0], P[b, :, 1], color=c, lw=2.2 * lw if hl else lw, zorder=2 + hl,
                label=label if b == 0 else None)
        ax.plot(P[b, 0, 0], P[b, 0, 1], "o", color=c, ms=3, zorder=2)
        for k in range(step, S, step):
            dx, dy = P[b, k] - P[b, k - 1]
            if dx or dy:
                heads.append((P[b, k, 0], P[b, k, 1], dx, dy, c))
    if heads:
        x, y, dx, dy = (np.array([h[j] for h in heads]) for j in range(4))
        nrm = np.hypot(dx, dy)
        ax.quiver(x, y, dx / nrm, dy / nrm, color=[h[4] for h in heads], angles="xy",
                  scale_units="inches", scale=12.0, pivot="tip", width=0.004, headwidth=5,
                  headlength=6, headaxislength=5, zorder=3)
    return fig


def token_plane(X, scores=None, *, paths=None, directions=None, direction_labels=None,
                support=None, selected=None, highlight=None, ax=None, title=None,
                legend="upper left", colorbar=True, ray_length=None, annotate=None):
    """The book's main picture: tokens, max-margin rays and GD trajectories in one plane.

    Parameters
    ----------
    X : array (T, 2) or (n, T, 2)
        Token positions (keys).
    scores : array (T,) or (n, T), optional
        Scores :math:`\\gamma_{it}`.
    paths : array (S, 2) or (B, S, 2), optional
        Trajectories, e.g. :math:`p(k)`, :math:`k = 0, \\dots, S-1`.
    directions : array (k, 2), optional
        SVM directions drawn as rays (first one red: the target).
    support, selected :
        As in :func:`token_scatter`.
    highlight : int, optional
        Trajectory drawn in red.
    colorbar : bool
        Draw a colour bar of the scores.
    ray_length : float, optional
        Length of the rays (default: to the data limits).
    annotate : bool, optional
        Write each token's score beside it (default: when there are at most 8 tokens).

    Returns
    -------
    Figure
    """
    fig, ax = _axes(ax)
    if paths is not None:
        trajectories(paths, ax=ax, highlight=highlight)
    if annotate is None:
        annotate = _np(X, "X").size // 2 <= 8
    token_scatter(X, scores, ax=ax, support=support, selected=selected, colorbar=colorbar,
                  annotate=annotate)
    if directions is not None:
        rays(directions, ax=ax, labels=direction_labels, length=ray_length)
    if title:
        title_(ax, title)
    if legend and (direction_labels is not None or support is not None):
        ax.legend(fontsize=7, loc=legend if isinstance(legend, str) else "upper left")
    return fig


def _band(ax, x, y, label, color, one_minus, logy, band, ls="-"):
    y = np.atleast_2d(y)  # (B, S)
    if one_minus:
        y = 1.0 - y
    if band == "lines":
        for b, yb in enumerate(y):
            ax.plot(x, yb, ls, color=color, lw=1.0, alpha=0.85, label=label if b == 0 else None)
        return
    with warnings.catch_warnings():  # an all-NaN column (e.g. corr of W = 0) is not an error
        warnings.simplefilter("ignore", RuntimeWarning)
        m = np.nanmean(y, 0)
    ax.plot(x, m, ls, color=color, label=label, lw=1.6)
    if y.shape[0] > 1:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            s = np.nanstd(y, 0)
        lo = m - s
        if logy:
            lo = np.where(lo > 0, lo, m)
        ax.fill_between(x, lo, m + s, color=color, alpha=0.2, lw=0)


def curves(steps, values, *, ax=None, ylabel="", xlabel="iteration", logy=False, logx=False,
           one_minus=False, mark=None, title=None, ylim=None, legend="lower right",
           band="std", colors=None, styles=None):
    """Curves against the iteration: mean over trials with a ±1 std band (or every trial).

    Parameters
    ----------
    steps : array (S,)
        Iteration of each recorded point.
    values : dict[str, array (S,) or (B, S)]
        One entry per curve (``B`` trials each).
    one_minus : bool
        Plot ``1 - value`` (e.g. ``1 - correlation`` on a log axis).
    mark : float, optional
        An iteration marked by a vertical line (the current frame of an explorer).
    legend : str or None
        Legend location (a fixed one: ``"best"`` costs a tenth of a second per draw).
    band : {"std", "lines"}
        Several trials: their mean with a ±1 std band, or every trial as a thin line.
    colors, styles : dict[str, str], optional
        Colour and line style per label.

    Returns
    -------
    Figure
    """
    fig, ax = _axes(ax, figsize=(4.6, 3.2))
    x = _np(steps, "steps").reshape(-1)
    if not isinstance(values, dict) or not values:
        raise ValueError("values must be a non-empty dict {label: array (S,) or (B, S)}")
    for j, (label, y) in enumerate(values.items()):
        y = _np(y, f"values[{label!r}]")
        if y.shape[-1] != x.shape[0]:
            raise ValueError(f"values[{label!r}] has {y.shape[-1]} points, steps has {x.shape[0]}")
        _band(ax, x, y, label, (colors or {}).get(label, COLORS[j % len(COLORS)]), one_minus,
              logy, band, (styles or {}).get(label, "-"))
    if mark is not None:
        ax.axvline(float(mark), color="0.5", lw=0.8, ls=":")
    if logy:
        log_y(ax)
    if logx:
        ax.set_xscale("symlog", linthresh=1.0)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        title_(ax, title)
    if legend:
        ax.legend(fontsize=8, loc=legend)
    ax.grid(alpha=0.3)
    return fig


def correlation_curves(steps, corrs, *, ax=None, one_minus=False, **kw):
    """Correlation :math:`\\langle W(k), W^{mm}\\rangle / (\\|W(k)\\| \\|W^{mm}\\|)` vs iteration.

    ``one_minus=True`` plots ``1 - corr`` on a log axis. See :func:`curves`.
    """
    ylabel = "1 - correlation" if one_minus else "correlation"
    return curves(steps, corrs, ax=ax, ylabel=ylabel, one_minus=one_minus,
                  logy=one_minus or kw.pop("logy", False), **kw)


def probability_curves(steps, probs, *, ax=None, **kw):
    """Softmax probability of the selected token (mean over inputs) vs iteration."""
    return curves(steps, probs, ax=ax, ylabel="softmax probability", ylim=(0, 1.02), **kw)


def norm_curves(steps, norms, *, ax=None, **kw):
    """Parameter norm :math:`\\|p(k)\\|` or :math:`\\|W(k)\\|` vs iteration."""
    kw.setdefault("legend", "upper left")
    return curves(steps, norms, ax=ax, ylabel="norm", **kw)


def histogram(values, *, ax=None, bins=30, logy=False, xlabel="value", density=False,
              range=None, legend="upper right"):
    """Overlaid histograms, e.g. of :math:`|W_{jk}| / \\max |W|` for several :math:`\\ell_p`.

    Parameters
    ----------
    values : dict[str, array] or array
        One histogram per entry (flattened).

    Returns
    -------
    Figure
    """
    fig, ax = _axes(ax, figsize=(4.4, 3.2))
    if not isinstance(values, dict):
        values = {None: values}
    allv = np.concatenate([_np(v, "values").reshape(-1) for v in values.values()])
    if range is None:
        range = (float(np.nanmin(allv)), float(np.nanmax(allv)) or 1.0)
    for j, (label, v) in enumerate(values.items()):
        ax.hist(_np(v, "values").reshape(-1), bins=bins, range=range, alpha=0.55,
                color=COLORS[j % len(COLORS)], label=label, density=density)
    if logy:
        log_y(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density" if density else "count")
    if legend and any(k is not None for k in values):
        ax.legend(fontsize=8, loc=legend)
    return fig


def sweep_curves(x, values, *, ax=None, current=None, xlabel="d", ylabel="", title=None,
                 styles=None, legend="lower right", colors=None):
    """Swept quantities against a size, e.g. mean rank of the SVM solution vs ``d``.

    Parameters
    ----------
    x : array (P,)
        The swept size.
    values : dict[str, array (P,)]
        One curve per setting (NaN where undefined, e.g. infeasible).
    current : float or tuple (label, x0), optional
        Mark the points at ``x0`` of every curve (or of curve ``label`` only): the explorer's
        current setting.
    styles : dict[str, str], optional
        Line style per label (e.g. ``"--"`` for nuclear).
    colors : dict[str, str], optional
        Colour per label (default: the book's colour cycle).

    Returns
    -------
    Figure
    """
    fig, ax = _axes(ax, figsize=(4.6, 3.2))
    xs = _np(x, "x").reshape(-1)
    for j, (label, y) in enumerate(values.items()):
        y = _np(y, f"values[{label!r}]").reshape(-1)
        if y.shape[0] != xs.shape[0]:
            raise ValueError(f"values[{label!r}] has {y.shape[0]} points, x has {xs.shape[0]}")
        ls = (styles or {}).get(label, "-")
        color = (colors or {}).get(label, COLORS[j % len(COLORS)])
        ax.plot(xs, y, ls, marker="o", ms=3, color=color, label=label)
    if current is not None:
        label, x0 = current if isinstance(current, tuple) else (None, current)
        k = int(np.argmin(np.abs(xs - float(x0))))
        marked = [label] if label is not None else list(values)
        ys = [_np(values[m], "values").reshape(-1)[k] for m in marked]
        ax.scatter([xs[k]] * len(ys), ys, s=160, facecolors="none", edgecolors="black", lw=2,
                   zorder=5)
        ax.axvline(xs[k], color="0.6", lw=0.8, ls=":")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        title_(ax, title)
    if legend:
        ax.legend(fontsize=8, loc=legend)
    ax.grid(alpha=0.3)
    return fig


def matrix_image(W, *, ax=None, title=None, colorbar=True):
    """A matrix as a signed colour image (symmetric colour scale around 0)."""
    fig, ax = _axes(ax, figsize=(3.6, 3.2))
    W = _np(W, "W")
    if W.ndim != 2:
        raise ValueError(f"W must be a matrix (2 dims), got shape {W.shape}")
    m = float(np.nanmax(np.abs(W))) or 1.0
    im = ax.imshow(W, cmap="RdBu_r", vmin=-m, vmax=m)
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        title_(ax, title)
    if colorbar:
        fig.colorbar(im, ax=ax, shrink=0.8)
    return fig
