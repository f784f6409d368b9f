"""Dump our softmax and Triton's (PTX, SASS, registers) under $OUT for side-by-side reading."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import torch  # noqa: E402

from softmax import softmax, softmax_kernel  # noqa: E402

out_dir = os.environ.get("OUT", "out")
os.makedirs(out_dir, exist_ok=True)
x = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
softmax(x)
ours = softmax_kernel.warmup(x, x, 8192, 8192, 8192, BLOCK_SIZE=8192, num_warps=16, grid=(1,))
open(f"{out_dir}/ours.ptx", "w").write(ours.asm["ptx"])
open(f"{out_dir}/ours.cubin", "wb").write(ours.asm["cubin"])
print("ours:", ours.metadata["jit_log"].splitlines()[-1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_bound import triton_kernels  # noqa: E402

triton, _, tr_softmax = triton_kernels()
out = torch.empty_like(x)
compiled = tr_softmax[(8192,)](out, x, 8192, 8192, 8192, BLOCK=8192, num_warps=16)
open(f"{out_dir}/triton.ptx", "w").write(compiled.asm["ptx"])
open(f"{out_dir}/triton.cubin", "wb").write(compiled.asm["cubin"])
print("triton: regs", compiled.n_regs, "spills", compiled.n_spills, "shared", compiled.metadata.shared)
for name in ("ours", "triton"):
    sass = subprocess.run(["cuobjdump", "-sass", f"{out_dir}/{name}.cubin"], capture_output=True,
                          text=True).stdout
    open(f"{out_dir}/{name}.sass", "w").write(sass)
    print(name, "SASS lines", sass.count("\n"))
