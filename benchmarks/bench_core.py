"""Core benchmark: batched ``al.train`` against a per-trial research-notebook loop.

Run ``python benchmarks/bench_core.py`` (``--help`` for options). It prints, side by side:

(a) the notebook loop (one small ``nn.Module`` and one ``torch.optim.SGD`` per trial, normalised
    gradient, autograd) against ``al.train`` batched, for 100 trials x 2000 normalised-GD steps
    at n=6, T=8, d=10, for W and for (K,Q), from the same initialisations (their final matrices
    are compared); the loop is timed on ``--loop-trials`` trials and scaled linearly to 100
    (it is a loop over independent trials), or on all of them with ``--full``;
(b) the SVM benchmark of ``benchmarks/bench_svm.py`` (its ``run()``), when that file exists;
(c) on a CUDA GPU, when one is available: 10,000 trials x 2000 steps on the GPU and the
    CPU-vs-GPU agreement on the first trials.

Both sides of (a) run on one intra-op thread (``al.train`` does so by itself for problems this
small; for the loop it is set here, since two threads made it far slower on a shared 2-core
machine). Timings go to benchmarks/RESULTS.md, never into tests.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import math
import os
import platform
import time
from pathlib import Path

import torch
import torch.nn as nn

import attnlib as al
from attnlib.examples import EPS  # the official notebooks' epsilon (float64 machine epsilon)

N, T, D = 6, 8, 10


class NotebookAttention(nn.Module):
    """The official notebooks' model (TF-SVM ``base.py``): W or (K, Q) as ``nn.Linear``."""

    def __init__(self, d, kq=False):
        super().__init__()
        self.kq = kq
        if kq:
            self.query = nn.Linear(d, d, bias=False)
            self.key = nn.Linear(d, d, bias=False)
        else:
            self.W = nn.Linear(d, d, bias=False)

    def forward(self, X, z, v):
        n, _, d = X.shape
        z = z.reshape(n, 1, d)
        if self.kq:
            s = torch.softmax(self.query(z) @ self.key(X).transpose(-2, -1), dim=-1)
        else:
            s = torch.softmax(z @ self.W(X).transpose(-2, -1), dim=-1)
        return (s @ X) @ v

    def combined(self):
        """The paper's W (``nn.Linear`` computes z^T W_lin x, so W = W_lin^T)."""
        if self.kq:
            return (self.query.weight.T @ self.key.weight).T
        return self.W.weight.T


def notebook_loop(data, kq, steps, trials):
    """One model and one SGD optimizer per trial, normalised gradients, as in the notebooks."""
    Ws, inits = [], []
    for b in range(trials):
        X, Y, z, v = data.X[b], data.Y[b], data.z[b], data.v[b]
        torch.manual_seed(b)
        model = NotebookAttention(D, kq).double()
        inits.append({k: w.detach().T.clone() for k, w in
                      (("K", model.key.weight), ("Q", model.query.weight))} if kq else
                     {"W": model.W.weight.detach().T.clone()})
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.log(1 + torch.exp(-Y * model(X, z, v).view(-1))).mean()
            if kq:
                loss = loss + EPS * (model.key.weight.norm() ** 2 + model.query.weight.norm() ** 2)
            loss.backward()
            for p in model.parameters():
                p.grad /= p.grad.norm() + EPS
            opt.step()
        Ws.append(model.combined().detach())
    return torch.stack(Ws), inits


def bench_train(trials=100, steps=2000, loop_trials=10, seed=0):
    """(a): the time ratio loop / batched for W and (K, Q)."""
    rows = []
    data = al.random_data(N, T, D, trials=trials, seed=seed, device="cpu")
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for param in ("W", "KQ"):
            kq = param == "KQ"
            notebook_loop(data, kq, 2, 1)  # warm-up: torch.optim's first step imports a lot
            al.train(data, param=param, steps=2)
            t0, c0 = time.perf_counter(), time.process_time()
            W_loop, inits = notebook_loop(data, kq, steps, loop_trials)
            t_loop = (time.perf_counter() - t0) * trials / loop_trials
            c_loop = (time.process_time() - c0) * trials / loop_trials
            # the same initialisations for every trial: the loop's for the first ones
            full_inits = [inits[b] if b < loop_trials else _draw_init(kq, b)
                          for b in range(trials)]
            init = {k: torch.stack([i[k] for i in full_inits]) for k in full_inits[0]}
            t0, c0 = time.perf_counter(), time.process_time()
            res = al.train(data, param=param, steps=steps, lr=0.1, eps=EPS,
                           reg=EPS if kq else 0.0, init=init, record_every=steps)
            t_batch = time.perf_counter() - t0
            c_batch = time.process_time() - c0
            agree = float(al.correlation(res.W[:loop_trials], W_loop).min())
            rows.append(dict(bench="train", param=param, trials=trials, steps=steps,
                             loop_s=t_loop, loop_trials_timed=loop_trials, batched_s=t_batch,
                             ratio=t_loop / t_batch, loop_cpu_s=c_loop, batched_cpu_s=c_batch,
                             cpu_ratio=c_loop / c_batch, min_corr_loop_vs_batched=agree))
    finally:
        torch.set_num_threads(saved)
    return rows


