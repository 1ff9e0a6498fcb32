"""The book's plotting style: figures without pyplot, colours, axes helpers, array checks.

:class:`BookFigure` shows itself as a PNG in Jupyter (no global figure registry, nothing to
close); :func:`new_figure` is ``plt.subplots`` for it. The helpers here keep redraws fast (an
explorer redraws in 0.2-0.3 s): :func:`title` at a fixed height, :func:`log_y` without mathtext
labels, fixed square limits (:func:`square_view`). :func:`as_array`, :func:`as_points` and
:func:`target_axes` are the input checks and the ``ax=`` convention of every drawing function.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from .._validate import to_numpy

__all__ = ["COLORS", "MARKERS", "PALETTE", "SCORE_CMAP", "SEQUENCE_CMAP", "SIGNED_CMAP",
           "BAND_QUANTILES", "BAND_TITLE", "BookFigure", "FONT_KEY", "as_array", "as_points",
           "band_label", "color_of", "READABLE_PT", "readable",
           "log_y", "new_figure", "palette_hex", "plane_labels", "power_label", "power_ticks",
           "sequence_colors",
           "scaled_labels", "square_view", "target_axes", "title"]

#: The book's one colour scheme, shared by every figure and every explorer (the explorers read
#: it from here; a browser explorer gets it as hex from ``palette_hex``). One colour per
#: role: red = the (globally) optimal / target direction, the first query or curve; blue = the
#: other one. The W / (K,Q) colours follow the Transformers-as-SVMs paper (W blue, (K,Q) red).
PALETTE = {
    "target": "#d62728",    # red: optimal token, global / target direction, query 1
    "other": "#1f77b4",     # blue: the other direction, query 2
    "third": "#2ca02c",     # green: a third curve
    "support": "#ff7f0e",   # orange: support tokens, distractors, "leaves its cone"
    "W": "#1f77b4",         # the W parameterisation
    "KQ": "#d62728",        # the (K,Q) parameterisation
    "path": "#595959",      # gradient-descent paths drawn in one colour
    "neutral": "#b3b3b3",   # "other" / not reached / masked
    "ink": "#333333",       # token edges, reference lines
    "axis": "#d9d9d9",      # the axes through 0 in the token plane
}
#: The colour cycle of curves (red, blue, green, orange, purple, brown, pink, olive, cyan, grey).
COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
          "#bcbd22", "#17becf", "#7f7f7f")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
SCORE_CMAP = "viridis"      # continuous values: scores, attention
SEQUENCE_CMAP = "viridis"   # ordered discrete settings (radii R, widths mu): light to dark
SIGNED_CMAP = "RdBu_r"      # signed matrices, symmetric around 0
#: Bands over trials: the median with the 10-90% quantile band. A quantile of positive values
#: is positive, so the band stays on a log axis (a mean - std band does not when std > mean).
BAND_QUANTILES = (0.1, 0.9)
BAND_TITLE = "median over runs, band 10-90%"


def color_of(role):
    """The colour of a role of ``PALETTE`` (``"target"``, ``"W"``, ...) or of curve ``j``."""
    if isinstance(role, (int, np.integer)):
        return COLORS[int(role) % len(COLORS)]
    if role not in PALETTE:
        raise ValueError(f"role must be one of {sorted(PALETTE)} or an int, got {role!r}")
    return PALETTE[role]


def palette_hex():
    """The scheme as plain data for a browser explorer: ``{"roles": {...}, "cycle": [...],
    "markers": [...], "score_cmap": name}`` (all colours ``#rrggbb``)."""
    return {"roles": dict(PALETTE), "cycle": list(COLORS), "markers": list(MARKERS),
            "score_cmap": SCORE_CMAP}


def sequence_colors(k):
    """``k`` colours for ordered discrete settings (e.g. radii), light (first) to dark (last)."""
    import matplotlib

    if int(k) < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    cmap = matplotlib.colormaps[SEQUENCE_CMAP]
    return [cmap(0.85 - 0.85 * j / max(int(k) - 1, 1)) for j in range(int(k))]


def band_label(label):
    """A curve's label that says it is a median with its quantile band (for a legend entry
    outside ``curves``, whose legend says it once, in its title: ``BAND_TITLE``)."""
    lo, hi = BAND_QUANTILES
    return f"{label} (median, {100 * lo:.0f}-{100 * hi:.0f}%)"


def plane_labels(ax, what="x"):
    """Axis labels of the token plane: the two coordinates of the tokens ``x_it`` (and of
    anything drawn in the same plane: p, W z_i). Existing labels are kept."""
    if not ax.get_xlabel():
        ax.set_xlabel(f"first coordinate of {what}")
    if not ax.get_ylabel():
        ax.set_ylabel(f"second coordinate of {what}")


#: The PNG text key under which :class:`BookFigure` records its smallest font size (points), so
#: that the site's browser test can check that every figure's text stays readable on a phone.
FONT_KEY = "attnlib:min_font_pt"


def _png_with_text(png: bytes, key: str, value: str) -> bytes:
    """``png`` with a ``tEXt`` chunk ``key = value`` right after its header chunk."""
    import struct
    import zlib

    data = key.encode("latin-1") + b"\0" + value.encode("latin-1")
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data
    chunk += struct.pack(">I", zlib.crc32(b"tEXt" + data) & 0xFFFFFFFF)
    end_of_header = 8 + 8 + 13 + 4  # signature, IHDR length + type, IHDR data, its CRC
    return png[:end_of_header] + chunk + png[end_of_header:]


class BookFigure(Figure):
    """A matplotlib Figure that displays itself as a PNG in Jupyter (no pyplot needed).

    The PNG records the smallest font size of the figure's visible text (points) under
    ``FONT_KEY``.
    """

    def min_font_pt(self) -> float | None:
        """The smallest font size (points) of the figure's visible, non-empty text, as drawn
        by its last rendering (None before any rendering or without text)."""
        from matplotlib.text import Text

        sizes = [t.get_fontsize() for t in self.findobj(Text)
                 if t.get_visible() and t.get_text().strip() and t.figure is self]
        return min(sizes) if sizes else None

    def _repr_png_(self):
        import io

        buf = io.BytesIO()
        self.savefig(buf, format="png", bbox_inches="tight")  # draws: tick labels exist now
        pt = self.min_font_pt()
        png = buf.getvalue()
        return png if pt is None else _png_with_text(png, FONT_KEY, f"{pt:g}")


#: The smallest font size (points) of a chapter figure: a figure at most 9 inches wide keeps its
#: text legible at a phone's width (the site shows figures at their natural size there).
READABLE_PT = 11.0


def readable(fig, size: float = READABLE_PT):
    """Raise every text of ``fig`` (titles, labels, tick labels, legends, annotations, inset
    axes) to at least ``size`` points; return ``fig``. Every chapter figure ends with it."""
    from matplotlib.text import Text

    axes = list(fig.axes)
    for ax in list(axes):
        axes.extend(ax.child_axes)
    for ax in axes:
        ax.tick_params(labelsize=size)
    for text in fig.findobj(Text):
        if text.get_fontsize() < size:
            text.set_fontsize(size)
    return fig


def title(ax, text, fontsize=10):
    """An axes title at a fixed height (matplotlib's automatic placement measures every tick
    label: a third of a redraw)."""
    ax.set_title(text, fontsize=fontsize, y=1.0, pad=4)


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_label(y, _pos=None) -> str:
    """Tick label of a log axis as a power of ten: 1, 10⁻¹, 10⁻², ... (plain text with
    superscript digits: it lays out as fast as a raw ``1e-2`` and reads like the papers'
    axes); a tick that is no power of ten keeps its ``%g`` form."""
    if y <= 0:
        return ""
    e = np.log10(y)
    if abs(e - round(e)) > 1e-9:
        return f"{y:g}"
    e = int(round(e))
    return "1" if e == 0 else "10" + str(e).translate(_SUPERSCRIPT)


def power_ticks(ax):
    """Label the log y axis of ``ax`` 1, 10⁻¹, 10⁻², ... (``power_label``)."""
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(power_label))


