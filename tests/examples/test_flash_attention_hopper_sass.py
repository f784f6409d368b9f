"""examples/flash_attention/hopper.py compiled for sm_90a, no GPU needed: its PTX (the FA3
ingredients, setmaxnreg, named barriers, register-A wgmma, TMA), and whole-program ptxas
builds (spills, and the SASS of the block loop: what each option adds to or takes from it).
The interpreter's checks of the same kernel: test_flash_attention_hopper.py."""

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "flash_attention"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import hopper  # noqa: E402
from tools import static_report  # noqa: E402

import gluon  # noqa: E402
from gluon import language as gl  # noqa: E402


@pytest.mark.parametrize("per_warp", [False, True])
def test_lazy_rescale_branches_around_the_rescale(per_warp):
    # The decision is a barrier that reduces (bar.red.or, which K's release shares), and
    # O's 64 rescaling FMULs a thread sit behind a branch on it. The turn's hand-over keeps
    # its partition barrier, unless each warp hands over on its own (warp_arrivals): then
    # bar.red is the loop's only barrier, as bar.sync is the default loop's.
    if not static_report.have_sass_tools():
        pytest.skip("needs ptxas and nvdisasm (the nvidia-cuda-nvdisasm wheel)")
    body = _block_loop_sass(_compile(128, CAUSAL=False, RETURN_LSE=False, LAZY_RESCALE=True,
                                     PER_WARP=per_warp).asm["ptx"], (16, 16), no_spills=True)
    assert sum(x.startswith("BAR.RED.OR") for x in body) == 1, body
    assert sum(x.startswith("BAR.SYNC") for x in body) == (0 if per_warp else 1), body
    first = next(i for i, x in enumerate(body) if x.startswith("FMUL"))
    assert re.match(r"@!?P\d BRA", body[first - 1]), body[first - 2:first + 2]
    assert all(x.startswith("FMUL") for x in body[first:first + 64]), body[first:first + 64]


def test_warp_rescale_votes_in_each_warp_instead_of_a_barrier():
    # warp_rescale (fp8's loop, which rescales before its PV wgmma): each warp votes
    # (VOTE.ANY) on its own rows and branches around O's 64 rescaling FMULs; no BAR.RED.OR
    # decides, and the one BAR.SYNC left is the turn's and the stages' releases'.
    if not static_report.have_sass_tools():
        pytest.skip("needs ptxas and nvdisasm (the nvidia-cuda-nvdisasm wheel)")
    body = _block_loop_sass(_compile(128, fp8=True, CAUSAL=False, RETURN_LSE=False,
                                     ROW_SUM_MMA=True, OVERLAP=False, O_IN_Q=False,
                                     LAZY_RESCALE=True, WARP_RESCALE=True).asm["ptx"],
                            (6, 24), no_spills=True)
    assert not any(x.startswith("BAR.RED") for x in body), body
    assert sum(x.startswith("BAR.SYNC") for x in body) == 1, body
    assert sum(x.startswith("VOTE.ANY") for x in body) == 1, body
    first = next(i for i, x in enumerate(body) if x.startswith("FMUL"))
    assert re.match(r"@!?P\d BRA", body[first - 1]), body[first - 2:first + 2]
    assert all(x.startswith("FMUL") for x in body[first:first + 64]), body[first:first + 64]
    assert any(x.startswith("VOTE.ANY") for x in body[:first]), body[:first]


def test_speculative_p_takes_exp2s_before_the_barrier_that_decides():
    # speculative_p: P against the kept maxima goes ahead of the row max's shuffles and the
    # bar.red that decides whether to rescale, so MUFU.EX2s come before BAR.RED.OR; the row
    # sums are per-thread shares (no shuffles for them in the loop: the 4 left are the row
    # max's), and the descriptors stay on the uniform datapath (no R2UR).
    if not static_report.have_sass_tools():
        pytest.skip("needs ptxas and nvdisasm (the nvidia-cuda-nvdisasm wheel)")
    body = _block_loop_sass(_compile(128, CAUSAL=False, RETURN_LSE=False, LAZY_RESCALE=True,
                                     SPEC_P=True).asm["ptx"], (16, 16), no_spills=True)
    bar = next(i for i, x in enumerate(body) if x.startswith("BAR.RED.OR"))
    assert sum(x.startswith("MUFU.EX2") for x in body[:bar]) >= 8, body[:bar]
    assert sum(x.startswith("SHFL") for x in body) == 4, body
    assert not any(x.startswith("R2UR") for x in body), body


