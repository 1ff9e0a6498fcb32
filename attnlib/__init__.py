"""attnlib: attention as a support vector machine.

The library behind the textbook *Attention as a Support Vector Machine*. Core names are
imported here; the heavier submodules (``experiments``, ``plots``, ``check``, ``svm``,
``optimality``, ``explorers``, ``figures``) and the names that need cvxpy (``al.att_svm``,
``al.is_locally_optimal``, ...) load on first use: ``al.explorers.token_plane(...)``.
"""

import importlib
import os
import signal
import sys
import threading

__version__ = "0.1.0"


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
# no traceback; attnlib.cli.main puts Python's handler back before it runs a command.
if _command_line():
    signal.signal(signal.SIGINT, _interrupted_while_loading)

# Core API: import attnlib as al; al.random_data(...), al.train(...), al.att_svm(...)
# (``al.train`` is the function; the module is ``attnlib.train`` via ``from attnlib.train import``)
from attnlib import data, examples, metrics, models, tokens  # noqa: E402, F401
from attnlib._runtime import default_device  # noqa: E402, F401
from attnlib.data import AttentionData, random_data  # noqa: E402, F401
from attnlib.examples import (  # noqa: E402, F401
    EPS,
    MD_BUDGETS,
    Example,
    joint_example,
    lambda_head_example,
    loss_example,
    mirror_joint_example,
    mirror_random_data,
    multi_input_example,
    relu_head_example,
    three_token_example,
    visualization_example,
)
from attnlib.metrics import (  # noqa: E402, F401
    bregman,
    bregman_direction,
    bregman_divergence,
    correlation,
    directional_bregman,
    lp_norm,
    max_prob,
    numerical_rank,
)
from attnlib.models import LambdaHead, LinearHead, MLPHead, ReluHead  # noqa: E402, F401
from attnlib.tokens import (  # noqa: E402, F401
    cleanly_masked,
    optimal_tokens,
    scores,
    selected_sets,
    selected_tokens,
    support_tokens,
    token_margins,
)
from attnlib.train import (  # noqa: E402, F401
    LpMirrorDescent,
    PathResult,
    TrainResult,
    regularization_path,
    train,
)

_LAZY = ("experiments", "plots", "check", "svm", "optimality", "explorers", "figures")

# The SVM solvers and local optimality import cvxpy (seconds); they load on first use:
# al.att_svm(...), al.is_locally_optimal(...).
_LAZY_NAMES = {name: "svm" for name in (
    "Equivalence", "InfeasibleError", "UncertifiedError", "SolveConfig", "solve_each",
    "att_svm", "head_svm", "prompt_svm", "relaxed_prompt_svm", "sequence_svm",
    "svm_equivalence")}
_LAZY_NAMES.update({name: "optimality" for name in (
    "is_locally_optimal", "enumerate_selections", "Selections", "locally_optimal_from")})
_LAZY_NAMES["TrainConfig"] = "train"
# A chapter's live checks: al.verify(claim, "what") and, in its last cell, al.verified()
_LAZY_NAMES.update({name: "experiments.ledger" for name in ("verify", "verified")})


def __getattr__(name):
    if name in _LAZY:
        return importlib.import_module(f"attnlib.{name}")
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(f"attnlib.{_LAZY_NAMES[name]}"), name)
        globals()[name] = value  # resolve once
        return value
    raise AttributeError(f"module 'attnlib' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_LAZY_NAMES))
