"""attnlib.cli: python -m attnlib list | reproduce NAME|all | cache info|clear."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from experiment_fakes import CALLS, dummy, fake_dummy, fakes  # noqa: F401  (fixtures)

from attnlib import experiments
from attnlib.cli import main


def test_list_shows_scale_and_expected_time(dummy, capsys):  # noqa: F811
    assert main(["list"]) == 0
    header, rule, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[:2] == ["name", "paper"] and header.endswith("time (2 cores)")
    row = next(r for r in rows if r.startswith("dummy "))
    assert "test Fig. 0" in row and "00_test" in row and "trials=3, steps=10" in row
    assert row.endswith("~2 min")  # seconds=150


def test_reproduce_writes_figure_numbers_and_summary(dummy, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    assert main(["reproduce", "dummy", "--trials", "5", "--seed", "0", "--out", str(out)]) == 0
    for ext in ("png", "pdf", "json", "npz"):
        assert (out / f"dummy.{ext}").stat().st_size > 0, ext
    meta = json.loads((out / "dummy.json").read_text())
    assert meta["params"]["trials"] == 5 and meta["numbers"]["mean"] == 10.0
    assert [t["ok"] for t in meta["targets"]] == [True, True]
    text = capsys.readouterr().out
    assert "dummy: a dummy  [test Fig. 0]" in text and "✓ mean equals steps" in text
    assert CALLS[-1]["trials"] == 5 and CALLS[-1]["progress"] is True  # bars on in the CLI
    # cached on the second call, recomputed with --no-cache
    main(["reproduce", "dummy", "--trials", "5", "--out", str(out), "--no-figure"])
    assert len(CALLS) == 1 and "(cached)" in capsys.readouterr().out
    main(["reproduce", "dummy", "--trials", "5", "--out", str(out), "--no-cache", "--no-figure"])
    assert len(CALLS) == 2


def test_set_parses_by_type_and_strict(dummy, tmp_path, capsys):  # noqa: F811
    args = ["reproduce", "dummy", "--set", "scale=2", "--set", "sizes=3,4", "--set",
            "progress=false", "--out", str(tmp_path), "--no-figure"]
    assert main(args) == 0  # a missed target is reported ...
    assert CALLS[-1]["scale"] == 2.0 and CALLS[-1]["sizes"] == (3, 4)
    assert CALLS[-1]["progress"] is False
    assert "1 target(s) missed: dummy.mean" in capsys.readouterr().out
    assert main(args + ["--strict"]) == 1  # ... and fails the run with --strict


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "nope"], "unknown experiment 'nope'"),
    (["reproduce", "dummy", "--set", "steps=-5"],
     "experiment 'dummy': setting steps expects an int >= 1, got '-5'"),
    (["reproduce", "dummy", "--steps", "-5"], "setting steps expects an int >= 1, got '-5'"),
    (["reproduce", "dummy", "--trials", "0.5"], "setting trials expects an int >= 1, got '0.5'"),
    (["reproduce", "dummy", "--trials", "many"], "setting trials expects an int >= 1"),
    (["reproduce", "dummy", "--set", "scale=abc"], "setting scale expects a finite float"),
    (["reproduce", "dummy", "--set", "sizes=1,x"], "setting sizes expects a non-empty tuple"),
    (["reproduce", "dummy", "--set", "lr=0.1"], "does not take --set lr=...; its settings are"),
    (["reproduce", "dummy", "--set", "oops"], "expected KEY=VALUE"),
    (["reproduce", "dummy", "--set", "trials=4", "--trials", "4"], "repeats the option"),
    (["reproduce", "dummy", "--device", "tpu9"],
     "setting device expects one of 'cpu', 'cuda', 'cuda:<n>', 'mps' or None, got 'tpu9'"),
    (["cache", "wipe"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
])
def test_bad_input_is_one_line_and_status_2(dummy, argv, message, capsys, tmp_path):  # noqa: F811
    assert main(argv + (["--out", str(tmp_path)] if argv[:1] == ["reproduce"] else [])) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("python -m attnlib: error: ")
    assert err.count("\n") == 1 and CALLS == []  # nothing was computed


@pytest.mark.parametrize("name, key, bad, choices", [
    ("mm_ray_risk", "loss", "hinge", "'logistic', 'exp', 'correlation'"),
    ("mm_token_plane", "example", "e3", "'e1-global', 'e1-local', 'e2'"),
    ("md_text", "query", "first", "'mean', 'cls'"),
    ("md_text", "device", "gpu", "'cpu', 'cuda', 'cuda:<n>', 'mps' or None"),
])
def test_a_string_outside_its_choices_names_them(name, key, bad, choices, capsys, tmp_path):
    assert main(["reproduce", name, "--set", f"{key}={bad}", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"experiment '{name}': setting {key} expects one of {choices}, got '{bad}'" in err
    assert err.count("\n") == 1 and not any(tmp_path.iterdir())  # nothing was computed


def test_the_output_folder_is_checked_first(dummy, tmp_path, capsys):  # noqa: F811
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["reproduce", "dummy", "--out", str(afile)]) == 2
    assert f"--out {afile}: is a file, expected a folder" in capsys.readouterr().err
    assert main(["reproduce", "dummy", "--out", str(afile / "sub")]) == 2
    assert "not a writable folder" in capsys.readouterr().err
    if os.geteuid() != 0:  # root may write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        assert main(["reproduce", "dummy", "--out", str(ro)]) == 2
        assert "not a writable folder" in capsys.readouterr().err
    assert CALLS == []


def test_an_error_in_an_experiment_is_one_line_or_a_traceback(fakes, tmp_path, capsys):  # noqa: F811
    def broken(seed: int = 0):
        raise RuntimeError("solver diverged\nbadly")

    fakes("broken", broken)
    argv = ["reproduce", "broken", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert capsys.readouterr().err == \
        "python -m attnlib: error: RuntimeError: solver diverged badly\n"
    assert main(argv + ["--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and 'raise RuntimeError("solver' in err


def test_all_passes_only_the_settings_each_experiment_takes(dummy, fakes, monkeypatch,  # noqa: F811
                                                            capsys, tmp_path):
    def bare(seed: int = 0):
        return {"mean": 10.0, "seed": 0}, {}

    fakes("bare", bare)
    assert main(["reproduce", "bare", "--trials", "3"]) == 2
    assert "experiment 'bare' does not take --trials; its settings are: seed" in \
        capsys.readouterr().err
    monkeypatch.setattr(experiments, "names", lambda: ["dummy", "bare"])  # not the book's
    assert main(["reproduce", "all", "--trials", "4", "--out", str(tmp_path), "--no-figure"]) == 0
    out = capsys.readouterr().out
    assert "note: bare does not take trials" in out and CALLS[-1]["trials"] == 4
    assert "[2/2] bare" in out


def test_cuda_request_without_cuda(dummy, capsys):  # noqa: F811
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["reproduce", "dummy", "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_cache_info_and_clear(dummy, capsys):  # noqa: F811
    experiments.run(dummy)
    capsys.readouterr()
    assert main(["cache", "info"]) == 0
    lines = capsys.readouterr().out.splitlines()
    size = sum(f.stat().st_size for f in experiments.cache_dir().rglob("*") if f.is_file())
    assert lines == [f"path: {experiments.cache_dir()}", "entries: 1",
                     f"size: {size / 1024:.1f} KiB"]
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == f"removed 1 cache entry from {experiments.cache_dir()}\n"
    assert experiments.cache_info()["entries"] == 0


@pytest.mark.slow
def test_module_entry_point(tmp_path, capsys, monkeypatch):
    """The real registry through `python -m attnlib` in a fresh process (every experiment
    registers itself when the command loads them), and its error path for a real experiment.
    (The error's exit status through the entry point: test_help_and_a_usage_error_load_no_torch;
    each fresh process loads torch and every experiment, some 5 CPU-s.)"""
    env = {**os.environ, "ATTNLIB_CACHE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "attnlib", "list"], capture_output=True,
                         text=True, timeout=120, check=True, env=env).stdout
    for name in experiments.names():
        assert f"\n{name} " in out
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    assert main(["reproduce", experiments.names()[0], "--set", "steps=-5"]) == 2
    bad = capsys.readouterr()
    assert bad.out == ""
    assert bad.err.startswith("python -m attnlib: error: experiment ") and \
        bad.err.count("\n") == 1


def test_a_time_bar_for_experiments_without_their_own(dummy, fakes, tmp_path,  # noqa: F811
                                                     capsys, monkeypatch):
    import time

    def slow(seed: int = 0):
        time.sleep(1.2)
        return {"mean": 10.0}, {}

    fakes("slow", slow, seconds=3)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["reproduce", "slow", "--out", str(tmp_path), "--no-figure"]) == 0
    err = capsys.readouterr().err
    assert "slow: " in err and "/3 s expected" in err
    assert main(["reproduce", "dummy", "--out", str(tmp_path), "--no-figure"]) == 0
    assert "dummy: " not in capsys.readouterr().err  # it draws its own (progress=True)
    assert CALLS[-1]["progress"] is True


def _status_fake(nan: bool = False, steps: int = 3):
    """Trains with attnlib.train: lp = 1.01 in float32 with a big step overflows (nan=True)."""
    import torch

    import attnlib as al

    data = al.random_data(3, 4, 5, seed=1, dtype=torch.float32)
    kw = dict(method="md", lp=1.01, lr=10.0, init={"W": 0.1 * torch.ones(5, 5)}) if nan else {}
    r = al.train(data, steps=steps, **kw)
    return {"loss": float(r.history["loss"][-1])}, {}


def test_strict_fails_on_a_training_run_that_turned_nonfinite(fakes, tmp_path, capsys):  # noqa: F811
    fakes("status", _status_fake)
    out = str(tmp_path / "out")
    assert main(["reproduce", "status", "--out", out, "--strict"]) == 0
    assert "status: ok" in capsys.readouterr().out
    with pytest.warns(RuntimeWarning):
        code = main(["reproduce", "status", "--set", "nan=true", "--out", out, "--strict"])
    text = capsys.readouterr().out
    assert code == 1 and "non-finite or stalled training: status (not ok: 1 of 1" in text
    assert experiments.run("status", nan=True).status.nonfinite == 1  # cached with its status
    assert json.loads((tmp_path / "out" / "status.json").read_text())["status"]["nonfinite"] == 1


def test_files_from_two_runs_never_mix(dummy, tmp_path, monkeypatch):  # noqa: F811
    """Ctrl-C while the second run writes its files: the first run's set stays whole, and no
    temporary folder is left."""
    out = tmp_path / "out"
    assert main(["reproduce", "dummy", "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["dummy.json", "dummy.npz", "dummy.pdf", "dummy.png"]

    def interrupted(self, fname, **kw):
        raise KeyboardInterrupt

    import matplotlib.figure

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", interrupted)
    assert main(["reproduce", "dummy", "--steps", "20", "--out", str(out)]) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.undo()
    # a run without figures removes the old figures: its files are one run's
    assert main(["reproduce", "dummy", "--steps", "20", "--out", str(out), "--no-figure"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["dummy.json", "dummy.npz"]
    assert json.loads((out / "dummy.json").read_text())["params"]["steps"] == 20


def test_an_interrupted_run_leaves_no_empty_output_folder(dummy, tmp_path, monkeypatch):  # noqa: F811
    def interrupted(name, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(experiments, "run", interrupted)
    out = tmp_path / "new" / "out"
    assert main(["reproduce", "dummy", "--out", str(out)]) == 130
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()  # a folder that was there before stays
    assert main(["reproduce", "dummy", "--out", str(tmp_path / "kept")]) == 130
    assert (tmp_path / "kept").is_dir()


def test_ctrl_c_while_the_package_loads_is_one_line(tmp_path):
    """Ctrl-C during `python -m attnlib`'s imports (torch takes seconds): one line, status 130,
    no traceback, no --out folder. ``import attnlib`` loads no torch: the command loads it, and
    the package's exit-at-once handler must still be in place then (the stand-in exits with
    another message if not). A stand-in torch module interrupts its own import. The child
    starts with SIGINT at its default: a shell that runs a job in the background ignores SIGINT,
    every process of the job inherits that, and then no Ctrl-C can reach it."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "torch.py").write_text(
        "import os, signal, sys, time\n"
        "if getattr(signal.getsignal(signal.SIGINT), '__module__', None) != 'attnlib':\n"
        "    sys.stderr.write('torch loads under Python\\'s handler\\n')\n"
        "    os._exit(3)\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(30)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), root])}
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "attnlib", "reproduce", "all", "--out", str(out)],
                       capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert (r.returncode, r.stdout, r.stderr) == (130, "", "python -m attnlib: interrupted\n")
    assert not out.exists()


