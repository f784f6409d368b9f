"""Planning time of ``convert_layout`` for 20 typical layout pairs (128x128, 4-8 warps).

cold   : every cache emptied first (layout -> LinearLayout, flattening, plan), median of runs
cached : the same call again (what a compile that meets the pair twice pays)

Run: ``python benchmarks/layouts.py``. Budget: cold < 2 ms, cached < 50 us per pair.
"""

from __future__ import annotations

import statistics
import time

from gluon.layouts import (BlockedLayout, DotOperandLayout, NVMMADistributedLayout,
                           SliceLayout)
from gluon.layouts import distributed as _distributed
from gluon.layouts import planner

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


def clear_caches():
    planner._plan_cached.cache_clear()
    planner._flat_hashable.cache_clear()
    planner._to_ll_cached.cache_clear()
    _distributed._cached_linear_layout.cache_clear()


def time_pair(src, dst, dtype, repeats=7):
    cold = []
    for _ in range(repeats):
        clear_caches()
        start = time.perf_counter()
        plan = planner.plan_conversion(src, dst, SHAPE, dtype)
        cold.append(time.perf_counter() - start)
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        planner.plan_conversion(src, dst, SHAPE, dtype)
    cached = (time.perf_counter() - start) / n
    return plan, statistics.median(cold), cached


def main():
    rows = []
    print(f"{'pair':32} {'dtype':5} {'plan':22} {'cost':>10} {'cold us':>9} {'cached us':>10}")
    for name, src, dst, dtype in pairs():
        plan, cold, cached = time_pair(src, dst, dtype)
        rows.append((cold, cached))
        if plan.kind == "shared_memory":
            cost = f"{plan.cost.store_wavefronts:g}/{plan.cost.load_wavefronts:g} wf"
        elif plan.kind == "warp_shuffle":
            cost = f"{plan.cost.shuffles} shfl"
        else:
            cost = "-"
        print(f"{name:32} {dtype:5} {plan.kind:22} {cost:>10} {cold * 1e6:9.0f} "
              f"{cached * 1e6:10.1f}")
    colds = [c for c, _ in rows]
    cacheds = [c for _, c in rows]
    print(f"{'max':32} {'':5} {'':22} {'':>10} {max(colds) * 1e6:9.0f} "
          f"{max(cacheds) * 1e6:10.1f}")
    print(f"{'median':32} {'':5} {'':22} {'':>10} {statistics.median(colds) * 1e6:9.0f} "
          f"{statistics.median(cacheds) * 1e6:10.1f}")


if __name__ == "__main__":
    main()
