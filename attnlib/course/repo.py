"""The repository the course kit works in: its root, its table of contents, its release and
where the book is published.

The course kit reads the book from a checkout of the repository (``book/``, ``_toc.yml``,
``_config.yml``, ``references.bib``), the folder above the ``attnlib`` package.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


def git_ref() -> str:
    """The book's release: the tag of HEAD if it has one, else HEAD's commit hash (outside a
    git checkout: the branch of _config.yml, with a warning)."""
    for cmd in (["git", "describe", "--tags", "--exact-match", "HEAD"],
                ["git", "rev-parse", "HEAD"]):
        try:
            r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        except OSError:  # no git
            break
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    import yaml

    branch = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["branch"]
    print(f"[export_plain] WARNING: not a git checkout: the install cell follows {branch!r}",
          file=sys.stderr)
    return branch


def repo_url() -> str:
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"].rstrip("/")


def site_url() -> str:
    """The published book: ``html.baseurl`` of _config.yml, else the GitHub Pages site of the
    repository (``https://OWNER.github.io/NAME``, where the build is published)."""
    import yaml

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    base = (cfg.get("html") or {}).get("baseurl") or ""
    if base:
        return base.rstrip("/")
    m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+)", repo_url())
    if not m:
        raise ValueError(f"_config.yml: no html.baseurl and the repository {repo_url()!r} is "
                         "not on GitHub: cannot tell where the book is published")
    return f"https://{m.group(1).lower()}.github.io/{m.group(2)}"


def doc_path(doc: str) -> Path:
    for suffix in (".ipynb", ".md"):
        if (ROOT / f"{doc}{suffix}").is_file():
            return ROOT / f"{doc}{suffix}"
    raise FileNotFoundError(doc)
