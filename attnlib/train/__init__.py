"""Training dynamics: one batched loop for every parameterisation and for sequences.

:func:`train` runs ``B`` independent trials of (normalised) gradient descent or ℓp mirror
descent as one tensor computation with the analytic, saturation-safe gradients of
:mod:`attnlib.models`; :func:`regularization_path` computes
:math:`\\bar W(R) = \\arg\\min_{\\|W\\|\\le R}\\mathcal L(W)`, batched over radii;
:class:`LpMirrorDescent` is the same ℓp mirror-descent step as a ``torch.optim.Optimizer`` for
any torch model (chapter 10).

The package, top down::

    loop.py     train(), run(): THE loop (W, KQ, p, v, W+v, p+v; sequences via a mask)
    path.py     regularization_path(), PathResult
    setup.py    prepare() -> Problem (validated, batched tensors), make_gradient()
    config.py   TrainConfig (frozen, validated settings), PARAMS, METHODS
    mirror.py   mirror_map, inverse_mirror_map, normalized_step, LpMirrorDescent

The mirror-descent update (chapter 9, *Mirror descent selects tokens too*), elementwise with
:math:`\\psi(W)=\\frac1{p}\\|W\\|_p^p`:

.. math::

    \\Theta_k = \\nabla\\psi(W_k)=\\mathrm{sign}(W_k)|W_k|^{p-1},\\qquad
    \\Theta_{k+1} = \\Theta_k - \\eta_k\\nabla\\mathcal L(W_k),\\qquad
    W_{k+1} = \\mathrm{sign}(\\Theta_{k+1})|\\Theta_{k+1}|^{1/(p-1)},

with :math:`\\eta_k = \\eta/(\\|\\nabla\\mathcal L(W_k)\\|_q+\\varepsilon)`, :math:`q=p/(p-1)`, when
normalised. At p = 2 this is (normalised) gradient descent.

A note on the name: ``attnlib`` exports the *function* :func:`train` as ``attnlib.train``
(``al.train(data, ...)``, the book's call), which shadows this package as an attribute of
``attnlib``. Reach the package by ``from attnlib.train import LpMirrorDescent`` (or any name
below), by ``import attnlib.train.loop`` (its modules), or by ``importlib.import_module``;
``import attnlib.train as T`` gives the function.
"""

from .config import METHODS, PARAMS, TrainConfig
from .loop import TrainResult, train
from .mirror import LpMirrorDescent, inverse_mirror_map, mirror_map
from .path import PathResult, regularization_path

__all__ = ["TrainResult", "PathResult", "TrainConfig", "train", "regularization_path",
           "LpMirrorDescent", "mirror_map", "inverse_mirror_map", "PARAMS", "METHODS"]
