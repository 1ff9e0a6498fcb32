"""attnlib.experiments.store: the cache key, verified reads, atomic writes, info and clear."""

import json

import numpy as np
import pytest
from experiment_fakes import CALLS, dummy, fakes  # noqa: F401  (fixtures)

from attnlib import experiments
from attnlib.experiments import store


def key(settings, device="cpu", dtype="torch.float64"):
    return store.cache_key("e", settings, device, dtype)


def test_the_key_follows_the_values_not_their_printed_form():
    a = np.zeros(5000)
    b = a.copy()
    b[2500] = 1e-3
    assert str(a) == str(b)  # numpy abbreviates both to the same text ...
    assert key({"w": a}) != key({"w": b})  # ... but the key sees the change
    assert key({"w": a}) == key({"w": a.copy()})
    assert key({"w": a}) != key({"w": a.astype(np.float32)})
    assert key({"x": (1.0, 2.0)}) == key({"x": (1.0, 2.0)})
    assert key({"x": (1.0, 2.0)}) != key({"x": (1.0, 2.0 + 1e-15)})
    assert key({"x": 0.1 + 0.2}) != key({"x": 0.3})  # floats exactly, not their rounded text
    assert key({"x": True}) != key({"x": 1}) != key({"x": "1"})
    assert key({"x": 1}) != key({"y": 1}) and store.cache_key("f", {"x": 1}, "cpu", "d") != \
        store.cache_key("e", {"x": 1}, "cpu", "d")


def test_the_key_covers_device_dtype_versions_and_source(monkeypatch):
    k = key({"x": 1})
    assert key({"x": 1}, device="cuda:0") != k and key({"x": 1}, dtype="torch.float32") != k
    # the solvers, and the packages that ship the data sets (digits, the sentiment lexicon)
    for pkg in ("torch", "numpy", "cvxpy", "scipy", "clarabel", "scikit-learn",
                "vaderSentiment"):
        assert pkg in store.versions(), pkg
        v = dict(store.versions())
        v[pkg] = "0.0.0"
        monkeypatch.setattr(store, "versions", lambda v=v: v)
        assert key({"x": 1}) != k, pkg
        monkeypatch.undo()
    monkeypatch.setattr(store, "source_hash", lambda: "0" * 16)
    assert key({"x": 1}) != k


