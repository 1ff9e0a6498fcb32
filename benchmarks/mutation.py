"""Mutation testing of attnlib's core modules: can the tests fail when the code is wrong?

mutmut 3 plants one small bug at a time (an operator flipped, a constant changed, an argument
dropped) in a copy of the package and runs that module's tests; a mutant is *killed* when a test
fails. The score per module is killed / (killed + survived); the surviving mutants are listed so
that each is either killed by a new test or argued equivalent in ``benchmarks/MUTATION.md``.

    (mutmut==3.8.1 is pinned in requirements.txt)
    .venv/bin/python benchmarks/mutation.py            # every module of MODULES
    .venv/bin/python benchmarks/mutation.py svm train-loop  # some of them
    .venv/bin/python benchmarks/mutation.py --jobs 2
    .venv/bin/python benchmarks/mutation.py svm --only 'attnlib.svm.engine.x_certify*'

To re-check survivors after adding a test: copy the test file into ``_build/mutation/NAME/``
and ``_build/mutation/NAME/mutants/tests/`` and run ``mutmut run NAME...`` there (mutmut
collects the new tests' coverage itself).

Each module is mutated in its own scratch copy (under ``_build/mutation/``), with only the test
files that exercise it, so a run takes minutes, not hours. Writes ``_build/mutation/NAME.json``
(counts and surviving mutants with their diffs) and prints a Markdown table for RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTMUT = Path(sys.executable).with_name("mutmut")

# module name -> (paths to mutate, the test files that exercise them)
# the unit tests of train/ and of the SVM engine, split by subject
TRAIN_TESTS = ("tests/test_train.py", "tests/test_train_loop.py", "tests/test_train_input.py")
SVM_TESTS = ("tests/test_svm_engine.py", "tests/test_svm_problems.py")
MODULES = {
    "models": (["attnlib/attention.py", "attnlib/gradient.py"], ["tests/test_models.py"]),
    "metrics": (["attnlib/metrics.py"], ["tests/test_metrics.py"]),
    "tokens": (["attnlib/tokens.py"], ["tests/test_tokens.py"]),
    "optimality": (["attnlib/optimality.py"], ["tests/test_optimality.py"]),
    # train/ in four runs: each with the test files that exercise it
    "train-loop": (["attnlib/train/loop.py"], list(TRAIN_TESTS)),
    "train-path": (["attnlib/train/path.py"],
                   [*TRAIN_TESTS, "tests/test_train_path.py", "tests/test_lp_path.py"]),
    "train-setup": (["attnlib/train/setup.py"], list(TRAIN_TESTS)),
    "train-config-mirror": (["attnlib/train/config.py", "attnlib/train/mirror.py"],
                            [*TRAIN_TESTS, "tests/test_train_mirror*.py",
                             "tests/test_mirror_numerics.py"]),
    # svm: the tiny-instance tests (n, T, d <= 4: a solve takes milliseconds) carry the solver
    # modules; test_svm.py and test_svm_certify.py (paper-size instances, hypothesis: ~10 s of
    # tests each, paid by every surviving mutant) stay out of the engine's loop
    "svm": (["attnlib/svm/engine.py"], [*SVM_TESTS, "tests/test_svm_engine_properties.py"]),
    "svm-primal": (["attnlib/svm/primal.py"], [*SVM_TESTS, "tests/test_svm_engine_properties.py"]),
    "svm-problems": (["attnlib/svm/problems.py"],
                     [*SVM_TESTS, "tests/test_svm_problems_properties.py"]),
    "svm-equivalence": (["attnlib/svm/equivalence.py"],
                        [*SVM_TESTS, "tests/test_svm_equivalence_oracle.py"]),
    "svm-config": (["attnlib/svm/config.py", "attnlib/svm/rows.py", "attnlib/svm/batch.py"],
                   ["tests/test_svm_engine.py", "tests/test_svm_problems.py",
             "tests/test_svm_certify.py",
                    "tests/test_svm_batch.py"]),
    # check/: the shared feedback/numeric layer and the SVM answers, then one run per answer
    # module with its own tests (each checks a learner's answer against its own NumPy oracle)
    "check": (["attnlib/check/__init__.py", "attnlib/check/feedback.py",
               "attnlib/check/numeric.py", "attnlib/check/svm_answers.py"],
              ["tests/test_check.py", "tests/test_check_svm_answers_independent.py",
               "tests/test_check_properties.py", "tests/test_check_hand_solved.py",
               "tests/test_check_local_sets.py", "tests/test_check_messages.py"]),
    "check-local": (["attnlib/check/local_answers.py"], ["tests/test_check_local_answers.py"]),
    "check-heads": (["attnlib/check/heads_answers.py"], ["tests/test_check_heads_answers.py"]),
    "check-text": (["attnlib/check/text_answers.py"], ["tests/test_check_text_answers.py"]),
    "check-implement": (["attnlib/check/implement.py"], ["tests/test_check_implement.py"]),
    "check-mirror": (["attnlib/check/mirror_answers.py"], ["tests/test_check_md_direction.py"]),
}


def _tests(patterns):
    found = sorted({str(p.relative_to(ROOT)) for pat in patterns for p in ROOT.glob(pat)})
    missing = [pat for pat in patterns if not any(ROOT.glob(pat))]
    if missing:
        print(f"[mutation] no test file matches {missing} (skipped)", flush=True)
    if not found:
        raise SystemExit(f"no test files match {patterns}")
    return found


def run_module(name: str, jobs: int, only=(), show=True) -> dict:
    paths, patterns = MODULES[name]
    tests = _tests(patterns)
    work = ROOT / "_build" / "mutation" / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for item in ("attnlib", "tests"):
        shutil.copytree(ROOT / item, work / item,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    cfg = (ROOT / "pyproject.toml").read_text()
    if "[tool.mutmut]" in cfg:
        raise SystemExit("pyproject.toml has a [tool.mutmut] table: this script writes its own")
    cfg += ("\n[tool.mutmut]\n"
            f"paths_to_mutate = {json.dumps(paths)}\n"
            f"tests_dir = {json.dumps(tests)}\n"
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x", "-m", "not slow"]\n'
            'also_copy = ["attnlib/", "tests/"]\n')
    (work / "pyproject.toml").write_text(cfg)
    t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([str(MUTMUT), "run", "--max-children", str(jobs), *only], cwd=work,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    subprocess.run([str(MUTMUT), "export-cicd-stats"], cwd=work, capture_output=True, text=True)
    stats_file = work / "mutants" / "mutmut-cicd-stats.json"
    if proc.returncode != 0 or not stats_file.exists():
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise SystemExit(f"mutmut failed on {name} (exit {proc.returncode}):\n{tail}")
    stats = json.loads(stats_file.read_text())
    listing = subprocess.run([str(MUTMUT), "results"], cwd=work, capture_output=True, text=True)
    survivors = [line.split(":")[0].strip() for line in listing.stdout.splitlines()
                 if line.strip().endswith(": survived")]
    diffs = {m: "" for m in survivors}
    for m in survivors if show else ():
        shown = subprocess.run([str(MUTMUT), "show", m], cwd=work, capture_output=True,
                               text=True)
        diffs[m] = shown.stdout.strip()
    decided = stats["killed"] + stats["survived"]
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # mutmut and its test processes
    cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
    out = dict(module=name, paths=paths, tests=tests, only=list(only), seconds=round(seconds, 1),
               cpu_seconds=round(cpu, 1), **stats,
               score=stats["killed"] / decided if decided else float("nan"),
               survivors=diffs)
    (ROOT / "_build" / "mutation" / f"{name}.json").write_text(json.dumps(out, indent=1))
    return out


def table(results: list[dict]) -> str:
    rows = ["| module | mutants | killed | survived | timeout | no tests | score | wall | CPU |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        rows.append(f"| {r['module']} | {r['total']} | {r['killed']} | {r['survived']} | "
                    f"{r['timeout']} | {r['no_tests']} | {100 * r['score']:.1f} % | "
                    f"{r['seconds']:.0f} s | {r['cpu_seconds']:.0f} s |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help=f"some of {list(MODULES)} (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants tested at once")
    ap.add_argument("--only", nargs="+", default=(), metavar="GLOB",
                    help="mutant names to run, e.g. 'attnlib.svm.engine.x_certify*' "
                         "(the counts then cover only these)")
    ap.add_argument("--no-show", action="store_true",
                    help="do not store the survivors' diffs (one mutmut call each)")
    args = ap.parse_args(argv)
    if not MUTMUT.exists():
        raise SystemExit(f"mutmut is not installed in this environment ({MUTMUT}); "
                         "pip install mutmut==3.8.1")
    unknown = sorted(set(args.modules) - set(MODULES))
    if unknown:
        ap.error(f"unknown module(s) {unknown}; expected some of {list(MODULES)}")
    results = []
    for name in args.modules or list(MODULES):
        print(f"[mutation] {name} ...", flush=True)
        r = run_module(name, args.jobs, args.only, not args.no_show)
        print(f"[mutation] {name}: {r['killed']}/{r['killed'] + r['survived']} killed "
              f"({100 * r['score']:.1f} %), {r['seconds']:.0f} s", flush=True)
        results.append(r)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
