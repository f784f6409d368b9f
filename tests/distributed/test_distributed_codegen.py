"""`tl.distributed` / `gl.distributed` code generation: the PTX memory-model qualifiers
(sm_90a and sm_80), the IR of the token, and the same builtins in Gluon with layouts."""

import os
import re
import sys

import numpy as np
import pytest

import gluon
import tile
import tile.language as tl
from gluon import language as gl
from tile.distributed import SimulatedWorld
from tile.language import distributed as dl

sys.path.insert(0, os.path.dirname(__file__))

SIG = {"x_ptr": "*fp32:16", "heap_bases": "*i64", "pad_bases": "*i64", "sig_ptr": "*i32",
       "rank": "i32", "world_size": "i32"}


@tile.jit
def every_primitive(x_ptr, heap_bases, pad_bases, sig_ptr, rank, world_size,
                    N: tl.constexpr):
    offs = tl.arange(0, N)
    peer = (rank + 1) % world_size
    dl.put(x_ptr + offs, x_ptr + N + offs, rank, peer, heap_bases)
    dl.notify(sig_ptr, peer, rank, pad_bases)
    dl.notify(sig_ptr + 1, peer, rank, pad_bases, sig_op="add", sem="relaxed", scope="gpu")
    token = dl.wait(sig_ptr, 1, cmp="ge")
    v = tl.load(dl.consume_token(x_ptr, token) + N + offs)
    flag = dl.load(sig_ptr + 2, rank, peer, pad_bases, sem="acquire", scope="sys")
    dl.store(sig_ptr + 3, flag, rank, peer, pad_bases, sem="release", scope="sys")
    dl.store(sig_ptr + 4, flag, rank, peer, pad_bases, sem="relaxed", scope="cta")
    dl.atomic_add(sig_ptr + 5, 1, rank, peer, pad_bases, sem="acq_rel", scope="sys")
    dl.atomic_cas(sig_ptr + 6, 0, 1, rank, peer, pad_bases, sem="acquire", scope="gpu")
    dl.fence()
    dl.fence(sem="sc", scope="gpu")
    tl.store(x_ptr + 2 * N + offs, v)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_ptx_carries_the_memory_model_qualifiers(target):
    kernel = tile.compile(every_primitive, signature=SIG, constexprs={"N": 128}, target=target)
    ptx = kernel.asm["ptx"]
    for instr in ("st.release.sys.global.b32", "red.relaxed.gpu.global.add.u32",
                  "ld.acquire.sys.global.b32", "st.relaxed.cta.global.b32",
                  "atom.acq_rel.sys.global.add.u32", "atom.acquire.gpu.global.cas.b32",
                  "fence.acq_rel.sys;", "fence.sc.gpu;", "bar.sync"):
        assert instr in ptx, instr
    assert "multimem" not in ptx
    # The wait is a loop around its acquire load; the signal is released by one thread
    # after a CTA barrier.
    assert re.search(r"ld\.acquire\.sys\.global\.b32[^\n]*\n(?:[^\n]*\n){0,4}[^\n]*bra",
                     ptx)
    signal = ptx.index("st.release.sys.global.b32")
    assert "bar.sync" in ptx[:signal]
    assert kernel.asm["cubin"]


def test_the_token_orders_the_load_after_the_wait_in_the_ir():
    kernel = tile.compile(every_primitive, signature=SIG, constexprs={"N": 128},
                          target="sm_90a")
    ir = kernel.asm["ttgir"] if "ttgir" in kernel.asm else kernel.asm["ir"]
    wait = re.search(r"(%\w+) = dist\.wait", ir)
    assert wait, ir
    consumed = re.search(r"(%\w+) = dist\.consume_token %\w+, " + re.escape(wait.group(1)), ir)
    assert consumed, ir
    assert ir.index(wait.group(0)) < ir.index(consumed.group(0))


LAYOUT = gl.BlockedLayout([1], [32], [4], [0])


