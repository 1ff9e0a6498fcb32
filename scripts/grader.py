"""Grading submissions by their answers, against the master notebook (course kit, issue 14).

``python scripts/assignments.py grade SUB.ipynb... --out DIR`` calls :func:`grade_batch`. For
each submission:

1. **Collect** (the student's code, sandboxed). The submission's code cells run in an IPython
   shell in a separate process: its own temporary working directory (``HOME`` and ``TMPDIR``
   too), its own session and process group, limits on wall time, CPU time, address space and
   file size, its printed output cut after a fixed size. Where the OS allows an unprivileged
   user namespace (``unshare``), the process also gets no network, its own PID namespace and a
   file system that is read-only everywhere except its temporary directory; elsewhere a Python
   audit hook refuses writes outside that directory, subprocesses, signals and sockets (see
   the instructor guide for what each protects against). The check cells of the submission
   are **not** run: where the master's check cell stood (found by cell id), the process
   evaluates the master's *answer expressions* (the first argument of each ``al.check.*``
   call) and writes their values to ``answers.json``: numbers, strings, lists, tuples, sets,
   dicts, tensors and arrays only (never pickle).
2. **Check** (the instructor's code, in a clean process that no student code touched). The
   master notebook runs from top to bottom; at each check cell, the master's own check is
   evaluated once per submission with the student's answer in place of the first argument,
   and the :class:`attnlib.check.Feedback` it returns is the verdict. The checks, their
   number, their points (cell metadata ``points`` of the check cell, default 1) and the
   reference data all come from the master; nothing printed by the student is read.

This module does not import attnlib (the checker's master notebook does).
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import assignments as asg  # noqa: E402  (the notebook helpers: tags, check calls, labels)

MAX_ANSWER_BYTES = 16 * 2**20  # answers.json larger than this is not read
MAX_ELEMENTS = 10**6  # an answer with more numbers than this is refused
CHECK_SECONDS = 120  # one check on one answer, in the checker


@dataclass
class Limits:
    """Per-submission limits (seconds, MiB, bytes)."""

    wall: float = 600.0
    cpu: int = 600
    memory_mb: int = 6144
    output: int = 2**20  # printed output kept per submission
    file_mb: int = 64  # largest file the submission may write


@dataclass
class Exercise:
    """One graded check: a ``check`` cell of the master."""

    label: str
    cell: int  # index of the check cell in the master
    cell_id: str | None
    source: str
    answers: list[str]  # the answer expressions (first argument of each check call)
    points: float = 1.0


@dataclass
class Row:
    submission: str
    exercise: str  # the book's name: "Exercise 2.2" (a written answer: "Exercise 2.1 (written)")
    points: float
    max_points: float
    status: str  # passed | failed | missing | error | manual
    message: str
    chapter: str = ""  # the master's file name without .ipynb: "02_att_svm"
    order: int = 0  # the answer's cell in the master: rows are listed in the book's order

    @property
    def graded(self) -> str:
        """``auto`` (a check decides) or ``hand`` (a written answer the instructor grades)."""
        return "hand" if self.exercise.endswith("(written)") else "auto"


# -- the master: which checks, worth how much -----------------------------------------------
def exercises(master) -> list[Exercise]:
    """The graded checks of a master notebook, in order, named as the book names them."""
    out, seen = [], {}
    under = asg.exercise_names(master)
    for i, cell in enumerate(master.cells):
        if cell.cell_type == "markdown" or "check" not in asg.tags(cell):
            continue
        calls = asg._check_calls(cell.source)
        name = under[i] or f"check-{len(out) + 1}"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        points = cell.get("metadata", {}).get("points", 1)
        out.append(Exercise(name, i, cell.get("id"), cell.source,
                            [ast.unparse(c.args[0]) if c.args else "None" for c in calls],
                            float(points)))
    return out


@dataclass
class Written:
    """A written answer: a markdown cell tagged ``written`` in the master (graded by hand)."""

    label: str
    cell: int
    cell_id: str | None
    placeholder: str
    points: float = 1.0


def written(master) -> list[Written]:
    """The master's answer places for written exercises, in order."""
    out = []
    under = asg.exercise_names(master)
    for i, cell in enumerate(master.cells):
        if cell.cell_type == "markdown" and "written" in asg.tags(cell):
            out.append(Written(f"{under[i] or f'written-{len(out) + 1}'} (written)", i,
                               cell.get("id"), cell.source.strip(),
                               float(cell.get("metadata", {}).get("points", 1))))
    return out


