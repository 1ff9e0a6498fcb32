"""The book's explorers and the framework they are built on: ``al.explorers.<name>(...)``.

An explorer is a figure with controls. It declares its controls and draws a figure for each
setting; it reads the results of the chapter's experiments (:func:`attnlib.experiments.run`,
cached) instead of training or solving itself.

Usage (for chapter authors)
---------------------------
One short call per explorer, in a code cell tagged ``explorer``::

    import attnlib as al
    al.explorers.token_plane(example="e1-local")

In Jupyter, JupyterLab, Colab or VS Code this cell shows a **live** explorer
(:class:`LiveExplorer`: sliders and dropdowns that redraw on every change; ``.update(**values)``
redraws as moving them would, ``.figure`` is the current figure). When the book is built,
``ATTNLIB_EXPLORER=static`` (``ENV_VAR``) makes the same call return a **static** explorer
(:class:`StaticExplorer`: the figure precomputed for every combination of the declared static
values, each control a slider or a row of buttons on the page with its value beside it,
opening on the cell's settings; images embedded as PNG, no kernel, no network; ``.html`` is
the page fragment). ``ATTNLIB_EXPLORER=both`` builds the live explorer and returns the static
one: the book's test run (nbval) uses it, so that one execution of a chapter checks the live
widgets and yields the page the build shows. An explicit ``mode="live"``, ``"static"`` or
``"both"`` overrides the variable (:func:`explorer_mode`). Every explorer takes, besides its
own settings, ``static={control: values}`` (the settings rendered on the site) and ``mode``.

The book's explorers (see each docstring; each loads on first use, with its experiments):

- chapters 1-4 (:mod:`attnlib.explorers.max_margin`, arXiv 2306.13596): ``token_plane``,
  ``selection``, ``softmax_explorer``, ``joint_explorer``;
- chapters 5-8 (:mod:`attnlib.explorers.tf_svm`, arXiv 2308.16898): ``parameterisation``,
  ``sweep``, ``causal_explorer``, and (``attnlib.explorers.tf_svm_heads``) ``global_share``
  (chapter 6), ``lambda_head`` (chapter 7);
- chapter 9 (:mod:`attnlib.explorers.mirror`, arXiv 2410.14581): ``mirror_descent``;
  chapter 10 (:mod:`attnlib.explorers.mirror_text`): ``word_attention``.

Writing an explorer
-------------------
A draw function ``draw(fig, **values)`` draws onto the empty matplotlib
:class:`~matplotlib.figure.Figure` it is given (``fig.subplots(...)``, then the functions of
:mod:`attnlib.plots`), and a list of :class:`Control` s, each a finite list of values with a
default::

    from attnlib.explorers import Control, Explorer

    def draw(fig, lr, iterations):
        ax = fig.subplots()
        ...

    Explorer(draw, [Control("lr", (0.01, 0.1, 1.0), default=0.1),
                    Control("iterations", range(0, 201, 10), default=200)],
             name="my-explorer", slider="iterations").show()

The framework (:mod:`attnlib.explorers.framework`: controls, explorer, live and static
renderers) knows nothing of the book; its names are listed below.

Design
------
Expensive work (training, SVM solves) belongs to the experiments, not to the draw function:
an explorer reads its data from a cached result and a control change only redraws. A redraw
takes 0.2-0.3 s, so sliders redraw on release (``continuous=False``), margins are fixed (no
layout engine) and legends have fixed locations.
"""

import importlib

from .framework import (
    ENV_VAR,
    MODES,
    Control,
    Explorer,
    LiveExplorer,
    StaticExplorer,
    explorer_mode,
    format_value,
    frame_key,
    png_bytes,
    png_panels,
    same_value,
    show_progress,
    with_static,
)

# The framework's names; the book's explorers below load on first use (each module pulls in
# its experiments): al.explorers.token_plane(...)
__all__ = [
    "ENV_VAR", "MODES", "Control", "Explorer", "LiveExplorer", "StaticExplorer",
    "explorer_mode", "format_value", "frame_key", "png_bytes", "png_panels", "same_value",
    "show_progress", "with_static",
]

_HOMES = {name: "attnlib.explorers.max_margin" for name in (
    "token_plane", "selection", "softmax_explorer", "joint_explorer", "TOKEN_EXAMPLES",
    "SELECTION_POSITIONS")}
_HOMES.update({name: "attnlib.explorers.tf_svm" for name in (
    "parameterisation", "sweep", "causal_explorer")})
_HOMES.update({name: "attnlib.explorers.tf_svm_heads" for name in (
    "global_share", "lambda_head")})
_HOMES["mirror_descent"] = "attnlib.explorers.mirror"
_HOMES["word_attention"] = "attnlib.explorers.mirror_text"


def __getattr__(name):
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value  # resolve once
        return value
    raise AttributeError(f"module 'attnlib.explorers' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_HOMES))
