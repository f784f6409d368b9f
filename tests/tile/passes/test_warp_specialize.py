"""tile/passes/warp_specialize.py: a loop marked `tl.range(warp_specialize=True)` whose
tensor-descriptor loads feed wgmma becomes a one-warp TMA producer partition and the
default-partition wgmma consumer, sharing a ring of num_stages slots with a ready/empty
mbarrier pair per slot; the persistent form's producer walks the same tiles. The IR after
the pass, the interpreter's results against numpy under several completion orders (its race
and deadlock checks watching both partitions), and the loops it declines, with the reason."""

import os
import re
import sys
import warnings

import numpy as np
import pytest

import tile
import tile.language as tl
from tile.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, os.path.dirname(__file__))
from tile_ws_kernels import (descriptors, fp32_tolerance, matmul_tma,  # noqa: E402
                             operands, persistent_matmul, two_dot_matmul)

BLOCK = 64


def _signature():
    a = np.zeros((256, 256), np.float16)
    ad, bd, cd = descriptors(a, a, np.zeros((256, 256), np.float32), BLOCK, BLOCK, BLOCK)
    return {"a_desc": ad, "b_desc": bd, "c_desc": cd, "M": "i32", "N": "i32", "K": "i32"}


TMA = dict(BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK, GROUP_M=8, WARP_SPECIALIZE=True)


def _compile(kernel, constexprs, num_stages=3, target="sm_90a", **options):
    return tile.compile(kernel, _signature(), target=target, num_stages=num_stages,
                        constexprs=constexprs, **options)


def _parts(ir: str):
    """(before the op, its default region, its worker region, after it), by indentation."""
    head, rest = ir.split("ttg.warp_specialize ", 1)
    default, rest = rest.split("\n  } {\n", 1)
    worker, after = rest.split("\n  }\n", 1)
    return head, default, worker, after


# ---- the IR after the pass -------------------------------------------------------------------

@pytest.mark.parametrize("num_stages", [2, 3, 4])
def test_the_k_loop_becomes_a_tma_producer_and_a_wgmma_consumer(num_stages):
    ir = _compile(matmul_tma, TMA, num_stages).asm["ttgir"]
    assert ir.count("ttg.warp_specialize ") == 1
    head, default, worker, after = _parts(ir)
    # One ring per load and a ready / empty pair per slot, before the op; invalidated after.
    assert head.count(f"ttg.local_alloc : !ttg.memdesc<{num_stages}x64x64xfp16") == 2
    assert head.count(f"= ttg.local_alloc : !ttg.memdesc<{num_stages}x1xi64") == 2
    assert "%ready = " in head and "%empty = " in head
    assert head.count("ttng.init_barrier") == 2 * num_stages
    assert after.count("ttng.inval_barrier") == 2 * num_stages
    # The producer: one warp, setmaxnreg's minimum, the loads and nothing of the dot.
    assert "{worker_num_regs = [24], worker_num_warps = [1]}" in default.splitlines()[0]
    assert worker.count("ttng.async_tma_copy_global_to_local") == 2
    assert "ttng.warp_group_dot" not in worker and "ttng.arrive_barrier" not in worker
    # It waits on `empty` for the parity before the consumer's: slot = item % S, phase
    # (item / S) & 1, flipped (a fresh barrier's phase -1 counts as complete).
    assert re.search(rf"%slot_\d+ = arith.remsi %item_\d+, %\d+", worker)
    assert re.search(r"%phase_\d+ = arith.xori", worker)
    assert re.search(r"ttg.memdesc_index %empty_\d+, %slot_\d+", worker)
    assert re.search(r"ttng.barrier_expect %\d+ \{size = 16384\}", worker)
    # The consumer waits `ready`.
    assert "ttng.async_tma_copy_global_to_local" not in default
    assert re.search(r"%phase = arith.andi", default) and "arith.xori" not in default
    assert re.search(r"ttg.memdesc_index %ready, %slot", default)
    if num_stages == 2:
        # Two slots: the wgmma is retired at once and its own slot handed back right after
        # it, so the producer fills it during the next K step (in flight, it would hold the
        # only slot the producer could fill next).
        assert "{is_async = True}" not in default and "pendings" not in default
        assert default.count("ttng.arrive_barrier") == 1
        assert default.index("ttng.warp_group_dot ") < default.index("ttng.arrive_barrier") \
            < default.index("scf.yield")
    else:
        # One async wgmma in flight: the previous slot goes back from the second iteration
        # on, the last one after the loop.
        assert "{is_async = True}" in default and "{pendings = 1}" in default
        assert default.count("ttng.arrive_barrier") == 2
        assert re.search(r"arith.cmpi %k, %\d+ \{predicate = ne\}", default)
        loop_end = default.index("scf.yield")
        assert default.index("{pendings = 0}") > loop_end
    # The epilogue (the C store) stays after the op, on the default warps.
    assert "ttng.async_tma_copy_local_to_global %c_desc" in after


