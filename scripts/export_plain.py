#!/usr/bin/env python3
"""Export the book's notebooks as plain Jupyter notebooks (no MyST), for Colab and downloads.

    python scripts/export_plain.py [--out DIR] [--ref REF] [NOTEBOOK ...]

MyST only renders in Jupyter Book and in JupyterLab with jupyterlab-myst.  Everywhere else
(Colab, a downloaded notebook in classic Jupyter, VS Code) ``{prf:theorem}`` blocks show as
code boxes of raw LaTeX and ``{cite}`` roles as literal text.  This script writes a copy of each
chapter (default: every notebook of _toc.yml, into ``_build/plain/book/``) in which

* theorem-like blocks (``{prf:...}``) and admonitions become headed paragraphs
  ("**Theorem 5.1** (title).") with an HTML anchor for their label;
* exercises become "**Exercise 5.1**" paragraphs and their solutions folded HTML
  ``<details>`` blocks (both numbered per chapter, "Exercise 5.1" as in the grader);
* ``{doc}``, ``{ref}``, ``{prf:ref}`` become links with the target's title or number: inside
  the chapter an anchor (``#label``), to another page an absolute link to that page of the
  published site (``https://OWNER.github.io/NAME/book/02_att_svm.html#label``: a relative link
  breaks in Colab, which opens one notebook alone);
  ``{cite}``/``{cite:t}``/``{cite:p}`` become "Author (year)" citations and the chapters'
  ``[Author, year](cite:KEY)`` links (_config.yml) point to the References cell listing the
  cited works (from references.bib, formatted as the book's bibliography: "Tarzanagh, D. A.,
  Li, Y., ... & Oymak, S. (2023). Title. Venue."); Markdown cells tagged remove-cell are
  dropped;
* the self-study edition (the default) keeps the solutions, folded: written ones in
  ``<details>``, answer code cells hidden until opened (Colab's form view, JupyterLab's
  ``source_hidden``); ``--student`` writes the assignment edition (stubs, no solutions);
* ``(label)=`` targets become ``<a id="label"></a>`` anchors; ``$``/``$$`` math is kept;
* a figure cell (myst-nb ``mystnb.figure`` metadata) is followed by a Markdown cell with its
  number and caption ("**Figure 2.1.** ..."), the target of ``{numref}`` links;
* the Colab install cell is written one way, pinned to the book's release (``--ref``: by
  default the tag of the checked-out commit, else the commit itself).

An unknown directive or role is an error, so that the export never ships raw MyST.
The build (book/_ext/book_site.py) writes the exports into the site (``<site>/plain/``); the
site's Colab and download buttons open them.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
from pathlib import Path

from book_toc import toc_files  # scripts/ is on sys.path: this script's own folder

ROOT = Path(__file__).resolve().parents[1]

#: prf directive name -> heading word
PRF_NAMES = {
    "theorem": "Theorem", "lemma": "Lemma", "corollary": "Corollary",
    "proposition": "Proposition", "definition": "Definition", "remark": "Remark",
    "conjecture": "Conjecture", "example": "Example", "assumption": "Assumption",
    "axiom": "Axiom", "criterion": "Criterion", "observation": "Observation",
    "property": "Property", "algorithm": "Algorithm", "claim": "Claim",
}
ADMONITIONS = {"note", "tip", "hint", "important", "warning", "caution", "attention",
               "danger", "error", "seealso", "admonition"}
FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[^}\s]+)\}[ \t]*(?P<arg>.*)$")
LABEL_LINE = re.compile(r"^\((?P<label>[^)\s]+)\)=\s*$")
ROLE = re.compile(r"(?<![`\w])\{(?P<name>[a-z][\w:-]*)\}`(?P<text>[^`]+)`")
INSTALL_MARK = "google.colab"
#: roles, code spans and citations written as links: [Tarzanagh et al., 2023](cite:KEY)
INLINE = re.compile(ROLE.pattern + r"|(?P<code>`+[^`]*?`+)|\]\(cite:(?P<cite>[^)\s]+)\)")


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


def install_cell_source(url: str, ref: str) -> str:
    """The one way the export installs attnlib on Colab: pinned to the release ``ref``.

    It keeps Colab's own packages: attnlib asks for ``ipywidgets>=7.7`` and Colab ships 7.7.1,
    which its kernel imports at start (an upgrade would ask for a runtime restart) and its
    front end renders natively, so the explorers need no ``enable_custom_widget_manager()``
    (a third-party manager loaded from a CDN). tests/test_colab_widgets.py runs this cell
    with ipywidgets 7.7.1 and shows an explorer."""
    return ("# Colab only: install attnlib at the book's release (elsewhere: see README.md).\n"
            "import sys\n\n"
            f'if "{INSTALL_MARK}" in sys.modules:\n'
            f'    %pip install -q "attnlib @ git+{url}@{ref}"')


def toc_docs() -> list[str]:
    """Every page of _toc.yml, root first, as paths without suffix."""
    return toc_files(ROOT)


def _doc_path(doc: str) -> Path:
    for suffix in (".ipynb", ".md"):
        if (ROOT / f"{doc}{suffix}").is_file():
            return ROOT / f"{doc}{suffix}"
    raise FileNotFoundError(doc)


def _markdown(path: Path) -> str:
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def _chapter(doc: str) -> str | None:
    m = re.match(r"(\d+)_", Path(doc).name)
    return str(int(m.group(1))) if m else None


def _directive_at(lines: list[str], i: int):
    """The fenced directive opening at ``lines[i]`` (a ``FENCE`` match): ``(name, arg,
    options, body, end)``, ``end`` the index of its closing fence (or ``len(lines)``)."""
    m = FENCE.match(lines[i])
    fence = m.group("fence")
    j = i + 1
    opts = {}
    while j < len(lines) and re.match(r"^:[\w-]+:", lines[j]):
        k, _, v = lines[j][1:].partition(":")
        opts[k.strip()] = v.strip()
        j += 1
    end = j
    while end < len(lines) and lines[end].rstrip() != fence:
        end += 1
    return m.group("name"), m.group("arg").strip(), opts, "\n".join(lines[j:end]), end


def _walk_blocks(text: str):
    """Yield (name, arg, options, body) for each top-level fenced directive, in order."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        *block, end = _directive_at(lines, i)
        yield tuple(block)
        i = end + 1


