"""The static renderer: every declared setting precomputed, every control a page control.

For the website (no kernel). Each control with more than one static value becomes a control
on the page: a range slider over numbers, a row of buttons over strings and booleans, each
with its current value written beside it. The figure is precomputed for every combination of
the static values (the full product, at most ``max_frames``) and the page swaps images when a
control moves (a few lines of inline JavaScript; no network, no library). It opens on the
explorer's default values (the chapter's settings), shown as the initial images so the page
is right even before the script runs.

Phones: a figure of side-by-side axes is cut into one image per axes (at fixed cuts, the
midpoints between the axes of the default frame); on a wide column the images sit side by
side and fill it, below 640 px of screen they stack, each the screen's width, so the text of
a 3-panel figure stays readable on a 390 px phone. The images are 64-colour PNGs, each stored
once (a panel that does not change between settings costs nothing); the frame resolution is
lowered until the explorer fits ``max_bytes``.
"""

from __future__ import annotations

import base64
import hashlib
import html as _html
import io
import itertools
import json
import math
import time

import numpy as np

from ...plots import BookFigure
from .controls import same_value
from .glyphs import GlyphCache

__all__ = ["StaticExplorer", "frame_key", "png_panels"]

def _numbers(vals) -> bool:
    """Whether a control's values are numbers (a slider), not strings or booleans (buttons)."""
    return all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
               for v in vals)


#: Smallest display size of the figures' text: CSS px per point (10 pt titles >= 13 px).
_PX_PER_PT = 1.3

#: One number per static explorer made in this process: part of its element id.
_COUNTER = itertools.count()

_CSS = """
.attnlib-explorer{margin:0.6em 0 1.2em 0}
.attnlib-explorer .attnlib-controls{display:flex;flex-wrap:wrap;gap:0.35em 1.4em;
 margin:0.4em 0 0.5em 0;font-size:0.95rem}
.attnlib-explorer .attnlib-control{display:flex;flex-wrap:wrap;align-items:center;gap:0.3em}
.attnlib-explorer .attnlib-control-name{font-weight:600}
.attnlib-explorer .attnlib-control input[type=range]{width:11em;max-width:60vw}
.attnlib-explorer .attnlib-value{font-weight:700;min-width:3.5em;color:#d62728}
.attnlib-explorer .attnlib-control button{font:inherit;padding:0.1em 0.55em;margin:0;
 border:1px solid #999;border-radius:4px;background:#fff;color:#333;cursor:pointer}
.attnlib-explorer .attnlib-control button[aria-pressed=true]{background:#1f77b4;color:#fff;
 border-color:#1f77b4}
.attnlib-explorer .attnlib-control button.attnlib-play{min-width:5.2em}
.attnlib-explorer .attnlib-figure{display:flex;flex-wrap:wrap;justify-content:center;width:100%}
.attnlib-explorer .attnlib-figure img{height:auto;display:block}
.attnlib-explorer .attnlib-note{margin:0.3em 0 0 0;font-size:0.95rem}
@media (max-width:640px){.attnlib-explorer .attnlib-figure img{width:100% !important}}
"""

