"""tile/passes/loop_flatten.py: `tl.range(flatten=True)` turns a persistent matmul's tile loop
and K loop into one loop of n_tiles * k_tiles steps, the prologue and the epilogue under
`scf.if`s, behind `if k_tiles <= 0`; the pipeliner then rings the loads across tile
boundaries (cp.async on sm_80, cp.async or TMA with async wgmma on sm_90a). The interpreter
computes what numpy computes, and what the nest computes unflattened, bit for bit; nests
Triton leaves alone are left alone with a warning that says why; the kernel compiles for
sm_90a and sm_80 and converts to Gluon that runs."""

import re
import warnings

import numpy as np
import pytest

import tile as triton
import tile.language as tl
from shared_codegen.frontend.compile import explicit_layout_module, trace
from shared_codegen.frontend.launch import specialization_for_signature
from shared_codegen.ir.passes import run_pipeline
from shared_codegen.ir.printer import print_module
from shared_codegen.ops.control.definition import ForOp, IfOp
from shared_codegen.ops.memory.definition import LoadOp, StoreOp
from shared_codegen.ops.wgmma.definition import WarpGroupDotOp
from tile.passes import TILE_PIPELINE
from tile.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP
    group_size_m = min(num_pid_m - first_pid_m, GROUP)
    return first_pid_m + (tile_id % group_size_m), (tile_id % num_pid_in_group) // group_size_m


@triton.jit
def persistent_mm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
                  NUM_PROGS: tl.constexpr, ACC: tl.constexpr, FLATTEN: tl.constexpr,
                  STAGES: tl.constexpr = None):
    """Triton's tutorial 09 persistent matmul: the epilogue finds its tile with a counter of
    its own (`tile_id_c`), the K loop recomputes its offsets from `ki`."""
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    tile_id_c = start_pid - NUM_PROGS
    offs_k_for_mask = tl.arange(0, BK)
    num_pid_in_group = GROUP * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_PROGS, flatten=FLATTEN,
                            num_stages=STAGES):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP)
        offs_am = pid_m * BM + tl.arange(0, BM)
        offs_bn = pid_n * BN + tl.arange(0, BN)
        offs_am = tl.where(offs_am < M, offs_am, 0)
        offs_bn = tl.where(offs_bn < N, offs_bn, 0)
        offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BM), BM)
        offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BN), BN)
        accumulator = tl.zeros((BM, BN), dtype=ACC)
        for ki in range(k_tiles):
            offs_k = ki * BK + tl.arange(0, BK)
            a = tl.load(a_ptr + offs_am[:, None] * stride_am + offs_k[None, :],
                        mask=offs_k_for_mask[None, :] < K - ki * BK, other=0.0)
            b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :],
                        mask=offs_k_for_mask[:, None] < K - ki * BK, other=0.0)
            accumulator = tl.dot(a, b, accumulator, out_dtype=ACC)
        tile_id_c += NUM_PROGS
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_in_group, num_pid_m, GROUP)
        offs_cm = pid_m * BM + tl.arange(0, BM)
        offs_cn = pid_n * BN + tl.arange(0, BN)
        tl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :],
                 accumulator.to(tl.float16), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def persistent_mm_shared(a_ptr, b_ptr, c_ptr, tiles_ptr, M, N, K, stride_am, stride_bk,
                         stride_cm, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                         FLATTEN: tl.constexpr):
    """The epilogue reads the tile's rows and columns the prologue computed; A advances by
    pointer increments from a base the prologue computes; the program count is a runtime
    value; the outer loop carries a count of the tiles done, stored after it."""
    num_pid_n = tl.cdiv(N, BN)
    done = 0
    for tile_id in tl.range(tl.program_id(0), tl.cdiv(M, BM) * num_pid_n, tl.num_programs(0),
                            flatten=FLATTEN):
        rm = (tile_id // num_pid_n) * BM + tl.arange(0, BM)
        rn = (tile_id % num_pid_n) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a_ptrs = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :]
        rn_b = tl.max_contiguous(tl.multiple_of(rn % N, BN), BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
            b = tl.load(b_ptr + (k * BK + rk)[:, None] * stride_bk + rn_b[None, :],
                        mask=rk[:, None] < K - k * BK, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))
        done += 1
    tl.store(tiles_ptr + tl.program_id(0), done)


