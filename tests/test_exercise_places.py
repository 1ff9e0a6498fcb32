"""Every exercise of every chapter has an answer place, and every chapter has one exercise in
which the student writes the idea with an independent check."""

import ast
from pathlib import Path

import nbformat
import pytest

from attnlib.course import grading, notebook

ROOT = Path(__file__).resolve().parents[1]

CHAPTERS = notebook.chapters(ROOT / "book")
# the checks that compare with an independent computation (not the library call the chapter
# teaches): finite differences, KKT conditions, a definition evaluated query by query, a mirror
# step written out, Bregman divergences to two SVMs, SVMs as least-distance problems (NNLS),
# margins and finite-part equations from their definition, the selection statistics sentence
# by sentence
INDEPENDENT = {"check_gd_step", "check_kq_step", "check_att_svm", "check_causal_attention",
               "check_md_step", "check_md_direction", "check_local_selections",
               "check_joint_step", "check_unit_margins", "check_finite_part",
               "check_planted_attention", "check_relaxed_prompt"}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_exercise_has_an_answer_place(path):
    nb = nbformat.read(path, as_version=4)
    # every exercise of the book ("Exercise 2.1", ...), named as the grader names its rows
    labels = list(dict.fromkeys(n for n in notebook.exercise_names(nb) if n))
    assert len(labels) == sum(len(notebook.exercise_labels(c.source)) for c in nb.cells
                              if c.cell_type == "markdown")
    graded = {e.label.split("#")[0] for e in grading.exercises(nb)}
    written = {w.label.removesuffix(" (written)") for w in grading.written(nb)}
    missing = [lab for lab in labels if lab not in graded | written]
    assert labels and not missing, f"{path.name}: exercises without an answer place: {missing}"
    for w in grading.written(nb):  # a written place is hidden on the site, shown in notebooks
        cell = nb.cells[w.cell]
        assert {"written", "remove-cell"} <= set(cell.metadata.get("tags", [])), w.label


CHAPTERS_WITH_IMPLEMENT = ["01_token_selection", "02_att_svm", "03_local_global",
                           "04_joint_head", "05_w_vs_kq", "06_overparameterization",
                           "07_nonlinear_heads", "08_sequences_causal", "09_mirror_descent",
                           "10_real_data"]


def test_every_chapter_is_listed():
    assert [p.stem for p in CHAPTERS] == CHAPTERS_WITH_IMPLEMENT


@pytest.mark.parametrize("stem", CHAPTERS_WITH_IMPLEMENT)
def test_chapter_has_a_write_it_yourself_exercise(stem):
    nb = nbformat.read(ROOT / "book" / f"{stem}.ipynb", as_version=4)
    used = set()
    for c in nb.cells:
        if c.cell_type == "code" and "check" in c.metadata.get("tags", []):
            used |= {n.func.attr for n in ast.walk(ast.parse(c.source))
                     if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert used & INDEPENDENT, f"{stem}: no exercise checked against an independent oracle"
