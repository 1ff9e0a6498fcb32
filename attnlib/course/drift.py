"""What is structurally wrong in a master notebook (:func:`drift_problems`): a solution without
its check, a check calling a function that ``attnlib.check`` no longer has, an exercise
without a solution, a name the student edition would leave ``None`` where a later cell needs
it, ..."""

from __future__ import annotations

import ast

from attnlib.course.editions import student_edition
from attnlib.course.notebook import (
    CHECK_CALL,
    SOL_BLOCK,
    SOL_START,
    answer_args,
    defined_names,
    exercise_labels,
    parse_cell,
    reference_names,
    reveals_answer,
    tags,
    used_names,
)


def drift_problems(nb) -> list[str]:
    """What is structurally wrong with a chapter's exercises; empty when all is well."""
    import attnlib.check

    problems = []
    cells = nb.cells
    code = [i for i, c in enumerate(cells) if c.cell_type == "code"]
    for i in code:
        t = tags(cells[i])
        if "solution" in t:
            nxt = next((j for j in code if j > i), None)
            if nxt is None or "check" not in tags(cells[nxt]):
                problems.append(f"cell {i}: a `solution` cell must be followed by a `check` "
                                "code cell")
            if not cells[i].source.lstrip().startswith("#"):
                problems.append(f"cell {i}: a `solution` cell should start with a # comment "
                                "saying what to compute (the student edition keeps it)")
            if nxt is not None and "check" in tags(cells[nxt]):
                funcs = {n.name for n in parse_cell(cells[i].source).body
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
                for arg in answer_args(cells[nxt].source):
                    if not (isinstance(arg, ast.Name) or (isinstance(arg, ast.Call)
                            and isinstance(arg.func, ast.Name) and arg.func.id in funcs)):
                        problems.append(f"cell {nxt}: pass the answer itself as the check's "
                                        f"first argument, not `{ast.unparse(arg)}` (in the "
                                        "student edition the answer is None)")
                ref = reference_names(cells[nxt].source) & set(defined_names(cells[i].source))
                if ref:
                    problems.append(f"cell {i} defines {sorted(ref)}, which the check in cell "
                                    f"{nxt} takes as reference data (not as the answer, its "
                                    "first argument); the student edition sets it to None, so "
                                    "define it in a cell before the solution")
        if "check" in t and reveals_answer(cells[i].source):
            later = set().union(set(), *(used_names(cells[j].source) for j in code if j > i))
            hidden = set(defined_names(cells[i].source)) & later
            if hidden:
                problems.append(f"cell {i}: this check is hidden from students (it computes the "
                                f"expected value) but defines {sorted(hidden)}, which later "
                                "cells use")
        if "check" in t:
            calls = CHECK_CALL.findall(cells[i].source)
            if not calls:
                problems.append(f"cell {i}: a `check` cell must call al.check.<function>(...)")
            for fn in calls:
                if fn not in getattr(attnlib.check, "__all__", []):
                    problems.append(f"cell {i}: al.check.{fn} does not exist (have: "
                                    f"{', '.join(attnlib.check.__all__)})")
    # names a stub sets to None must not be needed by later cells other than checks
    for i in code:
        if "solution" not in tags(cells[i]):
            continue
        defined = set(defined_names(cells[i].source))
        for j in (j for j in code if j > i and "solution" not in tags(cells[j])
                  and "check" not in tags(cells[j])):
            src = cells[j].source
            clash = (used_names(src) - set(defined_names(src))) & defined
            if clash:
                problems.append(f"cell {j} uses {sorted(clash)} from the solution cell {i}: "
                                "in the student edition it would get None; recompute it there "
                                "or move it into the check cell")
            defined -= set(defined_names(cells[j].source))
    # exercises and their folded solutions
    exercises, solutions = [], []
    for i, c in enumerate(cells):
        if c.cell_type != "markdown":
            continue
        exercises += [(i, lab) for lab in exercise_labels(c.source)]
        for line in c.source.splitlines():
            for pat in (SOL_START, SOL_BLOCK):
                if m := pat.match(line):
                    solutions.append((i, m["label"]))
    labels = {lab for _, lab in exercises}
    for i, lab in exercises:
        if lab is None:
            problems.append(f"cell {i}: an exercise needs a :label: (its solution refers to it)")
        elif lab not in {s for _, s in solutions}:
            problems.append(f"cell {i}: exercise {lab!r} has no {{solution-start}} {lab} block")
    for i, lab in solutions:
        if lab not in labels:
            problems.append(f"cell {i}: solution for {lab!r}, but no exercise has that label")
    try:
        student_edition(nb)
    except ValueError as e:
        problems.append(str(e))
    return problems
