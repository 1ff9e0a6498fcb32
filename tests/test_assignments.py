"""The course kit (attnlib.course): student and instructor editions, zips, drift checks.

Unit tests use a small synthetic chapter, so they do not depend on the book. The real chapter
notebooks get the cheap structural checks (drift, stubs, editions). The instructor edition is
checked to equal the master notebook cell for cell: the master notebooks already run under
nbval in tests/test_notebooks (the platform's), so re-running them here would double the CI
time for no new information. The synthetic master runs in the grader's tests
(tests/test_grader.py), whose checker fails on a master whose own answers fail its checks.
"""

import ast
import os
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attnlib.course import drift, editions, kit, myst, notebook, repo

ROOT = Path(__file__).resolve().parents[1]


def code(src, *tags):
    return new_code_cell(src, metadata={"tags": list(tags)} if tags else {})


def synthetic():
    """A two-exercise chapter: a value answer (rank) and a function answer (mirror step)."""
    cells = [
        code("import sys  # installs attnlib in Colab", "remove-cell"),
        new_markdown_cell("# A test chapter"),
        code("import attnlib as al\nimport torch\n"
             "W = torch.diag(torch.tensor([1.0, 2.0, 0.0], dtype=torch.float64))"),
        new_markdown_cell("```{exercise-start}\n:label: ex-rank\n```\nWhat is the rank of W?\n"
                          "```{exercise-end}\n```"),
        code("# Compute the numerical rank r of W.\n"
             "s = torch.linalg.svdvals(W)\nr = int((s > 1e-9 * s.max()).sum())", "solution"),
        code("al.check.check_rank(r, W)", "check"),
        new_markdown_cell("```{solution-start} ex-rank\n:class: dropdown\n```\nTwo nonzero "
                          "singular values.\n```{solution-end}\n```\nText after the solution."),
        new_markdown_cell(":::{exercise} One mirror step\n:label: ex-md\nWrite md_step.\n:::"),
        code("# Write md_step(W, G, lr, p): one l_p mirror-descent step.\n"
             "def md_step(W, G, lr, p):\n    \"\"\"One l_p mirror-descent step.\"\"\"\n"
             "    theta = W.sign() * W.abs() ** (p - 1) - lr * G\n"
             "    return theta.sign() * theta.abs() ** (1 / (p - 1))", "solution"),
        code("al.check.check_md_step(md_step(W, W, 0.1, 3.0), W, W, 0.1, 3.0)", "check"),
        new_markdown_cell("```{solution-start} ex-md\n:class: dropdown\n```\nStep in the dual."),
        code("print('shown only to instructors')"),
        new_markdown_cell("```{solution-end}\n```\nAfter both exercises."),
        code("print(W.shape)"),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


def test_student_edition_structure():
    st = editions.student_edition(synthetic())
    text = "\n".join(c.source for c in st.cells)
    assert "Two nonzero" not in text and "Step in the dual" not in text  # solutions removed
    assert "shown only to instructors" not in text  # cells inside a folded solution too
    assert "solution-start" not in text and "solution-end" not in text
    assert "Text after the solution." in text and "After both exercises." in text
    assert "What is the rank of W?" in text  # exercises kept
    stubs = [c for c in st.cells if "stub" in notebook.tags(c)]
    assert len(stubs) == 2 and not any("solution" in notebook.tags(c) for c in st.cells)
    rank, md = stubs[0].source, stubs[1].source
    assert "# Compute the numerical rank r of W." in rank  # the instruction is kept
    # the book's name of each exercise (this test chapter has no number: "Exercise 1")
    assert rank.startswith("# Your turn (Exercise 1):")
    assert md.startswith("# Your turn (Exercise 2):")
    assert "r = None" in rank and "s = None" not in rank  # only names used later
    assert "svdvals" not in rank and rank.rstrip().endswith('in this cell, then run the check '
                                                            'cell below.")')
    assert "def md_step(W, G, lr, p):" in md and "One l_p mirror-descent step." in md
    assert "theta" not in md and "NotImplementedError" in md
    checks = [c.source for c in st.cells if "check" in notebook.tags(c)]
    assert checks == ["al.check.check_rank(r, W)",
                      "al.check.check_md_step(md_step(W, W, 0.1, 3.0), W, W, 0.1, 3.0)"]
    assert "Student edition" in st.cells[1].source  # banner after the Colab cell
    assert kit.expected_failures(st) == {i for i, c in enumerate(st.cells)
                                         if "stub" in notebook.tags(c)} | {
        i for i, c in enumerate(st.cells)
        if "md_step(W" in c.source and "check" in notebook.tags(c)}


def test_instructor_edition_is_the_master():
    nb = synthetic()
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text="x")]
    nb.cells[2].execution_count = 3
    ins = editions.instructor_edition(nb)
    assert [c.source for c in ins.cells] == [c.source for c in nb.cells]
    assert [notebook.tags(c) for c in ins.cells] == [notebook.tags(c) for c in nb.cells]
    assert ins.cells[2].outputs == [] and ins.cells[2].execution_count is None


