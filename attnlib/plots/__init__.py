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
  :func:`norm_curves`): quantities against the iteration, the median over trials with its
  10-90% quantile band (:func:`quantile_band`; safe on a log axis) (chapters 2-10).
* :func:`histogram`: distributions, e.g. of :math:`|W_{jk}|` for the sparsity of mirror
  descent (chapter 9).
* :func:`sweep_curves`: a swept quantity against a size (n, T or d), one curve per setting, the
  current point marked (chapter 6).
* :func:`matrix_image`: a matrix as a signed colour image (chapters 5, 9).

The book's one colour scheme is ``attnlib.plots.style.PALETTE`` (a colour per role: target,
other, support, W, (K,Q), ...), the curve cycle ``COLORS`` and the colour maps; figures and
explorers take their colours from there (:func:`palette_hex` gives them to a browser explorer).

Modules: ``attnlib.plots.style`` (:class:`BookFigure`, :func:`new_figure`, :func:`title`,
:func:`log_y`, :func:`square_view`, the colours, the array checks), ``attnlib.plots.plane``
(the token plane) and ``attnlib.plots.charts`` (curves, sweeps, histograms, matrices).
"""

from .charts import (
    correlation_curves,
    curves,
    histogram,
    matrix_image,
    norm_curves,
    probability_curves,
    quantile_band,
    sweep_curves,
)
from .plane import rays, token_names, token_plane, token_scatter, trajectories
from .style import (
    BAND_QUANTILES,
    BAND_TITLE,
    COLORS,
    MARKERS,
    PALETTE,
    READABLE_PT,
    SCORE_CMAP,
    SEQUENCE_CMAP,
    SIGNED_CMAP,
    BookFigure,
    color_of,
    log_y,
    new_figure,
    palette_hex,
    readable,
    scaled_labels,
    sequence_colors,
    square_view,
    title,
)

__all__ = [
    "BookFigure", "new_figure", "title", "log_y", "square_view", "token_scatter", "rays",
    "trajectories", "token_plane", "curves", "correlation_curves", "probability_curves",
    "norm_curves", "histogram", "sweep_curves", "matrix_image", "COLORS", "MARKERS",
    "SCORE_CMAP", "PALETTE", "SEQUENCE_CMAP", "SIGNED_CMAP", "BAND_QUANTILES", "color_of",
    "palette_hex", "sequence_colors", "quantile_band", "token_names", "BAND_TITLE",
    "READABLE_PT", "readable", "scaled_labels",
]
