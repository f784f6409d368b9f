"""The timeline regions of the GEMM and Hopper attention examples (issue 16, item 3): they
compile to nothing when no timeline is recorded (the PTX equals that of the kernels without
them), and a timeline variant of each builds for sm_90a with every region."""

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "flash_attention"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "gemm"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

import gemm  # noqa: E402
import hopper  # noqa: E402

import gluon  # noqa: E402
import tile.profiler.language as pl  # noqa: E402
from gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from shared_codegen.frontend.values import builtin  # noqa: E402


def compile_gemm(**options):
    x = np.zeros((4096, 4096), np.float16)
    a_desc = TensorDescriptor.from_tensor(x, [128, 64], gemm._nvmma(x, 64))
    b_desc = TensorDescriptor.from_tensor(x, [64, 256], gemm._nvmma(x, 256))
    c_desc = TensorDescriptor.from_tensor(x, [128, 256], gemm._nvmma(x, 256))
    return gluon.compile(gemm.gemm_kernel, {"a_desc": a_desc, "b_desc": b_desc,
                                            "c_desc": c_desc, "M": "i32", "N": "i32",
                                            "K": "i32"},
                         {"STAGES": 3, "B_KMAJOR": False, "GROUP_M": 8}, target="sm_90a",
                         num_warps=gemm.CONSUMER_WARPS, **options)


def compile_attention(**options):
    x = np.zeros((1, 16, 4096, 128), np.float16)
    block = lambda rows: TensorDescriptor.from_tensor(x, [1, 1, rows, 128],  # noqa: E731
                                                      hopper._nvmma(16, 128))
    return gluon.compile(
        hopper.attention_kernel,
        {"q_desc": block(64), "k_desc": block(128), "v_desc": block(128), "o_desc": block(64),
         "lse_ptr": "*fp32:16", "N_Q": "i32", "N_KV": "i32", "H": "i32", "GROUP": "i32",
         "BH": "i32", "num_tiles": "i32", "qk_scale": "fp32", "o_scale": "fp32",
         "k_desc_x": block(128), "v_desc_x": block(128), "split_part": "*fp32:16",
         "split_ml": "*fp32:16", "split_count": "*i32:16", "o_ptr": "*fp16:16"},
        {"BN": 128, "STAGES": 3, "CAUSAL": True, "V_T": False, "RETURN_LSE": True,
         "O_IN_Q": True, "OVERLAP": True, "KV_AHEAD": 1, "NUM_WG": 2, "CONSUMER_REGS": 240,
         "Q_IN_REGS": False, "PINGPONG": True, "K_STAGES": 3, "V_LAG": 0, "LATE_WAIT": False,
         "ROW_SUM_MMA": False, "PROMOTE_PV": False, "BN_X": 0, "PER_WARP": False,
         "LAZY_RESCALE": False, "SPLIT": False, "O_DIRECT": False},
        target="sm_90a", num_warps=4, **options)


EXAMPLES = {"gemm": (compile_gemm, ["load", "mainloop", "epilogue"]),
            "attention": (compile_attention, ["load K, V", "wait Q", "wait K", "wait turn",
                                              "softmax", "last PV", "epilogue"])}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_the_regions_change_no_instruction_when_off(example, monkeypatch, tmp_path):
    compile_kernel, _ = EXAMPLES[example]
    monkeypatch.setenv("SC_CACHE_DIR", str(tmp_path / "with"))
    monkeypatch.delenv("SC_CACHE_DISABLE", raising=False)
    with_regions = compile_kernel()
    assert "proton.record" in with_regions.asm["ttgir"]
    # The same kernels with enter_scope / exit_scope adding nothing to the IR (a fresh cache:
    # the source, and so the key, is unchanged).
    nothing = builtin(lambda name, _semantic=None: None)
    monkeypatch.setattr(pl, "enter_scope", nothing)
    monkeypatch.setattr(pl, "exit_scope", nothing)
    monkeypatch.setenv("SC_CACHE_DIR", str(tmp_path / "without"))
    without = compile_kernel()
    assert "proton.record" not in without.asm["ttgir"]
    assert with_regions.asm["ptx"] == without.asm["ptx"]


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_a_timeline_variant_records_every_region(example, monkeypatch):
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")
    compile_kernel, regions = EXAMPLES[example]
    kernel = compile_kernel(timeline=True)
    info = kernel.metadata["timeline"]
    assert sorted(info["regions"]) == sorted(regions)
    assert [p[0].split(" (")[0] for p in info["partitions"]] == \
        ["default"] + [f"worker {i}" for i in range(len(info["partitions"]) - 1)]
    assert kernel.asm["ptx"].count("st.global.v4.u32 [a], {tg, smid, lo, hi};") >= \
        2 * len(regions)
    assert kernel.asm["cubin"][:4] == b"\x7fELF"
