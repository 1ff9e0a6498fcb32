"""Benchmark: ``al.att_svm`` against one cvxpy constraint per token (the official notebooks).

The baseline builds each instance the way the official notebooks do: a fresh
``cp.Variable((d, d))``, a Python loop appending one constraint
``(x_it - x_{i alpha_i})^T W z_i <= -1`` per token, ``cp.norm(W, "fro" | "nuc")`` and a fresh
canonicalisation per solve, with Clarabel (cvxpy's default for these problems). ``att_svm``
builds all rows as one array, works in the span of the queries and solves with the exact fast
solvers of :mod:`attnlib.svm.fast` (one NNLS per Frobenius instance, a batched interior-point
method for the nuclear SDPs), certifying every answer and falling back to a compiled (DPP)
Clarabel problem per shape. Both run on the same instances (``random_data``, optimal
tokens); the first ``att_svm`` call of each shape, with any compilation, is in its time.

:func:`single_side_by_side` times one Frobenius (and nuclear) solve at the papers' size both
ways on the same instances, in one process. :func:`rank_before_after` runs
``python -m attnlib reproduce tf_svm_rank`` at paper scale (empty cache) twice, side by side
in one run: the code of an earlier commit (a git worktree put first on PYTHONPATH) and this
tree, with the wall time and the child processes' CPU time of each.

Run ``python benchmarks/bench_svm.py`` for the tables (``--write`` also puts them in
benchmarks/RESULTS.md, ``--before COMMIT`` picks the earlier commit, ``--no-rank`` skips the
paper-scale runs); ``run()`` returns the rows as dicts (``benchmarks/bench_core.py`` imports
it).
"""

from __future__ import annotations

import datetime
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cvxpy as cp
import numpy as np
import torch
from results_md import write_section  # benchmarks/results_md.py (run as a script)

from attnlib import svm
from attnlib.data import random_data
from attnlib.svm.engine import compiled
from attnlib.tokens import optimal_tokens

SIZES = ((6, 8, 10), (15, 5, 20))
NORMS = ("fro", "nuc")
ROOT = Path(__file__).resolve().parents[1]
BEFORE = "e49953c"  # the last commit before issue 16 (conic solvers only, recorded rank run)


def loop_att_svm(X: np.ndarray, z: np.ndarray, alpha: np.ndarray, norm: str) -> np.ndarray:
    """Att-SVM written as in the official notebooks: one cvxpy constraint per token."""
    n, T, d = X.shape
    W = cp.Variable((d, d))
    constraints = []
    for i in range(n):
        for t in range(T):
            if t != alpha[i]:
                constraints.append((X[i, t] - X[i, alpha[i]]) @ W @ z[i] <= -1)
    prob = cp.Problem(cp.Minimize(cp.norm(W, norm)), constraints)
    prob.solve(solver="CLARABEL")
    return W.value


def _norm(W: np.ndarray, norm: str) -> float:
    return float(np.linalg.norm(W, "nuc" if norm == "nuc" else "fro"))


def run(instances: int = 50, sizes=SIZES, norms=NORMS, seed: int = 0) -> list[dict]:
    """Time both constructions on ``instances`` random instances per size and norm.

    Returns
    -------
    list of dict
        One row per (size, norm): ``loop_s`` and ``attnlib_s`` (total seconds),
        ``loop_ms`` and ``attnlib_ms`` (per solve), ``ratio`` (loop / attnlib), the same in
        process CPU seconds (``loop_cpu_s``, ``attnlib_cpu_s``, ``cpu_ratio``: less affected
        by other load on the machine), and the largest relative difference of the optimal
        norms (``max_rel_diff``).
    """
    rows = []
    for n, T, d in sizes:
        data = random_data(n, T, d, trials=instances, seed=seed, device="cpu")
        alpha = optimal_tokens(data)
        X, z, a = data.X.numpy(), data.z.numpy(), alpha.numpy()
        for norm in norms:
            compiled.cache_clear()  # att_svm pays its compilation inside the timing
            t0, c0 = time.perf_counter(), time.process_time()
            W_fast = svm.att_svm(data, alpha=alpha, norm=norm).numpy()  # (B, d, d)
            t_fast, c_fast = time.perf_counter() - t0, time.process_time() - c0
            t0, c0 = time.perf_counter(), time.process_time()
            W_loop = [loop_att_svm(X[b], z[b], a[b], norm) for b in range(instances)]
            t_loop, c_loop = time.perf_counter() - t0, time.process_time() - c0
            diff = max(abs(_norm(Wf, norm) - _norm(Wl, norm)) / _norm(Wl, norm)
                       for Wf, Wl in zip(W_fast, W_loop))
            rows.append(dict(bench="svm", n=n, T=T, d=d, norm=norm, instances=instances,
                             loop_s=t_loop, attnlib_s=t_fast,
                             loop_ms=1e3 * t_loop / instances,
                             attnlib_ms=1e3 * t_fast / instances,
                             ratio=t_loop / t_fast, loop_cpu_s=c_loop, attnlib_cpu_s=c_fast,
                             cpu_ratio=c_loop / c_fast, max_rel_diff=diff))
    return rows


