"""The command line: python -m attnlib list | reproduce NAME|all."""

import json
import subprocess
import sys

import pytest
from test_registry import CALLS, dummy  # noqa: F401  (the fixture registering 'dummy')

from attnlib import experiments
from attnlib.__main__ import main
from attnlib.experiments import _registry


def test_list_shows_dummy(dummy, capsys):  # noqa: F811
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    header, rule, *rows = out.splitlines()
    assert header.split()[:2] == ["name", "paper"]
    row = next(r for r in rows if r.startswith("dummy "))
    assert "test Fig. 0" in row and "00_test" in row and "trials=3, steps=10" in row


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
    assert CALLS[-1]["trials"] == 5
    # cached on the second call, recomputed with --no-cache
    main(["reproduce", "dummy", "--trials", "5", "--out", str(out), "--no-figure"])
    assert len(CALLS) == 1 and "(cached)" in capsys.readouterr().out
    main(["reproduce", "dummy", "--trials", "5", "--out", str(out), "--no-cache", "--no-figure"])
    assert len(CALLS) == 2


def test_set_and_strict(dummy, tmp_path, capsys):  # noqa: F811
    args = ["reproduce", "dummy", "--set", "scale=2.0", "--out", str(tmp_path), "--no-figure"]
    assert main(args) == 0  # a missed target is reported ...
    assert CALLS[-1]["scale"] == 2.0
    assert "1 target(s) missed: dummy.mean" in capsys.readouterr().out
    assert main(args + ["--strict"]) == 1  # ... and fails the run with --strict


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "nope"], "unknown experiment 'nope'"),
    (["reproduce", "dummy", "--trials", "0"], "expected a positive integer"),
    (["reproduce", "dummy", "--trials", "many"], "expected a positive integer"),
    (["reproduce", "dummy", "--set", "lr=0.1"], "does not take --set lr=..."),
    (["reproduce", "dummy", "--set", "oops"], "expected KEY=VALUE"),
    (["reproduce", "dummy", "--set", "trials=4", "--trials", "4"], "repeats the option"),
    (["reproduce", "dummy", "--device", "tpu9"], "is not a torch device"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
])
def test_bad_input_exits_with_a_message(dummy, argv, message, capsys):  # noqa: F811
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_option_not_taken_by_experiment(dummy, monkeypatch, capsys, tmp_path):  # noqa: F811
    def bare(seed=0):
        return {"mean": 10.0, "seed": 0}, {}

    # only the two test experiments, so that 'all' does not run the book's
    monkeypatch.setattr(_registry, "_REGISTRY", {"dummy": _registry._REGISTRY["dummy"]})
    experiments.experiment("bare", paper="test", chapter="00_test", title="bare")(bare)
    with pytest.raises(SystemExit):
        main(["reproduce", "bare", "--trials", "3"])
    assert "experiment 'bare' does not take --trials; its settings are: seed" in \
        capsys.readouterr().err
    # with 'all', the option goes to the experiments that take it; the others get a note
    assert main(["reproduce", "all", "--trials", "4", "--out", str(tmp_path), "--no-figure"]) == 0
    out = capsys.readouterr().out
    assert "note: bare does not take trials" in out and CALLS[-1]["trials"] == 4


def test_cuda_request_without_cuda(dummy, capsys):  # noqa: F811
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(SystemExit):
        main(["reproduce", "dummy", "--device", "cuda"])
    assert "CUDA is not available" in capsys.readouterr().err


def test_module_entry_point_lists_the_book_experiments():
    """The real registry, through `python -m attnlib list` in a fresh process."""
    out = subprocess.run([sys.executable, "-m", "attnlib", "list"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    for name in experiments.names():
        assert name in out
    if not experiments.names():
        assert "no experiments" in out
