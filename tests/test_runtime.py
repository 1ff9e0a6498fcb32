"""Tests of attnlib._runtime: the one device default, dtype checks, the thread policy."""

import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

import attnlib._runtime as R


def blas_threads():
    return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info()
            if lib["user_api"] == "blas"}


def test_default_device_is_cuda_when_available(monkeypatch):
    monkeypatch.delenv(R.DEVICE_ENV, raising=False)
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert R.default_device() == torch.device(want)
    assert R.resolve_device(None) == R.default_device()
    assert R.resolve_device("cpu") == torch.device("cpu")
    assert R.resolve_device(torch.device("cpu")) == torch.device("cpu")


def test_the_suite_runs_on_the_cpu_unless_a_test_asks():
    """conftest.py sets ATTNLIB_DEVICE=cpu: the oracles are CPU code and the book's numbers
    were computed on a CPU; a GPU test names device="cuda"."""
    assert R.default_device() == torch.device("cpu")


@pytest.mark.parametrize("named, want", [("cpu", "cpu"), (" cpu ", "cpu"), ("", None)])
def test_attnlib_device_names_the_default(monkeypatch, named, want):
    """$ATTNLIB_DEVICE is the default of every function that takes ``device=None``; empty is
    unset."""
    from attnlib.data import random_data

    monkeypatch.setenv(R.DEVICE_ENV, named)
    want = torch.device(want or ("cuda" if torch.cuda.is_available() else "cpu"))
    assert R.default_device() == want == R.resolve_device(None)
    assert random_data(2, 3, 2, seed=0).X.device.type == want.type


@pytest.mark.cuda
def test_attnlib_device_cuda(monkeypatch):
    from attnlib.data import random_data

    monkeypatch.setenv(R.DEVICE_ENV, "cuda")
    assert R.default_device().type == "cuda"
    assert random_data(2, 3, 2, seed=0).X.device.type == "cuda"
    assert R.resolve_device("cpu") == torch.device("cpu")  # an explicit device still wins


@pytest.mark.parametrize("named", ["gpu0", "cuda:99", "meta"] + ([] if torch.cuda.is_available()
                                                                   else ["cuda"]))
def test_attnlib_device_rejects(monkeypatch, named):
    """A device the book cannot compute on (``meta`` holds no numbers) is refused at once,
    naming the variable."""
    monkeypatch.setenv(R.DEVICE_ENV, named)
    with pytest.raises(ValueError, match=rf"^ATTNLIB_DEVICE='{named}': (device: )?expected "):
        R.default_device()
    with pytest.raises(ValueError, match="ATTNLIB_DEVICE"):
        R.resolve_device(None)


@pytest.mark.parametrize("bad", ["gpu0", 3.5, "cuda:99"])
def test_resolve_device_rejects(bad):
    with pytest.raises(ValueError, match=r"^device: expected "):
        R.resolve_device(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_an_error():
    with pytest.raises(ValueError, match=r"^device: expected an available device, got 'cuda'"):
        R.resolve_device("cuda")


def test_resolve_dtype():
    assert R.resolve_dtype() == torch.float64
    assert R.resolve_dtype("float32") == torch.float32
    assert R.resolve_dtype(torch.float16) == torch.float16
    for bad in (torch.int64, "int32", "nonsense", float, 3):
        with pytest.raises(ValueError, match=r"^dtype: expected a floating torch dtype"):
            R.resolve_dtype(bad)


@pytest.fixture
def two_threads():
    """Two torch threads and two threads in every BLAS library that accepts them.

    A BLAS started with OPENBLAS_NUM_THREADS=1 (scripts/env.sh sets it) may keep one thread
    whatever it is asked; the tests then need at least one library that went to two, so that
    "one thread inside few_threads" can tell the policy from the environment."""
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    with threadpool_limits(2, user_api="blas"):
        if 2 not in set(blas_threads().values()):
            pytest.skip("no BLAS library here accepts two threads")
        yield
    torch.set_num_threads(saved)


@pytest.mark.parametrize("work, device, active", [
    (None, None, True), (10.0, "cpu", True), (R.SMALL_WORK - 1, torch.device("cpu"), True),
    (R.SMALL_WORK, "cpu", False), (1e9, None, False), (None, "cuda", False),
    (10.0, "meta", False)])
def test_few_threads_limits_small_cpu_work_only(two_threads, work, device, active):
    before = blas_threads()
    with R.few_threads(work, device):
        assert torch.get_num_threads() == (1 if active else 2)
        inside = blas_threads()
        if active:
            assert set(inside.values()) == {1}
        else:
            assert inside == before
    assert torch.get_num_threads() == 2 and blas_threads() == before


def test_few_threads_restores_after_an_error(two_threads):
    before = blas_threads()
    with pytest.raises(RuntimeError, match="boom"), R.few_threads():
        raise RuntimeError("boom")
    assert torch.get_num_threads() == 2 and blas_threads() == before


def test_decorators(two_threads):
    seen = []

    @R.few_threads()
    def f(x):
        seen.append((torch.get_num_threads(), set(blas_threads().values())))
        return 2 * x

    @R.one_blas_thread
    def g(x):
        """doc"""
        seen.append((torch.get_num_threads(), set(blas_threads().values())))
        return x + 1

    assert f(3) == 6 and f(4) == 8 and g(1) == 2  # reusable, returns the value
    assert g.__doc__ == "doc" and g.__name__ == "g"
    assert all(n == 1 and b == {1} for n, b in seen) and len(seen) == 3
    assert torch.get_num_threads() == 2
