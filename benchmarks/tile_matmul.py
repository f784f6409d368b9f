"""A matmul with the structure of Triton's tutorial 03, one kernel source
(benchmarks/tutorial03_matmul.py, ours) compiled by this project's tile DSL and by Triton 3.6, against torch.matmul (cuBLAS) for fp16
and torch._scaled_mm (cuBLASLt) for fp8 e4m3, timed interleaved in one process.

    python3 benchmarks/tile_matmul.py                  # 4096^3 and 8192^3, fp16 and fp8
    python3 benchmarks/tile_matmul.py --sizes 4096 --dtypes fp16 --rounds 20 --json out.json
    python3 benchmarks/tile_matmul.py --graph     # also device time from CUDA-graph replays

Each row: milliseconds (medians of interleaved rounds), TFLOP/s, and the ratios ours/Triton
and ours/cuBLAS (above 1 means ours is faster). The default timing is CUDA events around 5
back-to-back calls, so the host time of the first call in each group counts (about 1/5 of a
call's launch cost, a few percent of a 0.2 ms matmul); `--graph` adds the kernels' device
time alone, from CUDA-graph replays interleaved the same way. The configs are the
tutorial's best for the H100 (128x256x64, 3 stages, 8 warps for fp16; 128x256x128 for fp8),
the same for both compilers; `--config M,N,K,stages,warps` overrides them.

Measured on the H100 (2026-11-25, one run, interleaved, 10 rounds; ours / Triton 3.6 /
cuBLAS TFLOP/s): fp16 4096^3 628 / 644 / 698 (0.975x Triton, 0.90x cuBLAS), fp16 8192^3
687 / 685 / 698 (1.003x, 0.985x), fp8 e4m3 4096^3 1083 / 913 / 1149 (1.19x, 0.94x), fp8
8192^3 1362 / 945 / 1374 (1.44x, 0.99x).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _bench import gpu_torch, graph_medians, interleaved_medians  # noqa: E402

CONFIGS = {
    "fp16": dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
                 num_stages=3, num_warps=8),
    "fp8": dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=8,
                num_stages=3, num_warps=8),
}


def load_kernel_module(frontend: str):
    """benchmarks/tutorial03_matmul.py imported for `frontend` ('tile' or 'triton')."""
    os.environ["MATMUL_FRONTEND"] = frontend
    path = os.path.join(HERE, "tutorial03_matmul.py")
    spec = importlib.util.spec_from_file_location(f"tutorial03_{frontend}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs(torch, dtype: str, size: int):
    gen = torch.Generator(device="cuda").manual_seed(size)
    a = torch.randn((size, size), device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16, generator=gen)
    if dtype == "fp8":
        # As the tutorial: B transposed (K-major), which fp8 wgmma reads without a transpose.
        a = a.to(torch.float8_e4m3fn)
        b = b.T.to(torch.float8_e4m3fn)
    return a, b


def cublas(torch, dtype, a, b):
    if dtype == "fp16":
        return lambda: torch.matmul(a, b)
    one = torch.ones((), device="cuda", dtype=torch.float32)
    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float16)


def check(torch, ours, ref, what):
    err = float((ours.float() - ref.float()).abs().max() / ref.float().abs().max())
    status = "ok" if err < 2e-2 else "WRONG"
    print(f"  {what}: max error {err:.2e} relative to max |C| ({status})")
    return err


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    p.add_argument("--dtypes", nargs="+", default=["fp16", "fp8"], choices=["fp16", "fp8"])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--config", help="M,N,K,stages,warps for every dtype")
    p.add_argument("--no-triton", action="store_true", help="skip Triton (not installed)")
    p.add_argument("--graph", action="store_true",
                   help="also time device time alone: each function's calls replayed from a "
                        "CUDA graph, interleaved (no host time in the ratio)")
    p.add_argument("--compare-persistent", action="store_true",
                   help="also time our kernel compiled with SC_PERSISTENT=0 (one program per "
                        "tile: tile/passes/persistent.py turned off), row 'ours_plain'")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    torch = gpu_torch("tile_matmul.py")
    if torch is None:
        return 0
    ours = load_kernel_module("tile")
    theirs = None if args.no_triton else load_kernel_module("triton")
    # A second copy of our kernel (its own JIT function and variants), compiled with the
    # persistent-programs pass off on its first launch of each problem.
    plain = load_kernel_module("tile") if args.compare_persistent else None
    results = []
    print(f"device: {torch.cuda.get_device_name()}")
    for dtype in args.dtypes:
        config = dict(CONFIGS[dtype])
        if args.config:
            m, n, k, s, w = (int(x) for x in args.config.split(","))
            config.update(BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, num_stages=s,
                          num_warps=w)
        for size in args.sizes:
            a, b = inputs(torch, dtype, size)
            print(f"{dtype} {size}^3, config {config}")
            fns = {"ours": lambda: ours.matmul(a, b, config), "cublas": cublas(torch, dtype, a, b)}
            if theirs is not None:
                fns["triton"] = lambda: theirs.matmul(a, b, config)
            if plain is not None:
                before = os.environ.get("SC_PERSISTENT")
                os.environ["SC_PERSISTENT"] = "0"
                try:
                    plain.matmul(a, b, config)  # compiles this problem's variant
                finally:
                    if before is None:
                        del os.environ["SC_PERSISTENT"]
                    else:
                        os.environ["SC_PERSISTENT"] = before
                fns["ours_plain"] = lambda: plain.matmul(a, b, config)
            ref = fns["cublas"]()
            errors = {name: check(torch, fn(), ref, name) for name, fn in fns.items()
                      if name != "cublas"}
            med = interleaved_medians(fns, args.rounds, torch)
            flops = 2.0 * size ** 3
            row = {"dtype": dtype, "size": size, "config": config, "errors": errors}
            for name, ms in med.items():
                row[name] = {"ms": ms, "tflops": flops / ms / 1e9}
                print(f"  {name:7s} {ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOP/s")
            row["ours/cublas"] = med["cublas"] / med["ours"]
            if "ours_plain" in med:
                row["ours/ours_plain"] = med["ours_plain"] / med["ours"]
                print(f"  persistent vs one program per tile {row['ours/ours_plain']:.3f}x")
            line = f"  ours vs cuBLAS {row['ours/cublas']:.3f}x"
            if "triton" in med:
                row["ours/triton"] = med["triton"] / med["ours"]
                line += f", ours vs Triton {row['ours/triton']:.3f}x"
            print(line)
            if args.graph:
                dev = graph_medians(fns, args.rounds, torch)
                for name, ms in dev.items():
                    row[name]["graph_ms"] = ms
                    print(f"  {name:7s} {ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOP/s (graph)")
                row["graph ours/cublas"] = dev["cublas"] / dev["ours"]
                if "ours_plain" in dev:
                    row["graph ours/ours_plain"] = dev["ours_plain"] / dev["ours"]
                    print(f"  graph: persistent vs one program per tile "
                          f"{row['graph ours/ours_plain']:.3f}x")
                line = f"  graph: ours vs cuBLAS {row['graph ours/cublas']:.3f}x"
                if "triton" in dev:
                    row["graph ours/triton"] = dev["triton"] / dev["ours"]
                    line += f", ours vs Triton {row['graph ours/triton']:.3f}x"
                print(line)
            results.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
