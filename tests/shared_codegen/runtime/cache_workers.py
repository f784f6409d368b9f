"""Work for the cache stress test's processes (spawned, so they import this module by name):
compile kernels for sm_90a through one shared SC_CACHE_DIR, or damage its entries meanwhile."""

from __future__ import annotations

import hashlib
import os
import random
import time
import warnings

import tile
import tile.language as tl

SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


@tile.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, FACTOR: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACTOR, mask=mask)


def fingerprint(kernel) -> tuple:
    """What must be equal between two compilations of one kernel: code and launch facts."""
    meta = kernel.metadata
    return (hashlib.sha256(kernel.asm["ptx"].encode()).hexdigest(),
            hashlib.sha256(kernel.asm["cubin"]).hexdigest(), meta["name"], meta["shared_bytes"],
            meta["num_warps"], tuple(meta["param_kinds"]))


def compile_one(constexprs: dict) -> tuple:
    return fingerprint(tile.compile(scale_kernel, SIGNATURE, constexprs, target="sm_90a"))


def compile_several(jobs):
    """[(constexprs, fingerprint)] for each job, and the warnings they raised (as text)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [(dict(job), compile_one(job)) for job in jobs]
    return results, [f"{w.category.__name__}: {w.message}" for w in caught]


def compile_rounds(jobs, rounds: int):
    """`compile_several(jobs)` `rounds` times, each time with nothing in memory (as a new
    process would), so every round reads the folder again."""
    import shared_codegen.frontend.compile as compile_mod

    results, caught = [], []
    for _ in range(rounds):
        compile_mod._DISK_CACHE = None
        more, warned = compile_several(jobs)
        results += more
        caught += warned
    return results, caught


def vandalize(directory: str, seconds: float, seed: int) -> int:
    """Truncate entries and flip bytes in them, in place (not atomically: what a crash or a
    bad disk leaves), for `seconds`; returns how many files it damaged."""
    rng = random.Random(seed)
    damaged, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for root, _, files in os.walk(directory):
            for name in files:
                if not name.endswith(".entry"):
                    continue
                path = os.path.join(root, name)
                try:
                    with open(path, "r+b") as handle:
                        data = handle.read()
                        if rng.random() < 0.5:
                            handle.truncate(rng.randrange(len(data) or 1))
                        elif data:
                            at = rng.randrange(len(data))
                            handle.seek(at)
                            handle.write(bytes([data[at] ^ 0x5A]))
                    damaged += 1
                except OSError:
                    pass  # replaced or removed meanwhile
        time.sleep(0.01)
    return damaged
