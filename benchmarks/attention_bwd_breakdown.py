"""Where the Hopper attention backward's time goes, kernel by kernel: ours (the delta
pre-pass, which also clears dQ's fp32 buffer, the main kernel, the dQ conversion) next to
torch SDPA's cuDNN backward, from torch.profiler's device times (CUDA kernels and memsets).

    B*N = 16k tokens, H*D = 2048, D = 128 (the shapes of attention_bwd_vs_sdpa.py)

    PYTHONPATH=. python benchmarks/attention_bwd_breakdown.py [--ns 4096,16384]
        [--causal 0,1] [--dtypes fp16] [--iters 10]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "..", "examples", "flash_attention"), os.path.join(HERE, "..")):
    sys.path.insert(0, p)

TOKENS, WIDTH, D = 16384, 2048, 128


def device_times(torch, fn, iters):
    """{kernel name: (calls per iteration, mean us per call)} of `fn`'s device work."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    total = collections.defaultdict(float)
    calls = collections.Counter()
    for event in prof.events():
        if event.device_type.name != "CUDA":
            continue
        total[event.name] += event.device_time
        calls[event.name] += 1
    return {name: (calls[name] / iters, total[name] / calls[name]) for name in total}


def host_overhead(torch):
    """Wall time per call at a shape whose device work is a few microseconds (1 head of
    128 queries): what the host spends per backward, ours against SDPA's cuDNN through
    autograd."""
    import time

    import torch.nn.functional as F
    from hopper import attention_forward
    from hopper_bwd import attention_backward
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, do = (torch.randn((1, 1, 128, D), device="cuda", dtype=torch.float16)
                   for _ in range(4))
    o, lse = attention_forward(q, k, v, return_lse=True)
    qr, kr, vr = (x.detach().requires_grad_() for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        ref = F.scaled_dot_product_attention(qr, kr, vr)
    fns = {"ours": lambda: attention_backward(q, k, v, o, lse, do),
           "cuDNN": lambda: torch.autograd.grad(ref, (qr, kr, vr), do, retain_graph=True)}
    for name, fn in fns.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        print(f"host: {name:5s} {(time.perf_counter() - t0) / 200 * 1e6:7.1f} us per backward "
              f"call at (1, 1, 128, {D})")


def short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def main():
    import torch
    import torch.nn.functional as F
    from hopper import attention_forward
    from hopper_bwd import attention_backward
    from torch.nn.attention import SDPBackend, sdpa_kernel

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ns", default="4096,16384")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--dtypes", default="fp16")
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name()}")
    host_overhead(torch)
    for dtype in args.dtypes.split(","):
        tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
        for N in (int(n) for n in args.ns.split(",")):
            for causal in (bool(int(c)) for c in args.causal.split(",")):
                B, H = max(1, TOKENS // N), WIDTH // D
                q, k, v, do = (torch.randn((B, H, N, D), device="cuda", dtype=tdt)
                               for _ in range(4))
                o, lse = attention_forward(q, k, v, causal=causal, return_lse=True)
                qr, kr, vr = (x.detach().requires_grad_() for x in (q, k, v))
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    ref = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)

                def cudnn_bwd():
                    torch.autograd.grad(ref, (qr, kr, vr), do, retain_graph=True)

                def ours_bwd():
                    attention_backward(q, k, v, o, lse, do, causal=causal)

                for who, fn in (("ours", ours_bwd), ("cuDNN", cudnn_bwd)):
                    times = device_times(torch, fn, args.iters)
                    whole = sum(n * t for n, t in times.values())
                    print(f"{dtype} N={N:5d} {'causal' if causal else 'full  '} {who:5s} "
                          f"{whole:8.1f} us device time per backward")
                    for name, (n, t) in sorted(times.items(), key=lambda kv: -kv[1][0] * kv[1][1]):
                        print(f"    {n * t:8.1f} us {n:4.1f} x {t:8.1f} us  {short(name)}")


if __name__ == "__main__":
    main()