class Index:
    """Titles, labels, numbers and citations of the whole book (for resolving references)."""

    def __init__(self, docs: list[str], bib: Path):
        self.docs = docs
        self.titles: dict[str, str] = {}
        self.labels: dict[str, tuple[str, str]] = {}  # label -> (doc, display text)
        for doc in docs:
            path = _doc_path(doc)
            text = _markdown(path)
            h = re.search(r"^#\s+(.+)$", text, re.M)
            self.titles[doc] = h.group(1).strip() if h else Path(doc).name
            self._index(doc, text)
            self._figures(doc, path)
        self.bib = parse_bib(bib) if bib.is_file() else {}
        self.repo, self.ref, self.site = repo_url(), None, site_url()

    def _figures(self, doc: str, path: Path) -> None:
        """The numbered figures of a notebook (myst-nb's ``mystnb.figure`` cell metadata and
        ``{figure}`` directives with a ``:name:``), "Figure 2.1", ... in reading order."""
        if path.suffix != ".ipynb":
            return
        chap, k = _chapter(doc), 0
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            names = []
            if cell["cell_type"] == "code":
                fig = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
                names = [fig["name"]] if fig.get("name") else []
            else:
                names = re.findall(r"^:name:\s*(\S+)", "".join(cell["source"]), re.M)
            for name in names:
                k += 1
                self.labels[name] = (doc, f"Figure {chap}.{k}" if chap else f"Figure {k}")

    def _index(self, doc: str, text: str) -> None:
        chap = _chapter(doc)
        counts: dict[str, int] = {}

        def number(kind: str) -> str:
            counts[kind] = counts.get(kind, 0) + 1
            return f"{chap}.{counts[kind]}" if chap else str(counts[kind])

        lines = text.split("\n")
        for n, line in enumerate(lines):
            m = LABEL_LINE.match(line)
            if m:  # a section label: the next heading's text
                nxt = next((x for x in lines[n + 1:] if x.strip()), "")
                self.labels[m.group("label")] = (doc, nxt.lstrip("#").strip())
        for name, arg, opts, _body in _walk_blocks(text):
            kind = name.split(":", 1)[1] if name.startswith("prf:") else name
            if name.startswith("prf:") and kind in PRF_NAMES:
                word = PRF_NAMES[kind]
                num = number(word)
                if "label" in opts:
                    self.labels[opts["label"]] = (doc, f"{word} {num}")
            elif name in ("exercise", "exercise-start"):
                num = number("Exercise")
                label = opts.get("label") or arg
                if label:
                    self.labels[label] = (doc, f"Exercise {num}")

    def link(self, src_doc: str, doc: str, anchor: str = "") -> str:
        """A link from the export of ``src_doc`` to ``doc``: an anchor of the same notebook,
        else the page of the published site (absolute: an export opened alone, in Colab or
        as a download, has no sibling files)."""
        _doc_path(doc)  # it exists
        frag = f"#{anchor}" if anchor else ""
        if doc == src_doc:
            return frag or "#"
        return f"{self.site}/{doc}.html{frag}"


