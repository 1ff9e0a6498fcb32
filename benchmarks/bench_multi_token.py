"""Benchmark: the multi-token experiment (``tf_multi_token``, E4) at the paper's full scale.

:func:`before_after` runs ``python -m attnlib reproduce tf_multi_token`` at its defaults (500
kept runs per d in (4, 6, 8, 10), n = 3, T = 4, 2001 steps) twice, side by side in one run,
each in a fresh process with an empty cache: the code of an earlier commit (extracted with
``git archive`` into a temporary folder put first on PYTHONPATH; no git state changes) and
this tree. It reports the wall time, the child's CPU time (user + sys), the candidates trained
and counted, and the targets met. :func:`step_cost` times one normalised-GD step per candidate
both ways in this process on the same candidates: :func:`attnlib.train` (the straightforward
path) and :func:`attnlib.experiments.multi_token.train_relu_candidates` (kernel coordinates,
batch last).

Run ``python benchmarks/bench_multi_token.py`` for the tables (``--write`` also puts them in
benchmarks/RESULTS.md, ``--before COMMIT`` picks the earlier commit, ``--accepted N`` runs both
at N kept runs per d instead of 500, ``--no-paper`` skips the paper-scale runs).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from results_md import write_section  # benchmarks/results_md.py (run as a script)

from attnlib.experiments.multi_token import (
    relu_candidates,
    train_relu_candidates,
    train_relu_reference,
)

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "e49953c"  # the last commit before issue 16 (al.train on batches of 16,384 candidates)
DS = (4, 6, 8, 10)


def _reproduce(pythonpath: Path, cwd: Path, accepted: int | None) -> dict:
    """``python -m attnlib reproduce tf_multi_token`` with an empty cache in a child process:
    wall s, the child's CPU s, its numbers and the summary's target lines."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(pythonpath), ATTNLIB_CACHE=f"{tmp}/cache",
                   OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        cmd = [sys.executable, "-m", "attnlib", "reproduce", "tf_multi_token", "--no-figure",
               "--out", f"{tmp}/out"]
        if accepted is not None:
            cmd += ["--set", f"accepted={accepted}", "--set", "progress=False"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        numbers = json.loads(Path(f"{tmp}/out/tf_multi_token.json").read_text())["numbers"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    marks = [line for line in out.stdout.splitlines() if line.lstrip()[:1] in ("✓", "✗")]
    return dict(wall_s=wall, cpu_s=cpu, numbers=numbers,
                met=sum(m.lstrip().startswith("✓") for m in marks), targets=len(marks))


def before_after(before: str = BEFORE, accepted: int | None = None) -> list[dict]:
    """The experiment with the code of commit ``before``, then with this tree."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", before, "attnlib"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        rows = [dict(code=f"before ({before})", **_reproduce(tree, tree, accepted))]
    rows.append(dict(code="after (this tree)", **_reproduce(ROOT, ROOT, accepted)))
    return rows


def step_cost(d: int, B: int = 1024, steps: int = 200) -> dict:
    """CPU µs per candidate and step, ``attnlib.train`` vs the kernel trainer, same candidates
    (one thread)."""
    data, V, W0 = relu_candidates(d, 3, 4, B, 1, "cpu")
    out = {}
    for name, fn in (("train", train_relu_reference), ("kernel", train_relu_candidates)):
        fn(data, V, W0, steps=2, record_every=1)  # warm up
        t = time.process_time()
        fn(data, V, W0, steps=steps, record_every=100)
        out[name] = (time.process_time() - t) / (B * steps) * 1e6
    return dict(d=d, B=B, steps=steps, **out)


def paper_table(rows: list[dict], accepted: int) -> str:
    head = (f"| `python -m attnlib reproduce tf_multi_token` ({accepted} kept runs per d) | "
            "wall (s) | CPU (s) | candidates trained | candidates counted (tried) | "
            "targets met |\n|---|---|---|---|---|---|")
    lines = []
    for r in rows:
        num = r["numbers"]
        tried = sum(num.get(f"tried_d{d}", 0) for d in DS)
        trained = sum(num.get(f"trained_d{d}", num.get(f"tried_d{d}", 0)) for d in DS)
        lines.append(f"| {r['code']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {trained:,.0f} | "
                     f"{tried:,.0f} | {r['met']} / {r['targets']} |")
    return "\n".join([head, *lines])


def numbers_table(rows: list[dict]) -> str:
    """Per d: final mean 1 − corr (SVM-eq, W^dir, 1-token) before and after."""
    head = ("| d | SVM-eq before | SVM-eq after | W^dir before | W^dir after | 1-token before "
            "| 1-token after | tried before | tried after |\n|---|---|---|---|---|---|---|---|"
            "---|")
    b, a = rows[0]["numbers"], rows[1]["numbers"]
    lines = [f"| {d} | {b[f'eq_mean_d{d}']:.4f} | {a[f'eq_mean_d{d}']:.4f} | "
             f"{b[f'dir_mean_d{d}']:.4f} | {a[f'dir_mean_d{d}']:.4f} | "
             f"{b[f'one_mean_d{d}']:.4f} | {a[f'one_mean_d{d}']:.4f} | "
             f"{b[f'tried_d{d}']:.0f} | {a[f'tried_d{d}']:.0f} |" for d in DS]
    return "\n".join([head, *lines])


def step_table(rows: list[dict]) -> str:
    head = ("| d | candidates | steps | `al.train` (CPU µs per candidate-step) | kernel trainer "
            "| ratio |\n|---|---|---|---|---|---|")
    lines = [f"| {r['d']} | {r['B']} | {r['steps']} | {r['train']:.2f} | {r['kernel']:.2f} | "
             f"{r['train'] / r['kernel']:.1f}x |" for r in rows]
    return "\n".join([head, *lines])


def write_results(text: str, path=None) -> None:
    """Put ``text`` between this benchmark's markers in benchmarks/RESULTS.md."""
    write_section("bench_multi_token", text, path)


if __name__ == "__main__":
    torch.set_num_threads(1)
    args = sys.argv[1:]
    before = args[args.index("--before") + 1] if "--before" in args else BEFORE
    accepted = int(args[args.index("--accepted") + 1]) if "--accepted" in args else None
    started = datetime.datetime.now(datetime.timezone.utc)
    load0 = os.getloadavg()[0]
    parts = [step_table([step_cost(d) for d in (4, 10)])]
    if "--no-paper" not in args:
        rows = before_after(before, accepted)
        parts += [paper_table(rows, accepted or 500), numbers_table(rows)]
    load1 = os.getloadavg()[0]
    text = "\n\n".join([
        "## Paper scale, live: tf_multi_token (`python benchmarks/bench_multi_token.py "
        "--write`)",
        f"Measured {started:%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPU cores, torch {torch.__version__}; load average "
        f"{load0:.1f} at the start and {load1:.1f} at the end (the machine was shared: "
        "compare the CPU times, not the wall times). No GPU: the GPU path was not run.",
        *parts])
    print(text)
    if "--write" in args:
        write_results(text)
