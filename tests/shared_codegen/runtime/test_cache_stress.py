"""The compilation cache under stress (issue 16, item 6): eight processes compiling the same
and different kernels through one folder while entries are damaged, truncated and corrupt
entries, a folder that cannot be written, a full disk. Never a crash or a wrong kernel; at
worst a recompile and one warning."""

import errno
import multiprocessing
import os
import resource
import signal
import warnings

import pytest
from cache_workers import (SIGNATURE, compile_one, compile_rounds, compile_several, scale_kernel,
                           vandalize)

import shared_codegen.frontend.compile as compile_mod
import tile
from shared_codegen.runtime import cache as cache_module
from shared_codegen.runtime.cache import CacheWarning

PROCESSES = 8
SAME = {"BLOCK": 64, "FACTOR": 2.0}  # every process compiles this one


def shared_by_some(i):
    return {"BLOCK": 128, "FACTOR": float(i % 3)}  # three kernels, each shared by a few


DAMAGED_PHASE = [{"BLOCK": 256, "FACTOR": 1.5}, {"BLOCK": 256, "FACTOR": 2.5}]


@pytest.fixture
def cache_dir(monkeypatch, tmp_path):
    """A fresh cache folder for this process and the ones it spawns, nothing in memory."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("SC_CACHE_DIR", str(folder))
    monkeypatch.delenv("SC_CACHE_DISABLE", raising=False)
    monkeypatch.setattr(compile_mod, "_DISK_CACHE", None)
    return folder


def forget_memory():
    """What a new process sees: the folder, with nothing compiled in memory."""
    compile_mod._DISK_CACHE = None


def references(jobs, monkeypatch):
    """Each job compiled without any cache: what every process must end up with."""
    with monkeypatch.context() as patch:
        patch.setenv("SC_CACHE_DISABLE", "1")
        return {tuple(sorted(job.items())): compile_one(job) for job in jobs}


def test_eight_processes_share_one_folder_while_entries_are_damaged(cache_dir, monkeypatch):
    clean_jobs = [[SAME, shared_by_some(i), SAME, shared_by_some(i)] for i in range(PROCESSES)]
    expected = references([SAME, *(shared_by_some(i) for i in range(3)), *DAMAGED_PHASE],
                          monkeypatch)
    context = multiprocessing.get_context("spawn")
    with context.Pool(PROCESSES) as pool:
        # Phase 1: all compile at once into an empty folder; the same kernel is stored by
        # several processes concurrently.
        clean = pool.map(compile_several, clean_jobs)
        # Phase 2: seven compile new kernels, and load them again and again as new processes
        # would, while the eighth damages entries in place.
        vandal = pool.apply_async(vandalize, (str(cache_dir), 1.0, 16))
        damaged_phase = pool.starmap(compile_rounds, [(DAMAGED_PHASE, 8)] * (PROCESSES - 1))
        assert vandal.get(timeout=60) > 0  # the phase-1 entries at least were damaged
    for results, caught in clean:
        assert caught == []  # nothing to warn about without damage
        for job, fingerprint in results:
            assert fingerprint == expected[tuple(sorted(job.items()))], job
    for results, caught in damaged_phase:
        for job, fingerprint in results:
            assert fingerprint == expected[tuple(sorted(job.items()))], job
        assert all(text.startswith("CacheWarning: compilation cache: ignoring corrupt entry ")
                   for text in caught), caught
    assert not [p for p in cache_dir.rglob("*.tmp")]  # no half-written temp file left behind


def entry_path(constexprs):
    forget_memory()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean compile warns about nothing
        reference = compile_one(constexprs)
    (path,) = [p for p in compile_mod.disk_cache().directory.rglob("*.entry")]
    return path, reference


def recompile_with_one_warning(constexprs):
    forget_memory()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fingerprint = compile_one(constexprs)
    return fingerprint, [str(w.message) for w in caught if w.category is CacheWarning]


def test_a_truncated_entry_is_recompiled_with_one_warning_and_rewritten(cache_dir):
    path, reference = entry_path(SAME)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    fingerprint, caught = recompile_with_one_warning(SAME)
    assert fingerprint == reference
    assert caught == [f"compilation cache: ignoring corrupt entry {path} (artifact 'llir' is "
                      f"truncated); the kernel is compiled again"]
    # The recompile stored a good entry again (its log's timings differ, its code does not).
    stored = cache_module._decode_entry(path.stem, path.read_bytes())
    assert stored["artifacts"] == cache_module._decode_entry(path.stem, data)["artifacts"]
    fingerprint, caught = recompile_with_one_warning(SAME)
    assert (fingerprint, caught) == (reference, [])


@pytest.mark.parametrize("damage, reason", [
    (lambda data: data[:10], "shorter than its header"),
    (lambda data: b"\0" * len(data), "bad magic"),
    (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "artifact 'cubin' fails its sha256"),
    # A launch fact in the metadata (here the shared memory size) must not be trusted either.
    (lambda data: data.replace(b'"shared_bytes": 0', b'"shared_bytes": 9', 1),
     "the manifest fails its sha256"),
])
def test_a_corrupt_entry_is_recompiled_with_one_warning(cache_dir, damage, reason):
    path, reference = entry_path(SAME)
    data = path.read_bytes()
    assert damage(data) != data
    path.write_bytes(damage(data))
    fingerprint, caught = recompile_with_one_warning(SAME)
    assert fingerprint == reference
    assert caught == [f"compilation cache: ignoring corrupt entry {path} ({reason}); the "
                      f"kernel is compiled again"]


def test_a_read_only_folder_serves_its_entries_and_warns_once_about_writes(cache_dir,
                                                                          monkeypatch):
    _, reference = entry_path(SAME)

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(cache_module.tempfile, "mkstemp", read_only)
    # What the folder holds is still served, without compiling and without a warning.
    monkeypatch.setattr(compile_mod, "compile_module", None)
    assert recompile_with_one_warning(SAME) == (reference, [])
    monkeypatch.undo()  # compile_module back; the folder read-only again:
    monkeypatch.setenv("SC_CACHE_DIR", str(cache_dir))
    monkeypatch.delenv("SC_CACHE_DISABLE", raising=False)
    monkeypatch.setattr(cache_module.tempfile, "mkstemp", read_only)
    other = {"BLOCK": 32, "FACTOR": 3.0}
    fingerprint, caught = recompile_with_one_warning(other)
    assert caught == [f"compilation cache: cannot write to {cache_dir} ([Errno 30] Read-only "
                      f"file system); compiled kernels are kept in memory only, so other "
                      f"processes compile them again"]
    assert fingerprint == references([other], monkeypatch)[tuple(sorted(other.items()))]
    # One warning per folder and process, not one per kernel.
    assert recompile_with_one_warning({"BLOCK": 32, "FACTOR": 4.0})[1] == []


def test_a_folder_that_cannot_exist_compiles_everything_with_one_warning(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SC_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("SC_CACHE_DISABLE", raising=False)
    fingerprint, caught = recompile_with_one_warning(SAME)
    assert len(caught) == 1 and caught[0].startswith(
        f"compilation cache: cannot write to {blocker / 'cache'} ([Errno 20] Not a directory")
    assert fingerprint == references([SAME], monkeypatch)[tuple(sorted(SAME.items()))]


def test_a_full_disk_loses_only_the_disk_copy(cache_dir):
    # RLIMIT_FSIZE makes every write past 4 KiB fail with EFBIG, as a full disk fails with
    # ENOSPC; SIGXFSZ would otherwise end the process.
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        fingerprint, caught = recompile_with_one_warning(SAME)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert caught == [f"compilation cache: cannot write to {cache_dir} ([Errno 27] File too "
                      f"large); compiled kernels are kept in memory only, so other processes "
                      f"compile them again"]
    assert not list(cache_dir.rglob("*.tmp")) and not list(cache_dir.rglob("*.entry"))
    tile.compile(scale_kernel, SIGNATURE, SAME, target="sm_90a")  # served from memory
    assert fingerprint == compile_one(SAME)
