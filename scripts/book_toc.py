"""The book's pages in the order of ``_toc.yml``: the one reader of the table of contents.

Used by the build scripts (``prerun.py``, ``export_plain.py``, run with ``scripts/`` on
``sys.path``) and by the tests (``tests/site_helpers.py``).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def toc_files(root: Path = ROOT) -> list[str]:
    """Every page listed in ``root/_toc.yml``, as paths without suffix: the root page first,
    then each part's chapters (or the top-level chapters) with their sections, in order."""
    import yaml

    toc = yaml.safe_load((Path(root) / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                files.append(e["file"])
            walk(e.get("sections"))

    for part in toc.get("parts") or []:
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return files
