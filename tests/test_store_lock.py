"""Two processes that need the same result at the same time compute it once
(attnlib.experiments.store.entry_lock): the second waits and reads the first's entry;
run_all computes the others meanwhile; a computation nested in another never waits."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from experiment_fakes import fakes  # noqa: F401  (fixture)

from attnlib import experiments
from attnlib.cli import main
from attnlib.experiments import store

TESTS = Path(__file__).resolve().parent

#: a process that registers 'slow' (it logs each computation, then takes a second) and runs it
SLOW = textwrap.dedent(f"""
    import json, sys, time
    sys.path.insert(0, {str(TESTS)!r})
    from experiment_fakes import register
    from attnlib import experiments

    def slow(seed: int = 0):
        with open(sys.argv[1], "a") as f:
            f.write(sys.argv[2] + "\\n")
        time.sleep(1.0)
        return {{"who": float(sys.argv[2])}}, {{}}

    register("slow", slow)
    r = experiments.run("slow")
    print(json.dumps(dict(who=r.numbers["who"], cached=r.cached)))
""")

#: a process that holds a lock file for argv[2] seconds (no attnlib: another holder of it)
HOLD = ("import fcntl, sys, time\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\ntime.sleep(float(sys.argv[2]))\n")


def test_two_processes_compute_one_result_once(tmp_path):
    log = tmp_path / "computed.txt"
    env = {**__import__("os").environ, "ATTNLIB_CACHE": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-c", SLOW, str(log), str(i)], env=env,
                              stdout=subprocess.PIPE, text=True) for i in (1, 2)]
    outs = [__import__("json").loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(log.read_text().split()) == 1  # computed once, by one of the two
    assert outs[0]["who"] == outs[1]["who"]  # the other read what it wrote
    assert sorted(o["cached"] for o in outs) == [False, True]


def _lock_path(name: str) -> Path:
    """The lock file of ``name``'s entry at its defaults: run once, read the key, clear."""
    experiments.run(name)
    (key,) = [p.name for p in store.cache_dir().iterdir() if p.is_dir()]
    store.cache_clear()
    return store.cache_dir() / f"{key}.lock"


