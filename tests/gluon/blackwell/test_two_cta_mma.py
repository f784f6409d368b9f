"""Two-CTA tcgen05 MMA (`cta_group::2`, ops/tcgen05/pair.py): a GEMM whose pairs of CTAs each
hold half of A's rows and of B's columns matches numpy in the interpreter, compiles to
`cta_group::2` PTX for sm_100a, and misuse is refused or reported word for word."""

import os
import re
import sys

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             tcgen05_copy, tcgen05_mma)
from gluon.nvidia.hopper import TensorDescriptor
from shared_codegen.errors import CompilationError

sys.path.insert(0, os.path.dirname(__file__))
from two_cta_kernels import pair_gemm_kernel  # noqa: E402

BM, BK, HALF_N = 128, 64, 64


def _descriptors(a, b):
    return (TensorDescriptor.from_tensor(
                a, [BM, BK], gl.NVMMASharedLayout.get_default_for([BM, BK], gl.float16)),
            TensorDescriptor.from_tensor(
                b, [BK, HALF_N], gl.NVMMASharedLayout.get_default_for([BK, HALF_N],
                                                                      gl.float16)))


@pytest.mark.parametrize("num_ctas", [2, 4])
def test_a_pair_of_ctas_multiplies_256_rows_in_one_mma(num_ctas):
    m, n, k = 2 * BM * num_ctas, 2 * 2 * HALF_N, 2 * BK
    rng = np.random.default_rng(num_ctas)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    a_desc, b_desc = _descriptors(a, b)
    pair_gemm_kernel[(m // (BM * num_ctas), n // (2 * HALF_N))](a_desc, b_desc, c, n, k,
                                                                 num_ctas=num_ctas)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3,
                               atol=1e-3)


def test_the_pair_gemm_compiles_to_cta_group_2():
    a = np.zeros((256, 128), np.float16)
    a_desc, b_desc = _descriptors(a, a)
    kernel = gluon.compile(pair_gemm_kernel,
                           signature={"a_desc": a_desc, "b_desc": b_desc, "c_ptr": "*fp32",
                                      "N": "i32", "K": "i32"}, target="sm_100a", num_ctas=2)
    ptx = kernel.asm["ptx"]
    assert "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32" in ptx
    assert "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" in ptx
    assert "tcgen05.dealloc.cta_group::2.sync.aligned.b32" in ptx
    assert "cta_group::1" not in ptx
    mmas = re.findall(r"tcgen05\.mma\.cta_group::2\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+, "
                      r"%r\d+, en;", ptx)
    assert mmas and len(mmas) % (BK // 16) == 0  # K steps of 16
    assert re.search(r"tcgen05\.commit\.cta_group::2\.mbarrier::arrive::one\.shared::cluster\."
                     r"multicast::cluster\.b64 \[%rd\d+\], %rs\d+;", ptx)
    assert kernel.asm["cubin"][:4] == b"\x7fELF"


def test_the_pair_plan_covers_256_rows_and_both_halves_of_n():
    from shared_codegen.ir.types import SharedMemoryType, TensorMemoryType, float16, float32
    from shared_codegen.ops.tcgen05.lowering import plan_tcgen05

    def smem(shape):
        layout = gl.NVMMASharedLayout.get_default_for(shape, gl.float16)
        return SharedMemoryType(tuple(shape), float16, layout, tuple(shape))

    acc = TensorMemoryType((128, 128), float32,
                           TensorMemoryLayout([128, 128], col_stride=1, two_ctas=True),
                           (128, 128))
    plan = plan_tcgen05(smem([128, 64]), smem([64, 64]), acc)
    # The instruction descriptor (PTX ISA Table 42): fp32 D, M = 256 (bits 24-28: M >> 4)
    # and N = 128 (bits 17-22: N >> 3), B MN-major (bit 16: B is [K, N] N-contiguous).
    assert plan.idesc == (1 << 4) | (1 << 16) | ((128 >> 3) << 17) | ((256 >> 4) << 24)
    assert plan.instr_n == 128
    assert [(s.n0, s.k0) for s in plan.steps] == [(0, 0), (0, 16), (0, 32), (0, 48)]


@gluon.jit
def _smem(M: gl.constexpr, N: gl.constexpr):
    return gl.allocate_shared_memory(gl.float16, [M, N], gl.NVMMASharedLayout(128, 16))


def test_two_cta_mma_misuse_is_refused():
    pair = TensorMemoryLayout([128, 128], col_stride=1, two_ctas=True)

    @gluon.jit
    def one_cta(x, LAYOUT: gl.constexpr):
        acc = allocate_tensor_memory(gl.float32, [128, 128], LAYOUT)
        tcgen05_mma(_smem(128, 64), _smem(64, 64), acc)

    @gluon.jit
    def whole_b(x, LAYOUT: gl.constexpr):
        acc = allocate_tensor_memory(gl.float32, [128, 128], LAYOUT)
        tcgen05_mma(_smem(128, 64), _smem(64, 128), acc)

    @gluon.jit
    def mixed(x, LAYOUT: gl.constexpr):
        acc = allocate_tensor_memory(gl.float32, [128, 128], LAYOUT)
        single = allocate_tensor_memory(gl.float32, [128, 64],
                                        TensorMemoryLayout([128, 64], col_stride=1))
        tcgen05_mma(_smem(128, 64), _smem(64, 64), acc)
        tcgen05_mma(_smem(128, 64), _smem(64, 64), single)

    @gluon.jit
    def with_copy(x, LAYOUT: gl.constexpr):
        acc = allocate_tensor_memory(gl.float32, [128, 128], LAYOUT)
        tcgen05_mma(_smem(128, 64), _smem(64, 64), acc)
        src = gl.allocate_shared_memory(gl.float32, [128, 32], gl.NVMMASharedLayout(128, 32))
        dst = allocate_tensor_memory(gl.float32, [128, 32],
                                     TensorMemoryLayout([128, 32], col_stride=1))
        tcgen05_copy(src, dst)

    cases = [
        (one_cta, 1, "tcgen05_mma: a two-CTA MMA (acc in TensorMemoryLayout(two_ctas=True)) "
                     "runs on CTA pairs: launch with num_ctas = 2, 4 or 8 (this kernel has "
                     "num_ctas=1)"),
        (whole_b, 2, "a two-CTA tcgen05_mma takes this CTA's halves: a [M, K], b [K, N/2] and "
                     "acc [M, N]; got [128, 64] x [64, 128] -> [128, 128]"),
        (mixed, 2, "this kernel has two-CTA tcgen05 MMAs (an acc in "
                   "TensorMemoryLayout(two_ctas=True)); PTX wants one cta_group for all of a "
                   "kernel's tcgen05 instructions, so every tcgen05_mma must be two-CTA"),
        (with_copy, 2, "tcgen05_copy in a kernel of two-CTA tcgen05 MMAs is not supported "
                       "(its cta_group::2 form, copying into both CTAs of a pair, is not "
                       "written yet)"),
    ]
    for kernel, num_ctas, message in cases:
        with pytest.raises(CompilationError, match=re.escape(message)):
            gluon.compile(kernel, signature={"x": "*fp32"}, constexprs={"LAYOUT": pair},
                          target="sm_100a", num_ctas=num_ctas)
