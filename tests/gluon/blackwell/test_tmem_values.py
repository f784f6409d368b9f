"""Tensor-memory descriptors rebuilt by the code generator (here: an aggregate field passed to
a warp_specialize worker partition) keep their methods, as upstream's warp-specialized matmul
(tutorial 08) needs; and int methods of constexprs run at compile time."""

import numpy as np

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             get_tmem_reg_layout, tensor_memory_descriptor)
from tile.language.core import _aggregate as aggregate


@aggregate
class Accumulators:
    bufs: tensor_memory_descriptor
    scale: gl.constexpr


@gluon.jit
def _fill(acc, N_BUF: gl.constexpr):
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [128, 32], acc.bufs.layout, 4)
    # A worker partition: its arguments are rebuilt as values of the partition's region.
    for i in range(N_BUF):
        acc.bufs.index(i).store(gl.full([128, 32], i * acc.scale, gl.float32, reg))


@gluon.jit
def _idle(acc, N_BUF: gl.constexpr):
    pass


@gluon.jit
def tmem_loop_kernel(out_ptr, N_BUF: gl.constexpr):
    M: gl.constexpr = 128
    N: gl.constexpr = 32
    layout: gl.constexpr = TensorMemoryLayout([M, N], col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, N], layout, gl.num_warps())
    acc = Accumulators(allocate_tensor_memory(gl.float32, [N_BUF, M, N], layout), 2.0)
    gl.warp_specialize([(_idle, (acc, N_BUF)), (_fill, (acc, N_BUF))], [4], [24])
    total = gl.zeros([M, N], gl.float32, reg)
    for i in range(N_BUF):
        total += acc.bufs.index(i).load(reg)
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, reg))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, reg))
    gl.store(out_ptr + rows[:, None] * N + cols[None, :], total)


def test_tensor_memory_fields_keep_their_methods_in_runtime_loops():
    out = np.zeros((128, 32), np.float32)
    tmem_loop_kernel[(1,)](out, N_BUF=3)
    np.testing.assert_array_equal(out, np.full((128, 32), 2.0 * (0 + 1 + 2), np.float32))


@gluon.jit
def bit_length_kernel(out_ptr, FACTOR: gl.constexpr):
    # Upstream tutorial 08 calls int methods on constexprs: `SUBTILE_FACTOR.bit_length()`.
    splits: gl.constexpr = FACTOR.bit_length() - 1
    gl.store(out_ptr, splits)


def test_methods_of_compile_time_ints_run_at_compile_time():
    out = np.zeros(1, np.int32)
    bit_length_kernel[(1,)](out, FACTOR=8)
    assert out[0] == 3
