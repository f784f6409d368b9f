"""examples/flash_attention/hopper_bwd.py: the warp-specialized Hopper attention backward in
the interpreter (fp16/bf16, D 64 and 128, causal and not, GQA, ragged and unequal N, several
async completion orders) against a float64 reference, its input checks, and its PTX / cubin
for sm_90a. On the GPU: tests/gpu/test_flash_attention_bwd_gpu.py."""

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

import hopper  # noqa: E402
import hopper_bwd  # noqa: E402

import gluon  # noqa: E402

# Max |g - ref| / max |ref|: P and dS are rounded to the input type before their products.
TOLERANCE = {"float16": 3e-3, "bfloat16": 2e-2}


def _inputs(dtype, D, causal, B, H, H_kv, N_q, N_kv):
    q, k, v = hopper.random_inputs(B, H, H_kv, N_q, N_kv, D, dtype, seed=N_q + D)
    o, lse = hopper.attention_forward(q, k, v, causal=causal, return_lse=True)
    do = np.random.default_rng(N_kv).standard_normal(o.shape).astype(q.dtype)
    return q, k, v, o, lse, do


@pytest.mark.parametrize("dtype, D, causal, B, H, H_kv, N_q, N_kv", [
    ("float16", 64, False, 2, 2, 1, 130, 130),     # GQA, ragged last blocks
    ("float16", 64, True, 1, 4, 2, 200, 200),      # causal GQA: blocks skipped and masked
    ("bfloat16", 128, True, 1, 2, 2, 100, 260),    # N_q < N_kv: last query sees last key
    ("float16", 128, True, 1, 1, 1, 300, 130),     # N_q > N_kv: first rows see no key
    ("bfloat16", 128, False, 1, 2, 1, 129, 67),    # half of the second key block is past N_kv
])
def test_the_interpreter_matches_float64(dtype, D, causal, B, H, H_kv, N_q, N_kv, monkeypatch):
    q, k, v, o, lse, do = _inputs(dtype, D, causal, B, H, H_kv, N_q, N_kv)
    refs = hopper_bwd.reference(q, k, v, do, causal)
    for seed in (0, 1, 2):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        grads = hopper_bwd.attention_backward(q, k, v, o, lse, do, causal=causal)
        for name, g, ref, shape in zip(("dq", "dk", "dv"), grads, refs,
                                       (q.shape, k.shape, v.shape)):
            assert g.dtype.name == dtype and g.shape == shape, name
            err = float(np.abs(g.astype(np.float64) - ref).max() / np.abs(ref).max())
            assert err <= TOLERANCE[dtype], (seed, name, err)


def test_sm_scale_and_rows_that_see_no_key_get_zero_dq():
    q, k, v, o, lse, do = _inputs("float16", 64, True, 1, 1, 1, 150, 70)
    dq, dk, dv = hopper_bwd.attention_backward(q, k, v, o, lse, do, causal=True)
    assert not dq[0, 0, :80].any()   # queries 0..79 see no key (N_q - N_kv = 80)
    o2, lse2 = hopper.attention_forward(q, k, v, return_lse=True, sm_scale=0.3)
    grads = hopper_bwd.attention_backward(q, k, v, o2, lse2, do, sm_scale=0.3)
    for g, ref in zip(grads, hopper_bwd.reference(q, k, v, do, sm_scale=0.3)):
        assert float(np.abs(g.astype(np.float64) - ref).max() / np.abs(ref).max()) < 3e-3


@pytest.mark.parametrize("n_q, n_kv", [(64, 0), (0, 64)])
def test_no_keys_give_zero_dq_and_no_rows_zero_dk_dv(n_q, n_kv):
    rng = np.random.default_rng(1)
    q, do = (rng.standard_normal((1, 2, n_q, 64)).astype(np.float16) for _ in range(2))
    k, v = (rng.standard_normal((1, 1, n_kv, 64)).astype(np.float16) for _ in range(2))
    o, lse = hopper.attention_forward(q, k, v, return_lse=True)
    dq, dk, dv = hopper_bwd.attention_backward(q, k, v, o, lse, do)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    assert not dq.any() and not dk.any() and not dv.any()


