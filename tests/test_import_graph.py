"""The package's house rules, read from the source with ``ast`` (nothing is imported):

- the import graph of attnlib's modules has no cycle, counting imports at any nesting level
  (inside functions too) and ``import_module``/``__import__`` calls: a constant name is an edge
  to that module, a built one (``f"attnlib.{name}"``, ``"attnlib." + name``, ``%``,
  ``.format``, relative ones resolved) an edge to every module its constant prefix can reach,
  one that cannot be read an edge to every module (tests/test_import_graph_dynamic.py checks
  the checker); the scripts under ``scripts/`` (which import each other as top-level
  modules) have no cycle either;
- the course kit (``attnlib.course``) is layered: its notebook model at the bottom, its command
  line on top, and the rest of attnlib never imports it;
- the computations never reach the presentation: nothing in ``experiments`` imports
  ``explorers``, directly or through another module;
- nothing private (a module-level ``_name``) is imported or used across modules, except the
  names of the shared homes ``attnlib._validate`` and ``attnlib._runtime``;
- modules stay small: those above 450 lines are listed, above 500 the test fails, in attnlib
  and in every other Python file of the project (``scripts/``, ``tests/``, ``benchmarks/``,
  ``book/_ext/``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "attnlib"
SHARED_HOMES = {"attnlib._validate", "attnlib._runtime"}
SOFT_LINES, HARD_LINES = 450, 500


# ----------------------------------------------------------------------------- the checker
def modules(root: Path, package: str | None) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package (``package=None``: every
    .py file under ``root``, named as imported with ``root`` on ``sys.path``)."""
    out = {}
    for path in sorted((root / package if package else root).rglob("*.py")):
        if {"node_modules", "__pycache__"} & set(path.parts):
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _base(mod: str, path: Path, node: ast.ImportFrom) -> str:
    """Absolute name of the module an ImportFrom reads from (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for _ in range(node.level - 1):
        pkg = pkg.rpartition(".")[0]
    return f"{pkg}.{node.module}" if node.module else pkg


def _owner(name: str, mods) -> str | None:
    """The longest prefix of a dotted name that is one of the package's modules."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


#: Parameters of the two import calls, in order (a keyword gives the same slot).
_SIGNATURES = {"import_module": ("name", "package"),
               "__import__": ("name", "globals", "locals", "fromlist", "level")}

#: Modules whose import call reads its name from a table of module names that the file writes
#: out as string constants: their edges are the modules the file names. Any other name that
#: cannot be read counts as an edge to every module. (``attnlib/__init__.py`` needs no entry:
#: its ``f"attnlib.{name}"`` is read as an edge to every module under ``attnlib.``.)
LAZY_TABLES = {
    "attnlib.explorers",  # __getattr__: import_module(_HOMES[name]), _HOMES's values literals
}


def _import_call(node: ast.AST, loaders=()) -> dict[str, ast.expr] | None:
    """The arguments, by parameter name, of ``importlib.import_module(...)``,
    ``import_module(...)`` (or a name in ``loaders`` it is imported as) or ``__import__(...)``;
    else None. Arguments passed as ``**kwargs`` leave the name unreadable."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    name = "import_module" if name in loaders else name
    if name not in _SIGNATURES:
        return None
    args = dict(zip(_SIGNATURES[name], node.args))
    args.update((k.arg, k.value) for k in node.keywords if k.arg)
    if any(k.arg is None for k in node.keywords):
        args.setdefault("name", ast.Name("?"))
    return args if "name" in args else None


def _prefix(arg: ast.expr) -> tuple[str, bool]:
    """The constant start of a string expression, and whether it is the whole string: a
    constant is whole; an f-string, ``"..." + x``, ``"...%s" % x`` or ``"...{}".format(x)``
    gives the text before its first part that is not constant; anything else ``""``."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value, True
    if isinstance(arg, ast.JoinedStr):
        text = ""
        for part in arg.values:
            if not isinstance(part, ast.Constant):
                return text, False
            text += part.value
        return text, True
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        text, whole = _prefix(arg.left)
        if not whole:
            return text, False
        rest, whole = _prefix(arg.right)
        return text + rest, whole
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mod):
        return _prefix(arg.left)[0].split("%")[0], False
    if (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
            and arg.func.attr == "format"):
        return _prefix(arg.func.value)[0].split("{")[0], False
    return "", False


