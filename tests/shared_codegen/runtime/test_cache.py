"""The compilation cache: atomic entries, and corrupt entries recompiled instead of trusted."""

import os
import threading

import pytest

from shared_codegen.runtime import cache as cache_module
from shared_codegen.runtime.cache import CacheWarning, CompilationCache, make_key

ARTIFACTS = {"ptx": ".version 8.0\n", "cubin": b"\x7fELF" + bytes(range(256))}
METADATA = {"name": "add_kernel", "shared": 0, "num_warps": 4}


@pytest.fixture
def key():
    return make_key("source-hash", (("*fp32", "D"), ("i32", "")), "sm_90a", {"num_warps": 4})


def test_round_trip_through_disk(tmp_path, key):
    CompilationCache(tmp_path).put(key, ARTIFACTS, METADATA)
    entry = CompilationCache(tmp_path).get(key)  # a fresh instance: no memory layer
    assert entry == {"metadata": METADATA, "artifacts": ARTIFACTS}


def test_keys_depend_on_every_input():
    base = ("src", (("i32", ""),), "sm_90a", {"num_warps": 4})
    variants = [("src2",) + base[1:], (base[0], (("i32", "D"),)) + base[2:],
                base[:2] + ("sm_100a", base[3]), base[:3] + ({"num_warps": 8},)]
    keys = {make_key(*base)} | {make_key(*variant) for variant in variants}
    assert len(keys) == 5
    assert make_key(*base) == make_key(*base)


def test_a_miss_is_none(tmp_path, key):
    assert CompilationCache(tmp_path).get(key) is None


def _corrupt_truncate(path):
    path.write_bytes(path.read_bytes()[:-10])


def _corrupt_flip_cubin_byte(path):
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))


def _corrupt_json(path):
    data = path.read_bytes()
    path.write_bytes(data[:16] + b"{not json" + data[25:])


def _corrupt_empty(path):
    path.write_bytes(b"")


def _corrupt_other_key(path):
    data = path.read_bytes()
    key = path.stem.encode()
    path.write_bytes(data.replace(key, key[::-1], 1))


@pytest.mark.parametrize("corrupt", [_corrupt_truncate, _corrupt_flip_cubin_byte, _corrupt_json,
                                     _corrupt_empty, _corrupt_other_key])
def test_corrupt_entries_are_misses_and_get_replaced(tmp_path, key, corrupt):
    CompilationCache(tmp_path).put(key, ARTIFACTS, METADATA)
    path = CompilationCache(tmp_path).path_of(key)
    corrupt(path)
    reader = CompilationCache(tmp_path)
    with pytest.warns(CacheWarning, match=f"ignoring corrupt entry {path} "):
        assert reader.get(key) is None
    assert not path.exists()  # removed, so the recompile's put starts clean
    reader.put(key, ARTIFACTS, METADATA)
    assert CompilationCache(tmp_path).get(key)["artifacts"] == ARTIFACTS


def test_writes_leave_no_temp_files_and_never_expose_partial_entries(tmp_path, key):
    big = {"cubin": os.urandom(1 << 20)}
    seen_partial = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            entry = CompilationCache(tmp_path).get(key)
            if entry is not None and entry["artifacts"] != big:
                seen_partial.append(entry)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(20):
            CompilationCache(tmp_path).put(key, big, {})
    finally:
        stop.set()
        thread.join()
    assert not seen_partial
    leftovers = [p.name for p in tmp_path.rglob("*") if p.is_file() and p.suffix == ".tmp"]
    assert leftovers == []


def test_unwritable_directory_keeps_the_memory_copy(tmp_path, key):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = CompilationCache(blocker)
    with pytest.warns(CacheWarning, match=f"cannot write to {blocker} "):
        cache.put(key, ARTIFACTS, METADATA)
    assert cache.get(key)["artifacts"] == ARTIFACTS


def test_artifacts_must_be_bytes_or_text(tmp_path, key):
    with pytest.raises(TypeError, match="'cubin'"):
        CompilationCache(tmp_path).put(key, {"cubin": 123}, {})


def test_default_cache_follows_the_environment(monkeypatch, tmp_path, key):
    monkeypatch.setenv("SC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SC_CACHE_DISABLE", raising=False)
    cache_module.put(key, ARTIFACTS, METADATA)
    assert cache_module.default_cache().path_of(key).exists()
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")
    assert cache_module.default_cache().directory is None
    assert cache_module.get(key) is None  # memory-only cache of its own
