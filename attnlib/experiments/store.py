"""Result persistence and the result cache: atomic writes, verified reads, a trustworthy key.

A stored result is two files in one folder: ``NAME.npz`` (arrays) and ``NAME.json`` (settings,
numbers, run time, and the SHA-256 of the ``.npz``). Both are written to a temporary file in
the same folder and renamed into place (arrays first, the JSON last: its presence marks an
entry), and the temporary file is removed if anything fails. The JSON carries one digest
(SHA-256) over everything else it holds: settings, numbers, the cache key and the arrays' own
SHA-256. A read recomputes both and checks the name and the cache key; an entry that does not
pass (an edited number, a removed field, another entry's files, a file where a folder should
be, JSON nested too deep to read) is a cache miss, never a crash or a wrong answer.

The cache lives under :func:`cache_dir`, one folder per key. The key (:func:`cache_key`)
covers the experiment's name, its exact settings (tuples and arrays by value), attnlib's
source (:func:`source_hash`: every file of the package, package data included), the versions
of Python and of every package a result depends on (:func:`versions`: torch, numpy, cvxpy,
scipy, clarabel, scikit-learn, which ships the digits, and vaderSentiment, which ships the
sentiment lexicon), and the device and dtype. See the chapter "Reproduction report".

While a process computes an entry it holds that entry's lock (:func:`entry_lock`, a file lock
that the system releases when the process ends, however it ends), so two processes that
need the same result at the same time (two notebooks run side by side) compute it once: the
second waits and reads what the first wrote.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path

import numpy as np

__all__ = ["CacheWarning", "Busy", "entry_lock", "cache_dir", "source_hash", "versions",
           "cache_key", "write_entry", "read_entry", "cache_info", "cache_clear", "jsonable",
           "to_numpy"]

_KEY = re.compile(r"^[0-9a-f]{20}$")
_PACKAGES = ("torch", "numpy", "cvxpy", "scipy", "clarabel", "scikit-learn", "vaderSentiment")


class CacheWarning(UserWarning):
    """A cache entry could not be read and is recomputed."""


class Busy(Exception):
    """Another process holds the entry's lock (:func:`entry_lock` with ``wait=False``)."""


_held = 0  # entry locks this process holds (a nested computation never waits: no deadlock)


@contextlib.contextmanager
def entry_lock(folder, wait: bool = True):
    """Hold the lock of the cache entry ``folder`` (a file ``KEY.lock`` beside it).

    Yields True when the lock was free, False when this process had to wait for another that
    held it (that one has written the entry meanwhile, unless it failed: read the entry again
    before computing). With ``wait=False`` a held lock raises :class:`Busy` instead. A
    process that already holds an entry's lock (one result computed inside another) neither
    waits nor locks, so two processes never wait for each other; nor does a system without
    ``fcntl`` or a cache folder that cannot be written: the result is computed as before.
    """
    global _held
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        fcntl = None
    folder = Path(folder)
    path = folder.parent / f"{folder.name}.lock"
    f = None
    if fcntl is not None and _held == 0:
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            f = open(path, "a")  # noqa: SIM115 - closed below
        except OSError:
            f = None
    if f is None:
        yield True
        return
    free = True
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if not wait:
                f.close()
                raise Busy(str(folder)) from None
            fcntl.flock(f, fcntl.LOCK_EX)
            free = False
        if _same_file(f, path):
            break
        # the lock file was removed (cache_clear) between our open and our lock: a lock on
        # the removed file excludes no one, so lock the file now at that path instead
        f.close()
        try:
            f = open(path, "a")  # noqa: SIM115 - closed below
        except OSError:
            yield free
            return
    with f:
        _held += 1
        try:
            yield free
        finally:
            _held -= 1
            fcntl.flock(f, fcntl.LOCK_UN)


def _same_file(f, path: Path) -> bool:
    """Whether the open file ``f`` is still the file at ``path`` (not removed or replaced)."""
    try:
        return os.stat(path).st_ino == os.fstat(f.fileno()).st_ino
    except OSError:
        return False


def cache_dir() -> Path:
    """Where results are cached: ``$ATTNLIB_CACHE`` or ``~/.cache/attnlib``."""
    return Path(os.environ.get("ATTNLIB_CACHE", Path.home() / ".cache" / "attnlib"))


