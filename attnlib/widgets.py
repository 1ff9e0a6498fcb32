"""Explorers: one figure code, two renderers (live ipywidgets | static HTML for the website).

Usage (for chapter authors)
---------------------------
One short call per explorer, in a code cell tagged ``explorer``::

    import attnlib as al
    al.widgets.token_plane(example="e1-local")

In Jupyter, JupyterLab, Colab or VS Code this cell shows **live** controls (sliders, dropdowns)
that recompute with attnlib on every change. When the book is built, the build sets
``ATTNLIB_EXPLORER=static`` and the same cell renders a **static** explorer: the figure is
precomputed over a declared grid of control settings and played by matplotlib's
``FuncAnimation.to_jshtml`` player (a slider with buttons, frames embedded as PNG, no kernel, no
network). Controls not on the slider become panels: one folded ``<details>`` block per setting,
the default one open. An explicit ``mode="live"`` or ``mode="static"`` overrides the variable.

Every explorer takes, besides its own settings, ``mode=None`` and returns an object that
displays itself (``LiveExplorer`` or ``StaticExplorer``). Its keyword arguments set the
*default* value of a control (``token_plane(loss="exp")``); a control's values are then the
declared list. ``.figure`` (live) is the current matplotlib figure, ``.update(**values)``
(live) redraws as a slider move would, ``.html`` (static) is the page fragment.

Explorers of the book (see each docstring):

============================  ===========================================================
:func:`token_plane`           chapters 1-4: tokens, scores, GD paths of ``p``, SVM rays
:func:`parameterisation`      chapter 5: ``W`` vs ``(K, Q)``, Frobenius vs nuclear
:func:`selection`             chapter 3: which selections are locally optimal
:func:`mirror_descent`        chapter 9: the exponent ``lp``, sparsity, Bregman curve
:func:`sweep`                 chapter 6: precomputed sweep curves over ``(n, T, d)``
============================  ===========================================================

Making a new explorer
---------------------
Write a draw function ``draw(fig, **values)`` that draws onto the empty matplotlib
:class:`~matplotlib.figure.Figure` it is given (``fig.subplots(...)`` then the functions of
:mod:`attnlib.plots`), declare the controls, and show::

    def draw(fig, lr, iterations):
        ax = fig.subplots()
        ...

    Explorer(draw, [Control("lr", (0.01, 0.1, 1.0), default=0.1),
                    Control("iterations", range(0, 201, 10), default=200)],
             name="my-explorer", slider="iterations").show()

Design
------
* One mechanism (:class:`Explorer`): the draw function and the controls; each control is a
  finite list of values with a default (``static=`` picks the subset rendered on the site).
  Live and static call the same ``draw``, so they show the same figure.
* Training is expensive, drawing is cheap: explorers cache their data (``functools.lru_cache``)
  keyed by the settings that need a recomputation, and train all initialisations (or all
  values of a control) as the trials dimension of ONE batched :func:`attnlib.train` call. A
  slider over iterations or over initialisations only redraws.
* Live: ``ipywidgets`` controls, the figure shown as an ``ipywidgets.Image`` (PNG bytes; no
  flicker, works with any matplotlib backend), a status line that says "computing..." before a
  recomputation and the redraw time after, an ``Output`` area for progress bars; sliders whose
  change retrains use ``continuous_update=False``.
* Static: ``FuncAnimation(fig, ...).to_jshtml()``, then made deterministic and offline: the
  random 32-hex ids are replaced by ids derived from the explorer's name and a counter, the
  font-awesome stylesheet link (a network request) is removed and the button icons become
  plain characters. The frame resolution is lowered until the explorer fits ``max_bytes``
  (default 2 MB, so a page with two explorers stays under 5 MB).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import hashlib
import html as _html
import io
import itertools
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from . import data as D
from . import plots
from . import svm as SV
from . import tokens as TK
from . import train as TR
from .plots import BookFigure

ENV_VAR = "ATTNLIB_EXPLORER"
MODES = ("live", "static")

__all__ = [
    "ENV_VAR", "MODES", "Control", "Explorer", "LiveExplorer", "StaticExplorer",
    "explorer_mode", "token_plane", "TOKEN_EXAMPLES",
]


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


def _fmt(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    return str(v)


@dataclass(frozen=True)
class Control:
    """One control of an explorer: a name, its finite list of values, a default.

    Parameters
    ----------
    name : str
        Keyword passed to the draw function.
    values : sequence
        The values the control can take (numbers give a slider, strings a dropdown or toggle
        buttons, booleans a checkbox).
    default : optional
        Initial value (default: the first value). Must be one of ``values``.
    label : str, optional
        Text shown beside the control (default: ``name``).
    static : sequence, optional
        The values rendered on the static site (default: all values for a slider control,
        only the default for the others).
    continuous : bool
        Live mode: redraw while a slider is dragged (for cheap controls), else on release.
    """

    name: str
    values: tuple
    default: Any = None
    label: str | None = None
    static: tuple | None = None
    continuous: bool = False

    def __post_init__(self):
        vals = tuple(self.values)
        if not vals:
            raise ValueError(f"control {self.name!r}: values must be a non-empty sequence")
        object.__setattr__(self, "values", vals)
        if self.default is None:
            object.__setattr__(self, "default", vals[0])
        self.check(self.default, "default")
        if self.static is not None:
            st = tuple(self.static)
            for v in st:
                self.check(v, "static")
            object.__setattr__(self, "static", st)

    def check(self, value, what="value"):
        """Raise ValueError unless ``value`` is one of the control's values."""
        if not any(_same(value, v) for v in self.values):
            shown = ", ".join(_fmt(v) for v in self.values[:12])
            more = ", ..." if len(self.values) > 12 else ""
            raise ValueError(f"{self.name} ({what}) must be one of [{shown}{more}], "
                             f"got {value!r}")
        return next(v for v in self.values if _same(value, v))

    def widget(self):
        """The ipywidgets control for this control (imported lazily)."""
        import ipywidgets as w

        desc = self.label or self.name
        style = {"description_width": "initial"}
        if all(isinstance(v, bool) for v in self.values):
            return w.Checkbox(value=bool(self.default), description=desc, style=style,
                              indent=False)
        if all(isinstance(v, (int, float, np.integer, np.floating)) for v in self.values):
            opts = [(_fmt(v), v) for v in self.values]
            return w.SelectionSlider(options=opts, value=self.default, description=desc,
                                     continuous_update=self.continuous, style=style,
                                     layout=w.Layout(width="340px"))
        opts = [(_fmt(v), v) for v in self.values]
        if len(self.values) <= 4 and sum(len(_fmt(v)) for v in self.values) <= 40:
            return w.ToggleButtons(options=opts, value=self.default, description=desc,
                                   style={**style, "button_width": "auto"})
        return w.Dropdown(options=opts, value=self.default, description=desc, style=style)


