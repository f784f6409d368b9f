"""gl.warp_any: a warp's own vote (`vote.sync.any.pred`), and the branch each warp takes on
its own answer. The interpreter takes each element of a value the branch assigns from the
side its warps took; the PTX votes with no barrier; the errors for a branch that touches
memory or exchanges data through shared memory, for an answer used other than as a
condition, and for an element that warps which disagree both hold."""

import re

import numpy as np
import pytest
from gl_test_util import L2

import gluon
from gluon import language as gl
from shared_codegen.frontend.errors import CompilationError

# 32 x 16 over 4 warps, each warp holding 8 whole rows: warp w holds rows 8w .. 8w + 7.
ROWS = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])


@gluon.jit
def bump_warps_with_a_flag(x_ptr, flag_ptr, out_ptr, R: gl.constexpr, C: gl.constexpr):
    rows = gl.arange(0, R, layout=gl.SliceLayout(1, ROWS))
    cols = gl.arange(0, C, layout=gl.SliceLayout(0, ROWS))
    offs = gl.expand_dims(rows, 1) * C + gl.expand_dims(cols, 0)
    x = gl.load(x_ptr + offs)
    flag = gl.load(flag_ptr + rows)
    # Not an identity where a warp skips it: every row of a warp that votes yes moves.
    if gl.warp_any(flag != 0):
        x = x * 2.0 + 1.0
    gl.store(out_ptr + offs, x)


def _expected(x, flag, rows_per_warp=8):
    voted = flag.reshape(-1, rows_per_warp).any(axis=1).repeat(rows_per_warp)
    return np.where(voted[:, None], x * 2 + 1, x)


@pytest.mark.parametrize("flagged", [[], [3], [9, 30], list(range(32))])
def test_each_warp_takes_the_branch_on_its_own_answer(flagged):
    x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    flag = np.zeros(32, np.int32)
    flag[flagged] = 1
    out = np.zeros_like(x)
    bump_warps_with_a_flag[(1,)](x, flag, out, 32, 16, num_warps=4)
    np.testing.assert_array_equal(out, _expected(x, flag))


def test_ptx_votes_without_a_barrier():
    compiled = gluon.compile(bump_warps_with_a_flag, {"x_ptr": "*fp32:16", "flag_ptr": "*i32:16",
                                                      "out_ptr": "*fp32:16"},
                             {"R": 32, "C": 16}, target="sm_90a", num_warps=4)
    ptx = compiled.asm["ptx"]
    assert len(re.findall(r"vote\.sync\.any\.pred\s", ptx)) == 1
    assert not re.search(r"\bbar\.(sync|red)\s", ptx)
    assert len(compiled.asm["cubin"]) > 0


@gluon.jit
def lazy_rescale(acc_ptr, m_old_ptr, m_new_ptr, out_ptr, R: gl.constexpr, C: gl.constexpr):
    """The use it is for: O *= alpha only in warps where some row's maximum grew."""
    rows = gl.arange(0, R, layout=gl.SliceLayout(1, ROWS))
    cols = gl.arange(0, C, layout=gl.SliceLayout(0, ROWS))
    offs = gl.expand_dims(rows, 1) * C + gl.expand_dims(cols, 0)
    acc = gl.load(acc_ptr + offs)
    m_old = gl.load(m_old_ptr + rows)
    m_new = gl.load(m_new_ptr + rows)
    alpha = gl.exp2(m_old - m_new)
    if gl.warp_any(m_new > m_old):
        acc = acc * gl.expand_dims(alpha, 1)
    gl.store(out_ptr + offs, acc)


def test_a_lazy_rescale_matches_the_eager_one():
    rng = np.random.default_rng(0)
    acc = rng.standard_normal((32, 16)).astype(np.float32)
    m_old = rng.standard_normal(32).astype(np.float32)
    m_new = m_old.copy()
    m_new[[5, 17]] += 3.0  # warps 0 and 2 rescale, 1 and 3 skip
    out = np.zeros_like(acc)
    lazy_rescale[(1,)](acc, m_old, m_new, out, 32, 16, num_warps=4)
    np.testing.assert_allclose(out, acc * np.exp2(m_old - m_new)[:, None], rtol=1e-6)


def test_a_store_in_the_branch_is_refused():
    @gluon.jit
    def kernel(x_ptr):
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [4], [0]))
        x = gl.load(x_ptr + offs)
        if gl.warp_any(x > 0.0):
            gl.store(x_ptr + offs, x + 1.0)

    with pytest.raises(CompilationError, match=r"tt\.store: the branch on gl\.warp_any \(line "
                                               r"\d+\) runs in some warps only, so it may only "
                                               r"compute values, but tt\.store touches memory"):
        kernel[(1,)](np.zeros(128, np.float32), num_warps=4)