def test_bad_inputs_are_named():
    f = hopper_bwd.attention_backward
    x = np.zeros((1, 2, 64, 64), np.float16)
    lse = np.zeros((1, 2, 64), np.float32)
    with pytest.raises(ValueError, match=r"head dim D = 256 is not supported; allowed: 64, "
                                         r"128"):
        y = np.zeros((1, 2, 64, 256), np.float16)
        f(y, y, y, y, lse, y)
    with pytest.raises(ValueError, match=r"q has dtype float32; allowed: float16, bfloat16"):
        y = x.astype(np.float32)
        f(y, y, y, y, lse, y)
    with pytest.raises(ValueError, match=r"lse must have shape \(B, H, N_q\) = \(1, 2, 64\), "
                                         r"got \(1, 2, 32\)"):
        f(x, x, x, x, lse[:, :, :32], x)
    with pytest.raises(ValueError, match=r"lse has dtype float16; it must be float32"):
        f(x, x, x, x, lse.astype(np.float16), x)
    with pytest.raises(ValueError, match=r"do must have q's shape \(1, 2, 64, 64\), got "
                                         r"\(1, 2, 32, 64\)"):
        f(x, x, x, x, lse, x[:, :, :32])
    with pytest.raises(ValueError, match=r"q has H = 2 heads, not a multiple of k/v's "
                                         r"H_kv = 3"):
        y = np.zeros((1, 3, 64, 64), np.float16)
        f(x, y, y, x, lse, x)
    with pytest.raises(ValueError, match=r"dq_swizzle must be 32, 64 or 128 \(bytes\), got 16"):
        f(x, x, x, x, lse, x, dq_swizzle=16)
    with pytest.raises(ValueError, match=r"dq_stages must be 1, or 2 with dq_writer=True, got 2 "
                                         r"\(dq_writer=False\)"):
        f(x, x, x, x, lse, x, dq_stages=2)
    with pytest.raises(ValueError, match=r"stages must be 2, 3 or 4, got 1"):
        f(x, x, x, x, lse, x, stages=1)
    with pytest.raises(ValueError, match=r"paired=True takes 2 Q / dO stages and none of "
                                         r"dq_writer, early_dv and dq_stages=2 .*, got stages=3, "
                                         r"dq_writer=False"):
        f(x, x, x, x, lse, x, paired=True, stages=3)
    with pytest.raises(ValueError, match=r"split_tail=True needs the paired consumer and one "
                                         r"CTA a tile, got paired=True, persistent=True"):
        f(x, x, x, x, lse, x, split_tail=True, persistent=True)
    with pytest.raises(ValueError, match=r"split_tail=True needs .*, got paired=False"):
        f(x, x, x, x, lse, x, split_tail=True, paired=False)
    with pytest.raises(ValueError, match=r"num_sms must be an int >= 1, got 0"):
        f(x, x, x, x, lse, x, num_sms=0)
    with pytest.raises(ValueError, match=r"lpt_heads must be an int >= 0, got -1"):
        f(x, x, x, x, lse, x, lpt_heads=-1)


def _compile(D, causal, dq_swizzle=hopper_bwd.DQ_SWIZZLE, dq_writer=False, early_dv=False,
             dq_stages=1, stages=None, paired=False, split=False):
    from gluon.nvidia.hopper import TensorDescriptor

    x = np.zeros((1, 16, 4096, D), np.float16)
    block = TensorDescriptor.from_tensor(x, [1, 1, 64, D], hopper_bwd._nvmma(D))
    kv_block = TensorDescriptor.from_tensor(x, [1, 1, 128, D], hopper_bwd._nvmma(D))
    dq = TensorDescriptor.from_tensor(x.astype(np.float32), [1, 1, 64, D],
                                      hopper_bwd.dq_layout(dq_swizzle))
    rows = TensorDescriptor.from_tensor(np.zeros((16, 4096), np.float32), [1, 64],
                                        hopper_bwd.ROW_LAYOUT)
    return gluon.compile(
        hopper_bwd.attention_bwd_kernel,
        {"q_desc": block, "do_desc": block, "k_desc": kv_block, "v_desc": kv_block,
         "dq_desc": dq, "neg_lse2_desc": rows, "delta_desc": rows,
         "dk_ptr": "*fp16:16", "dv_ptr": "*fp16:16", "N_Q": "i32", "N_KV": "i32", "N_PAD": "i32",
         "H_KV": "i32", "GROUP": "i32", "num_tiles": "i32", "qk_scale": "fp32",
         "sm_scale": "fp32", "num_sms": "i32", "split_part": "*fp32:16",
         "split_count": "*i32:16", "lpt_heads": "i32"},
        {"STAGES": stages or hopper_bwd.STAGES,
         "CAUSAL": causal, "DQ_WRITER": dq_writer, "EARLY_DV": early_dv, "DQ_STAGES": dq_stages,
         "PAIRED": paired, "SPLIT": split},
        target="sm_90a", num_warps=8)


