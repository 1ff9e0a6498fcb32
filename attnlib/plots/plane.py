"""Drawing in the plane of the tokens: tokens coloured by score, max-margin rays, trajectories.

:func:`token_plane`, the book's main picture (chapters 1-5, 9), is :func:`token_scatter` +
:func:`rays` + :func:`trajectories`: the tokens :math:`x_{it}` coloured by their score
:math:`\\gamma_{it} = Y_i v^\\top x_{it}`, the rays of the SVM solutions (:math:`p^{mm}` or
:math:`W^{mm} z_i`), the support tokens and gradient-descent paths of :math:`p(k)` or
:math:`W(k) z_i`.
"""

from __future__ import annotations

import numpy as np

import attnlib.plots.style as style

from .._validate import to_numpy
from .style import COLORS, MARKERS, PALETTE, SCORE_CMAP, as_array, as_points, target_axes

__all__ = ["token_names", "token_scatter", "rays", "trajectories", "token_plane"]


def _discrete(g, most=5):
    """The distinct score values (rounded to 3 significant digits) if there are at most
    ``most`` of them, else None (then the scores get a colour bar)."""
    vals = np.unique(np.array([float(f"{v:.3g}") for v in g.reshape(-1)]))
    return vals if len(vals) <= most else None


def _score_key(ax, sc, g, star):
    """What the token colours mean, beside the axes: a discrete legend (one entry per score,
    a colour bar would suggest a continuum) when the scores ``g`` take at most 5 values, else
    a colour bar; the star of the optimal token under it."""
    from matplotlib.lines import Line2D

    levels = None if g is None else _discrete(g)
    dot = dict(ls="", markeredgecolor=PALETTE["ink"], markeredgewidth=0.6, markersize=8)
    handles = [] if levels is None else [
        Line2D([], [], marker="o", markerfacecolor=sc.cmap(sc.norm(v)), label=f"γ = {v:g}",
               **dot) for v in levels[::-1]]
    if levels is None:
        ax.figure.colorbar(sc, ax=ax, shrink=0.8, label="score γ")
        if star:  # in the axes' own legend (the colour bar holds the place beside it)
            ax.scatter([], [], marker="*", s=140, c="none", edgecolors=PALETTE["target"],
                       linewidths=1.2, label="optimal token")
    elif star:
        handles.append(Line2D([], [], marker="*", markerfacecolor="none", ls="",
                              markeredgecolor=PALETTE["target"], markersize=11,
                              label="optimal token"))
    if handles:
        key = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                        borderaxespad=0.0, fontsize=8, title="score" if levels is not None
                        else None, title_fontsize=8, frameon=False)
        key.set_gid("score key")  # the axes' legend, beside them (the layout makes room)


def token_names(n, T):
    """The book's names of the tokens: ``x_t`` for one input, ``x_it`` for several (1-based),
    as mathtext strings, shape (n, T)."""
    if n == 1:
        return [[f"$x_{{{t + 1}}}$" for t in range(T)]]
    return [[f"$x_{{{i + 1}{t + 1}}}$" for t in range(T)] for i in range(n)]