def _dynamic_targets(args: dict[str, ast.expr], mod: str, path: Path, mods,
                     named: set[str], lazy: set[str]) -> set[str]:
    """Modules an import call can load. A relative name (``import_module(".x", package)``,
    ``__import__("x", ..., level=1)``) is resolved against its package (a constant,
    ``__name__`` or ``__package__``). A whole name is an edge to its module; a partial one
    (``"attnlib." + name``) to every module that starts with its constant prefix; a name with
    no readable prefix (``import_module(name)``) to every module, or, for a module of
    ``lazy``, to every module the file names in a string constant (``named``)."""
    text, whole = _prefix(args["name"])
    here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    level = args.get("level")
    if isinstance(level, ast.Constant) and isinstance(level.value, int):
        text = "." * level.value + text  # __import__ relative to the calling module
        package = ast.Name("__package__")
    else:
        package = args.get("package")
    dots = len(text) - len(text.lstrip("."))
    if dots:
        base = (package.value if isinstance(package, ast.Constant) else
                {"__name__": mod, "__package__": here}.get(getattr(package, "id", "")))
        for _ in range(dots - 1):
            base = base and base.rpartition(".")[0]
        rest = text[dots:]
        text = (f"{base}.{rest}" if rest or not whole else base) if base else ""
    if not text:
        return named if mod in lazy else set(mods)
    if whole:
        target = _owner(text, mods)
        return {target} if target else set()
    return {m for m in mods if m.startswith(text)} | (
        {o} if (o := _owner(text.rstrip("."), mods)) else set())


def scan(root: Path, package: str | None, lazy: set[str] = LAZY_TABLES):
    """Return (edges, private_uses, sizes); ``lazy``: see LAZY_TABLES.

    edges: module -> set of modules it imports (within the package).
    private_uses: list of "importer: target._name (line N)" violations.
    sizes: module -> number of lines.
    """
    mods = modules(root, package)
    edges = {m: set() for m in mods}
    private, sizes = [], {}
    for mod, path in mods.items():
        src = path.read_text(encoding="utf-8")
        sizes[mod] = len(src.splitlines())
        tree = ast.parse(src, filename=str(path))
        aliases = {}  # local name -> module of the package it is bound to
        named = {n.value for n in ast.walk(tree)  # modules named in a string constant
                 if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in mods}

        def private_use(target, name, line, mod=mod):
            if (name.startswith("_") and not name.startswith("__") and target != mod
                    and target not in SHARED_HOMES):
                private.append(f"{mod}: {target}.{name} (line {line})")

        loaders = {a.asname for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                   and n.module == "importlib" for a in n.names if a.name == "import_module"}
        for node in ast.walk(tree):
            if (args := _import_call(node, loaders)) is not None:
                edges[mod] |= _dynamic_targets(args, mod, path, mods, named, lazy)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    target = _owner(a.name, mods)
                    if target is None:
                        continue
                    edges[mod].add(target)
                    if a.asname:
                        aliases[a.asname] = target
            elif isinstance(node, ast.ImportFrom):
                base = _base(mod, path, node)
                if _owner(base, mods) is None:
                    continue
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    if sub in mods:  # a submodule: from attnlib import data
                        edges[mod].add(sub)
                        aliases[a.asname or a.name] = sub
                    else:  # a name defined in (or re-exported by) the module `base`
                        target = _owner(base, mods)
                        edges[mod].add(target)
                        if a.name != "*":
                            private_use(target, a.name, node.lineno)
        for node in ast.walk(tree):  # module._name through an alias
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases):
                private_use(aliases[node.value.id], node.attr, node.lineno)
        edges[mod].discard(mod)
    return edges, private, sizes


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, on, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


# ----------------------------------------------------------------------------- the checks
@pytest.fixture(scope="module")
def graph():
    return scan(ROOT, PACKAGE)


def test_no_import_cycle(graph):
    edges, _, _ = graph
    found = cycles(edges)
    assert not found, "import cycles:\n" + "\n".join(
        " <-> ".join(c) + "\n    " + "; ".join(
            f"{m} -> {sorted(edges[m] & set(c))}" for m in c) for c in found)


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for w in edges.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


PRESENTATION = ("attnlib.explorers",)


def test_experiments_never_reach_the_explorers(graph):
    edges, _, _ = graph
    bad = {m: sorted(w for w in reachable(edges, m) if w.startswith(PRESENTATION))
           for m in edges if m.startswith("attnlib.experiments")}
    bad = {m: ws for m, ws in bad.items() if ws}
    assert not bad, "experiments reaching the presentation layer:\n" + "\n".join(
        f"{m} -> {ws}" for m, ws in sorted(bad.items()))


def test_course_kit_is_layered(graph):
    """The course kit (``attnlib.course``) is built bottom-up: the notebook model imports none
    of the kit, the collector (``jail``, run alone as ``python -I -c SOURCE``) none of attnlib,
    nothing imports the command line, and the rest of attnlib never reaches the kit."""
    edges, _, _ = graph
    course = {m for m in edges if m.startswith("attnlib.course")}
    assert {"attnlib.course.notebook", "attnlib.course.cli"} <= course
    assert edges["attnlib.course.notebook"] == set()
    assert edges["attnlib.course.jail"] == set()
    # (``attnlib`` itself is left out: its lazy ``import_module(f"attnlib.{name}")`` counts as
    # an edge to every module, the kit included, though it loads only its listed names)
    assert not [m for m in edges if "attnlib.course.cli" in edges[m] and m != PACKAGE]
    outside = {m: sorted(edges[m] & course) for m in edges if m not in course | {PACKAGE}}
    assert not {m: w for m, w in outside.items() if w}, outside


