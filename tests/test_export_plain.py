"""The plain export (attnlib.course.plain): no MyST left, references resolved.

Colab, downloads and classic Jupyter cannot render MyST; the site's Colab and download buttons
open this export.  Every chapter of _toc.yml is exported into a temporary folder and read back:
no directive fence, role, ``(label)=`` target or directive option survives; every link inside
an export lands on an anchor that exists, and every link to another page is absolute (the page
of the published site: Colab opens one notebook alone, a relative link breaks there); every
citation has its entry, formatted as a bibliography (no raw BibTeX author list); exercises are
numbered per chapter ("Exercise 5.1") with folded solutions, and the self-study edition keeps
the answer code (folded) while the assignment edition has the stubs; the Colab install cell is
written one way, pinned to the release.  That the cell installs attnlib, offline, into a clean
virtual environment is tests/test_colab_widgets.py's first step: it runs chapter 1's cell as
this export writes it, in a Colab-like kernel, and then an explorer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from attnlib.course import bib, cli, myst, plain, repo

ROOT = Path(__file__).resolve().parents[1]

REF = "v0.0-test"
LEFT = re.compile(r"(?:`{3,}|:{3,})\{[^}]+\}"  # a directive fence
                  r"|(?<![`\w])\{[a-z][\w:-]*\}`[^`]*`"  # a role
                  r"|^\([^)\s]+\)=\s*$"  # a target
                  r"|^:(label|class|name|nonumber|dropdown):", re.M)  # a directive option


def _strip_code(md: str) -> str:
    """Markdown without its code blocks and code spans (which may show MyST as code)."""
    md = re.sub(r"^(`{3,}|~{3,})(?!\{).*?^\1\s*$", "", md, flags=re.M | re.S)
    return re.sub(r"`[^`\n]+`", "", md)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("plain")
    assert cli.export_main(["--out", str(out), "--ref", REF]) == 0
    docs = [d for d in repo.toc_files() if (ROOT / f"{d}.ipynb").is_file()]
    return {d: json.loads((out / f"{d}.ipynb").read_text()) for d in docs}


def _md(nb: dict) -> str:
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_every_chapter_is_exported_without_myst(exported):
    assert len(exported) >= 10
    for doc, nb in exported.items():
        left = LEFT.findall(_strip_code(_md(nb)))
        found = [m.group(0) for m in LEFT.finditer(_strip_code(_md(nb)))]
        assert not left, f"{doc}: MyST left in the export: {found[:5]}"
        assert nb["metadata"]["kernelspec"]["name"] == "python3"
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")


def test_install_cell_is_one_and_pinned(exported):
    url = repo.repo_url()
    for doc, nb in exported.items():
        code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
        installs = [c for c in code if "pip install" in c]
        assert installs == [plain.install_cell_source(url, REF)], doc
        assert code[0] == installs[0], f"{doc}: the install cell is not the first code cell"
        assert f'"attnlib @ git+{url}@{REF}"' in installs[0]
        assert nb["metadata"]["attnlib_export"]["release"] == REF


def test_links_land_on_anchors(exported):
    """In-notebook links land on an anchor; links to another page are absolute links to the
    published site whose page is a page of the book and whose anchor is a label there."""
    site = repo.site_url()
    assert re.fullmatch(r"https://[\w.-]+(/[\w.-]+)*", site), site
    anchors = {doc: set(re.findall(r'<a id="([^"]+)"></a>', _md(nb)))
               for doc, nb in exported.items()}
    index = myst.Index(repo.toc_files(), ROOT / "references.bib")
    problems, absolute = [], 0
    for doc, nb in exported.items():
        for target in re.findall(r"\]\(([^)\s]+)\)", _md(nb)):
            if target.startswith(site + "/"):
                absolute += 1
                page, _, frag = target.removeprefix(site + "/").partition("#")
                other = page.removesuffix(".html")
                if other not in index.titles:
                    problems.append(f"{doc}: link to a page that is not in the book: {target}")
                elif frag and frag not in anchors.get(other, set()) \
                        and index.labels.get(frag, (None,))[0] != other:
                    problems.append(f"{doc}: link to a missing anchor: {target}")
            elif target.startswith(("http://", "https://", "mailto:")):
                continue
            elif not target.startswith("#"):
                problems.append(f"{doc}: a relative link (breaks in Colab): {target}")
            elif target != "#" and target[1:] not in anchors[doc]:
                problems.append(f"{doc}: link to a missing anchor: {target}")
    assert not problems, "\n".join(problems)
    assert absolute > 10, f"only {absolute} links between chapters"


def test_references_are_formatted(exported):
    """The References cell reads as a bibliography: "Tarzanagh, D. A., Li, Y., Zhang, X., &
    Oymak, S. (2023). *Title*. Venue." (no BibTeX "Last, First and Last, First" list, no
    LaTeX escape)."""
    up = "A-ZÀ-Ž"
    person = rf"[{up}][\w'’-]+(?: [{up}][\w'’-]+)*, [{up}]\.(?:-[{up}]\.)?(?: [{up}]\.)*"
    entry = re.compile(rf'- <a id="ref-[\w:-]+"></a>{person}(?:, {person})*(?:,? & {person})? '
                       r"\(\d{4}[a-z]?\)\. \*[^*]+\*\.")
    seen = 0
    for doc, nb in exported.items():
        md = _md(nb)
        if "## References" not in md:
            continue
        for line in md[md.index("## References"):].splitlines()[2:]:
            if not line.strip():
                continue
            seen += 1
            assert entry.match(line), f"{doc}: reference not formatted: {line[:160]}"
            assert " and " not in line.split("(")[0] and "\\" not in line, line
    assert seen >= 10
    assert bib.format_authors(
        "Vaswani, Ashish and Kaiser, {\\L}ukasz".replace("{", "").replace("}", "")) \
        == "Vaswani, A., & Kaiser, Ł."


def test_self_study_edition_keeps_the_answers_folded(exported, tmp_path):
    """The self-study edition (Colab's first button): every answer code cell is there, its
    code hidden under a title (Colab's form view, JupyterLab's source_hidden), and no stub
    raises NotImplementedError; the assignment edition (the second button) has the stubs."""
    student = tmp_path / "student"
    assert cli.export_main(["--student", "--out", str(student), "--ref", REF,
                              str(ROOT / "book" / "02_att_svm.ipynb")]) == 0
    for doc, nb in exported.items():
        book = json.loads((ROOT / f"{doc}.ipynb").read_text())
        n_answers = sum("solution" in c["metadata"].get("tags", []) for c in book["cells"]
                        if c["cell_type"] == "code")
        answers = [c for c in nb["cells"] if c["cell_type"] == "code"
                   and "solution" in c["metadata"].get("tags", [])]
        assert len(answers) == n_answers, doc
        for c in answers:
            src = "".join(c["source"])
            assert re.match(r"# @title Answer code of Exercise \d+\.\d+", src), src[:80]
            assert c["metadata"]["cellView"] == "form"
            assert c["metadata"]["jupyter"]["source_hidden"] is True
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        assert "NotImplementedError" not in code, f"{doc}: a stub in the self-study edition"
    ch2 = json.loads((student / "book" / "02_att_svm.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in ch2["cells"] if c["cell_type"] == "code")
    assert "NotImplementedError" in code and "# @title Answer code" not in code


def test_references_read_as_in_the_book(exported):
    md = _md(exported["book/05_w_vs_kq"])
    # a {prf:ref} to a lemma of the same chapter: "Lemma 5.k", linked to its anchor
    assert re.search(r"\[Lemma 5\.\d+\]\(#lem-factor-nuclear\)", md)
    assert re.search(r'<a id="lem-factor-nuclear"></a>\n\*\*Lemma 5\.\d+\*\*', md)
    # citations: "Author et al. (year)" with an entry in the References cell
    cited = set(re.findall(r"\(#ref-([\w:-]+)\)", md))
    assert cited, "chapter 5 cites the papers"
    for key in cited:
        assert f'<a id="ref-{key}"></a>' in md, key


def test_exercises_numbered_per_chapter_with_folded_solutions(exported):
    for doc, nb in exported.items():
        src = "\n".join("".join(c["source"]) for c in
                        json.loads((ROOT / f"{doc}.ipynb").read_text())["cells"]
                        if c["cell_type"] == "markdown")
        n_ex = len(re.findall(r"^`{3,}\{exercise-start\}", src, re.M))
        n_sol = len(re.findall(r"^`{3,}\{solution-start\}", src, re.M))
        md = _md(nb)
        chap = myst.chapter_of(doc)
        numbers = re.findall(r"\*\*Exercise (\d+)\.(\d+)\*\*", md)
        assert numbers == [(chap, str(k)) for k in range(1, n_ex + 1)], doc
        assert md.count("<details>") == md.count("</details>") == n_sol, doc
        assert len(re.findall(r"<summary>Solution to Exercise \d+\.\d+</summary>", md)) == n_sol


def test_unknown_directive_or_role_is_an_error():
    index = myst.Index(repo.toc_files(), ROOT / "references.bib")
    conv = myst.Converter(index, "book/05_w_vs_kq")
    with pytest.raises(ValueError, match="directive"):
        conv.convert("```{mystery}\nbody\n```")
    with pytest.raises(ValueError, match="role"):
        conv.convert("see {mystery}`x`")
    assert conv.convert("`{prf:ref}` in code") == "`{prf:ref}` in code"
