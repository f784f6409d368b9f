"""One launch of the Hopper attention forward, for `ncu -k regex:attention_kernel`.

    PYTHONPATH=. python benchmarks/profile_attention.py [N] [D] [causal] [dtype]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "flash_attention"))
sys.path.insert(0, os.path.join(HERE, ".."))

import torch  # noqa: E402
from hopper import attention_launcher  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
D = int(sys.argv[2]) if len(sys.argv) > 2 else 128
causal = len(sys.argv) > 3 and sys.argv[3] == "1"
dt = getattr(torch, sys.argv[4] if len(sys.argv) > 4 else "float16")
B, H = 16384 // N, 2048 // D
q, k, v = (torch.randn((B, H, N, D), device="cuda").to(dt) for _ in range(3))
run = attention_launcher(q, k, v, causal=causal)
for _ in range(3):
    run()
torch.cuda.synchronize()