def _same(a, b) -> bool:
    if isinstance(a, (float, int, np.floating, np.integer)) and not isinstance(a, bool) and \
            isinstance(b, (float, int, np.floating, np.integer)) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return type(a) is type(b) and a == b


class Explorer:
    """An explorer: a draw function and its controls, shown live or static.

    Parameters
    ----------
    draw : callable
        ``draw(fig, **values)`` draws onto the empty :class:`matplotlib.figure.Figure` ``fig``.
    controls : sequence of Control
        The controls; their names are ``draw``'s keyword arguments.
    name : str
        Short name (used in the static HTML ids and the page).
    slider : str or sequence of str, optional
        Control(s) played by the static player's slider (several are flattened, the last
        varying fastest). Default: the first control with more than one static value.
    figsize : (float, float)
        Figure size in inches.
    dpi : float
        Resolution of the live figure.
    static_dpi : float
        Largest resolution of the static frames (lowered to fit ``max_bytes``).
    max_bytes : float
        Size budget of the static HTML of this explorer.
    caption : str, optional
        One sentence shown above the static player (what to move, what to watch).
    fps : float
        Frames per second of the static player's play button.
    margins : dict, optional
        ``Figure.subplots_adjust`` arguments (fixed margins; no layout engine, for speed).
    """

    _counter = itertools.count()

    def __init__(self, draw: Callable, controls: Sequence[Control], *, name: str = "explorer",
                 slider: str | Sequence[str] | None = None, figsize=(8.6, 3.6), dpi: float = 80,
                 static_dpi: float = 72, max_bytes: float = 2.0e6, caption: str = "",
                 fps: float = 4.0, margins: dict | None = None):
        if not callable(draw):
            raise ValueError(f"draw must be callable draw(fig, **values), got {type(draw)}")
        self.draw = draw
        self.controls = {c.name: c for c in controls}
        if len(self.controls) != len(controls):
            raise ValueError("controls must have distinct names")
        self.name = name
        self.figsize = tuple(figsize)
        self.dpi = dpi
        self.static_dpi = static_dpi
        self.max_bytes = max_bytes
        self.caption = caption
        self.fps = fps
        # fixed margins, no layout engine: constrained layout triples the redraw time
        self.margins = {**dict(left=0.07, right=0.97, bottom=0.14, top=0.87, wspace=0.3,
                               hspace=0.35), **(margins or {})}
        if slider is None:
            multi = [c.name for c in controls if len(self._static_values(c, True)) > 1]
            slider = multi[:1]
        elif isinstance(slider, str):
            slider = [slider]
        for s in slider:
            if s not in self.controls:
                raise ValueError(f"slider must name controls among {list(self.controls)}, "
                                 f"got {s!r}")
        self.slider = list(slider)

    # -- values --------------------------------------------------------------------------
    def defaults(self) -> dict:
        return {k: c.default for k, c in self.controls.items()}

    def values(self, **overrides) -> dict:
        """All control values: the defaults, with ``overrides`` checked and applied."""
        vals = self.defaults()
        for k, v in overrides.items():
            if k not in self.controls:
                raise ValueError(f"unknown control {k!r}; controls are {list(self.controls)}")
            vals[k] = self.controls[k].check(v)
        return vals

    def _static_values(self, c: Control, as_slider: bool) -> tuple:
        if c.static is not None:
            return c.static
        return c.values if as_slider else (c.default,)

    def label(self, values: dict, names=None) -> str:
        """``"name = value · ..."`` for the controls ``names`` (default: those that vary)."""
        if names is None:
            names = [k for k, c in self.controls.items() if len(c.values) > 1]
        return "   ".join(f"{self.controls[k].label or k} = {_fmt(values[k])}" for k in names)

    # -- drawing -------------------------------------------------------------------------
    def draw_into(self, fig, values: dict, names=None):
        """Clear ``fig`` and draw the explorer for ``values`` (with a settings line on top)."""
        fig.clear()
        fig.subplots_adjust(**self.margins)
        self.draw(fig, **values)
        fig.suptitle(self.label(values, names), fontsize=8.5, color="0.3")
        return fig

    def figure(self, **values) -> BookFigure:
        """A new figure for the given control values (defaults for the others)."""
        fig = BookFigure(figsize=self.figsize, dpi=self.dpi)
        return self.draw_into(fig, self.values(**values))

    # -- renderers -----------------------------------------------------------------------
    def live(self) -> LiveExplorer:
        return LiveExplorer(self)

    def static(self) -> StaticExplorer:
        return StaticExplorer(self)

    def show(self, mode: str | None = None):
        """Live widget or static HTML, by :func:`explorer_mode`."""
        return self.live() if explorer_mode(mode) == "live" else self.static()


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


