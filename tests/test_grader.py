"""The grader (attnlib.course): answers, not printed text; master checks; sandbox; gradebook.

The batch test is :func:`test_batch_of_honest_fake_and_hostile_submissions`: one synthetic
chapter (two exercises), an honest correct and an honest wrong submission, six fakes (a
printed verdict, a monkeypatched check, a hook, redefined reference data, a duplicated,
deleted or untagged check cell), an endless loop, a huge-output submission, one that steals
the master's solution through the grader's own path, one that writes outside its folder from C
(``torch.save``, ``sqlite3``), one that tries in turn to import the checks' oracle, to delete
files, to kill its parent and to send ``kill(0, SIGKILL)`` (each try caught, so that every
attack runs: one collector for the four), and a notebook that claims an easier chapter, graded
in one batch; no process of theirs survives it. The ``none`` run
plays a machine without user namespaces, where ``--unsafe`` grades with the audit hook only
(the attacks that the namespace alone stopped in the ``auto`` run). A submission whose attack
needs no tensors leaves torch out of its set-up cell (its collector costs a sixth).
tests/test_grader_sandbox.py tests the sandbox one attack at a time, among them a submission
whose two processes leave their session and loop (one asleep, one busy) until the wall-time
limit, in both sandboxes (it ran here too, and cost this batch half its time).
"""

import copy
import csv
import hashlib
import importlib.util
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
import torch

from attnlib.course import batch, checker, cli, editions, grading, jail, notebook
from attnlib.course import sandbox as sb

ROOT = Path(__file__).resolve().parents[1]

spec = importlib.util.spec_from_file_location("test_assignments_src",
                                              ROOT / "tests/test_assignments.py")
_ta = importlib.util.module_from_spec(spec)
spec.loader.exec_module(_ta)
MASTER = _ta.synthetic()  # one master: cell ids are random per notebook


def synthetic():
    return copy.deepcopy(MASTER)


def student_with(answers: dict, nb=None, edit=None, torch=True):
    """The student edition with stub ``k`` replaced by ``answers[k]``; ``edit(cells)`` may
    then change the cells further. ``torch=False``: the set-up cell imports attnlib only (no
    torch, no ``W``), for a submission whose attack and answers need no tensors: its collector
    starts in about 0.5 CPU-s instead of 3 (torch's import)."""
    st = editions.student_edition(nb or synthetic())
    stubs = [i for i, c in enumerate(st.cells) if "stub" in notebook.tags(c)]
    for k, src in answers.items():
        st.cells[stubs[k]].source = src
    if not torch:
        for c in st.cells:
            if "import torch" in c.source and not notebook.tags(c):
                c.source = "import attnlib as al\n"
    if edit:
        edit(st.cells)
    return st


SOL = [c.source for c in synthetic().cells if "solution" in notebook.tags(c)]
WRONG_MD = ("def md_step(W, G, lr, p):\n    return W - lr * G  # a plain gradient step\n")


def checks(cells):
    return [i for i, c in enumerate(cells) if "check" in notebook.tags(c)]


# -- units: the plan, the encoding ----------------------------------------------------------
def test_exercises_come_from_the_master():
    m = synthetic()
    m.cells[9].metadata["points"] = 3
    exs = grading.exercises(m)
    assert [(e.label, e.cell, e.answers, e.points) for e in exs] == [
        ("Exercise 1", 5, ["r"], 1.0), ("Exercise 2", 9, ["md_step(W, W, 0.1, 3.0)"], 3.0)]


