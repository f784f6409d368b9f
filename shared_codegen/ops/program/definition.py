"""Program-level ops: program ids, grid size, barriers, device print and assert."""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import OpDef, VerificationError
from shared_codegen.ir.types import TensorType, int1, int32, scalar_of
from shared_codegen.ops.program.print_format import (index_widths, line_format, program_format,
                                                     python_format, value_spec)
from shared_codegen.layouts.relations import NO_RELATION, OWN_LAYOUTS, SAME_LAYOUT


PROGRAM_ID, NUM_PROGRAMS = "tt.get_program_id", "tt.get_num_programs"
# The grid the launch asked for, which a persistent kernel's launcher caps (tile/passes/
# persistent.py): its programs walk the requested program ids in steps of the launched count.
LAUNCH_GRID = "sc.launch_grid"


class ProgramIdOp(OpDef):
    names = (PROGRAM_ID, NUM_PROGRAMS, LAUNCH_GRID)
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
        if op.name == PROGRAM_ID:
            source = frame.program_id
        elif op.name == LAUNCH_GRID:  # a capped launch records what it was asked for
            source = frame.requested_grid or frame.grid
        else:
            source = frame.grid
        return [np.int32(source[axis])]


class BarrierOp(OpDef):
    """`gpu.barrier`: all threads of the program (CTA) meet here (`bar.sync 0`)."""

    name = "gpu.barrier"
    layout_rule = OWN_LAYOUTS
    needs_all_warps = True

    @staticmethod
    def build(b):
        return b.create("gpu.barrier", [], [])

    def interpret(self, op, frame):
        # Programs run whole-tile at a time, so every thread is always at the same point.
        return []


class BarrierAnyOp(OpDef):
    """`sc.barrier_any`: a barrier of the threads running this code (the CTA, or a
    warp-specialized partition's warps) that also reduces: the i1 result is true in every
    thread when any element of the i1 operand is true in any thread (PTX `bar.red.or.pred`,
    CUDA's `__syncthreads_or`). The result is uniform, so a scalar `if` may branch on it."""

    name = "sc.barrier_any"
    layout_rule = NO_RELATION
    needs_all_warps = True

    @staticmethod
    def build(b, pred):
        return b.create("sc.barrier_any", [pred], [int1]).result

    def verify(self, op):
        if scalar_of(op.operands[0].type) != int1:
            raise VerificationError(f"barrier_any takes an i1 operand (a comparison), got "
                                    f"{op.operands[0].type}", op)

    def interpret(self, op, frame):
        # A program (or partition) runs whole at a time: its threads' elements are all here.
        return [np.bool_(np.asarray(frame[op.operands[0]]).any())]


class PrintOp(OpDef):
    """`tt.print {prefix}`: device-side print of scalars/tensors (`tl.device_print`)."""

    name = "tt.print"
    layout_rule = NO_RELATION
    needs_all_warps = True  # the interpreter prints the program's elements, not a warp's

    @staticmethod
    def build(b, prefix: str, values, hex=False):
        return b.create("tt.print", list(values), [], {"prefix": prefix, "hex": bool(hex)})

    def interpret(self, op, frame):
        pid = tuple(int(p) for p in frame.program_id)
        prefix, hex = op.attrs["prefix"], op.attrs["hex"]
        if not op.operands:
            frame.output(python_format(program_format(prefix)) % pid)
        for i, v in enumerate(op.operands):
            elem = scalar_of(v.type)
            shape = tuple(v.type.shape) if isinstance(v.type, TensorType) else ()
            fmt = python_format(line_format(prefix, index_widths(shape), value_spec(elem, hex),
                                            i, len(op.operands)))
            values = np.asarray(frame[v])
            for index in np.ndindex(*shape):
                frame.output(fmt % (pid + index + (_printable(values[index], elem, hex),)))
        return []


def _printable(value, elem, hex):
    """The value the printf spec receives: the bits for `hex`, else a Python number."""
    if hex:
        bits = np.asarray(value).view(f"u{max(1, elem.bits // 8)}") if elem.bits >= 8 else value
        return int(bits)
    if elem.is_floating():
        return float(value)
    return int(value)


class AssumeOp(OpDef):
    """`llvm.intr.assume`: the kernel promises the condition holds (`tl.assume`); LLVM may use
    it to simplify. The interpreter checks the promise, since a broken one is undefined
    behavior on the GPU."""

    name = "llvm.intr.assume"
    layout_rule = NO_RELATION
    spelling = "assume"

    @staticmethod
    def build(b, cond):
        return b.create("llvm.intr.assume", [cond], [])

    def interpret(self, op, frame):
        if not np.asarray(frame[op.operands[0]]).all():
            frame.error(op, "tl.assume: the assumed condition is false")
        return []


class AssertOp(OpDef):
    """`tt.assert {message}`: fails the kernel when any element of the condition is false."""

    name = "tt.assert"
    layout_rule = SAME_LAYOUT
    needs_all_warps = True  # the interpreter checks the program's elements, not a warp's

    @staticmethod
    def build(b, cond, message: str):
        return b.create("tt.assert", [cond], [], {"message": message})

    def interpret(self, op, frame):
        cond = np.asarray(frame[op.operands[0]])
        if not cond.all():
            frame.error(op, f"device assertion failed: {op.attrs['message']}")
        return []