def parse_bib(path: Path) -> dict[str, dict[str, str]]:
    """A small BibTeX reader: key -> fields (author, year, title, ...), braces removed."""
    entries = {}
    text = path.read_text(encoding="utf-8")
    for m in re.finditer(r"@(\w+)\s*\{\s*([^,\s]+)\s*,", text):
        start = m.end()
        depth, i = 1, start
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[start:i - 1]
        fields = {}
        for f in re.finditer(r"(\w+)\s*=\s*", body):
            j = f.end()
            if j >= len(body):
                continue
            if body[j] == "{":
                d, k = 1, j + 1
                while k < len(body) and d:
                    d += {"{": 1, "}": -1}.get(body[k], 0)
                    k += 1
                value = body[j + 1:k - 1]
            else:
                value = re.match(r'"?([^",\n]*)', body[j:]).group(1)
            fields[f.group(1).lower()] = re.sub(r"\s+", " ", value.replace("{", "").replace(
                "}", "")).strip()
        entries[m.group(2)] = fields
    return entries


#: the LaTeX accents of references.bib, as parse_bib leaves them (braces removed)
_ACCENTS = {r'\"e': "ë", r'\"o': "ö", r'\"u': "ü", r'\"a': "ä", r"\'e": "é", r"\'E": "É",
            r"\'a": "á", r"\`e": "è", r"\L": "Ł", r"\l": "ł", r"\o": "ø", r"\ss": "ß",
            r"\~n": "ñ", r"\c c": "ç", r"\&": "&"}


