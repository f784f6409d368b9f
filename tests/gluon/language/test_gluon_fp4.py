"""`gl.fp4_to_fp`: packed e2m1 bytes unpacked in the interpreter (against a numpy decode of
the format) and in PTX, with Triton's inferred result layouts."""

import ml_dtypes
import numpy as np
import pytest

import gluon
from gluon import language as gl

# e2m1 by its definition: sign, 2 exponent bits (bias 1), 1 mantissa bit.
def e2m1(code):
    sign = -1.0 if code & 8 else 1.0
    exp, frac = (code >> 1) & 3, code & 1
    return sign * (frac * 0.5 if exp == 0 else (1 + frac * 0.5) * 2.0 ** (exp - 1))


def unpack_reference(packed, axis):
    lo, hi = np.vectorize(e2m1)(packed & 0xF), np.vectorize(e2m1)(packed >> 4)
    out_shape = list(packed.shape)
    out_shape[axis] *= 2
    return np.stack([lo, hi], axis=axis + 1).reshape(out_shape)


@gluon.jit
def fp4_kernel(src_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, AXIS: gl.constexpr,
               DTYPE: gl.constexpr, LAYOUT: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, LAYOUT))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, LAYOUT))
    packed = gl.load(src_ptr + rows[:, None] * N + cols[None, :])
    x = gl.fp4_to_fp(packed, DTYPE, AXIS)
    out_layout: gl.constexpr = x.type.layout
    OM: gl.constexpr = M * 2 if AXIS == 0 else M
    ON: gl.constexpr = N * 2 if AXIS == 1 else N
    orows = gl.arange(0, OM, layout=gl.SliceLayout(1, out_layout))
    ocols = gl.arange(0, ON, layout=gl.SliceLayout(0, out_layout))
    gl.store(out_ptr + orows[:, None] * ON + ocols[None, :], x)


BLOCKED = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
COL_MAJOR = gl.BlockedLayout([2, 1], [8, 4], [1, 4], [0, 1])
CASES = [(1, gl.bfloat16, ml_dtypes.bfloat16, BLOCKED), (0, gl.float16, np.float16, BLOCKED),
         (0, gl.float32, np.float32, COL_MAJOR), (1, gl.float32, np.float32, COL_MAJOR)]


@pytest.mark.parametrize("axis, dtype, np_dtype, layout", CASES)
def test_fp4_to_fp_decodes_every_code_in_the_interpreter(axis, dtype, np_dtype, layout):
    packed = np.arange(32 * 32, dtype=np.int64).reshape(32, 32) * 37 % 256
    packed = packed.astype(np.uint8)  # every byte value, so every pair of codes
    out = np.zeros((64, 32) if axis == 0 else (32, 64), np_dtype)
    fp4_kernel[(1,)](packed, out, 32, 32, axis, dtype, layout)
    np.testing.assert_array_equal(out.astype(np.float32), unpack_reference(packed, axis))


def test_fp4_to_fp_result_layout_doubles_size_per_thread_along_axis():
    from shared_codegen.ops.movement.fp4 import fp4_result_layout
    assert fp4_result_layout(BLOCKED, [32, 32], 1) == gl.BlockedLayout([1, 8], [4, 8], [4, 1],
                                                                       [1, 0])
    assert fp4_result_layout(BLOCKED, [32, 32], 0) == gl.BlockedLayout([2, 4], [4, 8], [4, 1],
                                                                       [1, 0])


def test_fp4_to_fp_rejects_a_float_source_in_the_users_terms():
    from shared_codegen.frontend.errors import CompilationError

    @gluon.jit
    def bad(src_ptr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        x = gl.load(src_ptr + gl.arange(0, 128, layout=layout))
        gl.fp4_to_fp(x, gl.bfloat16, 0)

    with pytest.raises(CompilationError, match="fp4_to_fp: src must hold int8 or uint8 bytes "
                                               r"\(two e2m1 values each\), got fp32"):
        bad[(1,)](np.zeros(128, np.float32))


@pytest.mark.parametrize("axis, dtype, np_dtype, layout", CASES[:3])
def test_fp4_to_fp_ptx(axis, dtype, np_dtype, layout):
    sig = {"src_ptr": "*u8:16", "out_ptr": "*bf16:16" if dtype == gl.bfloat16 else
           ("*fp16:16" if dtype == gl.float16 else "*fp32:16")}
    ptx = gluon.compile(fp4_kernel, sig, dict(M=32, N=32, AXIS=axis, DTYPE=dtype,
                                              LAYOUT=layout), target="sm_90a").asm["ptx"]
    # No data leaves the thread: no shared memory, and the only shuffle is the warp id's
    # broadcast from lane 0.
    shuffles = [l for l in ptx.splitlines() if "shfl.sync" in l]
    assert "st.shared" not in ptx and all(l.strip().endswith(", 0, 31, -1;") for l in shuffles)
    assert "cvt.rn.f32.u16" in ptx or "cvt.rn.f32.u32" in ptx  # the decoded magnitude
    assert "neg.f32" in ptx or "xor.b32" in ptx  # the sign
