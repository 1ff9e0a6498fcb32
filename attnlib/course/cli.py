"""The course kit's command lines: ``scripts/assignments.py`` (:func:`main`) and
``scripts/export_plain.py`` (:func:`export_main`).

::

    python scripts/assignments.py                    # every chapter of book/ -> assignments/
    python scripts/assignments.py 02_att_svm         # some chapters
    python scripts/assignments.py --verify           # also execute each student edition
    python scripts/assignments.py grade sub*.ipynb --out grades  # grades.csv + feedback
    python scripts/export_plain.py [--student] [--out DIR] [--ref REF] [NOTEBOOK ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat

from attnlib.course import batch, kit
from attnlib.course.notebook import chapters
from attnlib.course.plain import book_index, export
from attnlib.course.repo import ROOT, doc_path, toc_files
from attnlib.course.sandbox import Limits


def grade_main(argv) -> int:
    """``grade SUB.ipynb... --out DIR``: see :mod:`attnlib.course.batch` and the instructor
    guide."""
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
    lim = Limits(wall=args.timeout, cpu=args.cpu, memory_mb=args.memory, output=args.output)
    rows, ok = batch.grade_batch(args.submissions, args.out, master=args.master, book=args.book,
                                 lim=lim, jobs=args.jobs, sandbox=args.sandbox,
                                 unsafe=args.unsafe)
    for name in dict.fromkeys(r.submission for r in rows):
        mine = [r for r in rows if r.submission == name]
        print(f"{name}: {sum(r.points for r in mine):g}/{sum(r.max_points for r in mine):g}  "
              + "  ".join(f"{r.exercise}={r.status}" for r in mine))
    print(f"wrote {args.out / 'grades.csv'} and {args.out / 'feedback'}/")
    return 0 if ok else 1


def main(argv=None) -> int:
    """``assignments.py [CHAPTER...] [--verify]``, or ``assignments.py grade ...``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["grade"]:
        return grade_main(argv[1:])
    p = argparse.ArgumentParser(
        prog="assignments.py",
        description="Course kit: student and instructor editions of every chapter, zipped for "
                    "an LMS or Colab.")
    p.add_argument("chapters", nargs="*", help="chapter stems (default: every chapter)")
    p.add_argument("--book", type=Path, default=ROOT / "book")
    p.add_argument("--out", type=Path, default=ROOT / "assignments")
    p.add_argument("--verify", action="store_true",
                   help="execute each student edition and check that only the stubs fail")
    args = p.parse_args(argv)
    kit.build(args.book, args.out, args.chapters)
    bad = 0
    if args.verify:
        for path in chapters(args.out / "student"):
            if args.chapters and path.stem not in args.chapters:
                continue
            probs = kit.verify_student(nbformat.read(path, as_version=4), args.book)
            print(f"{path.stem}: student edition " + ("ok" if not probs else
                                                      "FAILED\n  " + "\n  ".join(probs)))
            bad += bool(probs)
    return 1 if bad else 0


def export_main(argv: list[str] | None = None) -> int:
    """``export_plain.py``: the plain export of the book's notebooks (default: every notebook
    of _toc.yml, into ``_build/plain/book/``)."""
    ap = argparse.ArgumentParser(
        prog="export_plain.py",
        description="Export the book's notebooks as plain Jupyter notebooks (no MyST), for "
                    "Colab and downloads.")
    ap.add_argument("notebooks", nargs="*", help="notebooks to export (default: all in _toc.yml)")
    ap.add_argument("--out", default=str(ROOT / "_build" / "plain"), help="output folder")
    ap.add_argument("--ref", default=None, help="release to pin the install cell to")
    ap.add_argument("--student", action="store_true",
                    help="export the student editions (no solutions; course kit, Colab)")
    args = ap.parse_args(argv)
    index = book_index(args.ref)
    wanted = [re.sub(r"\.ipynb$", "", str(Path(p).resolve().relative_to(ROOT)))
              for p in args.notebooks] or [d for d in toc_files(ROOT)
                                           if doc_path(d).suffix == ".ipynb"]
    out = Path(args.out)
    for doc in wanted:
        target = out / f"{doc}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        plain = export(doc, index, student=args.student)
        target.write_text(json.dumps(plain, indent=1, ensure_ascii=False) + "\n",
                          encoding="utf-8")
    print(f"[export_plain] {len(wanted)} notebook(s) -> {out} (release {index.ref})")
    return 0