def test_help_and_a_usage_error_load_no_torch(tmp_path):
    """``python -m attnlib --help`` (and a mistyped command) answer without loading torch: a
    stand-in torch module ends the process with status 5 when imported (``list`` shows that it
    is found)."""
    (tmp_path / "torch.py").write_text("import os\nos._exit(5)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path),
                                                        str(Path(__file__).parents[1])])}
    for argv, status in ((["--help"], 0), (["frobnicate"], 2), (["list"], 5)):
        r = subprocess.run([sys.executable, "-m", "attnlib", *argv], capture_output=True,
                           text=True, timeout=120, cwd=tmp_path, env=env)
        assert r.returncode == status, (argv, r.returncode, r.stderr[-2000:])


def test_main_restores_pythons_interrupt_handler(dummy, monkeypatch):  # noqa: F811
    """Once loaded, Ctrl-C is a KeyboardInterrupt again (the run cleans up its files)."""
    import attnlib

    seen = []
    monkeypatch.setattr(signal, "signal", lambda sig, h: seen.append((sig, h)))
    monkeypatch.setattr(signal, "getsignal", lambda sig: attnlib._interrupted_while_loading)
    assert main(["list"]) == 0
    assert seen == [(signal.SIGINT, signal.default_int_handler)]


def test_every_output_file_has_the_same_mode(dummy, tmp_path):  # noqa: F811
    out = tmp_path / "out"
    assert main(["reproduce", "dummy", "--out", str(out)]) == 0
    probe = tmp_path / "probe"
    probe.write_text("")  # the mode a plain open() gives under this umask
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in out.iterdir()}
    assert set(modes.values()) == {oct(probe.stat().st_mode & 0o777)}, modes


def _conditional(radii: tuple[float, ...] = (1.0, 8.0)):
    """Computes its 'shrinks' target only when the radii include 1 and 8."""
    numbers = {"largest": max(radii)}
    if {1.0, 8.0} <= set(radii):
        numbers["shrinks"] = 1.0
    return numbers, {}


def test_a_setting_that_skips_a_target_is_reported_not_a_crash(fakes, tmp_path, capsys):  # noqa: F811
    from attnlib.experiments import Target

    fakes("conditional", _conditional, targets=[
        Target("shrinks", "shrinks", "yes", 1, 1, "exact", "suggested")])
    args = ["reproduce", "conditional", "--set", "radii=1,4", "--out", str(tmp_path)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "not computed with these settings" in text and "missed: conditional.shrinks" in text
    assert main(args + ["--strict"]) == 1


def test_list_durations_read_as_written():
    from attnlib.cli import _duration

    assert [_duration(s) for s in (None, 0.2, 1.4, 25, 600, 7200)] == [
        "?", "<1 s", "~1 s", "~25 s", "~10 min", "~2.0 h"]