def test_the_kernel_refuses_spec_p_without_lazy_rescale():
    # The launcher says it by option name; the kernel itself, compiled directly, by file
    # and line: the speculative P is taken again only where LAZY_RESCALE's barrier says so.
    with pytest.raises(Exception, match=r"hopper\.py:\d+: static_assert failed: SPEC_P needs "
                                        r"LAZY_RESCALE"):
        _compile(128, SPEC_P=True, LAZY_RESCALE=False)


@pytest.mark.parametrize("split", [False, True])
def test_q_prefetch_sends_the_next_q_into_l2(split):
    # q_prefetch: the producer prefetches the next piece's Q blocks, one per warpgroup (two
    # 64-column boxes each at D = 128 with the 128-byte swizzle); without it, none.
    ptx = _compile(128, CAUSAL=not split, SPLIT=split, LAZY_RESCALE=True, SPEC_P=True,
                   Q_PREFETCH=True).asm["ptx"]
    assert ptx.count("cp.async.bulk.prefetch.tensor.4d.L2.global.tile") == 4
    plain = _compile(128, CAUSAL=not split, SPLIT=split, LAZY_RESCALE=True,
                     SPEC_P=True).asm["ptx"]
    assert "cp.async.bulk.prefetch" not in plain
    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas (CUDA toolkit) for the spill check")
    _assert_no_spills(ptx)  # the producer keeps 24 regs


@pytest.mark.parametrize("split", [False, True])
def test_q_buffers_free_the_last_q_after_its_store(split):
    # q_buffers=2 with O through Q's buffer: the epilogue stores O and leaves; the next
    # tile waits for that store (cp.async.bulk.wait_group.read) after issuing its first
    # QK^T, before that QK^T's wgmma wait, and then frees the buffer. One buffer: no such
    # wait there (the epilogue waits).
    def between_issue_and_wait(q_bufs):  # what comes after each wgmma issue's last wgmma
        ptx = _compile(128, CAUSAL=not split, SPLIT=split, LAZY_RESCALE=True, SPEC_P=True,
                       K_STAGES=2, Q_BUFS=q_bufs).asm["ptx"]
        return ptx, re.findall(r"wgmma\.mma_async(?:(?!wgmma\.mma_async).)*?wgmma\.wait_group", ptx,
                               re.S)
    two, gaps = between_issue_and_wait(2)
    freed = [g for g in gaps if "cp.async.bulk.wait_group.read 0" in g]
    assert len(freed) == 2 and all("mbarrier.arrive" in g for g in freed)  # one a consumer
    assert not any("cp.async.bulk.wait_group" in g for g in between_issue_and_wait(1)[1])
    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas (CUDA toolkit) for the spill check")
    _assert_no_spills(two)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (CUDA toolkit)")
@pytest.mark.parametrize("constexprs", [
    {"CAUSAL": True, "RETURN_LSE": True, "SNAKE": True, "RAGGED_FIRST": True},
    {"CAUSAL": False, "RETURN_LSE": False, "SPLIT": True},
])
def test_the_d128_default_spills_nothing(constexprs):
    # 16-bit D = 128's default: lazy_rescale with speculative_p (S stays live beside the
    # speculative P, for a block that rescales) and two Q buffers, causal with the lse (and
    # snake and ragged_first), or split_tail's build.
    ptx = _compile(128, LAZY_RESCALE=True, SPEC_P=True, Q_BUFS=2, K_STAGES=2,
                   **constexprs).asm["ptx"]
    _assert_no_spills(ptx)


@pytest.mark.skipif(not static_report.have_sass_tools(), reason="needs ptxas")
def test_snake_compiles_causal_d128_without_spills():
    # The snake's tile index (a select on the wave's parity) in D = 128's default causal
    # build: the registers it takes are the producer's and the tile loop's, not the block
    # loop's.
    _assert_no_spills(_compile(128, SNAKE=True, LAZY_RESCALE=True, SPEC_P=True, Q_BUFS=2,
                               K_STAGES=2).asm["ptx"])


