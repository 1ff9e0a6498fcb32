"""The build finds what scripts/prerun.py cached: for every notebook of the book, the
jupyter-cache key of the notebook as prerun stores it equals the key of the notebook as the
build reads it (no kernel; tests/test_execute_once.py checks the executions themselves).

The build reads a notebook through Sphinx's ``source-read`` event (book/_ext/book_site.py folds
the answer cells there) and myst-nb's reader, then looks its execution up by jupyter-cache's
hash of the code cells' source and metadata; prerun stores ``_as_the_build_reads(path)``
with its outputs, which the hash leaves out.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from jupyter_cache import get_cache
from myst_nb.core.read import standard_nb_read

ROOT = Path(__file__).resolve().parents[1]


def _source_read_hooks(book_site) -> list:
    """The handlers book_site's ``setup`` connects to ``source-read``, in the order given."""
    hooks = []
    app = SimpleNamespace(
        connect=lambda event, fn, priority=500: hooks.append(fn) if event == "source-read" else 0,
        add_config_value=lambda *a, **k: None, add_css_file=lambda *a, **k: None,
        add_domain=lambda *a, **k: None)
    book_site.setup(app)
    return hooks


def test_the_prerun_caches_each_notebook_under_the_key_the_build_looks_up(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    monkeypatch.syspath_prepend(str(ROOT / "book" / "_ext"))
    import book_site
    import prerun

    hooks = _source_read_hooks(book_site)
    assert hooks, "book_site connects no source-read handler"
    cache = get_cache(str(tmp_path / "cache"))
    notebooks = prerun.toc_notebooks()
    assert len(notebooks) >= 10  # the chapters and the report were found
    folded = 0
    for path in notebooks:
        source = [path.read_text(encoding="utf-8")]
        app = SimpleNamespace(env=SimpleNamespace(doc2path=lambda docname, path=path: path))
        for hook in hooks:  # Sphinx's source-read event
            hook(app, path.stem, source)
        folded += source[0] != path.read_text(encoding="utf-8")
        _, built = cache.create_hashed_notebook(standard_nb_read(source[0]))  # myst-nb
        _, stored = cache.create_hashed_notebook(prerun._as_the_build_reads(str(path)))
        assert stored == built, f"{path.name}: prerun's cache key is not the build's"
    # the fold changes the notebooks with answers (so the keys differ without it)
    assert folded == sum(
        any("solution" in c.get("metadata", {}).get("tags", []) for c in
            json.loads(p.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code")
        for p in notebooks) > 0
