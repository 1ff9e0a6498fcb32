"""Typed experiment settings: read from the function's signature, checked before any computation.

Every parameter of an experiment function is annotated with its type and has a default::

    @experiment("name", ..., bounds={"steps": (0, None)})
    def name(trials: int = 100, lr: float = 0.1, lps: tuple[float, ...] = (1.75, 2.0),
             device: str | None = None): ...

Supported types: ``int``, ``float``, ``bool``, ``str``, ``Literal["a", "b"]`` (a string with
declared choices), ``tuple[X, ...]``, ``tuple[X, Y]``, unions (``str | None``,
``int | tuple[int, ...]``) and ``tuple`` of any items. Values are
converted to the annotated type (numpy and torch scalars, lists and 1-d arrays accepted) and
checked against the bounds, element by element for tuples:

- declared ``bounds={"name": (lo, hi)}`` (``None``: unbounded); ``lo <= x <= hi``, except that a
  lower bound of a learning rate (a name starting with ``lr``) or of an ℓp exponent (``lp``,
  ``lps``, ``*_lp``) is strict;
- otherwise the bounds of :data:`DECLARED` (``{experiment: {setting: (lo, hi, lo_open)}}``),
  for settings whose range only the experiment knows (a score, a fraction, a scale);
- otherwise the default policy: seeds (``seed``, ``*_seed``) are integers ``>= 0``, every other
  integer is a count ``>= 1``; learning rates (``lr*``) are ``> 0``; ℓp exponents are ``> 1``;
  tolerances (``eps``, ``eps_*``, ``tol``, ``rtol``, ``atol``) and radii (``radii``,
  ``radius``, ``r0``, ``r1``) are ``>= 0``; scales (``*_scale``) are ``> 0``; ℓp exponents
  are at most :data:`attnlib.svm.config.MAX_LP` (the range the ℓp-SVMs accept);
  every float is finite.

A string setting declares its allowed values (:attr:`Setting.choices`): a ``Literal`` annotation
(``loss: Literal["logistic", "exp"] = "logistic"``), or, for ``device``, :data:`DEVICES`
(``"cuda:<n>"`` standing for ``cuda:0``, ``cuda:1``, ...). A value outside them is refused
with the choices named; :func:`without_choices` lists the string settings that declare none
(the tests keep it empty).

Every numeric setting of a registered experiment has a bound (:func:`unbounded` lists those
that have none; the tests keep it empty).

A bad value raises :class:`SettingError` (a ``ValueError``) with one line naming the
experiment, the setting, what was expected and what was given. See the chapter "Reproduction
report".
"""

from __future__ import annotations

import ast
import inspect
import math
import types
import typing
from dataclasses import dataclass

from attnlib._validate import scalar

__all__ = ["Setting", "SettingError", "settings_of", "check_settings", "parse_setting",
           "DECLARED", "DEVICES", "unbounded", "without_choices"]

_ANY = object()  # an unannotated parameter: passed through unchecked
MAX_LP = 4.0  # attnlib.svm.config.MAX_LP (importing attnlib.svm here would load cvxpy)
#: The values of a ``device`` setting (``None``: the default device): ``"cuda:<n>"`` is
#: ``cuda:0``, ``cuda:1``, ... (whether it is available is checked when the run starts).
DEVICES = ("cpu", "cuda", "cuda:<n>", "mps")
_TOLERANCES = frozenset({"eps", "tol", "rtol", "atol"})
_RADII = frozenset({"radii", "radius", "r0", "r1"})

