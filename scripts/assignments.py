"""Course kit: student and instructor editions of every chapter, zipped for an LMS or Colab.

Usage::

    python scripts/assignments.py                    # every chapter of book/ -> assignments/
    python scripts/assignments.py 02_att_svm         # some chapters
    python scripts/assignments.py --verify           # also execute each student edition
    python scripts/assignments.py grade sub*.ipynb --out grades  # grades.csv + feedback

(``make assignments`` runs the first.) One master notebook per chapter is the single source:

- a code cell tagged ``solution`` holds an exercise's answer. Its leading ``#`` comment lines
  say what to compute. The **student edition** keeps those comments and the cell's imports,
  sets every name the cell defines and later cells use to ``None`` (a function keeps its
  signature and docstring and raises ``NotImplementedError`` when called), and ends by raising
  ``NotImplementedError``; the cell is re-tagged ``stub``;
- the code cell after it is tagged ``check`` and calls ``al.check.*`` with the answer itself
  as first argument (a name, or a call of the function the answer defines): kept in both
  editions; in the student edition it says "not answered yet" until the stub is replaced;
- folded solutions in markdown (``{solution-start}`` ... ``{solution-end}``, or a single
  ``{solution}`` directive) are removed from the student edition, together with untagged
  cells inside such a block;
- the **instructor edition** is the master notebook, cell for cell, without outputs.

Output: ``assignments/{student,instructor}/NN_name.ipynb``; ``assignments/NN_name.zip``, the
student's zip (the student edition and the images it shows, nothing else); and
``assignments/instructor.zip`` (the instructor editions: solutions). The same masters give
the same bytes (fixed cell ids, zip entries in a fixed order with a fixed time stamp), so a
rebuilt zip can be compared with the one handed out. A check cell whose reference
arguments compute the expected value (:func:`reveals_answer`) is replaced in the student
edition by a note: the grader (``grade``, scripts/grader.py) still checks that exercise with
the master's check. :func:`drift_problems` lists what is
structurally wrong in a master notebook (a solution without its check, a check calling a
function that ``attnlib.check`` no longer has, an exercise without a solution, ...).
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
import zipfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = re.compile(r"^\d\d_.+\.ipynb$")
FENCE = r"(?P<fence>`{3,}|:{3,})"
SOL_START = re.compile(rf"^\s*{FENCE}\{{solution-start\}}\s*(?P<label>\S*)")
SOL_END = re.compile(rf"^\s*{FENCE}\{{solution-end\}}")
SOL_BLOCK = re.compile(rf"^\s*{FENCE}\{{solution\}}\s*(?P<label>\S*)")
EX_START = re.compile(rf"^\s*{FENCE}\{{exercise(-start)?\}}")
EX_END = re.compile(rf"^\s*{FENCE}\{{exercise-end\}}")
LABEL = re.compile(r"^\s*:label:\s*(\S+)")
CHECK_CALL = re.compile(r"\b(?:al\.check|attnlib\.check|check)\.(\w+)\s*\(")
STUDENT_BANNER = (
    "**Student edition.** Cells marked *Your turn* raise `NotImplementedError` until you "
    "replace them with your code; the check cell right after each one runs `attnlib.check` "
    "and tells you whether your answer is right, or what is wrong with it.")


GRADER_ONLY = (
    "# Checked by the grader only: this exercise's check computes the expected value, so the\n"
    "# student edition does not show it. When the notebook reaches this cell, {names} must\n"
    "# hold your answer (the grader reads it here).")


# -- cell helpers ---------------------------------------------------------------------------
def tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _python(src: str) -> str:
    """Cell source as plain Python (IPython magics transformed away)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(src)
    except ImportError:  # pragma: no cover - IPython ships with ipykernel
        return src


def _tree(src: str) -> ast.Module:
    try:
        return ast.parse(_python(src))
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

    for node in _tree(src).body:
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
    tree = _tree(src)
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
    tree = _tree(src)
    body = [f"# Your turn{f' ({label})' if label else ''}: replace this cell with your code."]
    body += head or ["# Compute the answer the exercise above asks for."]
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.append(ast.get_source_segment(_python(src), node))
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


