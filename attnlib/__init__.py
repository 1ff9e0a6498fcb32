"""attnlib: attention as a support vector machine.

The library behind the textbook *Attention as a Support Vector Machine*. Core names are
imported here; the heavier submodules (``experiments``, ``plots``, ``widgets``, ``check``)
load on first use: ``al.widgets.token_plane(...)``.
"""

import importlib

__version__ = "0.1.0"

# Core API (filled in by attnlib.data / models / train / tokens / svm / metrics).

_LAZY = ("experiments", "plots", "widgets", "check")


def __getattr__(name):
    if name in _LAZY:
        return importlib.import_module(f"attnlib.{name}")
    raise AttributeError(f"module 'attnlib' has no attribute {name!r}")
