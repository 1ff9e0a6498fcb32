"""attnlib: attention as a support vector machine.

The library behind the textbook *Attention as a Support Vector Machine*:
``import attnlib as al; al.random_data(...), al.train(...), al.att_svm(...)``.

Every name of the package loads on first use (the SPEC 1 "lazy loading" of scientific Python):
``import attnlib`` itself imports neither torch nor cvxpy, and ``al.random_data`` imports what
:mod:`attnlib.data` needs, ``al.att_svm`` what :mod:`attnlib.svm` needs. The table below says
where each public name lives; ``dir(attnlib)`` and tab completion list them all, and
``from attnlib import train`` works for every name in ``__all__``. ``al.train`` is the
*function*; the subpackage is reached by ``from attnlib.train import ...``.
"""

import importlib
import os
import signal
import sys
import threading
import types

__version__ = "0.1.0"

#: Submodules reached as attributes: ``al.explorers.token_plane(...)``.
_SUBMODULES = ("data", "examples", "metrics", "models", "tokens", "experiments", "plots",
               "check", "svm", "optimality", "explorers", "figures")

#: Where each public name lives (a submodule of this package, relative name).
_HOMES = {
    "data": ("AttentionData", "random_data"),
    "examples": ("EPS", "MD_BUDGETS", "Example", "joint_example", "lambda_head_example",
                 "loss_example", "mirror_joint_example", "mirror_random_data",
                 "multi_input_example", "relu_head_example", "three_token_example",
                 "visualization_example"),
    "metrics": ("bregman", "bregman_direction", "bregman_divergence", "correlation",
                "directional_bregman", "lp_norm", "max_prob", "numerical_rank"),
    "models": ("LambdaHead", "LinearHead", "MLPHead", "ReluHead"),
    "tokens": ("cleanly_masked", "optimal_tokens", "scores", "selected_sets", "selected_tokens",
               "support_tokens", "token_margins"),
    # ``train`` the function shadows the subpackage attnlib.train (see _Package)
    "train": ("LpMirrorDescent", "PathResult", "TrainConfig", "TrainResult",
              "regularization_path", "train"),
    "_runtime": ("default_device",),
    # the SVM solvers and local optimality import cvxpy (seconds)
    "svm": ("Equivalence", "InfeasibleError", "UncertifiedError", "SolveConfig", "solve_each",
            "att_svm", "head_svm", "prompt_svm", "relaxed_prompt_svm", "sequence_svm",
            "svm_equivalence"),
    "optimality": ("is_locally_optimal", "enumerate_selections", "Selections",
                   "locally_optimal_from"),
    # a chapter's live checks: al.verify(claim, "what") and, in its last cell, al.verified()
    "experiments.ledger": ("verify", "verified"),
}
_NAMES = {name: home for home, names in _HOMES.items() for name in names}

__all__ = sorted([*_SUBMODULES, *_NAMES])


def __getattr__(name):
    if name in _NAMES:
        value = getattr(importlib.import_module(f"attnlib.{_NAMES[name]}"), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"attnlib.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # resolved once: later look-ups are plain attributes
    return value


def __dir__():
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})


class _Package(types.ModuleType):
    """The package's module type: loading the subpackage ``attnlib.train`` binds it as the
    attribute ``train`` of the package; this keeps ``al.train`` the function."""

    def __setattr__(self, name, value):
        if (isinstance(value, types.ModuleType) and name in _NAMES
                and value.__name__ == f"{__name__}.{name}"):
            return  # the import system binding a submodule that a name of _HOMES shadows
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def _interrupted_while_loading(signum, frame):  # pragma: no cover - exits the process
    sys.stderr.write("python -m attnlib: interrupted\n")
    os._exit(130)


def _command_line() -> bool:
    """Whether this process is the command line (``python -m attnlib`` or the ``attnlib``
    script) and the package is loading in its main thread."""
    argv = getattr(sys, "orig_argv", [])
    as_module = any(a == "-m" and b == "attnlib" for a, b in zip(argv, argv[1:]))
    script = os.path.basename(sys.argv[0]) in ("attnlib", "attnlib.exe") if sys.argv else False
    return (as_module or script) and threading.current_thread() is threading.main_thread() \
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler


# Ctrl-C while the command line loads torch (seconds) prints one line and exits with status 130,
# no traceback; attnlib.cli.main loads what its command needs first, then puts Python's handler
# back before it runs the command.
if _command_line():
    signal.signal(signal.SIGINT, _interrupted_while_loading)
