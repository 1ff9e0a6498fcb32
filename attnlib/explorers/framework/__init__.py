"""The explorer framework: one figure code, two renderers (live ipywidgets | static HTML).

It knows nothing of the book (the explorers of each paper are the other modules of
:mod:`attnlib.explorers`). Its public names are those of :mod:`attnlib.explorers`
(``from attnlib.explorers import Control, Explorer``).

Modules
-------
- ``controls``: :class:`~attnlib.explorers.Control`, :func:`~attnlib.explorers.with_static`
  (the ``static=`` argument of an explorer), :func:`~attnlib.explorers.format_value`,
  :func:`~attnlib.explorers.same_value`.
- ``explorer``: :class:`~attnlib.explorers.Explorer`,
  :func:`~attnlib.explorers.explorer_mode`, ``ENV_VAR``, ``MODES``.
- ``live``: :class:`~attnlib.explorers.LiveExplorer`,
  :func:`~attnlib.explorers.show_progress` (pass it as ``progress=`` to a computation run
  inside a redraw), :func:`~attnlib.explorers.png_bytes`.
- ``static``: :class:`~attnlib.explorers.StaticExplorer`,
  :func:`~attnlib.explorers.frame_key`, :func:`~attnlib.explorers.png_panels`.
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