@pytest.mark.skipif(not static_report.have_sass_tools(), reason="needs ptxas")
def test_ragged_first_compiles_causal_d64_without_spills():
    # D = 64's causal default: three warpgroups of 160 registers, V one block behind K.
    cfg = hopper.default_config(64, "float16", causal=True)
    assert (cfg["ragged_first"], cfg["v_lag"], cfg["k_stages"], cfg["stages"]) == \
        (True, 1, 3, 5)
    _assert_no_spills(_compile(64, RAGGED_FIRST=True, SNAKE=True, LAZY_RESCALE=True,
                               O_IN_Q=False, LATE_WAIT=True, NUM_WG=3, CONSUMER_REGS=160,
                               V_LAG=1, K_STAGES=3, STAGES=5).asm["ptx"])


def test_cluster_multicasts_k_and_v_and_releases_to_both_ctas():
    # Each producer's K and V copies are multicast (two 64-key slices of a 128-key block),
    # every release is a remote arrival on both CTAs' barriers, and nothing spills.
    ptx = _compile(128, num_ctas=2, CAUSAL=False, RETURN_LSE=False).asm["ptx"]
    loads = re.findall(r"cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global\.mbarrier::"
                       r"complete_tx::bytes(\.multicast::cluster)? ", ptx)
    # Q's copies (one a warpgroup, two 64-wide boxes each at D = 128) are the CTA's own;
    # K's and V's are multicast.
    assert loads.count("") == 4 and loads.count(".multicast::cluster") >= 4, loads
    assert ptx.count("mbarrier.arrive.shared::cluster.b64") >= 10
    assert ptx.count("barrier.cluster.arrive.aligned;") == 2
    if static_report.have_sass_tools():
        _assert_no_spills(ptx)
        # Remote arrivals at CTA scope: `.release.cluster` put a MEMBAR.ALL.GPU before each
        # of them, and the kernel ran at half speed (H100, 2026-12-06).
        body = _block_loop_sass(ptx)
        assert sum("SYNCS.ARRIVE.TRANS64.RED" in b for b in body) == 4, body
        assert not any("MEMBAR" in b for b in body), body


@pytest.mark.skipif(not static_report.have_sass_tools(), reason="needs ptxas and nvdisasm")
def test_warp_arrivals_leave_the_block_loop_without_a_partition_barrier():
    # By default the turn's hand-over and V's release follow one bar.sync of the warpgroup's
    # 4 warps (one thread arrives for all); with per-warp arrivals each warp's lane 0
    # arrives on its own and the loop has no BAR.SYNC left.
    def bars(body):
        return sum(b.startswith("BAR.SYNC") for b in body)

    default = _block_loop_sass(_compile(128, CAUSAL=False).asm["ptx"])
    per_warp = _block_loop_sass(_compile(128, CAUSAL=False, PER_WARP=True).asm["ptx"])
    assert bars(default) == 1 and bars(per_warp) == 0, (bars(default), bars(per_warp))
    assert sum("SYNCS.ARRIVE" in b for b in per_warp) == sum("SYNCS.ARRIVE" in b
                                                            for b in default) == 3


@pytest.mark.skipif(not static_report.have_sass_tools(), reason="needs ptxas and nvdisasm")
def test_extra_n_keeps_its_block_loop_free_of_spills():
    # fp8 at D = 128 (no overlap: S 64 + 32, P, O 64 registers a thread): no spills, 14
    # wgmmas a 192-key block (4 + 2 K steps for S and S_x, 4 + 2 for the two PV products).
    ptx = _compile(128, fp8=True, CAUSAL=False, OVERLAP=False, O_IN_Q=False, BN_X=64).asm["ptx"]
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n64k32\.f32\.e4m3\.e4m3", ptx)
    body = _block_loop_sass(ptx, (8, 32), no_spills=True)
    assert sum("GMMA." in b for b in body) == 14
    # fp16 with the overlap and late_wait (S 96, one P of 192 keys, O): 28 wgmmas a block
    # and nothing spilled inside the loop; ptxas spills a few of the tile loop's values
    # (under 128 bytes, as the default causal build does in its epilogue).
    ptx = _compile(128, CAUSAL=False, LATE_WAIT=True, BN_X=64, STAGES=2, K_STAGES=2).asm["ptx"]
    body = _block_loop_sass(ptx, (8, 40))
    assert sum("GMMA." in b for b in body) == 28
    assert not any(b.startswith(("STL", "LDL")) for b in body), body
    _, log = static_report.whole_program_cubin(ptx, "sm_90a")
    assert int(re.search(r"(\d+) bytes spill stores", log).group(1)) <= 128, log


