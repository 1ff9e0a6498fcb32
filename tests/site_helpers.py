"""Fixtures and helpers for the browser tests of the built book (tests/test_site*.py).

The site in ``_build/html`` is served by a ``http.server`` on 127.0.0.1 and opened in Debian's
headless Chromium through Selenium, with every host name but 127.0.0.1 made unresolvable: the
pages must work with the network off.  A test module uses the fixtures like this::

    import pytest
    from site_helpers import browser, served_site  # noqa: F401  (pytest fixtures)
    from site_helpers import open_page, page_paths

    pytestmark = pytest.mark.browser

    def test_something(browser, served_site):
        problems = open_page(browser, f"{served_site}/book/intro.html")
        assert not problems["console"]

Tests that read a page of the site at one of :data:`SIZES` share one visit of it:
:func:`visit` opens the page once (at the phone's size), runs every read-only script of
:data:`READERS`, then every action of :data:`ACTIONS` (clicks, screenshots) in their order,
turns the window to the laptop's size and does the same again, and keeps what each returned.
A test module registers its scripts at import; ``make test`` runs the browser tests with
``--dist loadgroup`` and tests/conftest.py puts every test of one page in one group, so a
page's tests from all modules run in one process and the page is loaded once in all, not once
per size and test module.

Without a built site the fixtures skip the test (``make test`` always builds first); with
``CI=true`` they fail it instead.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the built site (``ATTNLIB_SITE`` points the tests at another build, e.g. a scratch copy)
SITE = Path(os.environ.get("ATTNLIB_SITE") or ROOT / "_build" / "html")
SCREENSHOTS = ROOT / "_build" / "screenshots"

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = (os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
                or "/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--disable-dev-shm-usage", "--window-size=1280,1000",
    # no network: every host name except 127.0.0.1 fails to resolve
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
)

#: Console errors that are allowed, each with the reason.  Anything else fails the page.
#: (Empty: sphinx-thebe's doubly declared ``THEBE_JS_URL`` is gone, book/_ext/book_site.py.)
CONSOLE_ALLOW: dict[str, str] = {}

#: Folders of the site that hold assets, not pages.
ASSET_DIRS = {"_static", "_sources", "_images", "mathjax", "require", "widgets",
              "_sphinx_design_static", "plain", "plain-student"}


def toc_files() -> list[str]:
    """Every page listed in _toc.yml (root first), as paths without suffix."""
    spec = importlib.util.spec_from_file_location("book_toc", ROOT / "scripts" / "book_toc.py")
    book_toc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(book_toc)
    return book_toc.toc_files(ROOT)


def site_built() -> bool:
    """Whether a built book exists in ``_build/html``."""
    return (SITE / "index.html").is_file()


def require_site() -> None:
    """Skip the calling test if no site was built (fail it when ``CI=true``)."""
    if not site_built():
        reason = f"no built site at {SITE}: run `make book` first (`make test` builds it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def page_paths() -> list[str]:
    """Every HTML page of the site, as paths relative to its root (empty if none is built)."""
    if not site_built():
        return []
    return sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
                  if p.relative_to(SITE).parts[0] not in ASSET_DIRS)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="session")
def served_site():
    """Base URL of ``_build/html`` served on 127.0.0.1 (a free port) for the whole session."""
    require_site()
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def make_driver(user_data_dir: Path):
    """A headless Chromium driven by Selenium, with console logging and no network."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={user_data_dir}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    return driver


@pytest.fixture(scope="session")
def chromium(tmp_path_factory):
    """One headless Chromium for the whole session (a fresh profile directory), for every
    browser test of the worker (the site's and JupyterLab's)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).is_file()]
    if missing:
        reason = f"headless Chromium not installed ({', '.join(missing)} missing): " \
                 "apt-get install chromium chromium-driver"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    driver = make_driver(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


@pytest.fixture
def browser(chromium):
    """The session's Chromium, for a test of the built site (skipped without one)."""
    require_site()
    return chromium


