"""Where the Hopper attention forward loses time between tiles, from a recorded timeline
(docs/timeline.md). At D = 128 ours runs about 5% slower at N = 4k than at 16k while cuDNN
is level: the same 2048 tiles, a quarter as long, so something costs a fixed time per tile.

    PYTHONPATH=. python3 benchmarks/attention_tile_gaps.py 128:4096:0:fp16 128:16384:0:fp16 \\
        [128:4096:0:fp16:o_direct=1 ...] [--json out.json]

Configs are D:N:causal:dtype[:B=..][:H=..][:launcher_option=int...]
(`attention_profile_target.config_inputs`; B * N = 16k tokens and H * D = 2048 unless given). For each
consumer warpgroup (its first warp) of every program the script takes the kernel's regions
(`softmax` of blocks 1 .. n-1, `last PV`, `epilogue`, `wait Q`, `wait turn`, `wait K`) and
reports, in microseconds (medians over warpgroups and tiles):

- period: a block's time in the steady state, from one softmax's start to the next;
- boundary: from the last block's softmax start in a tile to the next tile's block-1
  softmax start, less the two periods the blocks between them (block 0's softmax is outside
  the loop and its regions) would take in the steady state: the time a tile boundary costs;
- the boundary's parts: `last PV` (the last PV product and its wait), `epilogue`, `wait Q`,
  and the first block (from Q's arrival to block 1's softmax, less one period);
- tile: from one epilogue's start to the next; `boundary / tile`, the share the boundaries
  take (what a kernel without them would gain).

Recording costs time (each region is two 16-byte stores a warp), so the absolute numbers
run high; the shares are what the script is for.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "..", "examples", "flash_attention"),
          os.path.join(HERE, "..", "examples"), os.path.join(HERE, "..")):
    sys.path.insert(0, p)


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def tile_gaps(timeline) -> dict:
    """The boundary statistics of one recorded launch (see the module docstring), in the
    timeline's clock units / 1000 (µs for the GPU's nanoseconds)."""
    first_warp = {}  # (program, partition) -> its first warp (a warpgroup's warps agree)
    for r in timeline.regions:
        key = (r.program, r.partition)
        first_warp[key] = min(first_warp.get(key, r.warp), r.warp)
    lanes = defaultdict(list)
    for r in timeline.regions:
        if r.warp == first_warp[(r.program, r.partition)] and r.name in (
                "softmax", "last PV", "epilogue", "wait Q", "wait turn", "wait K"):
            lanes[(r.program, r.partition)].append(r)
    periods, boundaries, tiles = [], [], []
    parts = defaultdict(list)
    for regions in lanes.values():
        regions.sort(key=lambda r: r.start)
        softmax = [r for r in regions if r.name == "softmax"]
        epilogues = [r for r in regions if r.name == "epilogue"]
        if not softmax or not epilogues:
            continue
        cuts = [e.start for e in epilogues]
        # Consecutive softmax regions of one tile: no epilogue starts between them.
        lane_periods = [b.start - a.start for a, b in zip(softmax, softmax[1:])
                        if not any(a.start < c < b.start for c in cuts)]
        if not lane_periods:
            continue
        period = _median(lane_periods)
        periods.extend(lane_periods)
        tiles.extend(b - a for a, b in zip(cuts, cuts[1:]))
        for cut, nxt in zip(cuts, cuts[1:] + [None]):
            before = [s for s in softmax if s.start < cut]
            after = [s for s in softmax if s.start > cut and (nxt is None or s.start < nxt)]
            if not before or not after:
                continue
            last, first = before[-1], after[0]
            boundaries.append(first.start - last.start - 2 * period)
            between = [r for r in regions if last.start < r.start < first.start]
            for name in ("last PV", "epilogue", "wait Q"):
                parts[name].append(sum(r.end - r.start for r in between if r.name == name))
            wait_q = [r for r in between if r.name == "wait Q"]
            if wait_q:
                parts["first block"].append(first.start - wait_q[-1].end - period)
            parts["wait turn"].append(sum(r.end - r.start for r in between
                                          if r.name == "wait turn"))
    scale = 1e-3
    out = {"period_us": _median(periods) * scale, "boundary_us": _median(boundaries) * scale,
           "boundary_mean_us": (statistics.fmean(boundaries) * scale if boundaries
                                else float("nan")),
           "tile_us": _median(tiles) * scale, "boundaries": len(boundaries),
           "parts_us": {k: _median(v) * scale for k, v in parts.items()}}
    out["boundary_share"] = out["boundary_mean_us"] / out["tile_us"] if tiles else float("nan")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    from _bench import gpu_torch
    torch = gpu_torch("attention_tile_gaps.py")
    if torch is None:
        return 0
    os.environ.setdefault("SC_TIMELINE_EVENTS", "16384")
    from attention_profile_target import config_inputs
    from hopper import attention_kernel, attention_launcher
    results = {}
    for spec in args.configs:
        q, k, v, causal, kw = config_inputs(torch, spec)
        run = attention_launcher(q, k, v, causal=causal, launch_options={"timeline": True},
                                 **kw)
        run()  # compile and warm up
        run()
        torch.cuda.synchronize()
        timeline = attention_kernel.last_timeline
        stats = tile_gaps(timeline)
        stats["dropped"] = timeline.dropped
        results[spec] = stats
        parts = ", ".join(f"{k} {v:.2f}" for k, v in stats["parts_us"].items())
        print(f"{spec}: period {stats['period_us']:.3f} us, tile {stats['tile_us']:.1f} us, "
              f"boundary {stats['boundary_us']:.2f} us (mean {stats['boundary_mean_us']:.2f}, "
              f"{100 * stats['boundary_share']:.1f}% of a tile; n={stats['boundaries']}); "
              f"parts: {parts}; dropped {timeline.dropped}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
