"""Named reproductions of the papers' experiments (see the chapter "Reproduction report").

``attnlib.experiments.run(name, **settings)`` runs one; ``names()`` lists them. The machinery:
``settings`` (typed settings, checked before any computation), ``registry`` (targets,
the ``@experiment`` decorator), ``store`` (result files and the result cache),
``result`` (``run`` and ``Result``) and ``report`` (the reproduction report). Each
paper has its own module: :mod:`.max_margin` (arXiv 2306.13596, chapters 1-4), :mod:`.tf_svm`
(arXiv 2308.16898, chapters 5-8) and :mod:`.mirror` (arXiv 2410.14581, chapters 9-10).
"""

from .registry import (
           Experiment,
           NotRun,
           Target,
           experiment,
           get,
           names,
           not_run,
           not_run_targets,
           paper_of,
           unregister,
)
from .report import report_html, report_markdown, report_notes, report_rows
from .result import Result, run, run_all
from .settings import SettingError
from .store import CacheWarning, cache_clear, cache_dir, cache_info, source_hash

__all__ = ["Experiment", "Result", "Target", "cache_dir", "experiment", "get", "names", "run",
           "source_hash", "paper_of", "run_all", "report_rows", "report_html", "report_markdown",
           "report_notes",
           "unregister", "SettingError", "CacheWarning",
           "cache_info", "cache_clear", "NotRun", "not_run", "not_run_targets"]

# importing the paper modules registers their experiments, in the book's order
# isort: off
from . import max_margin, max_margin_local, mirror, tf_svm  # noqa: E402,F401
from . import tf_svm_rank, tf_svm_rankcap, tf_svm_overparam, tf_svm_heads  # noqa: E402,F401
from . import tf_svm_causal  # noqa: E402,F401
# isort: on