def single_solve(n: int = 6, T: int = 8, d: int = 10, repeats: int = 20,
                 norms=("fro", "nuc", 1.5), seed: int = 0) -> list[dict]:
    """One ``att_svm`` solve: the first call of a shape (compiles) and the median warm call."""
    data = random_data(n, T, d, trials=repeats + 1, seed=seed, device="cpu")
    rows = []
    for norm in norms:
        compiled.cache_clear()
        times = []
        for b in range(repeats + 1):
            one = data.trial(b)
            t0 = time.perf_counter()
            svm.att_svm(one, norm=norm)
            times.append(time.perf_counter() - t0)
        rows.append(dict(bench="svm-single", n=n, T=T, d=d, norm=str(norm),
                         first_ms=1e3 * times[0], median_ms=1e3 * float(np.median(times[1:]))))
    return rows


def single_side_by_side(n: int = 6, T: int = 8, d: int = 10, repeats: int = 30,
                        norms=NORMS, seed: int = 0) -> list[dict]:
    """One solve at a time, both ways, on the same ``repeats`` instances (after one warm-up of
    each): the official per-constraint construction and ``al.att_svm`` (certified).

    Returns one row per norm: median wall ms and total CPU s of each, their ratios.
    """
    data = random_data(n, T, d, trials=repeats + 1, seed=seed, device="cpu")
    alpha = optimal_tokens(data)
    X, z, a = data.X.numpy(), data.z.numpy(), alpha.numpy()
    rows = []
    for norm in norms:
        svm.att_svm(data.trial(0), alpha=alpha[0], norm=norm)  # warm-up: imports, compiles
        loop_att_svm(X[0], z[0], a[0], norm)
        fast, loop, cf, cl = [], [], 0.0, 0.0
        for b in range(1, repeats + 1):  # interleaved, so both see the same machine load
            t0, c0 = time.perf_counter(), time.process_time()
            svm.att_svm(data.trial(b), alpha=alpha[b], norm=norm)
            fast.append(time.perf_counter() - t0)
            cf += time.process_time() - c0
            t0, c0 = time.perf_counter(), time.process_time()
            loop_att_svm(X[b], z[b], a[b], norm)
            loop.append(time.perf_counter() - t0)
            cl += time.process_time() - c0
        rows.append(dict(bench="svm-single-vs-loop", n=n, T=T, d=d, norm=norm, repeats=repeats,
                         attnlib_ms=1e3 * float(np.median(fast)),
                         loop_ms=1e3 * float(np.median(loop)),
                         ratio=float(np.median(loop) / np.median(fast)),
                         cpu_ratio=cl / cf))
    return rows


def _reproduce(pythonpath: Path, cwd: Path) -> dict:
    """``python -m attnlib reproduce tf_svm_rank`` at its defaults (paper scale) with an empty
    cache, in a child process: wall s, the child's CPU s, and the summary's target lines."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(pythonpath), ATTNLIB_CACHE=f"{tmp}/cache",
                   OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "attnlib", "reproduce", "tf_svm_rank",
                              "--no-figure", "--out", f"{tmp}/out"], cwd=cwd, env=env,
                             capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    marks = [line for line in out.stdout.splitlines() if line.lstrip()[:1] in ("✓", "✗")]
    return dict(wall_s=wall, cpu_s=cpu, met=sum(m.lstrip().startswith("✓") for m in marks),
                targets=len(marks))


def rank_before_after(before: str = BEFORE) -> list[dict]:
    """``tf_svm_rank`` at paper scale, the code of commit ``before`` then this tree, side by
    side in one run (each in a fresh process with an empty cache)."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree),
                        before], check=True)
        try:
            rows = [dict(code=f"before ({before})", **_reproduce(tree, tree))]
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           check=True)
    rows.append(dict(code="after (this tree)", **_reproduce(ROOT, ROOT)))
    return rows