def token_scatter(X, scores=None, *, ax=None, optimal=None, selected=None, support=None,
                  annotate=True, vmin=None, vmax=None, colorbar=True, size=70, names=None):
    """Tokens in the plane, coloured by score, each named beside it.

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
        Write each token's name (``token_names``, or ``names``) and score beside it.
    colorbar : bool
        Show what the colours mean: a legend entry per score when the scores take at most 5
        values (discrete values get a discrete legend), else a colour bar.
    names : nested list (n, T) of str, optional
        The tokens' names (default: the book's ``x_t`` / ``x_it``); an empty name leaves that
        token unannotated.

    Returns
    -------
    Figure
    """
    fig, ax = target_axes(ax)
    X = as_points(X, "X", 3)  # (n, T, 2)
    n, T, _ = X.shape
    g = None if scores is None else as_array(scores, "scores").reshape(-1, T)
    if g is not None and g.shape[0] != n:
        raise ValueError(f"scores must have shape (n, T) = ({n}, {T}), got {g.shape}")
    if names is None:
        names = token_names(n, T)
    elif np.shape(names) != (n, T):
        raise ValueError(f"names must have shape (n, T) = ({n}, {T}), got {np.shape(names)}")
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
                        marker=MARKERS[i % len(MARKERS)], s=size, edgecolors=PALETTE["ink"],
                        linewidths=0.6, zorder=3)
        if n > 1:  # the input's marker (white where the colour is the score)
            ax.scatter([], [], marker=MARKERS[i % len(MARKERS)], s=size,
                       c="white" if g is not None else COLORS[i % len(COLORS)],
                       edgecolors=PALETTE["ink"], linewidths=0.6, label=f"input {i + 1}")
        if optimal is not None:
            o = int(to_numpy(optimal).reshape(-1)[i])
            ax.scatter(X[i, o, 0], X[i, o, 1], marker="*", s=3.2 * size, c="none",
                       edgecolors=PALETTE["target"], linewidths=1.2, zorder=4)
        if annotate:
            for t in range(T):
                if not names[i][t]:  # an empty name: this token is not annotated
                    continue
                text = names[i][t] + (f" {g[i, t]:.2g}" if g is not None else "")
                ax.annotate(text, X[i, t], xytext=(4, 4), textcoords="offset points",
                            fontsize=7, color=PALETTE["ink"])
    if selected is not None:
        sel = np.asarray(as_array(selected, "selected"), dtype=int).reshape(-1)
        ax.scatter(X[np.arange(n), sel, 0], X[np.arange(n), sel, 1], s=1.6 * size,
                   facecolors="none", edgecolors="black", linewidths=2.0, zorder=5)
    if support is not None:
        sup = np.asarray(as_array(support, "support"), dtype=bool).reshape(n, T)
        pts = X[sup]
        ax.scatter(pts[:, 0], pts[:, 1], s=4 * size, facecolors="none",
                   edgecolors=PALETTE["support"], linewidths=1.4, linestyles="--", zorder=2,
                   label="support tokens")
    if colorbar and g is not None and sc is not None:
        _score_key(ax, sc, g if vmin is None and vmax is None else None, optimal is not None)
    ax.set_aspect("equal", adjustable="datalim")
    ax.axhline(0, color=PALETTE["axis"], lw=0.6, zorder=0)
    ax.axvline(0, color=PALETTE["axis"], lw=0.6, zorder=0)
    style.plane_labels(ax)
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
    fig, ax = target_axes(ax)
    D = as_points(directions, "directions", 2)  # (k, 2)
    norms = np.linalg.norm(D, axis=-1, keepdims=True)
    D = D / np.where(norms > 0, norms, 1.0)
    if length is None:
        ax.autoscale_view()
        x0, x1 = ax.get_xlim()
        y0, y1 = ax.get_ylim()
        length = float(np.hypot(max(abs(x0), abs(x1)), max(abs(y0), abs(y1))))
    for j, (xs, ys) in enumerate(ray_segments(D, length, origin)):
        color = colors[j] if colors is not None else COLORS[j % len(COLORS)]
        label = labels[j] if labels is not None else None
        ax.plot(xs, ys, linestyle=linestyle, color=color, lw=1.5, label=label, zorder=1)
    return fig


def ray_segments(directions, length, origin=(0.0, 0.0)):
    """The ends of :func:`rays`' half-lines: ``[(xs, ys), ...]``, one per direction (k, 2),
    normalised, of the given length from ``origin``."""
    D = as_points(directions, "directions", 2)  # (k, 2)
    norms = np.linalg.norm(D, axis=-1, keepdims=True)
    D = D / np.where(norms > 0, norms, 1.0)
    o = as_array(origin, "origin")
    return [([o[0], o[0] + length * d[0]], [o[1], o[1] + length * d[1]]) for d in D]


