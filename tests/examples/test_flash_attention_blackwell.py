"""examples/flash_attention/blackwell.py: the FA4-class Blackwell attention forward in the
interpreter (fp16 / bf16 / fp8, D 64 and 128, causal and not, GQA, ragged and unequal N,
tiles that see no key, several tcgen05 / TMA completion orders; a race or a never-written
tensor-memory read would raise) against float64, its exp2 polynomial, its input checks, and
its sm_100a PTX / cubin (whole-program ptxas: no spills at the chosen register split).
No Blackwell GPU exists here; tests/gpu/test_flash_attention_blackwell_gpu.py checks the
clear error a non-Blackwell GPU gives."""

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

import blackwell  # noqa: E402

# Max |o - ref| / max |ref|: P is rounded to the input type before the P V product.
TOLERANCE = {"float16": 2e-3, "bfloat16": 1.5e-2, "float8_e4m3fn": 8e-2}
# |lse - ref|: a quarter of each row's exponentials come from the degree-3 polynomial
# (relative error 7.5e-5), so l and lse carry up to that much.
LSE_TOLERANCE = {3: 1e-4, 5: 2e-6}


def _check(dtype, D, causal, shape, programs, seeds, monkeypatch, inputs=None, **options):
    B, H, H_kv, N_q, N_kv = shape
    q, k, v = inputs or blackwell.random_inputs(B, H, H_kv, N_q, N_kv, D, dtype,
                                                seed=N_q + D)
    fp8 = dtype == "float8_e4m3fn"
    descales = (0.5, 0.75, 1.5) if fp8 else (1.0, 1.0, 1.0)
    kw = dict(zip(("q_descale", "k_descale", "v_descale"), descales)) if fp8 else {}
    ref_o, ref_lse = blackwell.reference(q, k, v, causal, descales=descales)
    for seed in seeds:
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        o, lse = blackwell.attention_forward(q, k, v, causal=causal, return_lse=True,
                                             num_programs=programs, **kw, **options)
        assert o.dtype.name == ("float16" if fp8 else dtype)
        err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
        assert err <= TOLERANCE[dtype], (seed, err)
        assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))
        finite = np.isfinite(ref_lse)
        lerr = float(np.abs(lse[finite] - ref_lse[finite]).max())
        assert lerr < LSE_TOLERANCE[options.get("poly_degree", 3)], (seed, lerr)
        assert not o[~finite[..., None].repeat(D, -1)].any()  # rows with no key: o = 0


@pytest.mark.parametrize("dtype, D, causal, shape, programs, seeds", [
    ("float16", 64, False, (1, 2, 1, 200, 200), 2, (0, 1)),    # GQA, ragged last blocks
    ("bfloat16", 128, True, (1, 2, 2, 100, 260), 2, (0, 3)),   # N_q < N_kv
    ("float16", 128, True, (1, 1, 1, 300, 130), 1, (2,)),      # N_q > N_kv: rows see no key
    ("float16", 64, True, (1, 1, 1, 600, 40), 1, (1,)),        # two tiles see no key at all
    ("float8_e4m3fn", 64, True, (1, 1, 1, 200, 200), 2, (1,)),
    ("float8_e4m3fn", 128, False, (1, 1, 1, 140, 140), 1, (0,)),
])
def test_the_interpreter_matches_float64(dtype, D, causal, shape, programs, seeds,
                                         monkeypatch):
    _check(dtype, D, causal, shape, programs, seeds, monkeypatch)


def test_strict_interpreter_sees_no_unwritten_tensor_memory(monkeypatch):
    # Strict mode also reports never-written TMEM reads and TMA left in flight at the end.
    monkeypatch.setenv("SC_INTERPRET_STRICT", "1")
    _check("bfloat16", 64, True, (1, 2, 1, 130, 300), 2, (4,), monkeypatch)


