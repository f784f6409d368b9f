"""The cost of the GPU debug mode (docs/debug_mode.md): the hand GEMM example (its mbarrier
waits become bounded spins) and a memory-bound vector add (every load and store is
bounds-checked), each timed with debug off and on, interleaved in one process.

Two "on" columns: `debug kernel` is the instrumented kernel alone (the per-launch read-back of
the record is skipped, so launches pipeline as usual), `debug launch` is what a user gets from
`debug=True` (each launch synchronizes and reads the record back).

    PYTHONPATH=. python3 benchmarks/debug_overhead.py [--rounds 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "gemm"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _bench import gpu_torch, interleaved_medians  # noqa: E402


def _skip_record_check():
    """Run debug variants without the per-launch synchronize and read-back."""
    from shared_codegen.runtime import debug_mode

    original = debug_mode.check_record
    debug_mode.check_record = lambda kernel_name, info: None
    return lambda: setattr(debug_mode, "check_record", original)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--gemm", type=int, nargs=3, default=(8192, 8192, 8192),
                        metavar=("M", "N", "K"))
    parser.add_argument("--elements", type=int, default=1 << 26)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch = gpu_torch("debug_overhead.py")
    if torch is None:
        return 0
    import gemm
    import vector_add

    from shared_codegen import config

    m, n, k = args.gemm
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    gemm_off = gemm.gemm_launcher(a, b, c)
    gemm_on = gemm.gemm_launcher(a, b, c, launch_options={"debug": True})
    x = torch.randn(args.elements, device="cuda")
    y = torch.randn(args.elements, device="cuda")
    out = torch.empty_like(x)
    block = 1024
    grid = (-(-args.elements // block),)

    def add(debug):
        if not debug:  # the ordinary launch (the fast path: no launch options)
            return lambda: vector_add.add_kernel[grid](x, y, out, args.elements,
                                                       BLOCK_SIZE=block, num_warps=4)
        return lambda: vector_add.add_kernel[grid](x, y, out, args.elements, BLOCK_SIZE=block,
                                                   num_warps=4, debug=True)

    # Correct results under debug first (a failing check would raise here).
    gemm_on()
    torch.cuda.synchronize()
    reference = a.float() @ b.float()
    error = ((c.float() - reference).abs().max() / reference.abs().max()).item()
    assert error < 1e-2, f"gemm under debug: max relative error {error}"
    add(True)()
    assert torch.equal(out, x + y)

    results = {}
    cases = {"gemm": (gemm_off, gemm_on, 2.0 * m * n * k),
             "vector add": (add(False), add(True), 3 * 4 * args.elements)}
    for name, (off, on, work) in cases.items():
        launch = interleaved_medians({"off": off, "debug launch": on}, args.rounds, torch)
        restore = _skip_record_check()
        try:
            kernel = interleaved_medians({"off": off, "debug kernel": on}, args.rounds, torch)
        finally:
            restore()
        results[name] = {"off_ms": kernel["off"], "debug_kernel_ms": kernel["debug kernel"],
                         "debug_launch_ms": launch["debug launch"],
                         "kernel_ratio": kernel["debug kernel"] / kernel["off"],
                         "launch_ratio": launch["debug launch"] / launch["off"]}
    print(f"{'kernel':12s} {'off ms':>9s} {'debug kernel':>13s} {'ratio':>6s} "
          f"{'debug launch':>13s} {'ratio':>6s}")
    for name, r in results.items():
        print(f"{name:12s} {r['off_ms']:9.3f} {r['debug_kernel_ms']:13.3f} "
              f"{r['kernel_ratio']:6.2f} {r['debug_launch_ms']:13.3f} {r['launch_ratio']:6.2f}")
    print(f"(gemm {m}x{n}x{k} fp16; vector add of {args.elements} fp32; medians of "
          f"{args.rounds} interleaved rounds; wait budget "
          f"{config.get('SC_DEVICE_DEBUG_WAIT_MS')} ms)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