def written_rows(name: str, submission, master) -> list[tuple[Row, str]]:
    """One row (status ``manual`` or ``missing``) and the student's text per written answer."""
    cells = {c.get("id"): c for c in (submission.cells if submission is not None else [])
             if c.cell_type == "markdown" and c.get("id")}
    out = []
    for w in written(master):
        cell = cells.get(w.cell_id)
        text = cell.source.strip() if cell is not None else ""
        if not text or text == w.placeholder:
            why = "the answer cell was deleted" if cell is None else "the answer is still empty"
            out.append((Row(name, w.label, 0.0, w.points, "missing", f"no answer: {why}",
                            order=w.cell), ""))
        else:
            out.append((Row(name, w.label, 0.0, w.points, "manual",
                            f"grade by hand: {len(text.split())} words (in the feedback file)",
                            order=w.cell), text))
    return out


def plan(submission, master, exs: list[Exercise]) -> list[dict]:
    """The steps the collector runs: the submission's code cells, except the master's check
    cells, and a ``capture`` of exercise ``k``'s answers where its check cell stands.

    A check cell is found by its id, or by its exact source (a cell without an id, or whose
    id changed: nbformat makes up ids for cells that have none). When the
    submission deleted it, the answers are captured before the first cell that comes after it
    in the master, else at the end. Nothing the submission tags or prints changes the plan.
    """
    order = {c.get("id"): i for i, c in enumerate(master.cells) if c.get("id")}
    by_id = {e.cell_id: k for k, e in enumerate(exs) if e.cell_id}
    by_src = {}  # the check as the master has it, and as the student edition shows it
    for k, e in reversed(list(enumerate(exs))):
        by_src[e.source.strip()] = k
        by_src[asg.GRADER_ONLY.format(names=", ".join(e.answers)).strip()] = k
    under = asg.exercise_names(submission)  # where a cell stands, in the book's words
    code = [i for i, c in enumerate(submission.cells) if c.cell_type == "code"]
    cells = [submission.cells[i] for i in code]
    where = [f"under {under[i]}" if under[i] else "before the first exercise" for i in code]

    def which(c):
        if c.get("id") in by_id:
            return by_id[c.get("id")]
        return by_src.get(c.source.strip())

    anchor = {}
    for k, e in enumerate(exs):
        pos = next((j for j, c in enumerate(cells) if which(c) == k), None)
        if pos is None:
            pos = next((j for j, c in enumerate(cells)
                        if order.get(c.get("id"), -1) > e.cell), len(cells))
        anchor[k] = pos
    steps = []
    for j in range(len(cells) + 1):
        steps += [{"capture": k} for k in range(len(exs)) if anchor[k] == j]
        if j < len(cells) and which(cells[j]) is None:
            steps.append({"run": cells[j].source, "cell": j, "where": where[j]})
    return steps


# -- answers as data (JSON; never pickle) ----------------------------------------------------
def encode(v, depth=0):
    """An answer as JSON data; ``TypeError`` for anything that is not plain data."""
    if depth > 32:
        raise TypeError("the answer is nested too deeply")
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v
    mod = type(v).__module__.split(".")[0]
    if mod == "torch" and hasattr(v, "detach") and hasattr(v, "tolist"):
        if v.numel() > MAX_ELEMENTS:
            raise TypeError(f"the answer has {v.numel()} numbers (at most {MAX_ELEMENTS})")
        if v.is_complex():
            raise TypeError("the answer is a complex tensor")
        return {"__tensor__": v.detach().cpu().tolist(), "dtype": str(v.dtype).split(".")[-1],
                "shape": list(v.shape)}
    if mod == "numpy" and hasattr(v, "dtype"):
        if getattr(v, "ndim", 0) == 0:
            return encode(v.item(), depth + 1)
        if v.size > MAX_ELEMENTS:
            raise TypeError(f"the answer has {v.size} numbers (at most {MAX_ELEMENTS})")
        if v.dtype.kind not in "biuf":
            raise TypeError(f"an array of dtype {v.dtype} cannot be graded")
        return {"__ndarray__": v.tolist(), "dtype": v.dtype.name, "shape": list(v.shape)}
    if isinstance(v, tuple):
        return {"__tuple__": [encode(x, depth + 1) for x in v]}
    if isinstance(v, (set, frozenset)):
        return {"__set__": [encode(x, depth + 1) for x in v]}
    if isinstance(v, list):
        return [encode(x, depth + 1) for x in v]
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise TypeError("a dict answer must have string keys")
        return {"__dict__": {k: encode(x, depth + 1) for k, x in v.items()}}
    raise TypeError(f"an answer of type {type(v).__name__} cannot be graded (use a number, a "
                    "string, a list/tuple/set/dict of them, a tensor or an array)")


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