SIG = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32", "N": "i32",
       "K": "i32:16", "stride_am": "i32:16", "stride_bk": "i32:16", "stride_cm": "i32:16"}


def _consts(bm=64, bn=64, bk=32, progs=3, acc=tl.float32, flatten=True):
    return dict(BM=bm, BN=bn, BK=bk, GROUP=4, NUM_PROGS=progs, ACC=acc, FLATTEN=flatten)


def _module(kernel=persistent_mm, sig=SIG, consts=None, target="sm_90a", num_stages=3,
            upto=None):
    """The IR after the tile passes (or after the pass `upto`)."""
    spec = specialization_for_signature(kernel, sig, consts or _consts(), 4, target,
                                        num_stages)
    if upto is None:
        return explicit_layout_module(kernel, spec)
    names = [name for name, _ in TILE_PIPELINE]
    return run_pipeline(trace(kernel, spec), TILE_PIPELINE[:names.index(upto) + 1])


def _flattened_loop(module):
    loops = [op for op in module.walk() if isinstance(op.opdef, ForOp)
             and op.regions[0].block.args[0].name_hint == "step"]
    assert len(loops) == 1
    return loops[0]


def _top(loop, cls):
    return [op for op in loop.regions[0].block.ops if isinstance(op.opdef, cls)]


# ---- the IR ------------------------------------------------------------------------------------

def test_the_nest_becomes_one_loop_with_the_prologue_and_epilogue_under_ifs():
    module = _module(upto="loop_flatten")
    loop = _flattened_loop(module)
    # No loop nests any more: the flattened loop, and the nest without its K loop in the
    # branch taken when K has no step at all (`if k_tiles <= 0`).
    guard = loop.parent.parent.parent
    assert isinstance(guard.opdef, IfOp) and loop.parent is guard.regions[1].block
    (skip,) = [op for op in guard.regions[0].block.ops if isinstance(op.opdef, ForOp)]
    assert not any(isinstance(op.opdef, (ForOp, WarpGroupDotOp)) for op in skip.walk()
                   if op is not skip)
    assert all(not isinstance(op.opdef, ForOp) for top in loop.regions[0].block.ops
               for op in top.walk())
    text = print_module(module)
    # The trip count: tiles of this program (ceil((num_tiles - start_pid) / 3)) * k_tiles.
    k_steps = re.search(r"%(\w+) = arith\.subi %k_tiles, %\w+ : i32\n.*\n"
                        r"  %\w+ = arith\.cmpi %\1, %\w+ \{predicate = sle\} : i1\n"
                        r"  %\w+ = scf\.if", text).group(1)
    total = re.search(r"%(\w+) = arith\.subi %num_tiles, %start_pid : i32\n"
                      r"    %(\w+) = arith\.constant \{value = 2\} : i32\n"
                      r"    %(\w+) = arith\.addi %\1, %\2 : i32\n"
                      r"    %(\w+) = arith\.divsi %\3, %\w+ : i32\n"
                      rf"    %(\w+) = arith\.muli %\4, %{k_steps} : i32\n", text).group(5)
    # Carried: the position in the tile (from -1), the tile (from start_pid - 3), the
    # epilogue's tile counter, the K step, the accumulator (from zeros), the offsets.
    assert re.search(rf"= scf\.for %\w+, %{total}, %\w+, %\w+, %\w+, %tile_id_c, %\w+, "
                     rf"%accumulator, %\w+, %\w+ :", text)
    # The prologue runs at the first K step of a tile, the epilogue at the last; the loads
    # and the dot run every step, unpredicated.
    prologue, epilogue = _top(loop, IfOp)
    assert [op for op in loop.regions[0].block.ops if isinstance(op.opdef, LoadOp)]
    assert len(_top(loop, WarpGroupDotOp)) == 1
    assert "arith.addi %tile_id_1, %" in text and "tile_id_2, %ki_1, %offs_am" in text
    assert any(isinstance(op.opdef, StoreOp) for op in epilogue.walk())
    then_yield, else_yield = (r.block.ops[-1] for r in epilogue.regions)
    # The accumulator restarts from the zeros after the store; the tile counter advances.
    assert then_yield.operands[1].owner.attrs["value"] == 0.0
    assert else_yield.operands[1].owner is _top(loop, WarpGroupDotOp)[0]
    assert [r.name_hint for r in epilogue.results] == ["tile_id_c", "accumulator"]


