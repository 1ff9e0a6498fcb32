"""The static renderer: every declared setting precomputed into offline HTML players.

For the website (no kernel): the controls on the slider are played by matplotlib's
``FuncAnimation.to_jshtml`` player (frames embedded as PNG); every combination of the other
controls' static values becomes a folded ``<details>`` panel, the default one open. The HTML
is made deterministic and offline by :func:`sanitize`: the player's random ids are replaced by
ids derived from the explorer's name and a counter, the font-awesome stylesheet (a network
request) is removed and the button icons become plain characters. The frame resolution is
lowered until the explorer fits its ``max_bytes``.
"""

from __future__ import annotations

import hashlib
import html as _html
import itertools
import math
import re
import time
from dataclasses import dataclass

from ..plots import BookFigure
from .controls import same_value

__all__ = ["Panel", "StaticExplorer", "sanitize"]

#: One number per static explorer made in this process: part of its players' ids.
_COUNTER = itertools.count()

_ICONS = {"minus": "&minus;", "fast-backward": "|&#9664;&#9664;", "step-backward": "|&#9664;",
          "play fa-flip-horizontal": "&#9664;", "pause": "||", "play": "&#9654;",
          "step-forward": "&#9654;|", "fast-forward": "&#9654;&#9654;|", "plus": "+"}


def sanitize(html: str, uid: str, alt: str = "explorer figure") -> str:
    """A ``to_jshtml`` player made offline and deterministic.

    Removes the font-awesome link, writes the button icons as characters, replaces the
    player's random 32-hex id by ``uid`` and gives the image an ``alt`` text.
    """
    html = re.sub(r"<link[^>]*font-awesome[^>]*>", "", html, flags=re.S)
    html = re.sub(r'<i class="fa fa-([a-z -]+)"></i>', lambda m: _ICONS.get(m.group(1), "?"),
                  html)
    for old in set(re.findall(r'id="_anim_img([0-9a-f]{32})"', html)):  # the player's uuid4
        html = html.replace(old, uid)
    return html.replace('<img id="_anim_img', f'<img alt="{_html.escape(alt)}" '
                        'style="max-width:100%" id="_anim_img')


@dataclass
class Panel:
    """One setting of the non-slider controls: its label, values, player HTML, frame count."""

    label: str
    values: dict
    html: str = ""
    frames: int = 0


class StaticExplorer:
    """The static renderer: precomputed frames in ``to_jshtml`` players (no kernel needed).

    Attributes
    ----------
    html : str
        The page fragment (players, one ``<details>`` panel per non-slider setting).
    panels : list of Panel
        The panels, each with its settings and frame count.
    dpi : float
        The frame resolution used (lowered to fit ``max_bytes``).
    nbytes : int
        Size of ``html`` in bytes.
    t_render : float
        Seconds spent rendering.
    """

    def __init__(self, explorer):
        ex = self.explorer = explorer
        slider = ex.slider
        frames = [dict(zip(slider, combo)) for combo in
                  itertools.product(*(ex.controls[s].static_values(True) for s in slider))]
        others = [k for k in ex.controls if k not in slider]
        panel_names = [k for k in others if len(ex.controls[k].static_values(False)) > 1]
        combos = itertools.product(*(ex.controls[k].static_values(False) for k in others))
        self.panels = []
        for combo in combos:
            vals = dict(zip(others, combo))
            self.panels.append(Panel(ex.label(vals, panel_names) if panel_names else "", vals))
        self._frames, self._shown = frames, slider + panel_names
        self._uid = next(_COUNTER)
        t0 = time.perf_counter()
        self.dpi = float(ex.static_dpi)
        self._render()
        if self.nbytes > ex.max_bytes:  # too big: once more at the resolution that fits
            self.dpi = max(36.0, round(self.dpi * math.sqrt(ex.max_bytes / self.nbytes) * 0.92,
                                       1))
            self._render()
        self.t_render = time.perf_counter() - t0

    def _render(self):
        """Render every panel's player at ``self.dpi``; set ``html`` and ``nbytes``."""
        from matplotlib.animation import FuncAnimation

        ex = self.explorer
        for j, panel in enumerate(self.panels):
            fig = BookFigure(figsize=ex.figsize, dpi=self.dpi)

            def update(fr, panel=panel, fig=fig):
                ex.draw_into(fig, {**panel.values, **fr}, self._shown)

            anim = FuncAnimation(fig, update, frames=self._frames, interval=1000.0 / ex.fps,
                                 repeat=False, cache_frame_data=False)
            raw = anim.to_jshtml(default_mode="once")
            key = f"{ex.name}|{panel.label}|{self._uid}|{j}".encode()
            alt = f"{ex.name} explorer" + (f", {panel.label}" if panel.label else "")
            panel.html = sanitize(raw, hashlib.sha1(key).hexdigest()[:32], alt)
            panel.frames = len(self._frames)
        self.html = self._assemble()
        self.nbytes = len(self.html.encode())

    def _assemble(self) -> str:
        ex = self.explorer
        names = ", ".join(ex.controls[s].label or s for s in ex.slider)
        head = (f'<div class="attnlib-explorer" data-explorer="{_html.escape(ex.name)}">'
                f'<p class="attnlib-explorer-caption"><b>Explorer.</b> '
                f'{_html.escape(ex.caption)} Move the slider to change <i>{names}</i>'
                + ("; open a panel below for another setting." if len(self.panels) > 1 else ".")
                + "</p>")
        if len(self.panels) == 1:
            return head + self.panels[0].html + "</div>"
        parts = [head]
        default = ex.defaults()
        for p in self.panels:
            is_default = all(same_value(v, default[k]) for k, v in p.values.items())
            parts.append(f'<details class="attnlib-panel"{" open" if is_default else ""}>'
                         f"<summary>{_html.escape(p.label)}</summary>{p.html}</details>")
        return "\n".join(parts) + "</div>"

    def _repr_html_(self):
        return self.html

    def __repr__(self):
        return (f"StaticExplorer({self.explorer.name!r}, panels={len(self.panels)}, "
                f"frames={sum(p.frames for p in self.panels)}, {self.nbytes / 1e6:.2f} MB)")