# the page's script: state = one value index per control, frame = mixed-radix number
_JS = """(function(){
var root=document.getElementById("%(id)s");if(!root)return;
var D=JSON.parse(root.querySelector("script.attnlib-data").textContent);
var st=D.start.slice(),imgs=root.querySelectorAll("img.attnlib-panel"),
note=root.querySelector(".attnlib-note"),ctl=root.querySelectorAll(".attnlib-control");
function show(){var k=0;for(var i=0;i<D.sizes.length;i++){k=k*D.sizes[i]+st[i];}
var f=D.frames[k];for(var j=0;j<imgs.length;j++){
imgs[j].src="data:image/png;base64,"+D.images[f[j]];}
if(note){note.textContent=D.notes[D.note_of[k]];}
for(var c=0;c<ctl.length;c++){var i=+ctl[c].getAttribute("data-index");
ctl[c].querySelector(".attnlib-value").textContent=D.labels[i][st[i]];
var r=ctl[c].querySelector("input");if(r){r.value=st[i];}
var b=ctl[c].querySelectorAll(V);for(var q=0;q<b.length;q++){
b[q].setAttribute("aria-pressed",q===st[i]?"true":"false");}}
root.setAttribute("data-frame",k);}
var V="button:not(.attnlib-play)",pb=root.querySelector("button.attnlib-play"),timer=null,
pi=pb?+pb.getAttribute("data-index"):-1;
function stop(){if(timer){clearInterval(timer);timer=null;}
if(pb){pb.setAttribute("aria-pressed","false");pb.textContent="\u25B6 play";}}
function tick(){if(st[pi]<D.sizes[pi]-1){st[pi]++;show();}
if(st[pi]>=D.sizes[pi]-1){stop();}}
if(pb){pb.addEventListener("click",function(){if(timer){stop();return;}
if(st[pi]>=D.sizes[pi]-1){st[pi]=0;show();}
pb.setAttribute("aria-pressed","true");pb.textContent="\u275A\u275A pause";
timer=setInterval(tick,D.interval);});}
for(var c=0;c<ctl.length;c++){(function(el){var i=+el.getAttribute("data-index");
var r=el.querySelector("input");if(r){r.addEventListener("input",function(){
if(i===pi){stop();}st[i]=+r.value;show();});}
var b=el.querySelectorAll(V);for(var q=0;q<b.length;q++){(function(q){
b[q].addEventListener("click",function(){st[i]=q;show();});})(q);}})(ctl[c]);}
})();"""


def frame_key(index: tuple, sizes: tuple) -> int:
    """The frame number of one setting: value indices ``index`` read as a mixed-radix number
    with digit sizes ``sizes`` (the first control varies slowest), as the page computes it."""
    if len(index) != len(sizes) or any(not 0 <= i < n for i, n in zip(index, sizes)):
        raise ValueError(f"index must give one value index per control, below {sizes}, "
                         f"got {index}")
    k = 0
    for i, n in zip(index, sizes):
        k = k * n + i
    return k


def _cuts(fig, renderer) -> list[float]:
    """Where to cut ``fig`` (figure fractions): around the axes (labels included), and between
    side-by-side axes; one strip when the axes overlap horizontally (rows, insets)."""
    w = fig.bbox.width
    axes = [ax for ax in fig.axes if ax.get_visible()]
    tight = sorted((b.x0 / w, b.x1 / w) for b in (ax.get_tightbbox(renderer) for ax in axes))
    boxes = sorted((ax.get_position().x0, ax.get_position().x1) for ax in axes)
    pad = 0.012
    ends = [max(0.0, min(t[0] for t in tight) - pad), min(1.0, max(t[1] for t in tight) + pad)]
    if len(boxes) < 2 or any(b[0] < a[1] - 1e-6 for a, b in zip(boxes, boxes[1:])):
        return ends
    inner = [(a[1] + b[0]) / 2 if a[1] <= b[0] else b[0] - pad / 2
             for a, b in zip(tight, tight[1:])]
    return [ends[0]] + inner + [ends[1]]


#: zlib level of the frames' PNGs. Level 9 (``optimize=True``) costs two to three times the
#: encoding time of level 8 for 1-2% fewer bytes: it is used only when a page exceeds its
#: byte budget at level 8 (the quantised images are kept, so that costs no decoding).
PNG_LEVEL = 8


def _png(img, level: int = PNG_LEVEL) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=level)
    return buf.getvalue()