def test_source_hash_covers_every_file_of_the_package(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub" / "data.json").write_text("{}")
    h = store.source_hash(tmp_path)
    assert len(h) == 16 and h == store.source_hash(tmp_path)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert store.source_hash(tmp_path) == h  # compiled files are not source
    (tmp_path / "sub" / "data.json").write_text("{ }")
    assert store.source_hash(tmp_path) != h  # package data is
    assert len(store.source_hash()) == 16


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    assert experiments.cache_dir() == tmp_path


def _entry(name="dummy"):
    (folder,) = [p for p in experiments.cache_dir().iterdir() if p.is_dir()]
    return folder / f"{name}.json", folder / f"{name}.npz"


def _bad_json(js, npz):
    js.write_text('{"name": "dummy", "numbers": {"mean": 1')


def _no_npz(js, npz):
    npz.unlink()


def _corrupt_npz(js, npz):
    npz.write_bytes(npz.read_bytes()[:-20] + b"\0" * 20)


def _other_npz(js, npz):  # a readable archive, but not the one the JSON describes
    np.savez_compressed(npz, x=np.ones(3), t=np.arange(3))


def _other_name(js, npz):
    js.write_text(js.read_text().replace('"name": "dummy"', '"name": "other"'))


def _text_numbers(js, npz):
    meta = json.loads(js.read_text())
    meta["numbers"]["mean"] = "ten"
    js.write_text(json.dumps(meta))


def _other_key(js, npz):
    meta = json.loads(js.read_text())
    meta["key"] = "0" * 20
    js.write_text(json.dumps(meta))


def _edited_number(js, npz):  # a plausible number, still valid JSON
    meta = json.loads(js.read_text())
    meta["numbers"]["mean"] = 10.25
    js.write_text(json.dumps(meta))


def _edited_setting(js, npz):
    meta = json.loads(js.read_text())
    meta["params"]["steps"] = 11
    js.write_text(json.dumps(meta))


def _no_npz_hash(js, npz):  # an unchecked archive must not pass as a checked one
    meta = json.loads(js.read_text())
    del meta["npz_sha256"]
    js.write_text(json.dumps(meta))
    np.savez_compressed(npz, x=np.ones(3), t=np.arange(3))


def _no_digest(js, npz):
    meta = json.loads(js.read_text())
    del meta["digest"]
    js.write_text(json.dumps(meta))


def _nested_too_deep(js, npz):
    js.write_text("[" * 100_000 + "]" * 100_000)


def _npz_is_a_folder(js, npz):
    npz.unlink()
    npz.mkdir()
    (npz / "x").write_text("")


@pytest.mark.parametrize("corrupt", [_bad_json, _no_npz, _corrupt_npz, _other_npz, _other_name,
                                     _text_numbers, _other_key, _edited_number,
                                     _edited_setting, _no_npz_hash, _no_digest,
                                     _nested_too_deep])
def test_a_bad_entry_is_a_miss_that_heals(dummy, corrupt):  # noqa: F811
    first = experiments.run(dummy)
    corrupt(*_entry())
    with pytest.warns(store.CacheWarning, match="unreadable, recomputing"):
        again = experiments.run(dummy)
    assert not again.cached and len(CALLS) == 2 and again.numbers == first.numbers
    np.testing.assert_array_equal(again.arrays["x"], first.arrays["x"])
    healed = experiments.run(dummy)  # the entry was overwritten: a clean hit now
    assert healed.cached and len(CALLS) == 2 and healed.numbers == first.numbers
    assert sorted(p.name for p in _entry()[0].parent.iterdir()) == ["dummy.json", "dummy.npz"]


@pytest.mark.parametrize("edit_key", [False, True])
def test_another_entrys_files_moved_in_are_a_miss(dummy, edit_key):  # noqa: F811
    experiments.run(dummy)
    experiments.run(dummy, steps=20)
    a, b = sorted(p for p in experiments.cache_dir().iterdir() if p.is_dir())
    meta_a = json.loads((a / "dummy.json").read_text())
    meta = json.loads((b / "dummy.json").read_text())
    for f in ("dummy.json", "dummy.npz"):  # b's files replace a's
        (a / f).write_bytes((b / f).read_bytes())
    if edit_key:  # and the key inside is set to a's
        meta["key"] = meta_a["key"]
        (a / "dummy.json").write_text(json.dumps(meta))
    with pytest.warns(store.CacheWarning, match="unreadable"):
        res = experiments.run(dummy, steps=meta_a["params"]["steps"])
    assert not res.cached and len(CALLS) == 3
    assert res.numbers["mean"] == meta_a["params"]["steps"] != meta["params"]["steps"]


def test_a_cache_that_cannot_be_written_keeps_the_result(dummy, monkeypatch, tmp_path):  # noqa: F811
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ATTNLIB_CACHE", str(blocker))
    with pytest.warns(store.CacheWarning) as caught:
        res = experiments.run(dummy)
    assert res.numbers == {"mean": 10.0, "seed": 0} and not res.cached
    assert any("could not be cached" in str(w.message) for w in caught)
    assert blocker.read_text() == "not a folder"


def test_an_npz_path_that_is_a_folder_is_a_miss_and_the_result_is_kept(dummy):  # noqa: F811
    first = experiments.run(dummy)
    _npz_is_a_folder(*_entry())
    with pytest.warns(store.CacheWarning) as caught:
        again = experiments.run(dummy)
    assert not again.cached and again.numbers == first.numbers and len(CALLS) == 2
    messages = " ".join(str(w.message) for w in caught)
    assert "unreadable" in messages and "could not be cached" in messages


def test_an_unannotated_array_setting_is_keyed_by_its_bytes(fakes):  # noqa: F811
    def fake_weights(w=None, steps: int = 1):
        CALLS.append(dict(w=w))
        return {"total": float(np.sum(w))}, {}

    name = fakes("weights", fake_weights)
    a = np.zeros(5000)
    b = a.copy()
    b[2500] = 1e-3  # prints as a does
    assert experiments.run(name, w=a).numbers["total"] == 0.0
    assert experiments.run(name, w=a.copy()).cached
    assert experiments.run(name, w=b).numbers["total"] == 1e-3 and len(CALLS) == 2


def test_load_of_a_bad_file_names_it(tmp_path):
    (tmp_path / "e.json").write_text("[1, 2")
    with pytest.raises(ValueError, match=r"e\.json: not valid JSON"):
        experiments.Result.load(tmp_path, "e")
    with pytest.raises(FileNotFoundError):
        experiments.Result.load(tmp_path, "missing")


def test_writes_leave_no_temporary_file_even_when_they_fail(tmp_path, monkeypatch):
    store.write_entry(tmp_path, "e", {"numbers": {"a": 1.0}}, {"x": np.arange(3)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.json", "e.npz"]
    meta, arrays = store.read_entry(tmp_path, "e")
    assert meta["numbers"] == {"a": 1.0} and arrays["x"].tolist() == [0, 1, 2]

    def broken(f, **arrays):
        f.write(b"half an archive")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez_compressed", broken)
    with pytest.raises(OSError, match="disk full"):
        store.write_entry(tmp_path, "f", {"numbers": {}}, {"x": np.arange(3)})
    monkeypatch.undo()
    with pytest.raises(TypeError):  # a meta that is not JSON: nothing is written
        store.write_entry(tmp_path, "g", {"numbers": {}, "bad": object()}, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.json", "e.npz"]


def test_cache_info_and_clear(dummy):  # noqa: F811
    root = experiments.cache_dir()
    assert store.cache_info() == dict(path=root, entries=0, bytes=0)
    experiments.run(dummy)
    experiments.run(dummy, steps=11)
    (root / "notes").mkdir()  # not an entry: kept
    (root / ".x.tmp").write_text("left by a killed process")
    info = store.cache_info()
    files = [f for f in root.rglob("*.*") if f.parent != root and f.parent.name != "notes"]
    assert info["entries"] == 2 and info["bytes"] == sum(f.stat().st_size for f in files) > 0
    assert store.cache_clear() == 2
    assert sorted(p.name for p in root.iterdir()) == ["notes"]
    assert store.cache_info()["entries"] == 0


OTHER_VALUE = {"trials": 4, "steps": 11, "seed": 1, "device": None, "scale": 2.0,
               "sizes": (1, 3)}


@pytest.mark.parametrize("setting", sorted(OTHER_VALUE))
def test_every_setting_that_changes_a_result_changes_the_cache_entry(dummy, setting):  # noqa: F811
    """Each setting of the fake experiment but ``progress`` (NOT_IN_KEY) is part of the key:
    a run that differs in that one setting is computed, not read from the first run's entry."""
    experiments.run(dummy)
    assert len(CALLS) == 1
    experiments.run(dummy)
    assert len(CALLS) == 1  # the same settings: read from the cache
    experiments.run(dummy, **{setting: OTHER_VALUE[setting]})
    assert len(CALLS) == 2, f"changing {setting!r} read the cached result of other settings"
    assert CALLS[-1][setting] == OTHER_VALUE[setting]


def test_progress_is_not_part_of_the_key(dummy):  # noqa: F811
    experiments.run(dummy, progress=False)
    experiments.run(dummy, progress=True)
    assert len(CALLS) == 1
