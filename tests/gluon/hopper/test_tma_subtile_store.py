"""A TMA store whose shared source is a whole number of the descriptor's boxes but smaller
than its block (upstream's tutorial 08 stores [128, 64] subtiles through a [128, 256]
descriptor): the interpreter writes exactly the source's region, the PTX issues one message
per box of the source, and a source that is not a whole number of boxes is refused."""

import re

import numpy as np
import pytest
from hopper_kernels import NVMMA128, arange2d, desc

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import fence_async_shared, tma
from shared_codegen.frontend.errors import CompilationError

ROWS, BLOCK_N, SPLIT_N = 64, 256, 64


@gluon.jit
def subtile_store_kernel(in_ptr, out_desc, ROWS: gl.constexpr, BLOCK_N: gl.constexpr,
                         SPLIT_N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    r = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    c = gl.arange(0, SPLIT_N, layout=gl.SliceLayout(0, layout))
    offs = gl.expand_dims(r, 1) * BLOCK_N + gl.expand_dims(c, 0)
    smem = gl.allocate_shared_memory(gl.float16, [ROWS, SPLIT_N], out_desc.layout)
    for i in gl.static_range(BLOCK_N // SPLIT_N):
        tma.store_wait(pendings=0)
        smem.store(gl.load(in_ptr + offs + SPLIT_N * i) + 1.0)
        fence_async_shared()
        tma.async_copy_shared_to_global(out_desc, [0, SPLIT_N * i], smem)
    tma.store_wait(pendings=0)


@gluon.jit
def partial_box_store_kernel(out_desc):
    smem = gl.allocate_shared_memory(gl.float16, [64, 32], gl.NVMMASharedLayout(64, 16))
    tma.async_copy_shared_to_global(out_desc, [0, 0], smem)


def test_subtiles_of_the_block_land_where_their_coordinates_say():
    x = arange2d(ROWS, BLOCK_N)
    out = np.zeros((ROWS, BLOCK_N), np.float16)
    subtile_store_kernel[(1,)](x, desc(out, [ROWS, BLOCK_N]), ROWS, BLOCK_N, SPLIT_N)
    np.testing.assert_array_equal(out, x + np.float16(1))


def test_each_subtile_store_is_one_box_message():
    out = np.zeros((ROWS, BLOCK_N), np.float16)
    compiled = gluon.compile(subtile_store_kernel,
                             {"in_ptr": "*fp16:16", "out_desc": desc(out, [ROWS, BLOCK_N])},
                             {"ROWS": ROWS, "BLOCK_N": BLOCK_N, "SPLIT_N": SPLIT_N},
                             target="sm_90a")
    ptx = compiled.asm["ptx"]
    stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group", ptx)
    assert len(stores) == BLOCK_N // SPLIT_N  # a [64, 256] source would take 4 each
    assert len(compiled.asm["cubin"]) > 0


def test_a_source_smaller_than_one_box_is_refused():
    out = np.zeros((64, 256), np.float16)
    with pytest.raises(CompilationError,
                       match=re.escape("src is [64, 32] x float16 but the descriptor moves "
                                       "[64, 256] x float16 blocks (or a whole number of its "
                                       "[64, 64] boxes, no larger)")):
        partial_box_store_kernel[(1,)](desc(out, [64, 256], NVMMA128))
