"""The explorer: one draw function, its controls, and the choice of renderer.

:class:`Explorer` holds ``draw(fig, **values)`` and the :class:`~attnlib.explorers.Control` s;
:meth:`Explorer.show` returns the live renderer (:class:`~attnlib.explorers.LiveExplorer`) or the
static one (:class:`~attnlib.explorers.StaticExplorer`), chosen by :func:`explorer_mode`: the
argument ``mode``, else the environment variable ``ATTNLIB_EXPLORER`` (the book's build sets it
to ``static``), else live. Both renderers call the same ``draw``, so they show the same figure.
``both`` returns the static explorer after building the live one too (its widgets and first
figure): the book's test run uses it, so that one execution of a chapter checks the live
explorer a reader gets in Jupyter and produces the static page the website shows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from ...plots import BookFigure
from .controls import Control
from .live import LiveExplorer
from .static import StaticExplorer

__all__ = ["ENV_VAR", "MODES", "Explorer", "explorer_mode"]

#: The environment variable that picks the renderer when ``mode`` is not given.
ENV_VAR = "ATTNLIB_EXPLORER"
MODES = ("live", "static", "both")


def explorer_mode(mode: str | None = None) -> str:
    """The rendering mode: ``mode`` if given, else ``$ATTNLIB_EXPLORER``, else ``"live"``."""
    if mode is None:
        mode = os.environ.get(ENV_VAR, "").strip().lower() or "live"
        source = f"environment variable {ENV_VAR}"
    else:
        source = "mode"
    if mode not in MODES:
        raise ValueError(f"{source} must be one of {MODES}, got {mode!r}")
    return mode


#: Slider names read as an iteration / time axis: they get a play button on the static page.
_TIME_AXES = ("iterations", "steps", "step", "time")


class Explorer:
    """An explorer: a draw function and its controls, shown live or static.

    Parameters
    ----------
    draw : callable
        ``draw(fig, **values)`` draws onto the empty :class:`matplotlib.figure.Figure` ``fig``.
        It may return ``update(**values) -> bool``, which changes the drawn figure in place into
        the figure of other values when it can (returning True; the same pixels as a fresh
        draw) and else returns False: the static renderer then skips clearing and redrawing.
    controls : sequence of Control
        The controls; their names are ``draw``'s keyword arguments.
    name : str
        Short name (used in the static HTML ids and the page).
    slider : str or sequence of str, optional
        The control(s) whose every value is rendered on the static site unless their
        ``static`` says otherwise (other controls: their ``static`` values, else the default).
        Default: the first control with more than one static value.
    figsize : (float, float)
        Figure size in inches.
    dpi : float
        Resolution of the live figure.
    static_dpi : float, optional
        Largest resolution of the static frames (lowered to fit ``max_bytes``); default:
        sharp on a 2x (retina) screen, ``max(160, 1800 / width in inches)`` (the figure at
        least 1800 pixels wide: twice a desktop column of 900 CSS px; a phone's stacked
        panels get at least 1.5 pixels per CSS pixel).
    max_bytes : float
        Size budget of the static HTML of this explorer.
    max_frames : int
        Most settings the static site may precompute (the product of the static values).
    caption : str, optional
        Shown above the static explorer: what to move, what to watch. It must hold at every
        setting; what depends on the setting goes in ``note``.
    note : callable, optional
        ``note(**values) -> str``: a line under the figure for this setting (numbers read
        from the data), on the static site and in the live status line.
    fps : float
        Frames per second of the static page's play button.
    play : str, optional
        The numeric control (an iteration or time axis) that a play/pause button on the
        static page steps through, stopping at its last value; default: the first slider
        named ``iterations``, ``steps``, ``step`` or ``time``; ``""``: no play button.
    margins : dict, optional
        ``Figure.subplots_adjust`` arguments (fixed margins; no layout engine, for speed).
    fast : str, optional
        The control the static renderer varies fastest from one frame to the next: the one
        whose change ``draw``'s update handles in place; default: ``play``, else the first
        slider.
    """

    def __init__(self, draw: Callable, controls: Sequence[Control], *, name: str = "explorer",
                 slider: str | Sequence[str] | None = None, figsize=(8.6, 3.6), dpi: float = 80,
                 static_dpi: float | None = None, max_bytes: float = 2.5e6, max_frames: int = 160,
                 caption: str = "", note: Callable | None = None, fps: float = 4.0,
                 margins: dict | None = None, play: str | None = None,
                 fast: str | None = None):
        if not callable(draw):
            raise ValueError(f"draw must be callable draw(fig, **values), got {type(draw)}")
        self.draw = draw
        self.controls = {c.name: c for c in controls}
        if len(self.controls) != len(controls):
            raise ValueError("controls must have distinct names")
        self.name = name
        self.figsize = tuple(figsize)
        self.dpi = dpi
        self.static_dpi = (float(static_dpi) if static_dpi is not None
                           else max(160.0, 1800.0 / self.figsize[0]))
        self.max_bytes = max_bytes
        self.max_frames = int(max_frames)
        self.caption = caption
        if note is not None and not callable(note):
            raise ValueError(f"note must be callable note(**values) -> str, got {type(note)}")
        self.note = note
        self.fps = fps
        # fixed margins, no layout engine: constrained layout triples the redraw time
        self.margins = {**dict(left=0.07, right=0.97, bottom=0.14, top=0.87, wspace=0.3,
                               hspace=0.35), **(margins or {})}
        if slider is None:
            slider = [c.name for c in controls if len(c.static_values(True)) > 1][:1]
        elif isinstance(slider, str):
            slider = [slider]
        for s in slider:
            if s not in self.controls:
                raise ValueError(f"slider must name controls among {list(self.controls)}, "
                                 f"got {s!r}")
        self.slider = list(slider)
        if play is None:
            play = next((s for s in self.slider if s in _TIME_AXES), "")
        if play and play not in self.controls:
            raise ValueError(f"play must name a control among {list(self.controls)}, "
                             f"got {play!r}")
        self.play = play
        fast = fast or play or (self.slider or list(self.controls) or [""])[0]
        if fast and fast not in self.controls:
            raise ValueError(f"fast must name a control among {list(self.controls)}, "
                             f"got {fast!r}")
        self.fast = fast

    # -- values --------------------------------------------------------------------------
    def defaults(self) -> dict:
        """The default value of every control."""
        return {k: c.default for k, c in self.controls.items()}

    def values(self, **overrides) -> dict:
        """All control values: the defaults, with ``overrides`` checked and applied."""
        vals = self.defaults()
        for k, v in overrides.items():
            if k not in self.controls:
                raise ValueError(f"unknown control {k!r}; controls are {list(self.controls)}")
            vals[k] = self.controls[k].resolve(v)
        return vals

    def label(self, values: dict, names=None) -> str:
        """``"name = value   ..."`` for the controls ``names`` (default: those that vary)."""
        if names is None:
            names = [k for k, c in self.controls.items() if len(c.values) > 1]
        return "   ".join(f"{self.controls[k].label or k} = {self.controls[k].show(values[k])}"
                          for k in names)

    # -- drawing -------------------------------------------------------------------------
    def draw_into(self, fig, values: dict, names=None):
        """Clear ``fig`` and draw the explorer for ``values``, with a settings line on top
        (``names``: the controls it lists, default those with several values; ``[]``: none,
        as on the static site, whose controls show their values beside them)."""
        fig.clear()
        fig.subplots_adjust(**self.margins)
        update = self.draw(fig, **values)
        # a draw function may return ``update(**values) -> bool``: it redraws the figure in
        # place for other values when it can (True; e.g. only the iteration moved), else
        # False. The static renderer uses it; the result must be the figure draw would make.
        fig.attnlib_update = update if callable(update) else None
        label = self.label(values, names)
        if label:
            fig.suptitle(label, fontsize=10, color="0.2")
        return fig

    def figure(self, **values) -> BookFigure:
        """A new figure for the given control values (defaults for the others)."""
        fig = BookFigure(figsize=self.figsize, dpi=self.dpi)
        return self.draw_into(fig, self.values(**values))

    # -- renderers -----------------------------------------------------------------------
    def live(self) -> LiveExplorer:
        """The live renderer (ipywidgets)."""
        return LiveExplorer(self)

    def static(self) -> StaticExplorer:
        """The static renderer (precomputed HTML players)."""
        return StaticExplorer(self)

    def show(self, mode: str | None = None):
        """Live widget or static HTML, by :func:`explorer_mode` (``both``: the live explorer
        is built and drawn, not shown, and the static one returned)."""
        mode = explorer_mode(mode)
        if mode == "live":
            return self.live()
        if mode == "both":
            self.live()
        return self.static()
