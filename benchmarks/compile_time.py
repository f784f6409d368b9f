"""Cold compile time of the softmax kernel: a fresh process and an empty cache per sample.

Reports the seconds from the first launch call to a compiled cubin (no GPU needed: it compiles
for sm_90a through `tile.compile`), excluding interpreter start-up and imports, and separately
the first-in-process cost including imports.

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
t1 = time.perf_counter()
kernel = tile.compile(softmax_kernel, signature={{"out_ptr": "*fp16:16", "in_ptr": "*fp16:16",
                      "in_row_stride": "i32", "out_row_stride": "i32", "n_cols": "i32"}},
                      constexprs={{"BLOCK_SIZE": 8192}}, target="sm_90a", num_warps=16)
t2 = time.perf_counter()
assert kernel.asm["cubin"][:4] == b"\x7fELF"
print(json.dumps({{"imports": t1 - t0, "compile": t2 - t1}}))
"""


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args(argv)
    compiles, imports = [], []
    for _ in range(args.samples):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, SC_CACHE_DIR=cache, PYTHONPATH=ROOT)
            code = CHILD.format(examples=os.path.join(ROOT, "examples"))
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, check=True)
            sample = json.loads(out.stdout.strip().splitlines()[-1])
            compiles.append(sample["compile"])
            imports.append(sample["imports"])
    print(f"softmax cold compile (sm_90a, 16 warps, BLOCK 8192): median "
          f"{statistics.median(compiles):.3f} s (min {min(compiles):.3f}, max "
          f"{max(compiles):.3f}); imports {statistics.median(imports):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
