"""Where batch 1 at 8k keys spends its time (probe, not a benchmark table).

1. Timeline: the split kernel with regions (program; setup, up to the seq_len-dependent
   range; loop; each loop iteration, "tile"; epilogue) stamped by %globaltimer
   (docs/timeline.md), launched alone after a 512 MB memset has evicted the L2; prints
   when each region starts and ends across the programs' warps (min, p10, p50, p90, max),
   relative to the first program's start. In the compiled loop (sm_90a PTX) a tile region
   starts after the wait for that tile's K and V and the issue of the next tile's copies,
   and ends after its PV product.
2. Sweep: device time (CUDA-graph replay, rotating cold input sets) of the call and of the
   split kernel alone at a fixed split count for seq_lens 0 .. 32k over one block table:
   the intercept is what a call costs before it reads a byte.

    PYTHONPATH=. python3 benchmarks/paged_decode_probe.py
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _bench import gpu_torch, graph_medians  # noqa: E402
from paged_decode import KERNEL_FILE, _rotating, make_case  # noqa: E402


def instrumented_module():
    """paged_decode.py with timeline regions in the split kernel (Proton's names, which
    compile to nothing unless a launch passes timeline=True), imported as a fresh module.
    The regions go in by text edits here so that the example itself stays importable by
    Triton 3.6 without Proton."""
    src = open(KERNEL_FILE).read()
    edits = [
        ('    """One (sequence, KV head, key range): online softmax over the range\'s tiles."""\n',
         '    """One (sequence, KV head, key range): online softmax over the range\'s tiles."""\n'
         '    pl.enter_scope("program")\n    pl.enter_scope("setup")\n'),
        ("            return\n", '            pl.exit_scope("setup")\n'
         '            pl.exit_scope("program")\n            return\n'),
        ("    for tile_index in range(first, last):\n",
         '    pl.exit_scope("setup")\n    pl.enter_scope("loop")\n'
         "    for tile_index in range(first, last):\n"),
        ("        pos = tile_index * BLOCK_N + cols\n",
         '        pl.enter_scope("tile")\n        pos = tile_index * BLOCK_N + cols\n'),
        ("        m_i = m_new\n", '        m_i = m_new\n        pl.exit_scope("tile")\n'),
        ("    o = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]",
         '    pl.exit_scope("loop")\n    pl.enter_scope("epilogue")\n'
         "    o = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]"),
        ("        tl.store(Part_lse + part, lse, mask=row_ok)\n",
         "        tl.store(Part_lse + part, lse, mask=row_ok)\n"
         '    pl.exit_scope("epilogue")\n    pl.exit_scope("program")\n'),
        ("    import tile.language as tl\n",
         "    import tile.language as tl\nimport tile.profiler.language as pl\n"),
    ]
    for old, new in edits:
        assert src.count(old) == 1, f"paged_decode.py changed: {old!r} is not there once"
        src = src.replace(old, new)
    path = os.path.join(tempfile.mkdtemp(), "paged_decode_probe_kernels.py")
    with open(path, "w") as f:
        f.write(src)
    os.environ["PAGED_DECODE_FRONTEND"] = "tile"
    spec = importlib.util.spec_from_file_location("paged_decode_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def batch1_case(torch, context, table_keys, seed=0):
    """The benchmark's batch-1 case (H 32 / H_kv 8, D 128, fp16, 16-key blocks) with a block
    table of `table_keys` keys and seq_lens = context (<= table_keys)."""
    q, k, v, table, seq_lens = make_case(torch, 1, table_keys, "float16", 32, 8, 128, 16, seed)
    return q, k, v, table, torch.full_like(seq_lens, context)


def percentiles(xs):
    xs = sorted(xs)
    pick = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
    return " ".join(f"{pick(f) / 1e3:6.2f}" for f in (0, 0.1, 0.5, 0.9)) + \
        f" {xs[-1] / 1e3:6.2f}"


def timeline_runs(torch, module, splits, reps=3):
    q, k, v, table, seq_lens = batch1_case(torch, 8192, 8192)
    flush = torch.empty(512 * 2 ** 20, device="cuda", dtype=torch.uint8)
    plan = module._plan(q, k, v, table, seq_lens, splits, None)
    part_o = torch.empty(plan.part_shapes[0], device="cuda", dtype=torch.float32)
    part_lse = torch.empty(plan.part_shapes[1], device="cuda", dtype=torch.float32)
    out = torch.empty(plan.out_shape, device="cuda", dtype=q.dtype)
    meta = dict(plan.split_meta, timeline=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for rep in range(reps + 1):
        flush.zero_()
        start.record()
        module._paged_decode_split[plan.split_grid](
            q, k, v, table, seq_lens, out, part_o, part_lse, 0.1, *plan.split_args, **meta)
        end.record()
        timeline = module._paged_decode_split.last_timeline
        torch.cuda.synchronize()
        if rep == 0:
            continue  # the compile and first load
        t0 = min(r.start for r in timeline.regions if r.name == "program")
        print(f"  rep {rep}: events {start.elapsed_time(end) * 1e3:.1f} us (timeline "
              f"launch: buffer memset included); regions relative to the first start, "
              f"us: min p10 p50 p90 max")
        for name in ("program", "setup", "loop", "epilogue"):
            rs = [r for r in timeline.regions if r.name == name]
            if not rs:
                continue
            print(f"    {name:9s} n={len(rs):4d} start {percentiles([r.start - t0 for r in rs])}"
                  f" | end {percentiles([r.end - t0 for r in rs])}")
        by_warp = {}
        for r in timeline.regions:
            if r.name == "tile":
                by_warp.setdefault((r.program, r.warp), []).append(r)
        for i in range(max(len(v) for v in by_warp.values())):
            rs = [sorted(v, key=lambda r: r.start)[i] for v in by_warp.values() if len(v) > i]
            print(f"    tile {i}    n={len(rs):4d} start {percentiles([r.start - t0 for r in rs])}"
                  f" | end {percentiles([r.end - t0 for r in rs])}")
        progs = sorted({r.program for r in timeline.regions})
        print(f"    programs {len(progs)}, dropped {timeline.dropped}, "
              f"unmatched {timeline.unmatched}")


def sweep(torch, module, splits, table_keys=32768, sets=3):
    fns = {}
    for context in (0, 64, 4096, 8192, 16384, 32768):
        cases = [batch1_case(torch, context, table_keys, seed=s) for s in range(sets)]
        fns[f"call {context}"] = _rotating(
            cases, lambda c: module.paged_decode(*c, num_splits=splits))
        plan = module._plan(*cases[0], splits, None)
        meta = dict(plan.split_meta, USE_PDL=False)
        # Each set with its own partials and output, so that the split kernel alone is
        # timed on the same cold inputs as the call.
        launches = [(c, torch.empty(plan.part_shapes[0], device="cuda"),
                     torch.empty(plan.part_shapes[1], device="cuda"),
                     torch.empty(plan.out_shape, device="cuda", dtype=torch.float16))
                    for c in cases]
        fns[f"split {context}"] = _rotating(
            launches, lambda a, plan=plan, meta=meta: module._paged_decode_split[
                plan.split_grid](*a[0][:5], a[3], a[1], a[2], 0.1, *plan.split_args, **meta))
    # A copy moving (read + written) as many bytes as the 8k call reads, as the benchmark's.
    copy_elems = 8192 * 8 * 128 * 2 * 2 // 2 // 2
    copies = [(torch.empty(copy_elems, device="cuda", dtype=torch.float16),
               torch.empty(copy_elems, device="cuda", dtype=torch.float16))
              for _ in range(sets)]
    fns["copy (8k's bytes)"] = _rotating(copies, lambda c: c[1].copy_(c[0]))
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    device = graph_medians(fns, 7, torch)
    for name, ms in device.items():
        print(f"  {name:22s} {ms * 1e3:8.2f} us")


def main() -> int:
    torch = gpu_torch("paged_decode_probe.py")
    if torch is None:
        return 0
    module = instrumented_module()
    splits = int(os.environ.get("PROBE_SPLITS", "33"))
    print(f"timeline: batch 1, 8k keys, H 32 / H_kv 8, D 128, fp16, {splits} splits, cold")
    timeline_runs(torch, module, splits)
    print(f"sweep: device time at {splits} splits over a 32k-key block table, 3 cold sets")
    sweep(torch, module, splits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
