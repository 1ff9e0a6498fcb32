"""Site tweaks of the book (a local Sphinx extension, loaded from _config.yml).

1. Answer code folded like the written solution: a code cell tagged ``solution`` gets
   myst-nb's ``hide-input`` tag (read time only; the notebooks keep their tags).
2. No sphinx-thebe on the pages: thebe is off (``launch_buttons.thebe: false``) but
   sphinx-thebe, bundled with Jupyter Book, still adds its config script (``const
   THEBE_JS_URL``, declared twice: a console error on every page) and ``sphinx-thebe.js``.
3. One search box: pydata-sphinx-theme's header bar (only a search box) is hidden
   (book/_static/book-site.css).
4. Ship what pages use: pydata-sphinx-theme loads ``fontawesome.js`` (1.5 MB of icons as SVG)
   on every page although its CSS already draws the same icons from its web fonts; the offline
   ipywidgets manager (``widgets/``, ``require/``) is removed when no page loads it.
5. Colab and download buttons of a notebook page point at its plain-Markdown export
   (scripts/export_plain.py, i.e. ``attnlib.course.cli.export_main``, written at the end of
   the build): the download button at the
   whole chapter (``<site>/plain/``); two Colab buttons, "Colab: self-study" at the same
   self-study edition (solutions present, folded: a reader alone can check an answer) and
   "Colab: assignment" at the assignment edition (``<site>/plain-student/``: exercise cells
   to fill in, no solutions, as in the course kit).
6. One space in block titles: sphinx-proof writes ``Theorem 2.1 </span> (name)`` (two spaces
   in the title's text) and sphinx-exercise ``Solution to<a ...> Exercise 2.1</a>`` (the space
   inside the link, underlined); the pages get ``Theorem 2.1</span> (name)`` and
   ``Solution to <a ...>Exercise 2.1</a>``.
7. Search: the search page loads ``book/_static/book-search.js`` (snippets show math as text,
   not TeX such as ``\\(p\\)``; a result's anchor is looked up by id, so an id such as
   ``book/02_att_svm-solution-5`` no longer throws), and the ranking
   (``html_search_scorer`` = ``book/_ext/search_scorer.js``) puts chapters before the API page
   for the book's own terms (tests/test_site_search.py, ``test_search_*``).
8. Cheaper build, same pages: each page's doctree is pickled alone (nodes that docutils' nested
   parsers, such as the API page's ``eval-rst`` blocks, leave pointing at their scratch
   document would otherwise pickle the whole build environment into that page, 37 MB for the
   API page); a ``{numref}`` reads its target page's doctree once per build, not once per
   reference; figures and sections are numbered from the doctrees still in memory after
   reading, not from their pickles; autodoc's reading of type comments is off (signatures are
   shown without types, ``autodoc_typehints: none``); the plain exports are written in the
   build's own process.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

#: where the plain exports of the notebooks go inside the site (the download button)
EXPORT_DIR = "plain"
#: the plain exports of the student editions, without solutions (the Colab button: a reader
#: who runs a chapter as homework gets the exercise cells to fill in, as in the course kit)
STUDENT_DIR = "plain-student"
#: sphinx-proof's caption number ends in a space that the title's own leading space doubles
_CAPTION_SPACE = re.compile(r'(<span class="caption-number">[^<]*?)\s+</span>(?=\s)')
#: sphinx-exercise puts the space between "Solution to" and the reference inside the link
_SOLUTION_SPACE = re.compile(r'(<p class="admonition-title">Solution to)\s*(<a [^>]*>)\s+')
_FA_SCRIPT = re.compile(r'\s*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*">'
                        r"</script>")


def fold_solution_cells(nb: dict) -> bool:
    """Fold every code cell tagged ``solution`` of the notebook JSON ``nb`` (``hide-input``,
    with the prompts "Show / Hide the answer code"), in place; whether anything changed.
    scripts/prerun.py applies it too, so that its cached executions match the notebook the
    build reads (the execution cache hashes the cells' metadata)."""
    changed = False
    for cell in nb.get("cells", []):
        meta = cell.setdefault("metadata", {})
        tags = meta.get("tags", [])
        if cell.get("cell_type") == "code" and "solution" in tags and "hide-input" not in tags:
            meta["tags"] = [*tags, "hide-input"]
            mystnb = meta.setdefault("mystnb", {})
            mystnb.setdefault("code_prompt_show", "Show the answer code")
            mystnb.setdefault("code_prompt_hide", "Hide the answer code")
            changed = True
    return changed


def _fold_solution_code(app, docname, source):
    """source-read: a code cell tagged ``solution`` is folded (``hide-input``)."""
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    nb = json.loads(source[0])
    if fold_solution_cells(nb):
        source[0] = json.dumps(nb)


def _is_thebe(script) -> bool:
    name = getattr(script, "filename", script) or ""
    body = getattr(script, "attributes", {}).get("body", "")
    return "sphinx-thebe" in str(name) or "THEBE_JS_URL" in body


def _page_context(app, pagename, templatename, context, doctree):
    """html-page-context (after the theme's): no thebe; Colab/download of the export."""
    if not app.config.html_theme_options.get("launch_buttons", {}).get("thebe"):
        context["script_files"] = [s for s in context.get("script_files", [])
                                   if not _is_thebe(s)]
        context["css_files"] = [c for c in context.get("css_files", [])
                                if "thebe" not in str(getattr(c, "filename", c))]
    src = app.env.doc2path(pagename, base=False) if pagename in app.env.all_docs else None
    if src is None or not str(src).endswith(".ipynb"):
        return
    export = f"{EXPORT_DIR}/{Path(src).as_posix()}"
    student = f"{STUDENT_DIR}/{Path(src).as_posix()}"
    branch = app.config.book_export_branch

    def fix(buttons):
        for b in buttons:
            if isinstance(b.get("buttons"), list):
                fix(b["buttons"])
            url = b.get("url", "")
            if b.get("label", "").startswith("download-") and url.endswith(".ipynb"):
                b["url"] = f"{context['pathto']('', 1).rstrip('/')}/{export}"
                b["tooltip"] = "Download notebook (plain Jupyter Markdown)"
        for k in range(len(buttons) - 1, -1, -1):
            if "colab.research.google.com" in buttons[k].get("url", ""):
                buttons[k:k + 1] = _colab_buttons(buttons[k], branch, export, student)

    fix(context.get("header_buttons", []))


def _colab_buttons(button: dict, branch: str, export: str, student: str) -> list[dict]:
    """The theme's one Colab button as two: the self-study edition (solutions folded) and
    the assignment edition (stubs to fill in), both plain exports on the export branch."""
    def one(path: str, text: str, tooltip: str, label: str) -> dict:
        return {**button, "url": re.sub(r"/blob/[^/]+/.*$", f"/blob/{branch}/{path}",
                                        button["url"]),
                "text": text, "tooltip": tooltip, "label": label}

    return [one(export, "Colab: self-study",
                "Open in Colab: the chapter with its solutions (folded)", "colab-self-study"),
            one(student, "Colab: assignment",
                "Open in Colab: the exercises to fill in, without solutions",
                "colab-assignment")]


def _finish(app, exception):
    """build-finished: strip unused JavaScript, one space in titles, write the plain exports."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    pages = [p for p in out.rglob("*.html") if "_static" not in p.parts]
    widgets_used = False
    for page in pages:
        text = page.read_text(encoding="utf-8")
        new = _FA_SCRIPT.sub("", text)
        new = _CAPTION_SPACE.sub(r"\1</span>", new)
        new = _SOLUTION_SPACE.sub(r"\1 \2", new)
        widgets_used |= "embed-amd.js" in new
        if new != text:
            page.write_text(new, encoding="utf-8")
    for f in (out / "_static" / "scripts").glob("fontawesome.js*"):
        f.unlink()
    for f in (out / "_static" / "scripts").glob("*.js.map"):
        f.unlink()
    if not widgets_used:
        for d in ("widgets", "require"):
            shutil.rmtree(out / d, ignore_errors=True)
    for f in (out / "_static").glob("sphinx-thebe.*"):
        f.unlink()
    # scripts/export_plain.py's work, in this process (attnlib is imported for the API page)
    from attnlib.course.cli import export_main

    for args in (["--out", str(out / EXPORT_DIR)],
                 ["--student", "--out", str(out / STUDENT_DIR)]):
        if export_main(args) != 0:
            raise RuntimeError(f"the plain export failed: export_plain.py {' '.join(args)}")


def _own_nodes(app, doctree):
    """doctree-read: every node of the page belongs to the page's document.  A node that a
    nested parser (``eval-rst``, autodoc) made keeps a link to its scratch document, whose
    settings hold the build environment; Sphinx pickles a page's doctree with the
    environment unlinked from the page's own document only, so that one link pickles the
    whole environment (every page's doctree with it) into the page."""
    for node in doctree.findall():
        if node.__dict__.get("_document") not in (None, doctree):
            node.document = doctree


def _numref_domain():
    """Sphinx's standard domain, with ``{numref}`` reading each target page's doctree once in a
    build (Sphinx unpickles the target page's whole doctree for every reference)."""
    from sphinx.domains.std import StandardDomain

    class NumrefOnceDomain(StandardDomain):
        def _resolve_numref_xref(self, env, fromdocname, builder, typ, target, node,
                                 contnode):
            return super()._resolve_numref_xref(_DoctreesOnce(env, self.doctrees_read),
                                                fromdocname, builder, typ, target, node,
                                                contnode)

        @property
        def doctrees_read(self) -> dict:
            return self.__dict__.setdefault("_doctrees_read", {})

    return NumrefOnceDomain


class _DoctreesOnce:
    """The build environment, read-only, whose ``get_doctree`` unpickles a page once (the
    numbered reference only looks its target up in it)."""

    def __init__(self, env, doctrees: dict):
        self._env, self._doctrees = env, doctrees

    def get_doctree(self, docname: str):
        if docname not in self._doctrees:
            self._doctrees[docname] = self._env.get_doctree(docname)
        return self._doctrees[docname]

    def __getattr__(self, name):
        return getattr(self._env, name)


def _forget_doctrees(app, env):
    """env-updated (the pages were read, before they are written): no doctree read for a
    numbered reference is kept from an earlier phase."""
    env.get_domain("std").__dict__.pop("_doctrees_read", None)


def _doctrees_in_memory(app, env):
    """env-get-updated, before Sphinx's collectors: Sphinx numbers the figures and sections
    of every page from the page's pickled doctree; after a serial read the doctrees are still
    in memory (kept for writing the pages) and numbering only reads them."""
    kept = getattr(env, "_write_doc_doctree_cache", None)
    if kept:
        unpickle = env.get_doctree
        env.get_doctree = lambda docname: kept[docname] if docname in kept else unpickle(docname)
    return []


def _doctrees_from_pickles(app, env):
    """env-get-updated, after Sphinx's collectors: ``get_doctree`` unpickles again."""
    env.__dict__.pop("get_doctree", None)
    return []


def _no_type_comments(app):
    """builder-inited: with ``autodoc_typehints = "none"`` no type reaches a signature, so
    autodoc's parsing of every function's source for type comments (``# type: ...``) is
    skipped."""
    if app.config.autodoc_typehints != "none":
        return
    from sphinx.ext.autodoc.type_comment import update_annotations_using_type_comments as read

    for listener in list(app.events.listeners.get("autodoc-before-process-signature", [])):
        if listener.handler is read:
            app.disconnect(listener.id)


def _static(app, config):
    """config-inited: book/_static (this extension's CSS) is a static folder of the site."""
    here = str(Path(__file__).resolve().parents[1] / "_static")
    if here not in config.html_static_path:
        config.html_static_path.append(here)


#: the search page's script (book/_static) and the search ranking (inlined by Sphinx)
SEARCH_JS = "book-search.js"
SEARCH_SCORER = Path(__file__).resolve().parent / "search_scorer.js"


def _search_config(app, config):
    """config-inited: the book's search ranking (unless _config.yml names another)."""
    if not config.html_search_scorer:
        config.html_search_scorer = str(SEARCH_SCORER)


def _search_page(app, pagename, templatename, context, doctree):
    """html-page-context: the search page gets book-search.js (deferred: it runs after
    searchtools.js, before the search starts)."""
    if pagename == "search":
        app.add_js_file(SEARCH_JS, priority=900, loading_method="defer")


def setup(app):
    app.add_config_value("book_export_branch", "gh-pages", "html")
    app.connect("config-inited", _static)
    app.add_css_file("book-site.css")
    app.connect("source-read", _fold_solution_code)
    app.connect("html-page-context", _page_context, priority=900)
    app.connect("build-finished", _finish)
    app.connect("config-inited", _search_config)
    app.connect("html-page-context", _search_page)
    app.connect("doctree-read", _own_nodes)
    app.add_domain(_numref_domain(), override=True)
    app.connect("env-updated", _forget_doctrees)
    app.connect("env-get-updated", _doctrees_in_memory, priority=100)
    app.connect("env-get-updated", _doctrees_from_pickles, priority=900)
    app.connect("builder-inited", _no_type_comments)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