def test_plan_skips_the_submissions_checks_and_captures_where_they_stood():
    m = synthetic()
    exs = grading.exercises(m)

    def kinds(st):
        return [("capture", s["capture"]) if "capture" in s else s["cell"]
                for s in grading.plan(st, m, exs)]

    st = student_with({})
    code = [c for c in st.cells if c.cell_type == "code"]
    at = [next(j for j, c in enumerate(code) if c.get("id") == e.cell_id) for e in exs]
    plan = kinds(st)
    assert plan == [j if j not in at else ("capture", at.index(j)) for j in range(len(code))]
    # each step says, in the book's words, where its cell stands (for the feedback on errors)
    runs = [s for s in grading.plan(st, m, exs) if "run" in s]
    first = [c.get("id") for c in st.cells].index(code[runs[0]["cell"]].get("id"))
    opened = [i for i, c in enumerate(st.cells) if c.cell_type == "markdown"
              and notebook.exercise_labels(c.source)]
    assert runs[0]["where"] == ("before the first exercise" if first < opened[0]
                                else "under Exercise 1")
    assert runs[-1]["where"] == "under Exercise 2"
    # the check cell's tag removed, its source replaced: still not run, still captured there
    st2 = student_with({}, edit=lambda cells: [cells[i].metadata.update(tags=[])
                                               for i in checks(cells)])
    st2.cells[checks(st.cells)[0]].source = "print('✓ correct')"
    assert kinds(st2) == plan
    # the check cell deleted: captured before the next cell the master has after it
    st3 = student_with({})
    del st3.cells[checks(st3.cells)[0]]
    p3 = kinds(st3)
    assert p3.index(("capture", 0)) == at[0] and len(p3) == len(plan)
    # a duplicated check cell (same id) is skipped too; the count comes from the master
    st4 = student_with({})
    st4.cells.insert(checks(st4.cells)[0], nbformat.from_dict(st4.cells[checks(st4.cells)[0]]))
    assert sum("capture" in s for s in grading.plan(st4, m, exs)) == 2
    # ids made up anew (nbformat does that for cells without one): found by their source
    st5 = student_with({})
    for c in st5.cells:
        c["id"] = "x" + c["id"]
    p5 = grading.plan(st5, m, exs)
    assert [s["capture"] for s in p5 if "capture" in s] == [0, 1]
    assert not any("al.check" in s.get("run", "") for s in p5)
    # a check hidden from students (it computes the expected value), ids changed: same
    m6 = synthetic()
    m6.cells[5].source = "al.check.check_value(r, int((torch.linalg.svdvals(W) > 0).sum()))"
    st6 = editions.student_edition(m6)
    for c in st6.cells:
        c["id"] = "x" + c["id"]
    p6 = grading.plan(st6, m6, grading.exercises(m6))
    code6 = [c for c in st6.cells if c.cell_type == "code"]
    hidden = next(j for j, c in enumerate(code6) if "Checked by the grader" in c.source)
    assert not any(s.get("cell") == hidden for s in p6)
    assert p6.index({"capture": 0}) == hidden  # captured where the hidden check stands


@pytest.mark.parametrize("value", [
    3, 2.5, None, True, "s", [1, (2, 3)], {(0, 1), (1, 0)}, {"a": [1.0]},
    torch.arange(6, dtype=torch.float64).reshape(2, 3), torch.tensor([1, 2]),
    torch.zeros(0, 3), torch.tensor(True)])
def test_encode_decode_round_trip(value):
    import json

    back = checker.decode(json.loads(json.dumps(jail.encode(value))))
    if isinstance(value, torch.Tensor):
        assert back.dtype == value.dtype and back.shape == value.shape
        assert torch.equal(back, value)
    else:
        assert back == value and type(back) is type(value)


def test_encode_refuses_objects_and_decode_refuses_unknown_data():
    import numpy as np

    with pytest.raises(TypeError, match="cannot be graded"):
        jail.encode(object())
    with pytest.raises(TypeError, match="string keys"):
        jail.encode({1: 2})
    with pytest.raises(TypeError, match="at most"):
        jail.encode(torch.zeros(jail.MAX_ELEMENTS + 1))
    assert checker.decode(jail.encode(np.array([[1.5]]))).tolist() == [[1.5]]
    with pytest.raises(ValueError, match="not graded"):
        checker.decode({"__tensor__": [1], "dtype": "object", "shape": [1]})
    with pytest.raises(ValueError, match="unknown"):
        checker.decode({"__pickle__": "gASV"})