@pytest.mark.skipif(not static_report.have_sass_tools(), reason="needs ptxas and nvdisasm")
@pytest.mark.parametrize("fp8", [False, True])
def test_row_sum_mma_moves_the_row_sums_onto_the_tensor_cores(fp8):
    # The block loop's 64 FADDs a thread (P's row sums) become one m64n8 wgmma per K step
    # of the PV product (8 for 16-bit, 4 for fp8), whose block sums are added into l in
    # fp32 (4 FADDs a thread), and ptxas spills nothing.
    def counts(body):
        ops = [re.sub(r"^@!?U?P\w+\s+", "", b).split()[0] for b in body]
        return sum(o == "FADD" for o in ops), sum("GMMA." in o for o in ops)

    options = dict(fp8=True, OVERLAP=False, O_IN_Q=False) if fp8 else {}
    base = _block_loop_sass(_compile(128, CAUSAL=False, **options).asm["ptx"])
    ptx = _compile(128, CAUSAL=False, ROW_SUM_MMA=True, **options).asm["ptx"]
    row_sums = _block_loop_sass(ptx, (8, 32), no_spills=True)
    k_steps = 4 if fp8 else 8
    assert counts(base) == (70, 2 * k_steps)
    assert counts(row_sums) == (8, 3 * k_steps)
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n8k(16|32)\.f32\.", ptx)


@pytest.mark.skipif(not static_report.have_sass_tools(), reason="needs ptxas and nvdisasm")
@pytest.mark.parametrize("fp8", [False, True])
def test_the_block_mask_sits_behind_a_branch(fp8):
    # The mask (an FSEL a score, with the compares it needs) is for the blocks from n_full
    # on; the others must jump over it, not run it predicated off or if-converted, which
    # would cost an issue-bound fp8 loop about a fifth of its instructions (553 in the loop
    # body, about 433 on the unmasked path, 2026-12-07).
    options = (dict(fp8=True, OVERLAP=False, O_IN_Q=False, ROW_SUM_MMA=True) if fp8 else
               dict(LAZY_RESCALE=True, SPEC_P=True, Q_BUFS=2, K_STAGES=2))
    body = _block_loop_sass(_compile(128, CAUSAL=False, RETURN_LSE=False, SPLIT=True,
                                     **options).asm["ptx"])
    ops = [re.sub(r"^@!?U?P\w+\s+", "", b).split()[0] for b in body]
    fsel = [i for i, o in enumerate(ops) if o == "FSEL"]
    assert len(fsel) == 64, len(fsel)  # one a score: 64 a thread
    # The last conditional branch before them jumps over the mask and nothing else: the
    # block's max, exp2s and wgmmas are all outside [branch, last FSEL].
    jump = max(i for i in range(fsel[0]) if ops[i] == "BRA" and body[i].lstrip()[0] == "@")
    between = ops[jump + 1:fsel[-1] + 1]
    assert fsel[0] - jump < 48 and len(between) < 160, (jump, fsel[0], fsel[-1])
    assert not {"MUFU", "FMNMX", "FFMA", "BAR"} & set(between)
    assert not any("GMMA" in o for o in between)


@gluon.jit
def _fp8_operand_kernel(x_ptr, y_ptr):
    # S and O are both [64, 128] wgmma accumulators at D = 128: one layout.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 128, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=4)
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, s_layout))
    cols = gl.arange(0, 128, layout=gl.SliceLayout(0, s_layout))
    s = gl.load(x_ptr + gl.expand_dims(rows, 1) * 128 + gl.expand_dims(cols, 0))
    p = hopper._p_operand(s, gl.float8e4nv, p_layout, True)
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, p_layout))
    cols = gl.arange(0, 128, layout=gl.SliceLayout(0, p_layout))
    gl.store(y_ptr + gl.expand_dims(rows, 1) * 128 + gl.expand_dims(cols, 0), p)


