"""examples/gemm: the persistent warp-specialized Hopper GEMM in the interpreter (edge tiles,
several tiles per program, every input dtype, B in both major orders, several async
completion orders) and its PTX / cubin for sm_90a. On the GPU: tests/gpu/test_gemm_gpu.py."""

import os
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "gemm"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

import gemm  # noqa: E402

import gluon  # noqa: E402
from shared_codegen.lowering.backend import parse_resource_usage  # noqa: E402

SMALL = (128, 128, 64)  # keeps the interpreter quick; the GPU runs 128 x 256 x 64


def _relative_error(c, ref):
    return float(np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max())


def test_main_runs_in_the_interpreter():
    assert gemm.main(gpu=False)


@pytest.mark.parametrize("dtype_name, b_kmajor, shape, programs", [
    ("float16", False, (200, 312, 136), 2),     # partial tiles in M, N and K; 2 x 3 tiles
    ("bfloat16", False, (256, 384, 192), 4),
    ("float16", True, (128, 256, 128), 1),      # one program walks both tiles
    ("float8_e4m3fn", True, (128, 256, 256), 2),
    ("float8_e5m2", True, (136, 128, 128), 3),
])
def test_the_interpreter_matches_float64(dtype_name, b_kmajor, shape, programs, monkeypatch):
    m, n, k = shape
    a, b = gemm.random_operands(m, n, k, dtype_name, b_kmajor)
    out_name = "float16" if dtype_name.startswith("float8") else dtype_name
    ref = gemm.reference(a, b, b_kmajor)
    for seed in (0, 1):  # two legal orders of TMA / wgmma completion
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        c = gemm.gemm(a, b, np.full((m, n), np.nan, a.dtype if out_name == dtype_name
                                    else np.float16),
                      b_kmajor=b_kmajor, block=(128, 128, 128 // a.itemsize),
                      num_programs=programs)
        err = _relative_error(c, ref)
        assert err <= gemm.tolerance(out_name, k, fp8_inputs=out_name != dtype_name), err


def test_one_stage_deadlocks_and_the_interpreter_says_where():
    # The consumers release a stage only after the next stage's wgmma is issued, so a ring
    # of one stage can never be refilled: gemm() refuses it, the raw kernel deadlocks.
    from gluon.nvidia.hopper import TensorDescriptor
    from shared_codegen.interpreter.memory import InterpreterError

    a, b = gemm.random_operands(128, 128, 256)
    c = np.empty((128, 128), np.float16)
    with pytest.raises(ValueError, match=r"gemm: stages must be at least 2, got 1 \(the "
                                         r"consumers keep one wgmma in flight"):
        gemm.gemm(a, b, c, block=SMALL, stages=1)
    descs = [TensorDescriptor.from_tensor(x, blk, gemm._nvmma(x, blk[1]))
             for x, blk in ((a, [128, 64]), (b, [64, 128]), (c, [128, 128]))]
    with pytest.raises(InterpreterError) as info:
        gemm.gemm_kernel[(1,)](*descs, 128, 128, 256, 1, False, 8, num_warps=8)
    report = str(info.value)
    assert "deadlock: every partition of gl.warp_specialize is blocked" in report
    assert "default partition `_mma_partition` (8 warps) waits at" in report
    assert "for phase 1 of the mbarrier allocated at" in report
    assert "worker partition 0 `_load_partition` (1 warp) waits at" in report


def test_bad_shapes_are_named():
    a = np.zeros((128, 64), np.float16)
    with pytest.raises(ValueError, match=r"gemm: a is \(128, 64\) but b is \(32, 128\) "
                                         r"\(K x N expected, K = 64\)"):
        gemm.gemm(a, np.zeros((32, 128), np.float16), np.zeros((128, 128), np.float16))
    with pytest.raises(ValueError, match=r"gemm: c must be \(128, 128\), got \(128, 64\)"):
        gemm.gemm(a, np.zeros((64, 128), np.float16), np.zeros((128, 64), np.float16))


@pytest.fixture(scope="module")
def compiled_fp16():
    from gluon.nvidia.hopper import TensorDescriptor

    x = np.zeros((4096, 4096), np.float16)
    a_desc = TensorDescriptor.from_tensor(x, [128, 64], gemm._nvmma(x, 64))
    b_desc = TensorDescriptor.from_tensor(x, [64, 256], gemm._nvmma(x, 256))
    c_desc = TensorDescriptor.from_tensor(x, [128, 256], gemm._nvmma(x, 256))
    return gluon.compile(gemm.gemm_kernel, {"a_desc": a_desc, "b_desc": b_desc,
                                            "c_desc": c_desc, "M": "i32", "N": "i32",
                                            "K": "i32"},
                         {"STAGES": 3, "B_KMAJOR": False, "GROUP_M": 8}, target="sm_90a",
                         num_warps=gemm.CONSUMER_WARPS)


def test_the_ptx_has_every_hopper_instruction_and_the_cubin_builds(compiled_fp16):
    ptx = compiled_fp16.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx  # the TMA store
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx
    assert "stmatrix.sync.aligned" in ptx  # the epilogue writes c_smem with stmatrix
    # 8 consumer warps + 1 producer warp, padded to 3 warpgroups: the producer's warpgroup
    # gives its registers to the consumers.
    assert ".maxntid 384" in ptx and ".maxnreg 168" in ptx
    assert re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32\s+(\d+)", ptx) == \
        [("dec", "24"), ("inc", "240")]
    assert len(compiled_fp16.asm["cubin"]) > 0
    usage = parse_resource_usage(compiled_fp16.metadata["jit_log"])["gemm_kernel"]
    assert usage.spill_stores == 0 and usage.spill_loads == 0


def test_no_bar_sync_before_the_pipeline_waits(compiled_fp16):
    # Waits and arrives are atomic on the barrier word; inside the partitions (no
    # mbarrier.init there) a loop's wait needs no bar.sync before it.
    lines = [ln.strip() for ln in compiled_fp16.asm["ptx"].splitlines()
             if ln.strip() and not ln.strip().startswith("//")]
    waits = [i for i, ln in enumerate(lines) if ln.startswith("mbarrier.try_wait")]
    assert len(waits) >= 3
    for i in waits:
        window = lines[max(0, i - 12):i]
        assert not any(ln.startswith("bar.sync") for ln in window), window
