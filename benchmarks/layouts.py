"""Planning time of ``convert_layout`` for 20 typical layout pairs (128x128, 4-8 warps).

cold      : the planner's caches emptied (flattening, plan, swizzle solver); the layouts'
            LinearLayouts already built, as they are once a kernel has been type-checked
cold+ll   : also empty the families' LinearLayout cache, so building both layouts is timed
cached    : the same call again (what a compile that meets the pair twice pays)
Each cold number is the median of 7 runs.

Run: ``python benchmarks/layouts.py``. Budget: cold < 2 ms, cached < 50 us per pair.
"""

from __future__ import annotations

import statistics
import time

from gluon.layouts import BlockedLayout, DotOperandLayout, NVMMADistributedLayout
from shared_codegen.layouts import distributed as _distributed
from shared_codegen.layouts import planner

SHAPE = (128, 128)


def pairs():
    b_row4 = BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    b_col4 = BlockedLayout([8, 1], [8, 4], [1, 4], [0, 1])
    b_row8 = BlockedLayout([1, 8], [4, 8], [8, 1], [1, 0])
    b_col8 = BlockedLayout([8, 1], [8, 4], [1, 8], [0, 1])
    b_sq4 = BlockedLayout([2, 2], [4, 8], [2, 2], [1, 0])
    b_v4 = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    b_v4b = BlockedLayout([2, 2], [4, 8], [4, 1], [1, 0])
    b_v4_8 = BlockedLayout([1, 4], [8, 4], [8, 1], [1, 0])
    mma2 = NVMMADistributedLayout([2, 0], [4, 1], [16, 8])
    mma2_8 = NVMMADistributedLayout([2, 0], [4, 2], [16, 8])
    mma3 = NVMMADistributedLayout([3, 0], [4, 1], [16, 128, 16])
    mma3_8 = NVMMADistributedLayout([3, 0], [8, 1], [16, 128, 16])
    dot_a = DotOperandLayout(0, mma2, 2)
    dot_b = DotOperandLayout(1, mma2, 2)
    dot_a8 = DotOperandLayout(0, mma2_8, 2)
    return [
        ("blocked row -> col (4w)", b_row4, b_col4, "fp16"),
        ("blocked col -> row (4w)", b_col4, b_row4, "fp16"),
        ("blocked row -> col (8w)", b_row8, b_col8, "fp16"),
        ("blocked row -> col fp32 (8w)", b_row8, b_col8, "fp32"),
        ("blocked same (4w)", b_row4, b_row4, "fp16"),
        ("blocked lane swap (4w)", b_v4, b_v4b, "fp16"),
        ("blocked lane swap fp32 (4w)", b_v4, b_v4b, "fp32"),
        ("blocked -> 2x2 warps (4w)", b_row4, b_sq4, "fp16"),
        ("blocked v4 -> v8 (8w)", b_v4_8, b_row8, "bf16"),
        ("mma v2 -> blocked (4w)", mma2, b_row4, "fp16"),
        ("mma v2 -> blocked fp32 (4w)", mma2, b_row4, "fp32"),
        ("mma v2 -> dot A (4w)", mma2, dot_a, "fp16"),
        ("blocked -> dot A (4w)", b_row4, dot_a, "fp16"),
        ("blocked -> dot B (4w)", b_col4, dot_b, "fp16"),
        ("mma v2 -> dot A (8w)", mma2_8, dot_a8, "fp16"),
        ("wgmma -> blocked (4w)", mma3, b_row4, "fp16"),
        ("wgmma -> blocked fp32 (4w)", mma3, b_row4, "fp32"),
        ("wgmma -> blocked (8w)", mma3_8, b_row8, "bf16"),
        ("wgmma -> col blocked (8w)", mma3_8, b_col8, "fp16"),
        ("blocked -> wgmma fp8 (4w)", b_row4, mma3, "fp8"),
    ]


def clear_caches(layouts_too: bool):
    planner._plan_cached.cache_clear()
    planner._flat_hashable.cache_clear()
    planner._swizzle_solver.cache_clear()
    if layouts_too:
        planner._to_ll_cached.cache_clear()
        _distributed._cached_linear_layout.cache_clear()


def _cold(src, dst, dtype, layouts_too, repeats=7):
    times = []
    for _ in range(repeats):
        clear_caches(layouts_too)
        if not layouts_too:
            planner.as_linear_layout(src, SHAPE)
            planner.as_linear_layout(dst, SHAPE)
        start = time.perf_counter()
        plan = planner.plan_conversion(src, dst, SHAPE, dtype)
        times.append(time.perf_counter() - start)
    return plan, statistics.median(times)


def time_pair(src, dst, dtype):
    plan, cold = _cold(src, dst, dtype, layouts_too=False)
    _, cold_ll = _cold(src, dst, dtype, layouts_too=True)
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        planner.plan_conversion(src, dst, SHAPE, dtype)
    cached = (time.perf_counter() - start) / n
    return plan, cold, cold_ll, cached


def main():
    rows = []
    print(f"{'pair':30} {'dtype':5} {'plan':21} {'cost':>9} {'cold us':>8} {'cold+ll us':>10} "
          f"{'cached us':>9}")
    for name, src, dst, dtype in pairs():
        plan, cold, cold_ll, cached = time_pair(src, dst, dtype)
        rows.append((cold, cold_ll, cached))
        if plan.kind == "shared_memory":
            cost = f"{plan.cost.store_wavefronts:g}/{plan.cost.load_wavefronts:g} wf"
        elif plan.kind == "warp_shuffle":
            cost = f"{plan.cost.shuffles} shfl"
        else:
            cost = "-"
        print(f"{name:30} {dtype:5} {plan.kind:21} {cost:>9} {cold * 1e6:8.0f} "
              f"{cold_ll * 1e6:10.0f} {cached * 1e6:9.1f}")
    for label, reduce in (("max", max), ("median", statistics.median)):
        cols = [reduce([r[i] for r in rows]) * 1e6 for i in range(3)]
        print(f"{label:30} {'':5} {'':21} {'':>9} {cols[0]:8.0f} {cols[1]:10.0f} "
              f"{cols[2]:9.1f}")


if __name__ == "__main__":
    main()