def test_fp8_p_operand_is_packed_in_place_in_key_order():
    import ml_dtypes
    x = np.random.default_rng(3).standard_normal((64, 128)).astype(np.float32)
    y = np.zeros((64, 128), ml_dtypes.float8_e4m3fn)
    _fp8_operand_kernel[(1,)](x, y, num_warps=4)
    order = [32 * g + k for g in range(4) for k in hopper.FP8_KEY_ORDER]
    assert np.array_equal(y.view(np.uint8), x[:, order].astype(y.dtype).view(np.uint8))
    # In the wgmma register order, the conversion moves no data between lanes: the one
    # shuffle broadcasts lane 0's warp index, and nothing goes through shared memory.
    ptx = gluon.compile(_fp8_operand_kernel, {"x_ptr": "*fp32:16", "y_ptr": "*fp8e4nv:16"},
                        {}, target="sm_90a", num_warps=4).asm["ptx"]
    assert re.findall(r"shfl\.sync\.(\w+)\.b32\s+%r\d+, %r\d+, (\w+),", ptx) == [("idx", "0")]
    assert "st.shared" not in ptx and "ld.shared" not in ptx
    assert "cvt.rn.satfinite.e4m3x2.f32" in ptx


def _compile(D, BN=128, fp8=False, num_ctas=1, **constexprs):
    """attention_kernel for sm_90a at head dim D (fp16 or fp8 inputs, 16 heads of 4096 rows):
    D = 128's default schedule, causal, with the given constexprs changed (`num_ctas`: CTAs
    a program, as `cluster` launches it)."""
    import ml_dtypes
    from gluon.nvidia.hopper import TensorDescriptor

    x = np.zeros((1, 16, 4096, D), ml_dtypes.float8_e4m3fn if fp8 else np.float16)
    bits = 8 if fp8 else 16
    block = lambda rows: TensorDescriptor.from_tensor(x, [1, 1, rows, D],  # noqa: E731
                                                      hopper._nvmma(bits, D))
    out = TensorDescriptor.from_tensor(np.zeros((1, 16, 4096, D), np.float16), [1, 1, 64, D],
                                       hopper._nvmma(16, D))
    v = hopper.transposed_v_descriptor(x, BN, hopper.FP8_KEY_ORDER) if fp8 else block(BN)
    values = {"BN": BN, "STAGES": 3, "CAUSAL": True, "V_T": fp8, "RETURN_LSE": True,
              "O_IN_Q": not fp8, "OVERLAP": not fp8, "KV_AHEAD": 1, "NUM_WG": 2,
              "CONSUMER_REGS": 240, "Q_IN_REGS": False, "PINGPONG": True, "K_STAGES": 3,
              "V_LAG": 0, "LATE_WAIT": False, "ROW_SUM_MMA": False, "PROMOTE_PV": False,
              "BN_X": 0, "PER_WARP": False, "LAZY_RESCALE": False, "SPLIT": False,
              "O_DIRECT": False, "SPEC_P": False}
    values.update(constexprs)
    bn_x = values["BN_X"]
    v_x = (hopper.transposed_v_descriptor(x, bn_x, hopper.FP8_KEY_ORDER) if fp8 else
           block(bn_x)) if bn_x else v
    return gluon.compile(
        hopper.attention_kernel,
        {"q_desc": block(64), "k_desc": block(BN), "v_desc": v, "o_desc": out,
         "lse_ptr": "*fp32:16", "N_Q": "i32", "N_KV": "i32", "H": "i32", "GROUP": "i32",
         "BH": "i32", "num_tiles": "i32", "qk_scale": "fp32", "o_scale": "fp32",
         "k_desc_x": block(bn_x) if bn_x else block(BN), "v_desc_x": v_x,
         "split_part": "*fp32:16", "split_ml": "*fp32:16", "split_count": "*i32:16",
         "o_ptr": "*fp16:16"},
        values, target="sm_90a", num_warps=4, num_ctas=num_ctas)


@pytest.fixture(scope="module")
def compiled_fp16():
    return _compile(128)


