"""The grader's sandbox (attnlib.course.sandbox, attnlib.course.jail) against hostile submissions.

Each submission here runs the synthetic chapter of tests/test_grader.py with short limits. A
submission that leaves its session (``setsid``, also through the C library) and loops must die
at the wall-time limit together with every process it started; it must not read the
repository, the master notebook, another submission or the grader's home, nor write outside its
folder (``torch.save`` and ``sqlite3`` write from C); it cannot import the checks' oracles;
``kill(0, SIGKILL)`` stays inside the sandbox. Without user namespaces the grader refuses to
grade unless told ``unsafe``.
"""

import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from attnlib.course import batch, grading
from attnlib.course import sandbox as sb

ROOT = Path(__file__).resolve().parents[1]

spec = importlib.util.spec_from_file_location("test_grader_src", ROOT / "tests/test_grader.py")
tg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tg)

NEEDS_NS = pytest.mark.skipif(not sb.namespace_works(), reason=(
    "unprivileged user namespaces are unavailable here (unshare --user --map-root-user "
    "--mount --pid fails), so the namespace sandbox cannot run"))

LEAVE_SESSION = ("import ctypes, os, time\nlibc = ctypes.CDLL(None)\n"
                 "pid = libc.fork()  # two processes from here on (a fork the audit hook cannot "
                 "see)\ntry:\n    os.setsid()\nexcept Exception:\n    libc.setsid()\n"
                 # the child spins, the parent sleeps: a busy and an idle process to stop
                 "if pid == 0:\n    print('looping busy', flush=True)\n    while True:\n"
                 "        pass\nprint('looping asleep', flush=True)\nwhile True:\n"
                 "    time.sleep(0.1)\n")
WALLS = (4, 8, 16)  # seconds: the submission starts its loops within ~1 s (IPython, no torch;
# 3 s on a 2-core machine running both test workers and more); each second costs the busy
# loop a CPU-second, so the limit starts short and is doubled only when a process of the
# submission did not reach its loop before it (then the run proved nothing about that loop)


def only_the_answer(cells):
    """Keep only the first answer cell: the submission starts at once (no imports)."""
    cells[:] = [c for c in cells if "stub" in c.metadata.get("tags", [])][:1]


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """Sandbox folders under this test's folder, so that its processes can be told apart."""
    d = tmp_path / "sandboxes"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    # and no experiment cache to copy into them (no submission here reads one; the project's
    # holds ~190 results once the chapters have run)
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path / "no-cache"))
    return d


def _collect(nb, lim, sandbox, **kw):
    m = tg.synthetic()
    return batch.collect(nb, m, grading.exercises(m), lim, sandbox=sandbox, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [pytest.param("namespace", marks=NEEDS_NS), "none"])
def test_a_submission_that_leaves_its_session_dies_at_the_limit(own_tmp, mode):
    nb = tg.student_with({0: LEAVE_SESSION}, edit=only_the_answer)
    for wall in WALLS:
        lim = sb.Limits(wall=wall, cpu=60, output=10_000)
        t0 = time.monotonic()
        run = _collect(nb, lim, mode, **({"unsafe": True} if mode == "none" else {}))
        took = time.monotonic() - t0
        left = tg.survivors(str(own_tmp))
        assert not left, f"processes outlived the grading: {left}"
        assert run.status == "timeout", (run.status, run.message, run.output_tail)
        assert run.message == f"the run stopped early: the wall-time limit of {wall} s"
        assert took < 2 * lim.wall + 30
        if all(f"looping {k}" in run.output_tail for k in ("busy", "asleep")):
            break  # both left their session and looped until the limit
    else:
        pytest.fail(f"a process never reached its loop within {WALLS[-1]} s: "
                    f"{run.output_tail}")


