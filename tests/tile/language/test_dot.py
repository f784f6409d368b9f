"""`tl.dot`: interpreter numerics against numpy for every input type and precision, on the IR
each target gets (wgmma on sm_90a, mma.sync on sm_80, FMA where those do not apply), 3-D
batches, acc and out_dtype, Triton's error messages, and the PTX compiled here."""

import re

import ml_dtypes
import numpy as np
import pytest

import tile
import tile as triton
import tile.language as tl
from shared_codegen.frontend.compile import explicit_layout_module
from shared_codegen.frontend.launch import specialization_for_signature
from shared_codegen.ops.dot.definition import DotFmaOp, MmaV2Op
from shared_codegen.ops.wgmma.definition import WarpGroupDotOp
from tile.passes.dot_acceleration import warps_per_tile_v2, warps_per_tile_v3, wgmma_instr_n

NP = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8e4nv": ml_dtypes.float8_e4m3fn,
      "fp8e5": ml_dtypes.float8_e5m2, "fp32": np.float32, "fp64": np.float64, "i8": np.int8}
TL = {"fp16": tl.float16, "bf16": tl.bfloat16, "fp8e4nv": tl.float8e4nv, "fp8e5": tl.float8e5,
      "fp32": tl.float32, "fp64": tl.float64, "i8": tl.int8}


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               PRECISION: tl.constexpr, OUT_DTYPE: tl.constexpr, USE_ACC: tl.constexpr,
               TRANS_B: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    if TRANS_B:  # b stored [N, K]; the operand is its transpose
        b = tl.trans(tl.load(b_ptr + rn[:, None] * K + rk[None, :]))
    else:
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if USE_ACC:
        acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        c = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=OUT_DTYPE)
    else:
        c = tl.dot(a, b, input_precision=PRECISION, out_dtype=OUT_DTYPE)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], c)


