"""Layout assignment on small tile kernels: golden IR and the properties behind it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_kit import Kernel, float32, int32, ptr, vector_add  # noqa: E402

from gluon.layouts import BlockedLayout, SliceLayout  # noqa: E402
from shared_codegen.ir import print_module, verify_module  # noqa: E402
from shared_codegen.ir.passes import run_pipeline  # noqa: E402
from shared_codegen.ir.types import TensorType, float16  # noqa: E402
from tile.passes import TILE_PIPELINE  # noqa: E402
from tile.passes.layout_assignment import transposed_layout  # noqa: E402


def _run(k):
    run_pipeline(k.module, TILE_PIPELINE)
    return print_module(k.module)


def _ops(k, name):
    return [op for op in k.fn.walk() if op.name == name]


def _all_tensor_values(k):
    for op in k.fn.walk():
        yield from op.results
        for r in op.regions:
            yield from r.block.args


VECTOR_ADD_FP32 = """\
module attributes {num_warps = 4, target = 'sm_90a', threads_per_warp = 32}
#blocked0 = BlockedLayout(size_per_thread=[4], threads_per_warp=[32], warps_per_cta=[4], order=[0])
tt.func @kernel(%x_ptr: !ptr<fp32>, %y_ptr: !ptr<fp32>, %out_ptr: !ptr<fp32>, %n: i32) attributes {kernel} {
  %pid = tt.get_program_id {axis = 0} : i32
  %0 = arith.constant {value = 1024} : i32
  %block_start = arith.muli %pid, %0 : i32
  %1 = tt.make_range {end = 1024, start = 0} : tensor<1024xi32, #blocked0>
  %2 = tt.splat %block_start : tensor<1024xi32, #blocked0>
  %offsets = arith.addi %2, %1 : tensor<1024xi32, #blocked0>
  %3 = tt.splat %n : tensor<1024xi32, #blocked0>
  %mask = arith.cmpi %offsets, %3 {predicate = slt} : tensor<1024xi1, #blocked0>
  %4 = tt.splat %x_ptr : tensor<1024x!ptr<fp32>, #blocked0>
  %5 = tt.addptr %4, %offsets : tensor<1024x!ptr<fp32>, #blocked0>
  %x = tt.load %5, %mask : tensor<1024xfp32, #blocked0>
  %6 = tt.splat %y_ptr : tensor<1024x!ptr<fp32>, #blocked0>
  %7 = tt.addptr %6, %offsets : tensor<1024x!ptr<fp32>, #blocked0>
  %y = tt.load %7, %mask : tensor<1024xfp32, #blocked0>
  %output = arith.addf %x, %y : tensor<1024xfp32, #blocked0>
  %8 = tt.splat %out_ptr : tensor<1024x!ptr<fp32>, #blocked0>
  %9 = tt.addptr %8, %offsets : tensor<1024x!ptr<fp32>, #blocked0>
  tt.store %9, %output, %mask
  tt.return
}
"""


def test_vector_add_fp32_gets_four_elements_per_thread():
    assert _run(vector_add(block=1024)) == VECTOR_ADD_FP32


def test_vector_add_fp16_gets_eight_elements_per_thread():
    k = vector_add(block=1024, elem=float16)
    _run(k)
    layouts = {v.type.layout for v in _all_tensor_values(k) if isinstance(v.type, TensorType)}
    assert layouts == {BlockedLayout([8], [32], [4], [0])}


def test_unaligned_vector_add_falls_back_to_one_element_per_thread():
    k = vector_add(block=1024, aligned=False)
    _run(k)
    assert _ops(k, "tt.load")[0].result.type.layout == BlockedLayout([1], [32], [4], [0])


def test_small_tiles_keep_every_thread_busy_before_widening_vectors():
    k = vector_add(block=256)  # 128 threads: 2 fp32 each, though 4 would be aligned
    _run(k)
    assert _ops(k, "tt.load")[0].result.type.layout == BlockedLayout([2], [32], [4], [0])


def _tile_2d(BM=64, BN=64, reduce_rows=False):
    k = Kernel([("a_ptr", ptr(float32)), ("out_ptr", ptr(float32)), ("M", int32),
                ("N", int32)], {0: 16, 1: 16, 2: 16, 3: 16})
    offs_m = k.named(k.arange(BM), "offs_m")
    offs_n = k.named(k.arange(BN), "offs_n")
    offs = k.named(k.add(k.mul(k.expand(offs_m, 1), k["N"]), k.expand(offs_n, 0)), "offs")
    x = k.named(k.load(k.addptr(k["a_ptr"], offs)), "x")
    if reduce_rows:
        s = k.named(k.reduce_sum(x, 1), "row_sum")
        k.store(k.addptr(k["out_ptr"], offs_m), s)
    else:
        k.store(k.addptr(k["out_ptr"], offs), x)
    k.ret()
    return k


TILE_2D = """\
module attributes {num_warps = 4, target = 'sm_90a', threads_per_warp = 32}
#slice0 = SliceLayout(dim=1, parent=BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[2, 16], warps_per_cta=[4, 1], order=[1, 0]))
#slice1 = SliceLayout(dim=0, parent=BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[2, 16], warps_per_cta=[4, 1], order=[1, 0]))
#blocked0 = BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[2, 16], warps_per_cta=[4, 1], order=[1, 0])
tt.func @kernel(%a_ptr: !ptr<fp32>, %out_ptr: !ptr<fp32>, %M: i32, %N: i32) attributes {kernel} {
  %offs_m = tt.make_range {end = 64, start = 0} : tensor<64xi32, #slice0>
  %offs_n = tt.make_range {end = 64, start = 0} : tensor<64xi32, #slice1>
  %0 = tt.expand_dims %offs_m {axis = 1} : tensor<64x1xi32, #blocked0>
  %1 = tt.splat %N : tensor<64x1xi32, #blocked0>
  %2 = arith.muli %0, %1 : tensor<64x1xi32, #blocked0>
  %3 = tt.expand_dims %offs_n {axis = 0} : tensor<1x64xi32, #blocked0>
  %4 = tt.broadcast %2 : tensor<64x64xi32, #blocked0>
  %5 = tt.broadcast %3 : tensor<64x64xi32, #blocked0>
  %offs = arith.addi %4, %5 : tensor<64x64xi32, #blocked0>
  %6 = tt.splat %a_ptr : tensor<64x64x!ptr<fp32>, #blocked0>
  %7 = tt.addptr %6, %offs : tensor<64x64x!ptr<fp32>, #blocked0>
  %x = tt.load %7 : tensor<64x64xfp32, #blocked0>
  %8 = tt.splat %out_ptr : tensor<64x64x!ptr<fp32>, #blocked0>
  %9 = tt.addptr %8, %offs : tensor<64x64x!ptr<fp32>, #blocked0>
  tt.store %9, %x
  tt.return
}
"""


def test_2d_tile_gets_one_blocked_layout_and_slices_for_its_ranges():
    k = _tile_2d()
    assert _run(k) == TILE_2D
    assert not _ops(k, "ttg.convert_layout")


def test_row_reduction_result_is_a_slice_of_the_tile_layout():
    k = _tile_2d(BM=256, reduce_rows=True)
    _run(k)
    (red,) = _ops(k, "tt.reduce")
    tile = red.operands[0].type.layout
    assert red.result.type.layout == SliceLayout(1, tile)
    # 256 sums, more than the 128 threads: the store keeps its coalesced layout, one
    # conversion right before it.
    (cvt,) = _ops(k, "ttg.convert_layout")
    (store,) = _ops(k, "tt.store")
    assert cvt.operands[0] is red.result and store.operands[1] is cvt.result
    assert store.operands[1].type.layout == BlockedLayout([2], [32], [4], [0])


def test_store_of_fewer_elements_than_threads_takes_its_value_layout():
    # 64 row sums over 128 threads: replicated lanes cost nothing extra (one writer each),
    # a conversion would cost a shared-memory round trip; Triton stores them as they are.
    k = _tile_2d(reduce_rows=True)
    _run(k)
    (red,) = _ops(k, "tt.reduce")
    (store,) = _ops(k, "tt.store")
    assert not _ops(k, "ttg.convert_layout")
    assert store.operands[1] is red.result
    assert store.operands[0].type.layout == SliceLayout(1, red.operands[0].type.layout)


def test_small_index_load_takes_the_layout_of_the_rows_it_addresses():
    # A block table's 64 entries (fewer than the 128 threads) pick a gathered tile's rows:
    # loaded straight in the tile's row slice, with no conversion between (Triton's
    # isExpensiveLoadOrStore); the tile's own load and store stay coalesced.
    k = Kernel([("table", ptr(int32)), ("a_ptr", ptr(float32)), ("out_ptr", ptr(float32)),
                ("N", int32)], {0: 16, 1: 16, 2: 16, 3: 16})
    rows = k.named(k.load(k.addptr(k["table"], k.arange(64))), "rows")
    cols = k.expand(k.arange(64), 0)
    x = k.load(k.addptr(k["a_ptr"], k.add(k.mul(k.expand(rows, 1), k["N"]), cols)))
    k.store(k.addptr(k["out_ptr"], k.add(k.mul(k.expand(k.arange(64), 1), k["N"]), cols)), x)
    k.ret()
    _run(k)
    assert not _ops(k, "ttg.convert_layout")
    index_load, tile_load = _ops(k, "tt.load")
    tile = tile_load.result.type.layout
    assert tile == BlockedLayout([1, 4], [2, 16], [4, 1], [1, 0])
    assert index_load.result.type.layout == SliceLayout(1, tile)


def test_small_load_with_no_other_layout_near_it_stays_coalesced():
    k = vector_add(block=64)  # 64 elements, nothing else to follow: its own layout
    _run(k)
    assert _ops(k, "tt.load")[0].result.type.layout == BlockedLayout([1], [32], [4], [0])


def test_reduced_value_broadcast_back_needs_no_conversion():
    k = Kernel([("a_ptr", ptr(float32)), ("N", int32)], {0: 16, 1: 16})
    offs = k.add(k.mul(k.expand(k.arange(32), 1), k["N"]), k.expand(k.arange(128), 0))
    p = k.addptr(k["a_ptr"], offs)
    x = k.load(p)
    s = k.reduce_sum(x, 1)
    y = k.binop("arith.subf", x, k.broadcast(k.expand(s, 1), (32, 128)))
    k.store(k.addptr(k["a_ptr"], offs), y)
    k.ret()
    _run(k)
    assert not _ops(k, "ttg.convert_layout")
    assert x.type.layout == BlockedLayout([1, 4], [1, 32], [4, 1], [1, 0])


def test_transposed_store_keeps_both_accesses_coalesced():
    k = Kernel([("a", ptr(float16)), ("b", ptr(float16)), ("N", int32), ("M", int32)],
               {0: 16, 1: 16, 2: 16, 3: 16})
    src = k.add(k.mul(k.expand(k.arange(64), 1), k["N"]), k.expand(k.arange(64), 0))
    dst = k.add(k.expand(k.arange(64), 1), k.mul(k.expand(k.arange(64), 0), k["M"]))
    x = k.load(k.addptr(k["a"], src))
    k.store(k.addptr(k["b"], dst), x)
    k.ret()
    _run(k)
    (load,), (store,) = _ops(k, "tt.load"), _ops(k, "tt.store")
    assert load.result.type.layout.order == (1, 0)
    assert store.operands[0].type.layout.order == (0, 1)
    assert store.operands[0].type.layout.size_per_thread == (8, 1)
    assert len(_ops(k, "ttg.convert_layout")) == 1


def test_one_range_indexing_two_tiles_is_recomputed_not_converted():
    k = Kernel([("a", ptr(float16)), ("b", ptr(float16)), ("s", int32)], {0: 16, 1: 16, 2: 16})
    offs_k = k.arange(32)
    a = k.load(k.addptr(k["a"], k.add(k.mul(k.expand(k.arange(64), 1), k["s"]),
                                      k.expand(offs_k, 0))))
    b = k.load(k.addptr(k["b"], k.add(k.mul(k.expand(offs_k, 1), k["s"]),
                                      k.expand(k.arange(16), 0))))
    k.store(k.addptr(k["a"], k.add(k.mul(k.expand(k.arange(64), 1), k["s"]),
                                   k.expand(k.arange(32), 0))), a)
    k.store(k.addptr(k["b"], k.add(k.mul(k.expand(k.arange(32), 1), k["s"]),
                                   k.expand(k.arange(16), 0))), b)
    k.ret()
    _run(k)
    assert not _ops(k, "ttg.convert_layout")
    ranges_32 = [op for op in _ops(k, "tt.make_range") if op.attrs["end"] == 32]
    assert {op.result.type.layout.dim for op in ranges_32} == {0, 1}


def test_loop_carried_values_share_the_layout_of_their_init_and_yield():
    k = Kernel([("p", ptr(float32)), ("n", int32)], {0: 16})
    ptrs = k.addptr(k["p"], k.arange(512))

    def body(iv, acc, pp):
        x = k.load(pp)
        return [k.addf(acc, x), k.addptr(pp, k.const(512, shape=[512]))]

    acc, _ = k.for_(k.const(0), k["n"], k.const(1),
                    [k.const(0.0, float32, [512]), ptrs], body)
    k.store(k.addptr(k["p"], k.arange(512)), acc)
    k.ret()
    _run(k)
    verify_module(k.module)
    (loop,) = _ops(k, "scf.for")
    want = BlockedLayout([4], [32], [4], [0])
    block = loop.regions[0].block
    assert [a.type.layout for a in block.args[1:]] == [want, want]
    assert [r.type.layout for r in loop.results] == [want, want]
    assert not _ops(k, "ttg.convert_layout")


def test_trans_is_a_register_rename():
    k = Kernel([("a", ptr(float32)), ("N", int32)], {0: 16, 1: 16})
    offs = k.add(k.mul(k.expand(k.arange(32), 1), k["N"]), k.expand(k.arange(64), 0))
    x = k.load(k.addptr(k["a"], offs))
    t = k.trans(x, (1, 0))
    k.reduce_sum(t, 0)
    k.ret()
    _run(k)
    assert t.type.layout == transposed_layout(x.type.layout, (1, 0), (32, 64))
    assert t.type.layout == BlockedLayout([4, 1], [16, 2], [1, 4], [0, 1])
    assert not _ops(k, "ttg.convert_layout")


def test_explicit_layout_ir_is_left_alone():
    k = vector_add()
    run_pipeline(k.module, TILE_PIPELINE)
    before = print_module(k.module)
    run_pipeline(k.module, TILE_PIPELINE)
    assert print_module(k.module) == before


def test_num_warps_comes_from_the_module():
    k = vector_add(block=2048, num_warps=8)
    _run(k)
    assert _ops(k, "tt.load")[0].result.type.layout == BlockedLayout([4], [32], [8], [0])