@pytest.mark.parametrize("mode", [pytest.param("namespace", marks=NEEDS_NS), "none"])
def test_a_busy_submission_dies_at_its_cpu_limit(own_tmp, mode):
    """The CPU-time limit holds in both sandboxes. In the namespace sandbox the collector is
    the first process of its PID namespace, which the kernel does not signal for a
    default-action SIGXCPU: only the hard limit stops it there, so the hard limit is the
    limit."""
    import resource

    nb = tg.student_with({0: "while True:\n    pass\n"}, edit=only_the_answer)
    lim = sb.Limits(wall=60, cpu=2, output=10_000)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = _collect(nb, lim, mode, **({"unsafe": True} if mode == "none" else {}))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert run.status == "killed", (run.status, run.message, run.output_tail)
    assert run.message == f"the run stopped early: the CPU-time limit of {lim.cpu} s"
    assert used < lim.cpu + 1.0, used  # stopped at the limit, not seconds after it


def _attempts(targets: dict) -> str:
    """A cell that tries each hostile action and prints which ones worked."""
    lines = ["import json, os, sys, glob, signal, sqlite3, pwd\nfrom pathlib import Path\n"
             "import torch\nworked = {}\n"]
    for name, code in targets.items():
        body = "".join(f"    {x}\n" for x in code.splitlines())
        lines.append(f"try:\n{body}    worked[{name!r}] = True\n"
                     f"except BaseException as e:\n    worked[{name!r}] = repr(e)[:120]\n")
    lines.append("print('ATTEMPTS', json.dumps(worked))\n")
    return "".join(lines)


def _home_file():
    """A file in the grader's home folder that the submission must not read (None: none)."""
    home = Path.home()
    keep = [Path(p).resolve() for p in (sys.prefix, sys.base_prefix)]
    for p in sorted(home.iterdir()) if home.is_dir() else []:
        if p.is_file() and not p.is_symlink() and not any(
                k == p.resolve() or p.resolve() in k.parents for k in keep):
            try:
                p.read_bytes()[:1]
            except OSError:
                continue
            return p
    return None


@NEEDS_NS
def test_a_submission_cannot_read_the_course_nor_write_nor_kill_outside(own_tmp, tmp_path):
    book, subs, outside = tmp_path / "book", tmp_path / "subs", tmp_path / "outside"
    for d in (book, subs, outside):
        d.mkdir()
    nbformat.write(tg.synthetic(), book / "01_test.ipynb")
    other = subs / "01_test_alice.ipynb"
    nbformat.write(tg.student_with({0: tg.SOL[0]}), other)
    targets = {
        # the grader's own path, and the Python it runs, lead to the repository's chapters
        "argv_book": "assert list((Path(sys.argv[0]).resolve().parents[1] / 'book')"
                     ".glob('*.ipynb'))",
        "exe_book": "assert list((Path(sys.executable).parents[2] / 'book').glob('*.ipynb'))",
        "repo_master": f"open({str(ROOT / 'book/01_token_selection.ipynb')!r}).read(10)",
        "repo_listing": f"assert 'book' in os.listdir({str(ROOT)!r})",
        "master": f"json.load(open({str(book / '01_test.ipynb')!r}))",
        "other_submission": f"open({str(other)!r}).read(10)",
        "oracle": "from attnlib.check.implement import risk_oracle, _fd_grad",
        "al_check": "import attnlib as al\nal.check.check_rank",
        "grader": "from attnlib.course import batch",  # the grader itself (the master's path)
        "torch_save": f"torch.save(torch.zeros(3), {str(outside / 'w.pt')!r})",
        "sqlite": f"sqlite3.connect({str(outside / 'db.sqlite')!r}).execute("
                  "'create table t (x)')",
    }
    home = _home_file()
    if home is not None:
        targets["home"] = f"open({str(home)!r}).read(1)"
    kill = "import os, signal\nos.kill(0, signal.SIGKILL)\nprint('still here')\n"
    cells = [_attempts(targets), kill, "r = 0"]
    nb = tg.student_with({}, edit=lambda cs: cs.__setitem__(
        slice(None), [nbformat.v4.new_code_cell(c) for c in cells]))
    lim = sb.Limits(wall=60, cpu=30, output=10_000)
    run = _collect(nb, lim, "namespace")
    assert run.status == "ok", (run.status, run.message, run.output_tail)
    line = next(x for x in run.output_tail.splitlines() if x.startswith("ATTEMPTS "))
    worked = json.loads(line[len("ATTEMPTS "):])
    assert set(worked) == set(targets)
    assert not [k for k, v in worked.items() if v is True], worked
    assert "still here" in run.output_tail  # kill(0) killed nothing the grader waits for
    assert run.answers["0"] == [{"value": 0}]
    assert not list(outside.iterdir())
    assert not tg.survivors(str(own_tmp))