def test_the_persistent_loop_runs_its_tiles_in_both_partitions():
    ir = _compile(persistent_matmul, dict(BM=BLOCK, BN=BLOCK, BK=BLOCK, GROUP_M=8, NUM_SMS=132,
                                          WS=True)).asm["ttgir"]
    head, default, worker, after = _parts(ir)
    # Both sides walk the tiles and, inside, the K steps; `item` runs on across tiles.
    for region in (default, worker):
        assert len(re.findall(r"scf.for %\S+, %num_tiles\S*, ", region)) == 1, region
        assert region.count("scf.for ") == 2
    assert re.search(r"\^bb\(%tile_id_\d+: i32, %item_\d+: i32\)", worker)
    assert re.search(r"scf.yield %tile_id_c_\d+, %\d+\n", default)
    # The producer recomputes the tile's position (grouped tiles) from the tile id only.
    assert re.search(r"arith.divsi %tile_id_\d+, %tiles_in_group", worker)
    assert "tile_id_c" not in worker and "ttng.async_tma_copy_local_to_global" not in worker
    # The epilogue stays in the tile loop of the default partition.
    assert "ttng.async_tma_copy_local_to_global %c_desc" in default
    assert after.count("ttng.inval_barrier") == 6


def test_several_dots_stay_synchronous_and_release_after_the_last():
    a = np.zeros((128, 256), np.float16)
    ad, bd, cd = descriptors(a, a, a, BLOCK, BLOCK, BLOCK)
    sig = {"a_desc": ad, "b_desc": bd, "c_desc": cd, "o_ptr": "*fp32:16", "p_ptr": "*fp32:16",
           "K": "i32"}
    ir = tile.compile(two_dot_matmul, sig, target="sm_90a",
                      constexprs=dict(BM=BLOCK, BN=BLOCK, BK=BLOCK)).asm["ttgir"]
    _, default, worker, _ = _parts(ir)
    assert worker.count("ttng.async_tma_copy_global_to_local") == 3
    body = default[:default.index("scf.yield")]
    dots = [m.start() for m in re.finditer("ttng.warp_group_dot ", body)]
    assert len(dots) == 2 and "is_async = True" not in body and "_wait" not in body
    release = body.index("ttng.arrive_barrier")
    assert release > dots[1] and body.index("arith.mulf") > release
    assert default.count("ttng.arrive_barrier") == 1


# ---- the interpreter against numpy -----------------------------------------------------------

