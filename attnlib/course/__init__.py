"""The course kit: student and instructor editions of the book's chapters, their plain export
for Colab, and the grader.

Layered bottom-up, each layer importing only the ones below it:

1. :mod:`~attnlib.course.notebook`: the notebook model (tags, exercises, check calls);
   :mod:`~attnlib.course.repo` (the repository: its table of contents and release) and
   :mod:`~attnlib.course.bib` (references.bib) beside it;
2. :mod:`~attnlib.course.editions` (the two editions), :mod:`~attnlib.course.drift` (what is
   wrong in a master), :mod:`~attnlib.course.myst` and :mod:`~attnlib.course.plain` (the
   plain export); :mod:`~attnlib.course.grading` (what is graded),
   :mod:`~attnlib.course.jail` and :mod:`~attnlib.course.sandbox` (where a submission runs),
   :mod:`~attnlib.course.checker` (where the master's checks judge the answers);
3. :mod:`~attnlib.course.kit` (building the zips, verifying a student edition) and
   :mod:`~attnlib.course.batch` (grading a batch of submissions);
4. :mod:`~attnlib.course.cli`: the command lines of ``scripts/assignments.py`` and
   ``scripts/export_plain.py``.

Nothing here is imported by ``import attnlib``; the kit needs ``nbformat`` (requirements.txt)
and works in a checkout of the repository.
"""
