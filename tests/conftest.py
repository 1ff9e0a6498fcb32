"""Shared pytest fixtures and markers for the attnlib tests."""

import os
import re

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


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` are skipped on machines without a GPU."""
    for item in items:
        if "cuda" in item.keywords and not HAS_CUDA:
            item.add_marker(needs_cuda)


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` on the browser tests: one work unit per page of the site (see
    :func:`page_group`), so that all tests of a page run in one worker and share the page's
    visits (site_helpers.visit).  (pytest-xdist's own loadgroup marks are lost under pytest
    9.2, whose node ids no longer read ``_nodeid``.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class PageScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return page_group(nodeid)

    return PageScheduling(config, log)


def page_group(nodeid: str) -> str:
    """The work unit of a test: the page of the site it reads (its first parameter, when that
    is an HTML page: ``tests/test_site.py::test_page[book/02_att_svm.html]`` ->
    ``book/02_att_svm.html``), else its module (whose module fixtures it shares)."""
    m = re.search(r"\[([^\]\[]+?\.html)(?:-[^\]]*)?\]$", nodeid)
    return m.group(1) if m else nodeid.split("::")[0]


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