def read_answers(path: Path) -> dict:
    """The collector's ``answers.json``, read without following links and with a size cap."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000 == 0o100000):
            raise ValueError("answers.json is not a regular file")
        if st.st_size > MAX_ANSWER_BYTES:
            raise ValueError(f"answers.json is {st.st_size} bytes (at most {MAX_ANSWER_BYTES})")
        data = json.loads(os.read(fd, MAX_ANSWER_BYTES + 1).decode())
    finally:
        os.close(fd)
    if not isinstance(data, dict):
        raise ValueError("answers.json is not an object")
    return data


# -- the sandbox -------------------------------------------------------------------------------
_NAMESPACE = {}


def namespace_works() -> bool:
    """Whether ``unshare`` can make an unprivileged user, network, mount and PID namespace."""
    if "ok" not in _NAMESPACE:
        try:
            r = subprocess.run(["unshare", "-rnm", "--pid", "--fork", "--mount-proc", "sh", "-c",
                                "mount -o remount,bind,ro / && exec unshare -rm true"],
                               capture_output=True, timeout=30)
            _NAMESPACE["ok"] = r.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _NAMESPACE["ok"] = False
    return _NAMESPACE["ok"]


def _limit(lim: Limits):
    def pre():  # runs between fork and exec: only calls into C, no imports, no locks
        mem = lim.memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu, lim.cpu + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_mb * 2**20,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return pre


def _copy_caches(work: Path):
    """Give the submission its own copies of the experiment and matplotlib caches."""
    env = {}
    cache = Path(os.environ.get("ATTNLIB_CACHE", Path.home() / ".cache" / "attnlib"))
    if cache.is_dir():
        shutil.copytree(cache, work / "attnlib_cache", symlinks=True)
    env["ATTNLIB_CACHE"] = str(work / "attnlib_cache")
    mpl = Path(os.environ.get("MPLCONFIGDIR", Path.home() / ".cache" / "matplotlib"))
    (work / "mpl").mkdir()
    for f in mpl.glob("fontlist*.json") if mpl.is_dir() else []:
        shutil.copy(f, work / "mpl" / f.name)
    env["MPLCONFIGDIR"] = str(work / "mpl")
    return env


@dataclass
class Run:
    """What the collector of one submission left behind."""

    answers: dict = field(default_factory=dict)
    status: str = "ok"  # ok | timeout | killed | error
    message: str = ""
    cell_errors: list = field(default_factory=list)
    output_tail: str = ""


def collect(submission, master, exs, lim: Limits, sandbox: str = "auto") -> Run:
    """Run a submission's cells in a sandbox and return the answers it computed."""
    steps = plan(submission, master, exs)
    root = Path(tempfile.mkdtemp(prefix="attnlib-grade-")).resolve()
    work = root / "work"
    work.mkdir()
    try:
        env_extra = _copy_caches(work)
        ns = sandbox == "namespace" or (sandbox == "auto" and namespace_works())
        job = {"steps": steps, "answers": [e.answers for e in exs], "root": str(work),
               "output": lim.output, "audit": "namespace" if ns else "strict"}
        (root / "job.json").write_text(json.dumps(job))
        cmd = [sys.executable, "-I", str(HERE / "grader.py"), "collect", str(root / "job.json")]
        if ns:
            cmd = ["unshare", "-rnm", "--pid", "--fork", "--mount-proc", sys.executable, "-I",
                   str(HERE / "grader.py"), "jail", str(work), *cmd]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work),
               "TMPDIR": str(work), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
               "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8", **env_extra}
        run = Run()
        with open(root / "stdout.txt", "wb") as out:
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, preexec_fn=_limit(lim),
                                    start_new_session=True)
            rc, cpu = _wait(proc, lim.wall)
        if rc is None:
            run.status, run.message = "timeout", f"the wall-time limit of {lim.wall:g} s"
        elif rc != 0:
            run.status = "killed"
            why = {-signal.SIGXFSZ: f"the file-size limit of {lim.file_mb} MiB",
                   -signal.SIGSEGV: "a crash (segmentation fault)"}.get(rc, f"exit status {rc}")
            run.message = f"the CPU-time limit of {lim.cpu} s" if cpu >= lim.cpu - 0.5 else why
        with open(root / "stdout.txt", "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4000))
            run.output_tail = f.read().decode(errors="replace")
        try:
            data = read_answers(work / "answers.json")
            run.answers = data.get("answers", {}) if isinstance(data.get("answers"), dict) else {}
            run.cell_errors = [str(x)[:300] for x in data.get("errors", [])][:50]
        except FileNotFoundError:
            pass
        except (OSError, ValueError, RecursionError) as e:  # the submission broke its file
            run.cell_errors.append(f"its answers could not be read ({e})")
        if run.status != "ok":
            run.message = f"the run stopped early: {run.message}"
        return run
    finally:
        shutil.rmtree(root, onerror=_force_remove)


def _wait(proc, wall):
    """Wait for ``proc`` at most ``wall`` seconds, then kill its process group (and with it a
    PID namespace). Returns (exit code or None on timeout, CPU seconds it used)."""
    t_end, rc, cpu = time.monotonic() + wall, None, 0.0
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            rc, cpu = os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime
            proc.returncode = rc
            break
        if time.monotonic() > t_end:
            break
        time.sleep(0.05)
    with _suppress():
        os.killpg(proc.pid, signal.SIGKILL)
    if rc is None:
        proc.wait()
    return rc, cpu


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], (OSError, ProcessLookupError))


