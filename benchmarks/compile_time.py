"""Cold compile time of the softmax kernel: a fresh process and an empty cache per sample.

Compiles for sm_90a through `tile.compile` (no GPU needed) and reports two numbers: the cold
compile (empty cache, toolchain libraries already loaded by an earlier kernel, as in any
program that compiles more than one kernel), and the first compile of a process, which also
pays for loading LLVM and nvJitLink.

    PYTHONPATH=. python benchmarks/compile_time.py [--samples 5]
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
kernel = tile.compile(softmax_kernel, signature=SIG, constexprs={{"BLOCK_SIZE": 8192}},
                      target="sm_90a", num_warps=16)
t3 = time.perf_counter()
assert kernel.asm["cubin"][:4] == b"\x7fELF"
print(json.dumps({{"imports": t1 - t0, "compile": t3 - t2}}))
"""


def sample(warm: bool) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, SC_CACHE_DIR=cache, PYTHONPATH=ROOT)
        code = CHILD.format(examples=os.path.join(ROOT, "examples"), warm=warm)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args(argv)
    sample(False)  # writes __pycache__ so later samples do not time byte-compiling our source
    cold = [sample(True)["compile"] for _ in range(args.samples)]
    first = [sample(False) for _ in range(args.samples)]
    print(f"softmax cold compile (sm_90a, 16 warps, BLOCK 8192, empty cache, toolchain "
          f"loaded): median {statistics.median(cold):.3f} s (min {min(cold):.3f}, max "
          f"{max(cold):.3f})")
    print(f"softmax as the first compile of a process (loads LLVM and nvJitLink): median "
          f"{statistics.median(s['compile'] for s in first):.3f} s; imports "
          f"{statistics.median(s['imports'] for s in first):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