def test_scripts_have_no_import_cycle():
    edges, _, _ = scan(ROOT / "scripts", None)
    assert {"prerun", "assignments", "export_plain"} <= set(edges)  # the scripts were found
    found = cycles(edges)
    assert not found, "import cycles among scripts/:\n" + "\n".join(
        " <-> ".join(c) for c in found)


#: The project's other Python, under the same size rule as the package.
OTHER_PYTHON = ("scripts", "tests", "benchmarks", "book/_ext")


def _report_sizes(sizes: dict[str, int], where: str) -> None:
    """Print the modules above SOFT_LINES, fail on those above HARD_LINES."""
    big = sorted(((n, m) for m, n in sizes.items() if n > SOFT_LINES), reverse=True)
    for n, m in big:
        print(f"{where}{m}: {n} lines (> {SOFT_LINES})")
    too_big = [f"{where}{m}: {n} lines" for n, m in big if n > HARD_LINES]
    assert not too_big, f"modules over {HARD_LINES} lines:\n" + "\n".join(too_big)


@pytest.mark.parametrize("folder", OTHER_PYTHON)
def test_other_python_stays_small(folder):
    """scripts/, tests/, benchmarks/ and book/_ext/ keep the package's rule: no file over
    500 lines."""
    assert (ROOT / folder).is_dir(), folder
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines())
             for m, p in modules(ROOT / folder, None).items()}
    assert sizes, f"no Python file found under {folder}/"
    _report_sizes(sizes, f"{folder}/")


def test_nothing_private_imported_across_modules(graph):
    _, private, _ = graph
    assert not private, "private names used across modules:\n" + "\n".join(private)


def test_modules_stay_small(graph):
    _, _, sizes = graph
    _report_sizes(sizes, "")


# ----------------------------------------------------------------------------- the checker can fail
def _write(root: Path, files: dict[str, str]):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_checker_finds_cycles_inside_functions_and_private_uses(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg import a\n",
        "pkg/a.py": "from pkg.b import f\n_hidden = 1\n",
        "pkg/b.py": ("import importlib\n"
                     "def f():\n    from . import a\n    return a._hidden\n"
                     "def g():\n    return importlib.import_module('pkg.c')\n"),
        "pkg/c.py": "from pkg.a import _hidden\nfrom pkg._validate import _ok\n",
        "pkg/_validate.py": "_ok = 1\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/d.py": "from ..a import _hidden as h\nfrom .. import b\n",
    })
    edges, private, sizes = scan(tmp_path, "pkg")
    assert edges["pkg.b"] == {"pkg.a", "pkg.c"}  # an importlib string is an edge
    assert edges["pkg.sub.d"] == {"pkg.a", "pkg.b"}
    assert cycles(edges) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert sorted(p.split(" (")[0] for p in private) == sorted([
        "pkg.b: pkg.a._hidden", "pkg.c: pkg.a._hidden", "pkg.c: pkg._validate._ok",
        "pkg.sub.d: pkg.a._hidden"])
    assert sizes["pkg.b"] == 6


def test_checker_reads_scripts_as_top_level_modules(tmp_path):
    _write(tmp_path, {
        "tool.py": "import sys\nsys.path.insert(0, '.')\nimport helper\n",
        "helper.py": "def f():\n    import tool\n",
        "kit/__init__.py": "from .parts import x\n",
        "kit/parts.py": "x = 1\n",
        "js/node_modules/pkg/setup.py": "import tool\n",
    })
    edges, _, _ = scan(tmp_path, None)
    assert edges == {"helper": {"tool"}, "tool": {"helper"}, "kit": {"kit.parts"},
                     "kit.parts": set()}
    assert cycles(edges) == [["helper", "tool"]]


# ----------------------------------------------------------------------------- the public face
LAZY_PUBLIC = {
    "att_svm": "attnlib.svm", "InfeasibleError": "attnlib.svm", "UncertifiedError": "attnlib.svm",
    "SolveConfig": "attnlib.svm", "solve_each": "attnlib.svm",
    "is_locally_optimal": "attnlib.optimality", "enumerate_selections": "attnlib.optimality",
    "Selections": "attnlib.optimality", "TrainConfig": "attnlib.train",
    "random_data": "attnlib.data", "train": "attnlib.train.loop",
    "default_device": "attnlib._runtime"}


