"""Shared-memory descriptors in the interpreter: round trips through every shared layout
family, views against numpy, swizzled bytes seen through a reinterpret, and the errors."""

import numpy as np
import pytest
from smem_kernels import Kernel, blocked, interpret

from gluon.layouts import (NVMMASharedLayout, SharedLinearLayout, SwizzledSharedLayout,
                           to_linear_layout)
from shared_codegen.interpreter.memory import InterpreterError
from shared_codegen.ir.core import VerificationError
from shared_codegen.ir.printer import print_module
from shared_codegen.ir.types import float16, float32, int8, int32
from shared_codegen.ops.shared_memory.definition import (LocalLoadOp, LocalStoreOp, MemDescIndexOp,
                                                         MemDescReinterpretOp, MemDescReshapeOp,
                                                         MemDescSubsliceOp, MemDescTransOp)

LAYOUTS_2D = [
    NVMMASharedLayout(128, 16),
    NVMMASharedLayout(64, 16),
    NVMMASharedLayout(32, 16),
    NVMMASharedLayout(0, 16),
    NVMMASharedLayout(128, 16, transposed=True),
    SwizzledSharedLayout(8, 1, 8, (1, 0)),
    SwizzledSharedLayout(4, 2, 4, (0, 1)),
    SwizzledSharedLayout(1, 1, 1, (1, 0)),
]


