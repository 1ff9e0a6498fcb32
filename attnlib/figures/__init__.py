"""The papers' figures: an experiment's Result in, a matplotlib Figure out.

One module per paper, each holding the ``plot_*`` functions of that paper's experiments
(drawn with the primitives of :mod:`attnlib.plots`; nothing is trained or solved here):

- :mod:`attnlib.figures.max_margin`: "Max-Margin Token Selection in Attention Mechanism"
  (arXiv 2306.13596), chapters 1-4.
- :mod:`attnlib.figures.tf_svm`: "Transformers as Support Vector Machines" (arXiv 2308.16898),
  chapters 5-8.
- :mod:`attnlib.figures.mirror`: "Optimizing Attention with Mirror Descent"
  (arXiv 2410.14581), chapters 9-10.

The paper modules are not imported here (import the one you need). Each registered experiment
names its figure (``al.experiments.run(name).figure()`` draws it).
"""
