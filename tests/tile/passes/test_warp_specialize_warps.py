"""Triton's warp count for `tl.range(warp_specialize=True)` (tile/passes/warp_specialize.py,
the `warp_specialize_warps` pass): a num_warps=4 kernel whose loop the pass takes runs its
wgmma consumer on two warpgroups, each owning half of BLOCK_M, beside the one-warp producer
(8 + 1 warps, 12 launched), as Triton 3.6 does; with 64 rows, or a loop the pass will
decline, the kernel keeps its 4 warps. The IR's layouts, the launch size and the register
split in the PTX, the interpreter's results against numpy, the warning of a loop declined
after the kernel was widened, and the converter's launch line."""

import os
import re
import sys
import warnings

import numpy as np
import pytest

import shared_codegen.interpreter.run as interpreter_run
import tile
import tile.language as tl
from tile.convert import to_gluon

sys.path.insert(0, os.path.dirname(__file__))
from tile_ws_kernels import (descriptors, fp32_tolerance, matmul_tma,  # noqa: E402
                             operands, persistent_matmul, tile_product)
from test_warp_specialize import pointer_matmul  # noqa: E402


def _signature(bm, bn, bk):
    a = np.zeros((512, 512), np.float16)
    ad, bd, cd = descriptors(a, a, a, bm, bn, bk)
    return {"a_desc": ad, "b_desc": bd, "c_desc": cd, "M": "i32", "N": "i32", "K": "i32"}


def _tma(bm):
    return dict(BLOCK_M=bm, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, WARP_SPECIALIZE=True)


def _persistent(bm):
    return dict(BM=bm, BN=128, BK=64, GROUP_M=8, NUM_SMS=132, WS=True)


def _compile(kernel, bm, constexprs, num_warps=4):
    return tile.compile(kernel, _signature(bm, 128, 64), target="sm_90a", num_warps=num_warps,
                        constexprs=constexprs)


def _module_attrs(ir: str) -> str:
    return ir.splitlines()[0]


def _mma_warps(ir: str):
    return re.findall(r"NVMMADistributedLayout\(version=\[3, 0\], warps_per_cta=(\[\d+, \d+\])",
                      ir)


# ---- the IR, the launch and the PTX ----------------------------------------------------------

@pytest.mark.parametrize("kernel,constexprs", [(matmul_tma, _tma(128)),
                                               (persistent_matmul, _persistent(128))])