def test_the_ptx_has_the_fa3_ingredients(compiled_fp16):
    ptx = compiled_fp16.asm["ptx"]
    # QK^T from shared memory; PV with P in registers as the A operand (4 b32 registers).
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16 \{[^}]+\}, "
                     r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+", ptx)
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group" in ptx  # O's TMA store
    assert re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32\s+(\d+)", ptx) == \
        [("dec", "24"), ("inc", "240"), ("inc", "240")]
    # Named barriers: each partition's own (bar.sync id, threads), ids 1..3.
    assert {int(i) for i in re.findall(r"bar\.sync\s+(\d+), \d+;", ptx)} >= {1, 2}
    assert "ex2.approx" in ptx
    # P goes from the S accumulator to the A-operand layout in registers: the only shared
    # memory ld/st are the hand-off of the partitions' captures.
    assert len(re.findall(r"\bld\.shared", ptx)) <= 1
    assert len(compiled_fp16.asm["cubin"]) > 0


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (CUDA toolkit)")
def test_whole_program_ptxas_keeps_setmaxnreg_and_barely_spills(compiled_fp16, tmp_path):
    # nvJitLink compiles PTX as a separately linked unit and drops setmaxnreg (C7504; the
    # launcher then uses the driver JIT): ptxas on the whole program is what runs.
    src = tmp_path / "fa.ptx"
    src.write_text(compiled_fp16.asm["ptx"])
    out = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(src), "-o",
                          str(tmp_path / "fa.cubin")], capture_output=True, text=True)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    # Two P operands live at once (the one the in-flight PV wgmma reads and the next) leave
    # ptxas a few registers short at 240: it spills a few epilogue shared-memory addresses
    # computed in the partition's prologue (stored once, reloaded once per tile), never in
    # the main loop. D = 64, D = 256 and fp8 do not spill at all.
    stores = int(re.search(r"(\d+) bytes spill stores", log).group(1))
    assert stores <= 128, log
    for warning in ("C7507", "C7508", "C7511", "C7512"):
        assert warning not in log, log


@pytest.fixture(scope="module")
def compiled_d64():
    # D = 64's default schedule: three consumer warpgroups of 160 registers taking turns,
    # each with PV under the next softmax and PV's wait after the exp2s.
    cfg = hopper.default_config(64, "float16")
    assert (cfg["warpgroups"], cfg["overlap"], cfg["pingpong"], cfg["late_wait"]) == \
        (3, True, True, True)
    return _compile(64, CAUSAL=False, RETURN_LSE=False, O_IN_Q=False, OVERLAP=True,
                    LATE_WAIT=True, NUM_WG=3, CONSUMER_REGS=160)


def test_three_consumer_warpgroups_at_d64(compiled_d64):
    ptx = compiled_d64.asm["ptx"]
    # 16 warps: 3 consumer warpgroups and the producer's; 64K registers leave 168 for the
    # default warpgroup and 160 for the two others once the producer's drops to 24.
    assert re.search(r"\.maxntid 512\s+\.maxnreg 128\b", ptx)
    assert re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32\s+(\d+)", ptx) == \
        [("dec", "24"), ("inc", "168"), ("inc", "160"), ("inc", "160")]
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx   # S = Q K^T
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx    # O += P V
    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas (CUDA toolkit) for the spill check")
    log = _assert_no_spills(ptx)  # raises if ptxas fails
    for warning in ("C7507", "C7508", "C7511", "C7512"):
        assert warning not in log, log


def _assert_no_spills(ptx):
    """The whole-program ptxas build of `ptx` for sm_90a (the driver JIT's, which keeps
    setmaxnreg) spills nothing; returns ptxas's log."""
    _, log = static_report.whole_program_cubin(ptx, "sm_90a")
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log
    return log


def _block_loop_sass(ptx, wgmmas=(8, 24), no_spills=False):
    """The first loop with `wgmmas` (a range) wgmmas (HGMMA, QGMMA for fp8), S's and PV's,
    in the whole-program ptxas build: the first consumer warpgroup's block loop. With
    `no_spills`, that build must spill nothing (ptxas runs once for both)."""
    cubin, log = static_report.whole_program_cubin(ptx, "sm_90a")
    if no_spills:
        assert "0 bytes spill stores, 0 bytes spill loads" in log, log
    for body in static_report.sass_loops(static_report.disassemble(cubin)):
        if wgmmas[0] <= sum("GMMA." in b for b in body) <= wgmmas[1]:
            return body
    raise AssertionError("no block loop found in the SASS")


@pytest.mark.skipif(not static_report.have_sass_tools(), reason="needs ptxas and nvdisasm")
def test_late_wait_packs_p_into_the_registers_the_finished_pv_read():
    # Default (the PV wait at the next block's top): P_j is packed while P_{j-1} is still in
    # flight, into other registers, and copied into the wgmma's A registers at the next
    # issue. late_wait: the wait follows this block's exp2s (K_{j+1}'s spin loop between
    # them keeps ptxas from hoisting it) and P_j is packed where P_{j-1} was: no copies.
    def moves(body):
        return sum(re.sub(r"^@!?U?P\w+\s+", "", b).split()[0] in ("MOV", "IMAD.MOV.U32")
                   for b in body)

    early = _block_loop_sass(_compile(128).asm["ptx"])
    late = _block_loop_sass(_compile(128, LATE_WAIT=True).asm["ptx"])
    pv_wait = [i for i, b in enumerate(late) if b == "WARPGROUP.DEPBAR.LE gsb0, 0x0"]
    exp2s = [i for i, b in enumerate(late) if b.startswith("MUFU.EX2")]
    assert len(pv_wait) == 1 and pv_wait[0] > exp2s[-1], late
    assert moves(early) >= 30 and moves(late) <= 12, (moves(early), moves(late))