class LiveExplorer:
    """The live renderer: ipywidgets controls, the figure as an Image widget, a status line.

    ``update(**values)`` sets controls and redraws (as moving them would) and returns the
    figure; ``.figure`` is the current figure, ``.png`` its bytes, ``.widgets`` the controls.
    """

    def __init__(self, explorer: Explorer):
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
        with self.output:
            self.explorer.draw_into(self.figure, self.state)
        self.png = _png(self.figure)
        self.image.value = self.png
        self.seconds = time.perf_counter() - t0
        self.status.value = f"<small>drawn in {self.seconds:.2f} s</small>"
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
                                 f"{_html.escape(str(err))}</span>")

    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)

    def __repr__(self):
        return f"LiveExplorer({self.explorer.name!r}, {self.state})"


_ICONS = {"minus": "&minus;", "fast-backward": "|&#9664;&#9664;", "step-backward": "|&#9664;",
          "play fa-flip-horizontal": "&#9664;", "pause": "||", "play": "&#9654;",
          "step-forward": "&#9654;|", "fast-forward": "&#9654;&#9654;|", "plus": "+"}


def _sanitize(html: str, uid: str) -> str:
    """Offline and deterministic: no font-awesome link, text icons, fixed ids."""
    html = re.sub(r"<link[^>]*font-awesome[^>]*>", "", html, flags=re.S)
    html = re.sub(r'<i class="fa fa-([a-z -]+)"></i>', lambda m: _ICONS.get(m.group(1), "?"),
                  html)
    ids = set(re.findall(r"[0-9a-f]{32}", html))
    for old in ids:
        html = html.replace(old, uid)
    html = html.replace('<img id="_anim_img', '<img style="max-width:100%" id="_anim_img')
    return html