def _strips(canvas, cuts, level: int = PNG_LEVEL, known: dict | None = None,
            keep: dict | None = None) -> list[bytes]:
    """The drawn ``canvas`` cut into vertical strips at ``cuts``, each a 64-colour PNG.

    ``known`` (optional) maps the digest of a strip's pixels to its PNG: a strip drawn before
    (a panel that did not change) is not quantised and encoded again. ``keep`` (optional)
    maps each new PNG to its quantised image and level, to encode it again at another level."""
    from PIL import Image

    w, h = canvas.get_width_height(physical=True)
    rgba = Image.frombuffer("RGBA", (w, h), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    out = []
    for a, b in zip(cuts, cuts[1:]):
        strip = rgba.crop((round(a * w), 0, round(b * w), h))
        key = None
        if known is not None:
            key = (level, strip.size, hashlib.sha1(strip.tobytes()).digest())
            if key in known:
                out.append(known[key])
                continue
        img = strip.convert("RGB").quantize(colors=64, method=Image.Quantize.FASTOCTREE)
        png = _png(img, level)
        if key is not None:
            known[key] = png
        if keep is not None:
            keep[png] = (img, level)
        out.append(png)
    return out


def png_panels(fig, cuts=None) -> list[bytes]:
    """Draw ``fig`` once and return one 64-colour PNG per vertical strip between ``cuts``
    (figure fractions; default: cut between side-by-side axes)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if hasattr(fig.canvas, "buffer_rgba") else FigureCanvasAgg(fig)
    canvas.draw()
    if cuts is None:
        cuts = _cuts(fig, canvas.get_renderer())
    return _strips(canvas, cuts)


def _y_offset(ax) -> str:
    """The y axis's offset text (``1e3``), as the draw's tick update computes it: the major
    formatter given the major tick locations (without making the tick objects, which the draw
    makes anyway)."""
    from matplotlib.ticker import NullLocator

    axis = ax.yaxis
    if (axis._tick_group_visible(axis._major_tick_kw)
            and not isinstance(axis.get_major_locator(), NullLocator)):
        axis.major.formatter.format_ticks(axis.get_majorticklocs())
    return axis.major.formatter.get_offset()


def _fix_titles(fig):
    """Pin each axes title where matplotlib's automatic placement would leave it: at the top
    of the axes, when nothing can push it up (no tick labels or axis label on top, no twin or
    child axes, no y offset text such as ``1e3``). The automatic placement measures every
    tick label of the axes on each draw, a quarter of a frame's drawing time; the pinned
    title is drawn at the same pixels."""
    for ax in fig.axes:
        if getattr(ax, "_autotitlepos", None) is False:
            continue
        titles = (ax.title, ax._left_title, ax._right_title)
        if not any(t.get_text() for t in titles):
            continue
        if (ax.child_axes or len(ax._twinned_axes.get_siblings(ax)) > 1
                or len(fig._align_label_groups["title"].get_siblings(ax)) > 1
                or ax.xaxis.get_ticks_position() in ("top", "unknown")
                or ax.xaxis.get_label_position() == "top"
                or any(t.get_position()[1] != 1.0 for t in titles)):
            continue
        if ax.yaxis.offsetText.get_visible() and _y_offset(ax):
            continue
        ax._autotitlepos = False


class StaticExplorer:
    """The static renderer: every setting precomputed, every control a page control.

    Attributes
    ----------
    html : str
        The page fragment (controls, the default frame's images, the frames, the script).
    names : list of str
        The controls, in the order of ``index``; ``values`` their static values (each
        control's default among them), ``sizes`` their counts.
    frames : list of list of int
        Per frame (setting number :func:`frame_key`), the index in ``images`` of each panel.
    images : list of bytes
        The distinct PNG images.
    notes : list of str
        Per frame, the explorer's note (``Explorer(note=...)``; "" without one).
    start : tuple of int
        The value index of each control's default: the frame the page opens on.
    dpi, nbytes, t_render
        The frame resolution used, the size of ``html`` in bytes, seconds spent rendering.
    """

    def __init__(self, explorer):
        ex = self.explorer = explorer
        self.names = list(ex.controls)
        self.values = [self._static(ex.controls[k], k in ex.slider) for k in self.names]
        self.sizes = tuple(len(v) for v in self.values)
        n = math.prod(self.sizes)
        if n > ex.max_frames:
            raise ValueError(f"static: {n} settings ({' x '.join(map(str, self.sizes))}) "
                             f"exceed max_frames={ex.max_frames}; declare fewer static values")
        default = ex.defaults()
        self.start = tuple(next(j for j, v in enumerate(vals) if same_value(v, default[k]))
                           for k, vals in zip(self.names, self.values))
        self._uid = next(_COUNTER)
        t0 = time.perf_counter()
        self.dpi = float(ex.static_dpi)
        self.renders = 1
        self._render()
        if self.nbytes > ex.max_bytes:  # too big: the same images, smaller (zlib level 9)
            self._recompress(9)
        if self.nbytes > ex.max_bytes:  # still too big: once more at the resolution that fits
            self.dpi = max(40.0, round(self.dpi * math.sqrt(ex.max_bytes / self.nbytes) * 0.9,
                                       1))
            self.renders += 1
            self._render(level=9)
        self._keep = {}  # the quantised images: not kept beyond the render
        self.t_render = time.perf_counter() - t0

    @staticmethod
    def _static(control, on_slider) -> tuple:
        """A control's static values, its default among them, numbers in increasing order."""
        vals = list(control.static_values(on_slider))
        if not any(same_value(v, control.default) for v in vals):
            vals.append(control.default)
        if _numbers(vals):
            vals.sort()
        return tuple(vals)

    def settings(self):
        """Every setting ``{control: value}``, in frame order."""
        for idx in itertools.product(*(range(s) for s in self.sizes)):
            yield {k: vals[i] for k, vals, i in zip(self.names, self.values, idx)}

    def _render(self, level: int = PNG_LEVEL):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        ex = self.explorer
        fig = BookFigure(figsize=ex.figsize, dpi=self.dpi)
        canvas = FigureCanvasAgg(fig)
        self.images, self.frames, self.notes = [], [], []
        seen, cuts = {}, None
        k0 = frame_key(self.start, self.sizes)
        # the default frame first: its axes' final positions (aspect) give the cuts; then the
        # explorer's ``fast`` control varying fastest, so that a draw function's update
        # (see Explorer) redraws in place from one frame to the next
        fast = (self.names.index(getattr(ex, "fast", "") or ex.play
                                 or (ex.slider or self.names)[0]) if self.names else 0)
        perm = [i for i in range(len(self.sizes)) if i != fast] + [fast]
        order = [k0]
        for idx in itertools.product(*(range(self.sizes[i]) for i in perm)):
            full = [0] * len(perm)
            for i, v in zip(perm, idx):
                full[i] = v
            if (k := frame_key(tuple(full), self.sizes)) != k0:
                order.append(k)
        settings = list(self.settings())
        panels, known, self._keep = {}, {}, {}
        # the zlib level: 8 while the page, extrapolated from the distinct images so far
        # (judged after an eighth of the frames), stays clear of the budget, else 9 for the
        # rest (the page's end recompresses the rest at 9 if it still does not fit)
        new_bytes, judge = 0, max(1, math.ceil(len(order) / 8))
        glyphs = None  # text at the same place in another frame: its glyphs drawn again
        for done, k in enumerate(order, 1):
            vals = settings[k]
            update = getattr(fig, "attnlib_update", None)
            if update is None or not update(**vals):
                ex.draw_into(fig, vals, names=[])
                _fix_titles(fig)
            if glyphs is None or canvas.get_renderer() is not glyphs.renderer:
                glyphs = GlyphCache(canvas.get_renderer())
            canvas.draw()
            if cuts is None:
                cuts = _cuts(fig, canvas.get_renderer())
            pngs = _strips(canvas, cuts, level, known, self._keep)
            ids = []
            for png in pngs:
                h = hashlib.sha1(png).digest()
                if h not in seen:
                    seen[h] = len(seen)
                    self.images.append(png)
                    new_bytes += len(png)
                ids.append(seen[h])
            panels[k] = ids
            if (level < 9 and done >= judge
                    and 4 / 3 * new_bytes * len(order) / done > 0.97 * ex.max_bytes):
                level = 9
        # images numbered in frame order, as the page and the tests read them
        renum, images = {}, []
        for k in range(len(order)):
            ids = []
            for j in panels[k]:
                if j not in renum:
                    renum[j] = len(images)
                    images.append(self.images[j])
                ids.append(renum[j])
            self.frames.append(ids)
            self.notes.append(ex.note(**settings[k]) if ex.note else "")
        self.images = images
        self.widths = [b - a for a, b in zip(cuts, cuts[1:])]  # figure fractions
        self.html = self._assemble()
        self.nbytes = len(self.html.encode())

    def _recompress(self, level: int):
        """Encode the stored images again at zlib ``level`` (same pixels, other bytes): from
        the quantised images the render kept, else decoded from the PNGs."""
        from PIL import Image

        keep = getattr(self, "_keep", {})
        self.images = [_png(keep[p][0] if p in keep else Image.open(io.BytesIO(p)), level)
                       if keep.get(p, (None, None))[1] != level else p for p in self.images]
        self._keep = {}
        self.html = self._assemble()
        self.nbytes = len(self.html.encode())

    def _control_html(self, i: int) -> str:
        ex, name = self.explorer, self.names[i]
        c, vals = ex.controls[name], self.values[i]
        label = _html.escape(c.label or name)
        now = _html.escape(c.show(vals[self.start[i]]))
        head = f'<span class="attnlib-control-name">{label}</span>'
        if len(vals) == 1:  # fixed on this page: say its value
            return (f'<div class="attnlib-fixed">{head} <span class="attnlib-value">{now}'
                    f"</span></div>")
        if _numbers(vals):
            widget = (f'<input type="range" min="0" max="{len(vals) - 1}" step="1" '
                      f'value="{self.start[i]}" aria-label="{label}">')
            if name == ex.play:  # an iteration axis: a play/pause button steps through it
                widget = (f'<button type="button" class="attnlib-play" data-index="{i}" '
                          f'aria-pressed="false" aria-label="play {label}">\u25B6 play'
                          f"</button> {widget}")
        else:
            widget = "".join(
                f'<button type="button" aria-pressed="{"true" if j == self.start[i] else "false"}"'
                f">{_html.escape(c.show(v))}</button>" for j, v in enumerate(vals))
        return (f'<div class="attnlib-control" data-control="{_html.escape(name)}" '
                f'data-index="{i}">{head} {widget} <output class="attnlib-value">{now}</output>'
                "</div>")

    def _assemble(self) -> str:
        ex = self.explorer
        uid = "attnlib-" + hashlib.sha1(f"{ex.name}|{self._uid}".encode()).hexdigest()[:12]
        k0 = frame_key(self.start, self.sizes)
        notes = sorted(set(self.notes))
        data = dict(sizes=list(self.sizes), start=list(self.start),
                    labels=[[ex.controls[k].show(v) for v in vals]
                            for k, vals in zip(self.names, self.values)],
                    frames=self.frames, note_of=[notes.index(t) for t in self.notes],
                    notes=notes, interval=round(1000 / max(float(ex.fps), 0.1)),
                    images=[base64.b64encode(p).decode("ascii") for p in self.images])
        alt = _html.escape(f"{ex.name} explorer")
        # side by side they fill the column, but none narrower than _PX_PER_PT px per point
        # (1 pt of text >= 1.3 px on screen): then they wrap, below 640 px each fills the width
        total = sum(self.widths)
        imgs = "".join(
            f'<img class="attnlib-panel" alt="{alt}, panel {j + 1}" '
            f'style="width:{100 * w / total:.3f}%;min-width:min(100%,'
            f'{w * ex.figsize[0] * 72 * _PX_PER_PT:.0f}px)" src="data:image/png;base64,'
            f'{data["images"][self.frames[k0][j]]}">' for j, w in enumerate(self.widths))
        controls = "".join(self._control_html(i) for i in range(len(self.names)))
        caption = (f'<p class="attnlib-explorer-caption"><b>Explorer.</b> '
                   f"{_html.escape(ex.caption)}</p>" if ex.caption else "")
        payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        return (f'<div class="attnlib-explorer" id="{uid}" data-explorer="{_html.escape(ex.name)}"'
                f' data-frame="{k0}" data-default-frame="{k0}"><style>{_CSS}</style>{caption}'
                f'<div class="attnlib-controls">{controls}</div>'
                f'<div class="attnlib-figure">{imgs}</div>'
                f'<p class="attnlib-note">{_html.escape(self.notes[k0])}</p>'
                f'<script type="application/json" class="attnlib-data">{payload}</script>'
                f"<script>{_JS % {'id': uid}}</script></div>")

    def _repr_html_(self):
        return self.html

    def __repr__(self):
        return (f"StaticExplorer({self.explorer.name!r}, controls={self.names}, "
                f"frames={len(self.frames)}, images={len(self.images)}, "
                f"{self.nbytes / 1e6:.2f} MB)")
