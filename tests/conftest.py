"""Shared pytest fixtures and markers for the attnlib tests."""

import os
import re
from pathlib import Path

import pytest
import torch
from hypothesis import settings

# The unit tests run on the CPU also on a GPU machine (their oracles are CPU code: numpy, scipy,
# cvxpy); a test of the GPU asks for device="cuda" and is marked ``cuda``.  Set before attnlib
# is imported; subprocesses (nbval, the grader) inherit it.
os.environ["ATTNLIB_DEVICE"] = "cpu"

# The browser tests' session fixtures (tests/site_helpers.py), defined here once: one web server
# and one headless Chromium per worker for the whole session.  (A session fixture imported into
# a test module is defined again for that module: each module then started its own Chromium.)
from site_helpers import browser, chromium, served_site  # noqa: F401

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
    9.2, whose node ids no longer read ``_nodeid``.)  ``--dist loadfile`` (the unit tests):
    the files in the order of :func:`file_cost`, dearest first, so that the last files handed
    out are cheap ones and neither worker waits long for the other at the end (by number of
    tests, xdist's order, a file of one 15-second test came last)."""
    if config.getvalue("dist") == "loadfile":
        from xdist.scheduler import LoadFileScheduling

        class CostlyFirst(LoadFileScheduling):
            ordered = False

            def _assign_work_unit(self, node):
                if not self.ordered:  # the first hand-out: the queue is complete
                    units = sorted(self.workqueue.items(),
                                   key=lambda kv: -file_cost(kv[0], list(kv[1])))
                    self.workqueue.clear()
                    self.workqueue.update(units)
                    self.ordered = True
                super()._assign_work_unit(node)

        return CostlyFirst(config, log)
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


def file_cost(path: str, nodeids: list) -> float:
    """A guess at a test file's seconds, for the order of ``--dist loadfile``: ten per test
    function marked slow (3 s or more), one per further parameter case of it (often cheaper:
    sampled settings, sizes), and a third of a second per other test."""
    try:
        src = Path(path).read_text()
    except OSError:
        src = ""
    slow_funcs = set(re.findall(r"@pytest\.mark\.slow\n(?:@.*\n)*def (test_\w+)\(", src))
    if re.search(r"^pytestmark = .*pytest\.mark\.slow", src, re.M):
        return 10.0 * len(nodeids)
    slow = [f for nid in nodeids if (f := re.split(r"[\[:]", nid.split("::", 1)[-1])[0])
            in slow_funcs]
    return 10.0 * len(set(slow)) + (len(slow) - len(set(slow))) + (len(nodeids) - len(slow)) / 3


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


@pytest.fixture
def unshown(monkeypatch):
    """An explorer function returns its :class:`~attnlib.explorers.Explorer` instead of showing
    it: no live figure drawn and encoded (a test reads what the explorer draws through
    ``Explorer.figure``)."""
    from attnlib.explorers import Explorer

    monkeypatch.setattr(Explorer, "show", lambda self, mode=None: self)


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    """An experiment cache (``ATTNLIB_CACHE``) of the test module's own: what one test computes
    through :func:`attnlib.experiments.run` the next test of the module reads, as the chapters
    do; the project's cache is never touched.  (A cache per test recomputed the same settings
    in every test that read them.)"""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTNLIB_CACHE", str(tmp_path_factory.mktemp("experiment-cache")))
        yield
