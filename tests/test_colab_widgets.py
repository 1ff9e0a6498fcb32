"""On Colab, with Colab's own ipywidgets, the install cell works and the explorers still show.

Colab ships ipywidgets 7.7.x (the 7 series: its front end renders only ipywidgets 7 without a
third-party widget manager loaded from a CDN; see googlecolab/colabtools#3020, #4525) and its
kernel imports ipywidgets at start, so an install that upgraded ipywidgets would need a runtime
restart.  attnlib therefore accepts ``ipywidgets>=7.7`` (pyproject.toml) and must work with both
series.  This test plays a Colab session, offline, in a clean virtual environment:

* the venv sees the project's packages (as Colab brings its own torch, numpy, matplotlib...)
  through a .pth file, minus attnlib and ipywidgets; Colab's ipywidgets 7.7.1 is installed on
  top (its wheels are fetched once from the package registry into ``.venv/colab-wheels``, a
  set-up step, like ``make setup``; nothing else is downloaded);
* a Jupyter kernel runs in that venv with ``google.colab`` present and ipywidgets imported;
* it runs chapter 1's install cell as the plain export writes it (attnlib.course.plain),
  with the repository URL replaced by a git snapshot of this working tree and pip kept offline;
* then the chapter's explorer cell, and moves a control as a reader would.

The test then reads what a front end would get: the explorer cell displays one widget view
whose model (and its Image child, holding a PNG) is in the notebook's widget state; the
control redraws the figure; attnlib came from the venv and ipywidgets stayed 7.7.1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnlib.course import myst, plain, repo

ROOT = Path(__file__).resolve().parents[1]

COLAB_IPYWIDGETS = "7.7.1"
#: Colab's widget packages (ipywidgets 7.7.1 and the two it needs that the project lacks)
COLAB_WHEELS = (f"ipywidgets=={COLAB_IPYWIDGETS}", "widgetsnbextension==3.6.1",
                "ipython-genutils==0.2.0")
WHEELS = ROOT / ".venv" / "colab-wheels"
#: what the clean venv must not see from the project's environment
HIDDEN = re.compile(r"^(attnlib|__editable__|ipywidgets|widgetsnbextension|ipython_genutils)"
                    r"|\.pth$", re.I)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd[:4]}...\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def _colab_wheels() -> Path:
    """Colab's ipywidgets wheels, fetched once from the registry (the set-up step)."""
    have = {p.name.split("-")[0].lower() for p in WHEELS.glob("*.whl")}
    if {w.split("==")[0].replace("-", "_") for w in COLAB_WHEELS} <= have:
        return WHEELS
    WHEELS.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "-d", str(WHEELS), *COLAB_WHEELS], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail("could not fetch Colab's ipywidgets wheels into .venv/colab-wheels "
                    f"(a one-time set-up download):\n{r.stderr[-2000:]}")
    return WHEELS


def _snapshot(dest: Path) -> str:
    """A git repository holding this working tree's tracked files; returns its commit."""
    files = _run(["git", "ls-files", "-z"], cwd=ROOT).split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    git = ["git", "-c", "user.name=colab-test", "-c", "user.email=colab@test", "-C", dest]
    _run([*git, "init", "-q"])
    _run([*git, "add", "-A"])
    _run([*git, "commit", "-q", "-m", "snapshot"])
    return _run([*git, "rev-parse", "HEAD"]).strip()


def _colab_venv(where: Path) -> Path:
    """A clean venv: the project's packages (less attnlib, ipywidgets) + Colab's ipywidgets."""
    venv = where / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    py = venv / "bin" / "python"
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
                .strip())
    ours = Path(_run([sys.executable, "-c", "import sysconfig; "
                      "print(sysconfig.get_path('purelib'))"]).strip())
    shared = where / "colab-packages"  # the project's packages as Colab would bring them
    shared.mkdir()
    for entry in ours.iterdir():
        if not HIDDEN.search(entry.name):
            (shared / entry.name).symlink_to(entry)
    (site / "colab_packages.pth").write_text(f"{shared}\n")
    # --no-deps: widgetsnbextension 3.6 wants the classic notebook server, not needed here
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--find-links",
          _colab_wheels(), *COLAB_WHEELS], env=_offline_env(where))
    return py