# -- markdown: folded solutions -------------------------------------------------------------
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


# -- the two editions -----------------------------------------------------------------------
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
            names = ", ".join(ast.unparse(a) for a in _answer_args(cell.source)) or "answer"
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


def _check_calls(src: str) -> list:
    """The ``al.check.*(...)`` calls of a cell."""
    return [node for node in ast.walk(_tree(src))
            if isinstance(node, ast.Call) and CHECK_CALL.match(ast.unparse(node))]


def _answer_args(src: str) -> list:
    """The first argument (the answer) of every check call of a cell."""
    return [c.args[0] for c in _check_calls(src) if c.args]


def _reference_names(src: str) -> set[str]:
    """Names an ``al.check.*`` call reads outside its first argument (the answer)."""
    names = set()
    for node in _check_calls(src):
        rest = [*node.args[1:], *(k.value for k in node.keywords)]
        names |= {n.id for a in rest for n in ast.walk(a) if isinstance(n, ast.Name)}
    return names


def reveals_answer(src: str) -> bool:
    """Whether a check cell computes its expected value in the open: a reference argument
    that calls or indexes something (``al.relaxed_prompt_svm(...)``, ``ref.known["s"]``),
    or a statement besides the checks. Plain names and constants (``data``, ``norm="nuc"``)
    reveal nothing; such checks stay in the student edition for self-checking."""
    tree = _tree(src)
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


def _exercise_labels(text: str) -> list:
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
            for _ in _exercise_labels(cell.source):
                k += 1
                current = f"Exercise {chapter}.{k}" if chapter is not None else f"Exercise {k}"
        names.append(current)
    return names


