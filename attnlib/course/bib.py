"""references.bib as the book's bibliography writes it: a small BibTeX reader, the LaTeX
accents as letters, author lists in APA form and short "Author et al." citations."""

from __future__ import annotations

import re
from pathlib import Path


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


def short_authors(fields: dict[str, str]) -> str:
    names = [detex(a.strip()) for a in fields.get("author", "Anonymous").split(" and ")]
    family = [n.split(",")[0].strip() if "," in n else n.split()[-1] for n in names]
    if len(family) == 1:
        return family[0]
    if len(family) == 2:
        return f"{family[0]} and {family[1]}"
    return f"{family[0]} et al."
