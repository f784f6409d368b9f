"""Gluon copy and transpose on the GPU against torch's copy bandwidth, interleaved.

Reports GB/s (bytes read + written once each) and the percentage of torch's device-to-device
copy bandwidth measured in the same rounds; torch's own transpose (`x.t().contiguous()`) is
timed alongside. The H100 lowers its clock under sustained load, so each round times every
case back to back and medians over rounds are compared.

    PYTHONPATH=. python benchmarks/gluon_copy_transpose.py [--rounds 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "gluon"))
sys.path.insert(0, os.path.join(HERE, ".."))


def cuda_time_ms(fn, torch, inner: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(inner):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / inner


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("gluon_copy_transpose.py needs a GPU (and torch); nothing measured")
        return 0
    from shared_codegen.runtime.driver import has_gpu

    if not has_gpu() or not torch.cuda.is_available():
        print("gluon_copy_transpose.py needs a GPU; nothing measured")
        return 0
    from copy_kernel import copy_kernel
    from transpose_kernel import transpose

    n = 1 << 29  # 512 Mi fp16: 1 GiB read + 1 GiB written per copy
    src = torch.randn(n, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    side = 1 << 14  # 16384 x 16384 fp32 = 1 GiB
    mat = torch.randn(side, side, device="cuda", dtype=torch.float32)
    mat_t = torch.empty_like(mat)

    def gluon_copy():
        copy_kernel[(n // 8192,)](src, dst, n, BLOCK=8192, VEC=8, num_warps=8)

    def gluon_transpose():
        return transpose(mat, block_m=64, block_n=64, num_warps=4)

    gluon_copy()
    torch.testing.assert_close(dst, src)
    torch.testing.assert_close(gluon_transpose(), mat.t().contiguous())
    cases = {
        "copy (torch)": (lambda: dst.copy_(src), 2 * n * 2),
        "copy (gluon)": (gluon_copy, 2 * n * 2),
        "transpose (torch)": (lambda: mat_t.copy_(mat.t()), 2 * mat.numel() * 4),
        "transpose (gluon)": (gluon_transpose, 2 * mat.numel() * 4),
    }
    for fn, _ in cases.values():  # warm up: compile, load, caches
        fn()
    torch.cuda.synchronize()
    times = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, (fn, _bytes) in cases.items():
            times[name].append(cuda_time_ms(fn, torch, 5))
    copy_gbs = cases["copy (torch)"][1] / statistics.median(times["copy (torch)"]) / 1e6
    print(f"device: {torch.cuda.get_device_name()}  rounds: {args.rounds}")
    print(f"{'kernel':22s} {'ms':>8s} {'GB/s':>8s} {'% copy':>7s}")
    results = {}
    for name, (_fn, nbytes) in cases.items():
        ms = statistics.median(times[name])
        gbs = nbytes / ms / 1e6
        results[name] = {"ms": ms, "GB/s": gbs, "pct_copy": 100 * gbs / copy_gbs}
        print(f"{name:22s} {ms:8.3f} {gbs:8.0f} {100 * gbs / copy_gbs:6.1f}%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