def _draw_init(kq, b):
    torch.manual_seed(b)
    m = NotebookAttention(D, kq).double()
    if kq:
        return {"K": m.key.weight.detach().T.clone(), "Q": m.query.weight.detach().T.clone()}
    return {"W": m.W.weight.detach().T.clone()}


def bench_cuda(trials=10_000, steps=2000, check=100, seed=0):
    """(c): many trials on the GPU, and agreement with the CPU on the first ``check``."""
    if not torch.cuda.is_available():
        return []
    rows = []
    data = al.random_data(N, T, D, trials=trials, seed=seed, device="cuda")
    for dtype in (torch.float32, torch.float64):
        al.train(data, steps=5, dtype=dtype)  # warm-up (kernels, allocator)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        al.train(data, steps=steps, dtype=dtype, record_every=steps)
        torch.cuda.synchronize()
        rows.append(dict(bench="cuda", param="W", trials=trials, steps=steps,
                         dtype=str(dtype).replace("torch.", ""), gpu_s=time.perf_counter() - t0,
                         device=torch.cuda.get_device_name()))
    sub = al.random_data(N, T, D, trials=check, seed=seed, device="cpu")
    cpu = al.train(sub, steps=steps, record_every=steps)
    gpu = al.train(sub, steps=steps, record_every=steps, device="cuda")
    rows.append(dict(bench="cuda-agreement", trials=check, steps=steps,
                     max_abs_diff=float((gpu.W.cpu() - cpu.W).abs().max()),
                     min_corr=float(al.correlation(gpu.W.cpu(), cpu.W).min())))
    return rows


def bench_svm():
    """(b): ``benchmarks/bench_svm.py``'s ``run()``, if that file exists."""
    path = Path(__file__).with_name("bench_svm.py")
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("bench_svm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = mod.run()
    return rows, (mod.table(rows) if hasattr(mod, "table") else None)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--loop-trials", type=int, default=10,
                    help="trials the notebook loop is timed on (scaled to --trials)")
    ap.add_argument("--full", action="store_true", help="time the loop on every trial")
    ap.add_argument("--skip-svm", action="store_true")
    args = ap.parse_args(argv)
    loop_trials = args.trials if args.full else min(args.loop_trials, args.trials)
    print(f"# bench_core  {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}  "
          f"load average {os.getloadavg()[0]:.1f}  "
          f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads "
          f"available, torch {torch.__version__}")
    print("\n## (a) notebook loop vs al.train (normalised GD, lr 0.1, float64, CPU)\n")
    print("| param | trials x steps | loop s (cpu s) | batched s (cpu s) | ratio | CPU ratio "
          "| min corr loop/batched |")
    print("|---|---|---|---|---|---|---|")
    for r in bench_train(args.trials, args.steps, loop_trials):
        timed = ("" if r["loop_trials_timed"] == r["trials"]
                 else f" (timed on {r['loop_trials_timed']}, scaled)")
        print(f"| {r['param']} | {r['trials']} x {r['steps']} | {r['loop_s']:.1f} "
              f"({r['loop_cpu_s']:.1f}){timed} | {r['batched_s']:.2f} ({r['batched_cpu_s']:.2f}) "
              f"| {r['ratio']:.0f}x | {r['cpu_ratio']:.0f}x "
              f"| {r['min_corr_loop_vs_batched']:.6f} |")
    if not args.skip_svm:
        print("\n## (b) per-constraint cvxpy loop vs al.att_svm (bench_svm.run)\n")
        out = bench_svm()
        if out is None:
            print("benchmarks/bench_svm.py not found: skipped")
        else:
            rows, table = out
            print(table if table else "\n".join(map(str, rows)))
    print("\n## (c) CUDA\n")
    rows = bench_cuda(steps=args.steps)
    if not rows:
        print("no CUDA GPU here: skipped")
    for r in rows:
        print(" | ".join(f"{k}={v:.4g}" if isinstance(v, float) and not math.isnan(v)
                         else f"{k}={v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
