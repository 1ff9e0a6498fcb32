"""scripts/book_toc.py: the one reader of _toc.yml (the build scripts and the tests use it)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("book_toc", ROOT / "scripts" / "book_toc.py")
book_toc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(book_toc)


def test_pages_in_reading_order_with_nested_sections(tmp_path):
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n"
        "- caption: One\n  chapters:\n  - file: a\n    sections:\n    - file: a1\n"
        "      sections:\n      - file: a11\n    - url: https://example.org\n  - file: b\n"
        "- caption: Two\n  chapters:\n  - file: c\n")
    assert book_toc.toc_files(tmp_path) == ["intro", "a", "a1", "a11", "b", "c"]
    (tmp_path / "_toc.yml").write_text("root: index\nchapters:\n- file: x\n- file: y\n")
    assert book_toc.toc_files(tmp_path) == ["index", "x", "y"]


def test_every_page_of_the_book_exists():
    pages = book_toc.toc_files()
    assert pages[0] and len(pages) == len(set(pages))
    missing = [p for p in pages if not any((ROOT / p).with_suffix(s).is_file()
                                           for s in (".ipynb", ".md"))]
    assert not missing, missing
