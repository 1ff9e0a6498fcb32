"""Charts: quantities against the iteration or a swept size, histograms, matrices.

:func:`curves` (with :func:`correlation_curves`, :func:`probability_curves`,
:func:`norm_curves`) draws the median over trials with its 10-90% quantile band, or every
trial; :func:`sweep_curves`
a swept quantity against a size with the current point marked; :func:`histogram` overlaid
distributions; :func:`matrix_image` a signed matrix.
"""

from __future__ import annotations

import warnings

import numpy as np

import attnlib.plots.style as style

from .style import COLORS, as_array, log_y, target_axes

__all__ = ["quantile_band", "curves", "correlation_curves", "probability_curves",
           "norm_curves", "histogram", "sweep_curves", "matrix_image"]


def quantile_band(y, quantiles=None):
    """``(lo, median, hi)`` over trials (axis 0) of ``y`` (B, S), NaNs ignored: the median
    with the quantile band of ``BAND_QUANTILES`` (10-90%). Unlike
    mean ± std, the band of positive values is positive, so it stays on a log axis."""
    q_lo, q_hi = style.BAND_QUANTILES if quantiles is None else quantiles
    y = np.atleast_2d(as_array(y, "y"))
    with warnings.catch_warnings():  # an all-NaN column (e.g. corr of W = 0) is not an error
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, med, hi = np.nanquantile(y, [q_lo, 0.5, q_hi], axis=0)
    return lo, med, hi


def _band(ax, x, y, label, color, one_minus, band, ls="-"):
    y = np.atleast_2d(y)  # (B, S)
    if one_minus:
        y = 1.0 - y
    if band == "lines":
        for b, yb in enumerate(y):
            ax.plot(x, yb, ls, color=color, lw=1.0, alpha=0.85, label=label if b == 0 else None)
        return False
    if y.shape[0] == 1:
        ax.plot(x, y[0], ls, color=color, label=label, lw=1.6)
        return False
    lo, med, hi = quantile_band(y)
    ax.plot(x, med, ls, color=color, label=label, lw=1.6)
    ax.fill_between(x, lo, hi, color=color, alpha=0.2, lw=0)
    return True


def curves(steps, values, *, ax=None, ylabel="", xlabel="iteration k", logy=False, logx=False,
           one_minus=False, mark=None, title=None, ylim=None, legend="lower right",
           band="quantile", colors=None, styles=None):
    """Curves against the iteration: the median over trials with its 10-90% quantile band (or
    every trial).

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
    band : {"quantile", "lines"}
        Several trials: their median with the 10-90% quantile band (the legend's title says
        so; the band stays positive on a log axis), or every trial as a thin line.
    colors, styles : dict[str, str], optional
        Colour and line style per label.

    Returns
    -------
    Figure
    """
    fig, ax = target_axes(ax, figsize=(4.6, 3.2))
    x = as_array(steps, "steps").reshape(-1)
    if band not in ("quantile", "lines"):
        raise ValueError(f"band must be 'quantile' or 'lines', got {band!r}")
    if not isinstance(values, dict) or not values:
        raise ValueError("values must be a non-empty dict {label: array (S,) or (B, S)}")
    banded = False
    for j, (label, y) in enumerate(values.items()):
        y = as_array(y, f"values[{label!r}]")
        if y.shape[-1] != x.shape[0]:
            raise ValueError(f"values[{label!r}] has {y.shape[-1]} points, steps has {x.shape[0]}")
        color = (colors or {}).get(label, COLORS[j % len(COLORS)])
        banded |= _band(ax, x, y, label, color, one_minus, band, (styles or {}).get(label, "-"))
    if mark is not None:
        ax.axvline(float(mark), color=style.PALETTE["path"], lw=0.8, ls=":")
    if logy:
        log_y(ax)
    if logx:  # log when every step is positive, else symlog (step 0 stays on the axis)
        if np.nanmin(x) > 0:
            ax.set_xscale("log")
            ax.set_xlim(np.nanmin(x), np.nanmax(x))
        else:
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xlim(np.nanmin(x), np.nanmax(x))
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        style.title(ax, title)
    if legend:  # the legend's title says what the curves and bands are
        ax.legend(fontsize=8, loc=legend, title=style.BAND_TITLE if banded else None,
                  title_fontsize=7)
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
    kw.setdefault("ylabel", "softmax probability")
    return curves(steps, probs, ax=ax, ylim=(0, 1.02), **kw)


