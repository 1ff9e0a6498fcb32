"""attnlib.explorers: one namespace resolves every name the book and scripts use.

The framework is tested in test_explorers_framework.py (and test_explorers_static.py,
test_explorers_play.py), each paper's explorers in test_explorers_<paper>.py; here only that
``al.explorers.<name>`` is the object of its home.
"""

import json
import re
from pathlib import Path

import pytest

import attnlib as al
from attnlib import explorers
from attnlib.explorers import framework, max_margin, mirror, mirror_text, tf_svm, tf_svm_heads

ROOT = Path(__file__).resolve().parents[1]

BOOK_EXPLORERS = {
    "token_plane": max_margin, "selection": max_margin, "softmax_explorer": max_margin,
    "joint_explorer": max_margin, "TOKEN_EXAMPLES": max_margin,
    "SELECTION_POSITIONS": max_margin, "parameterisation": tf_svm, "sweep": tf_svm,
    "global_share": tf_svm_heads, "lambda_head": tf_svm_heads,
    "causal_explorer": tf_svm, "mirror_descent": mirror, "word_attention": mirror_text,
}
HOMES = {**BOOK_EXPLORERS, **dict.fromkeys(framework.__all__, framework)}


@pytest.mark.parametrize("name", sorted(HOMES))
def test_every_name_is_its_homes_object(name):
    assert getattr(explorers, name) is getattr(HOMES[name], name)


def test_all_lists_the_framework_and_dir_every_name():
    assert sorted(explorers.__all__) == sorted(framework.__all__)
    assert set(HOMES) <= set(dir(explorers))
    assert al.explorers is explorers  # the lazy attribute of the package
    with pytest.raises(AttributeError, match="no_such_explorer"):
        explorers.no_such_explorer  # noqa: B018


def _used_names():
    """Every ``explorers.<name>`` in the book, README, CONTRIBUTING, scripts and benchmarks."""
    texts = []
    for nb in sorted((ROOT / "book").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        texts += ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    for pattern in ("README.md", "CONTRIBUTING.md", "scripts/*.py", "benchmarks/*.py"):
        texts += [p.read_text() for p in ROOT.glob(pattern)]
    return {m for t in texts for m in re.findall(r"\bal\.explorers\.([A-Za-z]\w*)", t)}


def test_every_name_the_book_uses_resolves():
    used = _used_names()
    assert {"token_plane", "mirror_descent", "parameterisation"} <= used  # the scan finds them
    assert not {n for n in used if not hasattr(explorers, n)}