def _data(shape, dtype=np.float16, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _round_trip(layout, shape=(64, 64), elem=float16, dtype=np.float16):
    k = Kernel("round_trip", [elem, elem])
    x = k.load(0, shape, blocked(shape, 8))
    mem = k.alloc(elem, shape, layout)
    LocalStoreOp.build(k.b, x, mem)
    k.store(1, LocalLoadOp.build(k.b, mem, blocked(shape, 1, order=(0, 1))))
    a, out = _data(shape, dtype), np.zeros(shape, dtype)
    interpret(k.finish(), a, out)
    return a, out


@pytest.mark.parametrize("layout", LAYOUTS_2D, ids=repr)
def test_store_then_load_round_trips_through_every_layout(layout):
    a, out = _round_trip(layout)
    np.testing.assert_array_equal(out, a)


def test_round_trip_through_a_shared_linear_layout():
    bases = [[0, 1], [0, 2], [0, 4], [1, 0], [2, 0], [0, 8], [4, 0], [8, 0]]
    a, out = _round_trip(SharedLinearLayout(bases), shape=(16, 16))
    np.testing.assert_array_equal(out, a)


def _swizzled_bytes(layout, shape=(64, 64)):
    """Store x through `layout`, reinterpret the allocation as a flat unswizzled array and
    read it back: what the hardware's bytes hold, offset by offset."""
    k = Kernel("bytes", [float16, float16])
    x = k.load(0, shape, blocked(shape, 8))
    mem = k.alloc(float16, shape, layout)
    LocalStoreOp.build(k.b, x, mem)
    n = shape[0] * shape[1]
    flat = MemDescReinterpretOp.build(k.b, mem, float16, [n], SwizzledSharedLayout(1, 1, 1, (0,)))
    k.store(1, LocalLoadOp.build(k.b, flat, blocked((n,), 8)))
    a, out = _data(shape), np.zeros(n, np.float16)
    interpret(k.finish(), a, out)
    return a, out


def test_nvmma_128b_swizzle_puts_bytes_where_the_hardware_does():
    a, flat = _swizzled_bytes(NVMMASharedLayout(128, 16))
    # 128-byte swizzle, fp16: 64-element rows; 16-byte chunk c of row r lands at c ^ (r % 8).
    want = np.empty(64 * 64, np.float16)
    for r in range(64):
        for c in range(64):
            chunk = (c // 8) ^ (r % 8)
            want[r * 64 + chunk * 8 + c % 8] = a[r, c]
    np.testing.assert_array_equal(flat, want)


@pytest.mark.parametrize("layout", LAYOUTS_2D[:6], ids=repr)
def test_reinterpreted_bytes_follow_the_layouts_linear_form(layout):
    a, flat = _swizzled_bytes(layout)
    ll = to_linear_layout(layout, [64, 64])
    offs = np.arange(64 * 64)
    coords = ll.apply_array({"offset": offs, "block": np.zeros_like(offs)})
    np.testing.assert_array_equal(flat, a[coords["dim0"], coords["dim1"]])


def _view_kernel(view_fn, out_shape, load_layout=None, shape=(2, 32, 64),
                 layout=NVMMASharedLayout(128, 16)):
    k = Kernel("views", [float16, float16])
    x = k.load(0, shape, blocked(shape, 8))
    mem = k.alloc(float16, shape, layout)
    LocalStoreOp.build(k.b, x, mem)
    view = view_fn(k, mem)
    assert list(view.type.shape) == list(out_shape)
    k.store(1, LocalLoadOp.build(k.b, view, load_layout or blocked(out_shape, 1)))
    a, out = _data(shape), np.zeros(out_shape, np.float16)
    module = k.finish()
    interpret(module, a, out)
    return a, out, module


def test_index_selects_a_buffer():
    a, out, _ = _view_kernel(lambda k, m: MemDescIndexOp.build(k.b, m, k.i32(1)), (32, 64))
    np.testing.assert_array_equal(out, a[1])


def test_row_and_column_subslices_match_numpy():
    def rows(k, m):
        one = MemDescIndexOp.build(k.b, m, k.i32(1))
        return MemDescSubsliceOp.build(k.b, one, [16, 0], [16, 64])

    a, out, _ = _view_kernel(rows, (16, 64))
    np.testing.assert_array_equal(out, a[1, 16:32])

    def cols(k, m):  # inside the 128-byte swizzle atom: a runtime XOR, not an add
        one = MemDescIndexOp.build(k.b, m, k.i32(0))
        return MemDescSubsliceOp.build(k.b, one, [0, 32], [32, 32])

    a, out, _ = _view_kernel(cols, (32, 32))
    np.testing.assert_array_equal(out, a[0, :, 32:])


def test_permute_gives_the_transpose_with_a_transposed_layout():
    def trans(k, m):
        return MemDescTransOp.build(k.b, MemDescIndexOp.build(k.b, m, k.i32(0)), [1, 0])

    a, out, module = _view_kernel(trans, (64, 32))
    np.testing.assert_array_equal(out, a[0].T)
    (op,) = [op for op in module.walk() if op.name == "ttg.memdesc_trans"]
    assert op.result.type.layout == NVMMASharedLayout(128, 16, transposed=True)


def test_reshape_is_row_major():
    def reshape(k, m):
        return MemDescReshapeOp.build(k.b, MemDescIndexOp.build(k.b, m, k.i32(1)), [4, 8, 64])

    a, out, _ = _view_kernel(reshape, (4, 8, 64))
    np.testing.assert_array_equal(out, a[1].reshape(4, 8, 64))


def test_three_stage_buffer_indexes_whole_tiles():
    def third(k, m):
        return MemDescIndexOp.build(k.b, m, k.i32(2))

    k = Kernel("stages", [float16, float16])
    mem = k.alloc(float16, (3, 32, 64), NVMMASharedLayout(128, 16))
    x = k.load(0, (32, 64), blocked((32, 64), 8))
    for i in range(3):
        LocalStoreOp.build(k.b, x, MemDescIndexOp.build(k.b, mem, k.i32(i)))
    k.store(1, LocalLoadOp.build(k.b, third(k, mem), blocked((32, 64), 4)))
    a, out = _data((32, 64)), np.zeros((32, 64), np.float16)
    interpret(k.finish(), a, out)
    np.testing.assert_array_equal(out, a)
    assert mem.type.alloc_shape == (3, 32, 64)


def test_reinterpret_as_another_dtype_sees_the_same_bytes():
    shape = (16, 64)
    k = Kernel("bits", [float16, int8])
    x = k.load(0, shape, blocked(shape, 8))
    mem = k.alloc(float16, shape, SwizzledSharedLayout(1, 1, 1, (1, 0)))
    LocalStoreOp.build(k.b, x, mem)
    as_bytes = MemDescReinterpretOp.build(k.b, mem, int8, [16, 128],
                                          SwizzledSharedLayout(1, 1, 1, (1, 0)))
    k.store(1, LocalLoadOp.build(k.b, as_bytes, blocked((16, 128), 4)))
    a, out = _data(shape), np.zeros((16, 128), np.int8)
    interpret(k.finish(), a, out)
    np.testing.assert_array_equal(out, a.view(np.int8))


def test_alloc_with_an_initial_value():
    shape = (32, 32)
    k = Kernel("init", [float32, float32])
    mem = k.alloc(float32, shape, NVMMASharedLayout(128, 32), init=k.load(0, shape,
                                                                          blocked(shape, 4)))
    k.store(1, LocalLoadOp.build(k.b, mem, blocked(shape, 1)))
    a, out = _data(shape, np.float32), np.zeros(shape, np.float32)
    interpret(k.finish(), a, out)
    np.testing.assert_array_equal(out, a)


def test_reading_unwritten_shared_memory_names_the_line():
    shape = (32, 32)
    k = Kernel("uninit", [float32, float32])
    mem = k.alloc(float32, shape, NVMMASharedLayout(128, 32))
    half = MemDescSubsliceOp.build(k.b, mem, [0, 0], [16, 32])
    LocalStoreOp.build(k.b, k.load(0, (16, 32), blocked((16, 32), 4)), half)
    k.at_line(42, "    y = smem.load(layout)")
    k.store(1, LocalLoadOp.build(k.b, mem, blocked(shape, 1)))
    a, out = _data(shape, np.float32), np.zeros(shape, np.float32)
    with pytest.raises(InterpreterError, match=r"kernel.py:42: local_load reads uninitialized "
                                               r"shared memory: element \[16, 0\]") as info:
        interpret(k.finish(), a, out)
    assert "y = smem.load(layout)" in str(info.value)


def test_every_program_gets_fresh_shared_memory():
    shape = (32,)
    k = Kernel("fresh", [int32, int32])
    mem = k.alloc(int32, shape, SwizzledSharedLayout(1, 1, 1, (0,)))
    LocalStoreOp.build(k.b, k.load(0, shape, blocked(shape)), mem)
    k.store(1, LocalLoadOp.build(k.b, mem, blocked(shape)))
    a, out = np.arange(32, dtype=np.int32), np.zeros(32, np.int32)
    interpret(k.finish(), a, out, grid=(3, 1, 1))
    np.testing.assert_array_equal(out, a)


# ---- verifier ----------------------------------------------------------------------------

def _expect_verify_error(build, match):
    k = Kernel("bad", [float16, float16])
    build(k)
    with pytest.raises(VerificationError, match=match):
        k.finish()


def test_store_shape_and_dtype_must_match():
    def wrong_shape(k):
        mem = k.alloc(float16, (32, 64), NVMMASharedLayout(128, 16))
        LocalStoreOp.build(k.b, k.load(0, (64, 64), blocked((64, 64), 8)), mem)

    _expect_verify_error(wrong_shape, r"stored value shape \[64, 64\] and shared memory shape "
                                      r"\[32, 64\] must match")

    def wrong_dtype(k):
        mem = k.alloc(float32, (32, 64), NVMMASharedLayout(128, 32))
        LocalStoreOp.build(k.b, k.load(0, (32, 64), blocked((32, 64), 8)), mem)

    _expect_verify_error(wrong_dtype, r"stored value dtype float16 and shared memory dtype "
                                      r"float32 must match")


def test_subslice_offsets_must_be_multiples_of_the_size():
    def bad(k):
        mem = k.alloc(float16, (32, 64), NVMMASharedLayout(128, 16))
        MemDescSubsliceOp.build(k.b, mem, [8, 0], [16, 64])

    _expect_verify_error(bad, r"dim 0: offset 8 must be a multiple of the slice size 16")


def test_reinterpret_needs_contiguous_bytes():
    def bad(k):
        mem = k.alloc(float16, (32, 64), NVMMASharedLayout(128, 16))
        half = MemDescSubsliceOp.build(k.b, mem, [0, 0], [16, 64])
        MemDescReinterpretOp.build(k.b, half, float32, [16, 32], NVMMASharedLayout(128, 32))

    _expect_verify_error(bad, r"cannot reinterpret a subslice")

    def too_big(k):
        mem = k.alloc(float16, (32, 64), NVMMASharedLayout(128, 16))
        MemDescReinterpretOp.build(k.b, mem, float32, [32, 64], NVMMASharedLayout(128, 32))

    _expect_verify_error(too_big, r"reinterpreting a view of a 4096-byte allocation "
                                  r"\(\[32, 64\] x fp16\) as \[32, 64\] x fp32 needs 8192 bytes")


def test_local_load_needs_a_distributed_layout():
    def bad(k):
        mem = k.alloc(float16, (32, 64), NVMMASharedLayout(128, 16))
        LocalLoadOp.build(k.b, mem, NVMMASharedLayout(128, 16))

    _expect_verify_error(bad, r"local_load needs a distributed result layout")


def test_printed_ir_shows_descriptor_types():
    _, _, module = _view_kernel(lambda k, m: MemDescSubsliceOp.build(
        k.b, MemDescIndexOp.build(k.b, m, k.i32(0)), [0, 0], [16, 64]), (16, 64))
    text = print_module(module)
    nvmma = "NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16)"
    assert f"ttg.local_alloc : !ttg.memdesc<2x32x64xfp16, {nvmma}>" in text
    assert "ttg.memdesc_subslice %" in text and "{offsets = [0, 0]}" in text
    assert f"!ttg.memdesc<16x64xfp16, {nvmma}, alloc 32x64>" in text
