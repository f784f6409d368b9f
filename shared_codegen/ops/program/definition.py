"""Program-level ops: program ids, grid size, barriers, device print and assert."""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import OpDef, VerificationError
from shared_codegen.ir.types import int32
from shared_codegen.layouts.relations import NO_RELATION, OWN_LAYOUTS, SAME_LAYOUT


PROGRAM_ID, NUM_PROGRAMS = "tt.get_program_id", "tt.get_num_programs"


class ProgramIdOp(OpDef):
    names = (PROGRAM_ID, NUM_PROGRAMS)
    spelling = {"tt.get_program_id": "program_id", "tt.get_num_programs": "num_programs"}
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, name: str, axis: int):
        return b.create(name, [], [int32], {"axis": axis}).result

    def verify(self, op):
        if op.attrs["axis"] not in (0, 1, 2):
            raise VerificationError(f"axis must be 0, 1 or 2, got {op.attrs['axis']}", op)

    def interpret(self, op, frame):
        axis = op.attrs["axis"]
        source = frame.program_id if op.name == "tt.get_program_id" else frame.grid
        return [np.int32(source[axis])]


class BarrierOp(OpDef):
    """`gpu.barrier`: all threads of the program (CTA) meet here (`bar.sync 0`)."""

    name = "gpu.barrier"
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b):
        return b.create("gpu.barrier", [], [])

    def interpret(self, op, frame):
        # Programs run whole-tile at a time, so every thread is always at the same point.
        return []


class PrintOp(OpDef):
    """`tt.print {prefix}`: device-side print of scalars/tensors (`tl.device_print`)."""

    name = "tt.print"
    layout_rule = NO_RELATION

    @staticmethod
    def build(b, prefix: str, values, hex=False):
        return b.create("tt.print", list(values), [], {"prefix": prefix, "hex": bool(hex)})

    def interpret(self, op, frame):
        pid = tuple(int(p) for p in frame.program_id)
        values = [np.asarray(frame[v]) for v in op.operands]
        text = " ".join(np.array2string(v) if v.ndim else str(v[()]) for v in values)
        frame.output(f"pid {pid}: {op.attrs['prefix']}{text}")
        return []


class AssertOp(OpDef):
    """`tt.assert {message}`: fails the kernel when any element of the condition is false."""

    name = "tt.assert"
    layout_rule = SAME_LAYOUT

    @staticmethod
    def build(b, cond, message: str):
        return b.create("tt.assert", [cond], [], {"message": message})

    def interpret(self, op, frame):
        cond = np.asarray(frame[op.operands[0]])
        if not cond.all():
            frame.error(op, f"device assertion failed: {op.attrs['message']}")
        return []