@dataclass
class _Panel:
    label: str
    values: dict
    html: str = ""
    frames: int = 0


class StaticExplorer:
    """The static renderer: precomputed frames in ``to_jshtml`` players (no kernel needed).

    Attributes
    ----------
    html : str
        The page fragment (players, one ``<details>`` panel per non-slider setting).
    panels : list
        The panels, each with its settings and frame count.
    dpi : float
        The frame resolution used (lowered to fit ``max_bytes``).
    """

    def __init__(self, explorer: Explorer):
        from matplotlib.animation import FuncAnimation

        ex = self.explorer = explorer
        slider = ex.slider
        frames = [dict(zip(slider, combo)) for combo in
                  itertools.product(*(ex._static_values(ex.controls[s], True) for s in slider))]
        others = [k for k in ex.controls if k not in slider]
        panel_names = [k for k in others if len(ex._static_values(ex.controls[k], False)) > 1]
        combos = itertools.product(*(ex._static_values(ex.controls[k], False) for k in others))
        self.panels = []
        for combo in combos:
            vals = dict(zip(others, combo))
            self.panels.append(_Panel(ex.label(vals, panel_names) if panel_names else "", vals))
        n_frames = len(frames) * len(self.panels)
        shown = slider + panel_names
        self.dpi = self._fit_dpi(frames, n_frames, shown)
        self.t_render = time.perf_counter()
        uid0 = next(Explorer._counter)
        for j, panel in enumerate(self.panels):
            fig = BookFigure(figsize=ex.figsize, dpi=self.dpi)

            def update(fr, panel=panel, fig=fig):
                ex.draw_into(fig, {**panel.values, **fr}, shown)

            anim = FuncAnimation(fig, update, frames=frames, interval=1000.0 / ex.fps,
                                 repeat=False, cache_frame_data=False)
            raw = anim.to_jshtml(default_mode="once")
            key = f"{ex.name}|{panel.label}|{uid0}|{j}".encode()
            panel.html = _sanitize(raw, hashlib.sha1(key).hexdigest()[:32])
            panel.frames = len(frames)
        self.t_render = time.perf_counter() - self.t_render
        self.html = self._assemble()
        self.nbytes = len(self.html.encode())

    def _fit_dpi(self, frames, n_frames, shown) -> float:
        """Largest dpi <= static_dpi whose estimated total size fits max_bytes."""
        ex = self.explorer
        dpi = float(ex.static_dpi)
        fig = BookFigure(figsize=ex.figsize, dpi=dpi)
        ex.draw_into(fig, {**self.panels[0].values, **frames[-1]}, shown)
        one = len(base64.b64encode(_png(fig))) * 1.05
        est = one * n_frames + 12_000 * len(self.panels)
        if est > ex.max_bytes:
            dpi = max(36.0, dpi * math.sqrt(ex.max_bytes / est) * 0.92)
        return round(dpi, 1)

    def _assemble(self) -> str:
        ex = self.explorer
        names = ", ".join(ex.controls[s].label or s for s in ex.slider)
        head = (f'<div class="attnlib-explorer" data-explorer="{_html.escape(ex.name)}">'
                f'<p class="attnlib-explorer-caption"><b>Explorer.</b> '
                f'{_html.escape(ex.caption)} Move the slider to change <i>{names}</i>'
                + ("; open a panel below for another setting." if len(self.panels) > 1 else ".")
                + "</p>")
        if len(self.panels) == 1:
            return head + self.panels[0].html + "</div>"
        parts = [head]
        default = ex.defaults()
        for p in self.panels:
            is_default = all(_same(v, default[k]) for k, v in p.values.items())
            parts.append(f'<details class="attnlib-panel"{" open" if is_default else ""}>'
                         f"<summary>{_html.escape(p.label)}</summary>{p.html}</details>")
        return "\n".join(parts) + "</div>"

    def _repr_html_(self):
        return self.html

    def __repr__(self):
        return (f"StaticExplorer({self.explorer.name!r}, panels={len(self.panels)}, "
                f"frames={sum(p.frames for p in self.panels)}, {self.nbytes / 1e6:.2f} MB)")


# The book's explorers ---------------------------------------------------------------------
# Each: a cached data function (keyed by the settings that need training; all initialisations
# are the trials of ONE train call), a draw function built from attnlib.plots, and a public
# function that declares the controls.


