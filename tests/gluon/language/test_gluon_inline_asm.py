"""`inline_asm_elementwise` (gl. and tl.): Triton's register conventions, the interpreter's
PTX subset against numpy, PTX features, and errors in the user's terms."""

import ml_dtypes
import numpy as np
import pytest

import gluon
import tile
import tile.language as tl
from gluon import language as gl
from shared_codegen.interpreter.memory import InterpreterError

# Triton's own docstring example: 4 uint8 packed in one register, f32 one per register.
MAX_ASM = gl.constexpr("""
{
    .reg .b8 tmp<4>;
    mov.b32 {tmp0, tmp1, tmp2, tmp3}, $8;
    cvt.u32.u8 $0, tmp0;
    cvt.u32.u8 $1, tmp1;
    cvt.u32.u8 $2, tmp2;
    cvt.u32.u8 $3, tmp3;
}
cvt.rn.f32.s32 $4, $0;
cvt.rn.f32.s32 $5, $1;
cvt.rn.f32.s32 $6, $2;
cvt.rn.f32.s32 $7, $3;
max.f32 $4, $4, $9;
max.f32 $5, $5, $10;
max.f32 $6, $6, $11;
max.f32 $7, $7, $12;
""")
MAX_CONSTRAINTS = gl.constexpr("=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r")

# fp8 e5m2 -> fp16 is the byte shifted into the high half: two per output register.
E5M2_ASM = gl.constexpr("prmt.b32 $0, 0, $2, 0x5140;\nprmt.b32 $1, 0, $2, 0x7362;")


