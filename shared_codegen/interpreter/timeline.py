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


__all__ = ["TimelineRecorder"]