# Bounds that only the experiment knows: {experiment: {setting: (lo, hi, lo_open)}}.
# ``bounds=`` given to ``@experiment`` wins over these.
DECLARED: dict[str, dict[str, tuple[float | None, float | None, bool]]] = {
    "mm_e1_basins": {"sweep_range": (-10.0, 10.0, False)},  # offsets c of p(0) = (0, c)
    "mm_e4_loss": {"C": (0.0, 1e4, True)},  # the scale of the data, > 0
    "mm_gd_theorem": {"step_factor": (0.0, 1.0, True)},  # eta = c / L_bound, 0 < c <= 1
    "mm_selection": {"score": (-5.0, 5.0, False)},  # gamma_3 beside the scores 1 and 0.9 (the
    # explorer of chapter 3 goes to 1.2, above both)
    "mm_local_cone": {"mus": (0.0, 1.0, True)},  # cones 1 - cos <= mu
    "mm_local_regpath": {"mu": (0.0, 1.0, True)},
    "mm_e4_selection": {"offset": (-10.0, 10.0, False)},  # p(0) = (0, +-offset)
    "mm_joint_regpath": {"ratio": (0.0, 1e3, True)},  # r = ratio * R
    # f = v^T h - lam ||h||^2; for lam in (0.1, 0.7] the best attention keeps exactly two
    # tokens (x_2 enters above 0.1, x_3 above 0.7) and GD's drops one by step 135 (all four
    # are selected before, and the SVM equivalence needs a masked token)
    "tf_lambda_head": {"lam": (0.1, 0.7, True), "steps": (200, None, False)},
    "tf_rank_cap": {"T": (2, None, False)},  # a token besides the selected one: a margin
    "tf_nonlinear_path": {"tilt": (0.0, 1.0, False), "scale": (0.0, 100.0, True),
                          "d": (3, None, False)},  # the folded value matrix is d x (d - 2)
    "tf_local_convergence": {"steps": (200, None, False)},  # read at steps 100 and 200
    "tf_global_equal_scores": {"gap": (0.0, 10.0, True)},  # a score gap > 0
    # margin: |mean rating| kept, on the raters' -4..4 scale; at 3, 498 movie sentences and 155
    # Amazon ones are left (at 3.5 only 73 and 25: splits of a few sentences)
    "md_reviews": {"dropout": (0.0, 0.9, False), "margin": (0.0, 3.0, False),
                   "stop_acc": (0.0, 1.0, True),
                   "max_len": (5, None, False)},  # [CLS] + the 4 words of a probe sentence
    "md_dual": {"demo_step": (0.0, 1.0, True), "demo_theta0": (0.0, 1.0, True)},
    # the sizes the planted-word task checks itself (n >= 6, T >= 3, dim >= 2)
    "md_text": {"n": (6, None, False), "T": (3, None, False), "dim": (2, None, False)},
    "md_text_svm": {"n": (6, None, False), "T": (3, None, False), "dim": (2, None, False)},
}


class SettingError(ValueError):
    """A setting of an experiment that is unknown, of the wrong type or out of bounds."""


@dataclass(frozen=True)
class Setting:
    """One typed setting of an experiment: its name, type, default and bounds."""

    name: str
    type: object  # a type annotation, or _ANY
    default: object
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False

    @property
    def annotated(self) -> bool:
        return self.type is not _ANY

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The allowed strings of a string setting (``None``: it takes no string, or declares
        no choices): a ``Literal``'s values, or :data:`DEVICES` for ``device``."""
        if not self.annotated:
            return None
        lits = _literals(self.type)
        if lits:
            return lits
        if self.name == "device" and _accepts(self.type, str):
            return DEVICES
        return None

    def allows(self, text: str) -> bool:
        """``text`` is one of :attr:`choices` (``"cuda:<n>"`` matching ``cuda:0``, ...)."""
        for c in self.choices or ():
            if text == c or (c.endswith(":<n>") and text.startswith(c[:-3])
                             and text[len(c) - 3:].isdigit()):
                return True
        return False

    def describe(self) -> str:
        """What the setting expects, in words: ``"an int >= 1"``, ``"a tuple of floats"``,
        ``"one of 'cpu', 'cuda', 'cuda:<n>', 'mps' or None"``."""
        return _describe(self.type, self._bound(), self.choices)

    def _bound(self) -> str:
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {self.lo:g}")
        if self.hi is not None:
            parts.append(f"<= {self.hi:g}")
        return " and ".join(parts)

    def convert(self, value):
        """``value`` converted to the setting's type and checked (raises ``_Bad`` otherwise)."""
        if not self.annotated:
            return value
        return _convert(self.type, value, self)


class _Bad(Exception):
    """Internal: the value does not fit the type (caught and turned into a SettingError)."""


def _is_exponent(name: str) -> bool:
    """``lp``, ``lps`` and ``*_lp(s)``: an ℓp exponent, > 1 (the mirror map needs p - 1 > 0)."""
    return name in ("lp", "lps") or name.endswith(("_lp", "_lps"))


def _is_scale(name: str) -> bool:
    return name.endswith("_scale")


def _open_below(name: str) -> bool:
    return name.startswith("lr") or _is_exponent(name) or _is_scale(name)


