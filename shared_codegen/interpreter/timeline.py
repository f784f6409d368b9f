"""The interpreter's timeline: `proton.record` events (ops/profile) of a launch with
`timeline=True`, stamped with a logical clock that ticks once per event, in the order the
interpreter runs them (programs one after another; the partitions of `gl.warp_specialize`
interleaved as they hand over at waits). The result is the same `Timeline` the GPU gives
(runtime/timeline.py), with `clock == "step"`, so the trace export and the picture work
without a GPU."""

from __future__ import annotations

from shared_codegen.runtime.timeline import Timeline, _match


class TimelineRecorder:
    def __init__(self):
        self.clock = 0
        # (program, partition index) -> [(name, is_start, step)]
        self.events = {}

    def record(self, program, partition: int, name: str, is_start: bool) -> None:
        self.events.setdefault((program, partition), []).append((name, is_start, self.clock))
        self.clock += 1

    def timeline(self, kernel: str) -> Timeline:
        """The regions recorded so far; a partition's lane is named as on the GPU ("default",
        "worker 0", ...) and its warp number is the partition index."""
        result = Timeline(kernel, "step")
        for (program, partition), events in sorted(self.events.items()):
            label = "default" if partition == 0 else f"worker {partition - 1}"
            _match(result, program, label, partition, events)
        result.regions.sort(key=lambda r: (r.start, r.program, r.warp))
        return result


__all__ = ["TimelineRecorder"]
