"""The notebooks of book/ follow the book's rules (CONTRIBUTING.md, "Chapters").

Every notebook is listed in _toc.yml and every page of _toc.yml exists; kernel ``python3``;
committed without outputs or execution counts; the first cell (tag ``remove-cell``) installs
attnlib from the repository of _config.yml when it runs in Colab; no ``x.md`` beside an
``x.ipynb``.  These are fast checks of the files; executing them is nbval's job
(scripts/nbval.sh) and building them the build's.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import yaml
from site_helpers import toc_files

from attnlib.course.plain import CHAPTER_DEVICE, install_cell_source

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPO_URL = CONFIG["repository"]["url"].rstrip("/")




def _is_md_notebook(path: Path) -> bool:
    """A MyST-markdown page that is executed as a notebook (kernelspec in its front matter)."""
    text = path.read_text(encoding="utf-8")
    return text.startswith("---") and re.search(r"^\s*kernelspec:", text.split("---")[1], re.M)


NOTEBOOKS = sorted(p for p in BOOK.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
MD_NOTEBOOKS = sorted(p for p in BOOK.rglob("*.md") if _is_md_notebook(p))


def _ids(paths):
    return [p.relative_to(ROOT).as_posix() for p in paths]


def test_every_toc_page_exists():
    missing = [f for f in toc_files()
               if not any((ROOT / f"{f}{ext}").is_file() for ext in (".ipynb", ".md"))]
    assert not missing, f"_toc.yml lists pages that do not exist: {missing}"


def test_no_page_has_two_sources():
    stems = [p.with_suffix("") for p in BOOK.rglob("*") if p.suffix in (".md", ".ipynb")
             and ".ipynb_checkpoints" not in p.parts]
    doubles = sorted({s.relative_to(ROOT).as_posix() for s in stems if stems.count(s) > 1})
    assert not doubles, f"both .md and .ipynb exist for {doubles} (a fatal build warning)"


@pytest.mark.parametrize("path", NOTEBOOKS + MD_NOTEBOOKS, ids=_ids(NOTEBOOKS + MD_NOTEBOOKS))
def test_notebook_is_in_toc(path):
    name = path.relative_to(ROOT).with_suffix("").as_posix()
    assert name in toc_files(), f"{name} is not listed in _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_metadata_and_no_outputs(path):
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    assert nb.nbformat == 4, "nbformat 4 expected"
    nbformat.validate(nb)
    kernel = nb.metadata.get("kernelspec", {}).get("name")
    assert kernel == "python3", f"kernelspec name must be 'python3' (got {kernel!r})"
    stored = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
              and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not stored, f"cells {stored} have stored outputs or execution counts: clear them"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_first_cell_installs_attnlib_in_colab(path):
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    first = nb.cells[0]
    assert first.cell_type == "code", "the first cell must be the Colab set-up code cell"
    assert "remove-cell" in first.metadata.get("tags", []), "the Colab cell needs tag remove-cell"
    src = first.source
    assert "google.colab" in src, \
        "the Colab cell must run only in Colab ('google.colab' in sys.modules)"
    # `%pip install ...` or `subprocess.run([sys.executable, "-m", "pip", "install", ...])`
    assert re.search(r"\bpip\b", src) and re.search(r"\binstall\b", src) and REPO_URL in src, \
        f"the Colab cell must pip-install attnlib from {REPO_URL} (repository.url of _config.yml)"
    # the chapter computes on the CPU also where a GPU is (the book's numbers); before any
    # other code, and in the plain export's install cell too
    assert src.splitlines().count(CHAPTER_DEVICE) == 1, \
        f"the first cell must set the chapter's device: {CHAPTER_DEVICE}"
    assert CHAPTER_DEVICE in install_cell_source(REPO_URL, "v1")
    assert not any(c.cell_type == "code" and "ATTNLIB_DEVICE" in c.source for c in nb.cells[1:])


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_binder_runs_the_notebooks_with_the_pinned_versions():
    """binder/requirements.txt (installed by the Binder button) agrees with requirements.txt."""
    book, binder = _pins(ROOT / "requirements.txt"), _pins(ROOT / "binder" / "requirements.txt")
    assert {"torch", "numpy", "cvxpy", "matplotlib", "ipywidgets"} <= set(binder)
    differ = {k: (v, book.get(k)) for k, v in binder.items() if book.get(k) != v}
    assert not differ, f"binder pins differ from requirements.txt (binder, book): {differ}"