@contextlib.contextmanager
def _one_thread():
    """Run small torch problems on one thread: on a loaded 2-core machine torch's intra-op
    thread pool makes a tiny softmax 100x slower (measured: 8 ms instead of 2 us)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _np(a):
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a, dtype=float)


def _cos(P, u):
    """Cosine of every row of ``P`` (..., k) with the vector ``u`` (k,)."""
    P, u = _np(P), _np(u)
    nrm = np.linalg.norm(P, axis=-1) * np.linalg.norm(u)
    return np.where(nrm > 0, (P @ u) / np.where(nrm > 0, nrm, 1.0), np.nan)


def _with_static(controls, static):
    """Controls with the static values of ``static`` ({name: values}) applied."""
    static = static or {}
    unknown = set(static) - {c.name for c in controls}
    if unknown:
        raise ValueError(f"static: unknown control(s) {sorted(unknown)}")
    return [dataclasses.replace(c, static=tuple(static[c.name])) if c.name in static else c
            for c in controls]


# -- token plane (chapters 1-4) ---------------------------------------------------------------
#: Prompt-model examples of the max-margin paper: name -> (constructor, description).
TOKEN_EXAMPLES = {
    "e1-global": (lambda: D.three_token_example("global"),
                  "one input, 3 tokens, scores (1, .9, .9): every run finds the optimal token"),
    "e1-local": (lambda: D.three_token_example("local"),
                 "one input, 3 tokens, scores (1, .9, 0): runs split between two selections"),
    "e2": (D.multi_input_example, "3 inputs of 7 tokens, equal non-optimal scores"),
}
_TP_ITER = (0, 5, 10, 15, 20, 30, 40, 50, 60, 80, 100, 125, 150, 175, 200, 300, 500, 1000)
_TP_STATIC = (0, 5, 10, 20, 30, 40, 60, 80, 100, 150, 200)
_TP_RECORD = 5


@functools.lru_cache(maxsize=32)
def _token_plane_data(example: str, lr: float, normalized: bool, loss: str) -> dict:
    """Train the example's six initialisations at once and solve its p-SVMs (cached)."""
    ex = TOKEN_EXAMPLES[example][0]()
    W = ex.init["W"]
    settings = {**ex.settings, "lr": lr, "normalized": normalized, "loss": loss,
                "steps": _TP_ITER[-1], "record_every": _TP_RECORD}
    with _one_thread():
        res = TR.train(ex.data, **settings, init=ex.init)  # 6 runs = 6 trials
        sel = TK.enumerate_selections(ex.data, param="p", W=W) if ex.data.T ** ex.data.n <= 27 \
            else None
        alphas = sel.alpha[sel.locally_optimal] if sel is not None else \
            TK.optimal_tokens(ex.data)[None]
        dirs, support = [], []
        for a in alphas:
            p_mm = SV.prompt_svm(ex.data, alpha=a, W=W)
            dirs.append(_np(p_mm)[:2])
            z = p_mm.expand(ex.data.n, -1)  # the prompt model: every query is p
            support.append(_np(TK.support_tokens(ex.data.X, W, a, z=z)).astype(bool))
    opt = _np(TK.optimal_tokens(ex.data)).astype(int)
    labels = []
    for a in alphas:
        a = _np(a).astype(int)
        kind = "global" if (a == opt).all() else "local"
        sel_txt = ",".join(str(t + 1) for t in a)
        labels.append(f"$p^{{mm}}$(α={sel_txt}), {kind}")
    P = _np(res.history["p"])[..., :2]  # (6, S, 2): the key plane (W = diag(1, 1, 0))
    return dict(X=_np(ex.data.X)[..., :2], gamma=_np(TK.scores(ex.data)), P=P,
                steps=_np(res.history["step"]), prob=_np(res.history["max_prob"]),
                dirs=np.array(dirs), labels=labels, support=support[0],
                cos=np.stack([_cos(P, u) for u in dirs]),  # (k, 6, S)
                target=np.stack([_cos(P[:, -1], u) for u in dirs]).argmax(0),  # (6,)
                inits=_np(ex.init["p"])[:, :2], info=TOKEN_EXAMPLES[example][1])


def _square_view(ax, pts, pad=0.1):
    """Equal-aspect limits (a square) around the points ``pts`` (k, 2)."""
    lo, hi = pts.min(0), pts.max(0)
    c, r = (lo + hi) / 2, (hi - lo).max() / 2 * (1 + pad) + 0.3
    ax.set_xlim(c[0] - r, c[0] + r)
    ax.set_ylim(c[1] - r, c[1] + r)
    ax.set_aspect("equal", adjustable="box")