def test_a_known_k_step_count_needs_no_guard():
    consts = dict(_consts(), BK=32)
    sig = dict(SIG)
    del sig["K"]

    @triton.jit
    def fixed_k(a_ptr, b_ptr, c_ptr, M, N, stride_am, stride_bk, stride_cm, K: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
                NUM_PROGS: tl.constexpr, ACC: tl.constexpr, FLATTEN: tl.constexpr):
        persistent_mm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, BM, BN,
                      BK, GROUP, NUM_PROGS, ACC, FLATTEN)

    text = print_module(_module(fixed_k, sig, dict(consts, K=96), upto="loop_flatten"))
    assert "predicate = sle" not in text and text.count("scf.for") == 1
    assert re.search(r"%(\w+) = arith\.constant \{value = 3\} : i32\n(.*\n)*?.*"
                     r"arith\.muli %\w+, %\1 : i32", text)  # 3 K steps per tile


@pytest.mark.parametrize("num_stages", [2, 3, 4])
def test_the_pipeliner_rings_the_loads_across_tiles_with_an_async_wgmma(num_stages):
    module = _module(num_stages=num_stages)
    text = print_module(module)
    loop = _flattened_loop(module)
    body = text[text.index("^bb(%step"):]
    for tile in ("64x32", "32x64"):
        assert f"ttg.local_alloc : !ttg.memdesc<{num_stages}x{tile}xfp16, NVMMASharedLayout(" \
            in text
    # S-1 steps issued before the loop, one ahead in it, each filling a slot for A and B.
    assert text.count("ttg.async_copy_global_to_local") == 2 * num_stages
    assert f"ttg.async_wait {{num = {num_stages - 2}}}" in body
    assert re.search(r"ttng\.warp_group_dot .*\{is_async = True\}.*\n.*"
                     r"ttng\.warp_group_dot_wait %accumulator_\d+, .*\{pendings = 1\}", body)
    # The epilogue waits for the last wgmma of its tile before it reads the accumulator.
    _, epilogue = _top(loop, IfOp)
    ops = epilogue.regions[0].block.ops
    (wait,) = [op for op in ops if op.name == "ttng.warp_group_dot_wait"]
    in_flight = wait.operands[0]
    assert wait.attrs["pendings"] == 0 and in_flight.owner.attrs["pendings"] == 1
    assert all(in_flight not in op.operands for op in ops[ops.index(wait) + 1:])
    assert epilogue.regions[1].block.ops[-1].operands[1] is in_flight  # handed on in flight
    # The epilogue's test reads the step's position in its tile from S-1 iter_args behind
    # the one the prologue of S-1 steps ahead advances.
    args = [a.name_hint for a in loop.regions[0].block.args]
    assert args[args.index("write_slot") + 1:] == ["pos"] * (num_stages - 1)


def test_the_nest_s_num_stages_goes_to_the_flattened_loop():
    text = print_module(_module(consts=dict(_consts(), STAGES=2), num_stages=4))
    assert "!ttg.memdesc<2x64x32xfp16" in text and "ttg.async_wait {num = 0}" in text


def test_sm_80_rings_feed_mma_v2():
    text = print_module(_module(target="sm_80"))
    assert "ttg.local_alloc : !ttg.memdesc<3x64x32xfp16, SwizzledSharedLayout(" in text
    assert "ttg.async_wait {num = 1}" in text and "ttg.mma_v2" in text
    assert text.count("ttg.async_copy_global_to_local") == 6


# ---- numerics ----------------------------------------------------------------------------------

def _inputs(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float16),
            rng.standard_normal((k, n)).astype(np.float16))


def _run(a, b, progs=3, num_stages=3, flatten=True, acc=tl.float32, bk=32):
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((m, n), np.float16)
    persistent_mm[(progs,)](a, b, c, m, n, k, k, n, n, num_stages=num_stages,
                            **_consts(bk=bk, progs=progs, acc=acc, flatten=flatten))
    return c


def _reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
def test_persistent_matmul_matches_numpy(target, num_stages, monkeypatch):
    monkeypatch.setenv("SC_TARGET", target)
    # Partial tiles in M and N, a partial last K step, 16 tiles over 3 programs.
    a, b = _inputs(200, 200, 208)
    c = _run(a, b, num_stages=num_stages)
    np.testing.assert_allclose(c.astype(np.float64), _reference(a, b), rtol=2e-3, atol=2e-2)
    np.testing.assert_array_equal(c, _run(a, b, num_stages=num_stages, flatten=False))


