"""Run the Hopper attention backward, and torch SDPA's cuDNN backward on the same inputs,
once each per listed config, for a profiler to catch:

    ncu -k regex:"attention_bwd_kernel|bprop" -c <2 x configs> \\
        python benchmarks/attention_bwd_profile_target.py N:causal[:backward_option=int...] ...

fp16, D = 128, B*N = 16k tokens and H*D = 2048 (the shapes of attention_bwd_vs_sdpa.py).
Ours is compiled and run once before the launch a profiler should look at.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "..", "examples", "flash_attention"), os.path.join(HERE, "..")):
    sys.path.insert(0, p)

D = 128


def main(argv):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from hopper import attention_forward
    from hopper_bwd import attention_backward
    for spec in argv:
        N, causal, *opts = spec.split(":")
        N, causal = int(N), bool(int(causal))
        kw = {a: int(b) for a, b in (o.split("=") for o in opts)}
        B, H = 16384 // N, 2048 // D
        q, k, v, do = (torch.randn((B, H, N, D), device="cuda", dtype=torch.float16)
                       for _ in range(4))
        o, lse = attention_forward(q, k, v, causal=causal, return_lse=True)
        attention_backward(q, k, v, o, lse, do, causal=causal, **kw)  # compiled, warm
        torch.cuda.synchronize()
        attention_backward(q, k, v, o, lse, do, causal=causal, **kw)
        qr, kr, vr = (x.detach().requires_grad_() for x in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            out = torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
            out.backward(do)
        torch.cuda.synchronize()
        print(f"ran {spec} (B={B}, H={H})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
