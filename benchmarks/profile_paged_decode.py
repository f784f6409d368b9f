"""A few calls of paged decode (examples/flash_attention/paged_decode.py, tile DSL), for
`ncu -k regex:paged_decode`: ncu flushes the caches before each profiled kernel, so it sees
the cold-cache case a decode step meets after the other layers' caches.

    PYTHONPATH=. python benchmarks/profile_paged_decode.py [batch] [context] [block_size]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

import torch  # noqa: E402
from paged_decode import load_kernel_module, make_case  # noqa: E402

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 1
context = int(sys.argv[2]) if len(sys.argv) > 2 else 8192
block_size = int(sys.argv[3]) if len(sys.argv) > 3 else 16
ours = load_kernel_module("tile")
q, k, v, table, seq_lens = make_case(torch, batch, context, "float16", 32, 8, 128, block_size)
for _ in range(3):
    ours.paged_decode(q, k, v, table, seq_lens)
torch.cuda.synchronize()
