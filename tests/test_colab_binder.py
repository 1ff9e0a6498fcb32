"""The Binder launch: binder/ builds the chapters' environment, with JupyterLab + jupyterlab-myst.

repo2docker reads binder/ (requirements.txt, runtime.txt, postBuild, start).  A Binder session
must run every chapter (every dependency of attnlib, pinned as in ../requirements.txt, torch
from the CPU index) and read them rendered (JupyterLab and jupyterlab-myst at the versions
tests/test_jupyterlab.py checks), and the site's launch buttons must open it there.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from site_helpers import SITE, require_site, toc_files

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
#: what a reader needs besides attnlib's own dependencies: the kernel and the rendered MyST
INTERFACE = {"ipykernel", "jupyterlab", "jupyterlab-myst"}


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            spec = list(req.specifier)
            assert len(spec) == 1 and spec[0].operator == "==", f"{path.name}: pin {line!r}"
            pins[canonicalize_name(req.name)] = spec[0].version
    return pins


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_binder_pins_every_runtime_package_as_requirements_txt():
    book, binder = _pins(ROOT / "requirements.txt"), _pins(BINDER / "requirements.txt")
    needed = {canonicalize_name(Requirement(r).name) for r in _pyproject()["dependencies"]}
    needed |= INTERFACE
    missing = sorted(needed - set(binder))
    assert not missing, f"binder/requirements.txt does not pin {missing}"
    differ = {k: (v, book.get(k)) for k, v in binder.items() if book.get(k) != v}
    assert not differ, f"binder pins differ from requirements.txt (binder, book): {differ}"
    for r in _pyproject()["dependencies"]:  # the pins satisfy attnlib's own requirements
        req = Requirement(r)
        assert req.specifier.contains(binder[canonicalize_name(req.name)]), r


def test_binder_torch_is_the_cpu_build():
    lines = [ln.strip() for ln in (BINDER / "requirements.txt").read_text().splitlines()]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    book_torch = next(ln for ln in (ROOT / "requirements.txt").read_text().splitlines()
                      if ln.startswith("torch=="))
    assert book_torch in lines


def test_binder_python_meets_requires_python():
    runtime = (BINDER / "runtime.txt").read_text().strip()
    m = re.fullmatch(r"python-(\d+)\.(\d+)", runtime)
    assert m, f"runtime.txt: {runtime!r} is not python-X.Y"
    assert SpecifierSet(_pyproject()["requires-python"]).contains(f"{m[1]}.{m[2]}.0")


def _mode(name: str) -> str:
    out = subprocess.run(["git", "ls-files", "-s", f"binder/{name}"], cwd=ROOT,
                         capture_output=True, text=True).stdout.split()
    return out[0] if out else oct((BINDER / name).stat().st_mode)[-6:]


def test_binder_postbuild_installs_attnlib_and_start_execs_the_server():
    post = (BINDER / "postBuild").read_text()
    assert post.startswith("#!/usr/bin/env bash") and _mode("postBuild") == "100755"
    assert re.search(r"^pip install --no-deps -e \.$", post, re.M), post
    start = (BINDER / "start").read_text()
    assert start.startswith("#!/usr/bin/env bash") and _mode("start") == "100755"
    assert start.rstrip().splitlines()[-1] == 'exec "$@"'  # repo2docker runs the server after
    # the thread settings of scripts/env.sh, which the chapters' timings assume
    env = (ROOT / "scripts" / "env.sh").read_text()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        line = f'export {var}="${{{var}:-1}}"'
        assert line in env and line in start, var


def test_launch_buttons_open_the_repository_in_colab_and_binder():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = cfg["repository"]["url"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repo), repo
    buttons = cfg["launch_buttons"]
    assert buttons["binderhub_url"].rstrip("/") == "https://mybinder.org"
    # ?urlpath=lab/tree/book/NN.ipynb: JupyterLab, where jupyterlab-myst renders the theorems
    assert buttons["notebook_interface"] == "jupyterlab"
    assert buttons["colab_url"].rstrip("/") == "https://colab.research.google.com"
    assert not buttons.get("thebe")
    # the Colab buttons open the plain exports (self-study, assignment) published on this branch
    assert cfg["sphinx"]["config"]["book_export_branch"] == "gh-pages"


@pytest.mark.browser
def test_built_pages_launch_binder_in_jupyterlab_and_colab_on_both_editions():
    """On every chapter page of the built site: Binder opens the chapter in JupyterLab on the
    configured branch; two Colab buttons open the plain exports on the export branch, the
    self-study edition (solutions folded) and the assignment edition (stubs): a reader alone
    is never stuck on a stub that raises NotImplementedError (no browser needed: the links are
    read from the HTML)."""
    require_site()
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    org_repo = cfg["repository"]["url"].removeprefix("https://github.com/")
    branch = cfg["repository"]["branch"]
    export_branch = cfg["sphinx"]["config"]["book_export_branch"]
    chapters = [f for f in toc_files() if (ROOT / f"{f}.ipynb").is_file()]
    assert chapters
    for page in chapters:
        html = (SITE / f"{page}.html").read_text(encoding="utf-8")
        links = re.findall(r'href="(https://(?:mybinder\.org|colab\.research\.google\.com)/'
                           r'[^"]*)"', html)
        colab = f"https://colab.research.google.com/github/{org_repo}/blob/{export_branch}"
        assert links == [
            f"https://mybinder.org/v2/gh/{org_repo}/{branch}?urlpath=lab/tree/{page}.ipynb",
            f"{colab}/plain/{page}.ipynb", f"{colab}/plain-student/{page}.ipynb"], page
        # two Colab buttons, named for what they open
        assert "Colab: self-study" in html and "Colab: assignment" in html, page
        assert (SITE / "plain" / f"{page}.ipynb").is_file(), page
        assert (SITE / "plain-student" / f"{page}.ipynb").is_file(), page
