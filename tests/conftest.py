"""Shared pytest fixtures and markers for the attnlib tests."""

import os

import pytest
import torch
from hypothesis import settings

import attnlib.data as D

# Property tests: few examples and no deadline (2 shared CPU cores); HYPOTHESIS_PROFILE=thorough
# for a longer search.
settings.register_profile("attnlib", max_examples=50, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "attnlib"))

HAS_CUDA = torch.cuda.is_available()

# The tests' tensors are tiny: one intra-op thread avoids synchronisation costs that made small
# steps ~50x slower with 2 threads on a loaded 2-core machine (al.train does the same itself).
torch.set_num_threads(1)
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


@pytest.hookimpl(tryfirst=True)  # (before pytest-xdist reads the groups)
def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` are skipped on machines without a GPU.  Browser tests are grouped
    for ``--dist loadgroup``: the tests of one page of the site (a ``page`` parameter) in one
    group, whatever their module, so they share the page's visits (site_helpers.visit); the
    other browser tests by module (they share module fixtures)."""
    for item in items:
        if "cuda" in item.keywords and not HAS_CUDA:
            item.add_marker(needs_cuda)
        if "browser" in item.keywords:
            params = getattr(getattr(item, "callspec", None), "params", {})
            page = params.get("page")
            group = page if isinstance(page, str) and page.endswith(".html") \
                else item.module.__name__
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def small_data():
    """One random cross-attention data set, n=4, T=5, d=6, float64 on CPU."""
    return D.random_data(4, 5, 6, seed=0, device="cpu")


@pytest.fixture
def batched_data():
    """Three trials of random data, n=4, T=5, d=6, float64 on CPU."""
    return D.random_data(4, 5, 6, trials=3, seed=0, device="cpu")


@pytest.fixture
def paper_data():
    """The papers' standard size n=6, T=8, d=10, four trials, float64 on CPU."""
    return D.random_data(6, 8, 10, trials=4, seed=0, device="cpu")
