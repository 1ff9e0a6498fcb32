"""Did a run stay finite and keep moving? One verdict for every optimiser and experiment.

:class:`RunStatus` counts the trials (or runs) that turned non-finite and those that stalled
(their update became exactly zero while their gradient had not vanished). :func:`attnlib.train`
(``TrainResult.status``), :class:`attnlib.train.LpMirrorDescent` (``.status``),
:func:`attnlib.realdata.fit` (``out["status"]``) and every experiment result
(``Result.status``) give one, and ``python -m attnlib reproduce --strict`` fails on a status
that is not ``ok``.

Every run reports its status with :func:`report`; :func:`collect` gathers the reports of
everything run inside it (:func:`attnlib.experiments.run` wraps each computation in it), so an
experiment's result carries the status of the training runs behind it without the experiment
passing it on by hand.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

__all__ = ["RunStatus", "report", "collect", "total"]

_MAX_CAUSES = 4


@dataclass(frozen=True)
class RunStatus:
    """How many of ``runs`` trials turned non-finite or stalled, and why.

    Attributes
    ----------
    runs : int
        Trials (or runs) accounted for.
    nonfinite : int
        Trials stopped at a non-finite value (NaN or Inf gradient, or an update beyond the
        dtype's range); they keep their last finite values.
    stalled : int
        Trials whose update became exactly zero while their gradient had not vanished.
    first_nonfinite : int
        The first step at which a trial turned non-finite (-1: none).
    causes : tuple of str
        Why, in words (at most four, the first ones reported).
    """

    runs: int = 0
    nonfinite: int = 0
    stalled: int = 0
    first_nonfinite: int = -1
    causes: tuple = ()

    def __post_init__(self):
        for name in ("runs", "nonfinite", "stalled"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name}: expected a count >= 0, got {getattr(self, name)!r}")
            object.__setattr__(self, name, int(getattr(self, name)))
        object.__setattr__(self, "causes", tuple(str(c) for c in self.causes))

    @property
    def ok(self) -> bool:
        """No trial turned non-finite and none stalled."""
        return self.nonfinite == 0 and self.stalled == 0

    def __add__(self, other: RunStatus) -> RunStatus:
        firsts = [f for f in (self.first_nonfinite, other.first_nonfinite) if f >= 0]
        causes = tuple(dict.fromkeys(self.causes + other.causes))[:_MAX_CAUSES]
        return RunStatus(self.runs + other.runs, self.nonfinite + other.nonfinite,
                         self.stalled + other.stalled, min(firsts) if firsts else -1, causes)

    def __str__(self) -> str:
        if self.ok:
            return (f"ok: {self.runs} run(s), all finite, none stalled" if self.runs else
                    "ok: no run reported a non-finite value or a stall")
        parts = []
        if self.nonfinite:
            parts.append(f"{self.nonfinite} of {self.runs} turned non-finite")
        if self.stalled:
            parts.append(f"{self.stalled} of {self.runs} stalled")
        why = f" ({'; '.join(self.causes)})" if self.causes else ""
        return "not ok: " + ", ".join(parts) + why

    def to_dict(self) -> dict:
        """A JSON-able form (for the result cache); :meth:`from_dict` reads it back."""
        return dict(runs=self.runs, nonfinite=self.nonfinite, stalled=self.stalled,
                    first_nonfinite=self.first_nonfinite, causes=list(self.causes))

    @classmethod
    def from_dict(cls, d: dict) -> RunStatus:
        """The status written by :meth:`to_dict`; ``ValueError`` if it is not one."""
        try:
            return cls(int(d["runs"]), int(d["nonfinite"]), int(d["stalled"]),
                       int(d["first_nonfinite"]), tuple(d["causes"]))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"status: expected a RunStatus dict, got {d!r}") from err


_ACTIVE: contextvars.ContextVar[list | None] = contextvars.ContextVar("attnlib_status",
                                                                      default=None)


def report(status: RunStatus) -> RunStatus:
    """Add ``status`` to every :func:`collect` block that is open; return it."""
    sink = _ACTIVE.get()
    if sink is not None:
        sink.append(status)
    return status


@contextlib.contextmanager
def collect():
    """Gather the statuses reported inside the block: yields a list, filled as runs report.

    A report reaches the innermost open block only: a function that sums up the runs inside
    it (``realdata.fit`` over its optimiser) collects them and reports its own total.
    """
    sink: list = []
    token = _ACTIVE.set(sink)
    try:
        yield sink
    finally:
        _ACTIVE.reset(token)


def total(statuses) -> RunStatus:
    """The sum of ``statuses`` (an empty one: ``RunStatus()``, ok)."""
    out = RunStatus()
    for s in statuses:
        out = out + s
    return out