def _draw_token_plane(fig, example, init, iterations, lr, normalized, loss):
    d = _token_plane_data(example, float(lr), bool(normalized), loss)
    k = int(iterations) // _TP_RECORD + 1  # recorded points up to `iterations`
    ax0, ax1, ax2 = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=(1.2, 1, 1)))
    hl = None if init == "all" else int(init) - 1
    plots.token_plane(d["X"], d["gamma"], paths=d["P"][:, :k], directions=d["dirs"],
                      direction_labels=d["labels"], support=d["support"], highlight=hl, ax=ax0,
                      title="tokens, paths of p(k), max-margin rays", colorbar=False,
                      ray_length=1e3)
    # the view follows the paths (zooming out as ||p|| grows), tokens always inside
    _square_view(ax0, np.concatenate([d["P"][:, :k].reshape(-1, 2), d["X"].reshape(-1, 2)]))
    runs = range(d["P"].shape[0]) if hl is None else [hl]
    steps = d["steps"][:k]
    # each run against the ray it ends closest to: 1 - cos on a log axis
    corr = {}
    for j, lab in enumerate(d["labels"]):
        mine = [b for b in runs if d["target"][b] == j]
        if mine:
            corr[lab.split(",")[0]] = d["cos"][j, mine, :k]
    plots.correlation_curves(steps, corr, ax=ax1, one_minus=True, band="lines",
                             title="each run vs. the ray it approaches", legend="lower left")
    plots.probability_curves(steps, {"largest softmax prob.": d["prob"][list(runs), :k]},
                             ax=ax2, title="attention becomes one-hot", band="lines")
    for ax in (ax1, ax2):
        ax.set_xlim(0, max(200, int(iterations)))
    ax1.set_ylim(1e-5, 2.5)


def token_plane(example: str = "e1-global", *, init="all", iterations: int = 200,
                lr: float = 0.1, normalized: bool = True, loss: str = "logistic",
                static: dict | None = None, mode: str | None = None):
    r"""Explorer: gradient descent on the prompt token p, in the plane of the keys.

    Trains :math:`p` of the prompt model :math:`f(X) = v^\top X^\top \mathrm{softmax}(XWp)`
    from six initialisations (one batched :func:`attnlib.train` call) and shows, left, the
    tokens coloured by their score :math:`\gamma_{t}`, the paths of :math:`p(k)`, the rays of
    the p-SVM solutions :math:`p^{mm}(\alpha)` of every locally optimal selection and the
    support tokens of the first one; middle, :math:`1-\cos(p(k), p^{mm}(\alpha))` of each run
    against the ray it approaches; right, the largest softmax probability. See chapters 1-3.

    Parameters
    ----------
    example : {"e1-global", "e1-local", "e2"}
        The paper's examples (:data:`TOKEN_EXAMPLES`).
    init : "all" or int 1..6
        Highlight one of the six runs (curves then show that run).
    iterations : int
        Iterations shown (the static slider: 0 ... 200).
    lr, normalized, loss
        Step size, normalised GD or not, loss (``"logistic"``, ``"exp"``, ``"correlation"``).
    static : dict, optional
        Values rendered on the static site per control, e.g. ``{"init": ("all", 5)}`` (each
        combination of the non-slider controls becomes a panel).
    mode : {"live", "static"}, optional
        Default ``$ATTNLIB_EXPLORER`` or live.

    Returns
    -------
    LiveExplorer or StaticExplorer
    """
    controls = [
        Control("example", tuple(TOKEN_EXAMPLES), default=example),
        Control("init", ("all", 1, 2, 3, 4, 5, 6), default=init, label="run"),
        Control("iterations", _TP_ITER, default=iterations, static=_TP_STATIC,
                continuous=True),
        Control("lr", (0.01, 0.03, 0.1, 0.3, 1.0), default=lr, label="step size"),
        Control("normalized", (True, False), default=normalized),
        Control("loss", ("logistic", "exp", "correlation"), default=loss),
    ]
    ex = Explorer(_draw_token_plane, _with_static(controls, static), name="token-plane",
                  slider="iterations", figsize=(11.5, 3.6),
                  margins=dict(left=0.05, right=0.98, wspace=0.28),
                  caption="Gradient descent on the prompt p: watch the paths turn toward a "
                          "max-margin ray and the attention become one-hot.")
    return ex.show(mode)
