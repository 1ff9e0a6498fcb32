"""Text drawn once per position: the static renderer's glyph cache.

The static renderer draws many frames of one figure, and most of their text (tick labels,
titles, legends) sits at the same place in every frame. Agg lays out a string and renders its
glyphs (FreeType) on every draw, a third of a frame's drawing time. :class:`GlyphCache`
records, per string, font, position, angle and resolution, the glyph bitmaps that Agg
composites and where it puts them, and the next time the same string is drawn at the same
place it composites them again with the current colour and clipping: the same pixels,
without the layout and the rasterisation. Text drawn with rules (mathtext fractions, roots)
and TeX are drawn as usual.
"""

from __future__ import annotations

import matplotlib as mpl

__all__ = ["GlyphCache"]

#: rcParams that change how a string is laid out or rasterised.
_RC = ("text.hinting", "text.hinting_factor", "text.kerning_factor", "text.antialiased",
       "mathtext.fontset", "mathtext.default", "mathtext.fallback", "mathtext.rm",
       "mathtext.it", "mathtext.bf", "mathtext.sf", "mathtext.tt", "mathtext.cal",
       "mathtext.bfit")


class _Recorder:
    """Stands in for the Agg renderer's core while one string is drawn: passes every call
    on, and notes the glyph images composited (or that something else was drawn)."""

    def __init__(self, core):
        self.core, self.glyphs, self.other = core, [], False

    def draw_text_image(self, image, x, y, angle, gc):
        self.glyphs.append((image.copy(), x, y, angle))
        return self.core.draw_text_image(image, x, y, angle, gc)

    def __getattr__(self, name):
        self.other = True  # a rule of mathtext (draw_path) or anything else: not cached
        return getattr(self.core, name)


class GlyphCache:
    """Installed on a :class:`~matplotlib.backends.backend_agg.RendererAgg`: its
    ``draw_text`` composites the recorded glyph images of a string drawn before with the same
    font at the same position (see the module). ``hits`` and ``misses`` count the strings."""

    def __init__(self, renderer):
        self.renderer, self.cache, self.hits, self.misses = renderer, {}, 0, 0
        renderer.draw_text = self.draw_text

    def _key(self, gc, x, y, s, prop, angle, ismath, mtext):
        r = self.renderer
        extra = ((mtext.get_fontfeatures(), mtext.get_language())
                 if mtext is not None and hasattr(mtext, "get_language") else None)
        key = (s, tuple(prop.__dict__.items()), float(x), float(y), float(angle), ismath,
               bool(gc.get_antialiased()), extra, r.dpi, r.width, r.height,
               tuple(mpl.rcParams.get(k) for k in _RC))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        r = self.renderer
        key = None if ismath == "TeX" else self._key(gc, x, y, s, prop, angle, ismath, mtext)
        glyphs = self.cache.get(key) if key is not None else None
        if glyphs is not None:
            self.hits += 1
            for image, gx, gy, gangle in glyphs:
                r._renderer.draw_text_image(image, gx, gy, gangle, gc)
            return None
        self.misses += 1
        if key is None:
            return type(r).draw_text(r, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
        core = r._renderer
        rec = r._renderer = _Recorder(core)
        try:
            type(r).draw_text(r, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
        finally:
            r._renderer = core
        if not rec.other:
            self.cache[key] = rec.glyphs
        return None
