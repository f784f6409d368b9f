"""cp.async (ttg.async_copy_global_to_local / async_commit_group / async_wait): interpreter
semantics (data visible after the wait that retires its group, races reported before), the
verifier, and the PTX it lowers to."""

import re

import numpy as np
import pytest
from ampere_kernels import Kernel, compile_ptx, interpret

from gluon.layouts import BlockedLayout, SwizzledSharedLayout
from shared_codegen.interpreter.memory import InterpreterError
from shared_codegen.ir.core import VerificationError
from shared_codegen.ops.arith.definition import AddPtrOp, BinaryOp, CompareOp, ConstantOp
from shared_codegen.ops.async_copy.definition import (AsyncCommitGroupOp, AsyncCopyGlobalToLocalOp,
                                              AsyncWaitOp)
from shared_codegen.ops.memory.definition import StoreOp
from shared_codegen.ops.program.definition import BarrierOp
from shared_codegen.ops.shared_memory.definition import LocalAllocOp, LocalLoadOp, MemDescIndexOp
from shared_codegen.ops.tensor.definition import SplatOp
from shared_codegen.ir.types import SharedMemoryType, float16, float32, int32

SHAPE = (32, 64)
BLOCKED = BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])  # 8 x fp16 = 16 bytes per thread
SWIZZLED = SwizzledSharedLayout(8, 1, 8, [1, 0])


def smem_type(shape=SHAPE, elem=float16, layout=SWIZZLED, stages=None):
    full = tuple(shape) if stages is None else (stages,) + tuple(shape)
    return SharedMemoryType(full, elem, layout, full)


def copy_kernel(schedule, elem=float16, layout=BLOCKED, stages=2, mask_cols=None,
                shared=SWIZZLED, cache=""):
    """x (stages x SHAPE) -> shared (one buffer per stage) -> out, in the order `schedule`
    names: ("copy", s), "commit", ("wait", n), ("load", s), "barrier"."""
    kb = Kernel("cp_async", [elem, elem])
    buf = LocalAllocOp.build(kb.b, smem_type(elem=elem, layout=shared, stages=stages))
    line = 10
    for step in schedule:
        kb.at_line(line, f"step {step}")
        line += 1
        kind, arg = (step, None) if isinstance(step, str) else step
        if kind == "copy":
            view = MemDescIndexOp.build(kb.b, buf, ConstantOp.build(kb.b, arg, int32))
            offs = kb.offsets_2d(SHAPE, layout, SHAPE[1])
            base = SplatOp.build(kb.b, ConstantOp.build(kb.b, arg * SHAPE[0] * SHAPE[1], int32),
                                 SHAPE, layout)
            offs = BinaryOp.build(kb.b, "arith.addi", offs, base)
            ptrs = AddPtrOp.build(kb.b, SplatOp.build(kb.b, kb.args[0], SHAPE, layout), offs)
            mask = None
            if mask_cols is not None:
                cols = kb.offsets_2d(SHAPE, layout, 0)
                mask = CompareOp.build(kb.b, "arith.cmpi", "slt", cols, SplatOp.build(
                    kb.b, ConstantOp.build(kb.b, mask_cols, int32), SHAPE, layout))
            AsyncCopyGlobalToLocalOp.build(kb.b, ptrs, view, mask, cache_modifier=cache)
        elif kind == "commit":
            AsyncCommitGroupOp.build(kb.b)
        elif kind == "wait":
            AsyncWaitOp.build(kb.b, arg)
        elif kind == "barrier":
            BarrierOp.build(kb.b)
        elif kind == "load":
            view = MemDescIndexOp.build(kb.b, buf, ConstantOp.build(kb.b, arg, int32))
            x = LocalLoadOp.build(kb.b, view, layout)
            offs = BinaryOp.build(kb.b, "arith.addi", kb.offsets_2d(SHAPE, layout, SHAPE[1]),
                                  SplatOp.build(kb.b, ConstantOp.build(
                                      kb.b, arg * SHAPE[0] * SHAPE[1], int32), SHAPE, layout))
            StoreOp.build(kb.b, AddPtrOp.build(kb.b, SplatOp.build(kb.b, kb.args[1], SHAPE,
                                                                   layout), offs), x)
    return kb.finish()


def run(module, elem=float16, stages=2):
    x = np.arange(stages * SHAPE[0] * SHAPE[1]).reshape(stages, *SHAPE).astype(elem.np)
    out = np.zeros_like(x)
    interpret(module, x, out)
    return x, out


def test_data_is_visible_after_the_wait_that_retires_its_group():
    x, out = run(copy_kernel([("copy", 0), "commit", ("copy", 1), "commit", ("wait", 1),
                              ("load", 0), ("wait", 0), ("load", 1)]))
    np.testing.assert_array_equal(out, x)


def test_reading_before_the_wait_is_reported_as_a_race_with_both_lines():
    with pytest.raises(InterpreterError) as info:
        run(copy_kernel([("copy", 0), "commit", ("copy", 1), "commit", ("wait", 1),
                         ("load", 1)]))
    text = str(info.value)
    assert "kernel.py:15: race: local_load reads shared memory that the async copy at " \
           "kernel.py:12 may still be writing" in text
    assert "wait_group" in text and "step ('load', 1)" in text


