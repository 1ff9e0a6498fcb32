"""The package's house rules, read from the source with ``ast`` (nothing is imported):

- the import graph of attnlib's modules has no cycle, counting imports at any nesting level
  (inside functions too); the lazy ``importlib`` aliases of ``__getattr__`` are not imports;
- nothing private (a module-level ``_name``) is imported or used across modules, except the
  names of the shared homes ``attnlib._validate`` and ``attnlib._runtime``;
- modules stay small: those above 450 lines are listed, above 500 the test fails.
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
def modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
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


def scan(root: Path, package: str):
    """Return (edges, private_uses, sizes).

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

        def private_use(target, name, line, mod=mod):
            if (name.startswith("_") and not name.startswith("__") and target != mod
                    and target not in SHARED_HOMES):
                private.append(f"{mod}: {target}.{name} (line {line})")

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
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


def test_nothing_private_imported_across_modules(graph):
    _, private, _ = graph
    assert not private, "private names used across modules:\n" + "\n".join(private)


def test_modules_stay_small(graph):
    _, _, sizes = graph
    big = sorted(((n, m) for m, n in sizes.items() if n > SOFT_LINES), reverse=True)
    for n, m in big:
        print(f"{m}: {n} lines (> {SOFT_LINES})")
    too_big = [f"{m}: {n} lines" for n, m in big if n > HARD_LINES]
    assert not too_big, f"modules over {HARD_LINES} lines:\n" + "\n".join(too_big)


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
    assert edges["pkg.b"] == {"pkg.a"}  # importlib strings are not edges
    assert edges["pkg.sub.d"] == {"pkg.a", "pkg.b"}
    assert cycles(edges) == [["pkg.a", "pkg.b"]]
    assert sorted(p.split(" (")[0] for p in private) == sorted([
        "pkg.b: pkg.a._hidden", "pkg.c: pkg.a._hidden", "pkg.c: pkg._validate._ok",
        "pkg.sub.d: pkg.a._hidden"])
    assert sizes["pkg.b"] == 6


# ----------------------------------------------------------------------------- the public face
LAZY_PUBLIC = {
    "att_svm": "attnlib.svm", "InfeasibleError": "attnlib.svm", "UncertifiedError": "attnlib.svm",
    "SolveConfig": "attnlib.svm", "solve_each": "attnlib.svm",
    "is_locally_optimal": "attnlib.optimality", "enumerate_selections": "attnlib.optimality",
    "Selections": "attnlib.optimality", "TrainConfig": "attnlib.train"}


def test_import_attnlib_stays_light():
    """``import attnlib`` loads neither cvxpy nor matplotlib; the lazy names resolve to their
    homes on first use."""
    code = ("import sys, attnlib as al\n"
            "heavy = [m for m in ('cvxpy', 'matplotlib', 'ipywidgets') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            f"homes = {LAZY_PUBLIC!r}\n"
            "import importlib\n"
            "for name, home in homes.items():\n"
            "    assert getattr(al, name) is getattr(importlib.import_module(home), name), name\n"
            "for mod in ('optimality', 'examples', 'explore', 'explorers', 'figures', 'widgets'):\n"
            "    assert getattr(al, mod).__name__ == 'attnlib.' + mod\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