@gluon.jit
def gluon_ring(x_ptr, y_ptr, heap_bases, pad_bases, sig_ptr, rank, world_size,
               N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    peer = (rank + 1) % world_size
    gl.distributed.put(x_ptr + offs, y_ptr + offs, rank, peer, heap_bases)
    gl.distributed.notify(sig_ptr, peer, rank, pad_bases)
    token = gl.distributed.wait(sig_ptr)
    y = gl.load(gl.distributed.consume_token(y_ptr, token) + offs)
    gl.store(x_ptr + offs, y + 1.0)


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_gluon_uses_the_same_builtins_with_layouts(world_size):
    world = SimulatedWorld(world_size, heap_bytes=1 << 12)
    x = world.empty("x", (128,), np.float32)
    y = world.empty("y", (128,), np.float32)
    for r in range(world_size):
        x[r][:] = r
    world.launch(gluon_ring, (1,), lambda c: (x[c.rank], y[c.rank], c.heap_bases,
                                              c.signal_pad_bases, c.signal_pad, c.rank,
                                              c.world_size), N=128, layout=LAYOUT)
    for r in range(world_size):
        np.testing.assert_array_equal(x[r], np.full(128, (r - 1) % world_size + 1.0))
    kernel = gluon.compile(gluon_ring, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16",
                                        "heap_bases": "*i64", "pad_bases": "*i64",
                                        "sig_ptr": "*i32", "rank": "i32",
                                        "world_size": "i32"},
                           {"N": 128, "layout": LAYOUT}, target="sm_90a")
    ptx = kernel.asm["ptx"]
    assert "ld.acquire.sys.global.b32" in ptx and "st.release.sys.global.b32" in ptx


def test_peer_tiles_move_in_16_byte_vectors():
    # The heap bases are 16-byte aligned, so a translated pointer keeps that divisibility.
    kernel = tile.compile(every_primitive, signature=SIG, constexprs={"N": 1024},
                          target="sm_90a")
    assert len(re.findall(r"st\.global\.v4\.b32", kernel.asm["ptx"])) >= 2


def test_the_examples_compile_for_sm_90a():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                                    "distributed"))
    import all_gather_gemm
    import flash_decode
    import gemm_reduce_scatter

    ctx = {"heap_bases": "*i64", "signal_pad_bases": "*i64", "signal_ptr": "*i32",
           "rank": "i32", "world_size": "i32"}
    f16, f32 = "*fp16:16", "*fp32:16"
    blocks = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}
    kernels = [
        (all_gather_gemm.all_gather_gemm_kernel,
         {"a_ptr": f16, "ag_ptr": f16, "b_ptr": f16, "c_ptr": f16, **ctx},
         {"M_LOCAL": 256, "N": 256, "K": 256, **blocks}),
        (gemm_reduce_scatter.gemm_reduce_scatter_kernel,
         {"a_ptr": f16, "b_ptr": f16, "stage_ptr": f32, "out_ptr": f32, **ctx},
         {"M_LOCAL": 256, "N": 256, "K_LOCAL": 256, **blocks}),
        (flash_decode.flash_decode_kernel,
         {"q_ptr": f16, "k_ptr": f16, "v_ptr": f16, "parts_ptr": f32, "lses_ptr": f32,
          "out_ptr": f32, **ctx, "sm_scale": "fp32"},
         {"H": 8, "S_LOCAL": 256, "D": 64, "BLOCK_S": 64}),
    ]
    for kernel, signature, constexprs in kernels:
        compiled = tile.compile(kernel, signature=signature, constexprs=constexprs,
                                target="sm_90a")
        ptx = compiled.asm["ptx"]
        assert "ld.acquire.sys.global.b32" in ptx and compiled.asm["cubin"], kernel.__name__
        assert ("st.release.sys.global.b32" in ptx) or ("red.release.sys.global.add.u32" in ptx)


def test_a_scalar_release_store_and_atomic_join_the_program_first():
    # One thread stores the flag for the program: bar.sync orders the tile's stores of the
    # other threads before its release.
    from test_distributed_primitives import atomics_on_rank0, flag_protocol

    ctx = {"heap_bases": "*i64", "pad_bases": "*i64", "sig_ptr": "*i32", "rank": "i32",
           "world_size": "i32"}
    ptx = tile.compile(flag_protocol, signature={"data_ptr": "*i32", "flag_ptr": "*i32",
                                                 "out_ptr": "*i32", **ctx},
                       constexprs={"N": 256}, target="sm_90a").asm["ptx"]
    release = ptx.index("st.release.sys.global.b32")
    assert "bar.sync" in ptx[ptx.rindex("st.global", 0, release):release]
    ptx = tile.compile(atomics_on_rank0, signature={"counter_ptr": "*i32", **ctx},
                       target="sm_90a").asm["ptx"]
    release = ptx.index("atom.release.sys.global.or.b32")
    assert "bar.sync" in ptx[ptx.rindex("atom.", 0, release):release]