def test_rows_whose_max_keeps_growing_are_rescaled(monkeypatch):
    # Scores grow block after block by far more than the threshold: every block rescales O.
    # (Random inputs mostly keep the stale max: the other path.)
    import ml_dtypes
    rng = np.random.default_rng(7)
    N, D = 384, 64
    q = np.ones((1, 1, N, D), np.float32)
    k = rng.standard_normal((1, 1, N, D)).astype(np.float32) * 0.1
    k += (np.arange(N) // 128 * 0.5)[None, None, :, None]  # +4 per block in q.k / 8
    v = rng.standard_normal((1, 1, N, D)).astype(np.float32)
    bf = ml_dtypes.bfloat16
    _check("bfloat16", D, False, (1, 1, 1, N, N), 1, (5,), monkeypatch,
           inputs=tuple(x.astype(bf) for x in (q, k, v)))


@pytest.mark.parametrize("poly_cols, poly_degree", [(0, 3), (128, 5)])
def test_exp2_split_options(poly_cols, poly_degree, monkeypatch):
    # All on MUFU, and all on the FMA pipe with the fp32-accurate quintic.
    _check("float16", 64, True, (1, 1, 1, 150, 150), 1, (0,), monkeypatch,
           poly_cols=poly_cols, poly_degree=poly_degree)


def test_main_runs_in_the_interpreter():
    assert blackwell.main(gpu=False)


def test_bad_inputs_are_named():
    f = blackwell.attention_forward
    q = np.zeros((1, 2, 64, 64), np.float16)
    with pytest.raises(ValueError, match=r"head dim D = 256 is not supported; allowed: 64, "
                                         r"128$"):
        x = np.zeros((1, 2, 64, 256), np.float16)
        f(x, x, x)
    with pytest.raises(ValueError, match=r"q has H = 3 heads, not a multiple of k/v's "
                                         r"H_kv = 2"):
        f(np.zeros((1, 3, 64, 64), np.float16), q, q)
    with pytest.raises(ValueError, match=r"poly_cols \(columns of each 128-key block whose "
                                         r"exp2 runs on the FMA pipe\) must be a multiple of "
                                         r"32 in \[0, 128\], got 48"):
        f(q, q, q, poly_cols=48)
    with pytest.raises(ValueError, match=r"poly_degree must be 3 or 5, got 4"):
        f(q, q, q, poly_degree=4)


# ---- sm_100a ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compiled():
    return {"fp16_d128_causal": blackwell.compile_for_sm100a("float16", 128, True),
            "fp8_d64": blackwell.compile_for_sm100a("float8_e4m3fn", 64, False)}


def test_the_ptx_has_the_fa4_ingredients(compiled):
    ptx = compiled["fp16_d128_causal"].asm["ptx"]
    # S_h, O_h for two halves: 2 x 128 + 2 x 128 columns, one allocation.
    assert re.findall(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 "
                      r"\[%rd\d+\], (\d+);", ptx) == ["512"]
    assert ptx.count("tcgen05.dealloc.cta_group::1") == 1
    # Q K^T from shared memory; P V with P read from tensor memory (the TS form).
    mmas = [line for line in ptx.splitlines() if "tcgen05.mma.cta_group::1.kind::f16" in line]
    ss = [m for m in mmas if re.search(r"\[%r\d+\], %rd\d+, %rd\d+", m)]
    ts = [m for m in mmas if re.search(r"\[%r\d+\], \[%r\d+\], %rd\d+", m)]
    assert ss and ts and len(ss) + len(ts) == len(mmas)
    assert "tcgen05.ld.sync.aligned.32x32b" in ptx and "tcgen05.st.sync.aligned.32x32b" in ptx
    # Softmax warpgroups 184 registers, correction 104, the one-warp partitions 40.
    assert sorted(re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32\s+(\d+)", ptx)) == \
        [("dec", "104"), ("dec", "40"), ("inc", "184"), ("inc", "184")]
    # exp2 on MUFU (ex2.approx) and on the FMA pipe (the 1.5 * 2^23 rounding constant).
    assert "ex2.approx" in ptx and "0f4B400000" in ptx
    # fp32 -> fp16 two at a time: P's tcgen05.st words (2 softmax partitions x 64 per row)
    # and O's epilogue (2 halves x 64 per row), no single conversions.
    assert ptx.count("cvt.rn.f16x2.f32") == 256 and "cvt.rn.f16.f32" not in ptx
    assert "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group" in ptx  # O's TMA store
    assert compiled["fp16_d128_causal"].asm["cubin"]
    fp8 = compiled["fp8_d64"].asm["ptx"]
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" in fp8
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 "
                     r"\[%rd\d+\], 512;", fp8)  # 2 x 128 + 2 x 64, rounded up


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (CUDA toolkit)")
@pytest.mark.parametrize("which", ["fp16_d128_causal", "fp8_d64"])
def test_whole_program_ptxas_spills_nothing(compiled, which, tmp_path):
    # nvJitLink compiles PTX as a separately linked unit and ignores setmaxnreg (C7504):
    # whole-program ptxas sees each partition's register count, as the driver JIT does.
    src = tmp_path / "fa.ptx"
    src.write_text(compiled[which].asm["ptx"])
    out = subprocess.run(["ptxas", "-arch=sm_100a", "-v", str(src), "-o",
                          str(tmp_path / "fa.cubin")], capture_output=True, text=True)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log