def test_four_warps_and_128_rows_run_the_consumer_on_two_warpgroups(kernel, constexprs):
    compiled = _compile(kernel, 128, constexprs)
    ir, ptx = compiled.asm["ttgir"], compiled.asm["ptx"]
    assert "num_warps = 8, requested_num_warps = 4" in _module_attrs(ir)
    assert "ttg.warp_specialize " in ir
    # Every layout is made for 8 warps: the accumulator's wgmma layout splits M over them.
    assert _mma_warps(ir) == ["[8, 1]"]
    # 8 consumer warps + the producer warp, padded to a warpgroup: 12 launched (metadata and
    # the launch's block size, kernel.num_warps * 32, read the same count).
    assert compiled.num_warps == 12 and compiled.metadata["num_warps"] == 12
    assert ".maxntid 384" in ptx and ".maxnreg 168" in ptx
    # The producer's warpgroup drops to 24 registers, the two consumer warpgroups take 240
    # (Triton: 232 each beside a producer warpgroup of 40).
    assert re.findall(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+(\d+)", ptx) == ["24"]
    assert re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+(\d+)", ptx) == ["240"]
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert compiled.asm["cubin"]


def test_64_rows_keep_four_warps():
    # One warpgroup already covers 64 rows: two would have 32 each, under wgmma's 64.
    compiled = _compile(matmul_tma, 64, _tma(64))
    ir = compiled.asm["ttgir"]
    assert "num_warps = 4," in _module_attrs(ir) and "requested_num_warps" not in ir
    assert "ttg.warp_specialize " in ir and _mma_warps(ir) == ["[4, 1]"]
    assert compiled.num_warps == 8


def test_eight_warps_stay_eight():
    compiled = _compile(persistent_matmul, 128, _persistent(128), num_warps=8)
    ir = compiled.asm["ttgir"]
    assert "num_warps = 8," in _module_attrs(ir) and "requested_num_warps" not in ir
    assert _mma_warps(ir) == ["[8, 1]"] and compiled.num_warps == 12


def test_without_the_flag_four_warps_stay_four():
    compiled = _compile(matmul_tma, 128, dict(_tma(128), WARP_SPECIALIZE=False))
    assert "num_warps = 4," in _module_attrs(compiled.asm["ttgir"])
    assert compiled.num_warps == 4


# ---- the interpreter against numpy -----------------------------------------------------------

@pytest.fixture
def interpreted(monkeypatch):
    """The modules the interpreter runs (its launches), recorded."""
    monkeypatch.setenv("SC_INTERPRET", "1")
    modules = []
    run_kernel = interpreter_run.run_kernel

    def recording(module, *args, **kwargs):
        modules.append(module)
        return run_kernel(module, *args, **kwargs)

    monkeypatch.setattr(interpreter_run, "run_kernel", recording)
    return modules


def _ran_on_eight_warps(modules) -> None:
    (module,) = modules
    assert module.attrs["num_warps"] == 8 and module.attrs["requested_num_warps"] == 4
    assert any(op.name == "ttg.warp_specialize" for op in module.kernel.walk())


@pytest.mark.parametrize("seed", ["0", "1", "2"])
def test_the_two_warpgroup_consumer_matches_numpy(monkeypatch, interpreted, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    m, n, k = 200, 136, 200  # ragged: TMA pads the loads and clips the store
    a, b, want = operands(m, n, k, 30 + int(seed))
    c = np.zeros((m, n), np.float32)
    grid = (-(-m // 128) * -(-n // 128),)
    matmul_tma[grid](*descriptors(a, b, c, 128, 128, 64), m, n, k, **_tma(128), num_warps=4,
                     num_stages=3)
    np.testing.assert_allclose(c, want, **fp32_tolerance(k))
    _ran_on_eight_warps(interpreted)


@pytest.mark.parametrize("seed", ["0", "1", "2"])
def test_the_persistent_two_warpgroup_consumer_matches_numpy(monkeypatch, interpreted, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    m, n, k = 260, 136, 136
    a, b, want = operands(m, n, k, 40 + int(seed))
    c = np.zeros((m, n), np.float32)
    persistent_matmul[(2,)](*descriptors(a, b, c, 128, 128, 64), m, n, k,
                            **dict(_persistent(128), GROUP_M=2, NUM_SMS=2), num_warps=4,
                            num_stages=2)
    np.testing.assert_allclose(c, want, **fp32_tolerance(k))
    _ran_on_eight_warps(interpreted)


# ---- declined loops --------------------------------------------------------------------------

@tile.jit
def carried_tile_matmul(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, NUM_SMS: tl.constexpr):
    tiles_n = tl.cdiv(N, BN)
    tile_c = tl.program_id(0) - NUM_SMS
    for tile_id in tl.range(tl.program_id(0), tl.cdiv(M, BM) * tiles_n, NUM_SMS,
                            warp_specialize=True):
        # The loads' tile comes from a counter the tile loop carries: the producer cannot
        # recompute it, which only the pass (after layout assignment) finds out.
        tile_c += NUM_SMS
        acc = tile_product(a_desc, b_desc, tile_c // tiles_n, tile_c % tiles_n, K, BM, BN, BK)
        c_desc.store([tile_c // tiles_n * BM, tile_c % tiles_n * BN], acc.to(c_desc.dtype))


def _warning(compile_it):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = compile_it()
    found = [str(w.message) for w in caught if "warp_specialize=True" in str(w.message)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert "ttg.warp_specialize" not in kernel.asm["ttgir"]
    return kernel, found[0]


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")


def test_a_loop_declined_before_layouts_keeps_four_warps(fresh):
    # Pointer loads: the warp-count decision sees the pass will decline them.
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "K": "i32"}
    kernel, text = _warning(lambda: tile.compile(pointer_matmul, sig, target="sm_90a",
                                                 constexprs=dict(BM=128, BN=128, BK=64)))
    assert "its tl.dot operands come from pointer loads" in text and "8 warps" not in text
    assert "num_warps = 4," in _module_attrs(kernel.asm["ttgir"]) and kernel.num_warps == 4


@tile.jit
def attention_loop(q_desc, k_desc, v_desc, o_ptr, N, BM: tl.constexpr, BN: tl.constexpr,
                   D: tl.constexpr):
    q = q_desc.load([tl.program_id(0) * BM, 0])
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for start in tl.range(0, N, BN, warp_specialize=True):
        s = tl.dot(q, k_desc.load([start, 0]).T)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(tl.float16), v_desc.load([start, 0]), acc * alpha[:, None])
        m_i = m_new
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, D)
    tl.store(o_ptr + rows[:, None] * D + cols[None, :], acc / l_i[:, None])


def test_an_attention_loop_keeps_four_warps(fresh):
    # Its P V wgmma reads what S = Q K^T computed and stays in flight across iterations,
    # which the pass declines: the warp-count decision sees the chain and does not widen.
    x = np.zeros((512, 64), np.float16)
    q_desc, kv_desc, _ = descriptors(x, x, x, 128, 64, 64)
    sig = {"q_desc": q_desc, "k_desc": kv_desc, "v_desc": kv_desc, "o_ptr": "*fp32",
           "N": "i32"}
    kernel, text = _warning(lambda: tile.compile(attention_loop, sig, target="sm_90a",
                                                 constexprs=dict(BM=128, BN=64, D=64)))
    assert "its last tl.dot stays in flight across iterations" in text
    assert "8 warps" not in text
    assert "num_warps = 4," in _module_attrs(kernel.asm["ttgir"]) and kernel.num_warps == 4


def test_a_loop_declined_after_the_kernel_was_widened_says_so(fresh, monkeypatch):
    consts = dict(BM=128, BN=128, BK=64, NUM_SMS=2)
    kernel, text = _warning(lambda: _compile(carried_tile_matmul, 128, consts))
    assert "the load coordinates depend on `tile_c`" in text
    assert ("the loop is software-pipelined as without it, on 8 warps: the kernel launched "
            "with num_warps=4 was given two consumer warpgroups before layout assignment"
            in text)
    assert kernel.num_warps == 8 and _mma_warps(kernel.asm["ttgir"]) == ["[8, 1]"]
    # It still computes the product (unspecialized, on 8 warps).
    monkeypatch.setenv("SC_INTERPRET", "1")
    m, n, k = 256, 136, 136
    a, b, want = operands(m, n, k, 5)
    c = np.zeros((m, n), np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        carried_tile_matmul[(2,)](*descriptors(a, b, c, 128, 128, 64), m, n, k, **consts)
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=2e-3, atol=4e-2)


# ---- the converter ---------------------------------------------------------------------------

def test_the_converted_kernel_is_launched_with_eight_warps(load_source, monkeypatch):
    m, n, k = 256, 136, 200
    a, b, want = operands(m, n, k, seed=9)
    c = np.zeros((m, n), np.float16)
    consts = dict(_tma(128), GROUP_M=2)
    text = to_gluon(matmul_tma, *descriptors(a, b, c, 128, 128, 64), m, n, k, **consts)
    assert "Launch with num_warps=8 (the tile kernel's num_warps=4: " \
           "tl.range(warp_specialize=True) runs its wgmma consumer" in text
    assert "warps_per_cta=[8, 1]" in text
    converted = load_source("converted_ws_two_warpgroups", text)
    monkeypatch.setenv("SC_INTERPRET", "1")
    grid = (2 * 2,)
    matmul_tma[grid](*descriptors(a, b, c, 128, 128, 64), m, n, k, **consts)
    got = np.zeros((m, n), np.float16)
    converted.matmul_tma[grid](*descriptors(a, b, got, 128, 128, 64), m, n, k, num_warps=8)
    np.testing.assert_array_equal(got, c)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=4e-2)
