"""What the grader grades: the checks and written answers of a master notebook, and the plan
by which a submission's cells are run.

Each ``check`` cell of the master is one graded exercise (:class:`Exercise`; its points: the
cell metadata ``points``, default 1), named as the book names it ("Exercise 2.2"); a markdown
cell tagged ``written`` is a written answer, graded by hand (:class:`Written`). The plan
(:func:`plan`) runs the submission's code cells except the master's check cells and captures
each exercise's answers where its check cell stands; nothing the submission tags or prints
changes it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from attnlib.course.notebook import GRADER_ONLY, check_calls, exercise_names, tags


@dataclass
class Exercise:
    """One graded check: a ``check`` cell of the master."""

    label: str
    cell: int  # index of the check cell in the master
    cell_id: str | None
    source: str
    answers: list[str]  # the answer expressions (first argument of each check call)
    points: float = 1.0


@dataclass
class Row:
    submission: str
    exercise: str  # the book's name: "Exercise 2.2" (a written answer: "Exercise 2.1 (written)")
    points: float
    max_points: float
    status: str  # passed | failed | missing | error | manual
    message: str
    chapter: str = ""  # the master's file name without .ipynb: "02_att_svm"
    order: int = 0  # the answer's cell in the master: rows are listed in the book's order

    @property
    def graded(self) -> str:
        """``auto`` (a check decides) or ``hand`` (a written answer the instructor grades)."""
        return "hand" if self.exercise.endswith("(written)") else "auto"


def exercises(master) -> list[Exercise]:
    """The graded checks of a master notebook, in order, named as the book names them."""
    out, seen = [], {}
    under = exercise_names(master)
    for i, cell in enumerate(master.cells):
        if cell.cell_type == "markdown" or "check" not in tags(cell):
            continue
        calls = check_calls(cell.source)
        name = under[i] or f"check-{len(out) + 1}"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        points = cell.get("metadata", {}).get("points", 1)
        out.append(Exercise(name, i, cell.get("id"), cell.source,
                            [ast.unparse(c.args[0]) if c.args else "None" for c in calls],
                            float(points)))
    return out


@dataclass
class Written:
    """A written answer: a markdown cell tagged ``written`` in the master (graded by hand)."""

    label: str
    cell: int
    cell_id: str | None
    placeholder: str
    points: float = 1.0


def written(master) -> list[Written]:
    """The master's answer places for written exercises, in order."""
    out = []
    under = exercise_names(master)
    for i, cell in enumerate(master.cells):
        if cell.cell_type == "markdown" and "written" in tags(cell):
            out.append(Written(f"{under[i] or f'written-{len(out) + 1}'} (written)", i,
                               cell.get("id"), cell.source.strip(),
                               float(cell.get("metadata", {}).get("points", 1))))
    return out


def written_rows(name: str, submission, master) -> list[tuple[Row, str]]:
    """One row (status ``manual`` or ``missing``) and the student's text per written answer."""
    cells = {c.get("id"): c for c in (submission.cells if submission is not None else [])
             if c.cell_type == "markdown" and c.get("id")}
    out = []
    for w in written(master):
        cell = cells.get(w.cell_id)
        text = cell.source.strip() if cell is not None else ""
        if not text or text == w.placeholder:
            why = "the answer cell was deleted" if cell is None else "the answer is still empty"
            out.append((Row(name, w.label, 0.0, w.points, "missing", f"no answer: {why}",
                            order=w.cell), ""))
        else:
            out.append((Row(name, w.label, 0.0, w.points, "manual",
                            f"grade by hand: {len(text.split())} words (in the feedback file)",
                            order=w.cell), text))
    return out


def plan(submission, master, exs: list[Exercise]) -> list[dict]:
    """The steps the collector runs: the submission's code cells, except the master's check
    cells, and a ``capture`` of exercise ``k``'s answers where its check cell stands.

    A check cell is found by its id, or by its exact source (a cell without an id, or whose
    id changed: nbformat makes up ids for cells that have none). When the
    submission deleted it, the answers are captured before the first cell that comes after it
    in the master, else at the end. Nothing the submission tags or prints changes the plan.
    """
    order = {c.get("id"): i for i, c in enumerate(master.cells) if c.get("id")}
    by_id = {e.cell_id: k for k, e in enumerate(exs) if e.cell_id}
    by_src = {}  # the check as the master has it, and as the student edition shows it
    for k, e in reversed(list(enumerate(exs))):
        by_src[e.source.strip()] = k
        by_src[GRADER_ONLY.format(names=", ".join(e.answers)).strip()] = k
    under = exercise_names(submission)  # where a cell stands, in the book's words
    code = [i for i, c in enumerate(submission.cells) if c.cell_type == "code"]
    cells = [submission.cells[i] for i in code]
    where = [f"under {under[i]}" if under[i] else "before the first exercise" for i in code]

    def which(c):
        if c.get("id") in by_id:
            return by_id[c.get("id")]
        return by_src.get(c.source.strip())

    anchor = {}
    for k, e in enumerate(exs):
        pos = next((j for j, c in enumerate(cells) if which(c) == k), None)
        if pos is None:
            pos = next((j for j, c in enumerate(cells)
                        if order.get(c.get("id"), -1) > e.cell), len(cells))
        anchor[k] = pos
    steps = []
    for j in range(len(cells) + 1):
        steps += [{"capture": k} for k in range(len(exs)) if anchor[k] == j]
        if j < len(cells) and which(cells[j]) is None:
            steps.append({"run": cells[j].source, "cell": j, "where": where[j]})
    return steps
