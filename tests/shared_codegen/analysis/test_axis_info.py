"""Axis analysis: contiguity, divisibility and constancy of small kernels built by hand."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tile" / "passes"))

import pytest  # noqa: E402
from kernel_kit import Kernel, ptr, vector_add  # noqa: E402

from shared_codegen.analysis import MAX_DIVISOR, AxisInfo  # noqa: E402
from shared_codegen.ir.types import TensorType, float16, float32, int32  # noqa: E402
from shared_codegen.ops.arith.definition import ConstantOp  # noqa: E402


def _facts(info, v):
    i = info[v]
    return i.contiguity, i.divisibility, i.constancy


def test_program_offsets_are_contiguous_and_divisible_by_the_block():
    k = vector_add(block=1024)
    info = AxisInfo.analyze(k.fn)
    values = {v.name_hint: v for op in k.fn.walk() for v in op.results if v.name_hint}
    assert _facts(info, values["pid"]) == ((1,), (1,), (1,))
    assert _facts(info, values["block_start"]) == ((1,), (1024,), (1,))
    assert _facts(info, values["offsets"]) == ((1024,), (1024,), (1,))


def test_make_range_starting_at_zero_is_divisible_by_everything():
    k = Kernel([])
    r = k.arange(128)
    r16 = k.arange(64, start=16)
    info = AxisInfo.analyze(k.fn)
    assert _facts(info, r) == ((128,), (MAX_DIVISOR,), (1,))
    assert _facts(info, r16) == ((64,), (16,), (1,))


def test_pointer_divisibility_counts_bytes_and_gives_the_vector_width():
    for elem, width in ((float32, 4), (float16, 8)):
        k = vector_add(elem=elem)
        info = AxisInfo.analyze(k.fn)
        load = next(op for op in k.fn.walk() if op.name == "tt.load")
        p = load.operands[0]
        assert info[p].divisibility == (16,)
        assert info[p].contiguity == (1024,)
        assert info.vector_width(p) == width


def test_unaligned_arguments_allow_no_vectors():
    k = vector_add(aligned=False)
    info = AxisInfo.analyze(k.fn)
    load = next(op for op in k.fn.walk() if op.name == "tt.load")
    # Like Triton, nothing is assumed about an unspecialized pointer, not even its element size.
    assert info[load.operands[0]].divisibility == (1,)
    assert info.vector_width(load.operands[0]) == 1


def test_mask_against_a_16_divisible_bound_is_constant_in_runs_of_16():
    k = vector_add()
    info = AxisInfo.analyze(k.fn)
    mask = next(v for op in k.fn.walk() for v in op.results if v.name_hint == "mask")
    assert info[mask].constancy == (16,)
    assert info.mask_constancy(mask) == 16
    unaligned = vector_add(aligned=False)
    info = AxisInfo.analyze(unaligned.fn)
    mask = next(v for op in unaligned.fn.walk() for v in op.results if v.name_hint == "mask")
    assert info.mask_constancy(mask) == 1


def test_divisibility_through_mul_and_add():
    k = Kernel([("stride", int32)], {0: 16})
    a = k.mul(k.pid(), k.const(64))      # multiple of 64
    b = k.mul(a, k["stride"])            # multiple of 64 * 16
    c = k.add(b, k.const(8))             # only 8 survives
    d = k.mul(k.arange(32), k.const(4))  # [0, 4, 8, ...]: multiples of 4, not contiguous
    info = AxisInfo.analyze(k.fn)
    assert info[b].divisibility == (1024,)
    assert info[c].divisibility == (8,)
    assert _facts(info, d) == ((1,), (4,), (1,))


def test_two_dimensional_offsets():
    k = Kernel([("a_ptr", ptr(float32)), ("stride", int32)], {0: 16, 1: 16})
    offs_m = k.add(k.splat(k.mul(k.pid(), k.const(64)), [64]), k.arange(64))
    offs_n = k.arange(32)
    rows = k.mul(k.expand(offs_m, 1), k["stride"])     # [64, 1]
    offs = k.add(rows, k.expand(offs_n, 0))             # [64, 32]
    p = k.addptr(k["a_ptr"], offs)
    info = AxisInfo.analyze(k.fn)
    assert _facts(info, rows) == ((1, 1), (16, 16), (1, 1))
    # Along dim 0 every element counts, and offs_n's 1, 2, 3... are odd: divisibility 1 there
    # (in bytes: one fp32). Along dim 1 each row starts at a multiple of the 16-aligned stride.
    assert _facts(info, offs) == ((1, 32), (1, 16), (1, 1))
    assert info[p].divisibility == (4, 16)
    assert info.vector_width(p) == 4
    assert info.order(p) == (1, 0)


def test_broadcast_rows_are_constant_along_the_new_dimension():
    k = Kernel([])
    row = k.broadcast(k.expand(k.arange(16), 1), (16, 8))
    info = AxisInfo.analyze(k.fn)
    assert _facts(info, row) == ((16, 1), (MAX_DIVISOR, 1), (1, 8))


def test_hints_strengthen_the_facts():
    k = Kernel([("n", int32)])
    h = k.hint(k["n"], divisibility=16)
    offs = k.hint(k.add(k.splat(k.pid(), [256]), k.arange(256)), contiguity=256,
                  divisibility=256)
    info = AxisInfo.analyze(k.fn)
    assert info[h].divisibility == (16,)
    assert _facts(info, offs) == ((256,), (256,), (1,))


def test_division_and_remainder_of_a_range():
    k = Kernel([])
    r = k.arange(128)
    q = k.binop("arith.divsi", r, k.const(16))
    m = k.binop("arith.remsi", r, k.const(16))
    info = AxisInfo.analyze(k.fn)
    assert _facts(info, q) == ((1,), (1,), (16,))
    assert _facts(info, m) == ((16,), (16,), (1,))


def test_select_and_constants_fold():
    k = Kernel([])
    c = k.add(k.const(3), k.const(5))
    r = k.arange(64)
    s = k.select(k.cmp("slt", r, k.const(32, shape=[64])), r, k.const(0, shape=[64]))
    info = AxisInfo.analyze(k.fn)
    assert info[c].constant_value == 8 and info[c].divisibility == (8,)
    assert info[s].contiguity == (1,)  # 0 is constant, not contiguous: runs break


def test_loop_carried_pointer_keeps_the_step_divisibility():
    k = Kernel([("p", ptr(float16)), ("n", int32)], {0: 16})
    ptrs = k.addptr(k["p"], k.arange(128))

    def body(iv, acc, pp):
        x = k.load(pp)
        nxt = k.addptr(pp, k.const(64, shape=[128]))
        return [k.binop("arith.addf", acc, x), nxt]

    acc0 = k.const(0.0, float16, [128])
    acc, last = k.for_(k.const(0), k["n"], k.const(1), [acc0, ptrs], body)
    info = AxisInfo.analyze(k.fn)
    loop = next(op for op in k.fn.walk() if op.name == "scf.for")
    pp = loop.regions[0].block.args[2]
    assert info[pp].contiguity == (128,)
    assert info[pp].divisibility == (16,)  # base 16 B, step 64 * 2 B = 128 B
    assert info[last].divisibility == (16,)
    assert info.vector_width(pp) == 8


def test_loop_carried_offsets_lose_what_the_step_breaks():
    k = Kernel([("n", int32)])

    def body(iv, off):
        return [k.add(off, k.const(3, shape=[32]))]

    (final,) = k.for_(k.const(0), k["n"], k.const(1), [k.arange(32)], body)
    info = AxisInfo.analyze(k.fn)
    assert _facts(info, final) == ((32,), (1,), (1,))


@pytest.mark.parametrize("undef,contiguity", [(True, 32), (False, 1)])
def test_an_undef_initial_value_leaves_the_join_to_the_values_read(undef, contiguity):
    """A flattened loop's offsets start as `arith.constant {undef}`, never read: the join
    keeps what the yielded offsets say, where a zero that is read breaks their runs."""
    k = Kernel([("n", int32)])
    init = ConstantOp.build(k.b, 0, TensorType((32,), int32), undef=undef)

    def body(iv, off):
        return [k.add(k.splat(k.mul(iv, k.const(32)), [32]), k.arange(32))]

    (final,) = k.for_(k.const(0), k["n"], k.const(1), [init], body)
    info = AxisInfo.analyze(k.fn)
    assert info[final].contiguity == (contiguity,)
    assert info[final].divisibility == (32,)


def test_if_results_join_both_branches():
    k = Kernel([("c", int32)])
    cond = k.cmp("slt", k["c"], k.const(0))
    (r,) = k.if_(cond, [int32], lambda: [k.const(64)], lambda: [k.const(16)])
    info = AxisInfo.analyze(k.fn)
    assert info[r].divisibility == (16,)
    assert info[r].constant_value is None


def test_trans_permutes_the_facts():
    k = Kernel([])
    x = k.broadcast(k.expand(k.arange(16), 0), (8, 16))
    t = k.trans(x, (1, 0))
    info = AxisInfo.analyze(k.fn)
    assert info[t].contiguity == (16, 1)
    assert info[t].constancy == (1, 8)
