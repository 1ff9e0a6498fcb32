"""Benchmark: ``al.att_svm`` against one cvxpy constraint per token (the official notebooks).

The baseline builds each instance the way the official notebooks do: a fresh
``cp.Variable((d, d))``, a Python loop appending one constraint
``(x_it - x_{i alpha_i})^T W z_i <= -1`` per token, ``cp.norm(W, "fro" | "nuc")`` and a fresh
canonicalisation per solve. ``att_svm`` builds all rows as one tensor, reuses one compiled
(DPP) problem per shape, works in the span of the queries and solves the nuclear problem
through its dual SDP. Both use Clarabel (cvxpy's default for these problems) and the same
instances (``random_data``, optimal tokens); the first ``att_svm`` call of each shape, which
compiles the problem, is included in its time.

Run ``python benchmarks/bench_svm.py`` for the tables (``--write`` also puts them in
benchmarks/RESULTS.md); ``run()`` returns the rows as dicts (``benchmarks/bench_core.py``
imports it).
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time
from pathlib import Path

import cvxpy as cp
import numpy as np
import torch

from attnlib import svm
from attnlib.data import random_data
from attnlib.svm.engine import compiled
from attnlib.tokens import optimal_tokens

SIZES = ((6, 8, 10), (15, 5, 20))
NORMS = ("fro", "nuc")


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
    path = Path(__file__).with_name("RESULTS.md") if path is None else Path(path)
    begin, end = "<!-- bench_svm: begin -->", "<!-- bench_svm: end -->"
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    block = f"{begin}\n{text.strip()}\n{end}"
    if begin in old and end in old:
        new = old[:old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(new)


if __name__ == "__main__":
    torch.set_num_threads(1)
    started = datetime.datetime.now(datetime.timezone.utc)
    text = "\n\n".join([single_table(single_solve()), table(run())])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    header = (f"## Att-SVM solvers (`python benchmarks/bench_svm.py --write`)\n\n"
              f"Measured {started:%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
              f"{os.cpu_count()} cores, load average at the end {load:.1f} (a shared machine: "
              f"wall times are inflated, the CPU-time ratio is the steadier figure).")
    note = ("Both sides use Clarabel; att_svm's times include compiling each shape once "
            "(`attnlib.svm.engine.compiled.cache_clear()` first). *loop*: the official "
            "notebooks' construction, "
            "one cvxpy constraint per token and a fresh problem per instance. The nuclear "
            "problems are bound by the interior-point solve of the SDP (att_svm solves the "
            "smaller dual SDP, in the span of the queries), so their ratio is lower than the "
            "Frobenius one, where canonicalisation dominates the loop's time.")
    print(header, text, note, sep="\n\n")
    if "--write" in sys.argv[1:]:
        write_results("\n\n".join([header, text, note]))
