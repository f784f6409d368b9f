"""Timelines of the hand-scheduled kernels (docs/timeline.md): the GEMM example
(examples/gemm/gemm.py) and the Hopper attention forward (examples/flash_attention/hopper.py),
each launched once with `timeline=True`; writes the Chrome / Perfetto trace and the picture of
each, and measures what recording costs (events on vs off, interleaved in one process; the
read-back after each launch is left out of the timing: it is host work after the kernel).

    PYTHONPATH=. python3 benchmarks/timelines.py [--out timelines] [--rounds 10]

Outputs under --out: gemm_timeline.json / .png, attention_timeline.json / .png, overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "gemm"))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "flash_attention"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _bench import gpu_torch, interleaved_medians  # noqa: E402


def _without_read_back():
    """Timeline launches that leave the buffer on the device (for timing the kernel)."""
    from shared_codegen.runtime import timeline

    original = timeline.EventBuffer.read
    timeline.EventBuffer.read = lambda self, kernel: None
    return lambda: setattr(timeline.EventBuffer, "read", original)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="timelines")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--gemm", type=int, nargs=3, default=(8192, 8192, 8192),
                        metavar=("M", "N", "K"))
    parser.add_argument("--attention", type=int, nargs=4, default=(4, 16, 2048, 128),
                        metavar=("B", "H", "N", "D"))
    parser.add_argument("--programs", type=int, default=8, help="programs drawn per picture")
    parser.add_argument("--causal", type=int, choices=(0, 1), default=1,
                        help="the attention forward causal (1, default) or not (0)")
    args = parser.parse_args(argv)
    torch = gpu_torch("timelines.py")
    if torch is None:
        return 0
    # Enough slots per warp for the attention consumer's per-KV-block regions.
    os.environ.setdefault("SC_TIMELINE_EVENTS", "2048")
    import gemm
    import hopper

    os.makedirs(args.out, exist_ok=True)
    m, n, k = args.gemm
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    B, H, N, D = args.attention
    q, kk, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    cases = {
        "gemm": (gemm.gemm_kernel, gemm.gemm_launcher(a, b, c),
                 gemm.gemm_launcher(a, b, c, launch_options={"timeline": True}),
                 f"GEMM {m}x{n}x{k} fp16"),
        "attention": (hopper.attention_kernel,
                      hopper.attention_launcher(q, kk, v, causal=bool(args.causal)),
                      hopper.attention_launcher(q, kk, v, causal=bool(args.causal),
                                                launch_options={"timeline": True}),
                      f"attention forward B={B} H={H} N={N} D={D} "
                      f"{'causal' if args.causal else 'non-causal'} fp16"),
    }
    overhead = {}
    for name, (kernel, off, on, title) in cases.items():
        on()  # one recorded launch: the timeline
        timeline = kernel.last_timeline
        trace = os.path.join(args.out, f"{name}_timeline.json")
        picture = os.path.join(args.out, f"{name}_timeline.png")
        timeline.save_trace(trace)
        timeline.draw(picture, title=f"{title}: first {args.programs} programs",
                      max_programs=args.programs)
        spans = {}
        for r in timeline.regions:
            spans.setdefault(r.name, []).append(r.end - r.start)
        print(f"{name}: {len(timeline.regions)} regions, dropped {timeline.dropped}, "
              f"unmatched {timeline.unmatched} -> {trace}, {picture}")
        for region, durations in spans.items():
            durations.sort()
            print(f"    {region:12s} n={len(durations):6d}  median "
                  f"{durations[len(durations) // 2] / 1e3:9.2f} us")
        restore = _without_read_back()
        try:
            medians = interleaved_medians({"off": off, "timeline": on}, args.rounds, torch)
        finally:
            restore()
        overhead[name] = {"off_ms": medians["off"], "timeline_ms": medians["timeline"],
                          "ratio": medians["timeline"] / medians["off"],
                          "regions": len(timeline.regions), "dropped": timeline.dropped}
        print(f"    off {medians['off']:.3f} ms, events on {medians['timeline']:.3f} ms "
              f"(x{overhead[name]['ratio']:.3f}, buffer clear included)")
    with open(os.path.join(args.out, "overhead.json"), "w") as f:
        json.dump(overhead, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
