"""Cold compile time of a kernel: a fresh process and an empty cache per sample.

Compiles for sm_90a through `tile.compile` (no GPU needed) and reports two numbers: the cold
compile (empty cache, toolchain libraries already loaded by an earlier kernel, as in any
program that compiles more than one kernel), and the first compile of a process, which also
pays for loading LLVM and nvJitLink. The kernels: the softmax example (BLOCK 8192, 16 warps),
or tutorial 03's matmul (benchmarks/tutorial03_matmul.py, fp16, 128x256x64, 3 stages,
8 warps: a pipelined wgmma loop).

    PYTHONPATH=. python benchmarks/compile_time.py [--samples 5] [--kernel tutorial03]

Tutorial 03's matmul on the H100 machine's host (2026-11-25, 3 samples): cold compile median
0.511 s (0.417 to 0.513 s); as a process's first compile 0.824 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")

CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
sys.path.insert(0, {examples!r})
import tile
from softmax import softmax_kernel
from vector_add import add_kernel
t1 = time.perf_counter()
SIG = {{"out_ptr": "*fp16:16", "in_ptr": "*fp16:16", "in_row_stride": "i32",
        "out_row_stride": "i32", "n_cols": "i32"}}
if {warm}:
    # Load the toolchain (llvmlite's LLVM, nvJitLink) with another kernel first: what is left
    # is the compile of this kernel with an empty cache.
    tile.compile(add_kernel, signature={{"x_ptr": "*fp32:16", "y_ptr": "*fp32:16",
                 "out_ptr": "*fp32:16", "n_elements": "i32"}}, constexprs={{"BLOCK_SIZE": 1024}})
t2 = time.perf_counter()
{compile}
t3 = time.perf_counter()
assert kernel.asm["cubin"][:4] == b"\x7fELF"
print(json.dumps({{"imports": t1 - t0, "compile": t3 - t2}}))
"""


COMPILES = {
    "softmax": """kernel = tile.compile(softmax_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 8192},
                      target="sm_90a", num_warps=16)""",
    "tutorial03": """sys.path.insert(0, %r)
from tutorial03_matmul import matmul_kernel
kernel = tile.compile(matmul_kernel, signature={
    "a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32:16", "N": "i32:16",
    "K": "i32:16", "stride_am": "i32:16", "stride_bk": "i32:16", "stride_cm": "i32:16"},
    constexprs={"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_SIZE_M": 128,
                "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8, "ACTIVATION": ""},
    target="sm_90a", num_warps=8, num_stages=3)""" % HERE,
}


def sample(warm: bool, kernel: str = "softmax") -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, SC_CACHE_DIR=cache, PYTHONPATH=ROOT)
        code = CHILD.format(examples=os.path.join(ROOT, "examples"), warm=warm,
                            compile=COMPILES[kernel])
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


LABELS = {"softmax": "softmax (sm_90a, 16 warps, BLOCK 8192)",
          "tutorial03": "tutorial 03 matmul (sm_90a, fp16, 128x256x64, 3 stages, 8 warps)"}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--kernel", choices=sorted(COMPILES), default="softmax")
    args = parser.parse_args(argv)
    sample(False, args.kernel)  # writes __pycache__: later samples do not byte-compile our source
    cold = [sample(True, args.kernel)["compile"] for _ in range(args.samples)]
    first = [sample(False, args.kernel) for _ in range(args.samples)]
    print(f"{LABELS[args.kernel]} cold compile (empty cache, toolchain loaded): median "
          f"{statistics.median(cold):.3f} s (min {min(cold):.3f}, max {max(cold):.3f})")
    print(f"{LABELS[args.kernel]} as the first compile of a process (loads LLVM and "
          f"nvJitLink): median {statistics.median(s['compile'] for s in first):.3f} s; imports "
          f"{statistics.median(s['imports'] for s in first):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
