r"""Feedback on exercise answers: correct, or precisely what is wrong.

Every function here takes a learner's answer and the reference data, and returns a
:class:`Feedback`: truthy when the answer is right, and in every case a message that says
what was checked and, when the answer is wrong, where it fails ("your W violates 3 of 42
margin constraints; the largest violation is at sample 2, token 5"). It displays itself in
Jupyter and prints as text, so a check cell is just the call::

    al.check.check_svm_direction(W, data)

How a chapter writes a self-checking exercise (see the instructor guide):

1. The code cell holding the answer carries the cell tag ``solution``. It starts with one or
   more comment lines saying what to compute; the student edition keeps those comments, sets
   every name the cell assigns to ``None`` and raises ``NotImplementedError``.
2. The next code cell carries the tag ``check`` and calls one function of this module. It
   receives ``None`` in the student edition until the learner answers, and then says so.

Indices are 0-based, as everywhere in attnlib (sample ``i``, token ``t``). A wrongly shaped
*answer* is feedback (a falsy :class:`Feedback`), not an exception; wrong *reference*
arguments (the data, a norm name) raise ``ValueError``.

Strict mode: ``al.check.strict(True)`` makes every failed check raise ``AssertionError``
(grading, testing the instructor editions); ``Feedback(..., strict=True)`` does it for one
check. Its default comes from the environment variable ``ATTNLIB_CHECK_STRICT`` (``1``: on),
read in one place, :func:`is_strict`, so that a grader (``scripts/assignments.py``, the
notebook tests) can switch it on for a whole notebook run without editing it.
"""

from attnlib.check.feedback import STRICT_ENV, Feedback, is_strict, strict
from attnlib.check.heads_answers import check_finite_part, check_unit_margins
from attnlib.check.implement import (
    check_att_svm,
    check_causal_attention,
    check_gd_step,
    check_kq_step,
)
from attnlib.check.local_answers import check_joint_step, check_local_selections
from attnlib.check.mirror_answers import check_md_direction
from attnlib.check.numeric import check_md_step, check_rank, check_value
from attnlib.check.svm_answers import (
    check_locally_optimal,
    check_prompt_direction,
    check_relaxed_prompt,
    check_selection,
    check_svm_direction,
)
from attnlib.check.text_answers import check_planted_attention

__all__ = ["Feedback", "strict", "is_strict", "STRICT_ENV", "check_svm_direction",
           "check_prompt_direction", "check_selection", "check_locally_optimal", "check_rank",
           "check_md_step", "check_value", "check_gd_step", "check_kq_step", "check_att_svm",
           "check_causal_attention", "check_md_direction"]
__all__ += ["check_planted_attention"]  # chapter 10 (text_answers)
__all__ += ["check_unit_margins", "check_finite_part"]  # chapters 6, 7 (heads_answers)
__all__ += ["check_local_selections", "check_joint_step"]  # chapters 3, 4 (local_answers)
__all__ += ["check_relaxed_prompt"]  # chapter 4 (svm_answers)
