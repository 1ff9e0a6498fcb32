"""The notebook model of the course kit: the tags, exercises and check calls of a chapter.

The bottom layer of :mod:`attnlib.course` (standard library only). One master notebook per
chapter is the single source of both editions and of the grader:

- a code cell tagged ``solution`` holds an exercise's answer; its leading ``#`` comment lines
  say what to compute;
- the code cell after it is tagged ``check`` and calls ``al.check.*`` with the answer itself
  as first argument (a name, or a call of the function the answer defines);
- folded solutions in markdown are ``{solution-start}`` ... ``{solution-end}`` blocks or a
  single ``{solution}`` directive; a markdown cell tagged ``written`` is a written answer;
- the exercises are numbered as the book numbers them ("Exercise 2.3").
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

CHAPTER = re.compile(r"^\d\d_.+\.ipynb$")
FENCE = r"(?P<fence>`{3,}|:{3,})"
SOL_START = re.compile(rf"^\s*{FENCE}\{{solution-start\}}\s*(?P<label>\S*)")
SOL_END = re.compile(rf"^\s*{FENCE}\{{solution-end\}}")
SOL_BLOCK = re.compile(rf"^\s*{FENCE}\{{solution\}}\s*(?P<label>\S*)")
EX_START = re.compile(rf"^\s*{FENCE}\{{exercise(-start)?\}}")
EX_END = re.compile(rf"^\s*{FENCE}\{{exercise-end\}}")
LABEL = re.compile(r"^\s*:label:\s*(\S+)")
CHECK_CALL = re.compile(r"\b(?:al\.check|attnlib\.check|check)\.(\w+)\s*\(")


#: the student edition's text in place of a check that computes the expected value (the
#: grader still finds the check there)
GRADER_ONLY = (
    "# Checked by the grader only: this exercise's check computes the expected value, so the\n"
    "# student edition does not show it. When the notebook reaches this cell, {names} must\n"
    "# hold your answer (the grader reads it here).")


def tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def python_source(src: str) -> str:
    """Cell source as plain Python (IPython magics transformed away)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(src)
    except ImportError:  # pragma: no cover - IPython ships with ipykernel
        return src


def parse_cell(src: str) -> ast.Module:
    try:
        return ast.parse(python_source(src))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def defined_names(src: str) -> list[str]:
    """Names a cell binds at top level (assignments, defs; not imports), in order."""
    out = []

    def targets(t):
        if isinstance(t, ast.Name):
            out.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)
        elif isinstance(t, ast.Starred):
            targets(t.value)

    for node in parse_cell(src).body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                targets(t)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets(node.target)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(node.name)
    return list(dict.fromkeys(out))


def used_names(src: str) -> set[str]:
    """Names a cell reads from outside (local names of comprehensions, lambdas and functions
    defined in the cell do not count)."""
    tree = parse_cell(src)
    local = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension):
            local |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            local |= {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg,
                                      a.kwarg] if x is not None}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)} - local


def check_calls(src: str) -> list:
    """The ``al.check.*(...)`` calls of a cell."""
    return [node for node in ast.walk(parse_cell(src))
            if isinstance(node, ast.Call) and CHECK_CALL.match(ast.unparse(node))]


def answer_args(src: str) -> list:
    """The first argument (the answer) of every check call of a cell."""
    return [c.args[0] for c in check_calls(src) if c.args]


def reference_names(src: str) -> set[str]:
    """Names an ``al.check.*`` call reads outside its first argument (the answer)."""
    names = set()
    for node in check_calls(src):
        rest = [*node.args[1:], *(k.value for k in node.keywords)]
        names |= {n.id for a in rest for n in ast.walk(a) if isinstance(n, ast.Name)}
    return names


def reveals_answer(src: str) -> bool:
    """Whether a check cell computes its expected value in the open: a reference argument
    that calls or indexes something (``al.relaxed_prompt_svm(...)``, ``ref.known["s"]``),
    or a statement besides the checks. Plain names and constants (``data``, ``norm="nuc"``)
    reveal nothing; such checks stay in the student edition for self-checking."""
    tree = parse_cell(src)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and CHECK_CALL.match(ast.unparse(n))]
    for node in tree.body:
        if not (isinstance(node, ast.Expr) and any(node.value is c for c in calls)):
            return True
    for c in calls:
        for a in [*c.args[1:], *(k.value for k in c.keywords)]:
            if any(isinstance(n, (ast.Call, ast.Subscript, ast.BinOp)) for n in ast.walk(a)):
                return True
    return False


def exercise_labels(text: str) -> list:
    """Labels of the exercises a markdown text opens, in order (None for an unlabelled one)."""
    lines = text.splitlines()
    return [next((m[1] for m in map(LABEL.match, lines[k + 1:k + 6]) if m), None)
            for k, line in enumerate(lines) if EX_START.match(line)]


NUMBERING = re.compile(r"^\s*enumerator:\s*[\"']?(\d+)\.%s", re.M)


def chapter_number(nb, path=None) -> int | None:
    """The chapter's number: its numbering cell (``enumerator: "2.%s"``), else the ``NN_``
    of its file name; None for a notebook that has neither."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and (m := NUMBERING.search(cell.source)):
            return int(m[1])
    m = re.match(r"(\d\d)_", Path(path).name) if path else None
    return int(m[1]) if m else None


def exercise_names(nb, path=None) -> list:
    """The name each cell stands under: "Exercise 2.3" for every cell from the third exercise
    of chapter 2 on (as the book numbers it), None before the first exercise.

    The book, the student edition's stubs, the grader's rows and its feedback all use this
    name (a notebook without a chapter number gets "Exercise 3").
    """
    chapter = chapter_number(nb, path)
    names, k, current = [], 0, None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and "written" not in tags(cell):
            for _ in exercise_labels(cell.source):
                k += 1
                current = f"Exercise {chapter}.{k}" if chapter is not None else f"Exercise {k}"
        names.append(current)
    return names


def chapters(book: Path) -> list[Path]:
    """The chapter notebooks (``NN_name.ipynb``) of ``book``, in order."""
    return sorted(p for p in Path(book).glob("*.ipynb") if CHAPTER.match(p.name))