@pytest.fixture(scope="module")
def compiled_fp16():
    return _compile(128, True)


def test_head_dim_64_compiles_with_dq_split_over_the_warpgroups():
    # D = 64: each warpgroup computes 32 columns of dQ (m64n32), reading a 32-column slice of
    # K inside its 128-byte swizzle; S^T, dP^T are m64n64 and dV, dK m64n64 too.
    ptx = _compile(64, False).asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx
    assert "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16" in ptx


def test_the_ptx_has_the_fa3_ingredients(compiled_fp16):
    import re
    ptx = compiled_fp16.asm["ptx"]
    # S^T and dP^T from shared memory (m64n64 per warpgroup: 64 keys x 64 queries); dV, dK
    # with P^T / dS^T in registers as the A operand (m64n128: D = 128); dQ = dS K with dS^T
    # from shared memory (transposed A), m64n64 per warpgroup (its half of D).
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16 \{[^}]+\}, "
                     r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+", ptx)
    smem_ab = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.f16\.f16 \{[^}]+\}, "
                         r"%rd\d+, %rd\d+, p, 1, 1, (\d), (\d);", ptx)
    assert ("0", "0") in smem_ab  # S^T = K Q^T, dP^T = V dO^T: both K-major
    assert ("1", "1") in smem_ab  # dQ = dS K: dS^T read transposed, K N-major
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32\s+(\d+)", ptx) == \
        [("dec", "24"), ("inc", "240")]
    # dQ: one TMA reduce-add per 32-column (128-byte) box of the fp32 tile, no per-element
    # atomics (test_dq_box_width below has the other widths) ...
    assert ptx.count("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile."
                     "bulk_group") == 4
    # ... behind one branch that only thread 0 takes, not predicated box by box (ptxas
    # made every warp step over each predicated box).
    assert len(re.findall(r"@!%p\d+ bra \$tma_skip\d+;", ptx)) == 1
    assert not re.search(r"@%p\d+ cp\.reduce", ptx)
    assert not re.search(r"\b(atom|red)\.", ptx)
    # K steps after the first add their offset to the operand's one descriptor register
    # inside the wgmma's asm: no 64-bit register per step for LLVM to hoist out of the loop.
    assert re.search(r"add\.s64 da, %rd\d+, \d+;", ptx)
    assert re.search(r"add\.s64 db, %rd\d+, \d+;", ptx)
    assert "ex2.approx" in ptx
    assert len(compiled_fp16.asm["cubin"]) > 0


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (CUDA toolkit)")
@pytest.mark.parametrize("causal, dq_swizzle", [(False, 128), (True, 128), (True, 32)])
def test_whole_program_ptxas_accepts_it(causal, dq_swizzle, tmp_path):
    src = tmp_path / "bwd.ptx"
    src.write_text(_compile(128, causal, dq_swizzle).asm["ptx"])
    out = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(src), "-o",
                          str(tmp_path / "bwd.cubin")], capture_output=True, text=True)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    # No wgmma wait injected by ptxas (C7517): the S^T / dP^T wgmmas (use_acc=False) take
    # undef accumulator inputs instead of a zero register that a dQ wgmma also wrote.
    assert "C7517" not in log, log
    # No spills: dK, dV, S^T and dP^T take 192 of the consumers' 240 registers; the
    # loop-invariant shared addresses and wgmma descriptors must not crowd them out.
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log


def test_split_tail_counts_in_with_one_release_and_spills_nothing():
    # The fix-up of a shared tile: one gpu-scope acq_rel atomic (after a barrier of the 8
    # consumer warps), and the partial dK / dV loads and stores fit the 240 registers.
    from tools import static_report

    ptx = _compile(128, False, paired=True, split=True).asm["ptx"]
    assert ptx.count("atom.acq_rel.gpu.global.add.u32") == 1
    if static_report.have_sass_tools():
        _, log = static_report.whole_program_cubin(ptx, "sm_90a")
        assert "0 bytes spill stores, 0 bytes spill loads" in log, log


