"""Device side of the timeline (`timeline=True` at launch, SC_TIMELINE=1): the events of
`proton.record` ops (gluon `enter_scope` / `exit_scope`) stamped into a buffer the launcher
allocates (shared_codegen/runtime/timeline.py). Without a timeline nothing here runs and the
ops emit nothing.

The buffer has one area per (program, warp), programs in linear order (x fastest), the warps
of the launch (all partitions) in order; an area is `capacity + 1` slots of 16 bytes:

    slot 0       u32 events this warp recorded (may exceed capacity: the rest were dropped)
    slot 1 + i   event i: u32 tag (region index << 1 | is_start), u32 %smid,
                 u64 %globaltimer (ns)

Lane 0 of each warp writes; every lane keeps the warp's event count in a local variable, so
the count needs no atomics and no shared memory.
"""

from __future__ import annotations

from typing import List

from llvmlite import ir

EVENT_BYTES = 16
I32 = ir.IntType(32)
I64 = ir.IntType(64)


class TimelineEvents:
    """The timeline instrumentation of one kernel being lowered."""

    def __init__(self, ctx, buffer: ir.Value, launch_warps: int, capacity: int, partitions):
        self.capacity = int(capacity)
        self.launch_warps = int(launch_warps)
        self.partitions = partitions
        self.regions: List[str] = []
        b = ctx.entry_builder  # the kernel's prologue: dominates every partition
        self.counter = b.alloca(I32, name="timeline.count")
        b.store(ir.Constant(I32, 0), self.counter)
        sreg = lambda name: ctx._call_on(b, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])  # noqa
        tid = sreg("tid.x")
        self.lane = b.and_(tid, ir.Constant(I32, 31), name="timeline.lane")
        warp = b.lshr(tid, ir.Constant(I32, 5))
        program = b.add(sreg("ctaid.x"), b.mul(sreg("nctaid.x"), b.add(
            sreg("ctaid.y"), b.mul(sreg("nctaid.y"), sreg("ctaid.z")))))
        area = b.add(b.mul(b.zext(program, I64), ir.Constant(I64, self.launch_warps)),
                     b.zext(warp, I64))
        stride = (self.capacity + 1) * EVENT_BYTES
        self.area = b.add(buffer, b.mul(area, ir.Constant(I64, stride)), name="timeline.area")

    def record(self, ctx, name: str, is_start: bool) -> None:
        if name not in self.regions:
            self.regions.append(name)
        tag = self.regions.index(name) << 1 | int(bool(is_start))
        b = ctx.builder
        index = b.load(self.counter)
        count = b.add(index, ir.Constant(I32, 1))
        b.store(count, self.counter)
        # Lane 0 writes the event while it fits, and the count always.
        ctx.inline_asm("{\n.reg .pred writer, fits;\n.reg .b32 smid, lo, hi, tg;\n.reg .b64 t, a;\n"
                       "setp.eq.u32 writer, $0, 0;\n@!writer bra done;\n"
                       "mov.u64 t, %globaltimer;\nmov.u32 smid, %smid;\n"
                       "mov.b64 {lo, hi}, t;\n"
                       "st.global.u32 [$2], $3;\n"
                       f"setp.lt.u32 fits, $1, {self.capacity};\n@!fits bra done;\n"
                       f"mul.wide.u32 a, $3, {EVENT_BYTES};\nadd.u64 a, a, $2;\n"
                       f"mov.u32 tg, {tag};\n"
                       "st.global.v4.u32 [a], {tg, smid, lo, hi};\n"
                       "done:\n}", "r,r,l,r,~{memory}", ir.VoidType(),
                       [self.lane, index, self.area, count], side_effects=True)

    def info(self) -> dict:
        """What the host needs to decode the buffer (the kernel's `timeline` metadata)."""
        return {"regions": list(self.regions), "warps": self.launch_warps,
                "capacity": self.capacity, "partitions": self.partitions}


def partitions_of(module, num_warps: int) -> list:
    """[(label, first warp, warps)] of the launch: the default partition, then each worker
    partition of each `gl.warp_specialize` (with its name when it has one). A kernel with
    several calls lists each call's workers; warps they share get every label (decode)."""
    warp_spec = module.stage_results.get("warp_specialization")
    if warp_spec is None:
        return [("default", 0, num_warps)]
    result = []
    for op, plan in zip(warp_spec.ops, warp_spec.plans):
        names = list(op.attrs.get("partition_names") or ())
        default = "default" + (f" ({names[0]})" if names and names[0] else "")
        if (default, 0, plan.num_warps) not in result:
            result.append((default, 0, plan.num_warps))
        for i, (first, warps) in enumerate(zip(plan.starts, plan.worker_num_warps)):
            name = names[i + 1] if len(names) > i + 1 and names[i + 1] else ""
            result.append((f"worker {i}" + (f" ({name})" if name else ""), first, warps))
    return result


def setup(ctx, buffer: ir.Value, launch_warps: int, capacity: int, partitions) -> None:
    ctx.timeline = TimelineEvents(ctx, buffer, launch_warps, capacity, partitions)


__all__ = ["TimelineEvents", "setup", "partitions_of", "EVENT_BYTES"]
