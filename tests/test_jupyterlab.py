"""A chapter opened in JupyterLab (with jupyterlab-myst) shows rendered theorems and exercises.

Starts ``jupyter lab`` from the project's environment on 127.0.0.1 (no browser, a random
token, a copy of the book folder as root), opens a chapter in headless Chromium (Selenium) and
waits for a rendered ``{prf:theorem}`` and an exercise: MyST directives, not grey code boxes of
raw text.  Skipped without jupyterlab or Chromium (failed with CI=true, like the browser tests).
A screenshot goes to ``_build/screenshots/jupyterlab_<chapter>.png``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from site_helpers import CHROMEDRIVER, CHROMIUM, ROOT, SCREENSHOTS, make_driver

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHAPTER = "05_w_vs_kq.ipynb"


def _skip_or_fail(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A running JupyterLab on the book folder: its base URL with the token."""
    jupyter = Path(sys.executable).with_name("jupyter")
    if not jupyter.exists():
        _skip_or_fail("jupyter lab is not installed: run `make setup`")
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).is_file()]
    if missing:
        _skip_or_fail(f"headless Chromium not installed ({', '.join(missing)} missing)")
    port, token = _free_port(), secrets.token_hex(16)
    home = tmp_path_factory.mktemp("jupyter-home")
    # a copy: JupyterLab writes what it opens (autosave, kernel metadata, checkpoints)
    book = tmp_path_factory.mktemp("book")
    # every cell rendered at once (no windowing), no news pop-up
    for plugin, value in (("notebook-extension/tracker", '{"windowingMode": "none"}'),
                          ("apputils-extension/notification", '{"fetchNews": "false"}')):
        f = home / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(value)
    for f in (ROOT / "book").iterdir():
        if f.is_file():
            shutil.copy2(f, book / f.name)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTERLAB_WORKSPACES_DIR":
           str(home / "workspaces"), "JUPYTERLAB_SETTINGS_DIR": str(home / "settings")}
    proc = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False",
         f"--ServerApp.root_dir={book}", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly", "--allow-root"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited: {proc.stderr.read()[-2000:]}")
            time.sleep(0.5)
    else:
        proc.terminate()
        pytest.fail("jupyter lab did not start within 60 s")
    yield url, token
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


_FIND = r"""
const text = e => (e.textContent || '').trim();
// the rendered part of each Markdown cell (the cell also holds its hidden source editor)
const cells = Array.from(document.querySelectorAll('.jp-MarkdownCell .myst, '
  + '.jp-MarkdownCell .jp-RenderedMarkdown'));
const raw = cells.filter(e => /```\{|\{prf:|\{exercise-start\}|\{solution-start\}/.test(text(e)));
const inCells = sel => Array.from(document.querySelectorAll('.jp-MarkdownCell ' + sel))
  .filter(e => !e.closest('pre, code, .jp-InputArea-editor'));
const theorem = inCells('aside').find(e => /^Theorem\b/.test(text(e)));
const exercise = inCells('aside, div').find(e => e.children.length < 6
                                              && /^Exercise\b/.test(text(e)));
return {cells: cells.length, raw: raw.length, theorem: theorem ? text(theorem).slice(0, 60) : null,
        exercise: exercise ? text(exercise).slice(0, 60) : null,
        raw_text: raw.map(e => text(e).slice(0, 100)),
        typeset: document.querySelectorAll(
          '.jp-MarkdownCell .katex, .jp-MarkdownCell mjx-container')
          .length};
"""


def test_chapter_renders_myst_in_jupyterlab(lab, tmp_path):
    url, token = lab
    driver = make_driver(tmp_path / "profile")
    try:
        driver.set_window_size(1366, 900)
        t0 = time.monotonic()
        driver.get(f"{url}/lab/tree/{CHAPTER}?token={token}&reset")
        info = None
        for _ in range(240):  # up to ~2 min: the lab loads, then renders the notebook
            info = driver.execute_script(_FIND)
            if info["theorem"] and info["exercise"]:
                break
            time.sleep(0.5)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        driver.execute_script(
            "const t = Array.from(document.querySelectorAll('.jp-MarkdownCell aside'))"
            ".find(e => /^Theorem\\b/.test((e.textContent||'').trim()));"
            "if (t) t.scrollIntoView({block: 'start'});")
        time.sleep(1)
        driver.save_screenshot(str(SCREENSHOTS / f"jupyterlab_{CHAPTER[:-6]}.png"))
        print(f"jupyterlab: {info} after {time.monotonic() - t0:.1f} s")
        assert info and info["cells"] > 0, f"no rendered Markdown cell in JupyterLab: {info}"
        assert info["theorem"], f"no rendered theorem (is jupyterlab-myst enabled?): {info}"
        assert info["exercise"], f"no rendered exercise: {info}"
        assert info["typeset"] > 0, f"no math typeset in the Markdown cells: {info}"
        assert info["raw"] == 0, f"{info['raw']} Markdown cell(s) show raw MyST: {info}"
    finally:
        driver.quit()
