"""attnlib.experiments.settings: typed settings read from the signature, checked before running."""

import math
from typing import Literal

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlib.experiments.settings import (
    DEVICES,
    SettingError,
    check_settings,
    parse_setting,
    settings_of,
    without_choices,
)


def typed(trials: int = 3, seed: int = 0, lr: float = 0.1, eps: float = 1e-9,
          scale: float = -1.0, flag: bool = False, loss: str = "logistic",
          device: str | None = None, lps: tuple[float, ...] = (1.5, 2.0),
          cells: tuple[tuple[int, int], ...] = ((5, 5),), steps: int | tuple[int, ...] = 10,
          anything=None):
    return {}, {}


S = settings_of(typed, experiment="typed")


def check(**given):
    return check_settings("typed", S, given)


def test_types_and_default_bounds_are_read_from_the_signature():
    assert {k: s.describe() for k, s in S.items()} == {
        "trials": "an int >= 1", "seed": "an int >= 0", "lr": "a finite float > 0",
        "eps": "a finite float >= 0", "scale": "a finite float", "flag": "a bool (True/False)",
        "loss": "a string", "device": "one of 'cpu', 'cuda', 'cuda:<n>', 'mps' or None",
        "lps": "a non-empty tuple of finite floats > 1 and <= 4",
        "cells": "a non-empty tuple of a tuple (an int, an int) >= 1",
        "steps": "an int >= 1 or a non-empty tuple of ints >= 1", "anything": "any value"}


def test_declared_bounds_override_the_policy():
    s = settings_of(typed, bounds={"trials": (0, 5), "lr": (0.05, None), "lps": (1.5, 3),
                                   "scale": (-1, 2)})
    assert s["trials"].describe() == "an int >= 0 and <= 5"
    assert s["lr"].describe() == "a finite float > 0.05"  # a learning rate's lower bound is strict
    assert s["lps"].describe() == "a non-empty tuple of finite floats > 1.5 and <= 3"  # strict
    out = check_settings("t", s, {"trials": 0, "lps": [1.75, 3], "scale": -1})
    assert (out["trials"], out["lps"], out["scale"]) == (0, (1.75, 3.0), -1.0)
    with pytest.raises(SettingError, match="got \\(1.5,\\)"):  # (others: inclusive)
        check_settings("t", s, {"lps": (1.5,)})
    with pytest.raises(SettingError, match="setting trials expects an int >= 0 and <= 5, got 6"):
        check_settings("t", s, {"trials": 6})
    with pytest.raises(SettingError, match="got 0.05"):
        check_settings("t", s, {"lr": 0.05})


def test_values_are_converted_to_their_types():
    out = check(trials=np.int64(4), lr=torch.tensor(0.5, dtype=torch.float64), scale=2,
                flag=np.bool_(True), device=torch.device("cpu"), lps=np.array([1.25, 3]),
                cells=[[1, 2], (3, 4)], steps=[5, 6], anything=[1, [2]])
    assert out["trials"] == 4 and type(out["trials"]) is int
    assert out["lr"] == 0.5 and type(out["lr"]) is float
    assert out["scale"] == 2.0 and type(out["scale"]) is float
    assert out["flag"] is True and out["device"] == "cpu"
    assert out["lps"] == (1.25, 3.0) and all(type(x) is float for x in out["lps"])
    assert out["cells"] == ((1, 2), (3, 4)) and out["steps"] == (5, 6)
    assert out["anything"] == [1, [2]]  # unannotated: passed through unchanged
    assert check()["steps"] == 10 and check(steps=7.0)["steps"] == 7


@pytest.mark.parametrize("given, message", [
    (dict(trials=-5), "setting trials expects an int >= 1, got -5"),
    (dict(trials=0.5), "setting trials expects an int >= 1, got 0.5"),
    (dict(trials=True), "setting trials expects an int >= 1, got True"),
    (dict(seed=-1), "setting seed expects an int >= 0, got -1"),
    (dict(lr=0), "setting lr expects a finite float > 0, got 0"),
    (dict(lr="abc"), "setting lr expects a finite float > 0, got 'abc'"),
    (dict(scale=math.inf), "setting scale expects a finite float, got inf"),
    (dict(eps=math.nan), "setting eps expects a finite float >= 0, got nan"),
    (dict(flag=1), "setting flag expects a bool (True/False), got 1"),
    (dict(loss=3), "setting loss expects a string, got 3"),
    (dict(lps=()), "setting lps expects a non-empty tuple of finite floats > 1 and <= 4, got ()"),
    (dict(lps=(2.0, 5.0)), "got (2.0, 5.0)"),  # beyond the lp-SVMs' range
    (dict(device="tpu9"), "setting device expects one of 'cpu', 'cuda', 'cuda:<n>', 'mps' or "
                          "None, got 'tpu9'"),
    (dict(device="cuda:x"), "got 'cuda:x'"),
    (dict(lps=(1.0, "x")), "got (1.0, 'x')"),
    (dict(cells=((1, 2, 3),)), "got ((1, 2, 3),)"),
    (dict(cells=((1, 0),)), "got ((1, 0),)"),
    (dict(steps=(5, -1)), "setting steps expects an int >= 1 or a non-empty tuple of ints >= 1"),
    (dict(lp=2.0), "experiment 'typed' has no setting(s) 'lp'; its settings are: trials, seed"),
])
def test_bad_values_are_one_line_errors(given, message):
    with pytest.raises(SettingError) as err:
        check(**given)
    text = str(err.value)
    assert message in text and text.startswith("experiment 'typed'") and "\n" not in text