@pytest.mark.parametrize("m,n,k,num_stages", [
    (192, 160, 200, 2),    # ragged M, N and K: TMA pads the loads and clips the store
    (130, 72, 40, 3),      # one K step
    (64, 64, 512, 4),      # more steps than slots, several rounds of phases
])
@pytest.mark.parametrize("seed", ["0", "1", "2"])
def test_tma_matmul_matches_numpy(monkeypatch, m, n, k, num_stages, seed):
    monkeypatch.setenv("SC_INTERPRET", "1")
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    a, b, want = operands(m, n, k, int(seed))
    c = np.zeros((m, n), np.float32)
    grid = (-(-m // BLOCK) * -(-n // BLOCK),)
    matmul_tma[grid](*descriptors(a, b, c, BLOCK, BLOCK, BLOCK), m, n, k, **TMA,
                     num_stages=num_stages)
    np.testing.assert_allclose(c, want, **fp32_tolerance(k))


@pytest.mark.parametrize("m,n,k,num_stages,programs", [
    (200, 136, 200, 3, 3),  # ragged, several tiles per program, item runs across tiles
    (130, 72, 40, 2, 2),    # one K step per tile
    (64, 64, 256, 4, 3),    # one tile: two programs have none
])
@pytest.mark.parametrize("seed", ["0", "1", "2"])
def test_persistent_matmul_matches_numpy(monkeypatch, m, n, k, num_stages, programs, seed):
    monkeypatch.setenv("SC_INTERPRET", "1")
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    a, b, want = operands(m, n, k, 10 + int(seed))
    c = np.zeros((m, n), np.float32)
    persistent_matmul[(programs,)](*descriptors(a, b, c, BLOCK, BLOCK, BLOCK), m, n, k,
                                   BM=BLOCK, BN=BLOCK, BK=BLOCK, GROUP_M=2, NUM_SMS=programs,
                                   WS=True, num_stages=num_stages)
    np.testing.assert_allclose(c, want, **fp32_tolerance(k))


@pytest.mark.parametrize("seed", ["0", "1", "2"])
def test_two_consumer_warpgroups_match_numpy(monkeypatch, seed):
    # Tutorial 09's blocks: 8 default warps split BLOCK_M = 128 into two wgmma warpgroups.
    monkeypatch.setenv("SC_INTERPRET", "1")
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    m, n, k = 200, 136, 200
    a, b, want = operands(m, n, k, 20 + int(seed))
    c = np.zeros((m, n), np.float32)
    persistent_matmul[(2,)](*descriptors(a, b, c, 128, 128, 64), m, n, k, BM=128, BN=128,
                            BK=64, GROUP_M=8, NUM_SMS=2, WS=True, num_warps=8, num_stages=3)
    np.testing.assert_allclose(c, want, **fp32_tolerance(k))


@pytest.mark.parametrize("k,seed", [(64, "0"), (200, "1"), (320, "2")])
def test_synchronous_dots_match_numpy(monkeypatch, k, seed):
    monkeypatch.setenv("SC_INTERPRET", "1")
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    rng = np.random.default_rng(int(seed))
    a, b, c = (rng.standard_normal((rows, k)).astype(np.float16) for rows in (128, 64, 64))
    o, p = np.zeros((128, 64), np.float32), np.zeros((128, 64), np.float32)
    descs = [TensorDescriptor.from_tensor(x, [BLOCK, BLOCK]) for x in (a, b, c)]
    two_dot_matmul[(2,)](*descs, o, p, k, BM=BLOCK, BN=BLOCK, BK=BLOCK, num_stages=2)
    a64 = a.astype(np.float64)
    decayed = np.zeros((128, 64))
    for k0 in range(0, k, BLOCK):
        decayed = (decayed + a64[:, k0:k0 + BLOCK] @ c[:, k0:k0 + BLOCK].T.astype(np.float64)) / 2
    np.testing.assert_allclose(o, a64 @ b.T.astype(np.float64), **fp32_tolerance(k))
    np.testing.assert_allclose(p, decayed, **fp32_tolerance(k))


# ---- what the pass declines ------------------------------------------------------------------

@tile.jit
def pointer_matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=True):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@tile.jit
def nested_matmul(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, WS: tl.constexpr):
    for rep in range(2):
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in tl.range(tl.cdiv(K, BK), warp_specialize=WS):
            acc = tl.dot(a_desc.load([0, k * BK]), b_desc.load([0, k * BK]).T, acc)
        c_desc.store([rep * BM, 0], acc)


@tile.jit
def flattened_persistent_matmul(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr,
                                BN: tl.constexpr, BK: tl.constexpr, NUM_SMS: tl.constexpr):
    tiles_n = tl.cdiv(N, BN)
    for tile_id in tl.range(tl.program_id(0), tl.cdiv(M, BM) * tiles_n, NUM_SMS, flatten=True,
                            warp_specialize=True):
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BK)):
            acc = tl.dot(a_desc.load([tile_id // tiles_n * BM, ki * BK]),
                         b_desc.load([tile_id % tiles_n * BN, ki * BK]).T, acc)
        c_desc.store([tile_id // tiles_n * BM, tile_id % tiles_n * BN], acc)


def _declined(compile_it):
    """The warnings of one fresh compile (the disk cache would skip the passes)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = compile_it()
    found = [w for w in caught if "warp_specialize=True" in str(w.message)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert "ttg.warp_specialize" not in kernel.asm["ttgir"]
    return found[0]


def _line_of(kernel, text: str) -> int:
    info = kernel.source_info
    return next(n for n in range(info.first_line, info.first_line + 40)
                if text in info.line_text(n))


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")


def test_pointer_loads_keep_cp_async_pipelining_and_say_why(fresh):
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "K": "i32"}
    w = _declined(lambda: tile.compile(pointer_matmul, sig, target="sm_90a",
                                       constexprs=dict(BM=64, BN=64, BK=64)))
    assert w.filename == pointer_matmul.source_info.file
    assert w.lineno == _line_of(pointer_matmul, "warp_specialize=True")
    assert "in `pointer_matmul` is not applied: its tl.dot operands come from pointer loads " \
           "(tl.load), which are pipelined through cp.async" in str(w.message)
    assert "for k in tl.range(0, K, BK, warp_specialize=True):" in str(w.message)


@pytest.mark.parametrize("target,options,reason", [
    ("sm_80", {}, "is implemented for sm_90a (TMA loads feeding wgmma); the target is sm_80"),
    ("sm_90a", {"num_stages": 1}, "num_stages=1 turns pipelining off"),
    ("sm_90a", {"num_warps": 2}, "needs num_warps to be a multiple of 4"),
])
def test_a_target_stage_count_or_warp_count_it_cannot_use_is_reported(fresh, target,
                                                                       options, reason):
    w = _declined(lambda: _compile(matmul_tma, TMA, target=target, **options))
    assert reason in str(w.message) and w.lineno == _line_of(matmul_tma, "warp_specialize")


def test_a_loop_inside_another_is_not_split(fresh):
    w = _declined(lambda: _compile(nested_matmul, dict(BM=64, BN=64, BK=64, WS=True)))
    assert "the loop is inside another loop; the partitions are forked at the kernel's top " \
           "level (mark the outer loop" in str(w.message)
    assert w.lineno == _line_of(nested_matmul, "warp_specialize")


def test_a_flattened_persistent_loop_is_reported_once_and_computes_the_same(fresh,
                                                                            monkeypatch):
    # Tutorial 09's tma_persistent marks its tile loop flatten=True and warp_specialize
    # (Triton runs it unspecialized on Hopper): the flattened nest is pipelined as before.
    monkeypatch.setenv("SC_INTERPRET", "1")
    m, n, k = 130, 72, 200
    a, b, want = operands(m, n, k, 3)
    c = np.zeros((m, n), np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flattened_persistent_matmul[(2,)](*descriptors(a, b, c, BLOCK, BLOCK, BLOCK), m, n, k,
                                          BM=BLOCK, BN=BLOCK, BK=BLOCK, NUM_SMS=2)
    found = [w for w in caught if "warp_specialize=True" in str(w.message)]
    assert len(found) == 1
    assert found[0].lineno == _line_of(flattened_persistent_matmul, "for tile_id in tl.range(")
    np.testing.assert_allclose(c, want, **fp32_tolerance(k))


def test_without_the_flag_the_loop_is_pipelined_as_before():
    ir = _compile(matmul_tma, dict(TMA, WARP_SPECIALIZE=False)).asm["ttgir"]
    assert "ttg.warp_specialize" not in ir and "ttg.local_alloc : !ttg.memdesc<3x1xi64" in ir
