"""The import-graph checker (tests/test_import_graph.py) reads a module loaded by name as an
import: every way of building the name that Python allows leaves an edge, so a cycle made
through ``import_module`` or ``__import__`` is a cycle the checker finds."""

from __future__ import annotations

import pytest
from test_import_graph import _write, cycles, reachable, scan


def test_checker_follows_lazy_aliases_and_formatted_names(tmp_path):
    """A module ``__getattr__`` that loads a module by name is an import like any other."""
    _write(tmp_path, {
        "pkg/__init__.py": ("import importlib\n"
                            "def __getattr__(name):\n"
                            "    return importlib.import_module(f'pkg.{name}')\n"),
        "pkg/low.py": ("from importlib import import_module\n"
                       "def __getattr__(name):\n"
                       "    return getattr(import_module('pkg.high.view'), name)\n"),
        "pkg/high/__init__.py": "",
        "pkg/high/view.py": "from pkg import low\n",
        "pkg/other.py": "x = __import__('json')\n",
        "pkg/moved.py": ("import importlib\n_MOVED = {'view': 'pkg.high.view'}\n"
                         "def __getattr__(name):\n"
                         "    return importlib.import_module(_MOVED[name])\n"),
    })
    edges, _, _ = scan(tmp_path, "pkg", lazy={"pkg.moved"})
    assert edges["pkg"] == {"pkg.low", "pkg.high", "pkg.high.view", "pkg.other", "pkg.moved"}
    assert edges["pkg.moved"] == {"pkg.high.view"}  # a table of names written out: its names
    assert edges["pkg.low"] == {"pkg.high.view"}
    assert edges["pkg.other"] == set()
    assert cycles(edges) == [["pkg.high.view", "pkg.low"]]
    assert reachable(edges, "pkg.low") == {"pkg.high.view", "pkg.low"}
    # not declared a table of names: the name cannot be read, an edge to every module
    edges, _, _ = scan(tmp_path, "pkg", lazy=set())
    assert edges["pkg.moved"] == set(edges) - {"pkg.moved"}


#: A data module that loads the examples module by name (examples imports data: a cycle).
LOADS = {
    "plus": "import_module('pkg.' + name)",
    "plus, relative": "importlib.import_module('.' + name, package='pkg')",
    "format": "import_module('pkg.{}'.format(name))",
    "percent": "import_module('pkg.%s' % name)",
    "relative": "import_module('.examples', 'pkg')",
    "relative to __package__": "importlib.import_module('.examples', package=__package__)",
    "relative to __name__": "import_module('..examples', __name__)",
    "__import__": "__import__('pkg.' + name)",
    "__import__, relative": "__import__('examples', globals(), None, ['x'], 1)",
    "unreadable": "import_module(name)",
    "unreadable table": "import_module(TABLE[name])",
}


@pytest.mark.parametrize("how", LOADS)
def test_checker_finds_a_cycle_through_a_name_built_at_run_time(tmp_path, how):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/examples.py": "from pkg.data import draw\n",
        "pkg/data.py": ("import importlib\nfrom importlib import import_module\n"
                        "TABLE = {}\n"
                        f"def draw(name='examples'):\n    return {LOADS[how]}\n"),
    })
    edges, _, _ = scan(tmp_path, "pkg")
    assert "pkg.examples" in edges["pkg.data"], edges["pkg.data"]
    assert cycles(edges) == [["pkg.data", "pkg.examples"]]


def test_a_module_outside_the_package_is_no_edge(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/data.py": ("import importlib\n"
                        "a = importlib.import_module('json.' + 'decoder')\n"
                        "b = importlib.import_module('numpy.%s' % 'linalg')\n"
                        "c = __import__('os.path')\n"),
    })
    edges, _, _ = scan(tmp_path, "pkg")
    assert edges["pkg.data"] == set()
