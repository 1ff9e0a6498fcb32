"""The grader's *check* step: the master's checks judge the answers, in a clean process.

``python -m attnlib.course.checker JOB`` (started by :func:`attnlib.course.batch.grade_batch`)
runs the master notebook from top to bottom in an IPython shell that no student code touched.
The job names the master's cells and exercises (the grader has read the notebook already), so
this process loads no notebook reader: only IPython and what the master itself imports.
At each check cell it evaluates the master's own check once per submission, with the
submission's answer (read from JSON by :func:`decode`, never unpickled) in place of the first
argument, and records the :class:`attnlib.check.Feedback` it returns. The master's own answers
must pass their checks too (else the master is reported broken).
"""

from __future__ import annotations

import ast
import json
import os
import signal
import sys
from pathlib import Path

from attnlib.course.notebook import CHECK_CALL, parse_cell

CHECK_SECONDS = 120  # one check on one answer, in the checker


# -- answers as data (JSON; never pickle; encode is the collector's) --
_DTYPES = {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
           "uint8", "bool"}


def decode(v):
    """The inverse of :func:`encode` (in the checker): tensors come back as torch tensors."""
    if isinstance(v, list):
        return [decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if "__tuple__" in v:
        return tuple(decode(x) for x in v["__tuple__"])
    if "__set__" in v:
        return {decode(x) for x in v["__set__"]}
    if "__dict__" in v:
        return {str(k): decode(x) for k, x in v["__dict__"].items()}
    if "__tensor__" in v or "__ndarray__" in v:
        dtype, shape = str(v.get("dtype")), [int(s) for s in v.get("shape", [])]
        if dtype not in _DTYPES:
            raise ValueError(f"dtype {dtype!r} is not graded")
        if "__tensor__" in v:
            import torch

            return torch.tensor(v["__tensor__"], dtype=getattr(torch, dtype)).reshape(shape)
        import numpy as np

        return np.asarray(v["__ndarray__"], dtype=dtype).reshape(shape)
    raise ValueError("unknown answer encoding")


class _Instrument(ast.NodeTransformer):
    def __init__(self, calls):
        self.k = {id(c): k for k, c in enumerate(calls)}

    def visit_Call(self, node):
        k = self.k.get(id(node))
        self.generic_visit(node)
        if k is None:
            return node
        node.args = [ast.Name(f"__answer_{k}__", ast.Load()), *node.args[1:]]
        return ast.Call(ast.Name("__record__", ast.Load()), [ast.Constant(k), node], [])


def instrumented(source: str):
    """The check cell with each check call's answer replaced by ``__answer_k__`` and its
    result passed to ``__record__(k, feedback)``."""
    tree = parse_cell(source)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and CHECK_CALL.match(ast.unparse(n))]
    tree = ast.fix_missing_locations(_Instrument(calls).visit(tree))
    return compile(tree, "<check>", "exec"), len(calls)


def _verdict(code, n, ns, answers, feedback_cls):
    """Evaluate one instrumented check cell; return (ok, message)."""
    got = {}

    def record(k, fb):
        got[k] = fb
        return fb

    env = dict(ns, __record__=record, **{f"__answer_{k}__": a for k, a in enumerate(answers)})
    import attnlib.check

    attnlib.check.strict(False)

    def too_long(*_):
        raise TimeoutError(f"the check ran past {CHECK_SECONDS} s")

    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(CHECK_SECONDS)
    try:
        exec(code, env)
    except AssertionError as e:
        return False, str(e)
    except TimeoutError as e:
        return False, f"{e} on your answer"
    except Exception as e:  # noqa: BLE001 - a check that cannot read the answer
        return False, f"the check could not use your answer ({type(e).__name__}: {e})"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    fbs = [got.get(k) for k in range(n)]
    if not all(isinstance(fb, feedback_cls) for fb in fbs):
        return False, "the check did not return a verdict"
    return all(bool(fb) for fb in fbs), "\n".join(str(fb) for fb in fbs)


def _check_main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    cells = job["cells"]  # the master's cells: [cell type, source]
    exs = job["exercises"]  # its graded checks: {"cell", "label", "answers"}
    subs = {}
    for name, path in job["submissions"].items():
        try:
            subs[name] = json.loads(Path(path).read_text())
        except (OSError, ValueError, RecursionError) as e:
            subs[name] = {"error": str(e)}
    os.chdir(job["cwd"])
    cfg = Config()
    cfg.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=cfg)
    results = {name: {} for name in subs}
    master_errors, warnings = [], []
    by_cell = {e["cell"]: k for k, e in enumerate(exs)}
    real_stdout = sys.stdout
    sys.stdout = open(os.devnull, "w")  # the master's own output is not needed
    for i, (cell_type, source) in enumerate(cells):
        if cell_type != "code":
            continue
        if i in by_cell:
            k = by_cell[i]
            from attnlib.check import Feedback

            code, n = instrumented(source)
            ns = shell.user_ns
            try:
                ref = [eval(compile(a, "<answer>", "eval"), ns) for a in exs[k]["answers"]]
                ok, msg = _verdict(code, n, ns, ref, Feedback)
            except Exception as e:  # noqa: BLE001
                ok, msg = False, f"{type(e).__name__}: {e}"
            if not ok:
                master_errors.append(f"{exs[k]['label']}: the master's own answer fails its "
                                     f"check ({msg.splitlines()[0] if msg else ''})")
            for name, data in subs.items():
                results[name][str(k)] = grade_one(code, n, ns, data, k, Feedback)
        res = shell.run_cell(source, store_history=False)
        err = res.error_in_exec or res.error_before_exec
        if err is not None and i not in by_cell:  # e.g. a widget without a front end
            warnings.append(f"master cell {i} raised {type(err).__name__}: {err}"[:300])
    sys.stdout = real_stdout
    Path(job["out"]).write_text(json.dumps({"results": results, "master_errors": master_errors,
                                            "warnings": warnings}))
    return 0


def grade_one(code, n, ns, data, k, feedback_cls) -> dict:
    if "error" in data:
        return {"status": "error", "message": data["error"]}
    got = data.get("answers", {}).get(str(k))
    if got is None:
        return {"status": "missing", "message": "no answer: the run never reached this "
                "exercise's check"}
    if not isinstance(got, list) or len(got) != n:
        return {"status": "missing", "message": "no answer: the answer record is malformed"}
    values = []
    for item in got:
        if not isinstance(item, dict) or "value" not in item:
            why = item.get("missing", "") if isinstance(item, dict) else ""
            return {"status": "missing", "message": f"no answer: {why}"}
        try:
            values.append(decode(item["value"]))
        except Exception as e:  # noqa: BLE001 - student data: a bad shape, a huge int, ...
            return {"status": "missing", "message": f"no answer: it could not be read ({e})"}
    if all(v is None for v in values):
        return {"status": "missing", "message": "no answer: still None (replace the stub)"}
    ok, msg = _verdict(code, n, ns, values, feedback_cls)
    return {"status": "passed" if ok else "failed", "message": msg}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1:
        raise SystemExit("internal entry point of the grader: python -m attnlib.course.checker "
                         "JOB; grade with: python scripts/assignments.py grade ...")
    return _check_main(argv[0])


if __name__ == "__main__":
    sys.exit(main())