def norm_curves(steps, norms, *, ax=None, **kw):
    """Parameter norm :math:`\\|p(k)\\|` or :math:`\\|W(k)\\|` vs iteration."""
    kw.setdefault("legend", "upper left")
    kw.setdefault("ylabel", "norm")
    return curves(steps, norms, ax=ax, **kw)


def histogram(values, *, ax=None, bins=30, logy=False, xlabel="value", density=False,
              range=None, legend="upper right", colors=None):
    """Overlaid histograms, e.g. of :math:`|W_{jk}| / \\max |W|` for several :math:`\\ell_p`.

    Parameters
    ----------
    values : dict[str, array] or array
        One histogram per entry (flattened).
    colors : dict[str, color], optional
        A colour per label (default: the book's colour cycle in order).

    Returns
    -------
    Figure
    """
    fig, ax = target_axes(ax, figsize=(4.4, 3.2))
    if not isinstance(values, dict):
        values = {None: values}
    allv = np.concatenate([as_array(v, "values").reshape(-1) for v in values.values()])
    if range is None:
        range = (float(np.nanmin(allv)), float(np.nanmax(allv)) or 1.0)
    for j, (label, v) in enumerate(values.items()):
        ax.hist(as_array(v, "values").reshape(-1), bins=bins, range=range, alpha=0.55,
                color=(colors or {}).get(label, COLORS[j % len(COLORS)]), label=label,
                density=density)
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
    fig, ax = target_axes(ax, figsize=(4.6, 3.2))
    xs = as_array(x, "x").reshape(-1)
    for j, (label, y) in enumerate(values.items()):
        y = as_array(y, f"values[{label!r}]").reshape(-1)
        if y.shape[0] != xs.shape[0]:
            raise ValueError(f"values[{label!r}] has {y.shape[0]} points, x has {xs.shape[0]}")
        ls = (styles or {}).get(label, "-")
        color = (colors or {}).get(label, COLORS[j % len(COLORS)])
        ax.plot(xs, y, ls, marker="o", ms=3, color=color, label=label)
    if current is not None:
        label, x0 = current if isinstance(current, tuple) else (None, current)
        k = int(np.argmin(np.abs(xs - float(x0))))
        marked = [label] if label is not None else list(values)
        ys = [as_array(values[m], "values").reshape(-1)[k] for m in marked]
        ax.scatter([xs[k]] * len(ys), ys, s=160, facecolors="none", edgecolors="black", lw=2,
                   zorder=5)
        ax.axvline(xs[k], color=style.PALETTE["neutral"], lw=0.8, ls=":")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        style.title(ax, title)
    if legend:
        ax.legend(fontsize=8, loc=legend)
    ax.grid(alpha=0.3)
    return fig


def matrix_image(W, *, ax=None, title=None, colorbar=True, signed=True, values=None,
                 fmt="{:.2g}", label=None):
    """A matrix as a colour image: signed (``SIGNED_CMAP``, symmetric around 0) or, with
    ``signed=False``, on the sequential ``SCORE_CMAP`` over its range.

    ``values`` (same shape, default None) are written in the cells with ``fmt`` (e.g. the
    numbers behind a log-scaled image); ``label`` names the colour bar.
    """
    fig, ax = target_axes(ax, figsize=(3.6, 3.2))
    W = as_array(W, "W")
    if W.ndim != 2:
        raise ValueError(f"W must be a matrix (2 dims), got shape {W.shape}")
    if signed:
        m = float(np.nanmax(np.abs(W))) or 1.0
        im = ax.imshow(W, cmap=style.SIGNED_CMAP, vmin=-m, vmax=m)
    else:
        im = ax.imshow(W, cmap=style.SCORE_CMAP)
    ax.set_xticks([])
    ax.set_yticks([])
    if values is not None:
        V = as_array(values, "values")
        if V.shape != W.shape:
            raise ValueError(f"values must have the shape of W {W.shape}, got {V.shape}")
        lo, hi = im.get_clim()
        for (r, c), v in np.ndenumerate(V):
            dark = (W[r, c] - lo) < 0.5 * (hi - lo) if not signed else abs(W[r, c]) > 0.5 * hi
            ax.text(c, r, fmt.format(v), ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")
    if title:
        style.title(ax, title)
    if colorbar:
        fig.colorbar(im, ax=ax, shrink=0.8, label=label)
    return fig