# -- drift: structural checks on a master notebook ------------------------------------------
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
                funcs = {n.name for n in _tree(cells[i].source).body
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
                for arg in _answer_args(cells[nxt].source):
                    if not (isinstance(arg, ast.Name) or (isinstance(arg, ast.Call)
                            and isinstance(arg.func, ast.Name) and arg.func.id in funcs)):
                        problems.append(f"cell {nxt}: pass the answer itself as the check's "
                                        f"first argument, not `{ast.unparse(arg)}` (in the "
                                        "student edition the answer is None)")
                ref = _reference_names(cells[nxt].source) & set(defined_names(cells[i].source))
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
        exercises += [(i, lab) for lab in _exercise_labels(c.source)]
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


# -- building -------------------------------------------------------------------------------
def chapters(book: Path) -> list[Path]:
    """The chapter notebooks (``NN_name.ipynb``) of ``book``, in order."""
    return sorted(p for p in Path(book).glob("*.ipynb") if CHAPTER.match(p.name))


def local_assets(nb, book: Path) -> list[Path]:
    """Local files a notebook's markdown shows (images, figures), relative to ``book``."""
    found = []
    pat = re.compile(r"!\[[^\]]*\]\(([^)\s]+)|\{(?:figure|image)\}\s*(\S+)")
    for c in nb.cells:
        if c.cell_type == "markdown":
            for a, b in pat.findall(c.source):
                rel = a or b
                p = (Path(book) / rel)
                if "://" not in rel and p.is_file():
                    found.append(Path(rel))
    return sorted(set(found))


def build(book: Path, out: Path, names=None) -> list[Path]:
    """Write both editions and a zip for every chapter (or the named ones); return the zips."""
    book, out = Path(book), Path(out)
    todo = chapters(book)
    if names:
        want = {n.removesuffix(".ipynb") for n in names}
        unknown = want - {p.stem for p in todo}
        if unknown:
            raise SystemExit(f"no chapter notebook {sorted(unknown)} in {book}; have: "
                             f"{', '.join(p.stem for p in todo) or '(none)'}")
        todo = [p for p in todo if p.stem in want]
    zips, instructor = [], []
    for path in todo:
        nb = nbformat.read(path, as_version=4)
        problems = drift_problems(nb)
        if problems:
            print(f"warning: {path.name}:\n  " + "\n  ".join(problems), file=sys.stderr)
        editions = {"student": student_edition(nb), "instructor": instructor_edition(nb)}
        editions["student"].metadata["course_kit"] = {"chapter": path.stem}
        for kind, ed in editions.items():
            (out / kind).mkdir(parents=True, exist_ok=True)
            nbformat.write(ed, out / kind / path.name)
        zpath = out / f"{path.stem}.zip"  # the student's: hand this out
        assets = local_assets(nb, book)
        plain = plain_student(path.stem, editions["student"])
        with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
            _add(z, f"{path.stem}/{path.name}", nbformat.writes(editions["student"]))
            _add(z, f"{path.stem}/{path.stem}-colab.ipynb", plain)
            for rel in assets:
                _add(z, f"{path.stem}/{rel.as_posix()}", (book / rel).read_bytes())
            _add(z, f"{path.stem}/README.txt", _readme(path.stem))
        instructor.append((path, editions["instructor"], assets))
        n_stub = sum("stub" in tags(c) for c in editions["student"].cells)
        print(f"{path.stem}: {n_stub} exercise cell(s) stubbed -> {zpath}")
        zips.append(zpath)
    if instructor:
        ipath = out / "instructor.zip"  # solutions: keep it away from students
        with zipfile.ZipFile(ipath, "w", zipfile.ZIP_DEFLATED) as z:
            for path, ed, _ in instructor:
                _add(z, f"instructor/{path.name}", nbformat.writes(ed))
            for rel in sorted({rel for *_, assets in instructor for rel in assets}):
                _add(z, f"instructor/{rel.as_posix()}", (book / rel).read_bytes())  # once each
        print(f"instructor editions (solutions) -> {ipath}")
    if not todo:
        print(f"no chapter notebooks (NN_name.ipynb) in {book}")
    return zips


def plain_student(stem: str, student) -> str:
    """The student edition as plain Jupyter Markdown (scripts/export_plain.py: no MyST, the
    install cell pinned to the release): the copy to open in Colab or classic Jupyter."""
    import json

    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:  # export_plain.py sits beside this script
        sys.path.insert(0, here)
    import export_plain as xp

    if "index" not in _PLAIN:  # the book's titles, labels and citations: read once
        index = xp.Index(xp.toc_docs(), ROOT / "references.bib")
        index.ref, index.repo = xp.git_ref(), xp.repo_url()
        _PLAIN["index"] = index
    plain = xp.export(f"book/{stem}", _PLAIN["index"], nb=json.loads(nbformat.writes(student)))
    return json.dumps(plain, indent=1, ensure_ascii=False) + "\n"


_PLAIN: dict = {}


def _add(z, name, data):
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))  # reproducible zips:
    info.compress_type = zipfile.ZIP_DEFLATED  # a fixed time, mode and system, whatever the
    info.create_system, info.external_attr = 3, 0o100644 << 16  # machine or umask
    z.writestr(info, data)


def _readme(stem: str) -> str:
    return (f"{stem}: an assignment from the book 'Attention as a Support Vector Machine'.\n\n"
            f"{stem}.ipynb  exercise cells raise NotImplementedError until answered; most are\n"
            "followed by a check cell (attnlib.check) that says whether the answer is right.\n"
            "Open it in JupyterLab (with jupyterlab-myst, as `make setup` installs it).\n\n"
            f"{stem}-colab.ipynb  the same notebook in plain Jupyter Markdown, for Colab and\n"
            "classic Jupyter (theorems and exercises as plain headed paragraphs); its first\n"
            "cell installs attnlib in Colab.\n\n"
            "GPU optional. Hand in the notebook you worked in, with your answers in place.\n")


# -- executing: verification and grading ----------------------------------------------------
def execute(nb, cwd: Path, timeout=600, env=None):
    """Run a notebook with errors allowed; return it with outputs."""
    import os

    from nbclient import NotebookClient

    nb = copy.deepcopy(nb)
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(cwd)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def errors(nb) -> dict[int, str]:
    """Cell index -> exception name, for every cell whose execution raised."""
    return {i: o["ename"] for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.get("outputs", []) if o.get("output_type") == "error"}