def test_drift_clean_and_broken():
    assert drift.drift_problems(synthetic()) == []
    nb = synthetic()
    nb.cells[5].source = "al.check.check_rankk(r, W)"  # the check was renamed
    nb.cells[9].metadata["tags"] = []  # the second solution lost its check
    nb.cells[6].source = nb.cells[6].source.replace("ex-rank", "ex-old")  # solution drifted
    nb.cells[13].source = "print(r)"  # a later cell needs the answer
    nb.cells[11].source = "[r for r in range(3)]; (lambda r: r)(1)"  # a local r is fine
    problems = "\n".join(drift.drift_problems(nb))
    assert "al.check.check_rankk does not exist" in problems
    assert "cell 8: a `solution` cell must be followed by a `check`" in problems
    assert "exercise 'ex-rank' has no {solution-start} ex-rank block" in problems
    assert "solution for 'ex-old', but no exercise has that label" in problems
    assert "cell 13 uses ['r'] from the solution cell 4" in problems
    assert "cell 11" not in problems
    nb = synthetic()
    nb.cells[5].source = "al.check.check_value(r[0], 2)"  # None[0] fails before the check
    assert drift.drift_problems(nb) == [
        "cell 5: pass the answer itself as the check's first argument, not `r[0]` (in the "
        "student edition the answer is None)"]
    nb = synthetic()
    nb.cells[4].source += "\nW = W.clone()"  # the solution redefines the check's reference W
    assert drift.drift_problems(nb)[0] == (
        "cell 4 defines ['W'], which the check in cell 5 takes as reference data (not as the "
        "answer, its first argument); the student edition sets it to None, so define it in a "
        "cell before the solution")


def test_unclosed_solution_block():
    nb = synthetic()
    nb.cells[12].source = "no end here"
    with pytest.raises(ValueError, match="never closed"):
        editions.student_edition(nb)
    assert any("never closed" in p for p in drift.drift_problems(nb))


def test_strip_solutions_single_block_and_colon_fences():
    md = "Before\n````{solution} ex-a\n:class: dropdown\n```python\nx = 1\n```\n````\nAfter"
    assert editions.strip_solutions(md, False) == ("Before\nAfter", False)
    md = ":::{solution-start} ex-b\n:::\nhidden\n:::{solution-end}\n:::\nshown"
    assert editions.strip_solutions(md, False) == ("shown", False)
    assert editions.strip_solutions("hidden\n```{solution-end}\n```\nshown", True) == (
        "shown", False)


def test_build_writes_editions_and_zips(tmp_path, capsys):
    book = tmp_path / "book"
    (book / "img").mkdir(parents=True)
    (book / "img" / "fig.png").write_bytes(b"png")
    nb = synthetic()
    nb.cells[1].source += "\n![a figure](img/fig.png)"
    nbformat.write(nb, book / "01_test.ipynb")
    nbformat.write(nb, book / "intro.ipynb")  # not a chapter: no NN_ prefix
    zips = kit.build(book, tmp_path / "out")
    assert [z.name for z in zips] == ["01_test.zip"]
    with zipfile.ZipFile(zips[0]) as z:  # the student's zip: no instructor edition
        assert sorted(z.namelist()) == [
            "01_test/01_test-colab.ipynb", "01_test/01_test.ipynb", "01_test/README.txt",
            "01_test/img/fig.png"]
        colab = nbformat.reads(z.read("01_test/01_test-colab.ipynb"), as_version=4)
        st = nbformat.reads(z.read("01_test/01_test.ipynb"), as_version=4)
    assert sum("stub" in notebook.tags(c) for c in st.cells) == 2
    assert st.metadata["course_kit"] == {"chapter": "01_test"}  # the grader finds the master
    # the Colab copy: the same student cells (ids kept: the grader finds them), no MyST
    assert [c.get("id") for c in colab.cells if c.cell_type == "code"
            and c.get("id") != "colab-install"] == \
        [c.get("id") for c in st.cells if c.cell_type == "code"]
    assert not any("```{" in c.source for c in colab.cells if c.cell_type == "markdown")
    with zipfile.ZipFile(tmp_path / "out/instructor.zip") as z:
        assert sorted(z.namelist()) == ["instructor/01_test.ipynb", "instructor/img/fig.png"]
    assert (tmp_path / "out/instructor/01_test.ipynb").exists()
    out = capsys.readouterr().out
    assert "01_test: 2 exercise cell(s) stubbed" in out and "instructor.zip" in out
    with pytest.raises(SystemExit, match="no chapter notebook"):
        kit.build(book, tmp_path / "out", ["99_nope"])


