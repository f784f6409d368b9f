"""Timelines of Gluon kernels: the regions a kernel marks with Proton's names
(`import tile.profiler.language as pl`; `pl.enter_scope("load")` ... `pl.exit_scope("load")`),
recorded per warp when a launch asks for them, as a Chrome / Perfetto trace and a picture.

    kernel[grid](..., timeline=True)           # or SC_TIMELINE=1 for every launch
    timeline = kernel.last_timeline            # regions per program, partition and warp
    timeline.save_trace("kernel.json")         # ui.perfetto.dev or chrome://tracing
    timeline.draw("kernel.png")                # a row per program, a lane per partition

From the shell, a saved trace drawn as a picture:

    python -m gluon.timeline kernel.json -o kernel.png [--programs 8] [--title TEXT]

On the GPU the events are %globaltimer nanoseconds stamped by lane 0 of each warp; in the CPU
interpreter (numpy inputs) a logical clock that ticks once per event, which shows the order
in which partitions ran and handed over, not durations. Without `timeline=True` the region
calls compile to nothing. docs/timeline.md has the details and the buffer format.
"""

from __future__ import annotations

import argparse
import json
import sys

from shared_codegen.runtime.timeline import Region, Timeline, decode


def load_trace(path: str) -> Timeline:
    """The Timeline of a trace written by `Timeline.save_trace`."""
    with open(path) as f:
        return Timeline.from_chrome_trace(json.load(f))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gluon.timeline",
                                     description="Draw a kernel timeline trace as a picture.")
    parser.add_argument("trace", help="a trace JSON written by Timeline.save_trace")
    parser.add_argument("-o", "--output", help="the picture (default: the trace's name, .png)")
    parser.add_argument("--programs", type=int, default=16,
                        help="draw the first N programs (default 16)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    timeline = load_trace(args.trace)
    output = args.output or args.trace.rsplit(".", 1)[0] + ".png"
    timeline.draw(output, title=args.title, max_programs=args.programs)
    print(f"{output}: {len(timeline.regions)} regions of {timeline.kernel} "
          f"({len({r.program for r in timeline.regions})} programs, clock {timeline.clock})")
    return 0


__all__ = ["Region", "Timeline", "decode", "load_trace", "main"]

if __name__ == "__main__":
    sys.exit(main())