def trajectories(P, *, ax=None, color=None, arrow_every=None, highlight=None, label=None,
                 lw=1.0):
    """Trajectories in the plane (e.g. of :math:`p(k)` or :math:`W(k) z_i`) with arrowheads.

    Parameters
    ----------
    P : array (S, 2) or (B, S, 2)
        ``B`` trajectories of ``S`` recorded points.
    arrow_every : int, optional
        Distance in recorded points between arrowheads (default: about 6 per trajectory).
    color : colour or list of colours, optional
        One colour for all (default ``PALETTE["path"]``) or one per trajectory (e.g. the
        colour of each query's ray).
    highlight : int, optional
        Index of a trajectory drawn thick and in red (the others grey).

    Returns
    -------
    Figure
    """
    fig, ax = target_axes(ax)
    P = as_points(P, "P", 3)  # (B, S, 2)
    B, S, _ = P.shape
    if color is None:
        color = PALETTE["path"]
    per_path = isinstance(color, (list, tuple)) and len(color) == B and B > 0 and \
        not isinstance(color[0], (int, float))
    colors = []
    for b in range(B):
        hl = highlight is not None and b == highlight
        c = PALETTE["target"] if hl else (color[b] if per_path else color)
        colors.append(c)
        ax.plot(P[b, :, 0], P[b, :, 1], color=c, lw=2.2 * lw if hl else lw, zorder=2 + hl,
                label=label if b == 0 else None)
        ax.plot(P[b, 0, 0], P[b, 0, 1], "o", color=c, ms=3, zorder=2)
    arrowheads(ax, P, colors, arrow_every)
    return fig


def arrowheads(ax, P, colors, arrow_every=None):
    """The arrowheads of :func:`trajectories` (one quiver call draws them all): about six per
    trajectory of ``P`` (B, S, 2), each in its trajectory's colour. Returns the Quiver, or
    None when no trajectory moves."""
    P = to_numpy(P)
    B, S, _ = P.shape
    step = arrow_every or max(1, S // 6)
    heads = []  # (x, y, dx, dy, colour) of every arrowhead
    for b in range(B):
        for k in range(step, S, step):
            dx, dy = P[b, k] - P[b, k - 1]
            if dx or dy:
                heads.append((P[b, k, 0], P[b, k, 1], dx, dy, colors[b]))
    if not heads:
        return None
    x, y, dx, dy = (np.array([h[j] for h in heads]) for j in range(4))
    nrm = np.hypot(dx, dy)
    return ax.quiver(x, y, dx / nrm, dy / nrm, color=[h[4] for h in heads], angles="xy",
                     scale_units="inches", scale=12.0, pivot="tip", width=0.004, headwidth=5,
                     headlength=6, headaxislength=5, zorder=3)


def redraw_arrowheads(ax, quiver, after, P, colors, arrow_every=None):
    """:func:`arrowheads` of the trajectories ``P`` in place of ``quiver`` (the old ones, or
    None), drawn in the order :func:`trajectories` draws them: right after the artist
    ``after`` (the last start point). For an explorer's in-place redraw; returns the Quiver."""
    if quiver is not None:
        quiver.remove()
    quiver = arrowheads(ax, as_points(P, "P", 3), colors, arrow_every)
    if quiver is not None:
        ax._children.remove(quiver)
        ax._children.insert(ax._children.index(after) + 1, quiver)
    return quiver


def token_plane(X, scores=None, *, paths=None, directions=None, direction_labels=None,
                support=None, selected=None, highlight=None, ax=None, title=None,
                legend="upper left", colorbar=True, ray_length=None, annotate=None,
                path_colors=None, names=None):
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
        Show what the score colours mean (a discrete legend for at most 5 distinct scores,
        else a colour bar).
    path_colors : list of colours, optional
        One colour per trajectory (e.g. the colour of each query's ray); default grey.
    names : nested list (n, T) of str, optional
        The tokens' names (default ``x_t`` / ``x_it``).
    ray_length : float, optional
        Length of the rays (default: to the data limits).
    annotate : bool, optional
        Write each token's score beside it (default: when there are at most 8 tokens).

    Returns
    -------
    Figure
    """
    fig, ax = target_axes(ax)
    if paths is not None:
        trajectories(paths, ax=ax, highlight=highlight, color=path_colors)
    if annotate is None:
        annotate = as_array(X, "X").size // 2 <= 8
    token_scatter(X, scores, ax=ax, support=support, selected=selected, colorbar=colorbar,
                  annotate=annotate, names=names)
    if directions is not None:
        rays(directions, ax=ax, labels=direction_labels, length=ray_length)
    if title:
        style.title(ax, title)
    handles, labels = ax.get_legend_handles_labels()
    if legend and labels:
        loc = legend if isinstance(legend, str) else "upper left"
        if ax.get_legend() is not None:  # the score key beside the axes stays
            from matplotlib.legend import Legend

            ax.add_artist(Legend(ax, handles, labels, loc=loc, fontsize=8))
        else:
            ax.legend(fontsize=8, loc=loc)
    return fig
