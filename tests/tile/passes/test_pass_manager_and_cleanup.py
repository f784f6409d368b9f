"""The pass manager (dumps, verification, names) and the clean-up rules."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_kit import Kernel, float32, ptr, vector_add  # noqa: E402

import tile  # noqa: E402
import tile.language as tl  # noqa: E402
from gluon.layouts import BlockedLayout  # noqa: E402
from shared_codegen.ir.core import Operation  # noqa: E402
from shared_codegen.ir.passes import PassError, insert_after, run_pipeline  # noqa: E402
from tile.passes import TILE_PIPELINE, cse, remove_redundant_conversions  # noqa: E402


def test_pipeline_dumps_the_ir_after_every_named_pass(tmp_path):
    k = vector_add()
    run_pipeline(k.module, TILE_PIPELINE, dump_dir=str(tmp_path))
    names = sorted(os.listdir(tmp_path))
    assert names == ["00-input.mlir", "01-combine_dot_add.mlir", "02-loop_unroll.mlir",
                     "03-warp_specialize_warps.mlir", "04-layout_assignment.mlir",
                     "05-remove_redundant_conversions.mlir", "06-cse.mlir",
                     "07-persistent_programs.mlir", "08-loop_flatten.mlir",
                     "09-warp_specialization.mlir", "10-software_pipelining.mlir",
                     "11-hoist_invariant_conversions.mlir"]
    assert "#blocked0" not in (tmp_path / "01-combine_dot_add.mlir").read_text()
    assert "#blocked0" in (tmp_path / "06-cse.mlir").read_text()


def test_dump_folder_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SC_DUMP_IR_DIR", str(tmp_path / "dumps"))
    run_pipeline(vector_add().module, [("noop", lambda m: None)])
    assert sorted(os.listdir(tmp_path / "dumps")) == ["00-input.mlir", "01-noop.mlir"]


def test_a_pass_that_breaks_the_ir_is_named(monkeypatch):
    monkeypatch.delenv("SC_DUMP_IR_DIR", raising=False)

    def break_it(module):
        ops = module.kernel.body.block.ops  # move a load after its users
        ops.append(ops.pop(ops.index(next(o for o in ops if o.name == "tt.load"))))

    with pytest.raises(PassError, match="break_it"):
        run_pipeline(vector_add().module, [("break_it", break_it)])


def test_duplicate_pass_names_are_refused():
    with pytest.raises(ValueError, match="unique"):
        run_pipeline(vector_add().module, [("a", lambda m: None), ("a", lambda m: None)])


def _converted(layouts):
    """vector add after layout assignment, its `x` then converted through `layouts`."""
    k = vector_add()
    run_pipeline(k.module, TILE_PIPELINE)
    load = next(op for op in k.fn.walk() if op.name == "tt.load")
    add = next(op for op in k.fn.walk() if op.name == "arith.addf")
    value, anchor = load.result, load
    for layout in layouts:
        cvt = Operation("ttg.convert_layout", [value], [value.type.with_layout(layout)])
        insert_after(anchor, cvt)
        value, anchor = cvt.result, cvt
    add.operands[0] = value
    return k


def _count(k, name):
    return sum(op.name == name for op in k.fn.walk())


def test_conversion_to_the_same_layout_is_dropped():
    same = BlockedLayout([4], [32], [4], [0])
    k = _converted([same])
    remove_redundant_conversions(k.module)
    assert _count(k, "ttg.convert_layout") == 0


def test_conversion_chains_collapse_and_round_trips_vanish():
    other = BlockedLayout([1], [32], [4], [0])
    home = BlockedLayout([4], [32], [4], [0])
    k = _converted([other, BlockedLayout([2], [32], [4], [0]), home])
    remove_redundant_conversions(k.module)
    assert _count(k, "ttg.convert_layout") == 0
    k = _converted([other, BlockedLayout([2], [32], [4], [0])])
    remove_redundant_conversions(k.module)
    assert _count(k, "ttg.convert_layout") == 1


def test_cse_merges_identical_pure_ops_only():
    k = Kernel([("p", ptr(float32))], {0: 16})
    a, b = k.arange(64), k.arange(64)
    x = k.load(k.addptr(k["p"], a))
    y = k.load(k.addptr(k["p"], b))
    k.store(k.addptr(k["p"], a), k.addf(x, y))
    k.ret()
    cse(k.module)
    assert _count(k, "tt.make_range") == 1
    assert _count(k, "tt.load") == 2  # loads may observe stores: never merged


# A decode-shaped loop: a 16-row query tile loaded once, dotted with every key tile (mma v2:
# the query is converted to an MMA operand, which layout assignment places next to the dot).
@tile.jit
def _query_against_key_tiles(Q, K, Out, N, OUTER: tl.constexpr, BLOCK_N: tl.constexpr,
                             D: tl.constexpr):
    rows = tl.arange(0, 16)
    dims = tl.arange(0, D)
    q = tl.load(Q + rows[:, None] * D + dims[None, :])
    acc = tl.zeros([16, BLOCK_N], tl.float32)
    if OUTER == 0:  # no outer loop
        for start in range(0, N, BLOCK_N):
            keys = start + tl.arange(0, BLOCK_N)
            k = tl.load(K + keys[:, None] * D + dims[None, :])
            acc += tl.dot(q, tl.trans(k))
    else:
        for rep in range(OUTER):
            for start in range(0, N, BLOCK_N):
                keys = start + tl.arange(0, BLOCK_N)
                k = tl.load(K + keys[:, None] * D + dims[None, :])
                acc += tl.dot(q, tl.trans(k))
    tl.store(Out + rows[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :], acc)


@pytest.mark.parametrize("outer, num_stages", [(0, 1), (1, 1), (3, 1), (0, 3)])
def test_conversion_of_a_loop_invariant_leaves_the_loop_nest(outer, num_stages):
    ttgir = str(tile.compile(
        _query_against_key_tiles, signature={"Q": "*fp16:16", "K": "*fp16:16",
                                             "Out": "*fp32:16", "N": "i32"},
        constexprs=dict(OUTER=outer, BLOCK_N=32, D=64), target="sm_80", num_warps=4,
        num_stages=num_stages).asm["ttgir"])
    first_loop = ttgir.index("scf.for")
    converts = [i for i, line in enumerate(ttgir.splitlines())
                if "ttg.convert_layout %q" in line]
    assert len(converts) == 1
    convert = ttgir.index("ttg.convert_layout %q")
    assert convert < first_loop
    assert "#dot_op0>" in ttgir.splitlines()[converts[0]]
    if num_stages > 1:  # after the pipeline's prologue: its loads need not wait for Q's
        assert "ttg.async_commit_group" in ttgir[:first_loop]
        assert ttgir.rindex("ttg.async_copy_global_to_local", 0, first_loop) < convert
