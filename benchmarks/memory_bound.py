"""Memory-bound kernels on the GPU: ours vs torch vs Triton 3.6, interleaved in one process.

Reports GB/s (bytes read + written once each) and the percentage of the device-to-device copy
bandwidth measured in the same run, plus ratios against Triton. The H100 lowers its clock under
sustained load, so each round times every implementation back to back and the medians over
rounds are compared.

    PYTHONPATH=. python benchmarks/memory_bound.py [--rounds 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _bench import bandwidth_table, gpu_torch, interleaved_medians  # noqa: E402


def triton_kernels():
    try:
        import triton
        import triton.language as ttl
    except Exception:
        return None

    @triton.jit
    def tr_add(x_ptr, y_ptr, out_ptr, n, BLOCK: ttl.constexpr):
        offs = ttl.program_id(0) * BLOCK + ttl.arange(0, BLOCK)
        m = offs < n
        ttl.store(out_ptr + offs, ttl.load(x_ptr + offs, mask=m) + ttl.load(y_ptr + offs, mask=m),
                  mask=m)

    @triton.jit
    def tr_softmax(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: ttl.constexpr):
        row = ttl.program_id(0)
        cols = ttl.arange(0, BLOCK)
        mask = cols < n_cols
        x = ttl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
        x = x.to(ttl.float32)
        x = x - ttl.max(x, axis=0)
        num = ttl.exp(x)
        y = num / ttl.sum(num, axis=0)
        ttl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)

    return triton, tr_add, tr_softmax


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch = gpu_torch("memory_bound.py")
    if torch is None:
        return 0
    from layer_norm import layer_norm
    from softmax import softmax
    from vector_add import add

    tr = triton_kernels()
    results = {}
    n_add = 1 << 28  # 256 Mi fp32 elements per input: 3 GiB moved per launch
    x = torch.randn(n_add, device="cuda")
    y = torch.randn(n_add, device="cuda")
    out = torch.empty_like(x)
    copy_src = torch.randn(1 << 29, device="cuda", dtype=torch.float16)
    copy_dst = torch.empty_like(copy_src)
    sm_x = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    sm_out = torch.empty_like(sm_x)
    ln_x = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    ln_w = torch.randn(8192, device="cuda", dtype=torch.float16)
    ln_b = torch.randn(8192, device="cuda", dtype=torch.float16)

    # Correctness first, on the benchmark sizes.
    torch.testing.assert_close(add(x, y), x + y)
    torch.testing.assert_close(softmax(sm_x).float(), torch.softmax(sm_x.float(), dim=1),
                               atol=2e-3, rtol=2e-2)
    ref_ln = torch.nn.functional.layer_norm(ln_x.float(), (8192,), ln_w.float(), ln_b.float())
    torch.testing.assert_close(layer_norm(ln_x, ln_w, ln_b)[0].float(), ref_ln, atol=3e-2,
                               rtol=2e-2)

    cases = {
        "copy (torch)": (lambda: copy_dst.copy_(copy_src), 2 * copy_src.numel() * 2),
        "vector add (ours)": (lambda: add(x, y), 3 * n_add * 4),
        "vector add (torch)": (lambda: torch.add(x, y, out=out), 3 * n_add * 4),
        "softmax (ours)": (lambda: softmax(sm_x), 2 * sm_x.numel() * 2),
        "softmax (torch)": (lambda: torch.softmax(sm_x, dim=1), 2 * sm_x.numel() * 2),
        "layer norm (ours)": (lambda: layer_norm(ln_x, ln_w, ln_b), 2 * ln_x.numel() * 2),
        "layer norm (torch)": (lambda: torch.nn.functional.layer_norm(ln_x, (8192,), ln_w, ln_b),
                               2 * ln_x.numel() * 2),
    }
    if tr is not None:
        triton, tr_add, tr_softmax = tr

        def triton_add():
            tr_add[(triton.cdiv(n_add, 1024),)](x, y, out, n_add, BLOCK=1024)

        def triton_softmax():
            tr_softmax[(8192,)](sm_out, sm_x, 8192, 8192, 8192, BLOCK=8192, num_warps=16)

        triton_softmax()
        torch.testing.assert_close(sm_out.float(), torch.softmax(sm_x.float(), dim=1),
                                   atol=2e-3, rtol=2e-2)
        cases["vector add (triton)"] = (triton_add, 3 * n_add * 4)
        cases["softmax (triton)"] = (triton_softmax, 2 * sm_x.numel() * 2)

    medians = interleaved_medians({name: fn for name, (fn, _) in cases.items()}, args.rounds,
                                  torch)
    print(f"device: {torch.cuda.get_device_name()}  rounds: {args.rounds}")
    results = bandwidth_table(cases, medians, "copy (torch)")
    for kernel in ("vector add", "softmax"):
        if f"{kernel} (triton)" in results:
            ratio = results[f"{kernel} (triton)"]["ms"] / results[f"{kernel} (ours)"]["ms"]
            results[f"{kernel} ours/triton speed"] = ratio
            print(f"{kernel}: ours is {ratio:.3f}x Triton's speed")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