@pytest.mark.parametrize("shape,progs", [
    ((200, 136, 16), 3),   # one K step per tile
    ((200, 136, 200), 5),  # K not a multiple of 16: the loads stay loads (not pipelined)
    ((64, 64, 96), 3),     # one tile: two programs get none
    ((130, 70, 96), 4),    # three tiles of 64 x 64 over four programs
])
def test_persistent_matmul_shapes(shape, progs, monkeypatch):
    monkeypatch.setenv("SC_TARGET", "sm_90a")
    a, b = _inputs(*shape, seed=1)
    c = _run(a, b, progs=progs)
    np.testing.assert_allclose(c.astype(np.float64), _reference(a, b), rtol=2e-3, atol=2e-2)
    np.testing.assert_array_equal(c, _run(a, b, progs=progs, flatten=False))


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_fp16_accumulation(target, monkeypatch):
    monkeypatch.setenv("SC_TARGET", target)
    a, b = _inputs(200, 136, 208, seed=2)
    c = _run(a, b, acc=tl.float16)
    np.testing.assert_array_equal(c, _run(a, b, acc=tl.float16, flatten=False))
    np.testing.assert_allclose(c.astype(np.float64), _reference(a, b), rtol=2e-2, atol=0.2)


def test_no_k_step_stores_zeros(monkeypatch):
    monkeypatch.setenv("SC_TARGET", "sm_90a")
    a, b = _inputs(130, 70, 0)
    c = np.full((130, 70), np.nan, np.float16)
    persistent_mm[(3,)](a, b, c, 130, 70, 0, 0, 70, 70, **_consts())
    np.testing.assert_array_equal(c, np.zeros_like(c))


@pytest.mark.parametrize("target,num_stages", [("sm_90a", 2), ("sm_90a", 4), ("sm_80", 3)])
def test_values_carried_by_both_loops_and_read_by_both_ends(target, num_stages, monkeypatch):
    monkeypatch.setenv("SC_TARGET", target)
    m, n, k = 200, 136, 208
    a, b = _inputs(m, n, k, seed=3)
    results = []
    for flatten in (True, False):
        c = np.zeros((m, n), np.float16)
        tiles = np.zeros(5, np.int32)
        persistent_mm_shared[(5,)](a, b, c, tiles, m, n, k, k, n, n, BM=64, BN=64, BK=32,
                                   FLATTEN=flatten, num_stages=num_stages)
        results.append(c)
        np.testing.assert_array_equal(tiles, [len(range(p, 12, 5)) for p in range(5)])
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0].astype(np.float64), _reference(a, b), rtol=2e-3,
                               atol=2e-2)


def test_values_the_epilogue_reads_from_the_prologue_ride_behind_the_ring():
    sig = dict(SIG, tiles_ptr="*i32:16")
    module = _module(persistent_mm_shared, sig, dict(BM=64, BN=64, BK=32, FLATTEN=True))
    loop = _flattened_loop(module)
    text = print_module(module)
    assert text.count("ttg.async_copy_global_to_local") == 6  # A by pointer increments
    args = [a.name_hint for a in loop.regions[0].block.args]
    # The step's position, the tile's first row (`(tile_id // num_pid_n) * BM`, unnamed) and
    # its columns, each in two iter_args: one and two steps behind the prologue (S = 3).
    assert args[args.index("write_slot") + 1:] == ["pos", "pos", "", "", "rn", "rn"]


# ---- nests left as they are --------------------------------------------------------------------

@triton.jit
def prefix_sums(x_ptr, out_ptr, ROWS, BLOCK: tl.constexpr):
    """out[r] = x[0] + ... + x[r-1]: the inner loop runs r times, none for the first row."""
    for r in tl.range(0, ROWS, flatten=True):
        acc = tl.zeros((BLOCK,), tl.float32)
        for j in range(0, r):
            acc += tl.load(x_ptr + j * BLOCK + tl.arange(0, BLOCK))
        tl.store(out_ptr + r * BLOCK + tl.arange(0, BLOCK), acc)


