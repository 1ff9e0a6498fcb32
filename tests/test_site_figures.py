"""The figures of the built book as a reader sees them (headless Chromium, network off):

- ``test_figures_numbered_with_alt_text``: every image in a cell output (explorer panels and
  widgets aside) is inside a numbered ``<figure>`` with a ``<figcaption>``, and its alt text
  says what it shows (not empty, not a file name, not a hash; :func:`alt_problem`).
- ``test_figure_text_readable_on_phone``: at 390 px the smallest text of every figure is
  drawn at least :data:`MIN_TEXT_PX` (9) CSS px tall.  How this is measured: a figure's PNG
  records its resolution (matplotlib writes the figure's dpi into the pHYs chunk) and
  attnlib's ``BookFigure`` writes the smallest font size of the figure's drawn text in points
  (tEXt key :data:`FONT_KEY`); for an image without that key the smallest font size set
  anywhere in attnlib's code is assumed (:func:`smallest_font_pt`).  The text's natural
  height is ``pt * dpi / 72`` image pixels; the image is drawn at ``scale = displayed width
  / natural width``, so the text is ``scale * pt * dpi / 72`` CSS px.  book-site.css keeps
  figures at their natural size on a phone (a wider one scrolls inside its own box).

Read from the one pass over each page that the reader's tests share
(tests/site_reader_helpers.py).
"""

from __future__ import annotations

import base64
import io
import re
from urllib.parse import unquote, urlsplit

import pytest
from site_helpers import ROOT, SITE
from site_reader_helpers import CHAPTERS, NO_SITE, collect, report

pytestmark = pytest.mark.browser

MIN_TEXT_PX = 9.0
#: tEXt key of a figure's PNG with the smallest font size of its text, in points (written by
#: attnlib.plots.BookFigure)
try:
    from attnlib.plots import FONT_KEY
except ImportError:  # an attnlib without it: the same key
    FONT_KEY = "attnlib:min_font_pt"



_HASHLIKE = re.compile(r"[0-9a-f]{12,}|[0-9A-Za-z_-]{24,}")
_FILENAME = re.compile(r"\S+\.(png|jpe?g|svg|gif|webp|pdf)$", re.IGNORECASE)


def alt_problem(alt: str | None) -> str | None:
    """What is wrong with a figure's alt text (``None``: it says something)."""
    alt = (alt or "").strip()
    if not alt:
        return "empty alt text"
    if _FILENAME.search(alt) or "_images/" in alt:
        return f"alt text is a file name: {alt[:60]!r}"
    if " " not in alt and _HASHLIKE.search(alt):
        return f"alt text is a hash: {alt[:60]!r}"
    if len(alt.split()) < 3:
        return f"alt text does not say what the figure shows: {alt!r}"
    return None


def smallest_font_pt() -> float:
    """The smallest font size (points) that attnlib's plotting code sets anywhere
    (``fontsize=``, ``labelsize=``, ``title_fontsize=`` with a number); matplotlib's default
    10 pt if none is smaller."""
    sizes = [10.0]
    for path in (ROOT / "attnlib").rglob("*.py"):
        for m in re.finditer(r"\b(?:fontsize|labelsize|title_fontsize)\s*=\s*(\d+(?:\.\d+)?)\b",
                             path.read_text(encoding="utf-8")):
            sizes.append(float(m.group(1)))
    return min(sizes)


def png_font_px(data: bytes) -> tuple[float, float, str]:
    """``(dpi, font pt, where the pt comes from)`` of a figure's PNG (see the module text)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        dpi = im.info.get("dpi", (72.0, 72.0))[0] if im.format == "PNG" else 72.0
        text = getattr(im, "text", {}) or {}
    if FONT_KEY in text:
        return float(dpi), float(text[FONT_KEY]), "its PNG"
    return float(dpi), smallest_font_pt(), "attnlib's smallest font"


def _image_bytes(src: str) -> bytes | None:
    if src.startswith("data:"):
        head, _, body = src.partition(",")
        return base64.b64decode(body) if ";base64" in head else None
    rel = unquote(urlsplit(src).path).lstrip("/")
    path = SITE / rel
    return path.read_bytes() if path.is_file() else None


def test_alt_text_classifier_catches_the_defects():
    """The alt-text classifier finds each defect and passes an alt text that says something."""
    assert alt_problem("") and alt_problem("3f9a0c1d2b4e5f60718293a4b5c6d7e8.png")
    assert alt_problem("0d4c2a9f7e31b8c5a6d2") and alt_problem("figure")
    assert alt_problem("_images/abc.png")
    assert alt_problem("Four tokens in the plane; the path turns to the max-margin "
                       "direction.") is None


@pytest.mark.parametrize("page", CHAPTERS or NO_SITE)
def test_figures_numbered_with_alt_text(page, browser, served_site):
    """Every figure is numbered and captioned (``<figure>`` + ``<figcaption>`` with
    "Fig. N.k") and its alt text says what it shows."""
    info = collect(browser, served_site, page, "1366x768")
    problems = []
    for f in info["figures"]:
        name = f"{f['where']}: image {f['file']!r}"
        if not f["in_figure"]:
            problems.append(f"{name} is not in a <figure>")
        elif f["caption"] is None:
            problems.append(f"{name} has no <figcaption>")
        elif not f["numbered"]:
            problems.append(f"{name} has an unnumbered caption {f['caption'][:50]!r}")
        bad = alt_problem(f["alt"])
        if bad:
            problems.append(f"{name}: {bad}")
    assert not problems, report(page, "1366x768", "figure problems", problems)



@pytest.mark.parametrize("page", CHAPTERS or NO_SITE)
def test_figure_text_readable_on_phone(page, browser, served_site):
    """At 390 px the smallest text of each figure is drawn >= 9 CSS px tall (see the module
    text for the measurement)."""
    info = collect(browser, served_site, page, "390x844")
    problems = []
    for f in info["figures"]:
        data = _image_bytes(f["src"])
        if not data or not f["natural"] or not f["shown"]:
            continue
        dpi, pt, origin = png_font_px(data)
        scale = f["width"] / f["natural"]
        px = scale * pt * dpi / 72
        if px < MIN_TEXT_PX - 0.05:
            problems.append(
                f"{f['where']}: image {f['file']!r} drawn {f['width']:.0f} of {f['natural']} px "
                f"wide: {pt:g} pt text ({origin}) at {dpi:.0f} dpi is {px:.1f} px")
    assert not problems, report(page, "390x844", "figures with text under 9 px", problems)
