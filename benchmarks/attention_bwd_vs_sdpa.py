"""The Hopper flash-attention backward (examples/flash_attention/hopper_bwd.py) against torch
SDPA's cuDNN and flash backward, interleaved round by round in one process: the backward
alone and forward + backward.

    B*N = 16k tokens, H*D = 2048, D = 128; backward FLOPs = 10*B*H*N^2*D (5 GEMMs),
    forward + backward 14*B*H*N^2*D; half of that when causal.

Each row prints TFLOP/s for ours, cuDNN and flash, ours over cuDNN, and how far our dq, dk,
dv are from cuDNN's (max |ours - cuDNN| / max |cuDNN|).

    PYTHONPATH=. python benchmarks/attention_bwd_vs_sdpa.py [--ns 1024,...,16384]
        [--dtypes fp16,bf16] [--causal 0,1] [--rounds 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "..", "examples", "flash_attention"),
          os.path.join(HERE, "..", "examples"), os.path.join(HERE, ".."), HERE):
    sys.path.insert(0, p)

from _bench import gpu_torch, interleaved_medians, parse_variants  # noqa: E402

TOKENS, WIDTH, D = 16384, 2048, 128


def run_row(torch, N, causal, dtype, rounds, variants=()):
    import torch.nn.functional as F
    from hopper import attention_forward
    from hopper_bwd import attention_backward
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, H = max(1, TOKENS // N), WIDTH // D
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(N)
    q, k, v, do = (torch.randn((B, H, N, D), device="cuda", dtype=tdt, generator=gen)
                   for _ in range(4))
    o, lse = attention_forward(q, k, v, causal=causal, return_lse=True)
    grads = {}

    def ours_bwd():
        grads["ours"] = attention_backward(q, k, v, o, lse, do, causal=causal)

    def ours_both():
        o2, lse2 = attention_forward(q, k, v, causal=causal, return_lse=True)
        attention_backward(q, k, v, o2, lse2, do, causal=causal)

    fns = {"ours bwd": ours_bwd, "ours fwd+bwd": ours_both}
    for name, opts in variants:  # more of ours (backward alone), same rounds
        def variant(name=name, opts=opts):  # keeps its gradients alive, as ours_bwd does
            grads[name] = attention_backward(q, k, v, o, lse, do, causal=causal, **opts)
        fns[f"{name} bwd"] = variant
    for name, backend in (("cuDNN", SDPBackend.CUDNN_ATTENTION),
                          ("flash", SDPBackend.FLASH_ATTENTION)):
        leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(*leaves, is_causal=causal)

        def bwd(out=out, leaves=leaves, name=name):
            grads[name] = torch.autograd.grad(out, leaves, do, retain_graph=True)

        def both(leaves=leaves, backend=backend):
            with sdpa_kernel(backend):
                o2 = F.scaled_dot_product_attention(*leaves, is_causal=causal)
            torch.autograd.grad(o2, leaves, do)

        fns[f"{name} bwd"], fns[f"{name} fwd+bwd"] = bwd, both
    med = interleaved_medians(fns, rounds, torch)
    flop = B * H * N * N * D / (2 if causal else 1)
    tf = {n: (10 if n.endswith(" bwd") else 14) * flop / ms / 1e9 for n, ms in med.items()}
    err = {n: float((a.float() - b.float()).abs().max() / b.float().abs().max())
           for n, a, b in zip(("dq", "dk", "dv"), grads["ours"], grads["cuDNN"])}
    return {"N": N, "B": B, "H": H, "D": D, "causal": causal, "dtype": dtype, "tflops": tf,
            "bwd_vs_cudnn": tf["ours bwd"] / tf["cuDNN bwd"],
            "fwdbwd_vs_cudnn": tf["ours fwd+bwd"] / tf["cuDNN fwd+bwd"], "err_vs_cudnn": err}


def print_row(r):
    t = r["tflops"]
    print(f"{r['dtype']} D={r['D']} N={r['N']:5d} {'causal' if r['causal'] else 'full  '} "
          f"bwd: ours {t['ours bwd']:6.1f} cuDNN {t['cuDNN bwd']:6.1f} flash "
          f"{t['flash bwd']:6.1f} x cuDNN {r['bwd_vs_cudnn']:.3f} | fwd+bwd: ours "
          f"{t['ours fwd+bwd']:6.1f} cuDNN {t['cuDNN fwd+bwd']:6.1f} flash "
          f"{t['flash fwd+bwd']:6.1f} x cuDNN {r['fwdbwd_vs_cudnn']:.3f} | vs cuDNN "
          + " ".join(f"{n} {e:.1e}" for n, e in r["err_vs_cudnn"].items()), flush=True)
    known = ("ours bwd", "ours fwd+bwd", "cuDNN bwd", "cuDNN fwd+bwd", "flash bwd",
             "flash fwd+bwd")
    for name, v in t.items():
        if name not in known:
            print(f"      variant {name}: {v:6.1f} TFLOP/s ({v / t['ours bwd']:.3f}x ours bwd)",
                  flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ns", default="1024,2048,4096,8192,16384")
    ap.add_argument("--dtypes", default="fp16,bf16")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--variants", default="", help="more of ours: name:key=val,...;...")
    args = ap.parse_args(argv)
    torch = gpu_torch("benchmarks/attention_bwd_vs_sdpa.py")
    if torch is None:
        return 0
    import datetime
    print(f"device: {torch.cuda.get_device_name()}  "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  (TFLOP/s)")
    rows = []
    for dtype in args.dtypes.split(","):
        for N in (int(x) for x in args.ns.split(",")):
            for causal in (bool(int(c)) for c in args.causal.split(",")):
                try:
                    rows.append(run_row(torch, N, causal, dtype, args.rounds,
                                        parse_variants(args.variants)))
                except Exception as exc:  # keep the other rows
                    print(f"{dtype} N={N} causal={causal}: {type(exc).__name__}: "
                          f"{str(exc)[:400]}", flush=True)
                    continue
                print_row(rows[-1])
                if args.json:
                    with open(args.json, "w") as f:
                        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
