"""What the GPU benchmarks share: finding torch and a GPU, CUDA-event timing, interleaving.

Every benchmark times ours and the references in one process, round by round, and compares
medians: the H100 lowers its clock under sustained load, so only same-run ratios mean much.
Each round runs the functions in a fresh random order (`shuffled_rounds`): until
2026-11-28 13:30 UTC the order was fixed, and on the H200 a function measured up to 10%
faster after a light one (SDPA's flash backend) than after a heavy one, which favoured
whatever came after the light one (our attention kernels, listed first). Shuffling alone
was not enough: on 2026-12-06 (19:26 UTC, H100, 7 rounds) two names for one and the same
backward kernel measured 13% apart. So each sample now runs its function untimed for about
`settle_ms` first (`interleaved_medians`), and is timed at the clock that function's own
load sets rather than at the one its predecessor left.
"""

from __future__ import annotations

import math
import random
import statistics


def gpu_torch(script: str):
    """torch when it and a GPU are present; otherwise print why nothing is measured."""
    try:
        import torch
    except ImportError:
        print(f"{script} needs torch and a GPU; nothing measured")
        return None
    from shared_codegen.runtime.driver import has_gpu

    if not has_gpu() or not torch.cuda.is_available():
        print(f"{script} needs a GPU; nothing measured")
        return None
    return torch


def cuda_time_ms(fn, torch, inner: int = 5, settle: int = 0) -> float:
    """Mean milliseconds of `inner` back-to-back calls, timed with CUDA events, after
    `settle` untimed calls queued just before them."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(settle):
        fn()
    start.record()
    for _ in range(inner):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / inner


def interleaved_medians(fns: dict, rounds: int, torch, inner: int = 5,
                        settle_ms: float = 20.0) -> dict:
    """{name: median ms}: every function once per round, rounds repeated (after a warm-up);
    each sample preceded by about `settle_ms` of untimed calls of the same function."""
    for fn in fns.values():  # compile, load, fill caches
        fn()
    torch.cuda.synchronize()
    settle = {name: settle_calls(cuda_time_ms(fn, torch, 1), settle_ms)
              for name, fn in fns.items()}
    times = {name: [] for name in fns}
    for name in shuffled_rounds(fns, rounds):
        times[name].append(cuda_time_ms(fns[name], torch, inner, settle[name]))
    return {name: statistics.median(ts) for name, ts in times.items()}


def settle_calls(ms_per_call: float, settle_ms: float) -> int:
    """Untimed calls that fill about `settle_ms` (at least one when settle_ms > 0)."""
    if settle_ms <= 0:
        return 0
    return max(1, min(1000, math.ceil(settle_ms / max(ms_per_call, 1e-3))))


def shuffled_rounds(names, rounds: int, seed: int = 0):
    """Every name once per round, `rounds` times, each round in a fresh random order (a
    rotation would keep each function's predecessor, and with it the predecessor's effect
    on the clock). Seeded, so that a rerun times the same sequence."""
    order = list(names)
    shuffle = random.Random(seed).shuffle
    for _ in range(rounds):
        shuffle(order)
        yield from order


def parse_variants(text: str) -> list:
    """`--variants` of the benchmarks: "name:key=value,key=value;name2:..." ->
    [(name, {key: int(value)})], same-run variants of our kernel with other options."""
    variants = []
    for spec in (part for part in text.split(";") if part.strip()):
        name, _, options = spec.partition(":")
        variants.append((name.strip(), {key.strip(): int(value) for key, value in
                                        (item.split("=") for item in options.split(",")
                                         if item.strip())}))
    return variants


def graph_medians(fns: dict, rounds: int, torch, inner: int = 5) -> dict:
    """{name: median ms per call} of device time: each function's `inner` calls captured in
    one CUDA graph, replays timed with CUDA events, interleaved round by round. Launch and
    Python overheads stay out; every function must already be compiled and loaded (call it
    once first) and must be graph-capturable (no host syncs)."""
    graphs = {}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # torch's recipe: warm up on a side stream, then capture
        for fn in fns.values():
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    for name, fn in fns.items():
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(inner):
                fn()
        graphs[name] = graph
    for graph in graphs.values():
        graph.replay()
    torch.cuda.synchronize()
    times = {name: [] for name in fns}
    for name in shuffled_rounds(graphs, rounds):
        times[name].append(cuda_time_ms(graphs[name].replay, torch, 1) / inner)
    return {name: statistics.median(ts) for name, ts in times.items()}


def bandwidth_table(cases: dict, medians: dict, copy_name: str, width: int = 26) -> dict:
    """Print ms, GB/s and % of the copy row for `cases` ({name: (fn, bytes moved)})."""
    copy_gbs = cases[copy_name][1] / medians[copy_name] / 1e6
    print(f"{'kernel':{width}s} {'ms':>8s} {'GB/s':>8s} {'% copy':>7s}")
    results = {}
    for name, (_fn, nbytes) in cases.items():
        ms = medians[name]
        gbs = nbytes / ms / 1e6
        results[name] = {"ms": ms, "GB/s": gbs, "pct_copy": 100 * gbs / copy_gbs}
        print(f"{name:{width}s} {ms:8.3f} {gbs:8.0f} {100 * gbs / copy_gbs:6.1f}%")
    return results