@given(st.one_of(st.integers(max_value=0), st.floats().filter(lambda x: not x.is_integer()),
                 st.text(), st.none(), st.booleans(), st.lists(st.integers(1, 9), max_size=2)))
def test_every_non_count_is_rejected(bad):
    with pytest.raises(SettingError, match="setting trials expects an int >= 1"):
        check(trials=bad)


def radial(radii: tuple[float, ...] = (1.0, 2.0), radius: float = 1.0, lp: float = 1.5,
           lps: tuple[float, ...] = (1.5,), step_lp: float = 2.0, scale: float = 1.0):
    return {}, {}


@pytest.mark.parametrize("name, bad, good", [
    ("lp", 1.0, 1.01), ("lps", (1.5, 1.0), (1.5, 3.0)), ("step_lp", 0.5, 1.5),
    ("radii", (4.0, -1.0), (0.0, 4.0)), ("radius", -0.5, 0.0),
])
def test_exponents_exceed_one_and_radii_are_not_negative(name, bad, good):
    """lp = 1 divides by p - 1 = 0 in the mirror map; a negative radius is no ball."""
    s = settings_of(radial, experiment="radial")
    with pytest.raises(SettingError, match=f"setting {name} expects"):
        check_settings("radial", s, {name: bad})
    assert check_settings("radial", s, {name: good})[name] == good
    assert check_settings("radial", s, {"scale": -1.0})["scale"] == -1.0  # other floats: free


@given(st.integers(min_value=1, max_value=10**12))
def test_every_count_is_accepted_unchanged(n):
    m = min(n, 2**31 - 1)
    assert check(trials=n)["trials"] == n and check(trials=np.int32(m))["trials"] == m


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_a_learning_rate_is_a_finite_positive_float(x):
    if math.isfinite(x) and x > 0:
        assert check(lr=x)["lr"] == x
    else:
        with pytest.raises(SettingError, match="setting lr expects a finite float > 0"):
            check(lr=x)


@pytest.mark.parametrize("name, text, value", [
    ("trials", "4", 4), ("lr", "1e-3", 1e-3), ("flag", "true", True), ("flag", "False", False),
    ("loss", "exp", "exp"), ("loss", "1,2", "1,2"), ("device", "none", None),
    ("device", "cuda:1", "cuda:1"), ("lps", "1.5, 2", (1.5, 2.0)), ("lps", "[3]", (3.0,)),
    ("lps", "2.5,", (2.5,)), ("cells", "((1, 2), (3, 4))", ((1, 2), (3, 4))),
    ("steps", "5", 5), ("steps", "5,6", (5, 6)), ("anything", "abc", "abc"),
])
def test_text_values_parse_by_type(name, text, value):
    got = parse_setting("typed", S[name], text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("name, text", [("trials", "-5"), ("trials", "2.5"), ("lr", "abc"),
                                        ("flag", "yes"), ("lps", "a,b"), ("seed", "none")])
def test_bad_text_values(name, text):
    with pytest.raises(SettingError, match=f"setting {name} expects .*, got '{text}'"):
        parse_setting("typed", S[name], text)


def test_unsupported_signatures_are_rejected_at_once():
    def no_default(n: int):
        return {}, {}

    def odd_type(x: list = ()):
        return {}, {}

    with pytest.raises(TypeError, match="setting 'n' needs a default"):
        settings_of(no_default, experiment="e")
    with pytest.raises(TypeError, match="setting 'x' has the unsupported type"):
        settings_of(odd_type, experiment="e")
    with pytest.raises(TypeError, match=r"bounds name unknown setting\(s\) \['lp'\]"):
        settings_of(typed, bounds={"lp": (1, None)}, experiment="e")


def chosen(loss: Literal["logistic", "exp"] = "logistic", device: str | None = "cpu",
           mode: Literal["a", "b"] | None = None, name: str = "x"):
    return {}, {}


def test_string_choices_are_declared_checked_and_named():
    s = settings_of(chosen, experiment="chosen")
    assert s["loss"].choices == ("logistic", "exp") and s["mode"].choices == ("a", "b")
    assert s["device"].choices == DEVICES and s["name"].choices is None
    assert without_choices(s) == ["name"]
    assert s["loss"].describe() == "one of 'logistic', 'exp'"
    assert s["mode"].describe() == "one of 'a', 'b' or None"
    out = check_settings("chosen", s, {"loss": "exp", "device": "cuda:12", "mode": None})
    assert out == {"loss": "exp", "device": "cuda:12", "mode": None, "name": "x"}
    assert check_settings("chosen", s, {"device": torch.device("cpu")})["device"] == "cpu"
    assert parse_setting("chosen", s["loss"], " exp ") == "exp"
    assert parse_setting("chosen", s["mode"], "none") is None
    for key, bad in (("loss", "Logistic"), ("loss", "exp,"), ("mode", "c"), ("device", "gpu"),
                     ("device", "cuda:"), ("device", "cuda:-1")):
        with pytest.raises(SettingError, match=rf"^experiment 'chosen': setting {key} expects "
                                               r"one of '"):
            parse_setting("chosen", s[key], bad)
    with pytest.raises(TypeError, match="a Literal of strings only"):
        settings_of(_numeric_literal, experiment="x")


def _numeric_literal(k: Literal[1, 2] = 1):
    return {}, {}
