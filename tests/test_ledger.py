"""attnlib.experiments.ledger: a chapter's live checks and its folded "What this chapter verified".

The ledger is the memory behind the block: every check that ran is listed, a failed one
raises where it ran and again in the block, and every target row links to its row of the
reproduction report (the anchor the report gives that row).
"""

import re

import pytest
import torch
from experiment_fakes import CALLS, dummy, fakes  # noqa: F401  (fixtures)

import attnlib as al
from attnlib import experiments
from attnlib.experiments import ledger


@pytest.fixture(autouse=True)
def _empty_ledger():
    ledger.reset()
    yield
    ledger.reset()


def test_verify_records_claims_and_raises_on_a_false_one():
    al.verify(torch.tensor(True), "a tensor truth value", value=0.5)
    al.verify(1 < 2, "one is less than two")
    with pytest.raises(AssertionError, match="not verified: two is less than one"):
        al.verify(2 < 1, "two is less than one", value=2)
    checks = ledger.ledger()
    assert [c.ok for c in checks] == [True, True, False]
    assert checks[0].value == "0.5" and checks[1].value == ""
    # the same claim checked again replaces its row (a re-run cell), it is not listed twice
    al.verify(True, "one is less than two")
    assert [c.what for c in ledger.ledger()].count("one is less than two") == 1


@pytest.mark.parametrize("what", ["", "   ", None])
def test_verify_needs_a_claim(what):
    with pytest.raises(ValueError, match="'what'"):
        al.verify(True, what)


def test_verify_rejects_what_is_not_a_truth_value():
    with pytest.raises(ValueError, match="'condition'"):
        al.verify(torch.tensor([True, False]), "an ambiguous tensor")


def test_require_records_each_target_and_verified_lists_them(dummy):  # noqa: F811
    res = experiments.run(dummy)
    res.require("mean")
    al.verify(True, "a claim of the text")
    block = al.verified()
    assert len(block) == 2 and "2 checks" in repr(block)
    page = block._repr_html_()
    anchor = ledger.report_anchor(dummy, "mean")
    assert f'href="reproduction.html#{anchor}"' in page
    assert page.startswith('<details class="attn-verified">') and page.endswith("</details>")
    assert re.fullmatch(r"target-[a-z0-9-]+", anchor), anchor
    # results passed to verified() add all their declared targets
    assert len(al.verified(res)) == 3


def test_verified_raises_on_a_missed_target_and_on_nothing(dummy):  # noqa: F811
    with pytest.raises(ValueError, match="no check"):
        al.verified()
    miss = experiments.run(dummy, steps=20)  # its 'mean' target is missed
    with pytest.raises(AssertionError):
        miss.require("mean")
    with pytest.raises(AssertionError, match=r"not verified: .*\.mean"):
        al.verified()
    ledger.reset()
    with pytest.raises(AssertionError, match=r"\.mean"):  # passed as a result: checked too
        al.verified(miss)


def test_the_block_escapes_text():
    al.verify(True, "a < b & c", value=1)
    assert "a &lt; b &amp; c" in al.verified()._repr_html_()


def test_the_block_counts_guards_apart_and_shows_revised_bounds(fakes):  # noqa: F811
    from experiment_fakes import fake_dummy

    from attnlib.experiments import Target

    why = "in [9.5, 10.5] -> in [9, 11]: the paper's tolerance"
    fakes("guarded", fake_dummy, targets=[
        Target("mean", "mean equals steps", "10", lo=9, hi=11, revisions=(why,)),
        Target("seed", "seed is zero", "0", lo=0, hi=0, evidence="regression guard")])
    block = al.verified(experiments.run("guarded"))
    assert repr(block).endswith("(1 reproduction targets, 1 regression guards or "
                                "identities, 0 claims)")
    page = block._repr_html_()
    assert "bound revised 1×" in page and "in [9.5, 10.5] -&gt; in [9, 11]" in page
    assert "regression guard" in page


def _radii_fake(steps: int = 10, radii: tuple[float, ...] = (1.0, 8.0)):
    return ({"mean": float(steps), **({"at8": 1.0} if 8.0 in radii else {})}, {})


def test_verified_leaves_out_a_conditional_target_its_settings_skip(fakes):  # noqa: F811
    mean = experiments.Target("mean", "mean equals steps", "10", lo=9.5, hi=10.5)
    at8 = experiments.Target("at8", "read at R = 8", "1", lo=1, hi=1,
                             when=lambda s: 8.0 in s["radii"], condition="radii include 8")
    fakes("ledger_radii", _radii_fake, targets=[mean, at8])
    res = experiments.run("ledger_radii", cache=False, radii=(1.0,))
    block = ledger.verified(res)  # no KeyError for the target these radii do not compute
    assert [c.key for c in block.checks] == ["mean"]
    with pytest.raises(ValueError, match="computed only when radii include 8"):
        res.require("at8")
    # a non-conditional target that the experiment forgot to return is a miss, not a crash
    lost = experiments.Target("lost", "never returned", "1", lo=1, hi=1)
    fakes("ledger_lost", _radii_fake, targets=[mean, lost])
    with pytest.raises(AssertionError, match="ledger_lost.lost"):
        ledger.verified(experiments.run("ledger_lost", cache=False))
