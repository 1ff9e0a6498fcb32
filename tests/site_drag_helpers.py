"""The drag explorer of chapter 2 as the browser tests read it (tests/test_site_drag*.py): the
page, opening it until the explorer is ready (the ``page`` fixture), the page's numbers and
state, and attnlib's answer for the state the page reports."""

from __future__ import annotations

import json

import numpy as np
import pytest
from site_helpers import SITE, open_page

PAGE = "book/02_att_svm.html"
EX = "const m = window.attnTokenDrag; const ex = m && Object.values(m.instances)[0];"
WAIT = EX + """
const done = arguments[arguments.length - 1];
(async () => {
  for (let i = 0; i < 100 && !document.querySelector('.attnlib-drag[data-ready=true]'); i++) {
    await new Promise(r => setTimeout(r, 100));
  }
  done(!!document.querySelector('.attnlib-drag[data-ready=true]'));
})();
"""
def open_drag(driver, site, width=1280, height=1000):
    driver.set_window_size(width, height)
    entries = open_page(driver, f"{site}/{PAGE}")
    assert driver.execute_async_script(WAIT), "the drag explorer did not start"
    return entries


@pytest.fixture
def page(browser, served_site):
    """Chapter 2 opened at 1280 x 1000 with its drag explorer started; its console entries."""
    if not (SITE / PAGE).is_file():
        pytest.skip(f"{PAGE} is not built")
    entries = open_drag(browser, served_site)
    yield entries
    browser.set_window_size(1280, 1000)


def drag_data(driver) -> dict:
    """The exported data of the page (attnlib's answers included)."""
    return json.loads(driver.execute_script(
        "return document.querySelector('script[id^=attnlib-drag][id$=-data]').textContent;"))


def numbers(driver) -> dict:
    return driver.execute_script(EX + "return {state: ex.state, res: ex.numbers(), "
                                 "renders: ex.renders};")


def set_state(driver, **patch):
    driver.execute_script(EX + "ex.set({example: arguments[0].example}); ex.set(arguments[0]);",
                          patch)


def compare(js: dict, want: dict, what: str):
    assert js["feasible"] == want["feasible"], what
    assert js["locally_optimal"] == want["locally_optimal"], what
    if want["feasible"]:
        np.testing.assert_allclose(js["p_mm"], want["p_mm"], rtol=1e-6, atol=1e-9, err_msg=what)
        assert js["support"] == want["support"], what
    np.testing.assert_allclose(js["p_end"], want["p_end"], rtol=1e-5, atol=1e-8, err_msg=what)



def attnlib_answer(state, gamma):
    from attnlib.explorers.token_drag import reference

    return reference(state["keys"], gamma, state["alpha"], state["p0"], lr=state["lr"],
                     normalized=state["normalized"], loss=state["loss"],
                     iterations=state["iterations"], eps=state["examples"][
                         state["example"]]["eps"])
