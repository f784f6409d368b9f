"""Gluon creation, shape, layout-conversion, memory and misc builtins in the interpreter,
against numpy; the result layouts follow Gluon's rules."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gl_test_util import FLOATS, L1, L2, L2T, NP, assert_close, offsets_2d, rand


@gluon.jit
def creation_kernel(out_ptr, OP: gl.constexpr, M: gl.constexpr, N: gl.constexpr,
                    layout: gl.constexpr):
    offs = offsets_2d(M, N, layout)
    if OP == "full":
        x = gl.full([M, N], 3.5, gl.float32, layout)
    elif OP == "zeros":
        x = gl.zeros([M, N], gl.float32, layout=layout)
    elif OP == "zeros_like":
        x = gl.zeros_like(offs.to(gl.float32)) + 1.0
    elif OP == "full_like":
        x = gl.full_like(offs, 7, dtype=gl.float32)
    elif OP == "arange":
        x = offs.to(gl.float32)
    elif OP == "program_id":
        x = gl.full([M, N], gl.program_id(0) + 10 * gl.num_programs(0), gl.float32, layout)
    gl.static_assert(x.type.layout == layout)
    gl.store(out_ptr + offs, x)


@pytest.mark.parametrize("op,expected", [
    ("full", lambda: np.full((16, 32), 3.5)), ("zeros", lambda: np.zeros((16, 32))),
    ("zeros_like", lambda: np.ones((16, 32))), ("full_like", lambda: np.full((16, 32), 7.0)),
    ("arange", lambda: np.arange(16 * 32).reshape(16, 32)),
    ("program_id", lambda: np.full((16, 32), 10.0))])
def test_creation_builtins(op, expected):
    out = np.zeros((16, 32), dtype=np.float32)
    creation_kernel[(1,)](out, OP=op, M=16, N=32, layout=L2)
    np.testing.assert_array_equal(out, expected())


@gluon.jit
def shape_kernel(x_ptr, out_ptr, OP: gl.constexpr, M: gl.constexpr, N: gl.constexpr,
                 layout: gl.constexpr):
    x = gl.load(x_ptr + offsets_2d(M, N, layout))
    if OP == "permute":
        y = gl.permute(x, [1, 0])
    elif OP == "trans":
        y = gl.trans(x)
    elif OP == "T":
        y = x.T
    elif OP == "reshape":
        y = gl.reshape(x, [M * N // 4, 4])
    elif OP == "ravel":
        y = gl.reshape(gl.ravel(x), [N, M])
    elif OP == "broadcast":
        col = gl.sum(x, axis=1)[:, None]
        a, b = gl.broadcast(col, x)
        y = a + b * 0
    elif OP == "broadcast_to":
        y = gl.broadcast_to(gl.max(x, axis=0, keep_dims=True), [M, N])
    elif OP == "expand_dims":
        y = gl.expand_dims(gl.min(x, axis=1), 1) + gl.expand_dims(gl.min(x, axis=0), 0)
    if OP == "reshape" or OP == "ravel":
        # A reshape's layout may be a DistributedLinearLayout, which is built for one shape
        # and cannot be sliced for the offsets: store through a blocked layout.
        y = gl.convert_layout(y, gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0]))
    shape: gl.constexpr = y.shape
    gl.store(out_ptr + offsets_2d(shape[0], shape[1], y.type.layout), y)


SHAPE_OPS = {
    "permute": lambda x: x.T, "trans": lambda x: x.T, "T": lambda x: x.T,
    "reshape": lambda x: x.reshape(-1, 4), "ravel": lambda x: x.reshape(32, 16),
    "broadcast": lambda x: np.broadcast_to(x.sum(1, keepdims=True), x.shape),
    "broadcast_to": lambda x: np.broadcast_to(x.max(0, keepdims=True), x.shape),
    "expand_dims": lambda x: x.min(1)[:, None] + x.min(0)[None, :],
}


@pytest.mark.parametrize("op", list(SHAPE_OPS))
def test_shape_ops_match_numpy(op):
    x = rand((16, 32), "float32", 1)
    ref = SHAPE_OPS[op](x.astype(np.float64))
    out = np.zeros(ref.shape, dtype=np.float32)
    shape_kernel[(1,)](x, out, OP=op, M=16, N=32, layout=L2)
    assert_close(out, ref, "float32")


def test_permute_and_reshape_results_are_register_renames():
    """The result layouts are the ones that make trans/reshape a rename of registers
    (what the lowering assumes): every element keeps its thread."""
    from gluon.layouts import to_linear_layout
    from tile.passes.layout_assignment import reshaped_layout, transposed_layout

    src = to_linear_layout(L2, [16, 32])
    t = to_linear_layout(transposed_layout(L2, [1, 0], [16, 32]), [32, 16])
    for dim in ("register", "lane", "warp"):
        assert [v[::-1] for v in src.bases[dim]] == [tuple(v) for v in t.bases[dim]]
    r = reshaped_layout(L2, [16, 32], [128, 4])
    assert to_linear_layout(r, [128, 4]).bases["lane"] != []


@gluon.jit
def convert_kernel(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, src: gl.constexpr,
                   dst: gl.constexpr):
    x = gl.load(x_ptr + offsets_2d(M, N, src))
    y = gl.convert_layout(x, dst)
    gl.static_assert(y.type.layout == dst)
    gl.store(out_ptr + offsets_2d(M, N, dst), y * 2)


@pytest.mark.parametrize("dtype", FLOATS)
def test_convert_layout_keeps_values(dtype):
    x = rand((16, 32), dtype, 2)
    out = np.zeros_like(x)
    convert_kernel[(1,)](x, out, M=16, N=32, src=L2, dst=L2T)
    assert_close(out, x.astype(np.float64) * 2, dtype)


@gluon.jit
def masked_copy_kernel(x_ptr, out_ptr, n, BLOCK: gl.constexpr, layout: gl.constexpr):
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    x = gl.load(x_ptr + offs, mask=mask, other=-1.0)
    gl.store(out_ptr + offs, x + 1, mask=offs < n - 1)


@pytest.mark.parametrize("dtype", FLOATS)
def test_masked_load_store(dtype):
    x = rand(200, dtype, 3)
    out = np.full(256, 9, dtype=NP[dtype])
    masked_copy_kernel[(2,)](x, out, 200, BLOCK=128, layout=L1)
    assert_close(out[:199], x[:199].astype(np.float64) + 1, dtype)
    assert (out[199:] == 9).all()


@gluon.jit
def atomic_kernel(out_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    gl.atomic_add(out_ptr + offs % 4, 1.0)
    gl.atomic_max(out_ptr + 4 + offs * 0, offs.to(gl.float32))


def test_atomics_in_the_pointer_layout():
    out = np.zeros(5, dtype=np.float32)
    atomic_kernel[(3,)](out, N=64, layout=L1)
    np.testing.assert_array_equal(out, [48, 48, 48, 48, 63])


@gluon.jit
def misc_kernel(x_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    gl.static_assert(gl.num_warps() == 4, "runs with 4 warps")
    gl.static_assert(gl.num_ctas() == 1)
    offs = gl.max_contiguous(gl.multiple_of(gl.arange(0, N, layout=layout), [N]), [N])
    x = gl.load(x_ptr + offs)
    gl.thread_barrier()
    gl.device_assert(x == x, "no NaN")
    acc = gl.zeros([N], gl.float32, layout)
    for i in gl.static_range(3):
        acc = acc + x * i
    for i in range(2):
        acc = acc + 1.0
    gl.store(out_ptr + offs, acc)


def test_hints_barrier_assert_and_loops():
    x = rand(64, "float32", 4)
    out = np.zeros(64, dtype=np.float32)
    misc_kernel[(1,)](x, out, N=64, layout=L1)
    np.testing.assert_allclose(out, 3 * x + 2, rtol=1e-6)


@gluon.jit
def layout_query_kernel(out_ptr, layout: gl.constexpr, EXPECTED: gl.constexpr):
    ll: gl.constexpr = gl.to_linear_layout(layout, [16, 32])
    gl.static_assert(ll == EXPECTED)
    gl.store(out_ptr, 1)


def test_to_linear_layout_is_a_compile_time_value():
    from gluon.layouts import to_linear_layout

    out = np.zeros(1, dtype=np.int32)
    # Gluon 3.6 types the value as a layout: a DistributedLinearLayout of the same bases.
    expected = gl.DistributedLinearLayout.from_linear_layout(to_linear_layout(L2, [16, 32]))
    layout_query_kernel[(1,)](out, layout=L2, EXPECTED=expected)
    assert out[0] == 1


class _SharedType:
    """Stands in for a shared-memory descriptor type (what `smem.type` will be)."""

    def __init__(self, element, shape, layout):
        self.element, self.shape, self.layout, self.alloc_shape = element, shape, layout, shape

    def __hash__(self):
        return hash((self.element, tuple(self.shape), self.layout))

    def __eq__(self, other):
        return vars(self) == vars(other)


@gluon.jit
def bank_conflict_kernel(x_ptr, SMEM_TY: gl.constexpr, EXPECTED: gl.constexpr,
                         layout: gl.constexpr):
    x = gl.load(x_ptr + offsets_2d(32, 32, layout))
    gl.static_assert(gl.bank_conflicts(x.type, SMEM_TY) == EXPECTED)


@pytest.mark.parametrize("real_type", [False, True])
@pytest.mark.parametrize("swizzled", [False, True])
def test_bank_conflicts_matches_the_layout_tool(swizzled, real_type):
    from shared_codegen.layouts.bank_conflicts import bank_conflicts

    reg = gl.BlockedLayout([1, 1], [32, 1], [1, 4], [0, 1])  # a column per warp
    shared = gl.SwizzledSharedLayout(1, 1, 32 if swizzled else 1, [1, 0])
    expected = bank_conflicts(reg, shared, [32, 32], gl.float32)
    assert (expected == 0) == swizzled
    x = np.zeros((32, 32), dtype=np.float32)
    smem_ty = gl.shared_memory_descriptor_type(gl.float32, [32, 32], shared, [32, 32]) \
        if real_type else _SharedType(gl.float32, [32, 32], shared)
    bank_conflict_kernel[(1,)](x, SMEM_TY=smem_ty, EXPECTED=expected, layout=reg)


@gluon.jit
def print_kernel(x_ptr, layout: gl.constexpr):
    gl.static_print("layout is", layout)
    x = gl.load(x_ptr + gl.arange(0, 4, layout=layout))
    gl.device_print("x", x)


def test_static_and_device_print(capsys):
    print_kernel[(1,)](np.arange(4, dtype=np.int32), layout=L1)
    out = capsys.readouterr().out
    assert f"layout is {L1!r}" in out
    assert "x" in out and "3" in out
