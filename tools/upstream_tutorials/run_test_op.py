#!/usr/bin/env python3
"""Tutorial 06's own `test_op` (Triton 3.6's python/tutorials/06-fused-attention.py) with its
imports swapped to tile, on CUDA: Z=1, H=2, N_CTX 128 and 1024, HEAD_DIM 64 and 128, causal and
not, and the two (mode, provider) pairs test_op runs rather than skips: fwd with triton-fp8 and
bwd with triton-fp16 (which checks the forward's output too); warp_specialize False, fp16
inputs (16 cases).

    python3 tools/upstream_tutorials/run_test_op.py [--source PATH]     # on a GPU machine
    CUDA_VISIBLE_DEVICES= SC_INTERPRET=1 python3 tools/upstream_tutorials/run_test_op.py --interpret

`--source` defaults to the repository's git-ignored `.tut06/06-fused-attention.py` (README.md
beside this file says how to get it).

The tutorial is loaded with `benchmarks/tutorial06_attention.py`'s `load_tutorial(path,
"tile")` (imports swapped, nothing else changed).

PYTEST_VERSION: the tutorial replaces its autotune list by a single config ("Use a single config
in testing for reproducibility") when `"PYTEST_VERSION" in os.environ`, which pytest (8.2+) sets
for the test session. `test_op` is that pytest test, so this script sets PYTEST_VERSION (to the
installed pytest's version) before loading the tutorial, as running it under pytest would: the
cases run at the tutorial's test config (BLOCK_M=128, BLOCK_N=64, 2 stages, 4 warps) instead of
autotuning over its 36-config list.

Skips: `test_op` itself skips fwd with fp16 ("Avoid running the forward computation twice.")
and bwd with fp8 ("Backward pass with FP8 is not supported."), so those pairs are not listed;
a case test_op skips anyway prints SKIP with its message. Exit status 1 if any case failed.

`--interpret` checks this script without a GPU: tile's CPU interpreter, N_CTX 128 only, with
torch.cuda.get_device_capability answering sm_90 (as benchmarks/tutorial06_attention.py's
`--interpret` does).
"""

import argparse
import itertools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_SOURCE = os.path.join(ROOT, ".tut06", "06-fused-attention.py")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from run_tutorials import last_line  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--interpret", action="store_true",
                   help="tile's CPU interpreter, N_CTX 128 only (checks the script, no GPU)")
    p.add_argument("--source", default=DEFAULT_SOURCE,
                   help="the tutorial's 06-fused-attention.py (default: %(default)s)")
    args = p.parse_args(argv)
    if not os.path.isfile(args.source):
        p.error(f"--source {args.source}: no such file (see {os.path.join(HERE, 'README.md')})")

    import pytest
    import torch
    if args.interpret:
        if torch.cuda.is_available():
            p.error("--interpret: hide the GPU (CUDA_VISIBLE_DEVICES=)")
        os.environ.setdefault("SC_INTERPRET", "1")
        torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    elif not torch.cuda.is_available():
        p.error("needs a CUDA GPU (or --interpret)")
    os.environ["PYTEST_VERSION"] = pytest.__version__  # see the module docstring

    from tutorial06_attention import load_tutorial
    module = load_tutorial(args.source, "tile")
    device = (torch.cuda.get_device_name() if torch.cuda.is_available()
              else "CPU interpreter")
    print(f"tutorial 06 test_op, tile frontend, {device}, test config "
          f"{[str(c) for c in module._attn_fwd.configs]}", flush=True)

    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    n_ctxs = (128,) if args.interpret else (128, 1024)
    pairs = (("fwd", "triton-fp8"), ("bwd", "triton-fp16"))
    for n_ctx, head_dim, causal, (mode, provider) in itertools.product(
            n_ctxs, (64, 128), (False, True), pairs):
        name = f"Z=1 H=2 N_CTX={n_ctx} HEAD_DIM={head_dim} causal={causal} mode={mode} {provider}"
        try:
            module.test_op(Z=1, H=2, N_CTX=n_ctx, HEAD_DIM=head_dim, causal=causal,
                           warp_specialize=False, mode=mode, provider=provider,
                           dtype=torch.float16)
            status, detail = "PASS", ""
        except pytest.skip.Exception as exc:
            status, detail = "SKIP", f": {exc.msg}"
        except Exception as exc:  # noqa: BLE001 - every failure is a FAIL line
            status, detail = "FAIL", f": {last_line(exc)}"
        counts[status] += 1
        print(f"{status} {name}{detail}", flush=True)
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
