"""Host side of the timeline: the event buffer of a launch (lowering/timeline.py writes it),
its decoding into regions, the Chrome / Perfetto trace export and the picture.

    kernel[grid](..., timeline=True)          # or SC_TIMELINE=1
    tl = kernel.last_timeline                  # a Timeline
    tl.save_trace("gemm.json")                 # open in ui.perfetto.dev or chrome://tracing
    tl.draw("gemm.png")                        # one row per program, a lane per partition

The CPU interpreter fills a Timeline too (`TimelineRecorder`), with a logical clock
(`clock == "step"`): the order of events, not their duration, is what it shows.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from shared_codegen.lowering.timeline import EVENT_BYTES


@dataclass(frozen=True)
class Region:
    """One completed region of one warp: [start, end) in the timeline's clock."""

    program: Tuple[int, int, int]
    partition: str
    warp: int
    name: str
    start: int
    end: int


@dataclass
class Timeline:
    """The regions of one launch. `clock` is "ns" (GPU %globaltimer) or "step" (the
    interpreter's logical clock); `dropped` counts events past a warp's capacity and
    `unmatched` ends without a start (or starts without an end)."""

    kernel: str
    clock: str
    regions: List[Region] = field(default_factory=list)
    dropped: int = 0
    unmatched: int = 0

    def names(self) -> List[str]:
        seen: Dict[str, None] = {}
        for r in self.regions:
            seen.setdefault(r.name, None)
        return list(seen)

    def chrome_trace(self) -> dict:
        """The Chrome trace-event JSON (what Perfetto opens): a process per program, a thread
        per warp named by its partition, a complete ("X") event per region; times in µs from
        the first event (one step is shown as 1 µs for the interpreter's clock)."""
        scale = 1e-3 if self.clock == "ns" else 1.0
        origin = min((r.start for r in self.regions), default=0)
        programs = sorted({r.program for r in self.regions})
        pid = {p: i for i, p in enumerate(programs)}
        events = []
        for p in programs:
            events.append({"name": "process_name", "ph": "M", "pid": pid[p],
                           "args": {"name": f"program {p}"}})
        for p, warp, partition in sorted({(r.program, r.warp, r.partition)
                                          for r in self.regions}):
            events.append({"name": "thread_name", "ph": "M", "pid": pid[p], "tid": warp,
                           "args": {"name": f"{partition} warp {warp}"}})
        for r in self.regions:
            events.append({"name": r.name, "ph": "X", "pid": pid[r.program], "tid": r.warp,
                           "ts": (r.start - origin) * scale,
                           "dur": (r.end - r.start) * scale,
                           "args": {"partition": r.partition}})
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"kernel": self.kernel, "clock": self.clock,
                              "dropped_events": self.dropped,
                              "unmatched_events": self.unmatched}}

    @classmethod
    def from_chrome_trace(cls, trace: dict) -> "Timeline":
        """The Timeline a `chrome_trace()` describes (times back in the trace's clock, from
        the first event)."""
        other = trace.get("otherData", {})
        clock = other.get("clock", "ns")
        scale = 1e3 if clock == "ns" else 1.0
        programs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
                    if e.get("ph") == "M" and e["name"] == "process_name"}
        timeline = cls(other.get("kernel", "kernel"), clock,
                       dropped=other.get("dropped_events", 0),
                       unmatched=other.get("unmatched_events", 0))
        for e in trace["traceEvents"]:
            if e.get("ph") != "X":
                continue
            text = programs.get(e["pid"], f"program ({e['pid']}, 0, 0)")
            program = tuple(int(v) for v in text[text.index("(") + 1:-1].split(","))
            start = round(e["ts"] * scale)
            timeline.regions.append(Region(program, e["args"]["partition"], e["tid"],
                                           e["name"], start, start + round(e["dur"] * scale)))
        return timeline

    def save_trace(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)

    def lanes(self) -> List[Tuple[Tuple[int, int, int], str, int]]:
        """(program, partition, warp) of each drawn lane: per program, the first warp of each
        warpgroup of each partition (the warps of a warpgroup run the same code)."""
        firsts: Dict[Tuple, int] = {}
        for r in self.regions:
            key = (r.program, r.partition, r.warp // 4)
            firsts[key] = min(firsts.get(key, r.warp), r.warp)
        return sorted((p, part, w) for (p, part, _), w in firsts.items())

    def draw(self, path: str, title: Optional[str] = None, max_programs: int = 16) -> None:
        """A picture: one row per program (the first `max_programs`), a lane per partition /
        warpgroup in it, a colour per region."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        programs = sorted({r.program for r in self.regions})[:max_programs]
        lanes = [lane for lane in self.lanes() if lane[0] in programs]
        row = {lane: i for i, lane in enumerate(lanes)}
        colours = plt.get_cmap("tab10")
        colour = {name: colours(i % 10) for i, name in enumerate(self.names())}
        scale = 1e-3 if self.clock == "ns" else 1.0
        origin = min((r.start for r in self.regions), default=0)
        fig, ax = plt.subplots(figsize=(12, 0.35 * max(len(lanes), 2) + 1.2))
        for r in self.regions:
            lane = row.get((r.program, r.partition, r.warp))
            if lane is None:
                continue
            ax.broken_barh([((r.start - origin) * scale, max((r.end - r.start) * scale,
                                                             1e-3))],
                           (lane - 0.4, 0.8), color=colour[r.name])
        ax.set_yticks(range(len(lanes)))
        ax.set_yticklabels([f"pid {p[0]},{p[1]},{p[2]} {part} w{w}" for p, part, w in lanes],
                           fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("µs since the first event" if self.clock == "ns" else "interpreter step")
        handles = [plt.Rectangle((0, 0), 1, 1, color=colour[n]) for n in self.names()]
        ax.legend(handles, self.names(), loc="upper right", fontsize=8)
        ax.set_title(title or f"{self.kernel}: timeline")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)


def decode(kernel: str, info: dict, grid3, raw: np.ndarray) -> Timeline:
    """The Timeline of an event buffer (`raw`: its bytes as u32 words) of a launch on
    `grid3` of a kernel whose `timeline` metadata is `info`."""
    warps, capacity = info["warps"], info["capacity"]
    programs = grid3[0] * grid3[1] * grid3[2]
    words = np.asarray(raw, np.uint32).reshape(programs, warps, capacity + 1, 4)
    partition_of: Dict[int, str] = {}
    for label, first, count in info["partitions"]:
        for w in range(first, first + count):
            # Warps that run partitions of several warp_specialize calls get every label.
            known = partition_of.get(w)
            partition_of[w] = label if known is None or label in known.split(" / ") else \
                f"{known} / {label}"
    timeline = Timeline(kernel, "ns")
    for linear in range(programs):
        program = (linear % grid3[0], linear // grid3[0] % grid3[1],
                   linear // (grid3[0] * grid3[1]))
        for warp in range(warps):
            count = int(words[linear, warp, 0, 0])
            kept = min(count, capacity)
            timeline.dropped += count - kept
            events = words[linear, warp, 1:1 + kept]
            stamps = events[:, 2].astype(np.uint64) | events[:, 3].astype(np.uint64) << 32
            _match(timeline, program, partition_of.get(warp, "default"), warp,
                   [(info["regions"][int(e[0]) >> 1], bool(e[0] & 1), int(t))
                    for e, t in zip(events, stamps)])
    return timeline


def _match(timeline: Timeline, program, partition: str, warp: int, events) -> None:
    """Pair each end with the latest open start of its region on this warp."""
    open_starts: Dict[str, List[int]] = {}
    for name, is_start, stamp in events:
        if is_start:
            open_starts.setdefault(name, []).append(stamp)
        elif open_starts.get(name):
            timeline.regions.append(Region(program, partition, warp, name,
                                           open_starts[name].pop(), stamp))
        else:
            timeline.unmatched += 1
    timeline.unmatched += sum(len(v) for v in open_starts.values())


# The event buffer of each CUDA context, reused while launches fit in it: {context: (address,
# bytes)}. A launch only clears what it uses (cuMemsetD8Async on its stream).
_buffers: dict = {}


class EventBuffer:
    """The zeroed device buffer of one timeline launch; `read` synchronizes and decodes it."""

    def __init__(self, info: dict, grid3, stream: int = 0):
        from shared_codegen.runtime import driver

        self.info, self.grid3 = info, tuple(grid3)
        programs = grid3[0] * grid3[1] * grid3[2]
        self.nbytes = programs * info["warps"] * (info["capacity"] + 1) * EVENT_BYTES
        context = int(driver.ensure_context())
        address, size = _buffers.get(context, (0, 0))
        if size < self.nbytes:
            if address:
                driver.synchronize()  # a launch may still write the old one
                driver.mem_free(address)
            address, size = driver.mem_alloc(self.nbytes), self.nbytes
            _buffers[context] = (address, size)
        self.address = address
        driver.check(driver._driver().cuMemsetD8Async(self.address, 0, self.nbytes, stream),
                     "cuMemsetD8Async")

    def read(self, kernel: str) -> Timeline:
        from shared_codegen.runtime import driver

        driver.synchronize()
        raw = np.zeros(self.nbytes // 4, np.uint32)
        driver.copy_to_host(raw, self.address)
        timeline = decode(kernel, self.info, self.grid3, raw)
        if timeline.dropped:
            warnings.warn(f"{kernel}: the timeline dropped {timeline.dropped} events past "
                          f"{self.info['capacity']} per warp; raise SC_TIMELINE_EVENTS",
                          UserWarning, stacklevel=4)
        return timeline


class TimelineRecorder:
    """The CPU interpreter's timeline of one launch: `proton.record` events (ops/profile)
    stamped with a logical clock that ticks once per event, in the order the interpreter runs
    them (programs one after another; the partitions of `gl.warp_specialize` interleaved as
    they hand over at waits). `timeline()` gives the same Timeline the GPU does, with
    `clock == "step"`."""

    def __init__(self):
        self.clock = 0
        # (program, partition index) -> [(name, is_start, step)]
        self.events = {}
        # partition index -> its lane label, as on the GPU ("default (_consume)", "worker 0")
        self.labels = {0: "default"}

    def record(self, program, partition: int, partition_name, name: str,
               is_start: bool) -> None:
        self.labels[partition] = ("default" if partition == 0 else f"worker {partition - 1}") \
            + (f" ({partition_name})" if partition_name else "")
        self.events.setdefault((program, partition), []).append((name, is_start, self.clock))
        self.clock += 1

    def timeline(self, kernel: str) -> Timeline:
        """The regions recorded so far; a partition's lane is named as on the GPU ("default",
        "worker 0 (_produce)", ...) and its warp number is the partition index."""
        result = Timeline(kernel, "step")
        for (program, partition), events in sorted(self.events.items()):
            _match(result, program, self.labels[partition], partition, events)
        result.regions.sort(key=lambda r: (r.start, r.program, r.warp))
        return result



__all__ = ["Region", "Timeline", "decode", "EventBuffer", "TimelineRecorder"]