@pytest.mark.slow
def test_synthetic_student_edition_executes(tmp_path):
    """Student edition: only the stubs (and the check calling a stubbed function) raise, and
    the other check answers "not answered yet". (The instructor edition is the master cell
    for cell, test_instructor_edition_is_the_master; that the synthetic master runs and its
    own answers pass its checks is what the grader's checker verifies of every master it
    grades against, in tests/test_grader.py: "the master notebook is broken" otherwise.)"""
    st = editions.student_edition(synthetic())
    ran = kit.execute(st, tmp_path)
    errs = kit.errors(ran)
    assert set(errs) == kit.expected_failures(st) and set(errs.values()) == {
        "NotImplementedError"}
    assert kit.student_problems(st, ran) == []
    rank_check = next(c for c in ran.cells if c.source == "al.check.check_rank(r, W)")
    assert "not answered yet" in rank_check.outputs[0]["data"]["text/plain"]
    # a stub that does not raise, or another cell failing, is reported
    ran.cells[-1].outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="x",
                                                     traceback=[])]
    stub = next(i for i, c in enumerate(ran.cells) if "stub" in notebook.tags(c))
    ran.cells[stub].outputs = []
    assert kit.student_problems(st, ran) == [
        f"cell {len(st.cells) - 1} raised NameError, expected only NotImplementedError in the "
        "stubs", f"cell {stub} (a stub) did not raise NotImplementedError"]


# -- the real chapters: cheap structural checks ----------------------------------------------
CHAPTERS = notebook.chapters(ROOT / "book")


@pytest.mark.skipif(not CHAPTERS, reason="no chapter notebooks yet")
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_real_chapter(path):
    nb = nbformat.read(path, as_version=4)
    assert drift.drift_problems(nb) == []
    n_solution = sum("solution" in notebook.tags(c) for c in nb.cells)
    assert n_solution >= 1, "every chapter has at least one self-checking exercise"
    st = editions.student_edition(nb)
    assert sum("stub" in notebook.tags(c) for c in st.cells) == n_solution
    assert "{solution-start}" not in "".join(c.source for c in st.cells)
    ins = editions.instructor_edition(nb)
    assert [(c.cell_type, c.source, notebook.tags(c)) for c in ins.cells] == \
        [(c.cell_type, c.source, notebook.tags(c)) for c in nb.cells]


# Executing a real student edition costs a chapter's run time, so by default only the first
# chapter's runs here (set ATTNLIB_VERIFY_STUDENT=all, or a list of chapter stems, for more;
# `python scripts/assignments.py --verify` runs them all). The static drift checks above cover
# every chapter: they catch the ways a student edition breaks (a stub's None reaching a later
# cell or a check's reference data).
_VERIFY = os.environ.get("ATTNLIB_VERIFY_STUDENT", CHAPTERS[0].stem if CHAPTERS else "")
VERIFY = [p for p in CHAPTERS if _VERIFY == "all" or p.stem in _VERIFY.split(",")]


@pytest.mark.slow
@pytest.mark.skipif(not VERIFY, reason="no chapter selected for execution")
@pytest.mark.parametrize("path", VERIFY, ids=lambda p: p.stem)
def test_real_student_edition_executes(path):
    st = editions.student_edition(nbformat.read(path, as_version=4))
    assert kit.verify_student(st, path.parent) == []