def _default_bounds(name: str, kind) -> tuple[float | None, float | None]:
    if kind is int:
        return (0, None) if name == "seed" or name.endswith("_seed") else (1, None)
    if kind is float:
        if name.startswith("lr"):
            return (0, None)
        if _is_exponent(name):
            return (1, MAX_LP)  # the ℓp-SVMs' range (attnlib.svm.config.MAX_LP)
        if name in _TOLERANCES or name.startswith("eps_") or name in _RADII:
            return (0, None)
        if _is_scale(name):
            return (0, None)
    return (None, None)


def _base_kind(tp):
    """``int`` or ``float`` if every number in ``tp`` is one (for the default bounds)."""
    if tp in (int, float):
        return tp
    args = [a for a in typing.get_args(tp) if a is not Ellipsis and a is not type(None)]
    kinds = {_base_kind(a) for a in args}
    return kinds.pop() if len(kinds) == 1 else None


def settings_of(func, bounds=None, experiment: str = "?") -> dict[str, Setting]:
    """The typed settings of ``func``, from its signature and annotations.

    Raises
    ------
    TypeError
        A parameter without a default, an annotation that is not supported, or ``bounds`` naming
        a parameter the function does not have.
    """
    bounds = dict(bounds or {})
    try:
        hints = typing.get_type_hints(func)
    except Exception as err:  # noqa: BLE001 - an unreadable annotation is the author's error
        raise TypeError(f"experiment {experiment!r}: cannot read its annotations ({err})") from err
    out = {}
    for name, p in inspect.signature(func).parameters.items():
        if p.default is inspect.Parameter.empty:
            raise TypeError(f"experiment {experiment!r}: setting {name!r} needs a default value")
        tp = hints.get(name, _ANY)
        if tp is not _ANY:
            _check_supported(tp, experiment, name)
        declared = DECLARED.get(experiment, {})
        if name in bounds:
            lo, hi = bounds.pop(name)
            lo_open = lo is not None and _open_below(name)
        elif name in declared:
            lo, hi, lo_open = declared[name]
        else:
            lo, hi = _default_bounds(name, _base_kind(tp) if tp is not _ANY else None)
            lo_open = lo is not None and _open_below(name)
        out[name] = Setting(name, tp, p.default, lo=lo, hi=hi, lo_open=lo_open)
    if bounds:
        raise TypeError(f"experiment {experiment!r}: bounds name unknown setting(s) "
                        f"{sorted(bounds)}; its settings are {sorted(out)}")
    return out


def _check_supported(tp, experiment, name):
    if tp in (int, float, bool, str, type(None), tuple):
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        if args and all(isinstance(a, str) for a in args):
            return
        raise TypeError(f"experiment {experiment!r}: setting {name!r}: a Literal of strings "
                        f"only, got {tp!r}")
    if origin in (typing.Union, types.UnionType) or (origin is tuple and args):
        for a in args:
            if a is not Ellipsis:
                _check_supported(a, experiment, name)
        return
    raise TypeError(f"experiment {experiment!r}: setting {name!r} has the unsupported type "
                    f"{tp!r}; use int, float, bool, str, Literal[...], tuple[...] or a union "
                    "of them")


_NAMES = {int: "an int", float: "a finite float", bool: "a bool (True/False)", str: "a string",
          type(None): "None", tuple: "a tuple"}
_PLURAL = {int: "ints", float: "finite floats", bool: "bools", str: "strings"}


def _describe(tp, bound="", choices=None) -> str:
    b = f" {bound}" if bound else ""
    if tp is _ANY:
        return "any value"
    if (tp is str or typing.get_origin(tp) is typing.Literal) and choices:
        return "one of " + ", ".join(map(repr, choices))
    if tp in _NAMES:
        return _NAMES[tp] + (b if tp in (int, float) else "")
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a, bound, choices) for a in args)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        inner = _PLURAL.get(args[0]) or _describe(args[0])
        return f"a non-empty tuple of {inner}{b}"
    if origin is tuple:
        return "a tuple (" + ", ".join(_describe(a) for a in args) + f"){b}"
    return str(tp)


def _in_bounds(x, s: Setting | None) -> bool:
    if s is None:
        return True
    if s.lo is not None and not (x > s.lo if s.lo_open else x >= s.lo):
        return False
    return s.hi is None or x <= s.hi


