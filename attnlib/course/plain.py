"""The plain export of a chapter: a Jupyter notebook without MyST, for Colab and downloads.

:func:`export` converts the markdown cells (:mod:`attnlib.course.myst`), writes the Colab
install cell one way, pinned to the book's release (:func:`install_cell_source`), adds each
figure's number and caption under the figure and a References cell. The self-study edition
(the default) keeps the solutions folded: written ones in ``<details>``, answer code cells
hidden until opened (Colab's form view, JupyterLab's ``source_hidden``); ``student=True``
exports the student edition (:mod:`attnlib.course.editions`: stubs, no solutions).
"""

from __future__ import annotations

import copy
import json

from attnlib.course.editions import student_edition
from attnlib.course.myst import Converter, Index
from attnlib.course.repo import ROOT, doc_path, git_ref, repo_url, toc_files

INSTALL_MARK = "google.colab"

#: The chapters compute on the CPU, also where a GPU is (Colab's GPU runtime, a workstation):
#: their examples are small, run fastest there and give the book's own numbers (a GPU rounds
#: differently). The first cell of every chapter sets it; a non-empty $ATTNLIB_DEVICE set
#: before wins (attnlib reads an empty one as unset).
CHAPTER_DEVICE = ('os.environ["ATTNLIB_DEVICE"] = '
                  'os.environ.get("ATTNLIB_DEVICE", "").strip() or "cpu"')


def install_cell_source(url: str, ref: str) -> str:
    """The one way the export installs attnlib on Colab: pinned to the release ``ref``.

    It keeps Colab's own packages: attnlib asks for ``ipywidgets>=7.7`` and Colab ships 7.7.1,
    which its kernel imports at start (an upgrade would ask for a runtime restart) and its
    front end renders natively, so the explorers need no ``enable_custom_widget_manager()``
    (a third-party manager loaded from a CDN). tests/test_colab_widgets.py runs this cell
    with ipywidgets 7.7.1 and shows an explorer."""
    return ("# Set-up: the book computes on the CPU, where its small examples run fastest and\n"
            "# give the numbers printed in it; in Colab, install attnlib at the book's release\n"
            "# (elsewhere: see README.md).\n"
            "import os\nimport sys\n\n"
            f"{CHAPTER_DEVICE}\n"
            f'if "{INSTALL_MARK}" in sys.modules:\n'
            f'    %pip install -q "attnlib @ git+{url}@{ref}"')


#: the first line of a folded answer cell: Colab shows it as the cell's title (form view)
ANSWER_TITLE = "# @title Answer code of {exercise} (try it yourself first)"


def fold_answer(src: str, exercise: str) -> str:
    """An answer code cell of the self-study edition: a Colab form title first (Colab hides
    the code under it), then the code unchanged."""
    title = ANSWER_TITLE.format(exercise=exercise)
    return src if src.startswith("# @title") else f"{title}\n{src}"


def book_index(ref: str | None = None) -> Index:
    """The index of the whole book (every page of _toc.yml), its install cells pinned to
    ``ref`` (default: the checked-out release, :func:`attnlib.course.repo.git_ref`)."""
    index = Index(toc_files(ROOT), ROOT / "references.bib")
    index.ref, index.repo = ref or git_ref(), repo_url()
    return index


def student_json(nb: dict) -> dict:
    """The student edition of a notebook (:func:`attnlib.course.editions.student_edition`:
    solution cells stubbed, folded solutions removed, checks kept), as notebook JSON."""
    import nbformat

    ed = student_edition(nbformat.reads(json.dumps(nb), as_version=4))
    return json.loads(nbformat.writes(ed))


def export(doc: str, index: Index, *, student: bool = False, nb: dict | None = None) -> dict:
    """The plain notebook of ``doc`` (a notebook of the book, path without suffix).

    ``student=True`` exports the student edition (no solutions: what the site's Colab
    button and the course kit's zips open); ``nb`` is the notebook's JSON when it is not read
    from ``doc``'s file.
    """
    if nb is None:
        nb = json.loads(doc_path(doc).read_text(encoding="utf-8"))
    if student:
        nb = student_json(nb)
    conv = Converter(index, doc)
    cells = []
    installed = False
    for cell in nb["cells"]:
        cell = copy.deepcopy(cell)
        src = "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "markdown" and "remove-cell" in tags:
            continue  # hidden on the website: the JupyterLab front matter (numbering)
        if cell["cell_type"] == "markdown":
            cell["source"] = conv.convert(src)
        elif cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            if "solution" in tags and not student:  # the answer, folded until opened
                cell["source"] = fold_answer(src, conv.last_exercise)
                meta = cell.setdefault("metadata", {})
                meta["cellView"] = "form"  # Colab: the title shows, the code on a click
                meta.setdefault("jupyter", {})["source_hidden"] = True  # JupyterLab
            if INSTALL_MARK in src and "pip" in src:
                if installed:
                    continue
                cell["source"] = install_cell_source(index.repo, index.ref)
                cell["metadata"]["tags"] = [t for t in tags if t != "remove-cell"]
                installed = True
        cells.append(cell)
        fig = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}) \
            if cell["cell_type"] == "code" else {}
        if fig.get("name"):  # the figure's number and caption, under the figure it draws
            shown = index.labels[fig["name"]][1]
            caption = conv.inline(fig.get("caption", "")).strip()
            cells.append({"cell_type": "markdown", "id": f"{cell.get('id', 'fig')}-caption"[:64],
                          "metadata": {}, "source": f'<a id="{fig["name"]}"></a>'
                          f"**{shown}.** {caption}"})
    if not installed:  # every export installs attnlib on Colab, in its first code cell
        first = next((k for k, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
        cells.insert(first, {"cell_type": "code", "id": "colab-install", "metadata": {},
                             "execution_count": None, "outputs": [],
                             "source": install_cell_source(index.repo, index.ref)})
    if conv.cited:
        cells.append({"cell_type": "markdown", "id": "plain-references", "metadata": {},
                      "source": conv.references()})
    for cell in cells:
        if isinstance(cell["source"], str):
            cell["source"] = cell["source"].splitlines(keepends=True)
    out = dict(nb)
    out["cells"] = cells
    out["metadata"] = dict(nb.get("metadata", {}))
    out["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
    out["metadata"]["attnlib_export"] = {"source": f"{doc}.ipynb", "release": index.ref,
                                         "format": "plain Jupyter Markdown (no MyST)"}
    return out
