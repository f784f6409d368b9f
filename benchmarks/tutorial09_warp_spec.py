"""tl.range(warp_specialize=True) on the H100: tutorial 09's TMA matmul and descriptor-
persistent matmul (benchmarks/tutorial09_kernels.py, ours) compiled by this project's tile
DSL and by Triton 3.6, each with warp specialization off and on, against torch.matmul
(cuBLAS), timed interleaved in one process.

    python3 benchmarks/tutorial09_warp_spec.py                     # 4096^3 and 8192^3, fp16
    python3 benchmarks/tutorial09_warp_spec.py --sizes 8192 --config 128,256,64,3,8 --json o.json

Triton's rows are left out where it is not installed.

Each row: milliseconds (medians of interleaved rounds) and TFLOP/s for ours and Triton with
WS off and on, then the ratios that answer the questions: does specialization help us
(ours WS / ours no-WS), and where do we stand (ours WS / Triton WS, ours WS / cuBLAS); above
1 means the first is faster. The default config is the tutorial's usual winner on the H100
(128 x 256 x 64, 3 stages, 8 warps); the WS rows of both run at num_warps=4, the only count
Triton's Hopper pass specializes, which both give 8 consumer warps (`_warps`).

Triton 3.6 refuses warp specialization with host descriptors on Hopper (the tutorial skips
that case there; its NVGPUWarpSpecialization pass fails on `matmul_tma`): a variant that
fails to compile or run is reported and left out of the timing. Measured numbers (H100,
2026-11-28) are in the README.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import runpy
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _bench import gpu_torch, interleaved_medians  # noqa: E402

CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_stages=3, num_warps=8)


def _config(text: str) -> dict:
    return dict(zip(CONFIG, (int(x) for x in text.split(","))))


def load_kernels(frontend: str):
    """tutorial09_kernels.py's functions as `frontend` ('tile' or 'triton') compiles them."""
    os.environ["MATMUL_FRONTEND"] = frontend
    return types.SimpleNamespace(**runpy.run_path(os.path.join(HERE, "tutorial09_kernels.py")))


def _warps(config: dict, ws: bool) -> dict:
    """Triton 3.6 specializes on Hopper only at num_warps=4, which then runs two 4-warp
    consumer warpgroups (BLOCK_M split between them) beside a producer warpgroup; ours
    gives num_warps=4 the same two consumer warpgroups (tile/passes/warp_specialize.py's
    `warp_specialize_warps`) beside one producer warp. So the WS rows of both run at
    num_warps=4 (12 warps launched, 8 of them on the wgmmas)."""
    return dict(config, num_warps=4) if ws else config


def _allocators(torch):
    """Global scratch for kernel-built descriptors, for both compilers."""
    import tile

    def alloc(size, alignment, stream):
        return torch.empty(size, dtype=torch.int8, device="cuda")

    tile.set_allocator(alloc)
    try:
        import triton
        triton.set_allocator(alloc)
    except ImportError:
        pass


def _arguments() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    p.add_argument("--kinds", nargs="+", default=["tma", "persistent"],
                   choices=["tma", "persistent"])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--config", type=_config, default=CONFIG,
                   help="BLOCK_M,BLOCK_N,BLOCK_K,stages,warps")
    p.add_argument("--json", help="write the results here")
    return p


def main(argv=None) -> int:
    args = _arguments().parse_args(argv)
    config, torch = args.config, gpu_torch("tutorial09_warp_spec.py")
    if torch is None:
        return 0
    _allocators(torch)
    frontends = {"ours": load_kernels("tile")}
    if importlib.util.find_spec("triton") is not None:
        frontends["triton"] = load_kernels("triton")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"device: {torch.cuda.get_device_name()}, config {config}")
    results = []
    for size in args.sizes:
        gen = torch.Generator(device="cuda").manual_seed(size)
        a = torch.randn((size, size), device="cuda", dtype=torch.float16, generator=gen)
        b = torch.randn((size, size), device="cuda", dtype=torch.float16, generator=gen)
        ref = torch.matmul(a, b.T)
        for kind in args.kinds:
            fns, outs = {"cublas": lambda: torch.matmul(a, b.T)}, {}
            for name, module in frontends.items():
                for ws in (False, True):
                    c = torch.empty((size, size), device="cuda", dtype=torch.float16)
                    key = f"{name}{' ws' if ws else ''}"
                    fns[key] = module.launcher(kind, a, b, c, _warps(config, ws), ws, sms)
                    outs[key] = c
            errors = {}
            for key in list(outs):
                try:
                    fns[key]()
                    torch.cuda.synchronize()
                except Exception as exc:  # noqa: BLE001 - reported, then left out
                    print(f"  {key}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                    del fns[key]
                    continue
                errors[key] = float((outs[key].float() - ref.float()).abs().max()
                                    / ref.float().abs().max())
            med = interleaved_medians(fns, args.rounds, torch)
            results.append(_report(f"{kind} {size}^3", 2.0 * size ** 3, med, errors,
                                   dict(kind=kind, size=size, config=config)))
    if args.json:
        with open(args.json, "w") as out:
            out.write(json.dumps(results, indent=1))
    return 0


# The ratios that answer the questions (the second's time over the first's).
RATIOS = {"ours ws / ours": ("ours ws", "ours"), "ours ws / cublas": ("ours ws", "cublas"),
          "ours ws / triton ws": ("ours ws", "triton ws"),
          "ours ws / triton": ("ours ws", "triton"), "ours / triton": ("ours", "triton")}


def _report(title: str, flops: float, med: dict, errors: dict, row: dict) -> dict:
    """Print one problem's times, TFLOP/s and ratios; return them as a JSON row."""
    print(f"{title} (max error relative to max |C|: "
          + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()) + ")")
    times = {key: {"ms": ms, "tflops": flops / ms / 1e9} for key, ms in med.items()}
    print("\n".join(f"  {key:10s} {t['ms']:8.3f} ms {t['tflops']:7.1f} TFLOP/s"
                    for key, t in times.items()))
    ratios = {name: med[theirs] / med[mine] for name, (mine, theirs) in RATIOS.items()
              if mine in med and theirs in med}
    print("  " + ", ".join(f"{k} {v:.3f}x" for k, v in ratios.items()))
    return dict(row, errors=errors, times=times, ratios=ratios)


if __name__ == "__main__":
    raise SystemExit(main())
