"""Cold-cache CPU seconds of the mirror-descent experiments (chapters 9 and 10, the report).

Runs every experiment that ``book/09_mirror_descent.ipynb``, ``book/10_real_data.ipynb`` and
the reproduction report compute, at the settings they use, with ``cache=False``, and writes
one JSON file: per run its CPU and wall seconds, every number and every target verdict.
``--compare A.json B.json`` diffs two such files (numbers and verdicts).

    python benchmarks/bench_mirror.py --out before.json          # (PYTHONPATH=<old tree>)
    python benchmarks/bench_mirror.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

#: (label, experiment, settings): the calls of chapter 9, chapter 10 and the report
RUNS = [
    ("md_bias", "md_bias", {}),
    ("md_mechanics", "md_mechanics", {}),
    ("md_convergence@ch9", "md_convergence", {"trials": 10, "steps": (1500, 2000, 5000)}),
    ("md_official_numerics", "md_official_numerics", {}),
    ("md_unnormalized", "md_unnormalized", {}),
    ("md_lp_path", "md_lp_path", {}),
    ("md_dual", "md_dual", {}),
    ("md_joint@ch9", "md_joint", {"steps": (1500, 2000, 5000)}),
    ("md_convergence@report", "md_convergence", {}),
    ("md_joint@report", "md_joint", {}),
    ("md_path@report", "md_path", {}),
    ("md_text", "md_text", {}),
    ("md_reviews", "md_reviews", {"progress": False}),
    ("md_text_svm", "md_text_svm", {}),
    ("md_digits", "md_digits", {}),
]


def measure(only=None) -> dict:
    import attnlib as al

    out = {}
    for label, name, kw in RUNS:
        if only and label not in only and name not in only:
            continue
        c0, w0 = time.process_time(), time.perf_counter()
        res = al.experiments.run(name, cache=False, **kw)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        out[label] = dict(cpu=cpu, wall=wall,
                          numbers={k: float(v) for k, v in res.numbers.items()},
                          verdicts={v["key"]: v["ok"] for v in res.verdicts()})
        print(f"{label:26s} cpu {cpu:7.2f} s  wall {wall:7.2f} s", flush=True)
    return out


def compare(a: dict, b: dict, rtol: float) -> int:
    bad = 0
    print(f"| run | before CPU s | after CPU s | numbers differing (rel > {rtol:g}) | verdicts |")
    print("|---|---|---|---|---|")
    ta = tb = 0.0
    for label in a:
        if label not in b:
            continue
        na, nb = a[label]["numbers"], b[label]["numbers"]
        diff = []
        for k in sorted(set(na) | set(nb)):
            x, y = na.get(k, math.nan), nb.get(k, math.nan)
            same = (math.isnan(x) and math.isnan(y)) or x == y or (
                abs(x - y) <= rtol * max(abs(x), abs(y), 1e-300))
            if not same:
                diff.append(f"{k}: {x:.6g} -> {y:.6g}")
        va, vb = a[label]["verdicts"], b[label]["verdicts"]
        vd = [k for k in va if va[k] != vb.get(k)]
        bad += bool(vd)
        ta, tb = ta + a[label]["cpu"], tb + b[label]["cpu"]
        print(f"| {label} | {a[label]['cpu']:.1f} | {b[label]['cpu']:.1f} | "
              f"{len(diff)}/{len(na)} | {'changed: ' + ', '.join(vd) if vd else 'same'} |")
        for d in diff:
            print(f"    {d}", file=sys.stderr)
    print(f"| total | {ta:.1f} | {tb:.1f} | | |")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--compare", nargs=2)
    ap.add_argument("--rtol", type=float, default=0.0)
    args = ap.parse_args()
    if args.compare:
        a, b = (json.load(open(f)) for f in args.compare)
        sys.exit(compare(a, b, args.rtol))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    res = measure(args.only)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
