"""Static shared-memory allocation: liveness packing, loops, scratch placement, barriers on
reuse, and loop-carried descriptors."""

import re

import numpy as np
from smem_kernels import Kernel, blocked, compile_ptx, interpret

from gluon.layouts import NVMMASharedLayout, SwizzledSharedLayout
from shared_codegen.ir.types import float16, float32
from shared_codegen.ops.control.definition import ForOp, YieldOp
from shared_codegen.ops.shared_memory.allocation import assign_offsets, live_ranges
from shared_codegen.ops.shared_memory.definition import LocalLoadOp, LocalStoreOp, MemDescIndexOp
from shared_codegen.ops.tensor.definition import ConvertLayoutOp

SHAPE = (64, 64)
NVMMA = NVMMASharedLayout(128, 16)


def _through(k, x, layout=NVMMA, dst=None):
    """Store x into a new allocation and load it back; returns (value, alloc)."""
    mem = k.alloc(x.type.element, x.type.shape, layout)
    LocalStoreOp.build(k.b, x, mem)
    return LocalLoadOp.build(k.b, mem, dst or blocked(x.type.shape, 1, order=(0, 1))), mem


def _allocs(module):
    return [op for op in module.walk() if op.name == "ttg.local_alloc"]


def test_allocations_with_disjoint_lifetimes_share_an_offset():
    k = Kernel("reuse", [float16, float16])
    x = k.load(0, SHAPE, blocked(SHAPE, 8))
    y, _ = _through(k, x)
    z, _ = _through(k, ConvertLayoutOp.build(k.b, y, blocked(SHAPE, 8)))
    k.store(1, z)
    module = k.finish()
    first, second = _allocs(module)
    offsets, total = assign_offsets(module.kernel)
    assert offsets[first] == offsets[second] == 0
    assert total == 64 * 64 * 2
    a = np.arange(64 * 64, dtype=np.float16).reshape(SHAPE)
    out = np.zeros_like(a)
    interpret(module, a, out)
    np.testing.assert_array_equal(out, a)
    kernel, ptx = compile_ptx(module)
    # Reusing the bytes orders the first buffer's last reads before the second's writes (at
    # offset 0 both; the conversion between writes its scratch, past them, with no barrier
    # first, and its own barrier is the one that orders them).
    text = ptx["sm_90a"]
    first_write, second_write = [m.start() for m in re.finditer(
        r"st\.shared\.v4\.b32 \t\[%rd\d+\],", text)][:2]
    last_read = text.rindex("ld.shared.b16", first_write, text.index("+8192]", first_write))
    between = text[last_read:second_write]
    assert between.count("bar.sync") == 1 and "st.shared.v4.b32 \t[%rd" in between


def test_overlapping_lifetimes_get_disjoint_bytes():
    k = Kernel("both", [float16, float16])
    x = k.load(0, SHAPE, blocked(SHAPE, 8))
    a = k.alloc(float16, SHAPE, NVMMA)
    b = k.alloc(float32, SHAPE, NVMMASharedLayout(128, 32))
    LocalStoreOp.build(k.b, x, a)
    y = LocalLoadOp.build(k.b, a, blocked(SHAPE, 8))
    from shared_codegen.ops.arith.definition import CastOp
    LocalStoreOp.build(k.b, CastOp.build(k.b, "arith.extf", y, float32), b)
    k.store(1, LocalLoadOp.build(k.b, a, blocked(SHAPE, 8)))
    module = k.finish()
    offsets, total = assign_offsets(module.kernel)
    fa, fb = _allocs(module)
    spans = sorted([(offsets[fa], offsets[fa] + 8192), (offsets[fb], offsets[fb] + 16384)])
    assert spans[0][1] <= spans[1][0]
    assert total == 8192 + 16384
    assert offsets[fb] % 1024 == 0 and offsets[fa] % 1024 == 0


