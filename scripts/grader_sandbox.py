"""The sandbox in which a submission's code runs (the grader's *collect* step).

:func:`run` starts the collector, an IPython shell that runs the submission's cells and writes
the answers to ``answers.json`` in its working folder (:func:`encode`: plain data, never
pickle). Where unprivileged user namespaces work, :func:`_jail` gives it no network; its own
PID namespace, whose first process is the collector in a session of its own (``kill(0, ...)``
reaches only the namespace; killing that first process at the end kills every process in it,
whatever sessions they made); and a file system read-only except the working folder, with
empty tmpfs over the repository, the grader's home, the temporary folder, the book, the
submissions and the output (Python's installation and ``attnlib`` bound back), nested in a
second user namespace so that none of it can be undone. Without namespaces the grader refuses
(:class:`SandboxUnavailable`) unless told ``unsafe``; then only the audit hook (:func:`_audit`)
and the limits remain. The audit hook refuses subprocesses, forks, writes outside the folder
and any import of ``attnlib.check`` (the checks and their oracles run in the grader).

The collector runs this file's source with ``python -I -c``: standard library only until the
shell starts, and no file of the repository needs to be visible to it.
"""

from __future__ import annotations

import ctypes
import json
import os
import pwd
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

MAX_ANSWER_BYTES = 16 * 2**20  # answers.json larger than this is not read
MAX_ELEMENTS = 10**6  # an answer with more numbers than this is refused
UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork",
           "--kill-child", "--mount-proc"]
JUDGE = "attnlib.check"  # the package a submission may not import while it is graded


class SandboxUnavailable(SystemExit):
    """The namespace sandbox cannot run here and grading without it was not allowed."""


@dataclass
class Limits:
    """Per-submission limits (seconds, MiB, bytes)."""

    wall: float = 600.0
    cpu: int = 600
    memory_mb: int = 6144
    output: int = 2**20  # printed output kept per submission
    file_mb: int = 64  # largest file the submission may write


@dataclass
class Run:
    """What the collector of one submission left behind."""

    answers: dict = field(default_factory=dict)
    status: str = "ok"  # ok | timeout | killed | error
    message: str = ""
    cell_errors: list = field(default_factory=list)
    output_tail: str = ""


# -- answers as data (JSON; never pickle) ----------------------------------------------------
def encode(v, depth=0):
    """An answer as JSON data; ``TypeError`` for anything that is not plain data."""
    if depth > 32:
        raise TypeError("the answer is nested too deeply")
    if v is None or isinstance(v, (bool, str, int, float)):
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


# -- what the submission may see -------------------------------------------------------------
def _real(p) -> str:
    return os.path.realpath(os.fspath(p))


def _under(p: str, q: str) -> bool:
    """Whether path ``p`` is ``q`` or inside it."""
    return p == q or p.startswith(q.rstrip("/") + "/")


def visible_paths() -> list[str]:
    """What the collector needs to see: Python's installation and the attnlib package."""
    import importlib.util

    dirs = (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
            os.path.dirname(sys.executable), os.path.dirname(_real(sys.executable)))
    out = {f(p) for p in dirs for f in (_real, os.path.abspath)}  # a link's own path too
    spec = importlib.util.find_spec("attnlib")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        out.add(_real(loc))
    return sorted(out)


def hidden_paths(extra=()) -> list[str]:
    """Folders the submission must not read: the repository, the grader's home, the temporary
    folder, and ``extra`` (the book, the submissions, the output); never one that holds a
    visible path's whole tree (Python itself)."""
    here = Path(__file__).resolve().parent.parent
    home_pw = next((e.pw_dir for e in pwd.getpwall() if e.pw_uid == os.getuid()), None)
    cands = [here, Path.home(), home_pw, tempfile.gettempdir(), "/tmp", *extra]
    shown = visible_paths()
    cands = {_real(c) for c in cands if c is not None and os.path.isdir(c)}
    return sorted(c for c in cands if c != "/" and not any(_under(c, v) for v in shown))


# -- the parent side -------------------------------------------------------------------------
_NAMESPACE = {}


def namespace_works() -> bool:
    """Whether the namespace sandbox (:func:`_jail`) runs here: a probe that hides a file and
    writes in its working folder."""
    if "ok" not in _NAMESPACE:
        d = Path(tempfile.mkdtemp(prefix="attnlib-probe-")).resolve()
        try:
            (d / "work").mkdir()
            (d / "secret").write_text("x")
            spec = {"work": str(d / "work"), "hide": hidden_paths([d]), "show": visible_paths()}
            r = subprocess.run([*UNSHARE, sys.executable, "-I", _real(__file__), "jail",
                                json.dumps(spec), "sh", "-c", "touch ok && test ! -e ../secret"],
                               capture_output=True, timeout=60, cwd=d / "work")
            _NAMESPACE["ok"] = r.returncode == 0 and (d / "work" / "ok").exists()
        except (OSError, subprocess.SubprocessError):
            _NAMESPACE["ok"] = False
        finally:
            shutil.rmtree(d, ignore_errors=True)
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