def _force_remove(func, path, _exc):
    """rmtree's error handler: make a folder the submission locked writable, and retry."""
    try:
        os.chmod(os.path.dirname(path), 0o700)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o700)
        func(path)
    except OSError:
        pass


# -- inside the sandbox ------------------------------------------------------------------------
def _jail(work: str, argv: list[str]):
    """In the new namespaces: make every mount read-only except ``work``, then run ``argv`` in
    a nested user and mount namespace, whose root cannot undo it."""
    subprocess.run(["mount", "--bind", work, work], check=True)
    points = [line.split()[1] for line in open("/proc/self/mounts")]
    for mp in points:
        mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), mp)
        if mp == work or mp == "/proc" or mp.startswith("/proc/"):
            continue
        subprocess.run(["mount", "-o", "remount,bind,ro", mp], capture_output=True)
    os.execvp("unshare", ["unshare", "-rm", *argv])


def _audit(root: str, strict: bool):
    """A Python audit hook: no writes outside ``root``, no subprocesses or forks (a fork bomb
    would not stop at the namespace); in ``strict`` mode (no namespace) also no signals to
    other processes, new sessions, or sockets."""
    root = os.path.realpath(root)
    write = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    own = os.getpid()
    paths = {"os.remove", "os.rmdir", "os.rename", "os.mkdir", "os.chmod", "os.chown",
             "os.truncate", "os.link", "os.symlink", "os.utime", "shutil.rmtree",
             "shutil.copyfile", "shutil.move", "os.chflags", "os.removexattr", "os.setxattr"}
    spawn = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
             "os.fork", "os.forkpty", "pty.spawn"}
    banned = {"os.killpg", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
              "os.setsid", "os.setpgid"}

    def inside(p):
        if isinstance(p, int):
            return True
        p = os.fsdecode(p)
        if p in ("/dev/null",):
            return True
        full = os.path.realpath(p)
        return full == root or full.startswith(root + os.sep)

    def hook(event, args):
        if event == "open" and len(args) >= 3 and isinstance(args[2], int) \
                and args[2] & write and args[0] is not None and not inside(args[0]):
            raise PermissionError(f"grader: no writing outside the working folder ({args[0]})")
        if event in paths and args and not all(inside(a) for a in args[:2]
                                               if isinstance(a, (str, bytes, os.PathLike))):
            raise PermissionError(f"grader: {event} outside the working folder is not allowed")
        if event in spawn:
            raise PermissionError(f"grader: {event} is not allowed while grading")
        if strict and (event in banned or (event == "os.kill" and args[0] not in (own, 0))):
            raise PermissionError(f"grader: {event} is not allowed while grading")

    sys.addaudithook(hook)