def log_y(ax):
    """Log y axis labelled 1, 10⁻¹, 10⁻², ... (``power_label``), without mathtext and
    minor ticks (both are slow to lay out)."""
    from matplotlib.ticker import LogLocator, NullLocator

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10.0, numticks=7))
    power_ticks(ax)
    ax.yaxis.set_minor_locator(NullLocator())


def square_view(ax, pts, pad=0.1, margin=0.3):
    """Equal-aspect square limits around the points ``pts`` (k, 2).

    The square is centred on the points' bounding box; its half side is half the box's larger
    side times ``1 + pad``, plus ``margin`` (so a single point still gets a view).
    """
    pts = as_points(pts, "pts", 2)  # (k, 2)
    lo, hi = pts.min(0), pts.max(0)
    c, r = (lo + hi) / 2, (hi - lo).max() / 2 * (1 + pad) + margin
    ax.set_xlim(c[0] - r, c[0] + r)
    ax.set_ylim(c[1] - r, c[1] + r)
    ax.set_aspect("equal", adjustable="box")


def scaled_labels(ax, xlabel: str, ylabel: str, most: int = 4):
    """Axis labels that carry the axes' power of ten, ``W[9,8] (×10¹⁴)``, when the current
    limits reach beyond ``10 ** most``: the ticks then read -4 ... 0 instead of
    matplotlib's offset text "1e14", which sits at the axes' top left, under a title.

    Call it once the limits are set (a later change of limits keeps the scale)."""
    from matplotlib.ticker import FuncFormatter

    for axis, lim, label, setter in ((ax.xaxis, ax.get_xlim(), xlabel, ax.set_xlabel),
                                     (ax.yaxis, ax.get_ylim(), ylabel, ax.set_ylabel)):
        top = float(np.max(np.abs(lim)))
        e = int(np.floor(np.log10(top))) if np.isfinite(top) and top > 0 else 0
        if e <= most:
            setter(label)
            continue
        scale = 10.0 ** e
        axis.set_major_formatter(FuncFormatter(lambda v, _pos, s=scale: f"{v / s:g}"))
        setter(f"{label} (×10{str(e).translate(_SUPERSCRIPT)})")


