"""fp16 matmul on the GPU: our Gluon mma_v2 + cp.async kernel vs torch.matmul (cuBLAS) vs
Triton 3.6, interleaved in one process.

mma.sync is Ampere's tensor-core instruction; on Hopper it reaches well under wgmma's peak, so
compare against Triton's own mma_v2 path only when it is forced (Triton picks wgmma on sm_90).
Reports TFLOP/s (2*M*N*K per matmul) and ratios, medians over rounds.

    PYTHONPATH=. python benchmarks/gluon_matmul.py [--size 4096] [--rounds 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "gluon"))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _bench import gpu_torch, interleaved_medians  # noqa: E402


def triton_matmul(force_mma_v2: bool = False):
    """Triton 3.6's tutorial-style matmul (one fixed config), or None without Triton.

    With `force_mma_v2`, the kernel is compiled with DISABLE_MMA_V3=1 (Triton's switch that
    keeps sm_90 on mma.sync, read when a kernel is compiled), so it uses the same instruction
    family as our mma_v2 kernel; the function returned also reports the instructions used."""
    try:
        import triton
        import triton.language as tl
    except Exception:
        return None

    @triton.jit
    def kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr):
        pid_m, pid_n = tl.program_id(0), tl.program_id(1)
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))

    def launch(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        return kernel[(m // 128, n // 128)](a, b, c, m, n, k, BLOCK_M=128, BLOCK_N=128,
                                            BLOCK_K=64, num_warps=8, num_stages=3)

    def run(a, b, c):
        if run.instructions is None:  # first call compiles: set the switch just for it
            saved = os.environ.get("DISABLE_MMA_V3")
            if force_mma_v2:
                os.environ["DISABLE_MMA_V3"] = "1"
            try:
                compiled = launch(a, b, c)
            finally:
                if force_mma_v2:
                    if saved is None:
                        os.environ.pop("DISABLE_MMA_V3", None)
                    else:
                        os.environ["DISABLE_MMA_V3"] = saved
            ptx = compiled.asm["ptx"]
            run.instructions = "wgmma" if "wgmma" in ptx else (
                "mma.sync" if "mma.sync" in ptx else "other")
            return
        launch(a, b, c)

    run.instructions = None
    return run


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", default=None)
    parser.add_argument("--sweep", action="store_true",
                        help="time several configs of our kernel (each checked) and exit")
    args = parser.parse_args(argv)
    torch = gpu_torch("gluon_matmul.py")
    if torch is None:
        return 0
    from matmul_mma_v2 import matmul

    if args.sweep:
        return sweep(torch, matmul, args.size, args.rounds)

    n = args.size
    a = torch.randn((n, n), device="cuda", dtype=torch.float16)
    b = torch.randn((n, n), device="cuda", dtype=torch.float16)
    ours_c = torch.empty((n, n), device="cuda", dtype=torch.float16)
    ref_c = torch.empty_like(ours_c)
    impls = {"gluon mma_v2": lambda: matmul(a, b, ours_c),
             "torch.matmul": lambda: torch.matmul(a, b, out=ref_c)}
    tri = triton_matmul()
    tri_v2 = triton_matmul(force_mma_v2=True)
    if tri is not None:
        tri_c = torch.empty_like(ours_c)
        impls["triton 3.6"] = lambda: tri(a, b, tri_c)
        impls["triton mma_v2"] = lambda: tri_v2(a, b, tri_c)
    for fn in impls.values():  # compile and warm up
        fn()
    torch.cuda.synchronize()
    err = (ours_c.float() - torch.matmul(a, b).float()).abs().max().item()
    flops = 2.0 * n ** 3
    medians = interleaved_medians(impls, args.rounds, torch)
    result = {name: flops / (ms * 1e-3) / 1e12 for name, ms in medians.items()}
    print(f"fp16 matmul {n}^3 on {torch.cuda.get_device_name()} (max |error| {err:.3g}):")
    for name, tflops in result.items():
        ratio = tflops / result["torch.matmul"]
        note = ""
        if name.startswith("triton"):
            runner = tri if name == "triton 3.6" else tri_v2
            note = f"  [{runner.instructions}]"
        print(f"  {name:14s} {tflops:8.1f} TFLOP/s  ({ratio:.2f}x torch){note}")
    if "triton mma_v2" in result:
        print(f"  ours / Triton on mma.sync: {result['gluon mma_v2'] / result['triton mma_v2']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"size": n, "tflops": result, "max_abs_error": err}, f, indent=2)
    return 0


SWEEP = [dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, NUM_STAGES=st, WARPS_M=wm, WARPS_N=wn)
         for bm, bn, bk, st, wm, wn in [
             (128, 128, 32, 3, 4, 2), (128, 128, 64, 3, 4, 2), (128, 128, 64, 4, 4, 2),
             (128, 128, 32, 4, 2, 4), (128, 256, 32, 3, 4, 2), (128, 256, 64, 3, 2, 4),
             (256, 128, 32, 3, 4, 2), (128, 128, 64, 3, 2, 2)]]


def sweep(torch, matmul, n, rounds):
    a = torch.randn((n, n), device="cuda", dtype=torch.float16)
    b = torch.randn((n, n), device="cuda", dtype=torch.float16)
    ref = torch.matmul(a, b)
    fns = {}
    for cfg in SWEEP:
        c = torch.empty_like(ref)
        try:
            matmul(a, b, c, config=cfg)
        except Exception as exc:  # a config that does not fit (shared memory, registers)
            print(f"{cfg}: skipped ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})")
            continue
        torch.testing.assert_close(c, ref, atol=1e-1, rtol=2e-2)
        fns[str(cfg)] = (lambda cfg=cfg, c=c: matmul(a, b, c, config=cfg))
    fns["torch.matmul"] = lambda: torch.matmul(a, b)
    medians = interleaved_medians(fns, rounds, torch)
    for name, ms in medians.items():
        print(f"{2.0 * n ** 3 / (ms * 1e-3) / 1e12:8.1f} TFLOP/s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