_WAIT_FOR_PAGE = """
const done = arguments[arguments.length - 1];
(async () => {
  // every image, lazy ones included, has loaded or failed
  const imgs = Array.from(document.images);
  imgs.forEach(img => { img.loading = 'eager'; });
  await Promise.all(imgs.map(img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r); })));
  // MathJax 3 has typeset the page (if the page loads it)
  for (let i = 0; i < 500 && document.querySelector('script[src*="mathjax"]')
                   && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++) {
    await new Promise(r => setTimeout(r, 20));
  }
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  done(true);
})().catch(e => done(String(e)));
"""


def open_page(driver, url: str) -> list[dict]:
    """Open ``url``, wait until its images and math are done, return its console messages."""
    driver.get_log("browser")  # drop messages of earlier pages
    driver.get(url)
    driver.execute_async_script(_WAIT_FOR_PAGE)
    return driver.get_log("browser")


def console_errors(entries: list[dict], extra_allow: tuple[str, ...] = ()) -> list[str]:
    """The SEVERE console messages not matched by :data:`CONSOLE_ALLOW` or ``extra_allow``."""
    allowed = (*CONSOLE_ALLOW, *extra_allow)
    return [e["message"] for e in entries if e.get("level") == "SEVERE"
            and not any(re.search(pattern, e["message"]) for pattern in allowed)]