def run(job: dict, lim: Limits, namespace: bool, hide=()) -> Run:
    """Run the collector on ``job`` (``steps`` and ``answers``, see :func:`_collect_main`)
    under ``lim``; in the namespace sandbox with ``hide`` hidden too, else the audit hook only.
    Every process of the run is gone when this returns."""
    root = Path(tempfile.mkdtemp(prefix="attnlib-grade-")).resolve()
    work = root / "work"
    work.mkdir()
    try:
        env_extra = _copy_caches(work)
        job = {**job, "root": str(work), "output": lim.output,
               "audit": "namespace" if namespace else "strict"}
        (root / "job.json").write_text(json.dumps(job))
        cmd = [sys.executable, "-I", "-c", Path(__file__).read_text(), "collect", str(work)]
        if namespace:
            spec = {"work": str(work), "hide": hidden_paths(hide), "show": visible_paths()}
            cmd = [*UNSHARE, sys.executable, "-I", _real(__file__), "jail", json.dumps(spec),
                   *cmd]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work),
               "TMPDIR": str(work), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
               "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8", **env_extra}
        out = Run()
        with open(root / "stdout.txt", "wb") as stdout, open(root / "job.json", "rb") as stdin:
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=stdout,
                                    stderr=subprocess.STDOUT, stdin=stdin,
                                    preexec_fn=_limit(lim), start_new_session=True)
            rc, cpu = _wait(proc, lim.wall)
        if rc is None:
            out.status, out.message = "timeout", f"the wall-time limit of {lim.wall:g} s"
        elif rc != 0:
            out.status = "killed"
            why = {-signal.SIGXFSZ: f"the file-size limit of {lim.file_mb} MiB",
                   -signal.SIGSEGV: "a crash (segmentation fault)"}.get(rc, f"exit status {rc}")
            out.message = f"the CPU-time limit of {lim.cpu} s" if cpu >= lim.cpu - 0.5 else why
        with open(root / "stdout.txt", "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4000))
            out.output_tail = f.read().decode(errors="replace")
        try:
            data = read_answers(work / "answers.json")
            out.answers = data.get("answers", {}) if isinstance(data.get("answers"), dict) else {}
            out.cell_errors = [str(x)[:300] for x in data.get("errors", [])][:50]
        except FileNotFoundError:
            pass
        except (OSError, ValueError, RecursionError) as e:  # the submission broke its file
            out.cell_errors.append(f"its answers could not be read ({e})")
        if out.status != "ok":
            out.message = f"the run stopped early: {out.message}"
        return out
    finally:
        shutil.rmtree(root, onerror=_force_remove)


def _wait(proc, wall):
    """Wait for ``proc`` at most ``wall`` seconds, then kill it and every process under it.
    Returns (exit code or None on timeout, CPU seconds it used)."""
    t_end, done = time.monotonic() + wall, False
    while not done and time.monotonic() <= t_end:
        # WNOWAIT: an exited process stays a zombie, so its pid (the process group of what it
        # left behind) cannot be reused before the group is killed
        done = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        if not done:
            time.sleep(0.05)
    _kill_tree(proc.pid)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (proc.returncode if done else None), ru.ru_utime + ru.ru_stime


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (children first), read from /proc."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _kill_tree(pid: int, patience: float = 10.0):
    """SIGKILL everything under ``pid`` (the first process of a PID namespace takes the rest
    of its namespace along), until nothing is left, then ``pid``'s process group and ``pid``.

    Children are killed before their parent: an orphan would leave the tree."""
    t_end = time.monotonic() + patience
    while time.monotonic() < t_end:
        left = _descendants(pid)
        if not left:
            break
        for p in left:
            with suppress(OSError):
                os.kill(p, signal.SIGKILL)
        time.sleep(0.02)
    for kill in (os.killpg, os.kill):
        with suppress(OSError):
            kill(pid, signal.SIGKILL)


def _force_remove(func, path, _exc):
    """rmtree's error handler: make a folder the submission locked writable, and retry."""
    try:
        os.chmod(os.path.dirname(path), 0o700)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o700)
        func(path)
    except OSError:
        pass