@triton.jit
def row_sums(x_ptr, out_ptr, ROWS, COLS, BLOCK: tl.constexpr, SHAPE: tl.constexpr):
    """out[r] = sum(x[r, :]) in BLOCK-wide steps; SHAPE picks a nest flattening declines."""
    base = tl.program_id(0) * COLS
    for r in tl.range(tl.program_id(0), ROWS, tl.num_programs(0), flatten=True):
        acc = tl.zeros((BLOCK,), tl.float32)
        if SHAPE == "two loops":
            for c in range(0, tl.cdiv(COLS, 2 * BLOCK)):
                offs = c * BLOCK + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + r * COLS + offs, mask=offs < COLS, other=0.0)
            for c in range(tl.cdiv(COLS, 2 * BLOCK), tl.cdiv(COLS, BLOCK)):
                offs = c * BLOCK + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + r * COLS + offs, mask=offs < COLS, other=0.0)
        elif SHAPE == "loop under an if":
            if COLS > 0:
                for c in range(0, tl.cdiv(COLS, BLOCK)):
                    offs = c * BLOCK + tl.arange(0, BLOCK)
                    acc += tl.load(x_ptr + r * COLS + offs, mask=offs < COLS, other=0.0)
        elif SHAPE == "three levels":
            for c in range(0, tl.cdiv(COLS, BLOCK)):
                for half in range(0, 2):
                    offs = c * BLOCK + half * (BLOCK // 2) + tl.arange(0, BLOCK // 2)
                    part = tl.load(x_ptr + r * COLS + offs, mask=offs < COLS, other=0.0)
                    acc += tl.reshape(tl.join(part, tl.zeros_like(part)), (BLOCK,))
        elif SHAPE == "running base":  # the outer loop carries the row's start
            for c in range(0, tl.cdiv(COLS, BLOCK)):
                offs = c * BLOCK + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + base + offs, mask=offs < COLS, other=0.0)
            base += COLS * tl.num_programs(0)
        else:
            for c in range(0, tl.cdiv(COLS, BLOCK)):
                offs = c * BLOCK + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + r * COLS + offs, mask=offs < COLS, other=0.0)
        tl.store(out_ptr + r, tl.sum(acc))


ROW_SIG = {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "ROWS": "i32", "COLS": "i32"}