class _Capped:
    """A text stream that keeps at most ``limit`` characters, then drops the rest."""

    def __init__(self, stream, limit):
        self.stream, self.left, self.cut = stream, limit, False

    def write(self, s):
        s = str(s)
        if self.left > 0:
            self.stream.write(s[:self.left])
        elif not self.cut:
            self.cut = True
            self.stream.write("\n[grader: output cut here]\n")
        self.left -= len(s)
        return len(s)

    def flush(self):
        self.stream.flush()

    def isatty(self):
        return False

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _collect_main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    root, out = job["root"], Path(job["root"]) / "answers.json"
    sys.stdout = _Capped(sys.stdout, job["output"])
    sys.stderr = _Capped(sys.stderr, job["output"] // 4)
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    cfg = Config()
    cfg.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=cfg)
    _audit(root, strict=job["audit"] == "strict")
    result = {"answers": {}, "errors": []}

    def save():
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result))
        os.replace(tmp, out)

    for step in job["steps"]:
        if "run" in step:
            res = shell.run_cell(step["run"], store_history=True)
            err = res.error_in_exec or res.error_before_exec
            if err is not None:
                result["errors"].append(
                    f"a code cell {step.get('where', '')} (code cell {step['cell'] + 1} of the "
                    f"notebook): {type(err).__name__}: {err}"[:300])
            continue
        k = step["capture"]
        got = []
        for expr in job["answers"][k]:
            try:
                value = eval(compile(expr, "<answer>", "eval"), shell.user_ns)
                got.append({"value": encode(value)})
            except BaseException as e:  # noqa: BLE001 - whatever the student's code raises
                got.append({"missing": f"{type(e).__name__}: {e}"[:300]})
        result["answers"][str(k)] = got
        save()
    save()
    sys.stdout.flush()
    os._exit(0)  # no atexit or finaliser of the student's code


# -- the checker: the master's checks, in a clean process -------------------------------------
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
    tree = asg._tree(source)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and asg.CHECK_CALL.match(ast.unparse(n))]
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
    import nbformat
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    master = nbformat.read(job["master"], as_version=4)
    exs = exercises(master)
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
    by_cell = {e.cell: k for k, e in enumerate(exs)}
    real_stdout = sys.stdout
    sys.stdout = open(os.devnull, "w")  # the master's own output is not needed
    for i, cell in enumerate(master.cells):
        if cell.cell_type != "code":
            continue
        if i in by_cell:
            k = by_cell[i]
            from attnlib.check import Feedback

            code, n = instrumented(cell.source)
            ns = shell.user_ns
            try:
                ref = [eval(compile(a, "<answer>", "eval"), ns) for a in exs[k].answers]
                ok, msg = _verdict(code, n, ns, ref, Feedback)
            except Exception as e:  # noqa: BLE001
                ok, msg = False, f"{type(e).__name__}: {e}"
            if not ok:
                master_errors.append(f"{exs[k].label}: the master's own answer fails its check "
                                     f"({msg.splitlines()[0] if msg else ''})")
            for name, data in subs.items():
                results[name][str(k)] = _grade_one(code, n, ns, data, k, Feedback)
        res = shell.run_cell(cell.source, store_history=False)
        err = res.error_in_exec or res.error_before_exec
        if err is not None and i not in by_cell:  # e.g. a widget without a front end
            warnings.append(f"master cell {i} raised {type(err).__name__}: {err}"[:300])
    sys.stdout = real_stdout
    Path(job["out"]).write_text(json.dumps({"results": results, "master_errors": master_errors,
                                            "warnings": warnings}))
    return 0