def test_fp8_p_crosses_the_loop_as_packed_registers():
    # The loop carries P's 64 e4m3 bytes as 16 32-bit registers (scf.for lowering), each
    # made of two `cvt.rn.satfinite.e4m3x2` halves in one `mov.b32 {lo, hi}`. Carried a
    # byte at a time, every A register had been rebuilt with byte inserts (bfi) in every
    # block: 44 PRMT/BFI in the loop's SASS, 699 instructions a block against 602 now.
    ptx = _compile(128, fp8=True).asm["ptx"]
    assert "bfi.b32" not in ptx
    assert len(re.findall(r"mov\.b32\s+%r\d+, \{%rs\d+, %rs\d+\};", ptx)) >= 2 * 16
    if static_report.have_sass_tools():
        loop = _block_loop_sass(ptx, wgmmas=(6, 24))
        assert not [b for b in loop if b.split()[0] in ("PRMT", "BFI")], loop


@pytest.mark.skipif(not static_report.have_sass_tools(), reason="needs ptxas and nvdisasm")
@pytest.mark.parametrize("fp8, constexprs", [
    (False, dict(LAZY_RESCALE=True, WARP_RESCALE=True, SPEC_P=True)),   # D = 128's default
    (True, dict(OVERLAP=False, ROW_SUM_MMA=True, LAZY_RESCALE=True, WARP_RESCALE=True)),
    # fp8 with the overlap, as the launcher builds it (late_wait): without late_wait, ptxas
    # packed P_j into the registers the PV wgmma of P_{j-1} was reading (16 writes).
    (True, dict(OVERLAP=True, LATE_WAIT=True, ROW_SUM_MMA=True, LAZY_RESCALE=True,
                WARP_RESCALE=True)),
])
def test_no_register_an_inflight_wgmma_reads_is_written(fp8, constexprs):
    body = _block_loop_sass(_compile(128, fp8=fp8, CAUSAL=False, O_IN_Q=not fp8,
                                     **constexprs).asm["ptx"], (6, 24), no_spills=True)
    assert sum(bool(re.match(r"[HQ]GMMA\.\S+ R\d+, R\d+, gdesc", b)) for b in body) >= 4, body
    assert static_report.inflight_wgmma_operand_writes(body) == []


@pytest.mark.skipif(not static_report.have_sass_tools(), reason="needs ptxas and nvdisasm")
@pytest.mark.parametrize("constexprs", [
    dict(SPEC_P=False),               # P once, after the row max
    dict(SPEC_P=True, SCALE_P=True),  # P * alpha in the grown warps, packed after that
])
def test_exact_maxima_loops_keep_the_pv_operand_and_spill_nothing_in_the_loop(constexprs):
    # rescale_slack=0 with warp_rescale (exact maxima, O rescaled only in grown warps): no
    # write to a register the in-flight PV wgmma reads, no local memory in the block loop
    # (ptxas spills up to 28 bytes of the tile loop's values outside it), and O's 64
    # rescaling FMULs behind each warp's vote; with SCALE_P P's 64 FMULs too.
    cubin, _ = static_report.whole_program_cubin(
        _compile(128, CAUSAL=False, LAZY_RESCALE=True, WARP_RESCALE=True, SLACK=0.0,
                 **constexprs).asm["ptx"], "sm_90a")
    body = next(b for b in static_report.sass_loops(static_report.disassemble(cubin))
                if 6 <= sum("GMMA." in x for x in b) <= 24)
    assert static_report.inflight_wgmma_operand_writes(body) == []
    assert not [x for x in body if re.match(r"(@!?U?P\w+\s+)?(STL|LDL)\b", x)], body
    fmuls = sum(x.startswith("FMUL") for x in body)
    assert fmuls >= (128 if constexprs["SPEC_P"] else 64), fmuls
    assert sum(x.startswith("VOTE.ANY") for x in body) == (3 if constexprs["SPEC_P"] else 1)
