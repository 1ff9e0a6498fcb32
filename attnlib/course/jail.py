"""Inside the grader's sandbox: the collector and the namespace's first process.

This file runs on its own, never imported by a submission: the collector as ``python -I -c
SOURCE collect WORK`` (standard library only until its IPython shell starts, no file of the
repository needed), the jail as ``python -I jail.py jail SPEC CMD...``. The collector runs a
submission's cells in an IPython shell and writes the answers to ``answers.json`` in its
working folder (:func:`encode`: plain data, never pickle); :func:`audit` refuses subprocesses,
forks, writes outside that folder and any import of the checks (``attnlib.check``) or of the
grader (``attnlib.course``). :func:`jail` makes every mount read-only except the working
folder and hides the repository, the grader's home, the temporary folder, the book, the
submissions and the output under empty tmpfs (Python's installation and ``attnlib`` bound
back), nested in a second user namespace so that none of it can be undone.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path

#: packages a submission may not import while it is graded: the checks and their oracles
#: (they run in the grader) and the grader itself
JUDGE = ("attnlib.check", "attnlib.course")
MAX_ELEMENTS = 10**6  # an answer with more numbers than this is refused


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


def real_path(p) -> str:
    return os.path.realpath(os.fspath(p))


def is_under(p: str, q: str) -> bool:
    """Whether path ``p`` is ``q`` or inside it."""
    return p == q or p.startswith(q.rstrip("/") + "/")


_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC = 1, 2, 4, 32, 4096, 16384


def _mount(src, target, fstype, flags, data=None):
    libc = ctypes.CDLL(None, use_errno=True)
    b = [None if s is None else os.fsencode(s) for s in (src, target, fstype, data)]
    if libc.mount(b[0], b[1], b[2], ctypes.c_ulong(flags), b[3]) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"mount {target}: {os.strerror(e)}")


def jail(spec: dict, argv: list[str]):
    """The namespace's first process: a session of its own; every mount read-only except the
    working folder; tmpfs over ``spec["hide"]`` with ``spec["show"]`` (and the working folder)
    bound back; then ``argv`` in a nested user and mount namespace, which cannot undo it."""
    os.setsid()  # kill(0, ...) from inside reaches only the namespace's processes
    work = spec["work"]
    _mount(work, work, None, _MS_BIND | _MS_REC)
    for line in open("/proc/self/mounts"):
        mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[1])
        if mp != work and not is_under(mp, "/proc"):
            subprocess.run(["mount", "-o", "remount,bind,ro", mp], capture_output=True)
    keep = {p: os.open(p, os.O_PATH | os.O_CLOEXEC)
            for p in sorted({work, *spec["show"]}, key=len) if os.path.exists(p)}
    hides = [h for h in sorted(spec["hide"], key=len) if os.path.isdir(h)]
    hides = [h for i, h in enumerate(hides) if not any(is_under(h, g) for g in hides[:i])]
    for h in hides:
        _mount("tmpfs", h, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=755")
    bound = []
    for p, fd in keep.items():
        if any(is_under(p, b) for b in bound) or not any(is_under(p, h) for h in hides):
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


def audit(root: str, strict: bool):
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
        if event == "import" and args and isinstance(args[0], str) and any(is_under(
                args[0].replace(".", "/"), j.replace(".", "/")) for j in JUDGE):
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


def collect_main() -> int:
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
    audit(root, strict=job["audit"] == "strict")
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
        return collect_main()
    if argv[:1] == ["jail"] and len(argv) > 2:
        jail(json.loads(argv[1]), argv[2:])
    raise SystemExit("internal entry points of the grader: collect WORK | jail SPEC CMD...")


if __name__ == "__main__":
    sys.exit(main())