def test_reveals_answer_hides_checks_that_compute_the_expected_value():
    assert not notebook.reveals_answer("al.check.check_selection(alpha, data)")
    assert not notebook.reveals_answer('al.check.check_svm_direction(W, data, norm="nuc", lr=-1)')
    assert notebook.reveals_answer("al.check.check_value(p, al.relaxed_prompt_svm(d), atol=1e-6)")
    assert notebook.reveals_answer('al.check.check_value(s, ref.known["s_opt"])')
    assert notebook.reveals_answer("ref = f()\nal.check.check_value(s, ref)")
    nb = synthetic()
    nb.cells[5].source = "al.check.check_value(r, int((torch.linalg.svdvals(W) > 0).sum()))"
    st = editions.student_edition(nb)
    check = next(c for c in st.cells if "check" in notebook.tags(c))
    assert "svdvals" not in check.source and "r must" in check.source
    assert check.get("id") == nb.cells[5].get("id")  # the grader still finds it
    nb.cells[5].source = "ref = f(W)\nal.check.check_value(r, ref)"
    nb.cells[13].source = "print(ref)"
    assert drift.drift_problems(nb) == [
        "cell 5: this check is hidden from students (it computes the expected value) but "
        "defines ['ref'], which later cells use"]


def _solution_texts(nb) -> tuple[set, set]:
    """(expressions only the solution cells compute, lines of the folded solutions)."""
    exprs, lines, inside, shown = set(), set(), False, set()
    for c in nb.cells:
        if c.cell_type == "code" and "solution" in notebook.tags(c):
            for node in ast.walk(notebook.parse_cell(c.source)):
                if isinstance(node, (ast.Call, ast.Subscript, ast.BinOp)):
                    text = ast.unparse(node)
                    if len(text) >= 16:
                        exprs.add(text)
        elif c.cell_type == "code" and "check" not in notebook.tags(c):  # shown to students anyway
            shown |= {ast.unparse(n) for n in ast.walk(notebook.parse_cell(c.source))
                      if isinstance(n, ast.expr)}
        elif c.cell_type == "markdown":
            kept, inside_after = editions.strip_solutions(c.source, inside)
            lines |= {x.strip() for x in c.source.splitlines() if len(x.strip()) >= 30} - {
                x.strip() for x in kept.splitlines()}
            inside = inside_after
    return exprs - shown, lines


@pytest.mark.skipif(not CHAPTERS, reason="no chapter notebooks yet")
def test_student_zips_hold_no_solution_text(tmp_path):
    """Every chapter's student zip: no instructor folder, no folded solution line, and no
    expression a solution cell computes anywhere in its code (checks that would show the
    expected value are replaced by a note)."""
    zips = kit.build(ROOT / "book", tmp_path)
    assert len(zips) == len(CHAPTERS)
    for zpath, path in zip(zips, CHAPTERS, strict=True):
        exprs, lines = _solution_texts(nbformat.read(path, as_version=4))
        assert exprs, f"{path.stem}: no solution found to look for"
        with zipfile.ZipFile(zpath) as z:
            names = z.namelist()
            assert not any("instructor" in n for n in names), names
            nb = nbformat.reads(z.read(f"{path.stem}/{path.name}"), as_version=4)
            colab = nbformat.reads(z.read(f"{path.stem}/{path.stem}-colab.ipynb"), as_version=4)
            raw = "\n".join(z.read(n).decode(errors="replace") for n in names)
        for ed in (nb, colab):
            code = {ast.unparse(n) for c in ed.cells if c.cell_type == "code"
                    for n in ast.walk(notebook.parse_cell(c.source)) if isinstance(n, ast.expr)}
            assert not exprs & code, (path.stem, exprs & code)
        text = "\n".join(c.source for c in nb.cells)
        assert not [x for x in lines if x in text], path.stem
        assert "solution-start" not in raw and "{solution}" not in raw


def test_exercise_names_are_the_books_numbers():
    """Stubs, grader rows and feedback name an exercise as the book does ("Exercise 2.2"): the
    names agree with the plain export's index of the book (its own walk of the directives)."""
    docs = repo.toc_files()
    index = myst.Index(docs, ROOT / "references.bib")
    checked = 0
    for doc in docs:
        path = ROOT / f"{doc}.ipynb"
        if not notebook.CHAPTER.match(path.name):
            continue
        nb = nbformat.read(path, as_version=4)
        names = notebook.exercise_names(nb, path)
        for i, cell in enumerate(nb.cells):
            labels = notebook.exercise_labels(cell.source) if cell.cell_type == "markdown" else []
            if len(labels) == 1 and labels[0]:
                assert names[i] == index.labels[labels[0]][1], (doc, labels[0])
                checked += 1
        stubs = [c.source.splitlines()[0] for c in editions.student_edition(nb).cells
                 if "stub" in notebook.tags(c)]
        number = int(path.name[:2])
        assert all(s.startswith(f"# Your turn (Exercise {number}.") for s in stubs), stubs
    assert checked >= 30  # every chapter's exercises (10 chapters, 3 or more each)
