"""The book's explorers: one module per paper, built on :mod:`attnlib.explore`.

An explorer declares its controls and draws a figure for each setting; it reads the results
of the chapter's experiments (:func:`attnlib.experiments.run`, cached) instead of training or
solving itself. Chapters show them through ``attnlib.widgets``
(``al.widgets.token_plane(...)``), which re-exports every explorer below.

- :mod:`attnlib.explorers.max_margin` (arXiv 2306.13596, chapters 1-4): ``token_plane``,
  ``selection``, ``softmax_explorer``, ``joint_explorer``.
- :mod:`attnlib.explorers.tf_svm` (arXiv 2308.16898, chapters 5-8): ``parameterisation``,
  ``sweep``, ``causal_explorer``.
- :mod:`attnlib.explorers.mirror` (arXiv 2410.14581, chapters 9-10): ``mirror_descent``.

The paper modules are not imported here (each pulls in its experiments).
"""