def _offline_env(where: Path) -> dict:
    """The environment of pip and the kernel: no pip configuration, no index, no isolation
    (the build backend comes from the project's packages), no explorer mode set; no
    dependency resolution (Colab has the classic notebook server that widgetsnbextension 3.6
    wants, this venv has not): the test checks instead that attnlib's declared requirements
    are met by the installed versions, so that pip, which upgrades only what is not met,
    would leave Colab's packages alone."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "PYTHONPATH", "ATTNLIB_EXPLORER", "JUPYTER_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0",
               PIP_NO_DEPS="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", JUPYTER_PATH=str(where / "jupyter"),
               MPLBACKEND="agg")
    return env


def _ch1_cells() -> tuple[str, str]:
    """Chapter 1's install cell and explorer cell, as the plain export writes them."""
    index = myst.Index(repo.toc_files(), ROOT / "references.bib")
    index.ref, index.repo = "RELEASE", repo.repo_url()
    cells = ["".join(c["source"]) for c in
             plain.export("book/01_token_selection", index)["cells"]
             if c["cell_type"] == "code"]
    install = next(c for c in cells if plain.INSTALL_MARK in c and "pip" in c)
    explorer = next(c for c in cells if "softmax_explorer(" in c)
    return install, explorer


CHECK = """
import importlib.metadata as md, json, attnlib, ipywidgets
from packaging.requirements import Requirement
unmet = []
for r in map(Requirement, md.requires("attnlib") or []):
    if r.marker is None or r.marker.evaluate({"extra": ""}):
        try:
            have = md.version(r.name)
        except md.PackageNotFoundError:
            have = None
        if have is None or not r.specifier.contains(have, prereleases=True):
            unmet.append(f"{r} (installed: {have})")
ex = _
before = ex.png
ex.widgets["norm"].value = 4.0  # as a reader moving the slider
print(json.dumps({
    "kind": type(ex).__name__, "attnlib": attnlib.__file__, "unmet": unmet,
    "ipywidgets": [ipywidgets.__version__, md.version("ipywidgets")],
    "controls": {k: [type(w).__name__, w.model_id] for k, w in ex.widgets.items()},
    "box": ex.box.model_id, "image": ex.image.model_id,
    "png": [before[:8].hex(), len(before), ex.png[:8].hex(), len(ex.png)],
    "changed": ex.png != before, "norm": ex.state["norm"], "status": ex.status.value}))
"""


@pytest.mark.slow
def test_colab_install_cell_and_explorer_with_colab_ipywidgets(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    import nbformat
    from nbclient import NotebookClient

    install, explorer = _ch1_cells()
    src = tmp_path / "attnlib-src"
    commit = _snapshot(src)
    spec = f"git+{repo.repo_url()}@RELEASE"
    assert spec in install
    local_install = install.replace(spec, f"git+file://localhost{src}@{commit}")
    py = _colab_venv(tmp_path)
    kernels = tmp_path / "jupyter" / "kernels" / "colab"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab-like", "language": "python"}))
    env = _offline_env(tmp_path)
    for k in list(os.environ):
        if k not in env:
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    colab = ("import sys, types\n"
             "sys.modules['google.colab'] = types.ModuleType('google.colab')  # on Colab\n"
             "import ipywidgets  # Colab's kernel imports it at start\n"
             "print(ipywidgets.__version__)")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in
                (colab, local_install, "import attnlib as al\n" + explorer, CHECK)]
    NotebookClient(nb, kernel_name="colab", timeout=300, startup_timeout=180, allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()

    def text(cell):
        return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")

    errors = [(k, o.ename, o.evalue) for k, c in enumerate(nb.cells) for o in c.outputs
              if o.output_type == "error"]
    assert not errors, (errors, text(nb.cells[1])[-3000:])
    assert text(nb.cells[0]).strip() == COLAB_IPYWIDGETS
    facts = json.loads(text(nb.cells[3]).strip().splitlines()[-1])
    assert facts["kind"] == "LiveExplorer"
    assert Path(facts["attnlib"]).is_relative_to(tmp_path / "venv"), facts["attnlib"]
    assert facts["ipywidgets"] == [COLAB_IPYWIDGETS] * 2
    assert not facts["unmet"], f"pip would change Colab's packages: {facts['unmet']}"
    assert set(facts["controls"]) == {"angle", "norm"}
    assert facts["controls"]["norm"][0] == "SelectionSlider"
    png = "89504e470d0a1a0a"
    assert facts["png"][0] == facts["png"][2] == png and min(facts["png"][1::2]) > 10_000
    assert facts["changed"] and facts["norm"] == 4.0 and "drawn in" in facts["status"]

    # what a front end gets: one widget view of the explorer's box, no error, no bare repr
    shown = [o for o in nb.cells[2].outputs if o.output_type in ("display_data",
                                                                   "execute_result")]
    assert [o.data[WIDGET_VIEW]["model_id"] for o in shown if WIDGET_VIEW in o.data] == \
        [facts["box"]], [o.data for o in shown]
    assert not text(nb.cells[2]).strip(), text(nb.cells[2])
    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    models = {m: state[m]["model_name"] for m in
              (facts["box"], facts["image"], *(i for _, i in facts["controls"].values()))}
    assert models[facts["box"]] == "VBoxModel" and models[facts["image"]] == "ImageModel"
    image = state[facts["image"]]
    assert image["state"]["format"] == "png" and image.get("buffers"), image["state"]
