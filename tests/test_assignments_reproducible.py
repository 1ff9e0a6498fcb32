"""The course kit's zips are byte-reproducible: building the same masters twice
gives the same bytes, so an instructor can rebuild a zip and compare it with the one handed
out. What used to differ: the student edition's banner cell got a random id per build."""

import zipfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attnlib.course import editions, kit

ROOT = Path(__file__).resolve().parents[1]


def _book(tmp_path):
    book = tmp_path / "book"
    (book / "img").mkdir(parents=True)
    (book / "img" / "fig.png").write_bytes(b"png")
    cells = [
        new_markdown_cell("# A test chapter\n![a figure](img/fig.png)"),
        new_code_cell("import attnlib as al\nimport torch\nW = torch.eye(3)"),
        new_markdown_cell("```{exercise-start}\n:label: ex-rank\n```\nThe rank of W?\n"
                          "```{exercise-end}\n```"),
        new_code_cell("# Compute the rank r of W.\nr = 3", metadata={"tags": ["solution"]}),
        new_code_cell("al.check.check_rank(r, W)", metadata={"tags": ["check"]}),
        new_markdown_cell("```{solution-start} ex-rank\n:class: dropdown\n```\nThree.\n"
                          "```{solution-end}\n```"),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    for stem in ("01_test", "02_more"):
        nbformat.write(nb, book / f"{stem}.ipynb")
    return book


def _files(out: Path) -> dict:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


def test_two_builds_give_the_same_bytes(tmp_path):
    book = _book(tmp_path)
    kit.build(book, tmp_path / "a")
    kit.build(book, tmp_path / "b")
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert sorted(a) == sorted(b) and {"01_test.zip", "02_more.zip", "instructor.zip",
                                       "student/01_test.ipynb"} <= set(a)
    differ = [name for name in a if a[name] != b[name]]
    assert not differ, f"not reproducible: {differ}"
    with zipfile.ZipFile(tmp_path / "a" / "01_test.zip") as z:  # fixed time and mode
        assert {i.date_time for i in z.infolist()} == {(2024, 1, 1, 0, 0, 0)}
        assert {i.external_attr >> 16 for i in z.infolist()} == {0o100644}
        names = z.namelist()
    assert names == ["01_test/01_test.ipynb", "01_test/01_test-colab.ipynb",
                     "01_test/img/fig.png", "01_test/README.txt"]
    with zipfile.ZipFile(tmp_path / "a" / "instructor.zip") as z:  # a shared image once
        assert z.namelist() == ["instructor/01_test.ipynb", "instructor/02_more.ipynb",
                                "instructor/img/fig.png"]


def test_the_banner_id_is_fixed_and_unique():
    nb = nbformat.reads(nbformat.writes(new_notebook(cells=[
        new_code_cell("x = 1", id="student-banner"), new_markdown_cell("text")])), 4)
    ids = [c.get("id") for c in editions.student_edition(nb).cells]
    assert len(set(ids)) == len(ids) and "student-banner1" in ids
    st = editions.student_edition(new_notebook(cells=[new_markdown_cell("text")]))
    assert [c.get("id") for c in st.cells][0] == "student-banner"
