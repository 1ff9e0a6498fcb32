"""The live renderer: ipywidgets controls that redraw the figure on every change.

The figure is shown as an ``ipywidgets.Image`` (PNG bytes: no flicker, any matplotlib
backend), with a status line ("computing..." before a redraw, the redraw time after) and an
``Output`` area where progress bars of long computations appear (:func:`show_progress`).
"""

from __future__ import annotations

import contextvars
import functools
import html
import io
import time

from ...plots import BookFigure

__all__ = ["LiveExplorer", "png_bytes", "show_progress"]

#: True while a live explorer redraws: long computations then show a bar in its Output area
_LIVE = contextvars.ContextVar("attnlib_live_explorer", default=False)


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes (at the figure's own dpi)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def show_progress() -> bool:
    """Whether a computation should show a progress bar: only inside a live redraw in a
    Jupyter kernel (the bar goes to the explorer's Output area; elsewhere it would be noise
    on stderr). Pass it as ``progress=show_progress()`` to :func:`attnlib.train` and friends."""
    if not _LIVE.get():
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


class LiveExplorer:
    """The live renderer: ipywidgets controls, the figure as an Image widget, a status line.

    ``update(**values)`` sets controls and redraws (as moving them would) and returns the
    figure; ``.figure`` is the current figure, ``.png`` its bytes, ``.widgets`` the controls,
    ``.seconds`` the last redraw time.
    """

    def __init__(self, explorer):
        import ipywidgets as w

        self.explorer = explorer
        self.state = explorer.defaults()
        self.figure = BookFigure(figsize=explorer.figsize, dpi=explorer.dpi)
        self.widgets = {k: c.widget() for k, c in explorer.controls.items()}
        self.image = w.Image(format="png", layout=w.Layout(max_width="100%"))
        self.status = w.HTML(value="")
        self.output = w.Output()
        self._syncing = False
        for k, wid in self.widgets.items():
            wid.observe(functools.partial(self._on_change, k), names="value")
        controls = w.HBox(list(self.widgets.values()), layout=w.Layout(flex_flow="row wrap"))
        self.box = w.VBox([controls, self.status, self.image, self.output])
        self.png = b""
        self.seconds = float("nan")
        self.redraw()

    def redraw(self):
        """Recompute (when needed) and redraw the figure for the current state."""
        self.status.value = "<i>computing...</i>"
        t0 = time.perf_counter()
        token = _LIVE.set(True)
        try:
            with self.output:
                self.explorer.draw_into(self.figure, self.state)
        finally:
            _LIVE.reset(token)
        self.png = png_bytes(self.figure)
        self.image.value = self.png
        self.seconds = time.perf_counter() - t0
        note = self.explorer.note(**self.state) if self.explorer.note else ""
        self.status.value = (f"{html.escape(note)} " if note else "") + \
            f"<small>(drawn in {self.seconds:.2f} s)</small>"
        return self.figure

    def update(self, **values):
        """Set controls (checked) and redraw; returns the figure."""
        new = self.explorer.values(**{**self.state, **values})
        self.state = new
        self._syncing = True
        try:
            for k, v in new.items():
                self.widgets[k].value = v
        finally:
            self._syncing = False
        return self.redraw()

    def _on_change(self, name, change):
        if self._syncing:
            return
        self.state[name] = change["new"]
        try:
            self.redraw()
        except Exception as err:  # a bad setting must not kill the widget: say it
            self.status.value = (f"<span style='color:#b00'>{type(err).__name__}: "
                                 f"{html.escape(str(err))}</span>")

    def _ipython_display_(self, **kwargs):
        """Show the widget box (ipywidgets 7, Colab's, has no ``_repr_mimebundle_``)."""
        from IPython.display import display

        display(self.box)

    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)

    def __repr__(self):
        return f"LiveExplorer({self.explorer.name!r}, {self.state})"
