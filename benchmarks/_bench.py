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
load sets rather than at the one its predecessor left. Even so, on 2026-12-07 (04:49 UTC,
H100, 7 rounds) a second name for our backward measured 1.06-1.08x in every row: each row
re-seeded the shuffle, so every function took the same places in every row, and that
name's places were worth about 7%. Rounds now follow a Williams design (`balanced_rounds`:
over a whole square every function runs once in every place and after every other
function once), relabelled and started afresh for each call, so a place's effect neither
piles up on one function within a run nor repeats from row to row. `round_ratios` pairs two
functions' samples round by round, and its spread says how much one run's ratio is worth.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics

_ORDER_SEEDS = itertools.count()  # each timing call's own (reproducible) order


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
    times = interleaved_samples(fns, rounds, torch, inner, settle_ms)
    return {name: statistics.median(ts) for name, ts in times.items()}


def interleaved_samples(fns: dict, rounds: int, torch, inner: int = 5,
                        settle_ms: float = 20.0) -> dict:
    """{name: [ms of round 0, round 1, ...]}: `interleaved_medians`' samples, in round order
    (for `round_ratios`)."""
    for fn in fns.values():  # compile, load, fill caches
        fn()
    torch.cuda.synchronize()
    settle = {name: settle_calls(steady_call_ms(fn, torch), settle_ms)
              for name, fn in fns.items()}
    times = {name: [] for name in fns}
    for name in balanced_rounds(fns, rounds):
        times[name].append(cuda_time_ms(fns[name], torch, inner, settle[name]))
    return times


def round_ratios(times: dict, ours: str, ref: str) -> dict:
    """How many times faster `ours` ran than `ref` round by round (ref's ms / ours' ms in
    the same round, so a clock that drifts over the run moves both sides of each ratio):
    {"median", "low", "high" (the lowest and highest round), "rounds" (all of them)}. A
    ratio of medians can sit on either side of a bar that most rounds clear or miss; the
    spread says how far one run can be trusted."""
    ratios = [r / o for o, r in zip(times[ours], times[ref])]
    return {"median": statistics.median(ratios), "low": min(ratios), "high": max(ratios),
            "rounds": ratios}


def steady_call_ms(fn, torch, tries: int = 3) -> float:
    """The fastest of `tries` single timed calls: each function's settling calls then follow
    its steady call time, not that of one call that happened to start late (the first after
    the warm-up's synchronize, say). On 2026-12-07 (H100, 07:32-07:37 UTC) a second name for
    our forward, listed right after it, measured 1.00-1.14x the first in all 12 rows; whether
    a short settle for the first function was the cause is not known yet."""
    return min(cuda_time_ms(fn, torch, 1) for _ in range(tries))


def settle_calls(ms_per_call: float, settle_ms: float) -> int:
    """Untimed calls that fill about `settle_ms` (at least one when settle_ms > 0)."""
    if settle_ms <= 0:
        return 0
    return max(1, min(1000, math.ceil(settle_ms / max(ms_per_call, 1e-3))))


def williams_square(n: int) -> list:
    """Rows of a Williams design for n items: each row a permutation of range(n); over all
    rows (n of them, 2n for odd n) each item takes each place equally often and follows
    each other item equally often (once, or twice for odd n)."""
    base, low, high = [0], 1, n - 1
    while len(base) < n:
        base.append(low)
        low += 1
        if len(base) < n:
            base.append(high)
            high -= 1
    rows = [[(b + i) % n for b in base] for i in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 else rows


def balanced_rounds(names, rounds: int, seed=None):
    """Every name once per round, `rounds` times, the rounds taken in turn from a Williams
    square (`williams_square`) under a random relabelling of the names, from a random
    row. `seed` None: the next of a counter, so successive calls (a benchmark's rows) get
    different orders and a rerun of the same command the same ones."""
    names = list(names)
    rng = random.Random(next(_ORDER_SEEDS) if seed is None else seed)
    rng.shuffle(names)
    square = williams_square(len(names))
    start = rng.randrange(len(square))
    for r in range(rounds):
        for i in square[(start + r) % len(square)]:
            yield names[i]


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


def graph_medians(fns: dict, rounds: int, torch, inner: int = 5,
                  settle_ms: float = 20.0) -> dict:
    """{name: median ms per call} of device time: each function's `inner` calls captured in
    one CUDA graph, replays timed with CUDA events, interleaved round by round, each sample
    after about `settle_ms` of untimed replays of the same graph (as `interleaved_medians`
    settles its samples: until 2026-12-07 a replay was timed right after another
    function's, and the paged decode table's first row, the first graph the card ran after
    the compiles, came out 0.83x Triton in fp16 and 1.35x in bf16). Launch and Python
    overheads stay out; every function must already be compiled and loaded (call it once
    first) and must be graph-capturable (no host syncs)."""
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
    settle = {name: settle_calls(steady_call_ms(graph.replay, torch), settle_ms)
              for name, graph in graphs.items()}
    times = {name: [] for name in fns}
    for name in balanced_rounds(graphs, rounds):
        times[name].append(cuda_time_ms(graphs[name].replay, torch, 1, settle[name]) / inner)
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