def test_without_namespaces_the_grader_refuses_unless_unsafe(tmp_path, monkeypatch):
    """Refused before anything runs; told ``unsafe``, the grader runs without the namespace
    (the ``none`` run of tests/test_grader.py's batch grades so, on a machine without user
    namespaces, and checks what the audit hook alone still stops)."""
    book = tmp_path / "book"
    book.mkdir()
    nbformat.write(tg.synthetic(), book / "01_test.ipynb")
    sub = tmp_path / "01_test_bob.ipynb"
    nbformat.write(tg.student_with({0: tg.SOL[0]}), sub)
    lim = sb.Limits(wall=60, cpu=30, output=10_000)
    for works in (True, False):
        monkeypatch.setattr(sb, "namespace_works", lambda works=works: works)
        for sandbox in ("auto", "namespace", "none"):
            if not works or sandbox == "none":
                with pytest.raises(sb.SandboxUnavailable, match="--unsafe"):
                    batch.grade_batch([sub], tmp_path / "out", book=book, lim=lim,
                                      sandbox=sandbox)
            else:
                assert batch.use_namespace(sandbox) is True
            # what the grader does when told unsafe: the namespace wherever it runs (only
            # --sandbox none turns it off), no namespace elsewhere, but never when it was
            # asked for by name
            want = works and sandbox != "none"
            if sandbox == "namespace" and not works:
                with pytest.raises(sb.SandboxUnavailable):
                    batch.use_namespace(sandbox, unsafe=True)
            else:
                assert batch.use_namespace(sandbox, unsafe=True) is want, (works, sandbox)
    assert not (tmp_path / "out" / "grades.csv").exists()


def test_a_notebook_cannot_choose_another_chapter(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    for stem in ("01_test", "08_other"):
        nbformat.write(tg.synthetic(), book / f"{stem}.ipynb")
    swap = tg.student_with({0: tg.SOL[0], 1: tg.SOL[1]})
    swap.metadata["course_kit"] = {"chapter": "01_test"}
    files = {"08_other_mallory.ipynb": swap, "08_mallory.ipynb": swap}
    for name, nb in files.items():
        nbformat.write(nb, tmp_path / name)
    rows, ok = batch.grade_batch([tmp_path / n for n in files], tmp_path / "out", book=book,
                                  lim=sb.Limits(wall=60, cpu=30), unsafe=True)
    assert not ok
    for name in files:
        mine = [r for r in rows if r.submission.endswith(name)]
        assert mine and all(r.status == "error" and r.points == 0 for r in mine), mine
        assert all("01_test" in r.message and "08_other" in r.message for r in mine)
    # an explicit master that the notebook contradicts is refused too
    rows, ok = batch.grade_batch([tmp_path / "08_mallory.ipynb"], tmp_path / "out2",
                                  master=book / "08_other.ipynb", book=book, unsafe=True)
    assert not ok and {r.status for r in rows} == {"error"}


def test_hidden_and_visible_paths():
    hide = sb.hidden_paths([ROOT / "book"])
    assert str(ROOT) in hide
    assert str(Path.home().resolve()) in hide or not Path.home().is_dir()
    assert str(Path(tempfile.gettempdir()).resolve()) in hide or "/tmp" in hide
    shown = sb.visible_paths()
    assert str(Path(sys.prefix).resolve()) in shown
    assert str(ROOT / "book") not in shown and str(ROOT / "scripts") not in shown
