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
One JupyterLab server and one page of it (in the session's Chromium) serve every chapter: each
chapter is opened in that page (``docmanager:open``), read, then closed and its kernel shut
down; every wait is a condition polled inside the browser, not a fixed sleep.
Screenshots go to ``_build/screenshots/jupyterlab_<chapter>.png`` (at the first theorem).

It also fails on what a reader of the book in JupyterLab must never meet:

- an extension that ``jupyter labextension list`` marks incompatible (jupyterlab-myst and
  JupyterLab must share ``@jupyter/ydoc``: requirements.txt pins the pair);
- an error in the browser's console while a chapter opens and renders (e.g. jupyterlab-myst's
  "Cross reference target was not found" for a label it cannot resolve);
- a chapter marked modified as soon as it opens, before the reader typed anything (the
  kernel's name, its display name or the language info rewritten on load);
- "Error displaying widget" when an explorer first runs in a fresh kernel.
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
from site_helpers import CHROMEDRIVER, CHROMIUM, ROOT, SCREENSHOTS

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


def labextension_problems() -> list[str]:
    """What ``jupyter labextension list`` reports as wrong (an incompatible extension, a
    conflict of shared packages), as lines; empty when every extension is OK."""
    jupyter = Path(sys.executable).with_name("jupyter")
    out = subprocess.run([str(jupyter), "labextension", "list"], capture_output=True, text=True,
                         timeout=300)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    bad = [ln.strip() for ln in text.splitlines()
           if re.search(r"not compatible|Conflicting Dependencies|\bX$|disabled", ln.strip())]
    if out.returncode != 0:
        bad.append(f"exit status {out.returncode}")
    return bad


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
         "--LabApp.extension_manager=readonly", "--LabApp.expose_app_in_browser=True",
         "--allow-root"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited: {proc.stderr.read()[-2000:]}")
            time.sleep(0.1)
    else:
        proc.terminate()
        pytest.fail("jupyter lab did not start within 60 s")
    yield url, token, book
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


#: the tab of a notebook with unsaved changes carries jp-mod-dirty (its close icon a dot)
_DIRTY = """
return Array.from(document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty, '
  + '.jp-DirtyIcon, .lm-TabBar-tab.jp-mod-current.jp-mod-dirty'))
  .map(e => (e.textContent || e.className).trim()).filter(t => t);
"""


def site_only_labels() -> set[str]:
    """Every label the book defines, which the website resolves but jupyterlab-myst 2.7 often
    cannot: exercise labels (the gated ``{exercise-start}`` of sphinx-exercise, referred to by
    ``{solution-start} LABEL``), figure names (myst-nb's code-cell metadata
    ``mystnb.figure.name``, referred to by ``{numref}``) and the labels of other chapters
    (JupyterLab renders one notebook at a time). The site's tests check that every reference
    resolves there; a label the book does not define still fails here."""
    labels = set()
    for nb_path in (ROOT / "book").glob("*.ipynb"):
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                labels |= set(re.findall(r"^:label:\s*(\S+)", src, re.M))
                labels |= set(re.findall(r"^\(([^)\s]+)\)=\s*$", src, re.M))
            name = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name")
            if name:
                labels.add(name)
    return labels


_UNRESOLVED = re.compile(r"reference target was not found:?\s*\W*([\w.:-]+)")


def console_problems(entries: list[dict]) -> list[str]:
    """The console's errors (SEVERE) and every unresolved cross-reference message (which
    jupyterlab-myst logs at any level, several targets to a message), except a message whose
    every target is one of :func:`site_only_labels` (a known limit of jupyterlab-myst, not a
    broken label: a misspelt label still fails)."""
    known = site_only_labels()
    out = []
    for e in entries:
        msg = e["message"]
        targets = [t.rstrip(".:") for t in _UNRESOLVED.findall(msg.replace("\\n", "\n"))]
        if targets and all(t in known for t in targets):
            continue
        if e.get("level") == "SEVERE" or targets:
            out.append(msg[:300])
    return out


def test_console_problems_accepts_only_the_books_site_labels():
    """The allowance is narrow: the book's exercise and figure labels, nothing else."""
    known = site_only_labels()
    assert {"ch2-ex-margin", "fig-ch2-circle", "ch1-cor-diverge"} <= known
    ok = {"level": "WARNING", "message": "Cross reference target was not found: ch2-ex-margin"}
    typo = {"level": "WARNING", "message": "Cross reference target was not found: fig-ch2-circle"
                                           "\\nCross reference target was not found: ch2-ex-margn"}
    err = {"level": "SEVERE", "message": "TypeError: x is undefined"}
    assert console_problems([ok]) == []
    assert console_problems([typo, err]) == [typo["message"], err["message"]]


def test_labextensions_are_compatible():
    """No extension marked incompatible (jupyterlab-myst shares JupyterLab's @jupyter/ydoc)."""
    if not Path(sys.executable).with_name("jupyter").exists():
        _skip_or_fail("jupyter lab is not installed: run `make setup`")
    bad = labextension_problems()
    assert not bad, "jupyter labextension list: " + "; ".join(bad)


#: the first explorer a reader runs (chapter 1), in a fresh kernel
_FIRST_RUN = {"cells": [
    {"cell_type": "code", "id": "imp", "metadata": {}, "outputs": [], "execution_count": None,
     "source": "import attnlib as al"},
    {"cell_type": "code", "id": "exp", "metadata": {}, "outputs": [], "execution_count": None,
     "source": "al.explorers.softmax_explorer()"}],
    "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                "name": "python3"}},
    "nbformat": 4, "nbformat_minor": 5}


def test_first_explorer_run_shows_the_widget(lab, lab_page):
    """Run chapter 1's explorer cell in a fresh kernel: its controls and figure show, never
    "Error displaying widget: model not found", and the console stays clean."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    url, token, book = lab
    driver, app_console = lab_page
    (book / "first_run.ipynb").write_text(json.dumps(_FIRST_RUN))
    driver.get_log("browser")
    assert driver.execute_async_script(_OPEN, "first_run.ipynb", 120), "the kernel did not start"
    assert driver.execute_async_script(_UNTIL, "document.querySelectorAll("
                                       "'.jp-Notebook .jp-Cell').length >= 2", 30)
    cells = driver.find_elements("css selector", ".jp-Notebook .jp-Cell")
    cells[0].find_element("css selector", ".jp-InputArea-editor").click()
    for k in range(2):  # Shift+Enter: run the cell, go to the next
        ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(
            Keys.SHIFT).perform()
        if k == 0:  # the next cell is active before it is run
            driver.execute_async_script(_UNTIL, "document.querySelectorAll("
                                        "'.jp-Notebook .jp-Cell')[1].classList"
                                        ".contains('jp-mod-active')", 10)
    # the first figure of the explorer: up to 2 min on a slow CPU
    seen = driver.execute_async_script(_UNTIL, """(() => {
        const out = Array.from(document.querySelectorAll('.jp-OutputArea-output'));
        const text = out.map(e => e.textContent).join(' ');
        const seen = {error: /Error displaying widget|model not found/.test(text),
                      widgets: document.querySelectorAll(
                        '.jp-OutputArea-output .jupyter-widgets, '
                        + '.jp-OutputArea-output .widget-image, '
                        + '.jp-OutputArea-output img').length,
                      text: text.slice(0, 300)};
        seen.done = seen.error || seen.widgets >= 2;
        return seen; })()""", 120)
    console = app_console + driver.get_log("browser")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / "jupyterlab_first_explorer.png"))
    driver.execute_async_script(_CLOSE)
    print(f"first explorer run: {seen}")
    assert not seen["error"], f"the explorer's first run shows a widget error: {seen}"
    assert seen["widgets"] >= 2, f"the explorer did not show: {seen}"
    errors = console_problems(console)
    assert not errors, f"console errors on the explorer's first run: {errors[:5]}"


#: JavaScript: evaluate the expression ``arguments[0]`` every 50 ms until its value is truthy
#: (and, for an object, its ``done`` is not false), at most ``arguments[1]`` seconds; the last
#: value.
_UNTIL = """
const [expr, seconds, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const end = Date.now() + 1000 * seconds;
const ok = v => v && !(typeof v === 'object' && v.done === false);
const poll = () => {
  let v;
  try { v = eval(expr); } catch (e) { v = false; }
  if (ok(v) || Date.now() > end) done(v);
  else setTimeout(poll, 50);
};
poll();
"""

#: JavaScript: open the notebook ``arguments[0]`` in the running JupyterLab, wait until its
#: kernel has started and answered its info request (at most ``arguments[1]`` seconds) and the
#: notebook has taken the kernel's name and language (the moment a chapter could turn
#: "modified"); true when the kernel came.
_OPEN = """
const [path, seconds, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const app = window.jupyterapp;
(async () => {
  // (what an earlier test left open is closed first: each notebook is read alone)
  for (const w of Array.from(app.shell.widgets('main'))) {
    if (w.sessionContext) { try { await w.sessionContext.shutdown(); } catch (e) { /* gone */ } }
    w.dispose();
  }
  const panel = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
  window._attnPanel = panel;
  await panel.context.ready;
  const ctx = panel.sessionContext;
  await ctx.ready;
  const end = Date.now() + 1000 * seconds;
  while (!(ctx.session && ctx.session.kernel) && Date.now() < end) {
    await new Promise(r => setTimeout(r, 50));
  }
  if (!(ctx.session && ctx.session.kernel)) return false;
  const kernel = ctx.session.kernel;
  await Promise.race([kernel.info, new Promise(r => setTimeout(r, end - Date.now()))]);
  while (kernel.status !== 'idle' && Date.now() < end) {
    await new Promise(r => setTimeout(r, 50));
  }
  // the notebook takes the kernel's name and language info after the info reply
  await new Promise(r => setTimeout(r, 300));
  return kernel.status === 'idle';
})().then(done, e => done('error: ' + e));
"""

#: JavaScript: close the open notebook and shut its kernel down (no dialog: disposed)
_CLOSE = """
const done = arguments[arguments.length - 1];
const panel = window._attnPanel;
(async () => {
  if (panel && !panel.isDisposed) {
    try { await panel.sessionContext.shutdown(); } catch (e) { /* already gone */ }
    panel.dispose();
  }
})().then(() => done(true), e => done('error: ' + e));
"""


@pytest.fixture(scope="module")
def lab_page(lab, chromium):
    """The session's Chromium on the running JupyterLab (a fresh workspace, ``&reset``), once
    for every chapter: the driver and the console entries of the application's start."""
    url, token, _ = lab
    driver = chromium
    old = driver.get_window_size()
    driver.set_window_size(1366, 900)
    # (the waits below run in the page, up to 2 min each: longer than the usual 60 s)
    driver.set_script_timeout(300)
    driver.get_log("browser")
    driver.get(f"{url}/lab?token={token}&reset")
    assert driver.execute_async_script(
        _UNTIL, "window.jupyterapp && window.jupyterapp.shell "
                "&& document.querySelector('#jp-main-dock-panel') && true", 120), \
        "JupyterLab did not start"
    driver.execute_async_script("const d = arguments[arguments.length - 1];"
                                "window.jupyterapp.restored.then(() => d(true));")
    yield driver, driver.get_log("browser")
    driver.set_script_timeout(60)
    driver.set_window_size(old["width"], old["height"])
    driver.get("about:blank")


#: JavaScript: the chapter is rendered (``arguments[1]`` numbered blocks, ``arguments[2]``
#: citations, some math) and what _FIND reads has not changed for 300 ms (the notebook-wide
#: pass that numbers blocks and resolves references comes after the first render); at most
#: ``arguments[3]`` seconds; what _FIND read last.
_RENDERED = """
const [keys, blocks, cites, seconds, done] = [arguments[0], arguments[1], arguments[2],
                                              arguments[3], arguments[arguments.length - 1]];
const find = new Function(arguments[4]);  // _FIND reads the keys as its arguments[0]
const end = Date.now() + 1000 * seconds;
let last = null, since = 0;
const poll = () => {
  const info = find(keys);
  const key = JSON.stringify(info);
  if (key !== last) { last = key; since = Date.now(); }
  const ready = info.blocks.length >= blocks && info.links.length >= cites && info.typeset;
  if ((ready && Date.now() - since >= 300) || Date.now() > end) done(info);
  else setTimeout(poll, 50);
};
poll();
"""


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_renders_myst_in_jupyterlab(lab, lab_page, chapter):
    want = expected_blocks(chapter)
    n_cited = cited(chapter)
    driver, app_console = lab_page
    driver.get_log("browser")  # (the messages of the chapter before)
    t0 = time.monotonic()
    # the kernel started and answered its info; the notebook took the kernel's name
    idle = driver.execute_async_script(_OPEN, chapter, 90)
    t_open = time.monotonic() - t0
    info = driver.execute_async_script(_RENDERED, KEYS, len(want), n_cited, 100, _FIND)
    t_rendered = time.monotonic() - t0
    dirty = driver.execute_script(_DIRTY)
    dirty += driver.execute_script(
        "const p = window._attnPanel; return p && p.context.model.dirty ? ['model dirty'] : [];")
    console = app_console + driver.get_log("browser")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const t = Array.from(document.querySelectorAll('.jp-MarkdownCell aside'))"
        ".find(e => /^(Theorem|Definition)\\b/.test((e.textContent||'').trim()));"
        "if (t) t.scrollIntoView({block: 'start'});"
        "requestAnimationFrame(() => requestAnimationFrame(() => done(true)));")
    driver.save_screenshot(str(SCREENSHOTS / f"jupyterlab_{chapter[:-6]}.png"))
    driver.execute_async_script(_CLOSE)
    print(f"jupyterlab {chapter}: {info} after {time.monotonic() - t0:.1f} s (kernel idle "
          f"after {t_open:.1f} s, rendered after {t_rendered:.1f} s)")
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
    errors = console_problems(console)
    assert not errors, f"{len(errors)} console error(s) in JupyterLab: {errors[:5]}"
    assert idle is True, f"the chapter's kernel did not start: {idle}"
    assert not dirty, f"{chapter} is marked modified as soon as it opens: {dirty}"