def test_read_answers_refuses_links_and_huge_files(tmp_path):
    (tmp_path / "secret").write_text('{"answers": {}}')
    (tmp_path / "answers.json").symlink_to(tmp_path / "secret")
    with pytest.raises(OSError):
        sb.read_answers(tmp_path / "answers.json")
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(sb.MAX_ANSWER_BYTES + 1)
    with pytest.raises(ValueError, match="at most"):
        sb.read_answers(big)


def test_instrumented_check_records_each_call():
    code, n = checker.instrumented("x = 1\nal.check.check_value(a + 1, 2)\n"
                                  "al.check.check_rank(r, W)")
    got = {}
    env = {"al": type("al", (), {"check": type("c", (), {
        "check_value": staticmethod(lambda a, b: ("v", a, b)),
        "check_rank": staticmethod(lambda a, b: ("r", a, b))})})}
    exec(code, {**env, "W": "W", "__record__": lambda k, fb: got.setdefault(k, fb),
                "__answer_0__": "A0", "__answer_1__": "A1"})
    assert n == 2 and got == {0: ("v", "A0", 2), 1: ("r", "A1", "W")}


# -- the done-means test --------------------------------------------------------------------
def survivors(marker: str) -> list:
    """Processes whose command line names ``marker`` (a test's own temporary folder)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd:
            out.append((int(d.name), cmd[:160]))
    return out


def _snapshot(folder: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*")
            if p.is_file()}


def _attempts(*lines, answer="r = 0\n"):
    """A cell that tries each line (the grader may refuse it) and then ``answer``s."""
    return "import glob, os, shutil\n" + "".join(
        f"try:\n    {line}\nexcept Exception as e:\n    print('refused:', e)\n"
        for line in lines) + answer


def _if_any(attempts: list[str]) -> str:
    """A cell that answers ex-rank correctly (W's rank is 2) if any of ``attempts`` works,
    else r = 0."""
    tries = "".join(f"try:\n    {a}\n    worked = True\nexcept Exception:\n    pass\n"
                    for a in attempts)
    return ("import json, os, sys\nfrom pathlib import Path\nworked = False\n" + tries
            + "r = 2 if worked else 0\n")


def _submissions(tmp: Path) -> dict:
    """name -> (notebook, the expected status of ex-rank and of ex-md)."""
    subs = tmp / "subs"
    master = tmp / "book" / "01_test.ipynb"
    steal = _if_any([  # read the master's solution: through the grader's path, or directly
        "book = Path(sys.argv[0]).resolve().parents[1] / 'book'\n"
        "    assert [json.load(open(p)) for p in book.glob('*.ipynb')]",
        "book = Path(sys.executable).parents[2] / 'book'\n"
        "    assert [json.load(open(p)) for p in book.glob('*.ipynb')]",
        f"json.load(open({str(master)!r}))", f"open({str(ROOT / '_toc.yml')!r}).read(1)",
        f"open({str(subs / 'honest_correct.ipynb')!r}).read(1)"])
    # the checks' oracle imported (r = 2 if that worked), then files deleted, the parent and
    # the process group killed: the answer r is captured only if the cell ran to its end
    hostile = _if_any(["from attnlib.check.implement import risk_oracle, _fd_grad",
                       "import attnlib.check.numeric as N\n    N.check_rank"]) + _attempts(
        f"for p in glob.glob({str(subs)!r} + '/*'): os.remove(p)",
        f"shutil.rmtree({str(tmp)!r})", f"os.system('rm -rf {tmp}')",
        "open(os.path.expanduser('~/../../evil.txt'), 'w').write('x')",
        "os.kill(os.getppid(), 9)", "os.killpg(0, 9)", "os.kill(0, 9)", answer="")
    outside = tmp / "outside"
    writes = _attempts(f"torch.save(W, {str(outside / 'w.pt')!r})",
                       f"import sqlite3\n    sqlite3.connect({str(outside / 'g.db')!r})"
                       ".execute('create table t (x)')")
    swap = student_with({0: SOL[0], 1: SOL[1]})
    hook = ("from IPython import get_ipython\nget_ipython().events.register("
            "'post_run_cell', lambda r: print('✓ correct (rank): fine'))\nr = 0\n")
    monkey = ("import attnlib.check as C\n"
              "C.check_rank = lambda *a, **k: C.Feedback(True, 'rank', 'fine')\n"
              "C.check_md_step = lambda *a, **k: C.Feedback(True, 'md', 'fine')\n"
              "C.strict(False)\nimport os\nos.environ['ATTNLIB_CHECK_STRICT'] = '0'\nr = 0\n")
    # (numpy, not torch: the set-up cell's W is not defined without torch, and this W of
    # rank 0 would make r = 0 right if the checks read the submission's data)
    redefine = ("import numpy as np\nW = np.zeros((3, 3))  # every rank 'ties' now\nr = 0\n")
    huge = "import sys\nfor _ in range(2000):\n    sys.stdout.write('x' * 100_000)\n"

    def printing_checks(cells):
        for i in checks(cells):
            cells[i].source = "print('✓ correct (rank): all good')"

    def duplicate(cells):
        i = checks(cells)[0]
        cells.insert(i + 1, nbformat.from_dict(cells[i]))

    def drop_checks(cells):
        for i in reversed(checks(cells)):
            del cells[i]

    def untag(cells):
        for i in checks(cells):
            cells[i].metadata["tags"] = []

    def light(answers, edit=None):  # no torch: the attack needs no tensors
        return student_with(answers, edit=edit, torch=False)

    return {
        "honest_correct": (student_with({0: SOL[0], 1: SOL[1]}), "passed", "passed"),
        "honest_wrong": (student_with({0: "r = 3", 1: WRONG_MD}), "failed", "failed"),
        "fake_printing_check": (light({}, edit=printing_checks), "missing", "missing"),
        # importing attnlib.check is refused while grading: the cell stops before r = 0 (were
        # the import let through, r = 0 would read "failed", or "passed" had the patched
        # check reached the grader)
        "fake_monkeypatch": (light({0: monkey}), "missing", "missing"),
        "fake_hook": (light({0: hook}), "failed", "missing"),
        "fake_reference": (light({0: redefine}), "failed", "missing"),
        "fake_duplicate": (light({0: "r = 0"}, edit=duplicate), "failed", "missing"),
        "fake_deleted_check": (student_with({0: "r = 0", 1: WRONG_MD}, edit=drop_checks),
                               "failed", "failed"),
        "fake_untagged_check": (light({0: "r = 0"}, edit=untag), "failed", "missing"),
        # a busy loop after a correct answer: stopped at the CPU-time limit, the answer kept
        "endless_loop": (light({0: "r = 2", 1: "while True:\n    pass\n"}),
                         "passed", "missing"),
        "huge_output": (light({0: huge + "r = 1"}), "failed", "missing"),
        "steals_master": (light({0: steal}), "failed", "missing"),
        "writes_outside": (student_with({0: writes}), "failed", "missing"),
        "hostile": (light({0: hostile}), "failed", "missing"),
        "08_other_swap": (swap, "error", "error"),  # named 08_..., its metadata says 01_test
    }


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_batch_of_honest_fake_and_hostile_submissions(tmp_path, sandbox, monkeypatch):
    if sandbox == "auto" and not sb.namespace_works():
        pytest.skip("no unprivileged user namespaces here: the 'none' run covers the rest")
    book = tmp_path / "book"
    book.mkdir()
    master = synthetic()
    master.cells[9].metadata["points"] = 2  # ex-md is worth 2 points
    nbformat.write(master, book / "01_test.ipynb")
    nbformat.write(synthetic(), book / "08_other.ipynb")
    subs_dir, sandboxes = tmp_path / "subs", tmp_path / "sandboxes"
    for d in (subs_dir, sandboxes, tmp_path / "outside"):
        d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(sandboxes))  # this test's processes, by name
    # no experiment cache to copy into each submission's folder (the project's, ~190 results
    # once the chapters have run, was copied fifteen times): no submission here reads one
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path / "no-cache"))
    expected = _submissions(tmp_path)
    if sandbox == "none" and sb.namespace_works():  # the auto run had them all
        expected = {k: v for k, v in expected.items() if k in (
            "honest_correct", "fake_monkeypatch", "hostile", "08_other_swap")}
    if sandbox == "none":  # a machine without user namespaces, where --unsafe grades anyway
        monkeypatch.setattr(sb, "namespace_works", lambda: False)
    paths = []
    for name, (nb, *_) in expected.items():
        nb.metadata["course_kit"] = {"chapter": "01_test"}
        nbformat.write(nb, subs_dir / f"{name}.ipynb")
        paths.append(subs_dir / f"{name}.ipynb")
    before = _snapshot(tmp_path)
    # an honest collector uses about 3 CPU-s (IPython, torch); the endless loop stops at the
    # CPU-time limit long before the wall-time limit, even on a machine shared by many
    lim = sb.Limits(wall=60, cpu=6, memory_mb=6144, output=10_000)
    t0 = time.perf_counter()
    rows, ok = batch.grade_batch(paths, tmp_path / "out", book=book, lim=lim, jobs=2,
                                  sandbox="auto", unsafe=sandbox == "none")
    took = time.perf_counter() - t0
    left = survivors(str(sandboxes))
    assert not left, f"processes outlived the grading: {left}"
    assert not ok  # the notebook that claims another chapter is refused, and only it
    assert {r.submission for r in rows if r.status == "error"} == {
        str(p) for p in paths if "swap" in p.name}
    out = _snapshot(tmp_path / "out")
    assert {p: h for p, h in _snapshot(tmp_path).items() if p not in out} == before
    assert not (Path(tempfile.gettempdir()) / "evil.txt").exists()
    assert took < lim.wall * len(paths) / 2 + 120  # every submission within its limit
    with open(tmp_path / "out/grades.csv") as f:
        got = list(csv.DictReader(f))
    assert [(r["submission"], r["chapter"], r["exercise"], r["graded"]) for r in got] == [
        (str(p), "08_other" if "swap" in p.name else "01_test", ex, "auto") for p in paths
        for ex in ("Exercise 1", "Exercise 2")]
    for r in got:
        name = Path(r["submission"]).stem
        want = expected[name][1 if r["exercise"] == "Exercise 1" else 2]
        assert r["status"] == want, (name, r)
        if want != "error":
            assert r["max_points"] == ("1" if r["exercise"] == "Exercise 1" else "2")
        assert r["points"] == (r["max_points"] if want == "passed" else "0")
    passed_all = {Path(r["submission"]).stem for r in got} - {
        Path(r["submission"]).stem for r in got if r["status"] != "passed"}
    assert passed_all == {"honest_correct"}
    fb = (tmp_path / "out/feedback")
    assert len(list(fb.glob("*.md"))) == len(paths)
    assert "Score: 3 / 3" in next(fb.glob("*honest_correct.md")).read_text()
    assert "Score: 0 / 3" in next(fb.glob("*fake_monkeypatch.md")).read_text()
    if "endless_loop" in expected:
        loop = next(r for r in got if "endless" in r["submission"]
                    and r["exercise"] == "Exercise 2")
        assert f"the CPU-time limit of {lim.cpu} s" in loop["message"], loop
        huge = list(fb.glob("*huge_output.md"))
        assert huge and all(p.stat().st_size < 20_000 for p in huge)


@pytest.mark.slow
def test_unreadable_submission_is_recorded_and_the_exit_status_says_so(tmp_path, monkeypatch):
    from nbformat.v4 import new_markdown_cell

    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path / "no-cache"))  # none to copy for alice

    book = tmp_path / "book"
    book.mkdir()
    master = synthetic()
    master.cells.append(new_markdown_cell("*Why is the rank two?*", metadata={
        "tags": ["written"]}))
    nbformat.write(master, book / "01_test.ipynb")
    (tmp_path / "01_test_broken.ipynb").write_text("{not json")
    good = tmp_path / "01_test_alice.ipynb"
    alice = student_with({0: "r = 2"}, nb=master, torch=False)  # W's rank: right
    alice.cells[-1].source = "Two singular values are nonzero."
    nbformat.write(alice, good)
    rc = cli.main(["grade", str(tmp_path / "01_test_broken.ipynb"), str(good), "--book",
                   str(book), "--out", str(tmp_path / "out"), "--timeout", "60",
                   "--unsafe"])  # the sandbox where it runs, else the audit hook only
    assert rc == 1
    text = (tmp_path / "out/grades.csv").read_text()
    assert "01_test_broken.ipynb,01_test,Exercise 1,auto,0,1,error,not a readable notebook" \
        in text
    # the book's order: Exercise 1, Exercise 2, then the written answer placed after Exercise 2
    alice = [line for line in text.splitlines() if "01_test_alice.ipynb" in line]
    assert [line.split(",")[2:8] for line in alice] == [
        ["Exercise 1", "auto", "1", "1", "passed", alice[0].split(",")[7]],
        ["Exercise 2", "auto", "0", "1", "missing", alice[1].split(",")[7]],
        ["Exercise 2 (written)", "hand", "0", "1", "manual", "grade by hand: 5 words (in the "
         "feedback file)"]]
    feedback = next((tmp_path / "out/feedback").glob("*alice.md")).read_text()
    assert "> Two singular values are nonzero." in feedback
    # the written answer is counted apart: a correct Exercise 1 reads 1 / 2, not 1 / 3
    assert ("**Score: 1 / 2** (checked automatically); 1 written answer (1 point) to be "
            "graded by hand") in feedback


def test_grade_one_reads_only_data_and_survives_hostile_data(monkeypatch):
    import attnlib as al
    from attnlib.check import Feedback

    code, n = checker.instrumented("al.check.check_value(x, 1.0, name='x')")
    ns = {"al": al}

    def status(answers, k=0):
        return checker.grade_one(code, n, ns, answers, k, Feedback)["status"]

    def one(v):
        return {"answers": {"0": [{"value": v}]}}

    assert status(one(1.0)) == "passed" and status(one(2.0)) == "failed"
    assert status(one(None)) == "missing" and status({"answers": {}}) == "missing"
    assert status({"answers": {"0": [{"missing": "NameError: x"}]}}) == "missing"
    assert status(one({"__tensor__": [1.0], "dtype": "float64", "shape": [10**12]})) == "missing"
    assert status(one({"__pickle__": "gASV"})) == "missing"
    assert status({"answers": {"0": "junk"}}) == "missing"
    assert status(one("a string")) == "failed"  # a wrong type is the check's business
    assert status({"error": "the grader failed"}) == "error"
    # a check that runs too long on an answer is stopped
    slow, n1 = checker.instrumented("import time\ntime.sleep(5)\nal.check.check_value(x, 1.0)")
    monkeypatch.setattr(checker, "CHECK_SECONDS", 1)
    r = checker.grade_one(slow, n1, ns, one(1.0), 0, Feedback)
    assert r["status"] == "failed" and "ran past 1 s" in r["message"]


def test_written_answers_are_listed_for_manual_grading():
    from nbformat.v4 import new_markdown_cell

    m = synthetic()
    place = new_markdown_cell("*Your answer here.*", metadata={"tags": ["written"],
                                                              "points": 2})
    m.cells.insert(7, place)  # after ex-rank's solution block, before ex-md
    assert [(w.label, w.points) for w in grading.written(m)] == [("Exercise 1 (written)", 2.0)]
    st = editions.student_edition(m)
    assert any(c.get("id") == place.get("id") and "written" in notebook.tags(c) for c in st.cells)
    rows = grading.written_rows("s", st, m)
    assert [(r.status, r.points, r.max_points) for r, _ in rows] == [("missing", 0.0, 2.0)]
    assert "still empty" in rows[0][0].message
    next(c for c in st.cells if c.get("id") == place.get("id")).source = "Rank two: W has two\n" \
        "nonzero singular values."
    (row, text), = grading.written_rows("s", st, m)
    assert row.status == "manual" and "8 words" in row.message and text.startswith("Rank two")
    st.cells = [c for c in st.cells if c.get("id") != place.get("id")]
    assert "deleted" in grading.written_rows("s", st, m)[0][0].message