def _inputs(kind, m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "i8":
        return (rng.integers(-128, 128, (m, k)).astype(np.int8),
                rng.integers(-128, 128, (k, n)).astype(np.int8))
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return a.astype(NP[kind]), b.astype(NP[kind])


def run_dot(kind, m, n, k, target, monkeypatch, b_kind=None, precision=None,
            out_dtype=tl.float32, acc=None, trans_b=False):
    monkeypatch.setenv("SC_TARGET", target)
    a, b = _inputs(kind, m, n, k)
    if b_kind is not None:
        b = b.astype(np.float32).astype(NP[b_kind])
    out_np = {tl.float32: np.float32, tl.float16: np.float16, tl.int32: np.int32,
              tl.float64: np.float64}[out_dtype]
    out = np.zeros((m, n), out_np)
    c = acc if acc is not None else np.zeros((1,), out_np)
    dot_kernel[(1,)](a, b.T.copy() if trans_b else b, c, out, M=m, N=n, K=k,
                     PRECISION=precision, OUT_DTYPE=out_dtype, USE_ACC=acc is not None,
                     TRANS_B=trans_b)
    return a, b, out


def exact(a, b, acc=None):
    prod = a.astype(np.float64) @ b.astype(np.float64)
    return prod if acc is None else prod + acc.astype(np.float64)


def rel_err(got, want):
    return float(np.abs(got.astype(np.float64) - want).max() / max(1.0, np.abs(want).max()))


def tf32(x):
    """Round-to-nearest tf32, as cvt.rna (mma.sync) does."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


TARGETS = ["sm_90a", "sm_80"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind,b_kind", [
    ("fp16", None), ("bf16", None), ("fp8e4nv", None), ("fp8e5", None), ("fp8e4nv", "fp8e5")])
def test_low_precision_inputs_accumulate_in_fp32(kind, b_kind, target, monkeypatch):
    m = 64
    if kind.startswith("fp8") and target == "sm_80":
        # No fp8 before sm_90 here; M=32 is too short for wgmma, so sm_90a widens fp8 to
        # fp16 for mma.sync.
        m, target = 32, "sm_90a"
    a, b, out = run_dot(kind, m, 32, 32, target, monkeypatch, b_kind=b_kind)
    # The products of 16- and 8-bit floats are exact in fp32; only the sums round.
    assert rel_err(out, exact(a, b)) < 1e-6


def test_fp8_needs_sm_90(monkeypatch):
    with pytest.raises(tile.CompilationError) as e:
        run_dot("fp8e5", 64, 32, 32, "sm_80", monkeypatch)
    assert e.value.message == ("tl.dot on fp8e5 inputs needs sm_90 or newer, got target sm_80 "
                               "(Triton also runs fp8 on sm_89; this compiler's fp8 conversions "
                               "do not yet)")
    assert e.value.line > 0 and "tl.dot" in e.value.source_line


@pytest.mark.parametrize("target", TARGETS)
def test_fp16_out_dtype_accumulates_in_fp16(target, monkeypatch):
    a, b, out = run_dot("fp16", 64, 32, 32, target, monkeypatch, out_dtype=tl.float16)
    assert out.dtype == np.float16
    want = exact(a, b)
    assert rel_err(out, want) < 2e-3
    np.testing.assert_array_equal(out, want.astype(np.float32).astype(np.float16))


@pytest.mark.parametrize("target", TARGETS)
def test_fp32_input_precisions(target, monkeypatch):
    want = None
    errs = {}
    for precision in ("tf32", "tf32x3", "ieee"):
        a, b, out = run_dot("fp32", 64, 32, 64, target, monkeypatch, precision=precision)
        want = exact(a, b)
        errs[precision] = rel_err(out, want)
    # tf32 keeps 10 mantissa bits of each input: errors near 2^-11 relative per product.
    assert 1e-5 < errs["tf32"] < 5e-3
    assert errs["tf32x3"] < 1e-5 and errs["ieee"] < 1e-5
    if target == "sm_80":  # mma.sync rounds its inputs with cvt.rna.tf32.f32
        a, b, out = run_dot("fp32", 64, 32, 64, target, monkeypatch, precision="tf32")
        ref = (tf32(a).astype(np.float64) @ tf32(b).astype(np.float64))
        assert rel_err(out, ref) < 1e-6


@pytest.mark.parametrize("target", TARGETS)
def test_int8_products_are_exact_in_int32(target, monkeypatch):
    acc = np.random.default_rng(3).integers(-1000, 1000, (32, 32)).astype(np.int32)
    a, b, out = run_dot("i8", 32, 32, 64, target, monkeypatch, out_dtype=tl.int32, acc=acc)
    np.testing.assert_array_equal(out, a.astype(np.int64) @ b.astype(np.int64) + acc)


def test_fp64_uses_fma_in_fp64(monkeypatch):
    a, b, out = run_dot("fp64", 32, 16, 16, "sm_90a", monkeypatch, out_dtype=tl.float64)
    np.testing.assert_allclose(out, exact(a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("m,n,k", [(128, 64, 32), (16, 16, 16), (8, 8, 16), (64, 8, 16)])
def test_acc_is_added_for_every_instruction_shape(m, n, k, monkeypatch):
    acc = np.random.default_rng(5).standard_normal((m, n)).astype(np.float32)
    a, b, out = run_dot("fp16", m, n, k, "sm_90a", monkeypatch, acc=acc)
    assert rel_err(out, exact(a, b, acc)) < 1e-6


def test_b_from_a_transposed_load(monkeypatch):
    a, b, out = run_dot("fp8e4nv", 64, 64, 32, "sm_90a", monkeypatch, trans_b=True)
    assert rel_err(out, exact(a, b)) < 1e-6


@triton.jit
def batched_kernel(a_ptr, b_ptr, out_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                   K: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rb * (M * K) + rm[None, :, None] * K + rk[None, None, :])
    b = tl.load(b_ptr + rb * (K * N) + rk[None, :, None] * N + rn[None, None, :])
    acc = tl.full((B, M, N), 1.0, tl.float32)
    tl.store(out_ptr + rb * (M * N) + rm[None, :, None] * N + rn[None, None, :],
             tl.dot(a, b, acc))


def test_batched_3d_dot():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 16, 16)).astype(np.float16)
    b = rng.standard_normal((2, 16, 32)).astype(np.float16)
    out = np.zeros((2, 16, 32), np.float32)
    batched_kernel[(1,)](a, b, out, B=2, M=16, N=32, K=16)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64)) + 1.0
    assert rel_err(out, want) < 1e-6


# ---- which instruction, which layouts ----------------------------------------------------------

SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "out_ptr": "*fp32"}


def _consts(m, n, k, **kw):
    return dict(dict(M=m, N=n, K=k, PRECISION=None, OUT_DTYPE=tl.float32, USE_ACC=False,
                     TRANS_B=False), **kw)


def _product_ops(sig, consts, target, num_warps=4):
    spec = specialization_for_signature(dot_kernel, sig, consts, num_warps, target)
    module = explicit_layout_module(dot_kernel, spec)
    return [op for op in module.functions["dot_kernel"].walk()
            if isinstance(op.opdef, (WarpGroupDotOp, MmaV2Op, DotFmaOp))]


@pytest.mark.parametrize("target,m,n,k,kind", [
    ("sm_90a", 128, 128, 64, WarpGroupDotOp), ("sm_90a", 32, 64, 16, MmaV2Op),
    ("sm_90a", 8, 8, 16, DotFmaOp), ("sm_80", 128, 128, 64, MmaV2Op)])
def test_instruction_per_target_and_shape(target, m, n, k, kind):
    (op,) = _product_ops(SIG, _consts(m, n, k), target)
    assert isinstance(op.opdef, kind)


@pytest.mark.parametrize("use_acc", [False, True])
def test_a_zero_accumulator_is_not_read(use_acc):
    # tl.dot(a, b) adds to zeros: the wgmma's first K step gets scale-d = 0 (Triton's
    # accumulator-init optimization) instead of a MOV of zero into each accumulator register.
    (op,) = _product_ops(SIG, _consts(128, 128, 64, USE_ACC=use_acc), "sm_90a")
    flag = op.operands[3].owner
    assert flag.name == "arith.constant" and flag.attrs["value"] is use_acc
    ptx = triton.compile(dot_kernel, signature=SIG, constexprs=_consts(128, 128, 64,
                                                                       USE_ACC=use_acc),
                         target="sm_90a").asm["ptx"]
    # The first wgmma's scale-d: 0 without an accumulator; the only zero MOV is that flag
    # (before, the 64 accumulator registers of each thread were zeroed, scale-d 1).
    flag_reg = re.search(r"setp\.ne\.b32 p, (%r\d+), 0;", ptx).group(1)
    assert re.search(rf"mov\.b32\s+{flag_reg}, (\d+);", ptx).group(1) == str(int(use_acc))
    assert len(re.findall(r"mov\.b32\s+%r\d+, 0;", ptx)) == (0 if use_acc else 1)


@pytest.mark.parametrize("precision,kind", [("tf32", WarpGroupDotOp), ("ieee", DotFmaOp)])
def test_fp32_ieee_computes_with_fma(precision, kind):
    sig = dict(SIG, a_ptr="*fp32", b_ptr="*fp32")
    (op,) = _product_ops(sig, _consts(64, 64, 16, PRECISION=precision), "sm_90a")
    assert isinstance(op.opdef, kind)


def test_wgmma_operands_are_nvmma_shared_and_fp8_b_is_k_major():
    sig = dict(SIG, a_ptr="*fp8e4nv", b_ptr="*fp8e4nv")
    (op,) = _product_ops(sig, _consts(128, 256, 64), "sm_90a", num_warps=8)
    a, b, acc = (v.type for v in op.operands[:3])
    assert repr(acc.layout) == ("NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1], "
                                "instr_shape=[16, 256, 32])")
    assert repr(a.layout) == "NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=8)"
    assert repr(b.layout) == ("NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=8, "
                              "transposed=True)")
    (op,) = _product_ops(SIG, _consts(128, 128, 64), "sm_90a")
    assert repr(op.operands[1].type.layout) == \
        "NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16)"


def test_mma_v2_operand_layouts():
    (op,) = _product_ops(SIG, _consts(64, 64, 32), "sm_80")
    a, b, acc = (v.type for v in op.operands)
    mma = ("NVMMADistributedLayout(version=[2, 0], warps_per_cta=[2, 2], "
           "instr_shape=[16, 8])")
    assert repr(acc.layout) == mma
    assert repr(a.layout) == f"DotOperandLayout(operand_index=0, parent={mma}, k_width=2)"
    assert repr(b.layout) == f"DotOperandLayout(operand_index=1, parent={mma}, k_width=2)"


def test_warp_tiling_matches_triton():
    assert warps_per_tile_v3(128, 256, 8, 256) == (8, 1)
    assert warps_per_tile_v3(64, 256, 8, 128) == (4, 2)
    assert wgmma_instr_n(64, 256, 8) == 128
    assert wgmma_instr_n(128, 256, 8) == 256
    assert warps_per_tile_v2(128, 128, 4) == (2, 2)
    assert warps_per_tile_v2(16, 128, 4) == (1, 4)


# ---- PTX --------------------------------------------------------------------------------------

@pytest.mark.parametrize("target,sig_kind,m,n,k,want,absent", [
    ("sm_90a", "fp16", 128, 128, 64,
     ["wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "wgmma.fence", "st.shared",
      "fence.proxy.async.shared::cta"],
     ["mma.sync"]),
    ("sm_90a", "fp8e4nv", 64, 64, 64, ["wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"],
     ["mma.sync"]),
    ("sm_80", "fp16", 64, 64, 32, ["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"],
     ["wgmma"]),
    ("sm_90a", "fp8e4nv", 32, 64, 32, ["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                                       "cvt.rn.f16x2.e4m3x2"], ["wgmma"]),
])
def test_ptx(target, sig_kind, m, n, k, want, absent):
    sig = dict(SIG, a_ptr=f"*{sig_kind}", b_ptr=f"*{sig_kind}")
    kern = triton.compile(dot_kernel, signature=sig, constexprs=_consts(m, n, k),
                          target=target)
    ptx = kern.asm["ptx"]
    for s in want:
        assert s in ptx, s
    for s in absent:
        assert s not in ptx, s
    assert kern.asm["cubin"]


def test_fma_ptx_for_fp64():
    sig = dict(SIG, a_ptr="*fp64", b_ptr="*fp64", out_ptr="*fp64")
    ptx = triton.compile(dot_kernel, signature=sig,
                         constexprs=_consts(16, 16, 16, OUT_DTYPE=tl.float64),
                         target="sm_90a").asm["ptx"]
    assert "fma.rn.f64" in ptx and "mma" not in ptx


# ---- errors -----------------------------------------------------------------------------------

@triton.jit
def bad_dot(a_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr, CASE: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    if CASE == "shape":
        tl.dot(a, a)
    elif CASE == "dtypes":
        tl.dot(a, a.to(tl.float32))
    elif CASE == "bf16_out":
        tl.dot(a, tl.trans(a), out_dtype=tl.bfloat16)
    elif CASE == "both_precisions":
        tl.dot(a, tl.trans(a), input_precision="ieee", allow_tf32=True)
    elif CASE == "precision":
        tl.dot(a, tl.trans(a), input_precision="bf16x9")
    elif CASE == "small_k":
        tl.dot(a, tl.trans(a))
    elif CASE == "rank":
        tl.dot(a, tl.reshape(a, (M * K,)))
    elif CASE == "acc":
        tl.dot(a, tl.trans(a), acc=tl.zeros((M, M), tl.float16))
    elif CASE == "uint8":
        tl.dot(a.to(tl.uint8), tl.trans(a.to(tl.uint8)))
    elif CASE == "imprecise":
        x = a.to(tl.float8e5)
        tl.dot(x, tl.trans(x), max_num_imprecise_acc=64)


@pytest.mark.parametrize("case,m,k,message", [
    ("shape", 16, 32, "First input shape ([16, 32]) and second input shape [16, 32] are not "
     "compatible for matmul (second index of first shape (32) must be equal to first index of "
     "second shape (16)"),
    ("dtypes", 16, 16, "Both operands must be same dtype. Got fp16 and fp32"),
    ("bf16_out", 16, 16, "out_dtype=bfloat16 is unsupported. Please use out_dtype=float32/"
     "float16 and cast with `.to(tl.bfloat16)`"),
    ("both_precisions", 16, 16, "Only one of input_precision and allow_tf32 can be specified"),
    ("precision", 16, 16, "input_precision must be one of ('tf32', 'tf32x3', 'ieee'). Got "
     "bf16x9"),
    ("small_k", 16, 8, "Input shapes should have M >= 1, N >= 1 and K >= 16"),
    ("rank", 16, 16, "Both inputs must be either 2D or 3D; (lhs: [16, 16] vs rhs: [256])"),
    ("acc", 16, 16, "dot: acc must be a [16, 16] tensor of out_dtype=fp32 (the result's shape "
     "and the out_dtype argument), got tensor<16x16xfp16>"),
    ("uint8", 32, 32, "only int8 supported!"),
    ("imprecise", 32, 32, "max_num_imprecise_acc (64) must be <= K (32)"),
])
def test_errors(case, m, k, message):
    with pytest.raises(tile.CompilationError) as e:
        bad_dot[(1,)](np.zeros(m * k, np.float16), M=m, K=k, N=m, CASE=case)
    assert e.value.message == message


@pytest.mark.parametrize("allow_tf32,kind", [(None, WarpGroupDotOp), (True, WarpGroupDotOp),
                                             (False, DotFmaOp)])
def test_allow_tf32_picks_the_precision(allow_tf32, kind):
    @triton.jit
    def k(a_ptr, b_ptr, out_ptr, ALLOW: tl.constexpr):
        r = tl.arange(0, 64)
        a = tl.load(a_ptr + r[:, None] * 64 + r[None, :])
        b = tl.load(b_ptr + r[:, None] * 64 + r[None, :])
        tl.store(out_ptr + r[:, None] * 64 + r[None, :], tl.dot(a, b, allow_tf32=ALLOW))

    spec = specialization_for_signature(
        k, {"a_ptr": "*fp32", "b_ptr": "*fp32", "out_ptr": "*fp32"}, {"ALLOW": allow_tf32}, 4,
        "sm_90a")
    module = explicit_layout_module(k, spec)
    (op,) = [op for op in module.functions["k"].walk()
             if isinstance(op.opdef, (WarpGroupDotOp, MmaV2Op, DotFmaOp))]
    assert isinstance(op.opdef, kind)


# ---- operands from tensor descriptors ---------------------------------------------------------

@triton.jit
def desc_matmul(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr, B_KMAJOR: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([m, k])
        if B_KMAJOR:
            b = b_desc.load([n, k]).T
        else:
            b = b_desc.load([k, n])
        acc = tl.dot(a, b, acc)
    rm = m + tl.arange(0, BM)
    rn = n + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("kind,b_kmajor", [("fp16", False), ("fp16", True),
                                           ("fp8e4nv", True)])
def test_wgmma_reads_tma_buffers_in_place(kind, b_kmajor, monkeypatch):
    from tile.tools.tensor_descriptor import TensorDescriptor

    monkeypatch.setenv("SC_TARGET", "sm_90a")
    a, b = _inputs(kind, 128, 128, 192)
    c = np.zeros((128, 128), np.float32)
    a_desc = TensorDescriptor.from_tensor(a, [64, 64])
    b_desc = TensorDescriptor.from_tensor(np.ascontiguousarray(b.T) if b_kmajor else b,
                                          [64, 64])
    desc_matmul[(2, 2)](a_desc, b_desc, c, 128, 128, 192, BM=64, BN=64, BK=64,
                        B_KMAJOR=b_kmajor)
    assert rel_err(c, exact(a, b)) < 1e-6
    sig = {"a_desc": a_desc, "b_desc": b_desc, "c_ptr": "*fp32:16", "M": "i32:16",
           "N": "i32:16", "K": "i32:16"}
    ir = triton.compile(desc_matmul, signature=sig,
                        constexprs=dict(BM=64, BN=64, BK=64, B_KMAJOR=b_kmajor),
                        target="sm_90a").asm["ttgir"]
    # The wgmma takes the TMA destination buffers: no register round trip, no restaging.
    assert "ttg.local_load" not in ir and "ttg.local_alloc %" not in ir
    assert ("ttg.memdesc_trans" in ir) == b_kmajor