def _convert(tp, value, s: Setting | None):
    """``value`` as type ``tp`` within the bounds of ``s``; raises ``_Bad`` otherwise."""
    if tp is type(None):
        if value is None:
            return None
        raise _Bad
    if tp is bool:
        if isinstance(value, bool) or type(value).__name__ == "bool_":
            return bool(value)
        if hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0 and \
                str(value.dtype) in ("bool", "torch.bool"):
            return bool(value.item())
        raise _Bad
    if tp is int or tp is float:
        v = scalar(value)
        if v is None or not math.isfinite(v):
            raise _Bad
        if tp is int:
            if not float(v).is_integer():
                raise _Bad
            v = int(v)
        else:
            v = float(v)
        if not _in_bounds(v, s):
            raise _Bad
        return v
    if tp is str or typing.get_origin(tp) is typing.Literal:
        if type(value).__name__ == "device" and type(value).__module__ == "torch":
            value = str(value)
        if not isinstance(value, str):
            raise _Bad
        if s is not None and s.choices and not s.allows(value):
            raise _Bad
        if typing.get_origin(tp) is typing.Literal and value not in typing.get_args(tp):
            raise _Bad
        return value
    if tp is tuple:
        return _as_tuple(value, lambda x: x)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        for a in args:
            try:
                return _convert(a, value, s)
            except _Bad:
                continue
        raise _Bad
    if origin is tuple:
        items = _as_tuple(value, None)
        if len(args) == 2 and args[1] is Ellipsis:
            if not items:
                raise _Bad
            return tuple(_convert(args[0], x, s) for x in items)
        if len(items) != len(args):
            raise _Bad
        return tuple(_convert(a, x, s) for a, x in zip(args, items))
    raise _Bad


def _as_tuple(value, untyped):
    """Lists, tuples, 1-d numpy arrays and tensors as a tuple (plain ``tuple``: nested too)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if hasattr(value, "tolist") and getattr(value, "ndim", 0) >= 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise _Bad
    if untyped is not None:  # plain ``tuple``: lists inside become tuples too
        return tuple(_as_tuple(x, untyped) if isinstance(x, (list, tuple)) else x for x in value)
    return tuple(value)


def _error(experiment, s: Setting, value) -> SettingError:
    return SettingError(f"experiment {experiment!r}: setting {s.name} expects "
                        f"{s.describe()}, got {value!r}")


def check_settings(experiment: str, settings: dict[str, Setting], given: dict) -> dict:
    """Every setting, from ``given`` or its default, converted and checked.

    Raises
    ------
    SettingError
        An unknown setting (the message lists the known ones), or a value of the wrong type or
        out of bounds (the message names the setting, what it expects and what was given).
    """
    unknown = sorted(set(given) - set(settings))
    if unknown:
        raise SettingError(f"experiment {experiment!r} has no setting(s) "
                           f"{', '.join(map(repr, unknown))}; its settings are: "
                           f"{', '.join(settings) or '(none)'}")
    out = {}
    for name, s in settings.items():
        value = given.get(name, s.default)
        try:
            out[name] = s.convert(value)
        except _Bad:
            raise _error(experiment, s, value) from None
    return out


def parse_setting(experiment: str, s: Setting, text: str):
    """A setting given as text (``--set KEY=VALUE``), converted and checked.

    Strings are taken as they are (``loss=exp``); ``None``/``none`` is ``None`` where allowed;
    ``true``/``false`` are booleans; tuples may be written ``1,2,3`` or ``(1, 2, 3)``.
    """
    raw = text.strip()
    if raw.lower() == "none" and (not s.annotated or _accepts(s.type, type(None))):
        value = None
    elif s.annotated and _accepts(s.type, str):
        value = raw
    elif raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            value = raw  # a plain string; checked against the type below
    try:
        return s.convert(value)
    except _Bad:
        raise _error(experiment, s, raw) from None


def _accepts(tp, kind) -> bool:
    if tp is kind:
        return True
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return kind is str
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(a, kind) for a in typing.get_args(tp))
    return False


def _literals(tp) -> tuple[str, ...]:
    """The strings of the ``Literal`` in ``tp`` (itself or a member of a union), or ()."""
    if typing.get_origin(tp) is typing.Literal:
        return tuple(typing.get_args(tp))
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return tuple(x for a in typing.get_args(tp) for x in _literals(a))
    return ()


def without_choices(settings: dict[str, Setting]) -> list[str]:
    """The settings that take a string but declare no allowed values."""
    return [s.name for s in settings.values()
            if s.annotated and _accepts(s.type, str) and not s.choices]


def unbounded(settings: dict[str, Setting]) -> list[str]:
    """The numeric settings (``int``, ``float`` or tuples of them) without any bound."""
    return [s.name for s in settings.values()
            if s.annotated and _base_kind(s.type) in (int, float)
            and s.lo is None and s.hi is None]
