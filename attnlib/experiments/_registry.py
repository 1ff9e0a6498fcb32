"""Deprecated alias: the registry moved to :mod:`attnlib.experiments.registry` (issue 12).

The paper modules import ``from .registry import Target, experiment``; this module only keeps
old imports working until they have switched.
"""

from .registry import Experiment, Target, experiment, get, names, paper_of  # noqa: F401
from .result import (  # noqa: F401
    RECORDED,  # noqa: F401
    Result,
    recorded,
    recorded_names,
    run,
)
from .store import cache_dir, source_hash  # noqa: F401