@gluon.jit
def max_kernel(a_ptr, b_ptr, c_ptr, d_ptr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    offs = gl.arange(0, N, layout=layout)
    a = gl.load(a_ptr + offs)
    b = gl.load(b_ptr + offs)
    c, d = gl.inline_asm_elementwise(MAX_ASM, MAX_CONSTRAINTS, [a, b],
                                     dtype=(gl.int32, gl.float32), is_pure=True, pack=4)
    gl.store(c_ptr + offs, c)
    gl.store(d_ptr + offs, d)


@gluon.jit
def e5m2_kernel(x_ptr, y_ptr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    offs = gl.arange(0, N, layout=layout)
    y = gl.inline_asm_elementwise(E5M2_ASM, "=r,=r,r", [gl.load(x_ptr + offs)],
                                  dtype=gl.float16, is_pure=True, pack=4)
    gl.store(y_ptr + offs, y)


def max_inputs():
    rng = np.random.default_rng(1)
    return (rng.integers(0, 256, 512).astype(np.uint8),
            rng.uniform(0, 300, 512).astype(np.float32))


def test_triton_docstring_example_in_the_interpreter():
    a, b = max_inputs()
    c, d = np.zeros(512, np.int32), np.zeros(512, np.float32)
    max_kernel[(1,)](a, b, c, d, 512)
    np.testing.assert_array_equal(c, a.astype(np.int32))
    np.testing.assert_array_equal(d, np.maximum(a.astype(np.float32), b))


def e5m2_input():
    x = np.arange(512).astype(np.uint8)
    keep = np.isfinite(x.view(ml_dtypes.float8_e5m2).astype(np.float32))
    return np.where(keep, x, 0).astype(np.uint8)


def test_packed_halves_come_back_in_element_order():
    x = e5m2_input()
    y = np.zeros(512, np.float16)
    e5m2_kernel[(1,)](x, y, 512)
    np.testing.assert_array_equal(y, x.view(ml_dtypes.float8_e5m2).astype(np.float16))


def test_ptx_has_the_snippet_once_per_pack():
    sig = {"a_ptr": "*u8:16", "b_ptr": "*fp32:16", "c_ptr": "*i32:16", "d_ptr": "*fp32:16"}
    ptx = gluon.compile(max_kernel, sig, {"N": 512}, target="sm_90a").asm["ptx"]
    # 512 elements / 128 threads = 4 per thread: one pack, one copy of the snippet.
    assert ptx.count("max.f32") == 4 and ptx.count("cvt.u32.u8") == 4
    ptx = gluon.compile(e5m2_kernel, {"x_ptr": "*u8:16", "y_ptr": "*fp16:16"}, {"N": 1024},
                        target="sm_90a").asm["ptx"]
    assert ptx.count("prmt.b32") == 4  # 8 elements per thread: two packs of two prmt


@tile.jit
def tile_shift_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("shl.b32 $0, $1, 3;", "=r,r", [x], dtype=tl.int32,
                                  is_pure=True, pack=1)
    tl.store(y_ptr + offs, y + 1)


def test_tile_language_inline_asm_in_the_interpreter_and_ptx():
    x = np.arange(-64, 64, dtype=np.int32)
    y = np.zeros_like(x)
    tile_shift_kernel[(1,)](x, y, N=128)
    np.testing.assert_array_equal(y, x * 8 + 1)
    ptx = tile.compile(tile_shift_kernel, signature={"x_ptr": "*i32", "y_ptr": "*i32"},
                       constexprs={"N": 128}, target="sm_90a").asm["ptx"]
    assert "shl.b32" in ptx


@gluon.jit
def unsupported_kernel(x_ptr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, N, layout=layout)
    y = gl.inline_asm_elementwise("ld.global.b32 $0, [$1];", "=r,l", [x_ptr + offs],
                                  dtype=gl.int32, is_pure=False, pack=1)
    gl.store(x_ptr + offs, y)


def test_an_instruction_outside_the_subset_is_a_kernel_error_naming_it():
    with pytest.raises(InterpreterError, match="pointer operands cannot run in the interpreter"):
        unsupported_kernel[(1,)](np.zeros(128, np.int32), 128)


def test_an_unknown_instruction_is_named():
    from shared_codegen.ops.inline_asm.ptx_subset import PtxUnsupported, run_ptx
    with pytest.raises(PtxUnsupported, match="`bar.sync` is not in the PTX subset"):
        run_ptx("bar.sync 0;", [], 1, 4)


def test_pack_must_divide_into_registers():
    from shared_codegen.frontend.errors import CompilationError

    @gluon.jit
    def bad(x_ptr):
        layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
        x = gl.load(x_ptr + gl.arange(0, 512, layout=layout))
        gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=gl.int16,
                                  is_pure=True, pack=3)

    with pytest.raises(CompilationError, match="inline_asm_elementwise: pack=3 must be a "
                                               "multiple of the 2 elements of"):
        bad[(1,)](np.zeros(512, np.int16))


@gluon.jit
def _pair_add(a, b):
    return gl.inline_asm_elementwise("add.rn.f32x2 $0, $1, $2;", "=l,l,l", [a, b],
                                     dtype=gl.int64, is_pure=True, pack=1)


@gluon.jit
def pair_sum_kernel(x_ptr, out_ptr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [32, 1], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, 32, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    pairs = gl.load(x_ptr + rows[:, None] * N + cols[None, :])  # fp32 pairs as int64
    sums = gl.reduce(pairs, 1, _pair_add)  # the combine runs on scalars
    gl.store(out_ptr + rows, sums)


def test_inline_asm_in_a_reduce_combine_function():
    # FlashAttention-4's row sums add fp32 pairs with one add.f32x2 per step.
    x = np.random.default_rng(0).standard_normal((32, 16, 2)).astype(np.float32)
    out = np.zeros((32, 2), np.float32)
    pair_sum_kernel[(1,)](x.view(np.int64).reshape(32, 16), out.view(np.int64).reshape(32),
                          N=16)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)
    ptx = gluon.compile(pair_sum_kernel, {"x_ptr": "*i64:16", "out_ptr": "*i64:16"},
                        {"N": 16}, target="sm_100a", num_warps=4).asm["ptx"]
    assert ptx.count("add.rn.f32x2") >= 3  # the in-thread steps of the reduction
