"""The grader's *collect* step, from the outside: the sandbox a submission's code runs in.

:func:`run` starts the collector (:mod:`attnlib.course.jail`), which runs the submission's
cells and writes the answers to ``answers.json`` (plain data, never pickle). Where
unprivileged user namespaces work (:func:`namespace_works`) it runs with no network; in a PID
namespace of its own, whose first process is the collector in a session of its own
(``kill(0, ...)`` reaches only the namespace; killing that first process at the end kills
every process in it, whatever sessions they made); and on a file system read-only except its
working folder, with the repository, the grader's home, the temporary folder and the folders
named in ``hide`` hidden (:func:`hidden_paths`). Without namespaces the grader refuses
(:class:`SandboxUnavailable`) unless told ``unsafe``; then only the audit hook and the limits
remain.
"""

from __future__ import annotations

import json
import os
import pwd
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

from attnlib.course import jail
from attnlib.course.jail import is_under, real_path
from attnlib.course.repo import ROOT

MAX_ANSWER_BYTES = 16 * 2**20  # answers.json larger than this is not read
UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork",
           "--kill-child", "--mount-proc"]


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


def visible_paths() -> list[str]:
    """What the collector needs to see: Python's installation and the attnlib package."""
    import importlib.util

    dirs = (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
            os.path.dirname(sys.executable), os.path.dirname(real_path(sys.executable)))
    out = {f(p) for p in dirs for f in (real_path, os.path.abspath)}  # a link's own path too
    spec = importlib.util.find_spec("attnlib")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        out.add(real_path(loc))
    return sorted(out)


def hidden_paths(extra=()) -> list[str]:
    """Folders the submission must not read: the repository, the grader's home, the temporary
    folder, and ``extra`` (the book, the submissions, the output); never one that holds a
    visible path's whole tree (Python itself)."""
    here = ROOT
    home_pw = next((e.pw_dir for e in pwd.getpwall() if e.pw_uid == os.getuid()), None)
    cands = [here, Path.home(), home_pw, tempfile.gettempdir(), "/tmp", *extra]
    shown = visible_paths()
    cands = {real_path(c) for c in cands if c is not None and os.path.isdir(c)}
    return sorted(c for c in cands if c != "/" and not any(is_under(c, v) for v in shown))


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
            r = subprocess.run([*UNSHARE, sys.executable, "-I", real_path(jail.__file__), "jail",
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
        # hard = soft: in the namespace sandbox the collector is the first process of its PID
        # namespace, which the kernel does not signal for SIGXCPU (the soft limit); the
        # hard limit's SIGKILL reaches it, so the hard limit is the limit
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu, lim.cpu))
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
    """Run the collector on ``job`` (``steps`` and ``answers``, see
    :func:`attnlib.course.jail.collect_main`) under ``lim``; in the namespace sandbox with
    ``hide`` hidden too, else the audit hook only.
    Every process of the run is gone when this returns."""
    root = Path(tempfile.mkdtemp(prefix="attnlib-grade-")).resolve()
    work = root / "work"
    work.mkdir()
    try:
        env_extra = _copy_caches(work)
        job = {**job, "root": str(work), "output": lim.output,
               "audit": "namespace" if namespace else "strict"}
        (root / "job.json").write_text(json.dumps(job))
        cmd = [sys.executable, "-I", "-c", Path(jail.__file__).read_text(), "collect", str(work)]
        if namespace:
            spec = {"work": str(work), "hide": hidden_paths(hide), "show": visible_paths()}
            cmd = [*UNSHARE, sys.executable, "-I", real_path(jail.__file__), "jail",
                   json.dumps(spec), *cmd]
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
    """The live processes under ``pid`` (children first), read from /proc. (A zombie, killed
    but not yet reaped by its parent, is dead and has no children: it goes when its parent
    does; counted, it kept :func:`_kill_tree` waiting out its patience while the parent
    lived.)"""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
                ppid = int(ppid)
            except (OSError, ValueError, IndexError):
                continue
            if state not in ("Z", "X"):
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