def _hold(path: Path, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_run_all_computes_the_others_while_one_is_held_elsewhere(fakes):  # noqa: F811
    calls = []

    def held(seed: int = 0):
        calls.append(("held", time.monotonic()))
        return {"x": 1.0}, {}

    def free(seed: int = 0):
        calls.append(("free", time.monotonic()))
        return {"x": 2.0}, {}

    fakes("held", held)
    fakes("free", free)
    path = _lock_path("held")
    calls.clear()
    holder = _hold(path, 2.0)
    res = experiments.run_all(["held", "free"], progress=False)
    holder.wait(timeout=30)
    released = time.monotonic()
    assert list(res) == ["held", "free"]  # in the order asked
    assert [c[0] for c in calls] == ["free", "held"]  # the free one first, then the other
    assert calls[0][1] < released - 0.5  # ... while the lock was still held elsewhere
    assert res["held"].numbers["x"] == 1.0 and not res["held"].cached  # none written: computed


def test_a_computation_nested_in_another_never_waits(fakes):  # noqa: F811
    def inner(seed: int = 0):
        return {"x": 3.0}, {}

    def outer(seed: int = 0):
        t0 = time.monotonic()
        r = experiments.run("inner")  # held elsewhere: computed here, not waited for
        return {"x": r.numbers["x"], "waited": time.monotonic() - t0}, {}

    fakes("inner", inner)
    fakes("outer", outer)
    path = _lock_path("inner")
    holder = _hold(path, 20.0)
    try:
        r = experiments.run("outer")
    finally:
        holder.kill()
        holder.wait()
    assert r.numbers["x"] == 3.0 and r.numbers["waited"] < 5.0


def test_cache_clear_removes_free_locks_and_keeps_a_held_one(fakes):  # noqa: F811
    fakes("inner", lambda seed=0: ({"x": 3.0}, {}))
    path = _lock_path("inner")
    with store.entry_lock(path.with_suffix("")):
        pass
    assert path.exists()
    holder = _hold(path, 20.0)
    try:
        store.cache_clear()
        assert path.exists()  # in use: kept
    finally:
        holder.kill()
        holder.wait()
    store.cache_clear()
    assert not path.exists()


def test_cache_clear_keeps_an_entry_whose_writer_holds_its_lock(fakes, capsys):  # noqa: F811
    fakes("inner", lambda seed=0: ({"x": 3.0}, {}))
    fakes("other", lambda seed=0: ({"x": 4.0}, {}))
    path = _lock_path("inner")
    experiments.run("inner")
    experiments.run("other")
    folder = path.with_suffix("")
    holder = _hold(path, 20.0)  # another process writing this entry
    try:
        assert store.cache_clear() == 1  # the other entry only
        assert (folder / "inner.json").exists()
        assert main(["cache", "clear"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            f"removed 0 cache entries from {store.cache_dir()}",
            "1 entry remains (another process is computing or writing it now)"]
    finally:
        holder.kill()
        holder.wait()
    assert store.cache_clear() == 1
    assert not folder.exists() and not path.exists()


def test_cache_clear_counts_only_what_it_removed(fakes, monkeypatch):  # noqa: F811
    """An entry another cache_clear removed first (a stale list of entries) is not counted."""
    fakes("inner", lambda seed=0: ({"x": 3.0}, {}))
    experiments.run("inner")
    (real,) = [p for p in store.cache_dir().iterdir() if p.is_dir()]
    ghost = store.cache_dir() / ("f" * 20)  # listed, but already gone
    monkeypatch.setattr(store, "_entries", lambda root: [ghost, real])
    assert store.cache_clear() == 1
    assert not real.exists()


def test_a_lock_removed_while_waited_for_is_not_taken(tmp_path):
    """A process that waited on a lock file which was then removed (cache_clear) and made
    anew locks the new file: a lock on the removed one would exclude no one."""
    import threading

    folder = tmp_path / ("a" * 20)
    path = tmp_path / f"{folder.name}.lock"
    path.touch()
    first = _hold(path, 20.0)
    taken = threading.Event()

    def waiter():
        with store.entry_lock(folder):
            taken.set()

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    time.sleep(0.3)  # the thread now waits on the first file
    path.unlink()
    path.touch()
    second = _hold(path, 20.0)  # the file now at the path, held by another process
    try:
        first.kill()
        first.wait()
        assert not taken.wait(1.0)  # the removed file is free, the path's is not
    finally:
        second.kill()
        second.wait()
    assert taken.wait(10.0)
    t.join(10.0)


def test_an_entry_written_just_before_the_lock_is_read_not_computed_again(fakes, monkeypatch):  # noqa: F811
    """A process that missed the cache, then took the lock just after another one wrote the
    entry and let go of it, reads that entry."""
    import contextlib

    calls = []

    def counted(seed: int = 0):
        calls.append(seed)
        return {"x": float(len(calls))}, {}

    fakes("counted", counted)
    experiments.run("counted")
    (folder,) = [p for p in store.cache_dir().iterdir() if p.is_dir()]
    entry = {f.name: f.read_bytes() for f in folder.iterdir()}
    store.cache_clear()
    real = store.entry_lock

    @contextlib.contextmanager
    def written_just_before(where, wait=True):
        where.mkdir(parents=True, exist_ok=True)
        for name, data in sorted(entry.items(), key=lambda kv: kv[0].endswith(".json")):
            (where / name).write_bytes(data)  # the other process's entry, the JSON last
        with real(where, wait=wait) as free:
            yield free

    monkeypatch.setattr(store, "entry_lock", written_just_before)
    r = experiments.run("counted")
    assert r.cached and r.numbers["x"] == 1.0 and calls == [0]
