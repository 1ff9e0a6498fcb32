"""MyST Markdown as plain Jupyter Markdown: the book's index of titles, labels, numbers and
figures (:class:`Index`) and the converter of one document (:class:`Converter`).

Theorem-like blocks (``{prf:...}``) and admonitions become headed paragraphs ("**Theorem
5.1** (title).") with an HTML anchor for their label; exercises become "**Exercise 5.1**"
paragraphs and their solutions folded HTML ``<details>`` blocks; ``{doc}``, ``{ref}``,
``{prf:ref}``, ``{numref}`` become links with the target's title or number (an anchor inside
the chapter, else an absolute link to the published site); ``{cite}`` roles and
``[Author, year](cite:KEY)`` links become citations pointing to a References cell;
``(label)=`` targets become anchors. An unknown directive or role is an error, so that an
export never ships raw MyST.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from attnlib.course.bib import detex, format_authors, parse_bib, short_authors
from attnlib.course.repo import doc_path, repo_url, site_url

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
#: roles, code spans and citations written as links: [Tarzanagh et al., 2023](cite:KEY)
INLINE = re.compile(ROLE.pattern + r"|(?P<code>`+[^`]*?`+)|\]\(cite:(?P<cite>[^)\s]+)\)")


def _markdown(path: Path) -> str:
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def chapter_of(doc: str) -> str | None:
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
            path = doc_path(doc)
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
        chap, k = chapter_of(doc), 0
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
        chap = chapter_of(doc)
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
        doc_path(doc)  # it exists
        frag = f"#{anchor}" if anchor else ""
        if doc == src_doc:
            return frag or "#"
        return f"{self.site}/{doc}.html{frag}"


class Converter:
    """MyST Markdown of one document -> plain Jupyter Markdown."""

    def __init__(self, index: Index, doc: str):
        self.index, self.doc = index, doc
        self.chap = chapter_of(doc)
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
            who, year = short_authors(fields), fields.get("year", "n.d.")
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
