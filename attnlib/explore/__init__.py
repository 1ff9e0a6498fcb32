"""The explorer framework: one figure code, two renderers (live ipywidgets | static HTML).

It knows nothing of the book: the explorers of each paper live in :mod:`attnlib.explorers`
(and are shown with ``al.widgets.<name>(...)``).

An explorer is a draw function ``draw(fig, **values)`` that draws onto the empty matplotlib
:class:`~matplotlib.figure.Figure` it is given (``fig.subplots(...)``, then the functions of
:mod:`attnlib.plots`) and a list of :class:`Control` s, each a finite list of values with a
default::

    from attnlib.explore import Control, Explorer

    def draw(fig, lr, iterations):
        ax = fig.subplots()
        ...

    Explorer(draw, [Control("lr", (0.01, 0.1, 1.0), default=0.1),
                    Control("iterations", range(0, 201, 10), default=200)],
             name="my-explorer", slider="iterations").show()

In Jupyter, JupyterLab, Colab or VS Code :meth:`Explorer.show` returns a **live** explorer
(:class:`LiveExplorer`: sliders and dropdowns that redraw on every change; ``.update(**values)``
redraws as moving them would, ``.figure`` is the current figure). When the book is built,
``ATTNLIB_EXPLORER=static`` (``ENV_VAR``) makes the same call return a **static** explorer
(:class:`StaticExplorer`: the figure precomputed for every combination of the declared static
values, each control a control on the page with its value beside it, opening on the defaults;
no kernel, no network; ``.html`` is the page fragment). An
explicit ``mode="live"`` or ``mode="static"`` overrides the variable (:func:`explorer_mode`).

Modules
-------
- ``attnlib.explore.controls``: :class:`Control`, :func:`with_static` (the ``static=``
  argument of an explorer), :func:`format_value`, :func:`same_value`.
- ``attnlib.explore.explorer``: :class:`Explorer`, :func:`explorer_mode`, ``ENV_VAR``,
  ``MODES``.
- ``attnlib.explore.live``: :class:`LiveExplorer`, :func:`show_progress` (pass it as
  ``progress=`` to a computation run inside a redraw), :func:`png_bytes`.
- ``attnlib.explore.static``: :class:`StaticExplorer`, :func:`frame_key`, :func:`png_panels`.

Design
------
Expensive work (training, SVM solves) belongs to the experiments, not to the draw function:
an explorer reads its data from a cached result and a control change only redraws. A redraw
takes 0.2-0.3 s, so sliders redraw on release (``continuous=False``), margins are fixed (no
layout engine) and legends have fixed locations.
"""

from .controls import Control, format_value, same_value, with_static
from .explorer import ENV_VAR, MODES, Explorer, explorer_mode
from .live import LiveExplorer, png_bytes, show_progress
from .static import StaticExplorer, frame_key, png_panels

__all__ = [
    "ENV_VAR", "MODES", "Control", "Explorer", "LiveExplorer", "StaticExplorer",
    "explorer_mode", "format_value", "frame_key", "png_bytes", "png_panels", "same_value",
    "show_progress", "with_static",
]