def detex(text: str) -> str:
    """references.bib's LaTeX accents as Unicode letters ("Kaiser, \\Lukasz" -> "Łukasz")."""
    for tex, letter in sorted(_ACCENTS.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(tex, letter)
    return text


def _initials(given: str) -> str:
    """'Davoud Ataee' -> 'D. A.'; 'Jean-Pierre' -> 'J.-P.'; 'Aidan N.' -> 'A. N.'."""
    parts = []
    for name in given.split():
        parts.append("-".join(f"{piece[0]}." for piece in name.split("-") if piece))
    return " ".join(parts)


def format_authors(field: str) -> str:
    """A BibTeX author list as the book's bibliography writes it (APA): "Tarzanagh, D. A.,
    Li, Y., Zhang, X., & Oymak, S."; more than 20 authors: the first 19, "...", the last."""
    names = [detex(a.strip()) for a in field.split(" and ") if a.strip()]
    people = []
    for n in names:
        if n == "others":
            continue
        family, _, given = n.partition(",") if "," in n else (n.rsplit(" ", 1)[-1], "",
                                                              n.rsplit(" ", 1)[0] if " " in n
                                                              else "")
        given = given.strip()
        people.append(f"{family.strip()}, {_initials(given)}" if given else family.strip())
    if not people:
        return "Anonymous"
    if len(people) > 20:
        return ", ".join(people[:19]) + ", ... " + people[-1]
    if len(people) == 1:
        return people[0]
    return ", ".join(people[:-1]) + ", & " + people[-1]


def _authors(fields: dict[str, str]) -> str:
    names = [detex(a.strip()) for a in fields.get("author", "Anonymous").split(" and ")]
    family = [n.split(",")[0].strip() if "," in n else n.split()[-1] for n in names]
    if len(family) == 1:
        return family[0]
    if len(family) == 2:
        return f"{family[0]} and {family[1]}"
    return f"{family[0]} et al."


class Converter:
    """MyST Markdown of one document -> plain Jupyter Markdown."""

    def __init__(self, index: Index, doc: str):
        self.index, self.doc = index, doc
        self.chap = _chapter(doc)
        self.counts: dict[str, int] = {}
        self.cited: list[str] = []
        self.last_exercise = "the exercise"  # the exercise an answer code cell answers

    def number(self, kind: str) -> str:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return f"{self.chap}.{self.counts[kind]}" if self.chap else str(self.counts[kind])

    # ---------------------------------------------------------------- roles
    def _cited(self, key: str) -> dict[str, str]:
        """``key``'s BibTeX fields; the key is listed (once) in the References cell."""
        if key not in self.index.bib:
            raise ValueError(f"{self.doc}: unknown citation key {key!r}")
        self.cited += [] if key in self.cited else [key]
        return self.index.bib[key]

    def _cite(self, keys: str, textual: bool) -> str:
        parts = []
        for key in (k.strip() for k in keys.split(",")):
            fields = self._cited(key)
            who, year = _authors(fields), fields.get("year", "n.d.")
            parts.append(f"[{who} ({year})](#ref-{key})" if textual
                         else f"[{who}, {year}](#ref-{key})")
        return "; ".join(parts) if textual else f"({'; '.join(parts)})"

    def _role(self, m: re.Match) -> str:
        name, text = m.group("name"), m.group("text")
        explicit = re.match(r"^(?P<title>.*?)\s*<(?P<target>[^>]+)>$", text, re.S)
        title, target = (explicit.group("title"), explicit.group("target")) if explicit \
            else (None, text)
        if name == "doc":
            doc = (Path(self.doc).parent / target).as_posix() if not target.startswith("/") \
                else target.lstrip("/")
            doc = re.sub(r"\.(ipynb|md)$", "", doc)
            return f"[{title or self.index.titles[doc]}]({self.index.link(self.doc, doc)})"
        if name in ("ref", "prf:ref", "numref"):
            if target not in self.index.labels:
                raise ValueError(f"{self.doc}: unknown reference {target!r}")
            doc, shown = self.index.labels[target]
            if title and "%s" in title:  # {numref}`Figure %s <label>`
                title = title.replace("%s", shown.split()[-1])
            return f"[{title or shown}]({self.index.link(self.doc, doc, target)})"
        if name in ("cite", "cite:p", "cite:ps"):
            return self._cite(target, textual=False)
        if name in ("cite:t", "cite:ts"):
            return self._cite(target, textual=True)
        if name == "math":
            return f"${text}$"
        if name in ("fas", "fab", "far"):
            return ""  # an icon: nothing in plain Markdown
        if name in ("sub", "sup", "kbd", "abbr", "term", "code", "samp"):
            return f"`{text}`" if name in ("code", "samp", "kbd") else (title or text)
        raise ValueError(f"{self.doc}: no plain form for the role {{{name}}}")

    def inline(self, text: str) -> str:
        """Roles -> plain Markdown; code spans (`{exercise-start}` in prose) stay as they are."""
        def sub(m: re.Match) -> str:
            if m.group("cite"):  # [text](cite:KEY) -> [text](#ref-KEY)
                return f"](#ref-{m.group('cite')})" if self._cited(m.group("cite")) else ""
            return m.group(0) if m.group("code") else self._role(ROLE.match(m.group(0)))

        return INLINE.sub(sub, text)

    # ---------------------------------------------------------------- blocks
    def convert(self, text: str) -> str:
        lines = text.split("\n")
        out: list[str] = []
        i = 0
        in_code = None
        while i < len(lines):
            line = lines[i]
            if in_code:  # plain fenced code: copied as it is
                out.append(line)
                if line.strip() == in_code:
                    in_code = None
                i += 1
                continue
            if FENCE.match(line):
                name, arg, opts, body, end = _directive_at(lines, i)
                out.append(self.directive(name, arg, opts, body))
                i = end + 1
                continue
            code = re.match(r"^(`{3,}|~{3,})", line)
            if code:
                in_code = code.group(1)
                out.append(line)
                i += 1
                continue
            lab = LABEL_LINE.match(line)
            if lab:
                out.append(f'<a id="{lab.group("label")}"></a>')
                i += 1
                continue
            out.append(self.inline(line))
            i += 1
        return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")

    def directive(self, name: str, arg: str, opts: dict[str, str], body: str) -> str:
        anchor = f'<a id="{opts["label"]}"></a>\n' if "label" in opts else ""
        inner = self.convert(body)
        if name.startswith("prf:"):
            kind = name.split(":", 1)[1]
            if kind == "proof":
                return f"*Proof.* {inner} $\\blacksquare$\n"
            if kind not in PRF_NAMES:
                raise ValueError(f"{self.doc}: no plain form for the directive {{{name}}}")
            word = PRF_NAMES[kind]
            head = f"**{word} {self.number(word)}**"
            if arg:
                head += f" ({self.inline(arg)})"
            return f"{anchor}{head}.\n{inner}\n"
        if name in ("exercise", "exercise-start"):
            label = opts.get("label")
            anchor = f'<a id="{label}"></a>\n' if label else ""
            self.last_exercise = f"Exercise {self.chap}.{self.counts.get('Exercise', 0) + 1}" \
                if self.chap else f"Exercise {self.counts.get('Exercise', 0) + 1}"
            return f"{anchor}**Exercise {self.number('Exercise')}**" + \
                (f" ({self.inline(arg)})" if arg and name == "exercise" else "") + \
                (f". {inner}\n" if inner else ".\n")
        if name in ("exercise-end", "solution-end"):
            return "</details>\n" if name == "solution-end" else ""
        if name in ("solution", "solution-start"):
            target = arg
            shown = self.index.labels.get(target, (None, "the exercise"))[1]
            head = f"<details>\n<summary>Solution to {shown}</summary>\n\n{inner}\n"
            return head + ("</details>\n" if name == "solution" else "")
        if name in ADMONITIONS:
            title = self.inline(arg) if arg else name.capitalize()
            quoted = "\n".join(f"> {x}" if x else ">" for x in inner.split("\n"))
            return f"{anchor}> **{title}**\n>\n{quoted}\n"
        if name == "math":
            return f"{anchor}$$\n{body.strip()}\n$$\n"
        if name in ("figure", "image"):
            return f"{anchor}![{self.inline(inner) or 'figure'}]({arg})\n"
        raise ValueError(f"{self.doc}: no plain form for the directive {{{name}}}")

    def references(self) -> str:
        lines = ["## References", ""]
        for key in self.cited:
            f = self.index.bib[key]
            where = f.get("journal") or f.get("booktitle") or ""
            url = f.get("url") or (f"https://arxiv.org/abs/{f['eprint']}" if "eprint" in f else "")
            title = detex(f.get("title", key)).rstrip(".")
            entry = f'<a id="ref-{key}"></a>{format_authors(f.get("author", ""))} ' \
                    f'({f.get("year", "n.d.")}). *{title}*.'
            entry += (f" {detex(where)}." if where else "") + (f" <{url}>" if url else "")
            lines.append(f"- {entry}")
        return "\n".join(lines)


#: the first line of a folded answer cell: Colab shows it as the cell's title (form view)
ANSWER_TITLE = "# @title Answer code of {exercise} (try it yourself first)"


def fold_answer(src: str, exercise: str) -> str:
    """An answer code cell of the self-study edition: a Colab form title first (Colab hides
    the code under it), then the code unchanged."""
    title = ANSWER_TITLE.format(exercise=exercise)
    return src if src.startswith("# @title") else f"{title}\n{src}"


def student_json(nb: dict) -> dict:
    """The student edition of a notebook (scripts/assignments.py: solution cells stubbed,
    folded solutions removed, checks kept), as notebook JSON."""
    import nbformat

    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    import assignments

    ed = assignments.student_edition(nbformat.reads(json.dumps(nb), as_version=4))
    return json.loads(nbformat.writes(ed))


def export(doc: str, index: Index, *, student: bool = False, nb: dict | None = None) -> dict:
    """The plain notebook of ``doc`` (a notebook of the book, path without suffix).

    ``student=True`` exports the student edition (no solutions: what the site's Colab
    button and the course kit's zips open); ``nb`` is the notebook's JSON when it is not read
    from ``doc``'s file.
    """
    if nb is None:
        nb = json.loads(_doc_path(doc).read_text(encoding="utf-8"))
    if student:
        nb = student_json(nb)
    conv = Converter(index, doc)
    cells = []
    installed = False
    for cell in nb["cells"]:
        cell = copy.deepcopy(cell)
        src = "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "markdown" and "remove-cell" in tags:
            continue  # hidden on the website: the JupyterLab front matter (numbering)
        if cell["cell_type"] == "markdown":
            cell["source"] = conv.convert(src)
        elif cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            if "solution" in tags and not student:  # the answer, folded until opened
                cell["source"] = fold_answer(src, conv.last_exercise)
                meta = cell.setdefault("metadata", {})
                meta["cellView"] = "form"  # Colab: the title shows, the code on a click
                meta.setdefault("jupyter", {})["source_hidden"] = True  # JupyterLab
            if INSTALL_MARK in src and "pip" in src:
                if installed:
                    continue
                cell["source"] = install_cell_source(index.repo, index.ref)
                cell["metadata"]["tags"] = [t for t in tags if t != "remove-cell"]
                installed = True
        cells.append(cell)
        fig = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}) \
            if cell["cell_type"] == "code" else {}
        if fig.get("name"):  # the figure's number and caption, under the figure it draws
            shown = index.labels[fig["name"]][1]
            caption = conv.inline(fig.get("caption", "")).strip()
            cells.append({"cell_type": "markdown", "id": f"{cell.get('id', 'fig')}-caption"[:64],
                          "metadata": {}, "source": f'<a id="{fig["name"]}"></a>'
                          f"**{shown}.** {caption}"})
    if not installed:  # every export installs attnlib on Colab, in its first code cell
        first = next((k for k, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
        cells.insert(first, {"cell_type": "code", "id": "colab-install", "metadata": {},
                             "execution_count": None, "outputs": [],
                             "source": install_cell_source(index.repo, index.ref)})
    if conv.cited:
        cells.append({"cell_type": "markdown", "id": "plain-references", "metadata": {},
                      "source": conv.references()})
    for cell in cells:
        if isinstance(cell["source"], str):
            cell["source"] = cell["source"].splitlines(keepends=True)
    out = dict(nb)
    out["cells"] = cells
    out["metadata"] = dict(nb.get("metadata", {}))
    out["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
    out["metadata"]["attnlib_export"] = {"source": f"{doc}.ipynb", "release": index.ref,
                                         "format": "plain Jupyter Markdown (no MyST)"}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", help="notebooks to export (default: all in _toc.yml)")
    ap.add_argument("--out", default=str(ROOT / "_build" / "plain"), help="output folder")
    ap.add_argument("--ref", default=None, help="release to pin the install cell to")
    ap.add_argument("--student", action="store_true",
                    help="export the student editions (no solutions; course kit, Colab)")
    args = ap.parse_args(argv)
    docs = toc_docs()
    index = Index(docs, ROOT / "references.bib")
    index.ref = args.ref or git_ref()
    index.repo = repo_url()
    wanted = [re.sub(r"\.ipynb$", "", str(Path(p).resolve().relative_to(ROOT)))
              for p in args.notebooks] or [d for d in docs if _doc_path(d).suffix == ".ipynb"]
    out = Path(args.out)
    for doc in wanted:
        target = out / f"{doc}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        plain = export(doc, index, student=args.student)
        target.write_text(json.dumps(plain, indent=1, ensure_ascii=False) + "\n",
                          encoding="utf-8")
    print(f"[export_plain] {len(wanted)} notebook(s) -> {out} (release {index.ref})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