def expected_failures(student) -> set[int]:
    """Cells of a student edition that should raise NotImplementedError: the stubs, and the
    check cells calling a stubbed function."""
    stubs = {i for i, c in enumerate(student.cells) if "stub" in tags(c)}
    funcs = set()
    for i in stubs:
        funcs |= {n.name for n in _tree(student.cells[i].source).body
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    calls = {i for i, c in enumerate(student.cells) if c.cell_type == "code" and i not in stubs
             and used_names(c.source) & funcs}
    return stubs | calls


def student_problems(student, ran) -> list[str]:
    """Every cell of an executed student edition ``ran`` that failed other than expected."""
    errs, want = errors(ran), expected_failures(student)
    out = [f"cell {i} raised {e}, expected only NotImplementedError in the stubs"
           for i, e in sorted(errs.items()) if i not in want or e != "NotImplementedError"]
    out += [f"cell {i} (a stub) did not raise NotImplementedError" for i in sorted(want)
            if "stub" in tags(student.cells[i]) and i not in errs]
    return out


def verify_student(student, cwd: Path) -> list[str]:
    """Execute a student edition; list every cell that failed other than expected."""
    return student_problems(student, execute(student, cwd))


def grade_main(argv) -> int:
    """``grade SUB.ipynb... --out DIR``: see scripts/grader.py and the instructor guide."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import grader

    p = argparse.ArgumentParser(
        prog="assignments.py grade",
        description="Grade submissions by their answers against the master notebook; write "
                    "DIR/grades.csv and DIR/feedback/*.md. Exit status 1 when a submission "
                    "could not be graded.")
    p.add_argument("submissions", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=Path("grades"))
    p.add_argument("--master", type=Path, help="the master notebook (default: the chapter "
                   "named in each submission's metadata or file name)")
    p.add_argument("--book", type=Path, default=ROOT / "book")
    p.add_argument("--timeout", type=float, default=600, help="wall seconds per submission")
    p.add_argument("--cpu", type=int, default=600, help="CPU seconds per submission")
    p.add_argument("--memory", type=int, default=6144, help="address space, MiB")
    p.add_argument("--output", type=int, default=2**20, help="printed bytes kept")
    p.add_argument("--jobs", type=int, default=1, help="submissions run at the same time")
    p.add_argument("--sandbox", choices=["auto", "namespace", "none"], default="auto",
                   help="namespace: unshare (no network, read-only file system); none: the "
                        "audit hook only; auto: namespace where the OS allows it")
    p.add_argument("--unsafe", action="store_true",
                   help="grade without the namespace sandbox where it cannot run (or with "
                        "--sandbox none): the audit hook only; refused otherwise")
    args = p.parse_args(argv)
    lim = grader.Limits(wall=args.timeout, cpu=args.cpu, memory_mb=args.memory,
                        output=args.output)
    rows, ok = grader.grade_batch(args.submissions, args.out, master=args.master,
                                  book=args.book, lim=lim, jobs=args.jobs, sandbox=args.sandbox,
                                  unsafe=args.unsafe)
    for name in dict.fromkeys(r.submission for r in rows):
        mine = [r for r in rows if r.submission == name]
        print(f"{name}: {sum(r.points for r in mine):g}/{sum(r.max_points for r in mine):g}  "
              + "  ".join(f"{r.exercise}={r.status}" for r in mine))
    print(f"wrote {args.out / 'grades.csv'} and {args.out / 'feedback'}/")
    return 0 if ok else 1


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["grade"]:
        return grade_main(argv[1:])
    p = argparse.ArgumentParser(prog="assignments.py", description=__doc__.split("\n")[0])
    p.add_argument("chapters", nargs="*", help="chapter stems (default: every chapter)")
    p.add_argument("--book", type=Path, default=ROOT / "book")
    p.add_argument("--out", type=Path, default=ROOT / "assignments")
    p.add_argument("--verify", action="store_true",
                   help="execute each student edition and check that only the stubs fail")
    args = p.parse_args(argv)
    build(args.book, args.out, args.chapters)
    bad = 0
    if args.verify:
        for path in chapters(args.out / "student"):
            if args.chapters and path.stem not in args.chapters:
                continue
            probs = verify_student(nbformat.read(path, as_version=4), args.book)
            print(f"{path.stem}: student edition " + ("ok" if not probs else
                                                      "FAILED\n  " + "\n  ".join(probs)))
            bad += bool(probs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
