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
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "gluon"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _bench import bandwidth_table, gpu_torch, interleaved_medians  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch = gpu_torch("gluon_copy_transpose.py")
    if torch is None:
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
    medians = interleaved_medians({name: fn for name, (fn, _) in cases.items()}, args.rounds,
                                  torch)
    print(f"device: {torch.cuda.get_device_name()}  rounds: {args.rounds}")
    results = bandwidth_table(cases, medians, "copy (torch)", width=22)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
