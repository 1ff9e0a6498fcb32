"""Building the course kit: both editions and the zips of every chapter; running a student
edition to verify it.

:func:`build` writes ``assignments/{student,instructor}/NN_name.ipynb``; ``NN_name.zip``, the
student's zip (the student edition, its plain export for Colab and the images it shows,
nothing else); and ``instructor.zip`` (the instructor editions: solutions). The same masters
give the same bytes (fixed cell ids, zip entries in a fixed order with a fixed time stamp), so
a rebuilt zip can be compared with the one handed out.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import sys
import zipfile
from pathlib import Path

import nbformat

from attnlib.course.drift import drift_problems
from attnlib.course.editions import instructor_edition, student_edition
from attnlib.course.notebook import chapters, parse_cell, tags, used_names
from attnlib.course.plain import book_index, export


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
    """The student edition as plain Jupyter Markdown (:mod:`attnlib.course.plain`: no MyST, the
    install cell pinned to the release): the copy to open in Colab or classic Jupyter."""
    if "index" not in _PLAIN:  # the book's titles, labels and citations: read once
        _PLAIN["index"] = book_index()
    plain = export(f"book/{stem}", _PLAIN["index"], nb=json.loads(nbformat.writes(student)))
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
        funcs |= {n.name for n in parse_cell(student.cells[i].source).body
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