def _grade_one(code, n, ns, data, k, feedback_cls) -> dict:
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


# -- the batch ---------------------------------------------------------------------------------
def find_master(sub_nb, sub_path: Path, book: Path) -> Path | None:
    """The master of a submission: its ``course_kit.chapter`` metadata, else a chapter stem in
    its file name."""
    stems = {p.stem: p for p in asg.chapters(book)}
    meta = sub_nb.metadata.get("course_kit", {}) if sub_nb is not None else {}
    chap = meta.get("chapter") if isinstance(meta, dict) else None
    if isinstance(chap, str) and chap in stems:
        return stems[chap]
    hits = [p for s, p in stems.items() if s in Path(sub_path).name]
    return hits[0] if len(hits) == 1 else None


def grade_batch(subs: list[Path], out: Path, master: Path | None = None, book: Path | None = None,
                lim: Limits | None = None, jobs: int = 1, sandbox: str = "auto",
                check_timeout: float = 1800) -> tuple[list[Row], bool]:
    """Grade submissions; write ``out/grades.csv`` and ``out/feedback/*.md``.

    Returns the rows and whether every submission could be graded.
    """
    import nbformat

    lim = lim or Limits()
    book = Path(book or HERE.parent / "book")
    out = Path(out)
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    names = _names(subs)
    notebooks, masters, fatal = {}, {}, {}
    for sub, name in zip(subs, names, strict=True):
        try:
            notebooks[name] = nbformat.read(sub, as_version=4)
        except Exception as e:  # noqa: BLE001 - a file that is not a notebook
            notebooks[name], fatal[name] = None, f"not a readable notebook ({type(e).__name__})"
        m = master or find_master(notebooks[name], sub, book)
        if m is None and name not in fatal:
            fatal[name] = "no master notebook found (pass --master)"
        masters[name] = Path(m) if m else None
    master_nbs = {m: nbformat.read(m, as_version=4) for m in set(masters.values()) if m}
    runs = {}

    def one(name):
        m = masters[name]
        exs = exercises(master_nbs[m])
        try:
            return name, collect(notebooks[name], master_nbs[m], exs, lim, sandbox)
        except Exception as e:  # noqa: BLE001 - recorded for this submission only
            return name, Run(status="error", message=f"the grader failed ({e})")

    todo = [n for n in names if n not in fatal]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for name, run in pool.map(one, todo):
            runs[name] = run
    rows, texts = [], {}
    for m in sorted(set(masters[n] for n in todo), key=str):
        group = [n for n in todo if masters[n] == m]
        verdicts, problem = _check(m, {n: runs[n] for n in group}, check_timeout)
        if problem and len(group) > 1 and "master notebook is broken" not in problem:
            verdicts, problem = {}, None  # one answer file may have broken it: one at a time
            for n in group:
                v, p = _check(m, {n: runs[n]}, check_timeout)
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


def _check(master: Path, runs: dict, timeout: float):
    """Run the checker for one master over the runs' answers; (verdicts, problem)."""
    with tempfile.TemporaryDirectory(prefix="attnlib-check-") as d:
        d = Path(d)
        subs = {}
        for k, (name, run) in enumerate(runs.items()):
            p = d / f"answers{k}.json"
            data = {"answers": run.answers} if run.status != "error" else {"error": run.message}
            p.write_text(json.dumps(data))
            subs[name] = str(p)
        job = {"master": str(master.resolve()), "cwd": str(master.resolve().parent),
               "submissions": subs, "out": str(d / "verdicts.json")}
        (d / "job.json").write_text(json.dumps(job))
        env = {**os.environ, "ATTNLIB_CHECK_STRICT": "0", "MPLBACKEND": "Agg"}
        try:
            r = subprocess.run([sys.executable, str(HERE / "grader.py"), "check",
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


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["collect"]:
        return _collect_main(argv[1])
    if argv[:1] == ["check"]:
        return _check_main(argv[1])
    if argv[:1] == ["jail"]:
        _jail(argv[1], argv[2:])
    raise SystemExit("internal entry points: collect JOB | check JOB | jail DIR CMD...; "
                     "grade with: python scripts/assignments.py grade ...")


if __name__ == "__main__":
    sys.exit(main())
