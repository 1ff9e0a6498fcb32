"""A chapter opened in JupyterLab (with jupyterlab-myst) reads as on the website.

Starts ``jupyter lab`` from the project's environment on 127.0.0.1 (no browser, a random
token, a copy of the book folder as root), opens each chapter in headless Chromium (Selenium)
and checks what the reader sees: theorems and exercises rendered (MyST directives, not grey
code boxes of raw text), numbered as on the website ("Theorem 5.1", "Exercise 5.1": per chapter
and per kind, as sphinx-proof and sphinx-exercise number them; the chapter's front-matter cell
sets the prefix, see book/*.ipynb cell ``myst-numbering``), and citations as author-year text
("Tarzanagh et al., 2023"), never a raw BibTeX key or a ``{cite}`` role (jupyterlab-myst does
not read references.bib; the chapters cite as ``[Author, year](cite:KEY)`` links, _config.yml).
Skipped without jupyterlab or Chromium (failed with CI=true, like the browser tests).
Screenshots go to ``_build/screenshots/jupyterlab_<chapter>.png`` (at the first theorem).
"""

from __future__ import annotations

import json
import os
import re
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

CHAPTERS = sorted(p.name for p in (ROOT / "book").glob("[01][0-9]_*.ipynb"))
#: the numbered blocks, as the website names them (sphinx-proof's "prf:" kinds, exercises)
BLOCK = re.compile(r"^(`{3,}|:{3,})\{(?:prf:(?P<prf>\w+)|(?P<ex>exercise)(?:-start)?)\}", re.M)
KEYS = re.findall(r"@\w+\s*\{\s*([^,\s]+)\s*,", (ROOT / "references.bib").read_text())


def expected_blocks(chapter: str) -> list[str]:
    """The chapter's numbered blocks as the website numbers them: "Theorem 5.1", "Lemma 5.1",
    "Exercise 5.1", ... (per chapter and per kind, in reading order; proofs are unnumbered)."""
    nb = json.loads((ROOT / "book" / chapter).read_text(encoding="utf-8"))
    n, counts, out = int(chapter[:2]), {}, []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for m in BLOCK.finditer("".join(cell["source"])):
            kind = "Exercise" if m.group("ex") else m.group("prf").capitalize()
            if kind == "Proof":
                continue
            counts[kind] = counts.get(kind, 0) + 1
            out.append(f"{kind} {n}.{counts[kind]}")
    return out


def cited(chapter: str) -> int:
    """How many citations the chapter's Markdown writes (``[Author, year](cite:KEY)``)."""
    nb = json.loads((ROOT / "book" / chapter).read_text(encoding="utf-8"))
    return sum("".join(c["source"]).count("](cite:") for c in nb["cells"]
               if c["cell_type"] == "markdown")


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
const keys = arguments[0];
const text = e => (e.textContent || '').trim();
// the rendered part of each Markdown cell (the cell also holds its hidden source editor)
const cells = Array.from(document.querySelectorAll('.jp-MarkdownCell .myst, '
  + '.jp-MarkdownCell .jp-RenderedMarkdown'));
const raw = cells.filter(e => /```\{|\{prf:|\{exercise-start\}|\{solution-start\}|\{cite/
                              .test(text(e)));
const inCells = sel => Array.from(document.querySelectorAll('.jp-MarkdownCell ' + sel))
  .filter(e => !e.closest('pre, code, .jp-InputArea-editor'));
const theorem = inCells('aside').find(e => /^Theorem\b/.test(text(e)));
const exercise = inCells('aside, div').find(e => e.children.length < 6
                                              && /^Exercise\b/.test(text(e)));
// numbered blocks in reading order: "Theorem 5.1", "Exercise 5.2" (a gated one reads
// "Start of Exercise 5.2"); solutions ("Solution to Exercise 5.1") and proofs are not counted
const blocks = inCells('aside, details')
  .map(e => text(e).match(/^(?:Start of )?([A-Z][a-z]+) (\d+(?:\.\d+)*)/))
  .filter(m => m && m[1] !== 'Proof' && m[1] !== 'Solution').map(m => m[1] + ' ' + m[2]);
// citations: author-year links; never a BibTeX key, a {cite} role or a "Citation Not Found"
const body = cells.map(text).join('\n');
const links = inCells('a').filter(a => (a.getAttribute('href') || '').startsWith('cite:'))
  .map(text);
return {cells: cells.length, raw: raw.length, theorem: theorem ? text(theorem).slice(0, 60) : null,
        exercise: exercise ? text(exercise).slice(0, 60) : null,
        raw_text: raw.map(e => text(e).slice(0, 100)), blocks: blocks, links: links,
        keys: keys.filter(k => body.includes(k)),
        unresolved: inCells('[title="Citation Not Found"], .cite-group').map(text),
        typeset: document.querySelectorAll(
          '.jp-MarkdownCell .katex, .jp-MarkdownCell mjx-container')
          .length};
"""


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_renders_myst_in_jupyterlab(lab, tmp_path, chapter):
    url, token = lab
    want = expected_blocks(chapter)
    n_cited = cited(chapter)
    driver = make_driver(tmp_path / "profile")
    try:
        driver.set_window_size(1366, 900)
        t0 = time.monotonic()
        driver.get(f"{url}/lab/tree/{chapter}?token={token}&reset")
        info = None
        for _ in range(240):  # up to ~2 min: the lab loads, then renders the notebook
            info = driver.execute_script(_FIND, KEYS)
            if len(info["blocks"]) >= len(want) and len(info["links"]) >= n_cited \
                    and info["typeset"]:
                break
            time.sleep(0.5)
        time.sleep(1)  # the notebook-wide pass (numbers, references) after the first render
        info = driver.execute_script(_FIND, KEYS)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        driver.execute_script(
            "const t = Array.from(document.querySelectorAll('.jp-MarkdownCell aside'))"
            ".find(e => /^(Theorem|Definition)\\b/.test((e.textContent||'').trim()));"
            "if (t) t.scrollIntoView({block: 'start'});")
        time.sleep(1)
        driver.save_screenshot(str(SCREENSHOTS / f"jupyterlab_{chapter[:-6]}.png"))
        print(f"jupyterlab {chapter}: {info} after {time.monotonic() - t0:.1f} s")
        assert info and info["cells"] > 0, f"no rendered Markdown cell in JupyterLab: {info}"
        assert info["typeset"] > 0, f"no math typeset in the Markdown cells: {info}"
        assert info["raw"] == 0, f"{info['raw']} Markdown cell(s) show raw MyST: {info}"
        if any(b.startswith("Theorem") for b in want):
            assert info["theorem"], f"no rendered theorem (is jupyterlab-myst enabled?): {info}"
        # numbered as on the website: the first theorem of chapter 5 is "Theorem 5.1"
        assert info["blocks"] == want, \
            f"block numbers differ from the website's:\n lab:  {info['blocks']}\n site: {want}"
        # citations read "Tarzanagh et al., 2023", not tarzanagh2023maxmargin
        assert not info["keys"], f"raw citation keys shown: {info['keys']}"
        assert not info["unresolved"], f"unresolved citations: {info['unresolved']}"
        assert len(info["links"]) == n_cited, (info["links"], n_cited)
        bad = [t for t in info["links"]
               if not re.fullmatch(r"[A-Z][^()]+(, \d{4}| \(\d{4}\))", t)]
        assert not bad, f"citations not in author-year form: {bad}"
    finally:
        driver.quit()
