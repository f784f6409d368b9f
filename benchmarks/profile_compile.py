"""Profile one cold compile of the softmax kernel (fresh cache): where do the seconds go?

    PYTHONPATH=. python benchmarks/profile_compile.py
"""

import cProfile
import os
import pstats
import sys
import tempfile
import time

os.environ["SC_CACHE_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import tile  # noqa: E402
from softmax import softmax_kernel  # noqa: E402

profile = cProfile.Profile()
start = time.perf_counter()
profile.enable()
tile.compile(softmax_kernel, signature={"out_ptr": "*fp16:16", "in_ptr": "*fp16:16",
                                        "in_row_stride": "i32", "out_row_stride": "i32",
                                        "n_cols": "i32"},
             constexprs={"BLOCK_SIZE": 8192}, target="sm_90a", num_warps=16)
profile.disable()
print(f"cold compile: {time.perf_counter() - start:.3f} s")
pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
