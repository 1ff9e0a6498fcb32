"""What a chapter verified: the ledger of live checks behind the folded block at its end.

Every reproduction target a chapter checks with :meth:`Result.require` and every claim it
checks with :func:`verify` is recorded here, in the kernel that runs the chapter. The last cell
of a chapter calls :func:`verified`, which shows them as one folded block, "What this chapter
verified": one row per check, each target row linking to its row of the reproduction report.
A check that fails raises at once (the build and nbval fail there); :func:`verified` raises
again if any recorded check failed, so a chapter never shows a block with a miss in it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from .registry import format_value, get

__all__ = ["Check", "verify", "verified", "record_target", "ledger", "reset", "report_anchor"]


@dataclass(frozen=True)
class Check:
    """One recorded check: a reproduction target (``experiment``, ``key``) or a claim."""

    what: str
    ok: bool
    value: str = ""
    bound: str = ""
    evidence: str = "live"
    experiment: str = ""
    key: str = ""
    revisions: tuple[str, ...] = ()


_LEDGER: list[Check] = []


def ledger() -> list[Check]:
    """The checks recorded in this kernel so far (a copy), in the order they ran."""
    return list(_LEDGER)


def reset() -> None:
    """Forget every recorded check (a chapter's first cell need not call it)."""
    _LEDGER.clear()


def report_anchor(experiment: str, key: str) -> str:
    """The id of a target's row in the reproduction report (``reproduction.html#...``)."""
    return f"target-{experiment}-{key}".replace("_", "-").lower()


def record_target(experiment: str, key: str, value, ok: bool) -> Check:
    """Record one checked reproduction target (called by :meth:`Result.require`)."""
    tg = next(t for t in get(experiment).targets if t.key == key)
    check = Check(what=tg.what, ok=bool(ok), value=format_value(value), bound=tg.bound(),
                  evidence=tg.evidence, experiment=experiment, key=key,
                  revisions=tuple(tg.revisions))
    _LEDGER[:] = [c for c in _LEDGER if (c.experiment, c.key) != (experiment, key)]
    _LEDGER.append(check)
    return check


def verify(condition, what: str, *, value=None, evidence: str = "live") -> None:
    """Check a claim of the chapter live: record it, and raise if it does not hold.

    ``al.verify(err.max() < 0.1, "the two computations of the minimiser agree")`` is an
    ``assert`` that the chapter's "What this chapter verified" block lists.

    Parameters
    ----------
    condition : bool-like
        The claim (a Python bool, or a one-element tensor / array).
    what : str
        The claim in the book's words (one line).
    value : optional
        The number behind the claim, shown in the block.
    evidence : str
        ``"live"`` (computed now, it could fail) or ``"by construction"`` (an identity).

    Raises
    ------
    ValueError
        ``what`` empty, or ``condition`` not a truth value.
    AssertionError
        The claim does not hold (the message is ``what``).
    """
    if not isinstance(what, str) or not what.strip():
        raise ValueError("verify: 'what' must say what is checked, in one line")
    try:
        ok = bool(condition)
    except (TypeError, RuntimeError, ValueError) as err:
        raise ValueError(f"verify: 'condition' must be a truth value, got {condition!r}") \
            from err
    check = Check(what=what.strip(), ok=ok,
                  value="" if value is None else format_value(value), evidence=evidence)
    _LEDGER[:] = [c for c in _LEDGER if c.experiment or c.what != check.what]
    _LEDGER.append(check)
    if not ok:
        raise AssertionError(f"not verified: {what}"
                             + ("" if value is None else f" (value {format_value(value)})"))


class Verified:
    """The folded block "What this chapter verified" (HTML in a notebook and on the site)."""

    def __init__(self, checks: list[Check], report: str):
        self.checks = checks
        self.report = report

    def __len__(self) -> int:
        return len(self.checks)

    def _counts(self) -> str:
        """``"n reproduction targets[, k regression guards or identities], m claims"``: a
        target counts as a reproduction only when its evidence is live."""
        n_t = sum(bool(c.experiment) for c in self.checks)
        n_r = sum(bool(c.experiment) and c.evidence == "live" for c in self.checks)
        apart = f", {n_t - n_r} regression guards or identities" if n_t > n_r else ""
        return f"{n_r} reproduction targets{apart}, {len(self.checks) - n_t} claims"

    def __repr__(self) -> str:
        return (f"What this chapter verified: {len(self.checks)} checks, all passed "
                f"({self._counts()})")

    def _repr_html_(self) -> str:
        rows = []
        for c in self.checks:
            what = html.escape(c.what)
            if c.experiment:
                href = f"{self.report}#{report_anchor(c.experiment, c.key)}"
                what = f'<a href="{href}">{what}</a>'
                detail = f"{html.escape(c.value)} (target {html.escape(c.bound)}"
                if c.revisions:  # the bound changed after results were seen: say so
                    detail += (f'; <span title="{html.escape("; ".join(c.revisions))}">'
                               f"bound revised {len(c.revisions)}×</span>")
                detail += ")"
            else:
                detail = html.escape(c.value)
            rows.append(f"<tr><td>✓</td><td>{what}</td><td>{detail}</td>"
                        f"<td>{html.escape(c.evidence)}</td></tr>")
        return (
            '<details class="attn-verified"><summary>What this chapter verified: '
            f"{len(self.checks)} checks, all passed ({html.escape(self._counts())} of the "
            "text)</summary>\n"
            "<p>Each check ran when this page was built; a failing one stops the build. "
            f'Target rows link to the <a href="{self.report}">reproduction report</a>.</p>\n'
            '<div class="attn-scroll"><table><thead><tr><th></th><th>checked</th>'
            "<th>value</th><th>evidence</th></tr></thead><tbody>\n"
            + "\n".join(rows) + "\n</tbody></table></div></details>")


def verified(*results, report: str = "reproduction.html") -> Verified:
    """The block "What this chapter verified", the last cell of a chapter.

    Lists every check recorded by :meth:`Result.require` and :func:`verify` in this kernel.
    Every declared target of each result in ``results`` is checked and listed as well (a
    chapter passes the results whose targets it reports in full); a conditional target that
    the result's settings do not compute is left out.

    Raises
    ------
    ValueError
        Nothing was checked (a chapter without checks has nothing to show here).
    AssertionError
        A recorded check, or a target of ``results``, that does not hold.
    """
    for res in results:
        for tg in res.experiment.targets:
            if not tg.applies(res.params):  # a conditional target these settings skip
                continue
            value = res.numbers.get(tg.key, float("nan"))  # not returned: a miss
            record_target(res.name, tg.key, value, tg.ok(value))
    checks = ledger()
    if not checks:
        raise ValueError("verified: no check was recorded in this kernel (run the chapter "
                         "from the top)")
    failed = [c for c in checks if not c.ok]
    if failed:
        raise AssertionError("not verified: " + "; ".join(
            f"{c.experiment + '.' + c.key if c.experiment else c.what}" for c in failed))
    return Verified(checks, report)
