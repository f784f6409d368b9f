"""`proton.record {is_start, name}`: the start or the end of a named region of a kernel's
timeline (Triton's Proton `pl.enter_scope(name)` / `pl.exit_scope(name)`; the Gluon surface
is in gluon/language/_profile.py).

The op is always in the IR, and does nothing unless the launch records a timeline: lowering
emits no instruction for it then (`lowering.py`), so a kernel with regions compiles to the
same PTX as without them. With a timeline the lowering stamps %globaltimer into the launch's
event buffer from one lane per warp (shared_codegen/lowering/timeline.py); the interpreter
appends the event to the launch's recorder with a logical clock
(`TimelineRecorder` in shared_codegen/runtime/timeline.py).
"""

from __future__ import annotations

from shared_codegen.ir.core import OpDef, format_attrs
from shared_codegen.layouts.relations import NO_RELATION

RECORD = "proton.record"


class ProfileRecordOp(OpDef):
    name = RECORD
    layout_rule = NO_RELATION
    user_name = "enter_scope / exit_scope"

    @staticmethod
    def build(b, is_start: bool, name: str):
        return b.create(RECORD, [], [], {"is_start": bool(is_start), "name": str(name)})

    def print_attrs(self, op):
        return format_attrs({"is_start": op.attrs["is_start"], "name": op.attrs["name"]})

    def interpret(self, op, frame):
        recorder = getattr(frame.memory, "timeline", None)
        if recorder is not None:
            partition = frame.partition
            recorder.record(tuple(int(p) for p in frame.program_id),
                            0 if partition is None else partition.index,
                            None if partition is None else partition.name,
                            op.attrs["name"], op.attrs["is_start"])
        return []


__all__ = ["ProfileRecordOp", "RECORD"]