def test_the_dp_wait_follows_the_exp2s_without_a_causal_mask():
    # ptxas moves a wgmma wait to the top of its basic block. The key mask, now a branch
    # taken by the last key block only, starts a new block after the exp2s, so P^T's exp2s
    # run while dP^T = V dO^T is still on the tensor cores (the causal mask's branch did
    # that for causal builds already; non-causal ones waited for dP^T before the exp2s).
    from tools import static_report as sr
    if not sr.have_sass_tools():
        pytest.skip("needs ptxas and nvdisasm (the nvidia-cuda-nvdisasm wheel)")
    cubin, _ = sr.whole_program_cubin(_compile(128, False).asm["ptx"], "sm_90a")
    loop = next(body for body in sr.sass_loops(sr.disassemble(cubin))
                if sum("HGMMA" in b for b in body) >= 24)
    s_wait = loop.index("WARPGROUP.DEPBAR.LE gsb0, 0x1")
    dp_wait = loop.index("WARPGROUP.DEPBAR.LE gsb0, 0x0")
    exp2s = [i for i, b in enumerate(loop) if b.startswith("MUFU.EX2")]
    assert s_wait < exp2s[0] and exp2s[-1] < dp_wait, loop


@pytest.mark.parametrize("causal", [False, True])
def test_paired_blocks_meet_at_one_barrier_each(causal):
    # `paired`: the loop body is two query blocks (64 HGMMAs: S^T, dP^T, dV, dK and dQ of
    # each) through separate dS^T and dQ tiles, and the hazard analysis puts one partition
    # barrier in each (dS^T's stores before the dQ wgmma), where the default has two a
    # block. Each block's body also issues the previous block's 4 dQ reduce boxes.
    from tools import static_report as sr
    if not sr.have_sass_tools():
        pytest.skip("needs ptxas and nvdisasm (the nvidia-cuda-nvdisasm wheel)")
    ptx = _compile(128, causal, paired=True, stages=2).asm["ptx"]
    cubin, _ = sr.whole_program_cubin(ptx, "sm_90a")
    loops = sr.sass_loops(sr.disassemble(cubin))
    pair = min((body for body in loops if sum("HGMMA" in b for b in body) == 64), key=len)
    assert sum("BAR.SYNC" in b for b in pair) == 2, pair
    assert sum(b.startswith("UTMAREDG") for b in pair) == 8
    # Each warp's stage release (its lane 0's arrival) follows the wait for all of the
    # block's wgmmas (releasing before dQ's was slower).
    arrivals = [i for i, b in enumerate(pair) if "SYNCS.ARRIVE" in b]
    waits = [(i, b.split()[-1]) for i, b in enumerate(pair) if "WARPGROUP.DEPBAR.LE" in b]
    assert len(arrivals) == 2, pair
    for a in arrivals:
        before = [w for i, w in waits if i < a][-1]
        assert before == "0x0", (a, waits)


@pytest.mark.parametrize("dq_swizzle, boxes, addresses", [(32, 16, 1), (64, 8, 2), (128, 4, 4)])
def test_dq_box_width(dq_swizzle, boxes, addresses):
    # D = 128: dQ's 128 fp32 columns in boxes of 8, 16 or 32 columns, one TMA reduce each.
    # Each thread stores its 16 register pairs at `addresses` base addresses plus immediates
    # (the wider swizzles XOR the column groups apart).
    import re
    ptx = _compile(128, False, dq_swizzle).asm["ptx"]
    assert ptx.count("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile."
                     "bulk_group") == boxes
    dq_stores = re.findall(r"st\.shared\.v2\.b32\s+\[(%rd\d+)\+?\d*\]", ptx)
    assert len(dq_stores) == 16 and len(set(dq_stores)) == addresses, dq_stores


