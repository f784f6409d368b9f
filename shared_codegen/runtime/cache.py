"""The compilation cache: in memory for the process, on disk across processes.

Key: `make_key(...)` hashes (sha256) the kernel's source hash, its specialization, the target,
the compile options and the versions of everything that changes generated code (our own source
files, llvmlite, nvJitLink).

Entry: one file `<dir>/<key[:2]>/<key>.entry` holding a small header (magic, the manifest's
length and its sha256), a JSON manifest (key, metadata, and per artifact its name, kind, size
and sha256) and the artifacts' bytes.
One file, because a file can be published atomically: it is written to a temp file in the same
folder and `os.replace`d into place, so readers see the old entry, the new one, or none, never
half of one. A reader checks everything (header, JSON, key, sizes, sha256 of every artifact);
anything wrong means "miss", the bad file is deleted, and the caller recompiles and `put`s a
good entry. A corrupt cache is never trusted and never fatal.

Many processes may share one folder: they may compile the same kernel at once (the last
`os.replace` wins; both entries are whole and equal). A folder that cannot be read or written
(read-only, full, not a folder) costs recompiles, never a crash: the cache says so once per
folder and process with a `CacheWarning`, and once per corrupt entry it drops.

    entry = cache.get(key)        # {"metadata": {...}, "artifacts": {"cubin": b"...", ...}}
    cache.put(key, {"ptx": ptx, "cubin": cubin}, {"name": "add_kernel", "shared": 0})
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import threading
import warnings
from functools import lru_cache
from pathlib import Path

from shared_codegen import config

_MAGIC = b"SCCACHE2"
# magic, manifest length, sha256 of the manifest: the metadata (shared memory size, kernel
# name, parameter kinds) decides how a kernel is launched, so it is checked like the bytes.
_HEADER = struct.Struct("<8sQ32s")
_FORMAT_VERSION = 2
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# Our code that shapes compiled output; its content is part of every key, so editing a pass
# invalidates old entries without anyone bumping a version number.
_FINGERPRINTED_PACKAGES = ("shared_codegen", "tile", "gluon")


@lru_cache(maxsize=None)
def package_fingerprint() -> str:
    """sha256 over our own Python sources (paths and contents), computed once per process."""
    digest = hashlib.sha256()
    for package in _FINGERPRINTED_PACKAGES:
        root = _PACKAGE_ROOT / package
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(_PACKAGE_ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@lru_cache(maxsize=None)
def tool_versions() -> tuple:
    """(name, version) pairs of the code generators; nvJitLink may be absent on a CPU box."""
    import llvmlite

    versions = [("format", str(_FORMAT_VERSION)), ("llvmlite", llvmlite.__version__),
                ("package", package_fingerprint())]
    try:
        from cuda.bindings import nvjitlink

        versions.append(("nvjitlink", "%d.%d" % nvjitlink.version()))
    except Exception:
        versions.append(("nvjitlink", "unavailable"))
    return tuple(versions)


def make_key(source_hash: str, specialization, target: str, options: dict | None = None) -> str:
    """The cache key (hex sha256) of one compilation.

    `specialization` is the launch key (nested tuples of str/int/bool/None/float, whose repr is
    deterministic); `options` holds num_warps, num_stages, num_ctas and anything else that
    changes the output.
    """
    parts = (
        ("source", source_hash),
        ("specialization", repr(specialization)),
        ("target", target),
        ("options", repr(sorted((options or {}).items()))),
        ("versions", repr(tool_versions())),
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()


class CorruptEntry(Exception):
    """An on-disk entry failed a check; never escapes `CompilationCache.get`."""


class CacheWarning(UserWarning):
    """The on-disk cache could not be used for an entry or a folder; kernels are compiled
    again instead (never a crash, never a wrong kernel)."""


_warned: set = set()
_warned_lock = threading.Lock()


def _warn_once(what, message: str) -> None:
    """One warning per `what` (a folder and kind of failure, or one corrupt file) per
    process: a full disk must not print a warning per kernel."""
    with _warned_lock:
        if what in _warned:
            return
        _warned.add(what)
    warnings.warn(message, CacheWarning, stacklevel=4)


def _encode_entry(key: str, artifacts: dict, metadata: dict) -> bytes:
    blobs, described = [], []
    for name, value in artifacts.items():
        if isinstance(value, str):
            kind, data = "str", value.encode()
        elif isinstance(value, (bytes, bytearray, memoryview)):
            kind, data = "bytes", bytes(value)
        else:
            raise TypeError(f"cache artifact {name!r} must be bytes or str, got {type(value).__name__}")
        blobs.append(data)
        described.append({"name": name, "kind": kind, "size": len(data),
                          "sha256": hashlib.sha256(data).hexdigest()})
    manifest = json.dumps({"key": key, "metadata": metadata, "artifacts": described},
                          sort_keys=True).encode()
    header = _HEADER.pack(_MAGIC, len(manifest), hashlib.sha256(manifest).digest())
    return b"".join([header, manifest, *blobs])


def _decode_entry(key: str, data: bytes) -> dict:
    if len(data) < _HEADER.size:
        raise CorruptEntry("shorter than its header")
    magic, manifest_size, manifest_sha = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise CorruptEntry("bad magic")
    start = _HEADER.size
    text = data[start:start + manifest_size]
    if len(text) != manifest_size:
        raise CorruptEntry("the manifest is truncated")
    if hashlib.sha256(text).digest() != manifest_sha:
        raise CorruptEntry("the manifest fails its sha256")
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise CorruptEntry(f"bad manifest JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("key") != key:
        raise CorruptEntry("manifest names another key")
    if not isinstance(manifest.get("metadata"), dict):
        raise CorruptEntry("the manifest has no metadata")
    offset = start + manifest_size
    artifacts = {}
    try:
        for artifact in manifest["artifacts"]:
            blob = data[offset:offset + artifact["size"]]
            offset += artifact["size"]
            if len(blob) != artifact["size"]:
                raise CorruptEntry(f"artifact {artifact['name']!r} is truncated")
            if hashlib.sha256(blob).hexdigest() != artifact["sha256"]:
                raise CorruptEntry(f"artifact {artifact['name']!r} fails its sha256")
            artifacts[artifact["name"]] = blob.decode() if artifact["kind"] == "str" else blob
        metadata = manifest["metadata"]
    except (KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CorruptEntry(f"malformed manifest: {exc!r}") from None
    if offset != len(data):
        raise CorruptEntry("trailing bytes after the last artifact")
    return {"metadata": metadata, "artifacts": artifacts}


class CompilationCache:
    """In-memory dict in front of an on-disk folder (`directory=None`: memory only)."""

    def __init__(self, directory: str | os.PathLike | None):
        self.directory = Path(directory) if directory is not None else None
        self._memory: dict[str, dict] = {}
        self._lock = threading.Lock()

    def path_of(self, key: str) -> Path:
        if self.directory is None:
            raise ValueError("this cache has no directory")
        if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"cache keys are lower-case hex digests, got {key!r}")
        return self.directory / key[:2] / f"{key}.entry"

    def get(self, key: str) -> dict | None:
        """{"metadata": dict, "artifacts": {name: bytes|str}} or None on a miss. A corrupt
        on-disk entry counts as a miss and is removed."""
        entry = self._memory.get(key)
        if entry is not None or self.directory is None:
            return entry
        path = self.path_of(key)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
                identity = _identity(os.fstat(handle.fileno()))
        except (FileNotFoundError, NotADirectoryError):  # nothing stored there: a miss
            return None
        except OSError as exc:  # unreadable folder or file, I/O error: compile instead
            _warn_once(("read", str(self.directory)),
                       f"compilation cache: cannot read {path} ({exc}); kernels are compiled "
                       f"instead of loaded from {self.directory}")
            return None
        try:
            entry = _decode_entry(key, data)
        except CorruptEntry as exc:
            self._discard(path, exc, identity)
            return None
        with self._lock:
            self._memory[key] = entry
        return entry

    def put(self, key: str, artifacts: dict, metadata: dict) -> None:
        """Store an entry in memory and, atomically, on disk. A failing disk write (read-only
        or full file system) only loses the disk copy."""
        data = _encode_entry(key, artifacts, metadata)
        entry = _decode_entry(key, data)  # normalizes bytearray -> bytes, copies the metadata
        with self._lock:
            self._memory[key] = entry
        if self.directory is None:
            return
        path = self.path_of(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}-",
                                                     suffix=".tmp")
            try:
                with os.fdopen(descriptor, "wb") as handle:
                    handle.write(data)
                os.replace(temp_name, path)
            except BaseException:
                _remove_quietly(temp_name)
                raise
        except OSError as exc:
            _warn_once(("write", str(self.directory)),
                       f"compilation cache: cannot write to {self.directory} ({exc}); compiled "
                       f"kernels are kept in memory only, so other processes compile them again")

    def _discard(self, path: Path, reason: Exception, identity) -> None:
        _warn_once(("corrupt", str(path), identity),
                   f"compilation cache: ignoring corrupt entry {path} ({reason}); the kernel is "
                   f"compiled again")
        try:
            # Only the file that was read: another process may have just replaced it with a
            # good entry, which must stay.
            if _identity(os.stat(path)) == identity:
                os.unlink(path)
        except OSError:
            pass


def _identity(status) -> tuple:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def _remove_quietly(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


_caches: dict[object, CompilationCache] = {}
_caches_lock = threading.Lock()


def default_cache() -> CompilationCache:
    """The cache for the current SC_CACHE_DIR / SC_CACHE_DISABLE (read at each call, so tests
    can point it elsewhere); one instance per setting, so the memory layer is shared."""
    directory = None if config.get("SC_CACHE_DISABLE") else config.get("SC_CACHE_DIR")
    with _caches_lock:
        cache = _caches.get(directory)
        if cache is None:
            cache = _caches[directory] = CompilationCache(directory)
        return cache


def get(key: str) -> dict | None:
    return default_cache().get(key)


def put(key: str, artifacts: dict, metadata: dict) -> None:
    default_cache().put(key, artifacts, metadata)