def screenshot(driver, page: str, max_height: int = 12000) -> Path:
    """Save a full-page screenshot of the open page to ``_build/screenshots/``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", page.removesuffix(".html")) + ".png"
    size = driver.get_window_size()
    height = driver.execute_script(
        "window.scrollTo(0, 0);"
        "return Math.max(document.documentElement.scrollHeight, document.body.scrollHeight);")
    try:  # a window as tall as the page gives a clean full-page image
        driver.set_window_size(size["width"], min(max(height, size["height"]), max_height))
        path = SCREENSHOTS / name
        driver.save_screenshot(str(path))
    finally:
        driver.set_window_size(size["width"], size["height"])
    return path


#: The two screens every page is read at: a phone and a laptop (the phone is emulated as a
#: mobile device: its meta viewport honoured, overlay scroll bars, 3 device pixels per px).
#: A visit loads the page once, at the first (the phone: the stricter load), reads it there,
#: then turns the window to the laptop's size and reads it again.
SIZES = {"390x844": (390, 844), "1366x768": (1366, 768)}

#: Read-only JavaScript run on every visit at every size, registered by the test modules: name
#: -> a script that returns what its tests read (JSON-able); ``arguments[0]`` is the size
#: (``"390x844"``).  They run before the actions of that size.
READERS: dict[str, str] = {}


class Action:
    """Something done on the open page after the readers (a click, a screenshot, a widget's
    controls moved), in the order of ``order``; ``run(driver, page, size, seen)`` returns what its
    tests read.  ``seen`` is what the visit found so far at that size (``seen["entries"]``: the
    page's console entries).  An exception it raises is kept and raised again by
    :func:`visited`.  ``sizes``: the sizes it is run at (all by default; at the others its
    result is None), so that the page is not turned to a size where nothing is left to do.  An
    action of order 90 or more changes the page for good (every folded block opened): these
    run after every size was read, laptop first."""

    def __init__(self, order: int, run: Callable, sizes: tuple[str, ...] | None = None):
        self.order, self.run, self.sizes = order, run, sizes

    def runs_at(self, size: str) -> bool:
        return self.sizes is None or size in self.sizes


#: name -> Action, registered by the test modules
ACTIONS: dict[str, Action] = {}

#: the order from which an action changes the page for good (run last)
LATE = 90

_VISITS: dict[str, dict[str, dict]] = {}

_FRAMES = ("const d = arguments[arguments.length - 1];"
           "requestAnimationFrame(() => requestAnimationFrame(() => d(true)));")


def set_size(driver, size: str) -> None:
    """Turn the open page to the screen ``size`` of :data:`SIZES` (a phone: emulated, a
    mobile device) and wait until it is laid out again (two animation frames)."""
    w, h = SIZES[size]
    if w < 600:
        driver.set_window_size(1366, 768)
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": w, "height": h, "deviceScaleFactor": 3, "mobile": True})
    else:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        driver.set_window_size(w, h)
    driver.execute_async_script(_FRAMES)


def _run(action: Action, driver, page: str, size: str, seen: dict):
    try:
        return action.run(driver, page, size, seen)
    except Exception as exc:  # noqa: BLE001 (kept for the test that reads it)
        driver.execute_script("window.scrollTo(0, 0);")
        return exc


#: ``ATTNLIB_VISIT_TIMES=file``: each step of each visit (load, resize, reader, action) and
#: its seconds are appended to that file, a line each (where a page's time goes)
_TIMES = os.environ.get("ATTNLIB_VISIT_TIMES")


def _timed(page: str, step: str, fn: Callable, *args):
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        if _TIMES:
            with open(_TIMES, "a") as f:
                f.write(f"{page}\t{step}\t{time.perf_counter() - t0:.3f}\n")


def visit(driver, served_site: str, page: str, size: str) -> dict:
    """What the visit of ``page`` found at ``size`` (the page is visited once: later calls
    return the same dicts): its console entries (``"entries"``: those of the load and of the
    reading at that size; ``"console"``: the errors :func:`console_errors` keeps), then the
    result of every script of :data:`READERS` and every action of :data:`ACTIONS` under its
    name.  The page is loaded once, at the first size of :data:`SIZES` (the window turned to it
    on a blank page, where a new size costs no layout of the page before), and read at each
    size in turn (readers, then the actions of order below :data:`LATE`); then the late
    actions run, at the last size first (the page turned only to a size where one runs)."""
    if page not in _VISITS:
        old = driver.get_window_size()
        sizes = list(SIZES)
        seen: dict[str, dict] = {s: {} for s in sizes}
        early = sorted((kv for kv in ACTIONS.items() if kv[1].order < LATE),
                       key=lambda kv: kv[1].order)
        late = sorted((kv for kv in ACTIONS.items() if kv[1].order >= LATE),
                      key=lambda kv: kv[1].order)
        try:
            driver.get("about:blank")
            _timed(page, f"size {sizes[0]}", set_size, driver, sizes[0])
            loaded = _timed(page, "load", open_page, driver, f"{served_site}/{page}")
            for s in sizes:
                if s != sizes[0]:
                    _timed(page, f"size {s}", set_size, driver, s)
                entries = loaded + driver.get_log("browser")
                seen[s].update(entries=entries, console=console_errors(entries))
                for name, js in READERS.items():
                    seen[s][name] = _timed(page, f"{name} {s}", driver.execute_script, js, s)
                for name, action in early:
                    seen[s][name] = _timed(page, f"{name} {s}", _run, action, driver, page, s,
                                           seen[s]) if action.runs_at(s) else None
                seen[s]["entries"] += driver.get_log("browser")
            for s in reversed(sizes):
                here = [(name, a) for name, a in late if a.runs_at(s)]
                if here and s != sizes[-1]:  # (the page is at the last size already)
                    _timed(page, f"size {s}", set_size, driver, s)
                for name, action in late:
                    seen[s][name] = _timed(page, f"{name} {s}", _run, action, driver, page, s,
                                           seen[s]) if (name, action) in here else None
                seen[s]["entries"] += driver.get_log("browser")
            for s in sizes:
                seen[s]["console"] = console_errors(seen[s]["entries"])
        finally:
            driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            driver.set_window_size(old["width"], old["height"])
        _VISITS[page] = seen
    return _VISITS[page][size]


def visited(driver, served_site: str, page: str, size: str, name: str):
    """What the reader or action ``name`` returned on the visit of ``page`` at ``size`` (an
    action's exception is raised here, in the test that reads it)."""
    out = visit(driver, served_site, page, size)[name]
    if isinstance(out, Exception):
        raise out
    return out
