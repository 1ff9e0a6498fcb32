"""The import-graph checker (tests/test_import_graph.py) reads a module loaded by name as an
import: every way of building the name that Python allows leaves an edge, so a cycle made
through ``import_module`` or ``__import__`` is a cycle the checker finds."""

from __future__ import annotations

import pytest
from test_import_graph import LAZY_TABLES, PACKAGE, ROOT, _write, cycles, reachable, scan


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


#: A module ``pkg.sub.data`` that loads ``pkg.sub.examples`` by name (examples imports data:
#: a cycle), and the modules each way of naming it is an edge to: the one module a whole name
#: reads as, every module under a constant prefix, or every module when nothing can be read.
#: (``pkg.examples``, a decoy, is no edge of a name resolved against the right package.)
WHOLE, PREFIX = {"pkg.sub.examples"}, {"pkg.sub.examples", "pkg.sub"}
ALL = {"pkg", "pkg.examples", "pkg.sub", "pkg.sub.examples"}
LOADS = {
    "plus": ("import_module('pkg.sub.' + name)", PREFIX),
    "plus, relative": ("importlib.import_module('.' + name, package='pkg.sub')", PREFIX),
    "format": ("import_module('pkg.sub.{}'.format(name))", PREFIX),
    "percent": ("import_module('pkg.sub.%s' % name)", PREFIX),
    "aliased": ("load('pkg.sub.' + name)", PREFIX),
    "relative": ("import_module('.examples', 'pkg.sub')", WHOLE),
    "relative to __package__": ("importlib.import_module('.examples', package=__package__)",
                                WHOLE),
    "relative to __name__": ("import_module('..examples', __name__)", WHOLE),
    "__import__": ("__import__('pkg.sub.' + name)", PREFIX),
    "__import__, relative": ("__import__('examples', globals(), None, ['x'], 1)", WHOLE),
    "unreadable": ("import_module(name)", ALL),
    "unreadable table": ("import_module(TABLE[name])", ALL),
    "keywords unpacked": ("import_module(**{'name': 'pkg.sub.examples'})", ALL),
}


@pytest.mark.parametrize("how", LOADS)
def test_checker_finds_a_cycle_through_a_name_built_at_run_time(tmp_path, how):
    call, expected = LOADS[how]
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/examples.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/examples.py": "from pkg.sub.data import draw\n",
        "pkg/sub/data.py": ("import importlib\nfrom importlib import import_module\n"
                            "from importlib import import_module as load\nTABLE = {}\n"
                            f"def draw(name='examples'):\n    return {call}\n"),
    })
    edges, _, _ = scan(tmp_path, "pkg")
    assert edges["pkg.sub.data"] == expected
    assert cycles(edges) == [["pkg.sub.data", "pkg.sub.examples"]]


def test_the_lazy_table_names_every_module_it_loads():
    """attnlib.explorers is read as loading only the modules its file names in string
    constants (LAZY_TABLES): every module its table ``_HOMES`` loads must be among them, or a
    cycle through the table would go unseen."""
    import attnlib.explorers as ex

    edges, _, _ = scan(ROOT, PACKAGE)
    assert "attnlib.explorers" in LAZY_TABLES
    assert set(ex._HOMES.values()) <= edges["attnlib.explorers"]


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
