"""gl.barrier_any: a barrier that ORs a predicate over the threads it syncs (`bar.red.or.pred`),
so a kernel may branch on a fact about the whole tile without a round trip through shared
memory. Interpreter results, the PTX (CTA-wide and inside a warp-specialized partition), the
arrival it serves, and the error for a non-boolean operand."""

import re

import numpy as np
import pytest
from gl_test_util import L2

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier
from shared_codegen.frontend.errors import CompilationError


@gluon.jit
def any_above_kernel(x_ptr, out_ptr, limit, R: gl.constexpr, C: gl.constexpr):
    rows = gl.arange(0, R, layout=gl.SliceLayout(1, L2))
    cols = gl.arange(0, C, layout=gl.SliceLayout(0, L2))
    x = gl.load(x_ptr + gl.expand_dims(rows, 1) * C + gl.expand_dims(cols, 0))
    if gl.barrier_any(x > limit):
        gl.store(out_ptr, 1)
    else:
        gl.store(out_ptr, 0)


@pytest.mark.parametrize("limit, expected", [(0.5, 1), (1.5, 0)])
def test_any_element_of_any_thread_decides(limit, expected):
    # One element of 512 (in the last warp's registers) is above 1.
    x = np.zeros((16, 32), np.float32)
    x[13, 29] = 1.0
    out = np.full(1, -1, np.int32)
    any_above_kernel[(1,)](x, out, limit, 16, 32, num_warps=4)
    assert out[0] == expected


def test_a_scalar_predicate_is_its_own_answer():
    @gluon.jit
    def kernel(out_ptr, n):
        gl.store(out_ptr, gl.barrier_any(n > 3).to(gl.int32))

    out = np.full(1, -1, np.int32)
    kernel[(1,)](out, 5)
    assert out[0] == 1
    kernel[(1,)](out, 2)
    assert out[0] == 0


def test_ptx_reduces_at_the_cta_barrier():
    ptx = gluon.compile(any_above_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*i32:16",
                                           "limit": "fp32"}, {"R": 16, "C": 32},
                        target="sm_90a", num_warps=4).asm["ptx"]
    assert len(re.findall(r"bar\.red\.or\.pred %p_any, 0, %p_in;", ptx)) == 1
    assert not re.search(r"\bbar\.sync\s", ptx)


@gluon.jit
def _worker_decides(x_ptr, out_ptr, bar):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    x = gl.load(x_ptr + gl.arange(0, 32, layout=layout))
    grew = gl.barrier_any(x > 0.0)
    mbarrier.arrive(bar)  # needs its warp's accesses done: the barrier above did it
    gl.store(out_ptr, grew.to(gl.int32))


@gluon.jit
def _default_waits(bar):
    mbarrier.wait(bar, 0)


@gluon.jit
def partition_kernel(x_ptr, out_ptr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    gl.warp_specialize([(_default_waits, (bar,)), (_worker_decides, (x_ptr, out_ptr, bar))],
                       [1], [24])


def test_in_a_partition_it_is_the_partitions_barrier_and_serves_its_arrival():
    compiled = gluon.compile(partition_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*i32:16"},
                             {}, target="sm_90a", num_warps=4)
    ptx = compiled.asm["ptx"]
    assert len(compiled.asm["cubin"]) > 0
    # The worker's one warp meets at its named barrier (2, 32 threads), and no bar.sync of
    # its own goes before its one-thread arrival.
    assert len(re.findall(r"bar\.red\.or\.pred %p_any, 2, 32, %p_in;", ptx)) == 1
    assert "bar.sync \t2, 32;" not in ptx


def test_the_interpreter_runs_it_in_a_partition():
    x = np.zeros(32, np.float32)
    out = np.full(1, -1, np.int32)
    partition_kernel[(1,)](x, out, num_warps=4)
    assert out[0] == 0
    x[31] = 2.0
    partition_kernel[(1,)](x, out, num_warps=4)
    assert out[0] == 1


def test_a_non_boolean_predicate_is_refused():
    @gluon.jit
    def kernel(x_ptr):
        x = gl.load(x_ptr + gl.arange(0, 32, layout=gl.BlockedLayout([1], [32], [1], [0])))
        gl.barrier_any(x)

    with pytest.raises(CompilationError, match=r"gl\.barrier_any: pred must be a boolean \(a "
                                               r"comparison\), got tensor<32xfp32, BlockedLayout\("):
        kernel[(1,)](np.zeros(32, np.float32), num_warps=1)
