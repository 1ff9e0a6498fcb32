"""Controls of an explorer: a name, a finite list of values, a default.

A :class:`Control` is what a reader moves (a slider over numbers, toggle buttons or a dropdown
over strings, a checkbox over booleans). Its values are finite and declared, so the static
site can precompute every setting it shows (``static=``). :func:`with_static` applies the
``static={name: values}`` argument every explorer of the book takes.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Control", "format_value", "same_value", "with_static"]

_NUMBER = (int, float, np.integer, np.floating)


def format_value(v) -> str:
    """A control value as shown to the reader: ints as ints, floats with 4 significant digits."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    return str(v)


def same_value(a, b) -> bool:
    """Equal control values: numbers within a relative 1e-9 (``0.1 + 1e-15`` is ``0.1``),
    anything else of the same type and equal (``True`` is not ``1``)."""
    if isinstance(a, _NUMBER) and not isinstance(a, bool) and \
            isinstance(b, _NUMBER) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class Control:
    """One control of an explorer: a name, its finite list of values, a default.

    Parameters
    ----------
    name : str
        Keyword passed to the draw function.
    values : sequence
        The values the control can take (numbers give a slider, strings a dropdown or toggle
        buttons, booleans a checkbox).
    default : optional
        Initial value (default: the first value). Must be one of ``values``.
    label : str, optional
        Text shown beside the control (default: ``name``).
    static : sequence, optional
        The values rendered on the static site (default: all values for a slider control,
        only the default for the others).
    continuous : bool
        Live mode: redraw while a slider is dragged, else on release (the default: a redraw
        takes 0.2-0.3 s, so redraws while dragging would queue up and lag).
    names : dict, optional
        ``{value: text}``: how values are shown to the reader (default :func:`format_value`).
    """

    name: str
    values: tuple
    default: Any = None
    label: str | None = None
    static: tuple | None = None
    continuous: bool = False
    names: dict | None = dataclasses.field(default=None, hash=False)

    def show(self, value) -> str:
        """A value as the reader sees it: its entry in ``names``, else :func:`format_value`."""
        for v, text in (self.names or {}).items():
            if same_value(v, value):
                return str(text)
        return format_value(value)

    def __post_init__(self):
        vals = tuple(self.values)
        if not vals:
            raise ValueError(f"control {self.name!r}: values must be a non-empty sequence")
        for j, v in enumerate(vals):  # resolve() could not tell such values apart
            twin = next((u for u in vals[:j] if same_value(u, v)), None)
            if twin is not None:
                raise ValueError(f"control {self.name!r}: values must be distinct, got {twin!r} "
                                 f"and {v!r}")
        object.__setattr__(self, "values", vals)
        if self.default is None:
            object.__setattr__(self, "default", vals[0])
        self.resolve(self.default, "default")
        if self.static is not None:
            st = tuple(self.static)
            for v in st:
                self.resolve(v, "static")
            object.__setattr__(self, "static", st)

    def resolve(self, value, what="value"):
        """The declared value equal to ``value``; ValueError unless there is one."""
        for v in self.values:
            if same_value(value, v):
                return v
        shown = ", ".join(format_value(v) for v in self.values[:12])
        more = ", ..." if len(self.values) > 12 else ""
        raise ValueError(f"{self.name} ({what}) must be one of [{shown}{more}], got {value!r}")

    def static_values(self, as_slider: bool) -> tuple:
        """The values rendered on the static site: ``static`` if given, else every value when
        the control is played by the slider, else the default only."""
        if self.static is not None:
            return self.static
        return self.values if as_slider else (self.default,)

    def widget(self):
        """The ipywidgets control for this control (imported lazily)."""
        import ipywidgets as w

        desc = self.label or self.name
        style = {"description_width": "initial"}
        if all(isinstance(v, bool) for v in self.values):
            return w.Checkbox(value=bool(self.default), description=desc, style=style,
                              indent=False)
        opts = [(self.show(v), v) for v in self.values]
        if all(isinstance(v, _NUMBER) for v in self.values):
            return w.SelectionSlider(options=opts, value=self.default, description=desc,
                                     continuous_update=self.continuous, style=style,
                                     layout=w.Layout(width="340px"))
        if len(self.values) <= 4 and sum(len(format_value(v)) for v in self.values) <= 40:
            return w.ToggleButtons(options=opts, value=self.default, description=desc,
                                   style={**style, "button_width": "auto"})
        return w.Dropdown(options=opts, value=self.default, description=desc, style=style)


def with_static(controls, static):
    """``controls`` with the static values of ``static`` ({name: values}) applied.

    Raises ValueError naming the unknown controls of ``static``, or (from :class:`Control`)
    a static value that is not among a control's values.
    """
    static = static or {}
    if not isinstance(static, dict):
        raise ValueError(f"static must be a dict {{control: values}}, got {type(static).__name__}")
    unknown = set(static) - {c.name for c in controls}
    if unknown:
        raise ValueError(f"static: unknown control(s) {sorted(unknown)}")
    return [dataclasses.replace(c, static=tuple(static[c.name])) if c.name in static else c
            for c in controls]
