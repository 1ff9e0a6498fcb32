"""The book's explorers in one namespace: ``al.widgets.<explorer>(...)``.

A compatibility module, kept because every chapter calls its explorers through it: the
explorer framework lives in :mod:`attnlib.explore` and the explorers of each paper in
:mod:`attnlib.explorers` (this module only re-exports them; nothing is defined here).

Usage (for chapter authors)
---------------------------
One short call per explorer, in a code cell tagged ``explorer``::

    import attnlib as al
    al.widgets.token_plane(example="e1-local")

In Jupyter, JupyterLab, Colab or VS Code this cell shows **live** controls (sliders, dropdowns)
that redraw on every change. When the book is built, the build sets ``ATTNLIB_EXPLORER=static``
and the same cell renders a **static** explorer: the figure precomputed for every combination
of the declared static values, each control a slider or a row of buttons on the page with its
value beside it, opening on the cell's settings (images embedded as PNG, no kernel, no
network). An explicit ``mode="live"`` or
``mode="static"`` overrides the variable. Every explorer takes, besides its own settings,
``static={control: values}`` (the settings rendered on the site) and ``mode``, and returns a
:class:`~attnlib.explore.LiveExplorer` (``.figure``, ``.update(**values)``) or a
:class:`~attnlib.explore.StaticExplorer` (``.html``).

The explorers (see each docstring):

- chapters 1-4 (:mod:`attnlib.explorers.max_margin`): ``token_plane``, ``selection``,
  ``softmax_explorer``, ``joint_explorer``;
- chapters 5-8 (:mod:`attnlib.explorers.tf_svm`): ``parameterisation``, ``sweep``,
  ``causal_explorer``, and (:mod:`attnlib.explorers.tf_svm_heads`) ``global_share``
  (chapter 6), ``lambda_head`` (chapter 7);
- chapter 9 (:mod:`attnlib.explorers.mirror`): ``mirror_descent``; chapter 10
  (:mod:`attnlib.explorers.mirror_text`): ``word_attention``.

To write a new explorer see :mod:`attnlib.explore`.
"""

from .explore import (
    ENV_VAR,
    MODES,
    Control,
    Explorer,
    LiveExplorer,
    StaticExplorer,
    explorer_mode,
)
from .explorers.max_margin import (
    SELECTION_POSITIONS,
    TOKEN_EXAMPLES,
    joint_explorer,
    selection,
    softmax_explorer,
    token_plane,
)
from .explorers.mirror import mirror_descent
from .explorers.mirror_text import word_attention
from .explorers.tf_svm import causal_explorer, parameterisation, sweep
from .explorers.tf_svm_heads import global_share, lambda_head

__all__ = [
    "ENV_VAR", "MODES", "Control", "Explorer", "LiveExplorer", "StaticExplorer",
    "explorer_mode", "token_plane", "selection", "softmax_explorer", "joint_explorer",
    "parameterisation", "sweep", "global_share", "lambda_head", "causal_explorer",
    "mirror_descent", "word_attention",
    "TOKEN_EXAMPLES",
    "SELECTION_POSITIONS",
]