def new_figure(nrows=1, ncols=1, *, figsize=None, **subplot_kw):
    """A :class:`BookFigure` with a grid of axes: returns ``(fig, axes)`` like ``plt.subplots``."""
    if figsize is None:
        figsize = (3.6 * ncols + 0.4, 3.2 * nrows)
    fig = BookFigure(figsize=figsize, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True, **subplot_kw)
    return fig, axes


def _on_host(a):
    """``a`` with every tensor in it (also inside lists and tuples) as a numpy array."""
    if isinstance(a, (list, tuple)):
        return [_on_host(x) for x in a]
    return to_numpy(a) if hasattr(a, "detach") else a


def as_array(a, name="array"):
    """``a`` (a torch tensor on any device, a numpy array, or a list of these or of numbers)
    as a float numpy array."""
    if a is None:
        return None
    try:
        return np.asarray(_on_host(a), dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric array-like, got {type(a).__name__}") from err


def target_axes(ax, figsize=None):
    """``(figure, ax)``: the given axes, or a new figure with one axes."""
    if ax is None:
        fig, ax = new_figure(figsize=figsize or (4.2, 3.6))
    return ax.figure, ax


def as_points(a, name, ndim):
    """Check that ``a`` has ``ndim`` dimensions (adding leading ones) and a last dimension 2."""
    a = as_array(a, name)
    while a.ndim < ndim:
        a = a[None]
    if a.ndim != ndim or a.shape[-1] != 2:
        raise ValueError(f"{name} must have shape (..., 2) with at most {ndim} dims, "
                         f"got {tuple(a.shape)}")
    return a
