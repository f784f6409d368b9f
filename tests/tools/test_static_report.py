"""tools/static_report.py: SASS and PTX counting on fixed text, partition registers from the
warp_specialize attributes, and (with ptxas and nvdisasm installed) the whole report of the
Blackwell attention example."""

import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", ".."))

from tools import static_report as sr  # noqa: E402

SASS = """
        /*0100*/                   MUFU.EX2 R5, R4 ;
        /*0110*/              @!P0 MUFU.EX2 R6, R7 ;
        /*0120*/                   MUFU.RCP R8, R9 ;
        /*0130*/                   IMAD R146, R101, 0x800000, R146 ;
        /*0140*/                   LEA R145, R102, R145, 0x17 ;
        /*0150*/                   IMAD.MOV.U32 R1, RZ, RZ, 0x800000 ;
        /*0160*/                   FADD R101, R100, 12582912 ;
        /*0170*/                   UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8], idesc[UR11], UPT ;
        /*0180*/                   UTCQMMA gdesc[UR4], gdesc[UR6], tmem[UR8], idesc[UR11], UPT ;
        /*0190*/                   UTCBAR [UR9], URZ ;
        /*01a0*/                   LDTM.x32 R100, tmem[UR6+0x80] ;
        /*01b0*/                   STTM.x16 tmem[UR6], R4 ;
        /*01c0*/               @P1 UTCATOMSWS.FIND_AND_SET.ALIGN UP0, UR4, UR4 ;
        /*01d0*/                   NOP;
"""


def test_sass_counts_by_class():
    tcgen05, mufu, fma, total = sr.count_sass(SASS)
    assert tcgen05 == {"tcgen05.mma": 2, "tcgen05.commit": 1, "tcgen05.ld": 1,
                       "tcgen05.st": 1, "tcgen05.alloc/dealloc": 1}
    # MUFU.RCP is not an exp2; the IMAD.MOV of the constant 2^23 inserts no exponent; NOPs
    # (padding) are not counted.
    assert (mufu, fma, total) == (2, 2, 13)


def test_ptx_tcgen05_counts():
    ptx = ("tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r3, p;\n"
           "tcgen05.mma.cta_group::1.kind::f16 [%r1], [%r2], %rd2, %r3, p;\n"
           "tcgen05.ld.sync.aligned.32x32b.x32.b32 {...}, [%r4];\ntcgen05.wait::ld.sync;\n")
    assert sr.count_ptx_tcgen05(ptx) == {"tcgen05.mma": 2, "tcgen05.ld": 1, "tcgen05.wait": 1}


def test_partitions_take_the_registers_the_compiler_plans():
    ttgir = "ttg.warp_specialize %a {worker_num_regs = [176, 176, 40, 40, 40], " \
            "worker_num_warps = [4, 4, 1, 1, 1]} {"
    parts = sr.partitions_of(ttgir, 4, ["corr", "s0", "s1", "mma", "load", "epi"])
    assert [(p.name, p.warps, p.registers) for p in parts] == [
        ("corr", 4, 120), ("s0", 4, 176), ("s1", 4, 176), ("mma", 1, 40), ("load", 1, 40),
        ("epi", 1, 40)]
    with pytest.raises(ValueError, match=r"partition_names: 2 names for 6 partitions"):
        sr.partitions_of(ttgir, 4, ["a", "b"])


def test_missing_nvdisasm_names_the_wheel(monkeypatch):
    monkeypatch.setenv("SC_NVDISASM", "/nonexistent/nvdisasm")
    with pytest.raises(sr.ToolMissing, match=r"SC_NVDISASM=/nonexistent/nvdisasm is not an "
                                             r"executable file"):
        sr.find_nvdisasm()


@pytest.mark.skipif(not sr.have_sass_tools(), reason="needs ptxas and nvdisasm "
                                              "(the nvidia-cuda-nvdisasm wheel)")
def test_report_of_the_blackwell_attention_example():
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "flash_attention"))
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
    import blackwell
    report = sr.static_report(blackwell.compile_for_sm100a("float16", 128, True))
    assert [p.registers for p in report.partitions] == [104, 184, 184, 40, 40, 40]
    assert (report.spill_stores, report.spill_loads) == (0, 0)
    assert report.tmem_columns == 512
    # Two softmax partitions x 128 columns: 32 on the FMA pipe, 96 on MUFU, + 1 alpha each.
    assert (report.exp2_mufu, report.exp2_fma) == (2 * 97, 2 * 32)
    assert report.sass_tcgen05["tcgen05.mma"] == report.ptx_tcgen05["tcgen05.mma"] == 64
    assert report.sass_tcgen05["tcgen05.ld"] == 24  # 2 x 4 S chunks, correction: 4 + 4 + ...
    assert "| exp2 in SASS: MUFU.EX2 / FMA-pipe polynomial | 194 / 64 (25% on FMA) |" in \
        report.markdown()


LOOPS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   MUFU.EX2 R5, R4 ;
.L_x_2:
        /*0020*/                   FADD R6, R5, R5 ;
        /*0030*/              @!P0 BRA `(.L_x_2) ;
        /*0040*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0050*/               @P1 BRA `(.L_x_1) ;
        /*0060*/                   BRA `(.L_x_3) ;
.L_x_3:
        /*0070*/                   EXIT ;
"""


def test_sass_loops_are_the_spans_of_backward_branches():
    assert sr.sass_loops(LOOPS) == [
        ["FADD R6, R5, R5", "@!P0 BRA `(.L_x_2)"],
        ["MUFU.EX2 R5, R4", "FADD R6, R5, R5", "@!P0 BRA `(.L_x_2)",
         "WARPGROUP.DEPBAR.LE gsb0, 0x0", "@P1 BRA `(.L_x_1)"]]


def test_inflight_wgmma_operand_writes_are_the_writes_before_the_wait():
    # The fp8 attention loop's race in small: the PV wgmma reads R168-R171, the next P is
    # packed into R168 and copied into R170 before the wait; after the wait R168 is free.
    loop = ["WARPGROUP.DEPBAR.LE gsb0, 0x0",
            "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], RZ, !UPT",   # S: no register A
            "QGMMA.64x128x32.F32.E4M3.E4M3 R88, R168, gdesc[UR8], R88, gsb0",
            "FMUL R90, R90, R10",                     # the accumulator is not an A register
            "F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C R168, R21, R20, R18",
            "@!P2 IMAD.MOV.U32 R170, RZ, RZ, R19",
            "STS.U8 [R168], R13",                      # a read of R168
            "WARPGROUP.DEPBAR.LE gsb0, 0x0",
            "MOV R168, R19",
            "@P2 BRA `(.L_x_40)"]
    assert sr.inflight_wgmma_operand_writes(loop) == [
        "F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C R168, R21, R20, R18",
        "@!P2 IMAD.MOV.U32 R170, RZ, RZ, R19"]
