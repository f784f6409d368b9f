"""tile/passes/loop_unroll.py: `tl.range(loop_unroll_factor=N)` loops become a remainder loop
for the first trip % N iterations and a main loop of N body copies per iteration; the copies
read the induction variable iv + j*step and chain the carried values; results match numpy for
every trip count, runtime and constant bounds, both step signs; a tl.dot loop unrolled by 2
is still software-pipelined and compiles to a cubin for sm_90a and sm_80."""

import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tile
import tile.language as tl
from shared_codegen.frontend.compile import explicit_layout_module, frontend_ir
from shared_codegen.frontend.launch import specialization_for_signature
from shared_codegen.ir.printer import Printer, print_module
from shared_codegen.ir.verifier import verify_module
from shared_codegen.ops.arith.definition import ConstantOp
from shared_codegen.ops.control.definition import ForOp
from tile.passes.loop_unroll import unroll_loops
from tile.passes.wgmma_schedule import _is

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pipelining import SIG, _consts, mm_kernel  # noqa: E402

FACTOR = 4
BLOCK = 16
ROWS = 128


@tile.jit
def _decay_sum(x_ptr, lo, hi, step, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    """acc = acc / 2 + x[i] * (i % 3 + 1) over the range, so the order of the iterations and
    the induction variable show in the result; the row is read through a carried pointer,
    and the count and the last i are carried too (four carried values)."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    count = 0
    last = -1
    row_ptr = x_ptr + lo * BLOCK + offs
    for i in tl.range(lo, hi, step, loop_unroll_factor=UNROLL):
        acc = acc * 0.5 + tl.load(row_ptr) * (i % 3 + 1)
        count += 1
        last = i
        row_ptr += step * BLOCK
    return acc, count, last


@tile.jit
def runtime_bounds_kernel(x_ptr, out_ptr, stats_ptr, lo, hi, step, BLOCK: tl.constexpr,
                          UNROLL: tl.constexpr):
    acc, count, last = _decay_sum(x_ptr, lo, hi, step, BLOCK, UNROLL)
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)
    tl.store(stats_ptr, count)
    tl.store(stats_ptr + 1, last)


@tile.jit
def constant_bounds_kernel(x_ptr, out_ptr, stats_ptr, LO: tl.constexpr, HI: tl.constexpr,
                           STEP: tl.constexpr, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    acc, count, last = _decay_sum(x_ptr, LO, HI, STEP, BLOCK, UNROLL)
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)
    tl.store(stats_ptr, count)
    tl.store(stats_ptr + 1, last)


def _check(kernel, x, lo, hi, step, *args, **constexprs):
    """Run `kernel` on `x` (rows lo, lo + step, ... < hi) and compare with numpy."""
    out = np.full(BLOCK, np.nan, np.float32)
    stats = np.zeros(2, np.int32)
    kernel[(1,)](x.reshape(-1), out, stats, *args, BLOCK=BLOCK, **constexprs)
    rows = list(range(lo, hi, step))
    acc = np.zeros(BLOCK, np.float64)
    for i in rows:
        acc = acc * 0.5 + x[i].astype(np.float64) * (i % 3 + 1)
    np.testing.assert_allclose(out, acc, rtol=1e-5, atol=1e-5)
    assert (int(stats[0]), int(stats[1])) == (len(rows), rows[-1] if rows else -1)


def _bounds(trip, step):
    """(lo, hi) of a range of `trip` iterations of `step` inside the ROWS rows."""
    lo = 2 if step > 0 else ROWS - 3
    return lo, lo + trip * step


TRIPS = [0, 1, FACTOR - 1, FACTOR, FACTOR + 1, 2 * FACTOR + 3, 37]


@pytest.mark.parametrize("step", [1, 3, -2])  # -2: a runtime step that counts down
@pytest.mark.parametrize("trip", TRIPS)
def test_runtime_bounds_match_numpy_for_every_trip_count(trip, step):
    x = np.random.default_rng(trip).standard_normal((ROWS, BLOCK)).astype(np.float32)
    lo, hi = _bounds(trip, step)
    _check(runtime_bounds_kernel, x, lo, hi, step, lo, hi, step, UNROLL=FACTOR)


@pytest.mark.parametrize("lo, hi, step", [(9, 2, 3), (4, 4, 1), (2, 9, -1)])
def test_a_runtime_range_that_runs_no_iteration_stays_empty(lo, hi, step):
    x = np.ones((ROWS, BLOCK), np.float32)
    _check(runtime_bounds_kernel, x, lo, hi, step, lo, hi, step, UNROLL=FACTOR)


@pytest.mark.parametrize("step", [1, 2, -3])  # -3: the frontend's upward-counting rewrite
@pytest.mark.parametrize("trip", TRIPS)
def test_constant_bounds_match_numpy_for_every_trip_count(trip, step):
    x = np.random.default_rng(100 + trip).standard_normal((ROWS, BLOCK)).astype(np.float32)
    lo, hi = _bounds(trip, step)
    _check(constant_bounds_kernel, x, lo, hi, step, LO=lo, HI=hi, STEP=step, UNROLL=FACTOR)


# ---- the IR --------------------------------------------------------------------------------

RUNTIME_SIG = {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "stats_ptr": "*i32:16",
               "lo": "i32", "hi": "i32", "step": "i32"}
CONSTANT_SIG = {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "stats_ptr": "*i32:16"}


def _module(kernel, sig, **constexprs):
    spec = specialization_for_signature(kernel, sig, dict(BLOCK=BLOCK, **constexprs), 4,
                                        "sm_90a")
    return frontend_ir(kernel, spec)


def _unroll(module):
    unroll_loops(module)
    verify_module(module)


def _top_loops(module):
    return [op for op in module.kernel.body.block.ops if _is(op, ForOp)]


def _text(op):
    out = []
    Printer().op(op, 0, out)
    return "\n".join(out)


def _loads(loop):
    return _text(loop).count("tt.load")


def _constant(value):
    return value.owner.attrs["value"] if _is(value.owner, ConstantOp) else None


def test_the_frontend_puts_the_factor_on_the_loop_and_the_pass_removes_it():
    module = _module(constant_bounds_kernel, CONSTANT_SIG, LO=0, HI=10, STEP=1, UNROLL=4)
    (loop,) = _top_loops(module)
    assert loop.attrs == {"loop_unroll_factor": 4}
    assert "{loop_unroll_factor = 4}" in print_module(module)
    _unroll(module)
    assert "loop_unroll_factor" not in print_module(module)
    # A factor of 1 asks for nothing: no attribute, one loop.
    module = _module(constant_bounds_kernel, CONSTANT_SIG, LO=0, HI=10, STEP=1, UNROLL=1)
    assert [loop.attrs for loop in _top_loops(module)] == [{}]


def test_constant_bounds_peel_the_remainder_first_then_step_by_factor_times_step():
    # range(5, 31, 2): 13 iterations; 13 % 4 = 1 runs first (i = 5), then 3 x 4 copies
    # from 7 in steps of 8.
    module = _module(constant_bounds_kernel, CONSTANT_SIG, LO=5, HI=31, STEP=2, UNROLL=4)
    _unroll(module)
    remainder, main = _top_loops(module)
    assert [_constant(v) for v in remainder.operands[:3]] == [5, 7, 2]
    assert remainder.attrs == {"num_stages": 1}
    assert [_constant(v) for v in main.operands[:3]] == [7, 31, 8]
    assert main.operands[3:] == remainder.results  # the main loop continues from it
    assert (_loads(remainder), _loads(main)) == (1, 4)
    block = main.regions[0].block
    # Copies 1..3 read iv + 2, iv + 4, iv + 6 (constants made before the loop).
    offsets = [op for op in block.ops if op.name == "arith.addi" and op.operands[0] is
               block.args[0]]
    assert [_constant(op.operands[1]) for op in offsets] == [2, 4, 6]
    # Each copy reads what the one before yields: from the yielded acc back through four
    # `acc * 0.5 + ...` to the block argument.
    acc, links = block.ops[-1].operands[0], 0
    while acc is not block.args[1]:
        acc = acc.owner.operands[0].owner.operands[0]  # addf(mulf(acc, 0.5), ...)
        links += 1
    assert links == 4


def test_a_trip_count_the_factor_divides_needs_no_remainder():
    module = _module(constant_bounds_kernel, CONSTANT_SIG, LO=0, HI=12, STEP=1, UNROLL=4)
    _unroll(module)
    (main,) = _top_loops(module)
    assert [_constant(v) for v in main.operands[:3]] == [0, 12, 4] and _loads(main) == 4


def test_fewer_iterations_than_copies_leave_one_unpipelined_loop():
    # As in Triton: the main loop would run no iteration; the loop is all remainder.
    module = _module(constant_bounds_kernel, CONSTANT_SIG, LO=0, HI=3, STEP=1, UNROLL=4)
    _unroll(module)
    (loop,) = _top_loops(module)
    assert loop.attrs == {"num_stages": 1} and _loads(loop) == 1


def test_runtime_bounds_compute_where_the_main_loop_starts():
    module = _module(runtime_bounds_kernel, RUNTIME_SIG, UNROLL=3)
    _unroll(module)
    remainder, main = _top_loops(module)
    lo, hi, step = module.kernel.args[3:6]
    assert remainder.operands[0] is lo and remainder.operands[2] is step
    start = remainder.operands[1]
    assert main.operands[0] is start and main.operands[1] is hi
    assert main.operands[2].owner.name == "arith.muli"  # 3 * step at run time
    assert remainder.attrs == {"num_stages": 1} and (_loads(remainder), _loads(main)) == (1, 3)
    # The step's sign picks the direction, as the lowering does; counts are unsigned.
    text = print_module(module)
    assert "arith.divui" in text and "arith.remui" in text and "predicate = sgt" in text


NESTED_SIG = {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "n": "i32"}


@tile.jit
def nested_kernel(x_ptr, out_ptr, n, OUTER: tl.constexpr, INNER: tl.constexpr):
    offs = tl.arange(0, 16)
    total = tl.zeros((16,), tl.float32)
    for i in tl.range(0, n, loop_unroll_factor=OUTER):
        row = tl.zeros((16,), tl.float32)
        for j in tl.range(0, i + 1, loop_unroll_factor=INNER):
            if (i + j) % 2 == 0:
                row += tl.load(x_ptr + j * 16 + offs)
            else:
                row -= 0.5 * tl.load(x_ptr + j * 16 + offs)
        total = total * 0.75 + row
    tl.store(out_ptr + offs, total)


def _nested_reference(x, n):
    total = np.zeros(16)
    for i in range(n):
        row = np.zeros(16)
        for j in range(i + 1):
            row = row + x[j] if (i + j) % 2 == 0 else row - 0.5 * x[j]
        total = total * 0.75 + row
    return total


def _for_loops(op):
    return [o for top in op.regions[0].block.ops for o in top.walk() if _is(o, ForOp)]


@pytest.mark.parametrize("outer, inner", [(1, 3), (2, 1), (2, 3)])
def test_only_the_marked_loop_of_a_nest_is_unrolled(outer, inner):
    spec = specialization_for_signature(nested_kernel, NESTED_SIG,
                                        dict(OUTER=outer, INNER=inner), 4, "sm_90a")
    module = frontend_ir(nested_kernel, spec)
    _unroll(module)
    tops = _top_loops(module)
    assert len(tops) == (2 if outer > 1 else 1)
    main = tops[-1]
    inner_loops = [lp for lp in _for_loops(main) if lp.parent is main.regions[0].block]
    # One inner loop per copy of the outer body; each inner one a remainder plus a main loop
    # when marked.
    assert len(inner_loops) == outer * (2 if inner > 1 else 1)
    ifs = [op for op in main.walk() if op.name == "scf.if"]
    assert len(ifs) == outer * (1 + inner if inner > 1 else 1)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("outer, inner", [(1, 3), (2, 1), (2, 3)])
def test_nested_loops_with_branches_match_numpy(n, outer, inner):
    x = np.random.default_rng(n).standard_normal((16, 16)).astype(np.float32)
    out = np.zeros(16, np.float32)
    nested_kernel[(1,)](x.reshape(-1), out, n, OUTER=outer, INNER=inner)
    np.testing.assert_allclose(out, _nested_reference(x, n), rtol=1e-5, atol=1e-5)


# ---- with tl.dot and num_stages --------------------------------------------------------------

# test_pipelining's matmul: pointers advanced in the loop, masks from the induction variable.
MM_CONSTS = _consts(bk=32, loop_stages=3, unroll=2)


def test_an_unrolled_dot_loop_is_still_pipelined_and_its_remainder_is_not():
    spec = specialization_for_signature(mm_kernel, SIG, MM_CONSTS, 4, "sm_90a", 3)
    module = explicit_layout_module(mm_kernel, spec)
    loops = [op for op in module.walk() if _is(op, ForOp)]
    assert len(loops) == 2
    remainder, main = loops
    # The main loop: 2 wgmmas, both operands of both copies through 3-slot cp.async rings,
    # its step the constant 2 the pipeliner needs.
    assert _constant(main.operands[2]) == 2 and main.attrs["num_stages"] == 3
    body = _text(main)
    assert body.count("ttng.warp_group_dot ") == 2 and "tt.load" not in body
    assert body.count("ttg.async_copy_global_to_local") == 4
    assert "ttg.async_wait {num = 1}" in body
    text = print_module(module)
    assert len(re.findall(r"ttg\.local_alloc : !ttg\.memdesc<3x(128x32|32x128)xfp16", text)) == 4
    # The remainder (num_stages = 1, as Triton marks its epilogue) is left as it is: its
    # loads stay loads, staged in shared memory for a synchronous wgmma.
    rest = _text(remainder)
    assert remainder.attrs["num_stages"] == 1 and rest.count("tt.load") == 2
    assert "async_copy" not in rest and "{is_async = False}" in rest
    # Left for later: chained accumulators keep the two wgmmas synchronous (wgmma_schedule
    # counts each one's registers and waits between them), where the loop without
    # unrolling keeps its one wgmma in flight.
    assert body.count("{is_async = False}") == 2


@pytest.mark.parametrize("target, mma", [("sm_90a", "wgmma.mma_async"),
                                         ("sm_80", "mma.sync.aligned.m16n8k16")])
def test_an_unrolled_dot_loop_compiles_to_a_cubin(target, mma):
    kern = tile.compile(mm_kernel, signature=SIG, constexprs=MM_CONSTS, target=target,
                        num_stages=3)
    ptx = kern.asm["ptx"]
    assert mma in ptx and "cp.async.wait_group 1;" in ptx
    assert kern.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("k", [32, 64, 96, 224])  # 1, 2, 3 and 7 K steps
def test_an_unrolled_dot_loop_matches_numpy(target, k, monkeypatch):
    monkeypatch.setenv("SC_TARGET", target)
    rng = np.random.default_rng(k)
    m, n = 80, 96
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    grid = (-(-m // 128), -(-n // 128))
    mm_kernel[grid](a, b, c, m, n, k, k, 1, n, 1, n, 1, BM=128, BN=128, BK=32, LOOP_STAGES=3,
                    OTHER=0.0, SCALE_IN_LOOP=False, UNROLL=2)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=1e-2, atol=1e-2)


# ---- the factor, in the user's terms ---------------------------------------------------------

def test_the_factor_is_taken_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tl.range(0, 8, loop_unroll_factor=4).loop_unroll_factor == 4
        assert tl.range(0, 8, loop_unroll_factor=tl.constexpr(2)).loop_unroll_factor == 2
        assert tl.range(0, 8, loop_unroll_factor=1).loop_unroll_factor == 1


@pytest.mark.parametrize("factor", [0, -2, 2.0, True, "4"])
def test_a_bad_factor_is_named_with_its_value(factor):
    with pytest.raises(ValueError, match=r"^tl\.range loop_unroll_factor must be a "
                                         r"compile-time int >= 1, got " + re.escape(repr(factor))):
        tl.range(0, 8, loop_unroll_factor=factor)


def test_a_bad_factor_in_a_kernel_points_at_its_line():
    x = np.zeros((ROWS, BLOCK), np.float32)
    with pytest.raises(Exception, match=r"test_loop_unroll\.py:\d+: tl\.range loop_unroll_factor "
                                        r"must be a compile-time int >= 1, got 0\n.*tl\.range"):
        _check(runtime_bounds_kernel, x, 0, 4, 1, 0, 4, 1, UNROLL=0)