# -- inside the namespaces -------------------------------------------------------------------
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC = 1, 2, 4, 32, 4096, 16384


def _mount(src, target, fstype, flags, data=None):
    libc = ctypes.CDLL(None, use_errno=True)
    b = [None if s is None else os.fsencode(s) for s in (src, target, fstype, data)]
    if libc.mount(b[0], b[1], b[2], ctypes.c_ulong(flags), b[3]) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"mount {target}: {os.strerror(e)}")


def _jail(spec: dict, argv: list[str]):
    """The namespace's first process: a session of its own; every mount read-only except the
    working folder; tmpfs over ``spec["hide"]`` with ``spec["show"]`` (and the working folder)
    bound back; then ``argv`` in a nested user and mount namespace, which cannot undo it."""
    os.setsid()  # kill(0, ...) from inside reaches only the namespace's processes
    work = spec["work"]
    _mount(work, work, None, _MS_BIND | _MS_REC)
    for line in open("/proc/self/mounts"):
        mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[1])
        if mp != work and not _under(mp, "/proc"):
            subprocess.run(["mount", "-o", "remount,bind,ro", mp], capture_output=True)
    keep = {p: os.open(p, os.O_PATH | os.O_CLOEXEC)
            for p in sorted({work, *spec["show"]}, key=len) if os.path.exists(p)}
    hides = [h for h in sorted(spec["hide"], key=len) if os.path.isdir(h)]
    hides = [h for i, h in enumerate(hides) if not any(_under(h, g) for g in hides[:i])]
    for h in hides:
        _mount("tmpfs", h, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=755")
    bound = []
    for p, fd in keep.items():
        if any(_under(p, b) for b in bound) or not any(_under(p, h) for h in hides):
            continue
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(p, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "a").close()
        _mount(f"/proc/self/fd/{fd}", p, None, _MS_BIND | _MS_REC)
        bound.append(p)
    for h in hides:
        _mount(None, h, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    for fd in keep.values():
        os.close(fd)
    os.chdir(work)  # not the old working folder under the tmpfs: '..' must not lead past it
    os.execvp("unshare", ["unshare", "--user", "--map-root-user", "--mount", *argv])


def _audit(root: str, strict: bool):
    """A Python audit hook: no writes outside ``root``, no subprocesses or forks (a fork bomb
    would not stop at the namespace), no import of the checks; in ``strict`` mode (no
    namespace) also no signals to other processes, new sessions, or sockets."""
    root = os.path.realpath(root)
    write = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    own = os.getpid()
    paths = {"os.remove", "os.rmdir", "os.rename", "os.mkdir", "os.chmod", "os.chown",
             "os.truncate", "os.link", "os.symlink", "os.utime", "shutil.rmtree",
             "shutil.copyfile", "shutil.move", "os.chflags", "os.removexattr", "os.setxattr",
             "sqlite3.connect"}
    spawn = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
             "os.fork", "os.forkpty", "pty.spawn"}
    banned = {"os.killpg", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
              "os.setsid", "os.setpgid"}

    def inside(p):
        if isinstance(p, int):
            return True
        p = os.fsdecode(p)
        if p in ("/dev/null", ":memory:", ""):
            return True
        full = os.path.realpath(p)
        return full == root or full.startswith(root + os.sep)

    def hook(event, args):
        if event == "import" and args and isinstance(args[0], str) and _under(
                args[0].replace(".", "/"), JUDGE.replace(".", "/")):
            raise ImportError(f"{args[0]} cannot be imported while grading: the checks and "
                              "their oracles run in the grader, not in the submission")
        if event == "open" and len(args) >= 3 and isinstance(args[2], int) \
                and args[2] & write and args[0] is not None and not inside(args[0]):
            raise PermissionError(f"grader: no writing outside the working folder ({args[0]})")
        if event in paths and args and not all(inside(a) for a in args[:2]
                                               if isinstance(a, (str, bytes, os.PathLike))):
            raise PermissionError(f"grader: {event} outside the working folder is not allowed")
        if event in spawn:
            raise PermissionError(f"grader: {event} is not allowed while grading")
        if strict and (event in banned or (event == "os.kill" and args[0] != own)):
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


def _collect_main() -> int:
    """Read the job from stdin, run its steps in an IPython shell, write ``answers.json``."""
    job = json.loads(sys.stdin.buffer.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the job file is not left open to it
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


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["collect"]:
        return _collect_main()
    if argv[:1] == ["jail"] and len(argv) > 2:
        _jail(json.loads(argv[1]), argv[2:])
    raise SystemExit("internal entry points of the grader: collect WORK | jail SPEC CMD...")


if __name__ == "__main__":
    sys.exit(main())
