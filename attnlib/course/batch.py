"""Grading a batch of submissions against their master notebooks (:func:`grade_batch`).

Each submission is graded against one master: the chapter its metadata and its file name name
(a notebook that names two chapters, or another chapter than ``master``, is refused). Then:

1. **Collect** (the student's code, sandboxed: :mod:`attnlib.course.sandbox`). The
   submission's code cells run in a separate process with its own working folder, limits on
   wall time, CPU time, address space and file size, and its printed output cut after a
   fixed size. Where the master's check cell stood, the process evaluates the master's
   *answer expressions* (the first argument of each ``al.check.*`` call) and writes their
   values as plain data.
2. **Check** (the instructor's code, in a clean process that no student code touched:
   :mod:`attnlib.course.checker`). The master notebook runs from top to bottom; at each check
   cell the master's own check is evaluated with the student's answer in place of the first
   argument, and the :class:`attnlib.check.Feedback` it returns is the verdict. Nothing
   printed by the student is read.

The result is ``out/grades.csv`` (one row per exercise, in the book's order) and a feedback
file per submission, ``out/feedback/*.md``. This module does not import attnlib's checks (the
checker's master notebook does).
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from attnlib.course import sandbox as box
from attnlib.course.grading import Exercise, Row, exercises, plan, written_rows
from attnlib.course.notebook import chapters
from attnlib.course.repo import ROOT
from attnlib.course.sandbox import Limits, Run, SandboxUnavailable


def use_namespace(sandbox: str = "auto", unsafe: bool = False) -> bool:
    """Whether submissions run in the namespace sandbox. Fails closed: where it cannot run
    (or ``sandbox`` is ``none``), :class:`SandboxUnavailable` unless ``unsafe``."""
    if sandbox not in ("auto", "namespace", "none"):
        raise ValueError(f"sandbox: expected auto, namespace or none, got {sandbox!r}")
    if sandbox != "none" and box.namespace_works():
        return True
    if unsafe and sandbox != "namespace":
        return False
    why = ("--sandbox none turns the namespace sandbox off" if sandbox == "none" else
           "the namespace sandbox cannot run here (its probe failed: unprivileged user "
           "namespaces, or mounts inside them, are not allowed)")
    raise SandboxUnavailable(
        f"refusing to grade: {why}. Without it only a Python audit hook stands between a "
        "submission and your files, and native code gets past it (torch.save writes from C++, "
        "an SQLite ATTACH opens any file). Grade on "
        "a machine where the sandbox runs, or pass --unsafe to grade with the audit hook only.")


def collect(submission, master, exs, lim: Limits, sandbox: str = "auto", unsafe: bool = False,
            hide=()) -> Run:
    """Run a submission's cells in the sandbox and return the answers it computed; ``hide``:
    more folders the submission must not read (the book, the submissions, the output)."""
    job = {"steps": plan(submission, master, exs), "answers": [e.answers for e in exs]}
    return box.run(job, lim, use_namespace(sandbox, unsafe), hide=hide)


def chapter_claims(sub_nb, sub_path: Path, book: Path) -> dict[str, str]:
    """The chapters a submission names, by where: ``metadata`` (``course_kit.chapter``, which
    the student edition records) and ``file name`` (a chapter's stem in it, else its leading
    number ``NN_``)."""
    stems = [p.stem for p in chapters(book)]
    meta = sub_nb.metadata.get("course_kit", {}) if sub_nb is not None else {}
    chap = meta.get("chapter") if isinstance(meta, dict) else None
    out = {"metadata": chap} if isinstance(chap, str) and chap in stems else {}
    name = Path(sub_path).name
    hits = [s for s in stems if s in name]
    number = re.match(r"(\d+)_", name)
    if not hits and number:
        hits = [s for s in stems if s.split("_")[0] == number[1]]
    if len(hits) == 1:
        out["file name"] = hits[0]
    return out


def find_master(sub_nb, sub_path: Path, book: Path, master: Path | None = None):
    """(the master of a submission or None, why it is refused or None). The master is
    ``master`` if given, else the chapter its metadata and file name name; a notebook that
    names another chapter than the one it would be graded against is refused."""
    claims = chapter_claims(sub_nb, sub_path, book)
    if master is not None:
        other = {k: v for k, v in claims.items() if v != Path(master).stem}
        why = "; ".join(f"its {k} says {v}" for k, v in other.items())
        return Path(master), (f"refused: graded against {Path(master).stem} (--master), but "
                              f"{why}" if other else None)
    found = {p.stem: p for p in chapters(book)}
    if len(set(claims.values())) > 1:
        return found[claims["file name"]], (
            f"refused: its metadata says chapter {claims['metadata']} but its file name says "
            f"{claims['file name']} (a notebook is graded against one chapter: fix the file "
            "name or the metadata, or pass --master)")
    chap = next(iter(claims.values()), None)
    return (found[chap], None) if chap else (None, "no master notebook found (pass --master)")


def grade_batch(subs: list[Path], out: Path, master: Path | None = None, book: Path | None = None,
                lim: Limits | None = None, jobs: int = 1, sandbox: str = "auto",
                check_timeout: float = 1800, unsafe: bool = False) -> tuple[list[Row], bool]:
    """Grade submissions; write ``out/grades.csv`` and ``out/feedback/*.md``.

    Returns the rows and whether every submission could be graded. Refuses
    (:class:`SandboxUnavailable`) where the namespace sandbox cannot run, unless ``unsafe``.
    """
    import nbformat

    mode = "namespace" if use_namespace(sandbox, unsafe) else "none"
    lim = lim or Limits()
    book = Path(book or ROOT / "book")
    out = Path(out)
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    names = _names(subs)
    notebooks, masters, fatal = {}, {}, {}
    for sub, name in zip(subs, names, strict=True):
        try:
            notebooks[name] = nbformat.read(sub, as_version=4)
        except Exception as e:  # noqa: BLE001 - a file that is not a notebook
            notebooks[name], fatal[name] = None, f"not a readable notebook ({type(e).__name__})"
        m, why = find_master(notebooks[name], sub, book, master)
        if why and name not in fatal:
            fatal[name] = why
        masters[name] = Path(m) if m else None
    master_nbs = {m: nbformat.read(m, as_version=4) for m in set(masters.values()) if m}
    runs = {}

    def one(name):
        m = masters[name]
        exs = exercises(master_nbs[m])
        try:
            return name, collect(notebooks[name], master_nbs[m], exs, lim, mode, unsafe, hide)
        except Exception as e:  # noqa: BLE001 - recorded for this submission only
            return name, Run(status="error", message=f"the grader failed ({e})")

    todo = [n for n in names if n not in fatal]
    hide = [book, out, *(Path(s).resolve().parent for s in subs),
            *(m.resolve().parent for m in master_nbs)]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for name, run in pool.map(one, todo):
            runs[name] = run
    rows, texts = [], {}
    for m in sorted(set(masters[n] for n in todo), key=str):
        group = [n for n in todo if masters[n] == m]
        verdicts, problem = _check(m, master_nbs[m], {n: runs[n] for n in group},
                                   check_timeout)
        if problem and len(group) > 1 and "master notebook is broken" not in problem:
            verdicts, problem = {}, None  # one answer file may have broken it: one at a time
            for n in group:
                v, p = _check(m, master_nbs[m], {n: runs[n]}, check_timeout)
                verdicts[n] = v.get(n) or {str(k): {"status": "error", "message": p}
                                           for k in range(len(exercises(master_nbs[m])))}
        exs = exercises(master_nbs[m])
        for name in group:
            run = runs[name]
            for k, e in enumerate(exs):
                v = verdicts.get(name, {}).get(str(k)) if not problem else None
                if v is None:
                    v = {"status": "error", "message": problem or "not checked"}
                msg = v["message"]
                if v["status"] == "missing" and run.status != "ok":
                    msg += f" ({run.message})"
                rows.append(Row(name, e.label, e.points if v["status"] == "passed" else 0.0,
                                e.points, v["status"], msg, m.stem, e.cell))
            for row, text in written_rows(name, notebooks[name], master_nbs[m]):
                row.chapter = m.stem
                rows.append(row)
                texts[(name, row.exercise)] = text
    for name in fatal:
        m = masters.get(name)
        exs = exercises(master_nbs[m]) if m in master_nbs else [
            Exercise("(all)", -1, None, "", [], 0.0)]
        rows += [Row(name, e.label, 0.0, e.points, "error", fatal[name],
                     m.stem if m else "", e.cell) for e in exs]
    graded = not any(r.status == "error" for r in rows)
    order = {n: i for i, n in enumerate(names)}
    rows.sort(key=lambda r: (order[r.submission], r.order))  # the book's order of exercises
    _write(out, rows, runs, names, fatal, texts)
    return rows, graded


def _check(master: Path, nb, runs: dict, timeout: float):
    """Run the checker for one master (its path and notebook ``nb``) over the runs' answers;
    (verdicts, problem)."""
    with tempfile.TemporaryDirectory(prefix="attnlib-check-") as d:
        d = Path(d)
        subs = {}
        for k, (name, run) in enumerate(runs.items()):
            p = d / f"answers{k}.json"
            data = {"answers": run.answers} if run.status != "error" else {"error": run.message}
            p.write_text(json.dumps(data))
            subs[name] = str(p)
        job = {"master": str(master.resolve()), "cwd": str(master.resolve().parent),
               "cells": [[c.cell_type, c.source] for c in nb.cells],
               "exercises": [{"cell": e.cell, "label": e.label, "answers": e.answers}
                             for e in exercises(nb)],
               "submissions": subs, "out": str(d / "verdicts.json")}
        (d / "job.json").write_text(json.dumps(job))
        env = {**os.environ, "ATTNLIB_CHECK_STRICT": "0", "MPLBACKEND": "Agg"}
        try:
            r = subprocess.run([sys.executable, "-m", "attnlib.course.checker",
                                str(d / "job.json")], capture_output=True, text=True,
                               timeout=timeout, env=env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return {}, f"the checker ran past {timeout:g} s"
        if r.returncode != 0 or not (d / "verdicts.json").exists():
            return {}, f"the checker failed: {(r.stderr or r.stdout).strip()[-500:]}"
        data = json.loads((d / "verdicts.json").read_text())
    for w in data.get("warnings", []):
        print(f"warning: {master.name}: {w}", file=sys.stderr)
    if data["master_errors"]:
        return {}, "the master notebook is broken: " + "; ".join(data["master_errors"])[:800]
    return data["results"], None


def _names(subs):
    names, seen = [], set()
    for s in subs:
        n = str(s)
        while n in seen:
            n += "'"
        seen.add(n)
        names.append(n)
    return names


def _write(out: Path, rows, runs, names, fatal, texts):
    with open(out / "grades.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "chapter", "exercise", "graded", "points", "max_points",
                    "status", "message"])
        for r in rows:
            w.writerow([r.submission, r.chapter, r.exercise, r.graded, f"{r.points:g}",
                        f"{r.max_points:g}", r.status,
                        r.message.splitlines()[0] if r.message else ""])
    used = set()
    for name in names:
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(name).with_suffix("").as_posix()).strip("_")
        while stem in used:
            stem += "_"
        used.add(stem)
        mine = [r for r in rows if r.submission == name]
        auto = [r for r in mine if r.graded == "auto"]
        hand = [r for r in mine if r.graded == "hand"]
        got, total = sum(r.points for r in auto), sum(r.max_points for r in auto)
        score = f"**Score: {got:g} / {total:g}** (checked automatically)"
        if hand:
            pts = sum(r.max_points for r in hand)
            score += (f"; {len(hand)} written answer{'s' * (len(hand) > 1)} "
                      f"({pts:g} point{'s' * (pts != 1)}) to be graded by hand")
        lines = [f"# Feedback: {name}", "", score, ""]
        run = runs.get(name)
        if name in fatal:
            lines += [f"Could not be graded: {fatal[name]}", ""]
        elif run is not None and run.status != "ok":
            lines += [f"Note: {run.message}.", ""]
        for r in mine:
            lines += [f"## {r.exercise}: {r.status} ({r.points:g}/{r.max_points:g})", "",
                      "```text", r.message, "```", ""]
            if texts.get((name, r.exercise)):
                lines += ["The written answer:", ""]
                lines += ["> " + x for x in texts[(name, r.exercise)].splitlines()] + [""]
        if run is not None and run.cell_errors:
            lines += ["## Cells that raised while running your notebook", ""]
            lines += [f"- {e}" for e in run.cell_errors] + [""]
        (out / "feedback" / f"{stem}.md").write_text("\n".join(lines))
