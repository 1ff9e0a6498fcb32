"""Tests of attnlib._validate: one error style, numpy/torch scalars accepted, bools/NaN rejected."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import attnlib._validate as V

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
ints = st.integers(min_value=-(2**40), max_value=2**40)


def wrappers(x):
    """The same number as Python, numpy and torch 0-dim scalars."""
    if isinstance(x, int):
        return [x, np.int64(x), torch.tensor(x)]
    return [x, np.float64(x), np.array(x), torch.tensor(x, dtype=torch.float64)]


@given(x=finite | ints)
def test_number_accepts_every_scalar_kind(x):
    for w in wrappers(x):
        got = V.number("lr", w)
        assert type(got) is float and got == float(x)


@given(x=ints)
def test_integer_returns_int(x):
    for w in wrappers(x) + [float(x)]:
        got = V.number("steps", w, integer=True)
        assert type(got) is int and got == x


@given(x=finite.filter(lambda x: not float(x).is_integer()))
def test_integer_rejects_fractions(x):
    with pytest.raises(ValueError, match=r"^steps: expected an int, got "):
        V.number("steps", x, integer=True)


@pytest.mark.parametrize("bad", [
    True, False, np.bool_(True), torch.tensor(True), float("nan"), float("inf"), -math.inf,
    np.float32("nan"), torch.tensor(float("nan")), "1.0", None, [1.0], np.ones(1),
    torch.ones(1), 1 + 2j, torch.tensor(1 + 2j)])
def test_number_rejects_non_numbers(bad):
    with pytest.raises(ValueError, match=r"^alpha: expected a finite number, got "):
        V.number("alpha", bad)


@given(x=finite, lo=finite, hi=finite, lo_open=st.booleans())
def test_bounds(x, lo, hi, lo_open):
    inside = (x > lo if lo_open else x >= lo) and x <= hi
    if inside:
        assert V.number("eta", x, lo=lo, lo_open=lo_open, hi=hi) == x
    else:
        with pytest.raises(ValueError) as err:
            V.number("eta", x, lo=lo, lo_open=lo_open, hi=hi)
        msg = str(err.value)
        assert msg.startswith(f"eta: expected a finite number {'>' if lo_open else '>='} {lo}")
        assert f"and <= {hi}, got {x!r}" in msg


def test_bound_edges():
    assert V.number("p", 1, lo=1) == 1.0
    with pytest.raises(ValueError, match=r"^p: expected a finite number > 1, got 1$"):
        V.number("p", 1, lo=1, lo_open=True)
    assert V.number("p", 2, hi=2) == 2.0
    with pytest.raises(ValueError, match=r"^p: expected a finite number <= 2, got 3$"):
        V.number("p", 3, hi=2)


@given(x=st.sampled_from(["a", "b"]) | st.integers(0, 3))
def test_choice(x):
    options = ("a", "b", 1, 2.0)
    if x in ("a", "b", 1, 2):
        assert V.choice("mode", x, options) == x
    else:
        with pytest.raises(ValueError, match=r"^mode: expected one of \('a', 'b', 1, 2.0\), got "):
            V.choice("mode", x, options)


def test_choice_matches_by_kind():
    assert V.choice("lp", np.float64(2.0), (1.75, 2.0)) == 2.0
    assert V.choice("lp", torch.tensor(2), (1.75, 2.0)) == 2.0
    assert V.choice("opt", None, (None, "x")) is None
    for bad, options in [(True, (1, 2)), (1, (True, "1")), ("1", (1, 2)), ([1], (1,))]:
        with pytest.raises(ValueError, match="^opt: expected one of"):
            V.choice("opt", bad, options)
    assert V.choice("flag", np.bool_(True), (True, False)) is True


def test_as_tensor_converts_and_rejects():
    t = V.as_tensor([[1, 2], [3, 4]], "W")
    assert t.dtype == torch.float64 and t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert V.as_tensor(torch.ones(2, dtype=torch.float32), "W").dtype == torch.float32
    assert V.as_tensor(torch.arange(3), "W").dtype == torch.float64
    assert V.as_tensor(np.float32(2.5), "W").item() == 2.5
    assert V.as_tensor(torch.ones(2), "W", dtype=torch.float64).dtype == torch.float64
    for bad in ([1.0, float("nan")], np.array([np.inf]), torch.tensor([0.0, -float("inf")])):
        with pytest.raises(ValueError, match=r"^W: contains NaN or Inf$"):
            V.as_tensor(bad, "W")
    with pytest.raises(ValueError, match=r"^W: expected a tensor or array of numbers, got str"):
        V.as_tensor("abc", "W")
    with pytest.raises(ValueError, match=r"^W: expected real numbers, got dtype"):
        V.as_tensor(torch.ones(2, dtype=torch.complex64), "W")


@given(signs=st.lists(st.sampled_from([-1.0, 1.0]), min_size=1, max_size=20),
       bad=st.sampled_from([0.0, 2.0, -0.5, float("nan"), 1.0000001]),
       where=st.integers(0, 19))
def test_labels(signs, bad, where):
    Y = torch.tensor(signs, dtype=torch.float64)
    assert V.labels("Y", Y) is Y
    Y[where % len(signs)] = bad
    with pytest.raises(ValueError, match=r"^Y: expected labels in \{-1, \+1\}, got "):
        V.labels("Y", Y)


def test_shape():
    t = torch.zeros(2, 3, 4)
    assert V.shape("X", t, "(n,T,d)", ndim=3) is t
    assert V.shape("X", t, "(n,T,d)", ndim=(3, 4), size=(2, None, 4)) is t
    with pytest.raises(ValueError, match=r"^X: expected shape \(n,T,d\), got \(2, 3, 4\)$"):
        V.shape("X", t, "(n,T,d)", ndim=(2, 4))
    with pytest.raises(ValueError, match=r"^z: expected shape \(n,d\), got \(2, 3, 4\)$"):
        V.shape("z", t, "(n,d)", size=(2, 3, 5))
    with pytest.raises(ValueError, match="^z: expected shape"):
        V.shape("z", t, "(n,d)", size=(2, 3))


def test_to_numpy():
    t = torch.ones(2, requires_grad=True)
    a = V.to_numpy(t * 2)
    assert isinstance(a, np.ndarray) and a.tolist() == [2.0, 2.0]
    assert V.to_numpy([1, 2]).tolist() == [1, 2]


@pytest.mark.parametrize("x", [None, [1.0, None], np.array([1.0, None], dtype=object),
                               [[1, 2], [3]], "abc"])
def test_as_tensor_names_what_is_not_an_array_of_numbers(x):
    """None is missing data, not NaN: "expected a tensor or array of numbers"."""
    with pytest.raises(ValueError, match="^X: expected a tensor or array of numbers, got"):
        V.as_tensor(x, "X")


def test_as_tensor_accepts_object_arrays_of_numbers():
    t = V.as_tensor(np.array([1, 2.5], dtype=object), "X")
    assert t.tolist() == [1.0, 2.5] and t.dtype == torch.float64


@pytest.mark.parametrize("bad", [1, 0, "True", None, np.bool_(True), torch.tensor(True)])
def test_flag_takes_python_booleans_only(bad):
    assert V.flag("f", True) is True and V.flag("f", False) is False
    with pytest.raises(ValueError, match=r"^f: expected True or False, got "):
        V.flag("f", bad)
