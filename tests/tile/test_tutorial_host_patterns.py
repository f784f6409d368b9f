"""Host-side patterns of Triton's tutorials that run in the interpreter unchanged: tutorial 02
warms a kernel up, reads its registers and shared memory, and launches the compiled kernel
with every argument (its `num_stages` is both a kernel parameter and the launch option);
tutorial 08 passes tables of raw pointers built from `data_ptr()`."""

import numpy as np
import pytest

import tile as triton
import tile.language as tl
from shared_codegen.errors import ArgumentError, InterpreterError


@triton.jit
def softmax_rows(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols,
                 BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    # Tutorial 02's shape: persistent programs striding over the rows.
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=num_stages):
        cols = tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_warmup_reports_resources_and_the_compiled_kernel_launches_with_every_argument():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 100)).astype(np.float32)
    y = np.zeros_like(x)
    kernel = softmax_rows.warmup(y, x, x.shape[1], y.shape[1], 37, 100, BLOCK_SIZE=128,
                                 num_stages=2, num_warps=4, grid=(1,))
    kernel._init_handles()
    assert 0 < kernel.n_regs <= 255 and kernel.n_spills == 0
    assert kernel.metadata.num_warps == 4 and kernel.n_max_threads == 128
    assert kernel.metadata.shared == kernel.metadata["shared_bytes"]
    # Triton 3.6 passes the constexprs too; 5 programs for 37 rows.
    kernel[(5, 1, 1)](y, x, x.shape[1], y.shape[1], 37, 100, 128, 2)
    np.testing.assert_allclose(y, _softmax(x), rtol=1e-5, atol=1e-6)
    y2 = np.zeros_like(x)
    kernel[(3,)](y2, x, x.shape[1], y2.shape[1], 37, 100)  # the runtime arguments only
    np.testing.assert_allclose(y2, _softmax(x), rtol=1e-5, atol=1e-6)


def test_compiled_kernel_refuses_other_constexpr_values():
    x = np.zeros((2, 8), np.float32)
    kernel = softmax_rows.warmup(x, x, 8, 8, 2, 8, BLOCK_SIZE=8, num_stages=2, grid=(1,))
    with pytest.raises(ArgumentError, match=r"compiled kernel softmax_rows: constexpr "
                                            r"`BLOCK_SIZE` was compiled as 8, got 16; warm the "
                                            r"kernel up again for new values"):
        kernel[(1,)](x, x, 8, 8, 2, 8, 16, 2)
    with pytest.raises(ArgumentError, match=r"compiled kernel softmax_rows takes 8 arguments "
                                            r"\(or its 6 non-constexpr ones\), got 3"):
        kernel[(1,)](x, x, 8)


@triton.jit
def scale_through_table(tables, out, n, BLOCK: tl.constexpr):
    # Tutorial 08's pattern: each program loads its matrix's address from a table.
    g = tl.program_id(0)
    src = tl.load(tables + g).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    tl.store(out + g * BLOCK + offs, tl.load(src + offs, mask=offs < n, other=0.0) * 2.0,
             mask=offs < n)


def test_raw_pointer_tables_reach_live_host_arrays():
    a = np.arange(10, dtype=np.float32)
    b = np.arange(100, 110, dtype=np.float32)
    tables = np.array([a.ctypes.data, b.ctypes.data], dtype=np.int64)
    out = np.zeros(32, np.float32)
    scale_through_table[(2,)](tables, out, 10, BLOCK=16)
    np.testing.assert_array_equal(out[:10], a * 2)
    np.testing.assert_array_equal(out[16:26], b * 2)
    assert not out[10:16].any() and not out[26:].any()


def test_raw_pointers_outside_live_arrays_are_refused():
    stray = np.array([0x7000], dtype=np.int64)  # no array lives in the first pages
    out = np.zeros(16, np.float32)
    with pytest.raises(InterpreterError, match=r"load through an invalid pointer \(address "
                                               r"0x7000 is not inside any argument or live host "
                                               r"array\) \(program id \(0, 0, 0\)\)"):
        scale_through_table[(1,)](stray, out, 10, BLOCK=16)