def single_vs_loop_table(rows: list[dict]) -> str:
    """The side-by-side single solves as a Markdown table."""
    head = ("| (n,T,d) | norm | solves | official loop, median (ms) | att_svm, median (ms) | "
            "ratio | CPU ratio |\n|---|---|---|---|---|---|---|")
    lines = [f"| ({r['n']},{r['T']},{r['d']}) | {r['norm']} | {r['repeats']} | "
             f"{r['loop_ms']:.1f} | {r['attnlib_ms']:.2f} | {r['ratio']:.1f}x | "
             f"{r['cpu_ratio']:.1f}x |" for r in rows]
    return "\n".join([head, *lines])


def rank_table(rows: list[dict]) -> str:
    """The before/after paper-scale runs as a Markdown table."""
    head = ("| `python -m attnlib reproduce tf_svm_rank` (40 cells x 100 instances x 2 norms) "
            "| wall (s) | CPU (s) | targets met |\n|---|---|---|---|")
    lines = [f"| {r['code']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
             f"{r['met']} / {r['targets']} |" for r in rows]
    return "\n".join([head, *lines])


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = ("| (n,T,d) | norm | instances | loop (ms/solve) | att_svm (ms/solve) | ratio "
            "| CPU ratio | max rel. diff of optimal norm |\n|---|---|---|---|---|---|---|---|")
    lines = [f"| ({r['n']},{r['T']},{r['d']}) | {r['norm']} | {r['instances']} | "
             f"{r['loop_ms']:.1f} | {r['attnlib_ms']:.1f} | {r['ratio']:.1f}x | "
             f"{r['cpu_ratio']:.1f}x | {r['max_rel_diff']:.1e} |" for r in rows]
    return "\n".join([head, *lines])


def single_table(rows: list[dict]) -> str:
    """The single-solve rows as a Markdown table."""
    head = ("| (n,T,d) | norm | first call, compiles (ms) | warm solve, median (ms) |\n"
            "|---|---|---|---|")
    lines = [f"| ({r['n']},{r['T']},{r['d']}) | {r['norm']} | {r['first_ms']:.0f} | "
             f"{r['median_ms']:.1f} |" for r in rows]
    return "\n".join([head, *lines])


def write_results(text: str, path=None) -> None:
    """Put ``text`` between this benchmark's markers in benchmarks/RESULTS.md."""
    write_section("bench_svm", text, path)


if __name__ == "__main__":
    torch.set_num_threads(1)
    args = sys.argv[1:]
    before = args[args.index("--before") + 1] if "--before" in args else BEFORE
    started = datetime.datetime.now(datetime.timezone.utc)
    parts = []
    for part in (lambda: single_vs_loop_table(single_side_by_side()),
                 lambda: single_table(single_solve()), lambda: table(run()),
                 lambda: rank_table(rank_before_after(before))):
        if "--no-rank" in args and len(parts) == 3:
            break
        parts.append(part())
        print(parts[-1], end="\n\n", flush=True)  # each table as soon as it is measured
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    header = (f"## Paper scale, live: SVMs (`python benchmarks/bench_svm.py --write`)\n\n"
              f"Measured {started:%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
              f"{os.cpu_count()} cores, load average at the end {load:.1f} (a shared machine: "
              f"wall times are inflated, CPU times and their ratios are the steadier figures). "
              f"No GPU: every figure here is CPU only.")
    note = ("*official loop*: the official notebooks' construction, one cvxpy constraint per "
            "token, a fresh problem per instance, Clarabel. *att_svm*: the certified path "
            "(attnlib.svm.engine): Frobenius instances by one NNLS each (Lawson-Hanson's "
            "least-distance program), nuclear ones by a batched interior-point method on "
            "rank-one rows (attnlib.svm.fast); every answer is certified (margins, dual "
            "feasibility, duality gap) and an uncertified one goes to Clarabel. The second "
            "table's first call includes the imports and any compilation. The last table runs "
            f"the paper-scale rank experiment from the CLI with an empty cache, the code of "
            f"commit {before} (a git worktree first on PYTHONPATH) and this tree, one after "
            "the other in one run; CPU is the child process's user + system time.")
    print(header, note, sep="\n\n")
    if "--write" in args:
        write_results("\n\n".join([header, *parts, note]))
