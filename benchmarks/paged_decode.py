"""Paged decode attention (examples/flash_attention/paged_decode.py): the identical kernel
source compiled by this project's tile DSL and by Triton 3.6 (the file imported twice, once
with PAGED_DECODE_FRONTEND=triton), and the KV cache's read bandwidth against a
device-to-device copy timed in the same run. Medians of interleaved rounds.

    python3 benchmarks/paged_decode.py                       # batch 1..128, context 1k..128k
    python3 benchmarks/paged_decode.py --batches 1 32 --contexts 8192 --dtypes float16 \\
        --rounds 20 --json out.json

Shapes: H = 32 query heads over H_kv = 8 KV heads (GQA 4), D = 128, 16-key cache blocks (as
vLLM's default), every sequence at the full context, blocks scattered at random. Each row:
microseconds for ours and Triton, ours / Triton (above 1: ours is faster), and the KV bytes
read per second as a percentage of a copy's (bytes read + written) per second. Each is
timed two ways: per call (`paged_decode(...)` from Python, as an eager server would call it:
host overhead included) and as device time (the same call captured in a CUDA graph and
replayed: kernels only). The percentages of the copy use device time: "% copy" against a
copy as large as the cache read (at batch 1 and 8k keys its 2 x 17 MB fit in the 50 MB L2
between replays), "% DRAM" against a 1 GB copy timed in the same rounds (the DRAM's copy
bandwidth; --no-dram-copy leaves it out). --splits adds rows with num_splits forced to each
value (both frontends), to check the split heuristic; --cold-sets N gives ours, Triton and
the same-size copy N copies of their inputs each, used in turn, so that every call finds
its data evicted from the L2 by the other N - 1 (as a decode step does, after the other
layers' caches; only for caches under 512 MB, past which the L2 holds no useful share);
--breakdown adds the device time of
our split kernel and our merge kernel each launched alone, and of our call without
programmatic dependent launch; --variants adds our kernel with other configs,
--triton-variants Triton's (to give it its own best config). Cases whose
cache would exceed --max-gb are skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _bench import gpu_torch, graph_medians, interleaved_medians, parse_variants  # noqa: E402

KERNEL_FILE = os.path.join(HERE, "..", "examples", "flash_attention", "paged_decode.py")


def load_kernel_module(frontend: str):
    """paged_decode.py imported for `frontend` ('tile' or 'triton')."""
    os.environ["PAGED_DECODE_FRONTEND"] = frontend
    spec = importlib.util.spec_from_file_location(f"paged_decode_{frontend}", KERNEL_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_case(torch, batch, context, dtype, H, H_kv, D, block_size, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    blocks_per_seq = -(-context // block_size)
    num_blocks = batch * blocks_per_seq
    dt = getattr(torch, dtype)
    table = torch.randperm(num_blocks, device="cuda", generator=gen).to(torch.int32)
    table = table.reshape(batch, blocks_per_seq)
    q = torch.randn((batch, H, D), device="cuda", dtype=dt, generator=gen)
    k = torch.randn((num_blocks, block_size, H_kv, D), device="cuda", dtype=dt, generator=gen)
    v = torch.randn_like(k)
    seq_lens = torch.full((batch,), context, device="cuda", dtype=torch.int32)
    return q, k, v, table, seq_lens


def _kernels_alone(module, q, k, v, table, seq_lens, splits) -> dict:
    """The split kernel and the merge kernel launched on their own (same arguments as a
    call), to see what each costs in device time."""
    import torch
    plan = module._plan(q, k, v, table, seq_lens, splits, None)
    if plan.part_shapes is None:
        return {}
    out = torch.empty(plan.out_shape, device=q.device, dtype=q.dtype)
    part_o = torch.zeros(plan.part_shapes[0], device=q.device, dtype=torch.float32)
    part_lse = torch.zeros(plan.part_shapes[1], device=q.device, dtype=torch.float32)
    scale = plan.default_scale * 1.4426950408889634

    def split():
        module._paged_decode_split[plan.split_grid](
            q, k, v, table, seq_lens, out, part_o, part_lse, scale, *plan.split_args,
            **plan.split_meta)

    def merge():
        module._paged_decode_merge[plan.merge_grid](part_o, part_lse, out, *plan.merge_args,
                                                    **plan.merge_meta)
    return {"split kernel alone": split, "merge kernel alone": merge}


def _rotating(sets: list, call):
    """A function of no arguments calling `call` on the next of `sets` each time (a CUDA
    graph records the set each captured call took; graph_medians captures 5 calls, so with
    5 sets every replay rotates through all of them and no call follows its own set)."""
    turn = itertools.count()
    return lambda: call(sets[next(turn) % len(sets)])


def run_case(torch, ours, theirs, args, dtype, batch, context, kv_bytes, itemsize,
             splits=None):
    """One row: ours, Triton and the copy timed interleaved, per call and by CUDA-graph
    replay (the buffers die on return). `splits` forces num_splits (None: the heuristic)."""
    H, H_kv = args.heads
    D = args.head_dim
    sets = args.cold_sets if kv_bytes * args.cold_sets <= 2 * 10 ** 9 and \
        kv_bytes < 512 * 2 ** 20 else 1
    cases = [make_case(torch, batch, context, dtype, H, H_kv, D, args.block_size, seed)
             for seed in range(sets)]
    q, k, v, table, seq_lens = cases[0]
    # The copy: a buffer as large as the cache read (capped at 2 GB), copied
    # device to device; its bandwidth counts bytes read plus written.
    copy_elems = min(kv_bytes, 2 * 10 ** 9) // 2 // itemsize
    copies = [(torch.empty(copy_elems, device="cuda", dtype=q.dtype),
               torch.empty(copy_elems, device="cuda", dtype=q.dtype)) for _ in range(sets)]
    fns = {"ours": _rotating(cases, lambda c: ours.paged_decode(*c, num_splits=splits)),
           "copy": _rotating(copies, lambda c: c[1].copy_(c[0]))}
    if args.dram_copy is not None:  # the DRAM copy: 1 GB each way, far past the 50 MB L2
        fns["dram copy"] = lambda: args.dram_copy[1].copy_(args.dram_copy[0])
    if theirs is not None:
        fns["triton"] = _rotating(cases, lambda c: theirs.paged_decode(*c, num_splits=splits))
    num_splits = ours._plan(q, k, v, table, seq_lens, splits, None).num_splits
    row = {"dtype": dtype, "batch": batch, "context": context, "H": H, "H_kv": H_kv, "D": D,
           "block_size": args.block_size, "num_splits": num_splits,
           "splits_forced": splits is not None, "input_sets": sets}
    if theirs is not None:
        a = ours.paged_decode(q, k, v, table, seq_lens, num_splits=splits).float()
        b = theirs.paged_decode(q, k, v, table, seq_lens, num_splits=splits).float()
        row["max_abs_diff_vs_triton"] = float((a - b).abs().max())
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    contenders = [("ours", ours, args.variants)]
    if theirs is not None:
        contenders.append(("triton", theirs, args.triton_variants))
    for who, module, variants in contenders:
        for name, cfg, pps, min_tiles in variants:
            full = module.launch_config(D, batch * H_kv, sms, cfg)
            vsplits = splits or module.choose_num_splits(
                batch, H_kv, -(-context // full["BLOCK_N"]), sms,
                programs_per_sm=pps or module.split_programs_per_sm(full, D),
                min_tiles=min_tiles)
            fns[f"{who}[{name}]"] = _rotating(
                cases, lambda c, m=module, cfg=cfg, vsplits=vsplits:
                m.paged_decode(*c, num_splits=vsplits, config=cfg))
            row.setdefault("variant_splits", {})[f"{who}[{name}]"] = vsplits
    if args.breakdown:
        fns.update(_kernels_alone(ours, q, k, v, table, seq_lens, splits))
        fns["ours without PDL"] = lambda: ours.paged_decode(q, k, v, table, seq_lens,
                                                            num_splits=splits, pdl=False)
    per_call = interleaved_medians(fns, args.rounds, torch)
    device = graph_medians(fns, args.rounds, torch)
    copy_gbs = 2 * copy_elems * itemsize / device["copy"] / 1e6
    row["copy_GB/s"] = copy_gbs
    dram_gbs = nan = float("nan")
    if "dram copy" in device:
        dram_gbs = 2 * args.dram_copy[0].nbytes / device["dram copy"] / 1e6
        row["dram_copy_GB/s"] = dram_gbs
    for name in ("ours", "triton"):
        if name in device:
            gbs = kv_bytes / device[name] / 1e6
            row[name] = {"us": per_call[name] * 1e3, "graph_us": device[name] * 1e3,
                         "GB/s": gbs, "pct_copy": 100 * gbs / copy_gbs,
                         "pct_dram_copy": 100 * gbs / dram_gbs}
    for name in row.get("variant_splits", {}):
        t = device[name]
        row.setdefault("variants", {})[name] = {"graph_us": t * 1e3,
                                                "pct_copy": 100 * kv_bytes / t / 1e6 / copy_gbs}
        print(f"    variant {name} ({row['variant_splits'][name]} splits): {t * 1e3:.2f} us, "
              f"{row['variants'][name]['pct_copy']:.1f}% copy (ours {t / device['ours']:.3f}x "
              f"as fast)")
    tri = row.get("triton")
    if tri:
        row["ours/triton"] = device["triton"] / device["ours"]
        fastest = min(t for n, t in device.items() if n.startswith("triton"))
        row["ours/fastest_triton"] = fastest / device["ours"]
    if args.breakdown:
        row["breakdown_graph_us"] = {n: device[n] * 1e3 for n in (
            "ours without PDL", "split kernel alone", "merge kernel alone") if n in device}
        row["breakdown_graph_us"]["copy"] = device["copy"] * 1e3
        print("    device us: " + ", ".join(f"{n} {t:.2f}"
                                           for n, t in row["breakdown_graph_us"].items()))
    print(f"{dtype:9s} {batch:5d} {context:7d} {num_splits:5d}{'*' if splits else ' '} "
          f"{row['ours']['us']:8.1f} {tri['us'] if tri else nan:8.1f} "
          f"{row['ours']['graph_us']:8.1f} {tri['graph_us'] if tri else nan:8.1f} "
          f"{row.get('ours/triton', nan):8.3f} "
          f"{row['ours']['GB/s']:9.0f} {row['ours']['pct_copy']:6.1f}% "
          f"{tri['pct_copy'] if tri else nan:6.1f}% {row['ours']['pct_dram_copy']:6.1f}%",
          flush=True)
    return row


def _split_count_options(variants: list) -> list:
    """parse_variants' (name, options) -> (name, config, programs per SM, minimum tiles per
    key range): `pps` and `mt` set the split count, the rest is the kernel config."""
    return [(name, cfg, cfg.pop("pps", None), cfg.pop("mt", 4)) for name, cfg in variants]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    p.add_argument("--contexts", type=int, nargs="+", default=[1024, 8192, 32768, 131072])
    p.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"],
                   choices=["float16", "bfloat16"])
    p.add_argument("--heads", type=int, nargs=2, default=[32, 8], metavar=("H", "H_KV"))
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--max-gb", type=float, default=24.0, help="skip larger KV caches")
    p.add_argument("--no-triton", action="store_true", help="skip Triton (not installed)")
    p.add_argument("--splits", type=int, nargs="*", default=[],
                   help="also time each case with num_splits forced to these values")
    p.add_argument("--breakdown", action="store_true",
                   help="also time our split and merge kernels alone, and our call without "
                        "PDL (device time)")
    p.add_argument("--variants", default="",
                   help='same-run variants of our kernel config, "name:BLOCK_N=32,'
                        'num_stages=4,pps=3,mt=2;..." (pps, mt: programs per SM and minimum '
                        'tiles per range for the split count; default: the programs that fit '
                        'by shared memory, and 4)')
    p.add_argument("--triton-variants", default="",
                   help="the same for Triton 3.6 running the same source (its own best "
                        "config next to ours: the row's ours/fastest_triton)")
    p.add_argument("--cold-sets", type=int, default=1, metavar="N",
                   help="N input sets per contender, used in turn (5: every call finds its "
                        "cache, and the copy its buffers, out of the L2)")
    p.add_argument("--no-dram-copy", action="store_true",
                   help="skip the 1 GB copy (the DRAM copy bandwidth column)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    args.variants = _split_count_options(parse_variants(args.variants))
    args.triton_variants = _split_count_options(parse_variants(args.triton_variants))
    torch = gpu_torch("paged_decode.py")
    if torch is None:
        return 0
    ours = load_kernel_module("tile")
    theirs = None if args.no_triton else load_kernel_module("triton")
    args.dram_copy = None if args.no_dram_copy else (
        torch.empty(2 ** 30, device="cuda", dtype=torch.uint8),
        torch.empty(2 ** 30, device="cuda", dtype=torch.uint8))
    H, H_kv = args.heads
    D = args.head_dim
    print(f"device: {torch.cuda.get_device_name()}; H={H}, H_kv={H_kv}, D={D}, "
          f"block_size={args.block_size}")
    print(f"{'':29s} {'per call (us)':>17s} {'device (us)':>17s}")
    print(f"{'dtype':9s} {'batch':>5s} {'context':>7s} {'splits':>6s} {'ours':>8s} "
          f"{'triton':>8s} {'ours':>8s} {'triton':>8s} {'ours/tri':>8s} {'ours GB/s':>9s} "
          f"{'% copy':>7s} {'tri %':>7s} {'% DRAM':>7s}")
    results = []
    for dtype in args.dtypes:
        for batch in args.batches:
            for context in args.contexts:
                itemsize = torch.empty((), dtype=getattr(torch, dtype)).element_size()
                kv_bytes = 2 * batch * context * H_kv * D * itemsize
                if kv_bytes > args.max_gb * 1e9:
                    print(f"{dtype:9s} {batch:5d} {context:7d}  skipped: KV cache "
                          f"{kv_bytes / 1e9:.1f} GB > --max-gb {args.max_gb}")
                    continue
                for splits in [None] + args.splits:
                    row = run_case(torch, ours, theirs, args, dtype, batch, context,
                                   kv_bytes, itemsize, splits)
                    torch.cuda.empty_cache()
                    results.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