def test_an_allocation_used_in_a_loop_lives_through_the_whole_loop():
    k = Kernel("loop", [float16, float16])
    x = k.load(0, SHAPE, blocked(SHAPE, 8))
    outer = k.alloc(float16, SHAPE, NVMMA)
    LocalStoreOp.build(k.b, x, outer)
    loop = ForOp.build(k.b, k.i32(0), k.i32(3), k.i32(1), [x])
    body = loop.regions[0].block
    with k.b.at_end_of(body):
        acc = body.args[1]
        inner = k.alloc(float16, SHAPE, NVMMA)
        LocalStoreOp.build(k.b, acc, inner)
        y = LocalLoadOp.build(k.b, inner, blocked(SHAPE, 8))
        z = LocalLoadOp.build(k.b, outer, blocked(SHAPE, 8))
        from shared_codegen.ops.arith.definition import BinaryOp
        YieldOp.build(k.b, [BinaryOp.build(k.b, "arith.addf", y, z)])
    after = k.alloc(float16, SHAPE, NVMMA)
    LocalStoreOp.build(k.b, loop.results[0], after)
    k.store(1, LocalLoadOp.build(k.b, after, blocked(SHAPE, 8)))
    module = k.finish()
    o, i, a = _allocs(module)
    ranges = live_ranges(module.kernel)
    assert ranges[o][1] >= ranges[i][1]  # outer covers the loop that encloses inner's uses
    offsets, total = assign_offsets(module.kernel)
    assert offsets[o] != offsets[i]
    assert offsets[a] in (offsets[o], offsets[i])  # after the loop, bytes are free again
    assert total == 2 * 8192
    data = np.ones(SHAPE, np.float16)
    out = np.zeros_like(data)
    interpret(module, data, out)
    np.testing.assert_array_equal(out, 4 * data)  # x + 3 * x
    _, ptx = compile_ptx(module)
    assert ptx["sm_90a"].count("bar.sync") >= 3


def test_scratch_sits_after_the_static_allocations():
    k = Kernel("scratch", [float32, float32])
    x = k.load(0, SHAPE, blocked(SHAPE, 4))
    mem = k.alloc(float32, SHAPE, NVMMASharedLayout(128, 32))
    LocalStoreOp.build(k.b, x, mem)
    y = LocalLoadOp.build(k.b, mem, blocked(SHAPE, 4))
    # A transposing conversion goes through scratch shared memory.
    k.store(1, ConvertLayoutOp.build(k.b, y, blocked(SHAPE, 1, order=(0, 1))))
    module = k.finish()
    kernel, ptx = compile_ptx(module)
    assert kernel.shared_bytes > 64 * 64 * 4
    assert re.search(r'getelementptr i8, ptr addrspace\(3\) @"?global_smem"?, i32 16384',
                     kernel.llvm_ir)
    a = np.arange(64 * 64, dtype=np.float32).reshape(SHAPE)
    out = np.zeros_like(a)
    interpret(module, a, out)
    np.testing.assert_array_equal(out, a)


def test_loop_carried_descriptor_ping_pongs_between_buffers():
    shape = (32, 32)
    k = Kernel("pingpong", [float32, float32])
    bufs = k.alloc(float32, (2, 32, 32), SwizzledSharedLayout(4, 1, 8, (1, 0)))
    x = k.load(0, shape, blocked(shape, 4))
    first = MemDescIndexOp.build(k.b, bufs, k.i32(0))
    LocalStoreOp.build(k.b, x, first)
    loop = ForOp.build(k.b, k.i32(0), k.i32(4), k.i32(1), [first])
    body = loop.regions[0].block
    with k.b.at_end_of(body):
        from shared_codegen.ops.arith.definition import BinaryOp
        cur = body.args[1]
        nxt_i = BinaryOp.build(k.b, "arith.remsi",
                               BinaryOp.build(k.b, "arith.addi", body.args[0], k.i32(1)),
                               k.i32(2))
        nxt = MemDescIndexOp.build(k.b, bufs, nxt_i)
        v = LocalLoadOp.build(k.b, cur, blocked(shape, 4))
        LocalStoreOp.build(k.b, BinaryOp.build(k.b, "arith.addf", v, v), nxt)
        YieldOp.build(k.b, [nxt])
    k.store(1, LocalLoadOp.build(k.b, loop.results[0], blocked(shape, 1)))
    module = k.finish()
    a = np.ones(shape, np.float32)
    out = np.zeros_like(a)
    interpret(module, a, out)
    np.testing.assert_array_equal(out, 16 * a)
    kernel, ptx = compile_ptx(module)
    assert kernel.shared_bytes == 2 * 32 * 32 * 4
    assert re.search(r"ld\.shared\.v4\.f32|ld\.shared\.v4\.b32", ptx["sm_90a"])
