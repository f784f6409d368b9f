"""Creation and shape builtins, program ids, loops, hints and debugging builtins in the CPU
interpreter, with their error messages."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tl_test_util import FLOATS, NP, TL, assert_close, bare_semantic, rand
from shared_codegen.ir.types import TensorType


@tile.jit
def creation_kernel(out_ptr, DT: tl.constexpr):
    r = tl.arange(0, 8)
    tl.store(out_ptr + r, tl.full((8,), 3, DT))
    tl.store(out_ptr + 8 + r, tl.zeros([8], DT) + r)
    z = tl.zeros_like(tl.load(out_ptr + r))
    tl.store(out_ptr + 16 + r, z - 1)
    tl.store(out_ptr + 24 + tl.arange(4, 12) - 4, tl.arange(4, 12))


@pytest.mark.parametrize("dtype", FLOATS + ["int8", "int32"])
def test_arange_full_zeros_zeros_like(dtype):
    out = np.zeros(32, NP[dtype])
    creation_kernel[(1,)](out, DT=TL[dtype])
    expected = np.concatenate([np.full(8, 3), np.arange(8), np.full(8, -1), np.arange(4, 12)])
    assert_close(out, expected, dtype)


@tile.jit
def shape_kernel(x_ptr, out_ptr, OP: tl.constexpr):
    r4 = tl.arange(0, 4)
    r8 = tl.arange(0, 8)
    x = tl.load(x_ptr + r4[:, None] * 8 + r8[None, :])  # 4 x 8
    if OP == "reshape":
        y = tl.reshape(x, (8, 4))
    elif OP == "reshape_args":
        y = x.reshape(2, 16).reshape(8, 4)
    elif OP == "view":
        y = tl.view(x, [8, 4])
    elif OP == "trans":
        y = tl.trans(x)
    elif OP == "T":
        y = x.T
    elif OP == "permute":
        y = tl.permute(tl.reshape(x, (2, 2, 8)), (2, 0, 1)).reshape(8, 4)
    elif OP == "expand_dims":
        y = tl.reshape(tl.expand_dims(x, (0, 3)), (8, 4))
    else:
        col = tl.expand_dims(tl.arange(0, 8), 1)          # 8 x 1
        a, b = tl.broadcast(col, tl.zeros((1, 4), tl.int32))
        y = a + b + tl.broadcast_to(tl.arange(0, 4)[None, :], 8, 4).to(tl.float32) * 0.5
    tl.store(out_ptr + tl.arange(0, 8)[:, None] * 4 + tl.arange(0, 4)[None, :], y)


@pytest.mark.parametrize("op", ["reshape", "reshape_args", "view", "trans", "T", "permute",
                                "expand_dims", "broadcast"])
def test_shape_ops(op):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = np.zeros((8, 4), np.float32)
    shape_kernel[(1,)](x, out, OP=op)
    expected = {
        "reshape": x.reshape(8, 4), "reshape_args": x.reshape(8, 4), "view": x.reshape(8, 4),
        "trans": x.T, "T": x.T,
        "permute": np.transpose(x.reshape(2, 2, 8), (2, 0, 1)).reshape(8, 4),
        "expand_dims": x.reshape(8, 4),
        "broadcast": np.arange(8)[:, None] + 0.5 * np.arange(4)[None, :],
    }[op]
    np.testing.assert_array_equal(out, expected)


@tile.jit
def grid_kernel(out_ptr):
    pid0 = tl.program_id(0)
    pid1 = tl.program_id(1)
    n0 = tl.num_programs(0)
    tl.store(out_ptr + pid1 * n0 + pid0, pid0 * 100 + pid1 * 10 + tl.num_programs(1))


def test_program_id_and_num_programs_on_a_2d_grid():
    out = np.zeros(6, np.int32)
    grid_kernel[(3, 2)](out)
    expected = [p0 * 100 + p1 * 10 + 2 for p1 in range(2) for p0 in range(3)]
    np.testing.assert_array_equal(out, expected)


@tile.jit
def loop_kernel(x_ptr, out_ptr, n, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.range(0, n, 2, num_stages=2):                # runtime bound
        acc += tl.load(x_ptr + i * BLOCK + offs)
    for j in tl.static_range(STEPS):                          # unrolled
        acc = acc * 2.0 + j
    for k in tl.static_range(1, 7, 3):
        acc += k
    tl.store(out_ptr + offs, acc)


def test_runtime_and_static_loops():
    B, n = 8, 5
    x = rand((n, B), "float32", 1)
    out = np.zeros(B, np.float32)
    loop_kernel[(1,)](x, out, n, STEPS=3, BLOCK=B)
    acc = x[0:n:2].sum(0).astype(np.float64)
    for j in range(3):
        acc = acc * 2 + j
    acc += 1 + 4
    np.testing.assert_allclose(out, acc, rtol=1e-6)


def test_loop_markers_are_plain_objects():
    r = tl.range(2, 10, 4, num_stages=3, loop_unroll_factor=2)
    assert (r.start, r.end, r.step, r.num_stages, r.loop_unroll_factor) == (2, 10, 4, 3, 2)
    s = tl.static_range(5)
    assert (s.start, s.end, s.step) == (0, 5, 1)
    with pytest.raises(TypeError, match="tl.static_range's `end` must be a compile-time int"):
        tl.static_range(0, 2.5)


@tile.jit
def hint_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.max_contiguous(tl.multiple_of(tl.arange(0, N), N), N)
    offs = tl.max_constancy(offs, 1)
    tl.debug_barrier()
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


def test_hints_keep_values_and_build_hint_ops():
    x = rand(8, "float32", 2)
    out = np.zeros(8, np.float32)
    hint_kernel[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, x)
    sem, (v,), fn = bare_semantic(TensorType((8,), tl.int32))
    tl.multiple_of(v, 16, _semantic=sem)
    tl.max_contiguous(v, [8], _semantic=sem)
    hints = [op.attrs for op in fn.walk() if op.name == "tt.hint"]
    assert hints == [{"divisibility": (16,)}, {"contiguity": (8,)}]


@tile.jit
def print_assert_kernel(x_ptr, LIMIT: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.static_print("compiling with LIMIT =", LIMIT)
    tl.device_print("x", x)
    print("sum", tl.sum(x))
    tl.device_assert(x < LIMIT, "x too large")


def test_device_print_static_print_and_device_assert(capsys):
    x = np.arange(4, dtype=np.int32)
    print_assert_kernel[(2,)](x, LIMIT=10)
    text = capsys.readouterr().out
    assert "compiling with LIMIT = 10" in text
    assert "pid (0, 0, 0) idx (3) x: 3\n" in text and "pid (1, 0, 0) idx (0) x: 0" in text
    assert "pid (0, 0, 0) idx () sum: 6\n" in text
    with pytest.raises(tile.InterpreterError, match="device assertion failed: x too large"):
        print_assert_kernel[(1,)](x, LIMIT=2)


@tile.jit
def shape_errors(x_ptr, CASE: tl.constexpr):
    r = tl.arange(0, 8)
    if CASE == "arange_len":
        tl.arange(0, 12)
    elif CASE == "arange_runtime":
        tl.arange(0, tl.load(x_ptr))
    elif CASE == "full_shape":
        tl.full((8, 3), 0, tl.float32)
    elif CASE == "reshape_numel":
        tl.reshape(r, (4, 4))
    elif CASE == "broadcast":
        r[:, None] + tl.zeros((4, 4), tl.int32)
    elif CASE == "trans_1d":
        tl.trans(r)
    elif CASE == "permute":
        tl.permute(r[:, None], (0, 0))
    elif CASE == "expand_axis":
        tl.expand_dims(r, 3)
    elif CASE == "program_id":
        tl.program_id(3)
    elif CASE == "static_assert":
        tl.static_assert(CASE == "never", "CASE must be never")
    elif CASE == "static_assert_runtime":
        tl.static_assert(r < 3)
    else:
        if r:
            pass


@pytest.mark.parametrize("case,message", [
    ("arange_len", "arange's length (end - start) must be a power of 2, got 12"),
    ("arange_runtime", "arange's `end` must be a compile-time int (tl.constexpr), got fp32"),
    ("full_shape", "shape element 1 must be a power of 2, got 3"),
    ("reshape_numel", "reshape cannot change the number of elements: tensor<8xi32> has 8, "
                      "shape [4, 4] has 16"),
    ("broadcast", "cannot broadcast shapes [8, 1] and [4, 4]: dimension 0 is 8 vs 4"),
    ("trans_1d", "tl.trans needs a tensor of rank 2 or more, got tensor<8xi32>"),
    ("permute", "permute dims must be a permutation of 0, 1, ..., n-1, got [0, 0]"),
    ("expand_axis", "expand_dims: invalid axis 3, expected -2 <= axis < 2"),
    ("program_id", "program_id axis must be 0, 1 or 2, got 3"),
    ("static_assert", "static_assert failed: CASE must be never"),
    ("static_assert_runtime", "static_assert needs a compile-time condition (built from "
                              "constexprs), got a runtime tensor<8xi1>; use tl.device_assert"),
    ("condition", "condition must be a scalar, got tensor<8xi32>"),
])
def test_shape_and_compile_time_errors(case, message):
    x = np.zeros(1, np.float32)
    with pytest.raises(tile.CompilationError) as e:
        shape_errors[(1,)](x, CASE=case)
    assert e.value.message == message
