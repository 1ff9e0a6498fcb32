"""The SVM problems of attention, solved along one certified path.

* ``attnlib.svm.config`` -- :class:`SolveConfig` (solver order, tolerances) and the errors
  :class:`InfeasibleError` (confirmed by a Farkas certificate) and :class:`UncertifiedError`;
* ``attnlib.svm.engine`` -- compile once per shape (cvxpy Parameters), solve, certify,
  rescale and fall back;
* ``attnlib.svm.certificate`` -- the certificate of an answer (margins, dual feasibility,
  duality gap) and of infeasibility (a verified Farkas certificate);
* ``attnlib.svm.rows`` -- the constraint rows, one array per instance;
* ``attnlib.svm.problems`` -- Att-SVM, Att-SVM⋆, ℓp-AttSVM (:func:`att_svm`),
  SAtt-SVM (:func:`sequence_svm`), p-SVM (:func:`prompt_svm`, :func:`relaxed_prompt_svm`),
  v-SVM (:func:`head_svm`);
* ``attnlib.svm.primal`` -- the same problems written as in the papers, one cvxpy
  constraint per token (:func:`att_svm_primal`, :func:`prompt_svm_primal`,
  :func:`head_svm_primal`): the readable statement of each problem, slow, and the oracle the
  fast path is tested against;
* ``attnlib.svm.equivalence`` -- the SVM equivalence of nonlinear heads;
* ``attnlib.svm.batch`` -- :func:`solve_each`, the per-trial solve with fallback.

See chapters 2-9.
"""

from attnlib.svm.batch import Solutions, solve_each
from attnlib.svm.config import InfeasibleError, SolveConfig, UncertifiedError
from attnlib.svm.equivalence import Equivalence, svm_equivalence
from attnlib.svm.primal import att_svm_primal, head_svm_primal, prompt_svm_primal
from attnlib.svm.problems import att_svm, head_svm, prompt_svm, relaxed_prompt_svm, sequence_svm

__all__ = [
    "InfeasibleError",
    "UncertifiedError",
    "SolveConfig",
    "att_svm",
    "att_svm_primal",
    "sequence_svm",
    "prompt_svm",
    "prompt_svm_primal",
    "head_svm",
    "head_svm_primal",
    "relaxed_prompt_svm",
    "Equivalence",
    "svm_equivalence",
    "Solutions",
    "solve_each",
]