def test_a_copy_that_was_never_committed_is_not_retired_by_a_wait():
    with pytest.raises(InterpreterError, match="race: local_load reads"):
        run(copy_kernel([("copy", 0), ("wait", 0), ("load", 0)]))


def test_a_second_copy_into_pending_bytes_is_a_race():
    with pytest.raises(InterpreterError, match="race: this async copy targets shared memory"):
        run(copy_kernel([("copy", 0), "commit", ("copy", 0), "commit", ("wait", 0)]))


def test_masked_off_elements_are_zero_filled():
    x, out = run(copy_kernel([("copy", 0), ("copy", 1), "commit", ("wait", 0), ("load", 0),
                              ("load", 1)], mask_cols=40))
    want = x.copy()
    want[:, :, 40:] = 0
    np.testing.assert_array_equal(out, want)


def test_verifier_rejects_mismatched_shapes_and_types():
    kb = Kernel("bad", [float16, float32])
    buf = LocalAllocOp.build(kb.b, smem_type())
    ptrs = kb.ptrs_2d(kb.args[1], SHAPE, BLOCKED)
    AsyncCopyGlobalToLocalOp.build(kb.b, ptrs, buf)
    with pytest.raises(VerificationError, match="pointer element type fp32 does not match the "
                                                "shared memory element type fp16"):
        kb.finish()
    kb = Kernel("bad", [float16])
    buf = LocalAllocOp.build(kb.b, smem_type(shape=(32, 32)))
    AsyncCopyGlobalToLocalOp.build(kb.b, kb.ptrs_2d(kb.args[0], SHAPE, BLOCKED), buf)
    with pytest.raises(VerificationError, match=re.escape(
            "expected smem shape to match pointer shape but got smem.shape = [32, 32], "
            "pointer.shape = [32, 64]")):
        kb.finish()
    with pytest.raises(ValueError, match="cache_modifier"):
        AsyncCopyGlobalToLocalOp.build(kb.b, kb.ptrs_2d(kb.args[0], SHAPE, BLOCKED), buf,
                                       cache_modifier=".cv")


# ---- PTX ----------------------------------------------------------------------------------------

PIPELINE = [("copy", 0), "commit", ("copy", 1), "commit", ("wait", 1), ("load", 0),
            ("wait", 0), ("load", 1)]


def ptx_lines(text, pattern=r"cp\.async|bar\.sync|ld\.shared"):
    return [" ".join(line.split()) for line in text.splitlines() if re.search(pattern, line)]


def test_ptx_copies_16_bytes_per_cp_async_and_waits_then_syncs_before_reading():
    ptx = compile_ptx(copy_kernel(PIPELINE))
    for target in ("sm_90a", "sm_80"):
        lines = ptx_lines(ptx[target])
        copies = [ln for ln in lines if ln.startswith("cp.async.cg.shared.global")]
        # 32x64 fp16 per stage over 128 threads: 16 elements = two 16-byte copies each.
        assert len(copies) == 4 and all(ln.endswith(", 16;") for ln in copies)
        others = [ln.split()[0] for ln in lines if not ln.startswith("cp.async.cg")]
        assert others == ["cp.async.commit_group;", "cp.async.commit_group;",
                          "cp.async.wait_group", "bar.sync", "ld.shared.v4.b32",
                          "ld.shared.v4.b32", "cp.async.wait_group", "bar.sync",
                          "ld.shared.v4.b32", "ld.shared.v4.b32"]
        waits = [i for i, ln in enumerate(lines) if ln.startswith("cp.async.wait_group")]
        for i in waits:
            assert lines[i + 1] == "bar.sync 0;"  # other threads' copies are ordered too
        assert sum(ln.startswith("bar.sync") for ln in lines) == 2


def test_ptx_masked_copy_passes_the_source_size():
    text = compile_ptx(copy_kernel([("copy", 0), "commit", ("wait", 0), ("load", 0)],
                                   mask_cols=40))["sm_90a"]
    copies = [ln for ln in ptx_lines(text) if ln.startswith("cp.async.cg")]
    assert copies and all(re.search(r", 16, %r\d+;$", ln) for ln in copies)


def test_ptx_narrow_vectors_use_ca_and_a_two_byte_copy_is_refused():
    four_bytes = BlockedLayout([1, 2], [1, 32], [4, 1], [1, 0])
    text = compile_ptx(copy_kernel([("copy", 0), "commit", ("wait", 0), ("load", 0)],
                                   layout=four_bytes))["sm_90a"]
    copies = [ln for ln in ptx_lines(text) if ln.startswith("cp.async")]
    assert any(ln.startswith("cp.async.ca.shared.global") and ln.endswith(", 4;")
               for ln in copies)
    scalar = BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0])
    from shared_codegen.lowering.context import LoweringError
    with pytest.raises(LoweringError, match="cp.async copies 4, 8 or 16 bytes per instruction, "
                                            "but this copy can only move 2 bytes"):
        compile_ptx(copy_kernel([("copy", 0), "commit", ("wait", 0), ("load", 0)],
                                layout=scalar))


def test_ptx_explicit_ca_keeps_16_byte_copies_in_l1():
    text = compile_ptx(copy_kernel([("copy", 0), "commit", ("wait", 0), ("load", 0)],
                                   cache=".ca"))["sm_90a"]
    assert "cp.async.ca.shared.global" in text and "cp.async.cg" not in text
