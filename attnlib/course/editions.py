"""The two editions of a chapter: the instructor's (the master, cell for cell, without outputs)
and the student's.

The **student edition** keeps a ``solution`` cell's leading comments and imports, sets every
name the cell defines and later cells use to ``None`` (a function keeps its signature and
docstring and raises ``NotImplementedError`` when called), and ends by raising
``NotImplementedError``; the cell is re-tagged ``stub``. The check cell after it is kept and
says "not answered yet" until the stub is replaced, except a check whose reference arguments
compute the expected value (:func:`attnlib.course.notebook.reveals_answer`): a note takes its
place and only the grader checks that exercise. Folded solutions in markdown are removed,
together with untagged cells inside such a block.
"""

from __future__ import annotations

import ast
import copy

import nbformat

from attnlib.course.notebook import (
    GRADER_ONLY,
    SOL_BLOCK,
    SOL_END,
    SOL_START,
    answer_args,
    defined_names,
    exercise_names,
    parse_cell,
    python_source,
    reveals_answer,
    tags,
    used_names,
)

STUDENT_BANNER = (
    "**Student edition.** Cells marked *Your turn* raise `NotImplementedError` until you "
    "replace them with your code; the check cell right after each one runs `attnlib.check` "
    "and tells you whether your answer is right, or what is wrong with it.")


def stub_source(src: str, later_names: set[str], label: str = "") -> str:
    """The student's version of a ``solution`` cell (see the module docstring)."""
    lines = src.splitlines()
    head = []
    for line in lines:
        if line.strip().startswith("#") or (not line.strip() and head):
            head.append(line.rstrip())
        else:
            break
    while head and not head[-1].strip():
        head.pop()
    tree = parse_cell(src)
    body = [f"# Your turn{f' ({label})' if label else ''}: replace this cell with your code."]
    body += head or ["# Compute the answer the exercise above asks for."]
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.append(ast.get_source_segment(python_source(src), node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            keep.append(_function_stub(node))
    names = [n for n in defined_names(src) if n in later_names]
    func_names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef,
                                                              ast.AsyncFunctionDef))}
    body += [k for k in keep if k]
    body += [f"{n} = None  # your answer" for n in names if n not in func_names]
    what = ", ".join(names) if names else "the answer"
    body.append(f'raise NotImplementedError("Your turn: compute {what} in this cell, then run '
                f'the check cell below.")')
    return "\n".join(body)


def _function_stub(node) -> str:
    sig = ast.unparse(node.args)
    ret = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    doc = ast.get_docstring(node)
    kw = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    out = [f"{kw} {node.name}({sig}){ret}:"]
    if doc:
        out.append('    """' + doc.replace('"""', "'''").replace("\n", "\n    ") + '"""')
    out.append(f'    raise NotImplementedError("Your turn: write {node.name}")')
    return "\n".join(out)


def strip_solutions(text: str, inside: bool) -> tuple[str, bool]:
    """Remove solution directives from markdown; ``inside`` carries an open block across cells.

    Returns the remaining text and whether a ``{solution-start}`` block is still open.
    """
    out, closing = [], None  # closing: the fence that ends the current directive's header
    single = None  # fence of an open single-block {solution}
    for line in text.splitlines():
        if closing is not None:  # inside the header/body of a directive being dropped
            if line.strip() == closing:
                closing = None
            continue
        if single is not None:
            if line.strip() == single:
                single = None
            continue
        if (m := SOL_BLOCK.match(line)) and not inside:
            single = m["fence"]
            continue
        if m := SOL_START.match(line):
            inside, closing = True, m["fence"]
            continue
        if inside and (m := SOL_END.match(line)):
            inside, closing = False, m["fence"]
            continue
        if not inside:
            out.append(line)
    return "\n".join(out).strip("\n"), inside


def _cleared(cell):
    cell = copy.deepcopy(cell)
    if cell.cell_type == "code":
        cell.outputs, cell.execution_count = [], None
    cell.get("metadata", {}).pop("execution", None)
    return cell


def instructor_edition(nb):
    """The master notebook, cell for cell, without outputs."""
    out = copy.deepcopy(nb)
    out.cells = [_cleared(c) for c in nb.cells]
    return out


def student_edition(nb):
    """Solution cells stubbed, folded solutions removed, checks kept (see module docstring)."""
    out = copy.deepcopy(nb)
    cells, inside, n_ex = [], False, 0
    sources = [c.source for c in nb.cells]
    under = exercise_names(nb)  # "Exercise 2.2": the name the book gives the exercise
    for k, cell in enumerate(nb.cells):
        t = tags(cell)
        if cell.cell_type == "markdown":
            text, inside = strip_solutions(cell.source, inside)
            if text.strip():
                new = _cleared(cell)
                new.source = text
                cells.append(new)
            continue
        if "solution" in t:
            n_ex += 1
            later = set().union(*(used_names(s) for s in sources[k + 1:]
                                  if isinstance(s, str)), set())
            new = _cleared(cell)
            new.source = stub_source(cell.source, later, label=under[k] or f"exercise {n_ex}")
            new.metadata["tags"] = [x for x in new.metadata.get("tags", []) if x != "solution"]
            new.metadata["tags"].append("stub")
            cells.append(new)
        elif inside and "check" not in t:
            continue  # part of a folded solution shown only to instructors
        elif "check" in t and reveals_answer(cell.source):
            new = _cleared(cell)
            names = ", ".join(ast.unparse(a) for a in answer_args(cell.source)) or "answer"
            new.source = GRADER_ONLY.format(names=names)
            cells.append(new)
        else:
            cells.append(_cleared(cell))
    if inside:
        raise ValueError("a {solution-start} block is never closed by {solution-end}")
    first_code = next((i for i, c in enumerate(cells) if "remove-cell" not in tags(c)), 0)
    # a fixed id (not nbformat's random one): the same master gives the same bytes
    ids = {c.get("id") for c in cells}
    banner_id = next(f"student-banner{k or ''}" for k in range(len(ids) + 1)
                     if f"student-banner{k or ''}" not in ids)
    cells.insert(first_code, nbformat.v4.new_markdown_cell(STUDENT_BANNER, id=banner_id))
    out.cells = cells
    return out