def source_hash(root=None) -> str:
    """SHA-256 (16 hex digits) of every file of the attnlib package, package data included.

    ``root`` is the package folder (default: attnlib's); ``__pycache__`` is left out.
    """
    root = Path(__file__).resolve().parents[1] if root is None else Path(root)
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if not f.is_file() or "__pycache__" in f.parts or f.suffix == ".pyc":
            continue
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    """Versions of Python and of the packages a result depends on (``None``: not installed).

    The solvers (cvxpy, clarabel, scipy's ``nnls``), the tensor libraries, and the packages that
    ship the real data sets: scikit-learn (the 8x8 digits) and vaderSentiment (the lexicon).
    """
    out = {"python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _canonical(v):
    """A JSON-able form of a setting that identifies it by value (arrays by their bytes).

    Typed settings arrive as numbers, strings and tuples; an unannotated setting is passed
    through as given, so an array or tensor reaches this function and is keyed by its bytes.
    """
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return {"int": v}
    if isinstance(v, float):
        return {"float": v.hex()}
    if isinstance(v, (list, tuple)):
        return {type(v).__name__: [_canonical(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": sorted((str(k), _canonical(x)) for k, x in v.items())}
    if hasattr(v, "detach") or isinstance(v, (np.ndarray, np.generic)):
        a = np.ascontiguousarray(to_numpy(v))
        if a.ndim == 0 and a.dtype != object:
            return _canonical(a.item())
        return {"array": [a.dtype.str, list(a.shape), hashlib.sha256(a.tobytes()).hexdigest()]}
    return {"repr": [type(v).__module__ + "." + type(v).__qualname__, repr(v)]}


def cache_key(name: str, settings: dict, device: str, dtype: str) -> str:
    """The cache key (20 hex digits) of ``name`` run with ``settings`` on ``device``/``dtype``."""
    blob = json.dumps(dict(name=name, settings=_canonical(dict(settings)),
                           source=source_hash(), versions=versions(), device=str(device),
                           dtype=str(dtype)), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def to_numpy(v) -> np.ndarray:
    """A tensor or array-like as a numpy array."""
    if hasattr(v, "detach"):
        v = v.detach().cpu().numpy()
    return np.asarray(v)


def jsonable(params: dict) -> dict:
    """Settings as JSON values (tuples become lists, anything else its string)."""
    def one(v):
        if isinstance(v, (int, float, str, bool)) or v is None:
            return v
        if isinstance(v, (list, tuple)):
            return [one(x) for x in v]
        return str(v)

    return {k: one(v) for k, v in params.items()}


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _atomic_write(path: Path, write) -> None:
    """``write(file)`` into a temporary file beside ``path``, then rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, 0o666 & ~_umask())  # the mode open() gives (mkstemp's is 0600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digest(meta: dict) -> str:
    """SHA-256 over every field of ``meta`` but ``digest``, as JSON with sorted keys."""
    body = {k: v for k, v in meta.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def write_entry(folder, name: str, meta: dict, arrays: dict) -> Path:
    """Write ``NAME.npz`` then ``NAME.json`` (``meta``, the arrays' names and hash, the digest)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {k: to_numpy(v) for k, v in arrays.items()}
    npz, js = folder / f"{name}.npz", folder / f"{name}.json"
    json.dumps(meta, default=float)  # a meta that cannot be written fails before any file is
    _atomic_write(npz, lambda f: np.savez_compressed(f, **arrays))
    meta = dict(meta, name=name, arrays=sorted(arrays), npz_sha256=_sha256(npz),
                date=time.strftime("%Y-%m-%d", time.gmtime()))
    meta = json.loads(json.dumps(meta, default=float))  # the digest of what is read back
    meta["digest"] = _digest(meta)
    text = json.dumps(meta, indent=2)
    _atomic_write(js, lambda f: f.write(text.encode()))
    return js


def read_entry(folder, name: str, key: str | None = None) -> tuple[dict, dict]:
    """``(meta, arrays)`` of the entry ``name`` in ``folder``, checked for consistency.

    Raises
    ------
    FileNotFoundError
        There is no ``NAME.json`` (no entry).
    ValueError
        The entry is unreadable or inconsistent: bad JSON (or nested too deep), a digest that is
        missing or does not match the rest of the JSON, another name or key, numbers that are
        not numbers, arrays missing or not those the JSON lists, or an arrays' hash that does
        not match. Any other failure to read (a file where the folder should be, a folder
        where a file should be) is an ``OSError``.
    """
    folder = Path(folder)
    js = folder / f"{name}.json"
    text = js.read_text()  # FileNotFoundError: no entry
    try:
        meta = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{js}: not valid JSON ({err})") from None
    except RecursionError:  # JSON nested deeper than Python reads
        raise ValueError(f"{js}: not valid JSON (nested too deep to read)") from None
    try:
        return _checked(folder, name, key, meta)
    except RecursionError:
        raise ValueError(f"{js}: nested too deep to check") from None


def _checked(folder: Path, name: str, key, meta) -> tuple[dict, dict]:
    js, npz = folder / f"{name}.json", folder / f"{name}.npz"
    if not isinstance(meta, dict) or meta.get("name") != name:
        got = meta.get("name") if isinstance(meta, dict) else type(meta).__name__
        raise ValueError(f"{js}: holds {got!r}, not {name!r}")
    if meta.get("digest") != _digest(meta):
        raise ValueError(f"{js}: its digest does not match its content (edited or corrupt)")
    if key is not None and meta.get("key") != key:
        raise ValueError(f"{js}: cache key {meta.get('key')!r} is not {key!r}")
    numbers = meta.get("numbers")
    if not isinstance(numbers, dict) or not all(
            isinstance(v, (int, float)) for v in numbers.values()):
        raise ValueError(f"{js}: numbers are missing or not numbers")
    if not isinstance(meta.get("arrays"), list) or not isinstance(meta.get("npz_sha256"), str):
        raise ValueError(f"{js}: the arrays' names or hash are missing")
    if not npz.is_file():
        raise ValueError(f"{npz}: missing or not a file")
    if _sha256(npz) != meta["npz_sha256"]:
        raise ValueError(f"{npz}: its hash does not match {js.name} (changed or corrupt)")
    try:
        with np.load(npz, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as err:  # noqa: BLE001 - any unreadable archive is a bad entry
        raise ValueError(f"{npz}: unreadable ({type(err).__name__}: {err})") from None
    if sorted(arrays) != sorted(meta["arrays"]):
        raise ValueError(f"{npz}: holds {sorted(arrays)}, {js.name} lists {meta['arrays']}")
    return meta, arrays


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and _KEY.match(p.name)) \
        if root.is_dir() else []


def _size(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def cache_info() -> dict:
    """``{"path", "entries", "bytes"}`` of the result cache."""
    root = cache_dir()
    entries = _entries(root)
    return dict(path=root, entries=len(entries), bytes=sum(_size(p) for p in entries))


def cache_clear() -> int:
    """Remove every cache entry (and stray temporary files); return how many were removed.

    An entry whose lock another process holds (it is computing or writing that entry) is
    kept (on POSIX systems, where ``entry_lock`` locks; elsewhere every entry is removed).
    An entry that cannot be removed raises the error. Only folders named like cache keys are
    removed, so ``$ATTNLIB_CACHE`` pointing at a folder with other content never loses it.
    """
    root = cache_dir()
    removed = 0
    for p in _entries(root):
        # under the entry's lock: an entry another process is writing (it holds the lock) is
        # kept, never removed half-written under it
        with contextlib.suppress(Busy), entry_lock(p, wait=False):
            if p.is_dir():  # (not removed meanwhile by another cache_clear)
                with contextlib.suppress(FileNotFoundError):  # (nor while removing it)
                    shutil.rmtree(p)
                removed += not p.exists()
    if root.is_dir():
        for tmp in root.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
        for lock in root.glob("*.lock"):  # the entries' locks (one held is kept: still in use)
            if _KEY.match(lock.stem):
                with contextlib.suppress(OSError, Busy), entry_lock(root / lock.stem, wait=False):
                    lock.unlink(missing_ok=True)
    return removed