@pytest.mark.parametrize("options, causal", [
    ({"dq_swizzle": 32}, False), ({"dq_swizzle": 64}, True),  # 16 or 8 TMA boxes for dQ
    ({"persistent": True}, False), ({"persistent": True}, True),  # 2 CTAs walk the tiles
    ({"dq_writer": True}, False), ({"dq_writer": True, "persistent": True}, True),
    ({"early_dv": True}, False), ({"early_dv": True, "dq_writer": True}, True),
    ({"dq_writer": True, "dq_stages": 2, "stages": 2}, True),
    ({"paired": False}, False), ({"paired": False}, True),  # two barriers a query block
    ({"stages": 3}, True)])
def test_backward_options_match_float64(options, causal, monkeypatch):
    q, k, v, o, lse, do = _inputs("float16", 128, causal, 1, 2, 1, 200, 330)
    refs = hopper_bwd.reference(q, k, v, do, causal)
    for seed in (0, 1):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        grads = hopper_bwd.attention_backward(q, k, v, o, lse, do, causal=causal, **options)
        for g, ref in zip(grads, refs):
            err = float(np.abs(g.astype(np.float64) - ref).max() / np.abs(ref).max())
            assert err <= TOLERANCE["float16"], (seed, err)


@pytest.mark.parametrize("B, H, H_kv, N_q, N_kv, num_sms", [
    (1, 2, 1, 200, 330, 2),   # 3 tiles on 2 CTAs: tile 1 cut inside the group's second head
    (2, 2, 2, 200, 200, 3),   # 8 tiles: 3 whole, 5 dealt out as 20 query blocks to 3 CTAs
    (1, 4, 1, 130, 300, 2),   # GROUP 4, ragged: cuts between heads and past N_q
])
def test_split_tail_matches_float64(B, H, H_kv, N_q, N_kv, num_sms, monkeypatch):
    # split_tail: the last tiles' query blocks dealt out to num_sms CTAs; a tile shared by
    # two is finished by the second from both partial dK and dV, whichever arrives first.
    # The arrival counts end at 0 for the next launch.
    q, k, v, o, lse, do = _inputs("float16", 64, False, B, H, H_kv, N_q, N_kv)
    refs = hopper_bwd.reference(q, k, v, do, False)
    made, zeros, empty = [], hopper_bwd._zeros_i32, hopper_bwd._empty
    monkeypatch.setattr(hopper_bwd, "_zeros_i32", lambda *a: made.append(zeros(*a)) or made[-1])
    parts = []

    def nan_empty(like, shape, dtype_name):  # the partials NaN until written
        x = empty(like, shape, dtype_name)
        if dtype_name == "float32":
            x[...] = np.nan
            if len(shape) == 5:
                parts.append(x)
        return x
    monkeypatch.setattr(hopper_bwd, "_empty", nan_empty)
    for seed in (0, 1, 2):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        grads = hopper_bwd.attention_backward(q, k, v, o, lse, do, split_tail=True,
                                              num_sms=num_sms)
        for name, g, ref in zip(("dq", "dk", "dv"), grads, refs):
            err = float(np.abs(g.astype(np.float64) - ref).max() / np.abs(ref).max())
            assert err <= TOLERANCE["float16"], (seed, name, err)
        assert made[-1].shape == (num_sms,) and not made[-1].any()
        assert parts[-1].shape == (num_sms, 2, 2, 128, 64) and np.isfinite(parts[-1]).any()


@pytest.mark.parametrize("options", [
    {"lpt_heads": 2}, {"lpt_tail": True, "num_sms": 4},  # the last 2 of 4 heads; all 4
    {"lpt_heads": 3, "paired": False}, {"lpt_heads": 2, "dq_writer": True}])
def test_lpt_tail_matches_float64(options, monkeypatch):
    # The last heads' tiles key block by key block across the heads (longest first; here 4
    # (batch, kv head) pairs of 3 key blocks): every CTA's producer, consumers and dQ
    # writer must map its tile to the same block and head.
    q, k, v, o, lse, do = _inputs("float16", 64, True, 2, 4, 2, 200, 330)  # 4 x 3 tiles
    refs = hopper_bwd.reference(q, k, v, do, True)
    for seed in (0, 1):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        grads = hopper_bwd.attention_backward(q, k, v, o, lse, do, causal=True, **options)
        for name, g, ref in zip(("dq", "dk", "dv"), grads, refs):
            err = float(np.abs(g.astype(np.float64) - ref).max() / np.abs(ref).max())
            assert err <= TOLERANCE["float16"], (seed, name, err)