def _run_fresh(code: str, timeout: float) -> None:
    """Run ``code`` in a fresh Python (nothing of this process imported); fail on its error."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]


def test_import_attnlib_loads_no_torch():
    """``import attnlib`` (and ``dir(attnlib)``) loads no torch, numpy or cvxpy: every name
    loads on first use. A mistyped name is an AttributeError that names the package."""
    code = ("import sys, attnlib as al\n"
            "names = dir(al)\n"
            "heavy = [m for m in ('torch', 'numpy', 'cvxpy') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "try:\n    al.trian\n"
            "except AttributeError as e:\n"
            "    assert str(e) == \"module 'attnlib' has no attribute 'trian'\", e\n"
            "else:\n    raise AssertionError('al.trian resolved')\n")
    _run_fresh(code, timeout=120)


def test_the_name_table_points_downward(graph):
    """The package's name table names modules of the package, none of which imports the
    package itself (``import attnlib`` in a submodule would be a cycle through the table)."""
    import attnlib

    edges, _, _ = graph
    homes = {f"{PACKAGE}.{h}" for h in [*attnlib._HOMES, *attnlib._SUBMODULES]}
    assert homes <= set(edges), sorted(homes - set(edges))
    assert edges[PACKAGE] >= homes  # the checker sees the table's imports
    up = sorted(m for m in edges if m != PACKAGE and PACKAGE in edges[m])
    assert not up, f"modules importing the package itself: {up}"


def test_every_public_name_resolves_to_its_home():
    """``from attnlib import X`` works for every name in ``__all__``, gives the object of its
    home module, and ``dir(attnlib)`` lists every one (tab completion)."""
    import importlib

    import attnlib

    assert set(attnlib.__all__) <= set(dir(attnlib))
    for name in attnlib.__all__:
        scope = {}
        exec(f"from attnlib import {name}", scope)  # noqa: S102 - the statement under test
        if name in attnlib._SUBMODULES:
            assert scope[name] is importlib.import_module(f"attnlib.{name}"), name
        else:
            home = importlib.import_module(f"attnlib.{attnlib._NAMES[name]}")
            assert scope[name] is getattr(home, name), name
    assert callable(attnlib.train) and not isinstance(attnlib.train, type(attnlib))


def test_every_name_the_book_uses_is_listed():
    """Every ``al.<name>`` of the book, README, CONTRIBUTING, scripts and benchmarks is in
    ``dir(attnlib)`` (a name dropped from the table would be an AttributeError there)."""
    import json
    import re

    import attnlib

    texts = []
    for nb in sorted((ROOT / "book").glob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        texts += ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    for pattern in ("README.md", "CONTRIBUTING.md", "scripts/*.py", "benchmarks/*.py"):
        texts += [p.read_text(encoding="utf-8") for p in ROOT.glob(pattern)]
    used = {m for t in texts for m in re.findall(r"\bal\.([A-Za-z]\w*)", t)}
    assert {"random_data", "train", "att_svm", "explorers"} <= used  # the scan finds them
    assert not used - set(dir(attnlib)), sorted(used - set(dir(attnlib)))


@pytest.mark.slow
def test_import_attnlib_stays_light():
    """``import attnlib`` loads neither cvxpy nor matplotlib; the lazy names resolve to their
    homes on first use, and ``al.train`` is the function even when the subpackage
    ``attnlib.train`` was imported first (the import system binds it on the package); cvxpy
    is imported where a problem is built, not by the experiments, explorers or a fast-path
    solve."""
    code = ("import sys, attnlib as al\n"
            "heavy = [m for m in ('torch', 'cvxpy', 'matplotlib', 'ipywidgets') "
            "if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "import attnlib.experiments, attnlib.train.loop\n"
            f"homes = {LAZY_PUBLIC!r}\n"
            "import importlib\n"
            "for name, home in homes.items():\n"
            "    assert getattr(al, name) is getattr(importlib.import_module(home), name), name\n"
            "for mod in ('optimality', 'examples', 'explorers', 'figures'):\n"
            "    assert getattr(al, mod).__name__ == 'attnlib.' + mod\n"
            # cvxpy (about a second) only where a problem is built: not for the fast path
            "assert 'cvxpy' not in sys.modules\n"
            "import torch\n"
            "X = torch.tensor([[[1., 0.], [0., 1.]], [[2., 0.], [0., 1.]]], dtype=torch.float64)\n"
            "z = torch.tensor([[1., 0.], [1., 0.]], dtype=torch.float64)\n"
            "W = al.svm.att_svm(X, z, torch.tensor([0, 0]))\n"
            "assert abs(float(W[0, 0]) - 0.5) < 1e-6 and 'cvxpy' not in sys.modules, W\n"
            "al.svm.att_svm_primal(X.numpy(), z.numpy(), [0, 0])\n"
            "assert 'cvxpy' in sys.modules\n")
    _run_fresh(code, timeout=300)
