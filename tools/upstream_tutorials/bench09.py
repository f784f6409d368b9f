#!/usr/bin/env python3
"""Tutorial 09's matmuls (Triton 3.6's 09-persistent-matmul.py) under the tile frontend and
under Triton 3.6, timed interleaved in one process against cuBLAS (torch.matmul).

    python3 tools/upstream_tutorials/bench09.py --size 8192 --configs 4 --rounds 5 [--sources DIR]

`--sources` as in run_tutorials.py (default: the repository's git-ignored `.tutorials/`).

The tutorial is loaded twice by run_tutorials.py's `load` (tile: imports swapped; Triton: as
written), each autotuned kernel keeping its first `--configs` configs. Variants: naive,
persistent, TMA and TMA persistent (host descriptors), descriptor persistent (device
descriptors), each TMA one also with warp_specialize=True. M = N = K = --size, fp16 (or
--dtype fp8), B given transposed as the tutorial's bench() gives it. Every function is checked
against cuBLAS first (the tutorial's validate() tolerance, atol=1.0); one that fails to compile
or differs is reported and left out of the timing. Times: median over --rounds rounds (each
round in a fresh random order) of CUDA-event time of 5 back-to-back calls; TFLOP/s =
2*M*N*K / time; ours/Triton = Triton ms / tile ms (above 1: tile faster).
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, ROOT)

VARIANTS = {  # name: (function name, takes B as (K, N) view, warp_specialize)
    "naive": ("matmul", True, None),
    "persistent": ("matmul_persistent", True, None),
    "tma": ("matmul_tma", False, False),
    "tma_ws": ("matmul_tma", False, True),
    "tma_persistent": ("matmul_tma_persistent", False, False),
    "tma_persistent_ws": ("matmul_tma_persistent", False, True),
    "descriptor_persistent": ("matmul_descriptor_persistent", False, False),
    "descriptor_persistent_ws": ("matmul_descriptor_persistent", False, True),
}


def call(module, variant, a, b):
    fn_name, b_view, ws = VARIANTS[variant]
    fn = getattr(module, fn_name)
    if b_view:
        return lambda: fn(a, b.T)
    return lambda: fn(a, b, ws)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--configs", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dtype", choices=["fp16", "fp8"], default="fp16")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    from run_tutorials import DEFAULT_SOURCES, _stand_ins, last_line, load
    p.add_argument("--sources", default=DEFAULT_SOURCES,
                   help="folder with 09-persistent-matmul.py (default: %(default)s)")
    args = p.parse_args(argv)

    from _bench import gpu_torch, interleaved_medians

    torch = gpu_torch("bench09.py")
    if torch is None:
        return 0
    sys.modules["_tutorial_stand_ins"] = _stand_ins()
    modules = {"tile": load("09", "tile", args.configs, False, args.sources),
               "triton": load("09", "triton", args.configs, False, args.sources)}
    dtype = torch.float16 if args.dtype == "fp16" else torch.float8_e4m3fn
    n = args.size
    torch.manual_seed(0)
    a = torch.randn((n, n), device="cuda", dtype=torch.float16).to(dtype)
    b = torch.randn((n, n), device="cuda", dtype=torch.float16).to(dtype)  # (N, K): B transposed
    flop = 2.0 * n * n * n
    print(f"device: {torch.cuda.get_device_name()}, {n}^3 {args.dtype}, first {args.configs} "
          f"configs, {args.rounds} rounds", flush=True)

    if dtype == torch.float16:
        expect = torch.matmul(a, b.T)
        fns = {"cuBLAS": lambda: torch.matmul(a, b.T)}
    else:
        expect = torch.matmul(a.to(torch.float16), b.to(torch.float16).T)
        fns = {}
    for variant in args.variants:
        for frontend, module in modules.items():
            fn = call(module, variant, a, b)
            try:
                out = fn()
                err = (out.float() - expect.float()).abs().max().item()
                if not err <= 1.0:
                    raise AssertionError(f"max |diff| to cuBLAS {err:.3g} > 1.0")
            except Exception as exc:  # noqa: BLE001 - reported, then left out
                print(f"{variant} {frontend}: not timed: {last_line(exc)}", flush=True)
                continue
            fns[f"{frontend} {variant}"] = fn
    med = interleaved_medians(fns, args.rounds, torch)

    def tflops(name):
        return f"{flop / med[name] / 1e9:7.1f}" if name in med else "    n/a"
    print(f"\n{'variant':26s} {'tile':>7s} {'Triton':>7s} {'ours/Triton':>11s}  TFLOP/s"
          + (f"  (cuBLAS {tflops('cuBLAS').strip()})" if "cuBLAS" in med else ""))
    for variant in args.variants:
        ours, theirs = f"tile {variant}", f"triton {variant}"
        ratio = f"{med[theirs] / med[ours]:11.3f}" if ours in med and theirs in med else "        n/a"
        line = f"{variant:26s} {tflops(ours)} {tflops(theirs)} {ratio}"
        if "cuBLAS" in med and ours in med:
            line += f"  ours/cuBLAS {med['cuBLAS'] / med[ours]:.3f}"
        print(line)
    print("configs picked (one per autotune key):")
    for name, module in modules.items():
        for kernel_name in ("matmul_kernel", "matmul_kernel_persistent", "matmul_kernel_tma",
                            "matmul_kernel_tma_persistent", "matmul_kernel_descriptor_persistent"):
            cache = getattr(getattr(module, kernel_name), "cache", {})
            if cache:
                print(f"  {name} {kernel_name}: " + "; ".join(str(c) for c in cache.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
