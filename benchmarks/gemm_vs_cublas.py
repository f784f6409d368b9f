"""The hand-scheduled Hopper GEMM (examples/gemm) against cuBLAS, interleaved in one process.

    fp16 / bf16: ours vs torch.matmul (cuBLAS), C in the input dtype
    fp8 e4m3:    ours (B given K-major, as fp8 wgmma needs) vs torch._scaled_mm (cuBLASLt,
                 unit scales, fp16 C) with use_fast_accum=True, which like ours keeps the
                 whole K sum in the wgmma accumulator; cuBLAS's default (partial sums promoted
                 to fp32 every few K steps: more exact, slower) is reported beside it

Reports TFLOP/s (2*M*N*K per product), ours / cuBLAS, and each result's max error against a
float32 product of the same inputs, relative to the largest |C| (both are held to
`examples/gemm/gemm.tolerance`). Medians over rounds; every round times every contender.

    PYTHONPATH=. python benchmarks/gemm_vs_cublas.py [--sizes 4096,8192] [--dtypes fp16,bf16,fp8]
        [--rounds 10] [--sweep] [--json out.json]

`--sweep` adds variants of ours (GROUP_M, grid size, cluster launch) to the same rounds. SC_DRIVER_JIT=0 runs
nvJitLink's cubin, in which ptxas dropped setmaxnreg (for comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "gemm"))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _bench import gpu_torch, interleaved_medians  # noqa: E402

DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3fn"}


def operands(torch, size: int, dtype: str):
    """A (M x K), B (K x N, or N x K for fp8), C; values of a few units so fp8 keeps them."""
    gen = torch.Generator(device="cuda").manual_seed(size)
    a = torch.randn((size, size), device="cuda", generator=gen)
    b = torch.randn((size, size), device="cuda", generator=gen)
    if dtype == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)  # b: N x K
        c = torch.empty((size, size), device="cuda", dtype=torch.float16)
        return a8, b8, c
    tdt = getattr(torch, DTYPES[dtype])
    return a.to(tdt), b.to(tdt), torch.empty((size, size), device="cuda", dtype=tdt)


def relative_error(torch, c, ref) -> float:
    return float((c.float() - ref).abs().max() / ref.abs().max())


def run_case(torch, size: int, dtype: str, rounds: int, sweep: bool) -> dict:
    from gemm import gemm_launcher, num_sms, tolerance

    a, b, c = operands(torch, size, dtype)
    kmajor = dtype == "fp8"
    ref32 = (a.float() @ (b.float().t() if kmajor else b.float()))
    c_ref = torch.empty_like(c)
    references = {}
    if kmajor:
        one = torch.ones((), device="cuda")
        c_exact = torch.empty_like(c)
        fns = {"cuBLAS": lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one,
                                                  out_dtype=torch.float16, out=c_ref,
                                                  use_fast_accum=True),
               "cuBLAS fp32 promotion": lambda: torch._scaled_mm(
                   a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.float16, out=c_exact)}
        references["cuBLAS fp32 promotion"] = c_exact
    else:
        fns = {"cuBLAS": lambda: torch.matmul(a, b, out=c_ref)}
    variants = {"ours": dict()}
    if sweep:
        variants["ours GROUP_M=16"] = dict(group_m=16)
        variants["ours GROUP_M=4"] = dict(group_m=4)
        variants["ours 2x SMs"] = dict(num_programs=2 * num_sms())
        variants["ours clusters of 2"] = dict(cluster=2)
    outs = {}
    for name, kw in variants.items():
        out = torch.empty_like(c)
        outs[name] = out
        fns[name] = gemm_launcher(a, b, out, b_kmajor=kmajor, **kw)
    medians = interleaved_medians(fns, rounds, torch)
    flop = 2.0 * size ** 3
    out_dtype = "float16" if kmajor else DTYPES[dtype]
    result = {"size": size, "dtype": dtype, "cuBLAS_tflops": flop / medians["cuBLAS"] / 1e9,
              "cuBLAS_error": relative_error(torch, c_ref, ref32), "variants": {},
              "tolerance": tolerance(out_dtype, size, fp8_inputs=kmajor)}
    for name, out in list(outs.items()) + list(references.items()):
        err = relative_error(torch, out, ref32)
        result["variants"][name] = {"tflops": flop / medians[name] / 1e9,
                                    "ratio": medians["cuBLAS"] / medians[name],
                                    "error": err, "ok": bool(err <= result["tolerance"])}
    return result


def print_result(r: dict) -> None:
    head = f"{r['size']}^3 {r['dtype']}"
    print(f"{head:14s} {'cuBLAS':24s} {r['cuBLAS_tflops']:7.1f} TFLOP/s                 "
          f"err {r['cuBLAS_error']:.2e}  (tolerance {r['tolerance']:.1e})")
    for name, v in r["variants"].items():
        flag = "" if v["ok"] else "  OVER TOLERANCE"
        print(f"{'':14s} {name:24s} {v['tflops']:7.1f} TFLOP/s  {v['ratio']:5.3f}x cuBLAS  "
              f"err {v['error']:.2e}{flag}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="4096,8192")
    parser.add_argument("--dtypes", default="fp16,bf16,fp8")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    torch = gpu_torch("benchmarks/gemm_vs_cublas.py")
    if torch is None:
        return 0
    print(f"device: {torch.cuda.get_device_name()}")
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        for dtype in args.dtypes.split(","):
            results.append(run_case(torch, size, dtype, args.rounds, args.sweep))
            print_result(results[-1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    wrong = [r for r in results for name, v in r["variants"].items()
             if name.startswith("ours") and not v["ok"]]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
