"""Every registered experiment on a GPU: computed on CUDA at tiny settings, it raises nothing
and gives a finite number wherever the CPU does.

An experiment with a ``device`` setting is run with ``device="cuda"``; one without runs on
:func:`attnlib._runtime.default_device`, here made CUDA (``ATTNLIB_DEVICE=cuda``, as on a GPU
machine where the variable is not set). The settings are the cheapest allowed ones of
``tests/test_experiment_settings_sampled.py``, with the sizes raised where those are refused.
The same settings run on the CPU as the oracle: the CUDA run must return the same numbers
(keys), every declared target that applies, and a finite value wherever the CPU's is finite.
The values themselves are not compared (a GPU rounds differently, and at these sizes an
argmax or a count can turn on the last bit); the trainers' agreement is checked in
``tests/test_trainers_cuda.py``.

Fails on: a CPU tensor meeting a CUDA one (``Expected all tensors to be on the same device``),
a CUDA index into a CPU tensor, ``.numpy()`` on a CUDA tensor, a target not computed, a NaN
or an infinity that the CPU does not give. Every test is marked ``cuda`` (skipped without a
GPU); the experiments run uncached. About 1 s per experiment on a GPU.
"""

from __future__ import annotations

import math
import random

import pytest
from test_experiment_settings_sampled import sample

import attnlib.experiments as E

pytestmark = pytest.mark.cuda
DEVICE = "cuda"

# the cheapest sampled settings refused (a size below a declared minimum): raised to the
# smallest that compute
TINY = {
    "mm_local_cone": dict(mus=(0.001, 0.3), radii=(0.5, 1.0), r0=1.0, steps=20,
                          record_every=10),
    "md_bias": dict(lps=(1.25, 2.0)),
}
# an experiment whose cheapest sizes accept no run: its own small settings instead
FIXED = {"tf_multi_token": dict(accepted=1, ds=(4,), record_every=1000, chunk=16,
                                progress=False)}


def tiny_settings(name: str, device: str) -> dict:
    """Experiment ``name``'s tiny settings, on ``device`` where it has a ``device`` setting."""
    if name in FIXED:
        s = dict(FIXED[name])
    else:
        s = sample(name, random.Random(f"sampled-{name}"), cheapest=True)
        s.update(TINY.get(name, {}))
    if "device" in E.get(name).settings:
        s["device"] = device
    return s


def run_on(name: str, device: str, monkeypatch):
    """``name`` at its tiny settings on ``device``, uncached; ``device`` is also the default
    device (``ATTNLIB_DEVICE``) for an experiment without a ``device`` setting."""
    with monkeypatch.context() as mp:
        mp.setenv("ATTNLIB_DEVICE", device)
        return E.run(name, cache=False, **tiny_settings(name, device))


@pytest.mark.parametrize("name", E.names())
def test_experiment_on_cuda_gives_the_cpu_targets_finite(name, monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    cpu = run_on(name, "cpu", monkeypatch)
    gpu = run_on(name, DEVICE, monkeypatch)
    assert gpu.params.get("device", DEVICE) == DEVICE, gpu.params  # asked for the GPU
    missing = [t.key for t in E.get(name).targets
               if t.applies(gpu.params) and t.key not in gpu.numbers]
    assert not missing, f"{name} on {DEVICE}: declared targets not computed: {missing}"
    assert set(gpu.numbers) == set(cpu.numbers), (
        f"{name}: numbers only on cpu {sorted(set(cpu.numbers) - set(gpu.numbers))}, only on "
        f"{DEVICE} {sorted(set(gpu.numbers) - set(cpu.numbers))}")
    lost = {k: float(gpu.numbers[k]) for k, v in cpu.numbers.items()
            if math.isfinite(float(v)) and not math.isfinite(float(gpu.numbers[k]))}
    assert not lost, f"{name}: finite on the cpu, not on {DEVICE}: {lost}"