def test_a_barrier_in_the_branch_is_refused():
    @gluon.jit
    def kernel(x_ptr):
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [4], [0]))
        if gl.warp_any(gl.load(x_ptr + offs) > 0.0):
            gl.thread_barrier()

    with pytest.raises(CompilationError, match=r"but gpu\.barrier needs every warp of the "
                                               r"program"):
        kernel[(1,)](np.zeros(128, np.float32), num_warps=4)


def test_the_answer_may_only_be_a_condition():
    @gluon.jit
    def kernel(x_ptr, out_ptr):
        x = gl.load(x_ptr + gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [4], [0])))
        gl.store(out_ptr, gl.warp_any(x > 0.0).to(gl.int32))

    with pytest.raises(CompilationError, match=r"gl\.warp_any's answer differs between warps, "
                                               r"so it may only be an `if` condition; line \d+ "
                                               r"uses it otherwise"):
        kernel[(1,)](np.zeros(128, np.float32), np.zeros(1, np.int32), num_warps=4)


@gluon.jit
def transpose_in_branch(x_ptr, out_ptr):
    rows = gl.arange(0, 16, layout=gl.SliceLayout(1, L2))
    cols = gl.arange(0, 32, layout=gl.SliceLayout(0, L2))
    offs = gl.expand_dims(rows, 1) * 32 + gl.expand_dims(cols, 0)
    x = gl.load(x_ptr + offs)
    if gl.warp_any(x > 0.0):
        x = gl.convert_layout(gl.convert_layout(x, gl.BlockedLayout([2, 1], [8, 4], [2, 2],
                                                                    [0, 1])), L2)
    gl.store(out_ptr + offs, x)


def test_a_conversion_across_warps_in_the_branch_is_refused_when_compiled():
    with pytest.raises(CompilationError, match=r"the branch on gl\.warp_any \(line \d+\) runs "
                                               r"in some warps only, but this op needs (a "
                                               r"barrier of every warp|scratch shared memory) "
                                               r"\(it exchanges data through shared memory\)"):
        gluon.compile(transpose_in_branch, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"}, {},
                      target="sm_90a", num_warps=4)


def test_an_element_held_by_warps_that_disagree_is_reported():
    # An 8 x 4 tensor in a layout that spans 8 x 16: every warp holds every element.
    @gluon.jit
    def kernel(x_ptr, flag_ptr, out_ptr):
        lay: gl.constexpr = gl.BlockedLayout([1, 1], [8, 4], [1, 4], [1, 0])
        rows = gl.arange(0, 8, layout=gl.SliceLayout(1, lay))
        cols = gl.arange(0, 4, layout=gl.SliceLayout(0, lay))
        offs = gl.expand_dims(rows, 1) * 4 + gl.expand_dims(cols, 0)
        x = gl.load(x_ptr + offs)
        flags = gl.load(flag_ptr + gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [4],
                                                                             [0])))
        if gl.warp_any(flags != 0):
            x = x + 1.0
        gl.store(out_ptr + offs, x)

    flag = np.zeros(128, np.int32)
    flag[70] = 1  # held by warp 2 alone: the warps disagree on the branch
    with pytest.raises(Exception, match=r"element \(0, 0\) of a value the branch on "
                                        r"gl\.warp_any changes is held by warps that take the "
                                        r"branch and warps that do not"):
        kernel[(1,)](np.zeros(32, np.float32), flag, np.zeros(32, np.float32), num_warps=4)


def test_a_scalar_the_branch_changes_is_reported_when_warps_disagree():
    @gluon.jit
    def kernel(x_ptr, out_ptr):
        x = gl.load(x_ptr + gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [4], [0])))
        n = 0
        if gl.warp_any(x > 0.0):
            n = 1
        gl.store(out_ptr, n)

    x = np.zeros(128, np.float32)
    out = np.zeros(1, np.int32)
    kernel[(1,)](x, out, num_warps=4)  # no warp takes it: the scalar is the same everywhere
    assert out[0] == 0
    x[100] = 1.0  # warp 3 alone takes it
    with pytest.raises(Exception, match=r"a scalar the branch on gl\.warp_any \(line \d+\) "
                                        r"changes differs between the warps that take it and "
                                        r"those that do not \(1 against 0\)"):
        kernel[(1,)](x, out, num_warps=4)
