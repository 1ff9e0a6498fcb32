"""Tiny fake experiments for the tests of attnlib.experiments and the command line.

``dummy`` (a fixture) registers ``fake_dummy`` as the experiment 'dummy' with a private result
cache, and removes it afterwards; ``CALLS`` records every call, so a test sees whether a result
was computed or read from the cache.
"""

import numpy as np
import pytest

from attnlib import experiments
from attnlib.experiments import Target

CALLS = []


def fake_dummy(trials: int = 3, steps: int = 10, seed: int = 0, device: str | None = "cpu",
               scale: float = 1.0, sizes: tuple[int, ...] = (1, 2), progress: bool = True):
    """``mean`` = steps * scale (from ``trials`` draws), ``seed``; arrays ``x`` and ``t``."""
    CALLS.append(dict(trials=trials, steps=steps, seed=seed, device=device, scale=scale,
                      sizes=sizes, progress=progress))
    rng = np.random.default_rng(seed)
    x = steps * scale + 0 * rng.standard_normal(trials)
    return {"mean": float(x.mean()), "seed": seed}, {"x": x, "t": np.arange(trials)}


def fake_plot(res):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot(res.arrays["t"], res.arrays["x"])
    return fig


DUMMY_TARGETS = [
    Target("mean", "mean equals steps", "10", lo=9.5, hi=10.5, tolerance="±0.5",
           source="re-simulation", note="a test row"),
    Target("seed", "seed is zero", "0", lo=0, hi=0, tolerance="exact", source="suggested"),
]


def register(name, func, **kw):
    """Register ``func`` as experiment ``name`` (paper 'test Fig. 0', chapter '00_test')."""
    kw = {"paper": "test Fig. 0", "chapter": "00_test", "title": f"a {name}", **kw}
    experiments.experiment(name, **kw)(func)
    return name


@pytest.fixture
def fakes(monkeypatch, tmp_path):
    """A private cache; every experiment registered through ``fakes`` is removed afterwards."""
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path / "cache"))
    CALLS.clear()
    added = []

    def add(name, func, **kw):
        added.append(register(name, func, **kw))
        return name

    yield add
    for name in added:
        if name in experiments.names():
            experiments.unregister(name)


@pytest.fixture
def dummy(fakes):
    """The fake experiment 'dummy' (with targets, a figure and an expected run time)."""
    return fakes("dummy", fake_dummy, title="a dummy", targets=DUMMY_TARGETS, plot=fake_plot,
                 seconds=150)