@pytest.mark.parametrize("shape,reason", [
    ("two loops", r"its body holds 2 `for` loops; flattening needs exactly one inner loop"),
    ("loop under an if", r"its body has no `for` loop of its own \(a loop inside an `if` "
                         r"does not count\)"),
    ("three levels", r"the inner loop holds a `for` loop of its own; flattening takes two "
                     r"levels of loops"),
])
def test_declined_nests_say_why_and_run_as_written(shape, reason, monkeypatch):
    with pytest.warns(UserWarning, match=r"tl\.range\(flatten=True\) leaves this loop nest as "
                                         r"it is: " + reason):
        module = _module(row_sums, ROW_SIG, dict(BLOCK=32, SHAPE=shape))
    assert sum(isinstance(op.opdef, ForOp) for op in module.walk()) >= 2
    monkeypatch.setenv("SC_TARGET", "sm_90a")
    x = np.random.default_rng(4).standard_normal((5, 100)).astype(np.float32)
    out = np.zeros(5, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        row_sums[(2,)](x, out, 5, 100, BLOCK=32, SHAPE=shape)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_an_inner_range_that_follows_the_outer_loop_is_declined(monkeypatch):
    sig = {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16", "ROWS": "i32"}
    with pytest.warns(UserWarning, match=r"the inner loop's bounds are computed from values "
                                         r"that change with the outer loop's iteration"):
        _module(prefix_sums, sig, dict(BLOCK=16))
    monkeypatch.setenv("SC_TARGET", "sm_90a")
    x = np.random.default_rng(5).standard_normal((6, 16)).astype(np.float32)
    out = np.full((6, 16), np.nan, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        prefix_sums[(1,)](x, out, 6, BLOCK=16)
    want = np.concatenate([np.zeros((1, 16)), np.cumsum(x, axis=0)[:-1]])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", ["one loop", "running base"])
@pytest.mark.parametrize("cols", [100, 0])
def test_a_flattened_nest_without_a_dot(shape, cols, monkeypatch):
    """Any nest of the right shape is flattened, also where the inner loop reads what the
    outer loop carries; with no column at all, the branch without the inner loop stores the
    zero sums."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        module = _module(row_sums, ROW_SIG, dict(BLOCK=32, SHAPE=shape))
    assert len([op for op in module.walk() if isinstance(op.opdef, ForOp)]) == 2  # + guard's
    monkeypatch.setenv("SC_TARGET", "sm_90a")
    x = np.random.default_rng(6).standard_normal((7, cols)).astype(np.float32)
    out = np.full(7, np.nan, np.float32)
    row_sums[(3,)](x, out, 7, cols, BLOCK=32, SHAPE=shape)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)


# ---- TMA, PTX and the converter -----------------------------------------------------------------

@triton.jit
def persistent_tma_mm(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr, NUM_PROGS: tl.constexpr):
    """Tutorial 09's TMA persistent matmul (B stored [N, K])."""
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_pid_n
    tile_id_c = tl.program_id(0) - NUM_PROGS
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_PROGS, flatten=True):
        offs_am = (tile_id // num_pid_n) * BM
        offs_bn = (tile_id % num_pid_n) * BN
        accumulator = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BK)):
            a = a_desc.load([offs_am, ki * BK])
            b = b_desc.load([offs_bn, ki * BK])
            accumulator = tl.dot(a, b.T, accumulator)
        tile_id_c += NUM_PROGS
        c_desc.store([(tile_id_c // num_pid_n) * BM, (tile_id_c % num_pid_n) * BN],
                     accumulator.to(tl.float16))


def _tma_descs(a, b, c, bm, bn, bk):
    return (TensorDescriptor(a, list(a.shape), [a.shape[1], 1], [bm, bk]),
            TensorDescriptor(b, list(b.shape), [b.shape[1], 1], [bn, bk]),
            TensorDescriptor(c, list(c.shape), [c.shape[1], 1], [bm, bn]))


@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
def test_tma_persistent_matmul(num_stages, monkeypatch):
    monkeypatch.setenv("SC_TARGET", "sm_90a")
    m, n, k = 200, 136, 208
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    persistent_tma_mm[(3,)](*_tma_descs(a, b, c, 64, 64, 32), m, n, k, BM=64, BN=64, BK=32,
                            NUM_PROGS=3, num_stages=num_stages)
    np.testing.assert_allclose(c.astype(np.float64), a.astype(np.float64) @ b.T, rtol=2e-3,
                               atol=2e-2)
    if num_stages > 1:
        sig = dict(zip(("a_desc", "b_desc", "c_desc"), _tma_descs(a, b, c, 64, 64, 32)),
                   M="i32", N="i32", K="i32")
        text = print_module(_module(persistent_tma_mm, sig, dict(BM=64, BN=64, BK=32,
                                                                   NUM_PROGS=3),
                                    num_stages=num_stages))
        assert text.count("ttng.async_tma_copy_global_to_local") == 2 * num_stages
        assert f"!ttg.memdesc<{num_stages}x1xi64, MBarrierLayout()>" in text
        assert "{pendings = 1}" in text


@pytest.mark.parametrize("target,num_stages", [("sm_90a", 2), ("sm_90a", 4), ("sm_80", 3)])
def test_ptx_and_cubin(target, num_stages):
    kern = triton.compile(persistent_mm, signature=SIG, target=target, num_stages=num_stages,
                          constexprs=_consts(bm=128, bn=128, bk=64, progs=132))
    ptx = kern.asm["ptx"]
    assert kern.asm["cubin"][:4] == b"\x7fELF"
    assert kern.metadata["performance_losses"] == []  # nvJitLink's ptxas: no note
    assert ptx.count("cp.async.commit_group;") == num_stages
    assert f"cp.async.wait_group {num_stages - 2};" in ptx
    if target == "sm_90a":
        assert "wgmma.wait_group.sync.aligned 1;" in ptx
        assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    else:
        assert "mma.sync.aligned.m16n8k16" in ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_the_converter_prints_the_flattened_kernel_as_gluon_that_runs(target, load_source,
                                                                      monkeypatch):
    from tile.convert import to_gluon_for_signature

    text = to_gluon_for_signature(persistent_mm, SIG, _consts(), target=target)
    assert "for step in range(0, " in text and "async_copy.async_copy_global_to_shared(" in text
    converted = load_source(f"converted_persistent_mm_{target}", text)
    monkeypatch.setenv("SC_TARGET", target)
    m, n, k = 200, 200, 208
    a, b = _inputs(m, n, k, seed=8)
    want = _run(a, b)
    got = np.zeros((m, n), np.float16)
    converted.persistent_mm[(3,)](a, b, got, m, n, k, k, n, n)
    np.testing.assert_array_equal(got, want)
