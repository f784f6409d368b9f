"""examples/flash_attention/hopper.py: the warp-specialized Hopper attention forward in the
interpreter (every dtype and head dim, causal and not, GQA, ragged and unequal N, several
async completion orders) against float64, and its input checks. Its PTX and SASS for sm_90a:
test_flash_attention_hopper_sass.py; on the GPU: tests/gpu/test_flash_attention_gpu.py."""

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "flash_attention"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import hopper  # noqa: E402

# Max |o - ref| / max |ref|: P is rounded to the input type before the PV product.
TOLERANCE = {"float16": 2e-3, "bfloat16": 1.5e-2, "float8_e4m3fn": 8e-2}


def _check(dtype, D, causal, B, H, H_kv, N_q, N_kv, programs, seeds, monkeypatch):
    q, k, v = hopper.random_inputs(B, H, H_kv, N_q, N_kv, D, dtype, seed=N_q + D)
    fp8 = dtype == "float8_e4m3fn"
    descales = (0.5, 0.75, 1.5) if fp8 else (1.0, 1.0, 1.0)
    kw = dict(zip(("q_descale", "k_descale", "v_descale"), descales)) if fp8 else {}
    ref_o, ref_lse = hopper.reference(q, k, v, causal, descales=descales)
    for seed in seeds:
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        o, lse = hopper.attention_forward(q, k, v, causal=causal, return_lse=True,
                                          num_programs=programs, **kw)
        assert o.dtype.name == ("float16" if fp8 else dtype)
        err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
        assert err <= TOLERANCE[dtype], (seed, err)
        assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))
        finite = np.isfinite(ref_lse)
        assert float(np.abs(lse[finite] - ref_lse[finite]).max()) < 1e-5, seed


@pytest.mark.parametrize("dtype, D, causal, B, H, H_kv, N_q, N_kv, programs", [
    ("float16", 64, False, 2, 2, 1, 200, 200, 2),     # GQA, ragged last tiles
    ("float16", 64, True, 1, 4, 2, 200, 200, 3),
    ("bfloat16", 128, True, 1, 2, 2, 100, 260, 2),    # N_q < N_kv: last query sees last key
    ("float16", 128, True, 1, 1, 1, 300, 130, 2),     # N_q > N_kv: first rows see no key
    ("bfloat16", 128, False, 1, 2, 1, 129, 67, 1),    # one program walks every tile
    ("float16", 256, False, 1, 2, 1, 150, 150, 2),    # O through Q's buffer
    ("bfloat16", 256, True, 1, 1, 1, 130, 130, 2),
    ("float8_e4m3fn", 64, False, 1, 1, 1, 100, 100, 2),
    ("float8_e4m3fn", 128, True, 1, 2, 1, 140, 140, 2),
    ("float8_e4m3fn", 256, False, 1, 1, 1, 80, 80, 1),
])
def test_the_interpreter_matches_float64(dtype, D, causal, B, H, H_kv, N_q, N_kv, programs,
                                         monkeypatch):
    _check(dtype, D, causal, B, H, H_kv, N_q, N_kv, programs, (0, 1, 2), monkeypatch)


def test_d256_with_the_ping_pong_and_no_overlap_matches_float64(monkeypatch):
    # D = 256's schedule until 2026-11-28 (turns, no overlap, K_j with V_j, 3-deep K ring and
    # 2-deep V ring), still options.
    q, k, v = hopper.random_inputs(1, 1, 1, 130, 130, 256, "float16", seed=7)
    ref_o, _ = hopper.reference(q, k, v, True)
    for seed in (0, 1, 2):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        o = hopper.attention_forward(q, k, v, causal=True, pingpong=True, overlap=False,
                                     v_lag=0, k_stages=3, stages=2, num_programs=1)
        err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
        assert err <= TOLERANCE["float16"], (seed, err)


@pytest.mark.parametrize("dtype, D, options", [
    ("float8_e4m3fn", 128, {"overlap": True}),   # packed fp8 P leaves room for a second one
    ("float16", 128, {"kv_ahead": 3}),           # a whole ring of the next tile before its Q
    ("float16", 128, {"kv_ahead": 0, "o_in_q": False, "stages": 2}),
    ("float16", 128, {"q_in_regs": True}),       # QK^T with Q as a register A operand
    ("bfloat16", 128, {"warpgroups": 3, "overlap": False, "pingpong": False}),
    ("float8_e4m3fn", 128, {"warpgroups": 3}),   # three warpgroups take turns in fp8
    ("float8_e4m3fn", 128, {"warpgroups": 3, "block_n": 64}),
    ("float16", 128, {"k_stages": 2}),           # rings of different depths
    ("float16", 64, {"warpgroups": 2, "overlap": True}),  # D = 64's old schedule
    ("float16", 128, {"v_lag": 1, "kv_ahead": 2}),  # K_j with V_{j-1}, two Ks before Q
    ("bfloat16", 128, {"late_wait": True}),      # PV waited after the softmax's exp2s
    ("float16", 256, {"late_wait": True}),
    ("float16", 64, {"overlap": False, "late_wait": False}),  # D = 64's 3-WG schedule until
                                                               # 2026-11-28 13:00
    ("float16", 128, {"row_sum_mma": True}),     # P's row sums by wgmma
    ("float8_e4m3fn", 128, {"row_sum_mma": True}),
    ("float8_e4m3fn", 128, {"row_sum_mma": True, "overlap": True}),
    ("bfloat16", 64, {"row_sum_mma": True}),     # three warpgroups, late_wait
    ("float16", 128, {"row_sum_mma": True, "late_wait": True}),
    ("float16", 256, {"row_sum_mma": True}),
    ("float8_e4m3fn", 128, {"promote_pv": True, "row_sum_mma": True}),  # P V into O in fp32
    ("float8_e4m3fn", 128, {"extra_n": 64}),     # 192-key blocks: a 128-key and a 64-key part
    ("float8_e4m3fn", 256, {"extra_n": 32, "block_n": 64}),
    ("float16", 128, {"extra_n": 64, "overlap": False, "stages": 2}),
    ("float16", 128, {"extra_n": 64, "late_wait": True, "stages": 2}),  # with the overlap
    ("bfloat16", 64, {"extra_n": 64, "overlap": False, "late_wait": False}),
    ("float16", 128, {"warp_arrivals": True}),   # each warp releases and hands over alone
    ("bfloat16", 64, {"warp_arrivals": True}),   # three warpgroups take turns
    ("float8_e4m3fn", 128, {"warp_arrivals": True}),
    ("float16", 256, {"warp_arrivals": True}),   # no ping-pong at D = 256
    ("float16", 128, {"lazy_rescale": False}),   # O rescaled every block (16-bit's old default)
    ("bfloat16", 64, {"lazy_rescale": False}),
    ("float16", 128, {"o_direct": True}),       # O stored from registers, Q freed early
    ("float8_e4m3fn", 64, {"o_direct": True}),
    ("bfloat16", 256, {"o_direct": True}),
    ("float16", 128, {"speculative_p": True}),  # P before the row max (lazy_rescale's)
    ("bfloat16", 64, {"speculative_p": True}),
    ("float16", 128, {"q_prefetch": True}),     # the next tile's Q into L2
    ("float8_e4m3fn", 256, {"q_prefetch": True}),
    ("float16", 128, {"q_buffers": 2}),         # the next tile's Q loads during this one
    ("float8_e4m3fn", 128, {"q_buffers": 2}),   # O in a buffer of its own
    ("bfloat16", 64, {"q_buffers": 2}),         # three warpgroups' Q, twice
])
def test_launcher_options_match_float64(dtype, D, options, monkeypatch):
    # One program walks all the tiles, so each option's hand-over between tiles is run.
    q, k, v = hopper.random_inputs(1, 2, 1, 200, 200, D, dtype, seed=11)
    ref_o, _ = hopper.reference(q, k, v, True)
    for seed in (0, 1, 2):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        o = hopper.attention_forward(q, k, v, causal=True, num_programs=1, **options)
        err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
        assert err <= TOLERANCE[dtype], (seed, err)


@pytest.mark.parametrize("dtype, D, programs", [
    ("float16", 128, 4),   # 6 causal tiles: the ragged second wave to programs 3 and 2
    ("bfloat16", 64, 3),   # three warpgroups: 4 tiles of 192 rows
    ("float8_e4m3fn", 128, 4),
])
def test_snake_order_matches_float64(dtype, D, programs, monkeypatch):
    # snake: each wave of (longest-first) causal tiles dealt out in the other direction;
    # every program's producer and consumers must walk the same tiles.
    q, k, v = hopper.random_inputs(1, 2, 1, 300 if D != 64 else 384, 300, D, dtype, seed=5)
    ref_o, ref_lse = hopper.reference(q, k, v, True)
    for seed in (0, 1):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        o, lse = hopper.attention_forward(q, k, v, causal=True, return_lse=True,
                                          num_programs=programs, snake=True)
        err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
        assert err <= TOLERANCE[dtype], (seed, err)
        finite = np.isfinite(ref_lse)
        assert float(np.abs(lse[finite] - ref_lse[finite]).max()) < 1e-4, seed


@pytest.mark.parametrize("D", [64, 128, 256])
def test_snake_is_the_default_for_causal_16_bit_only(D):
    # Measured 1.08-1.24x in 16-bit causal launches, level in fp8 (hopper_tuning).
    assert [hopper.default_config(D, dt, causal)["snake"]
            for dt in ("float16", "bfloat16", "float8_e4m3fn") for causal in (True, False)] \
        == [True, False, True, False, False, False]


def test_warp_rescale_is_the_default_at_d128_with_the_lazy_rescale_in_fp8_too():
    # Measured ahead of the barrier's decision at D = 128 (hopper_tuning), with no direction
    # at D = 64 and 256; turning the lazy rescale off turns it off unless it is asked for.
    cfg = {(D, dt): hopper.default_config(D, dt, False) for D in (64, 128, 256)
           for dt in ("float16", "float8_e4m3fn")}
    assert [(c["lazy_rescale"], c["warp_rescale"]) for c in cfg.values()] == \
        [(True, False), (False, False), (True, True), (True, True), (True, False),
         (False, False)]
    tuned = hopper.tuned_config(128, "float16", False, False, False, {"lazy_rescale": False},
                                False, 1)
    assert not tuned["warp_rescale"] and not tuned["speculative_p"]
    # bf16 at D = 128: exact maxima (slack 0, P after the row max), for its accuracy.
    assert [(c["rescale_slack"], c["speculative_p"], c["warp_rescale"]) for c in
            (hopper.default_config(128, "bfloat16", causal) for causal in (False, True))] == \
        [(0.0, False, True)] * 2
    assert hopper.default_config(128, "float16")["rescale_slack"] == 8.0


def test_fp8_overlap_waits_for_the_pv_product_before_packing_the_next_p():
    # With the PV wait at the next block's top, ptxas packed fp8's next P into the registers
    # the PV wgmma was reading (hopper_tuning, `late_wait`): the launcher turns late_wait on
    # with the overlap in fp8, and refuses it off.
    tuned = hopper.tuned_config(128, "float8_e4m3fn", True, False, False, {"overlap": True},
                                False, 1)
    assert tuned["overlap"] and tuned["late_wait"]
    q8 = np.zeros((1, 1, 64, 128), hopper.numpy_dtype("float8_e4m3fn"))
    with pytest.raises(ValueError, match=r"overlap in fp8 needs late_wait=True \(the PV "
                                         r"product waited for before the next P is packed: "
                                         r".*got late_wait=False"):
        hopper.attention_forward(q8, q8, q8, overlap=True, late_wait=False)


@pytest.mark.parametrize("dtype, D, n_q, n_kv, options", [
    ("float16", 64, 200, 200, {}),             # 2 tiles of 192: rows -128..-1 in the first
    ("bfloat16", 64, 100, 300, {}),            # N_kv > N_q: phantom rows that see keys
    ("float16", 128, 300, 200, {}),            # N_q > N_kv: rows that see no key
    ("float8_e4m3fn", 128, 300, 300, {}),
    ("float16", 64, 200, 200, {"o_direct": True}),  # O stored from registers, masked
    ("bfloat16", 64, 200, 200, {"q_prefetch": True}),  # no prefetch before row 0
    ("float16", 128, 300, 300, {"ragged_first": False}),  # the spare rows last
])
def test_ragged_first_matches_float64(dtype, D, n_q, n_kv, options, monkeypatch):
    # ragged_first (causal's default): the spare rows' whole warpgroups go before row 0 in
    # a head's first tile; they read zeros, must store no O (the interpreter reports a TMA
    # store at a negative row, an illegal instruction on the H100) and no LSE, whatever
    # order the interpreter completes things in.
    q, k, v = hopper.random_inputs(1, 2, 1, n_q, n_kv, D, dtype, seed=3)
    ref_o, ref_lse = hopper.reference(q, k, v, True)
    for seed in (0, 1):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        o, lse = hopper.attention_forward(q, k, v, causal=True, return_lse=True,
                                          num_programs=2, **options)
        err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
        assert err <= TOLERANCE[dtype], (seed, err)
        finite = np.isfinite(ref_lse)
        assert np.array_equal(np.isfinite(lse), finite), seed
        assert float(np.abs(lse[finite] - ref_lse[finite]).max()) < 1e-4, seed


def test_ragged_first_is_the_causal_default():
    assert [hopper.default_config(D, dt, causal)["ragged_first"]
            for D, dt in ((64, "float16"), (128, "float8_e4m3fn")) for causal in (True, False)] \
        == [True, False, True, False]


@pytest.mark.parametrize("dtype, D, causal, options", [
    ("float16", 128, False, {}),
    ("bfloat16", 64, True, {}),
    ("float8_e4m3fn", 128, True, {}),                 # with row_sum_mma, fp8's default
    ("float16", 128, True, {"warp_arrivals": True}),  # bar.red the loop's only barrier
    ("float16", 128, False, {"speculative_p": True}),  # P first against the kept maxima
    ("bfloat16", 64, True, {"speculative_p": True}),   # three warpgroups, late_wait
    ("float16", 256, True, {"speculative_p": True}),
    ("float8_e4m3fn", 128, False, {"speculative_p": True}),  # l from row_sum_mma
    ("bfloat16", 128, False, {"rescale_slack": 2}),   # more blocks rescale
    ("float16", 64, True, {"rescale_slack": 0}),      # every growth rescales
    # Rows decide alone, O's rescale in the warps that hold a grown row (gl.warp_any).
    ("float16", 128, False, {"warp_rescale": True}),  # with speculative_p's second P
    ("float8_e4m3fn", 128, True, {"warp_rescale": True}),
    ("bfloat16", 64, True, {"warp_rescale": True, "rescale_slack": 2}),
    # Exact maxima: P * alpha in the grown warps (scaled_p), or P once after the row max.
    ("bfloat16", 128, True, {"scaled_p": True, "speculative_p": True, "rescale_slack": 0}),
    ("float16", 128, True, {"speculative_p": False, "rescale_slack": 0}),
])
def test_lazy_rescale_matches_float64(dtype, D, causal, options, monkeypatch):
    # Later keys score ever higher (k's rows scaled up along N), so some blocks outgrow the
    # kept maxima by more than the slack (rescale_slack) and rescale, and others skip it;
    # GQA, ragged.
    q, k, v = hopper.random_inputs(1, 2, 1, 150, 520, D, dtype, seed=3)
    grow = (1.0 + np.arange(520) / 60.0).astype(np.float32)[None, None, :, None]
    k = (k.astype(np.float32) * grow).astype(k.dtype)
    ref_o, ref_lse = hopper.reference(q, k, v, causal)
    fp8 = dtype == "float8_e4m3fn"  # without the lse, so that row_sum_mma (its default) runs
    for seed in (0, 1):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        out = hopper.attention_forward(q, k, v, causal=causal, return_lse=not fp8,
                                       num_programs=2, lazy_rescale=True, **options)
        o, lse = (out, None) if fp8 else out
        err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
        assert err <= TOLERANCE[dtype], (seed, err)
        if not fp8:
            finite = np.isfinite(ref_lse)
            # Scores reach about 9 x 2^3: the lse's fp32 rounding, not the kept maxima.
            assert float(np.abs(lse[finite] - ref_lse[finite]).max()) < 3e-5, seed


@pytest.mark.parametrize("options", [
    {"speculative_p": False},  # P once, against the exact maxima
    {"scaled_p": True, "speculative_p": True},  # P against the kept maxima, times alpha
])
def test_warp_rescale_with_no_slack_is_the_exact_maximum_loop(options, monkeypatch):
    # rescale_slack=0: every row takes its exact running maximum, as the loop without the
    # lazy rescale does, and only the warps holding a row that grew run O's rescale (the
    # others' alpha is exactly 1). The same P (scaled_p's P * alpha rounds like it but for
    # a unit in the last place in about one bf16 element in 10^5) and O; l is summed in another
    # order (each thread's share, added across the quad after the loop). bf16's largest
    # weights are then exact, where the default's kept maxima round them.
    q, k, v = hopper.random_inputs(1, 2, 1, 150, 520, 128, "bfloat16", seed=3)
    grow = (1.0 + np.arange(520) / 60.0).astype(np.float32)[None, None, :, None]
    k = (k.astype(np.float32) * grow).astype(k.dtype)
    ref_o, _ = hopper.reference(q, k, v, False)
    monkeypatch.setenv("SC_INTERPRET_SEED", "1")
    exact = hopper.attention_forward(q, k, v, num_programs=2, warp_rescale=True,
                                     rescale_slack=0, **options).astype(np.float32)
    plain = hopper.attention_forward(q, k, v, num_programs=2, lazy_rescale=False)
    kept = hopper.attention_forward(q, k, v, num_programs=2, rescale_slack=8,
                                    speculative_p=True)  # fp16's default, bf16's until 12-07
    ulp = np.abs(plain.astype(np.float32)) * 2.0 ** -7
    assert (np.abs(exact - plain.astype(np.float32)) <= ulp).all()
    scale = np.abs(ref_o).max()
    err_exact, err_kept = (float(np.abs(o.astype(np.float64) - ref_o).max() / scale)
                           for o in (exact, kept))
    assert err_exact < 0.8 * err_kept, (err_exact, err_kept)


def test_scaled_p_takes_p_again_where_a_row_outgrew_fp32(monkeypatch):
    # scaled_p multiplies the speculative P by alpha; where a row's maximum jumps by more
    # than 64 (log2 units) that P may be inf (2^growth past 2^127: inf * 0 is NaN), so it
    # is taken again against the new maxima. Keys 400-459 score 40x the others.
    q, k, v = hopper.random_inputs(1, 2, 1, 150, 520, 128, "bfloat16", seed=3)
    k[:, :, 400:460] = (k[:, :, 400:460].astype(np.float32) * 40).astype(k.dtype)
    ref_o, _ = hopper.reference(q, k, v, False)
    monkeypatch.setenv("SC_INTERPRET_SEED", "0")
    o = hopper.attention_forward(q, k, v, num_programs=2, scaled_p=True, speculative_p=True,
                                 rescale_slack=0)
    assert float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max()) < 1e-2


@pytest.mark.parametrize("dtype, D, programs, options", [
    ("float16", 128, 4, {}),                       # 9 tiles: 2 of them split
    ("bfloat16", 128, 2, {"lazy_rescale": True}),  # 9 tiles: 1 split
    ("float16", 64, 4, {}),                        # 3 warpgroups: 6 tiles of 192 rows
    ("float16", 256, 4, {}),                       # 64-key blocks, O through Q's buffer
    ("float8_e4m3fn", 128, 4, {}),
    ("float16", 128, 2, {"q_buffers": 2}),         # a split tile's part in either buffer
])
def test_split_tail_matches_float64(dtype, D, programs, options, monkeypatch):
    # split_tail: the last tiles dealt out as K/V blocks; a tile shared by two programs is
    # finished by the second from both partials, whichever order the programs and their
    # async copies complete in. The arrival counts end at 0 (the next launch reuses them).
    import attention_tiles

    q, k, v = hopper.random_inputs(1, 3 if D != 64 else 5, 1, 300, 300, D, dtype, seed=4)
    ref_o, ref_lse = hopper.reference(q, k, v, False)
    made, workspace = [], attention_tiles.workspace

    def poisoned(*args):  # partials NaN until written: a split tile's part must be stored
        made.append(workspace(*args))
        made[-1][0][...] = np.nan
        return made[-1]
    monkeypatch.setattr(attention_tiles, "workspace", poisoned)
    for seed in (0, 1, 2):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        o, lse = hopper.attention_forward(q, k, v, return_lse=True, num_programs=programs,
                                          split_tail=True, **options)
        err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
        assert err <= TOLERANCE[dtype], (seed, err)
        assert float(np.abs(lse - ref_lse).max()) < 1e-5, seed
        part, _, count = made[-1]
        assert part.shape[0] == programs and np.isfinite(part[:, 1]).any()
        assert not count.any()


@pytest.mark.parametrize("dtype", ["float16", "float8_e4m3fn"])
def test_row_sum_mma_gives_the_lse(dtype, monkeypatch):
    # l from each block's P 1 (an m64n8 wgmma against ones) added up in fp32 and rescaled
    # with O: O and the lse match, causal and not, with ragged rows and 64-key blocks.
    q, k, v = hopper.random_inputs(1, 2, 1, 300, 300, 128, dtype, seed=3)
    for causal in (False, True):
        ref_o, ref_lse = hopper.reference(q, k, v, causal)
        for seed in (0, 1):
            monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
            o, lse = hopper.attention_forward(q, k, v, causal=causal, num_programs=1,
                                              row_sum_mma=True, block_n=64, return_lse=True)
            err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
            assert err <= TOLERANCE[dtype], (causal, seed, err)
            assert np.abs(lse - ref_lse).max() <= 1e-2 * max(1.0, np.abs(ref_lse).max())


@pytest.mark.parametrize("dtype", ["float16", "float8_e4m3fn"])
def test_extra_n_blocks_of_192_keys(dtype, monkeypatch):
    # 128 + 64 keys a block (two K/V rings, two S accumulators, two PV wgmmas): O and the
    # lse match with 300 queries against 350 keys (the last block ragged inside its 64-key
    # part) and 260 (ragged inside its 128-key part, the 64-key part all past N_kv), causal
    # and not, GQA, one program walking every tile.
    options = {"extra_n": 64} if dtype == "float8_e4m3fn" else \
        {"extra_n": 64, "overlap": False, "stages": 2}
    for n_kv, causal in ((350, False), (350, True), (260, False), (260, True)):
        q, k, v = hopper.random_inputs(1, 2, 1, 300, n_kv, 128, dtype, seed=5)
        ref_o, ref_lse = hopper.reference(q, k, v, causal)
        for seed in (0, 1, 2):
            monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
            o, lse = hopper.attention_forward(q, k, v, causal=causal, num_programs=1,
                                              return_lse=True, **options)
            err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
            assert err <= TOLERANCE[dtype], (causal, seed, err)
            finite = np.isfinite(ref_lse)
            assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))
            assert float(np.abs(lse[finite] - ref_lse[finite]).max()) < 1e-5


@pytest.mark.parametrize("dtype, D, n_q, options", [
    ("float16", 128, 700, {}),            # 6 Q tiles a head: 3 pairs
    ("bfloat16", 64, 300, {}),            # 192-row tiles, 2 a head
    ("float16", 64, 500, {}),             # 3 tiles a head: a phantom fourth, clipped
    ("float8_e4m3fn", 128, 500, {"row_sum_mma": True}),   # V^T's slices split D
    ("float16", 256, 300, {}),            # 64-key blocks: 32-key slices
    ("float16", 128, 500, {"extra_n": 64, "late_wait": True, "stages": 2}),
    ("float16", 128, 500, {"warp_arrivals": True}),   # 8 remote arrivals free a stage
])
def test_cluster_pairs_share_multicast_kv(dtype, D, n_q, options, monkeypatch):
    # cluster=2: two CTAs on neighbouring Q tiles of one head, each fetching half of every K
    # and V block for both; a stage frees only once both CTAs' consumers released it. GQA,
    # ragged N, and two clusters walking several pairs each, so the rings wrap and the
    # tile hand-over runs. (With a ring's barrier counting one CTA's releases only, the
    # interpreter reports the race: a multicast into a stage the peer still reads.)
    q, k, v = hopper.random_inputs(1, 4, 2, n_q, 600, D, dtype, seed=7)
    ref_o, ref_lse = hopper.reference(q, k, v, False)
    for seed in (0, 1, 2):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        o, lse = hopper.attention_forward(q, k, v, num_programs=2, cluster=2, return_lse=True,
                                          **options)
        err = float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max())
        assert err <= TOLERANCE[dtype], (seed, err)
        # fp8 with row_sum_mma sums P as rounded to e4m3: its lse moves by about 1e-2.
        lse_tol = 1e-2 if dtype == "float8_e4m3fn" else 1e-5
        assert float(np.abs(lse - ref_lse).max()) < lse_tol, (seed, lse_tol)


def test_fp8_v_transpose_stores_keys_in_the_operand_order():
    import ml_dtypes
    v = np.arange(2 * 40 * 64).reshape(1, 2, 40, 64).astype(ml_dtypes.float8_e4m3fn)
    desc = hopper.transposed_v_descriptor(v, 64, hopper.FP8_KEY_ORDER)
    vt = desc.base
    assert vt.shape == (1, 2, 64, 64) and desc.shape[3] == 64  # 40 keys padded to 64
    order = list(hopper.FP8_KEY_ORDER) + [32 + k for k in hopper.FP8_KEY_ORDER]
    expect = np.zeros((1, 2, 64, 64), v.dtype)
    expect[..., :40] = np.swapaxes(v, -1, -2)
    assert np.array_equal(vt.view(np.uint8), expect[..., order].view(np.uint8))
    assert sorted(hopper.FP8_KEY_ORDER) == list(range(32))


def test_main_runs_in_the_interpreter():
    assert hopper.main(gpu=False)


@pytest.mark.parametrize("n_q, n_kv", [(64, 0), (0, 64), (0, 0)])
def test_no_rows_or_no_keys_give_zero_o_and_minus_inf_lse(n_q, n_kv):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, n_q, 64)).astype(np.float16)  # numpy strides of 0
    k = v = rng.standard_normal((1, 1, n_kv, 64)).astype(np.float16)
    o, lse = hopper.attention_forward(q, k, v, causal=True, return_lse=True)
    assert o.shape == q.shape and o.dtype == np.float16 and lse.shape == (1, 2, n_q)
    assert not o.any() and np.all(lse == -np.inf)


def test_bad_inputs_are_named():
    f = hopper.attention_forward
    q = np.zeros((1, 2, 64, 64), np.float16)
    with pytest.raises(ValueError, match=r"q must have 4 dims \(B, H, N, D\), got shape "
                                         r"\(2, 64, 64\)"):
        f(q[0], q, q)
    with pytest.raises(ValueError, match=r"head dim D = 96 is not supported; allowed: 64, "
                                         r"128, 256"):
        x = np.zeros((1, 2, 64, 96), np.float16)
        f(x, x, x)
    with pytest.raises(ValueError, match=r"q has H = 3 heads, not a multiple of k/v's "
                                         r"H_kv = 2"):
        f(np.zeros((1, 3, 64, 64), np.float16), q, q)
    with pytest.raises(ValueError, match=r"q has dtype float32; allowed: float16, bfloat16, "
                                         r"float8_e4m3fn"):
        f(q.astype(np.float32), q, q)
    with pytest.raises(ValueError, match=r"q, k and v must share one dtype, got q float16, "
                                         r"k float16, v bfloat16"):
        import ml_dtypes
        f(q, q, q.astype(ml_dtypes.bfloat16))
    with pytest.raises(ValueError, match=r"k and v must have the same shape"):
        f(q, q, q[:, :, :32])
    with pytest.raises(ValueError, match=r"k's last dim must be contiguous \(stride 1\)"):
        f(q, np.swapaxes(q, 2, 3), q)
    with pytest.raises(ValueError, match=r"out_dtype float32 is not allowed for float16"):
        f(q, q, q, out_dtype="float32")
    with pytest.raises(ValueError, match=r"kv_ahead \(K/V blocks loaded before a tile's Q\) "
                                         r"must be an int >= 0, got -1"):
        f(q, q, q, kv_ahead=-1)
    q128 = np.zeros((1, 2, 64, 128), np.float16)  # D = 128: 2 Q buffers and 2 K stages
    with pytest.raises(ValueError, match=r"kv_ahead \(K/V blocks loaded before a tile's Q\) "
                                         r"must be at most the rings' depth, k_stages=2 and "
                                         r"stages=3, got 3: a further block would wait for a "
                                         r"stage that only the tile's Q frees"):
        f(q128, q128, q128, kv_ahead=3, q_buffers=2)  # (left alone, the default yields)
    with pytest.raises(ValueError, match=r"warpgroups must be 2 or 3 \(consumer warpgroups of 64 "
                                         r"query rows\), got 4"):
        f(q, q, q, warpgroups=4)
    with pytest.raises(ValueError, match=r"v_lag must be 0 or 1 \(V_j or V_\{j-1\} loaded after "
                                         r"K_j\), got 2"):
        f(q, q, q, v_lag=2)
    with pytest.raises(ValueError, match=r"stages \(the V ring's depth\) must be an int >= 2, "
                                         r"got 1"):
        f(q, q, q, stages=1, k_stages=2)
    with pytest.raises(ValueError, match=r"block_n must be 16, 32, 64, 128 or 256 \(keys per "
                                         r"block\), got 96"):
        f(q, q, q, block_n=96)
    q8 = q.astype(hopper.numpy_dtype("float8_e4m3fn"))
    with pytest.raises(ValueError, match=r"block_n must be 32, 64, 128 or 256 \(keys per block; "
                                         r"fp8 P packs keys in groups of 32\), got 16"):
        f(q8, q8, q8, block_n=16)
    with pytest.raises(TypeError, match=r"unknown option 'stage'; tuning options: block_n, "
                                        r"stages, k_stages, warpgroups, overlap, pingpong, "
                                        r"o_in_q, v_lag, late_wait, row_sum_mma, "
                                        r"promote_pv, extra_n, cluster, warp_arrivals, "
                                        r"lazy_rescale"):
        f(q, q, q, stage=2)
    with pytest.raises(ValueError, match=r"lazy_rescale needs promote_pv and extra_n off, got "
                                         r"promote_pv=False, extra_n=64"):
        f(q, q, q, lazy_rescale=True, extra_n=64, late_wait=True)
    with pytest.raises(ValueError, match=r"speculative_p needs lazy_rescale=True, got "
                                         r"lazy_rescale=False"):
        f(q, q, q, speculative_p=True, lazy_rescale=False)
    with pytest.raises(ValueError, match=r"warp_rescale needs lazy_rescale=True, got "
                                         r"lazy_rescale=False"):
        f(q, q, q, warp_rescale=True, lazy_rescale=False, speculative_p=False)
    with pytest.raises(ValueError, match=r"scaled_p needs speculative_p=True and "
                                         r"warp_rescale=True, got speculative_p=False, "
                                         r"warp_rescale=False"):
        f(q, q, q, scaled_p=True)  # (D = 64: neither is its default)
    with pytest.raises(ValueError, match=r"promote_pv needs row_sum_mma=True and "
                                         r"overlap=False, got row_sum_mma=False, overlap=True"):
        f(q, q, q, promote_pv=True)
    with pytest.raises(ValueError, match=r"extra_n needs row_sum_mma and promote_pv off and the "
                                         r"overlap off or with late_wait, got overlap=True, "
                                         r"late_wait=False, row_sum_mma=False, "
                                         r"promote_pv=False"):
        f(q, q, q, extra_n=64, late_wait=False)
    with pytest.raises(ValueError, match=r"extra_n must be 0, 32 or 64 \(keys a block beyond "
                                         r"block_n\), got 48"):
        f(q, q, q, extra_n=48, overlap=False)
    with pytest.raises(ValueError, match=r"extra_n needs q_in_regs=False, got q_in_regs=True"):
        f(q, q, q, extra_n=64, overlap=False, q_in_regs=True)
    with pytest.raises(ValueError, match=r"q_buffers must be 1 or 2 \(tiles whose Q shared "
                                         r"memory holds\), got 3"):
        f(q, q, q, q_buffers=3)
    with pytest.raises(ValueError, match=r"rescale_slack must be a number in \[0, 8\] \(log2 "
                                         r"units a row maximum may grow before O is "
                                         r"rescaled; P <= 2\^slack must fit e4m3's 448\), "
                                         r"got 9"):
        f(q, q, q, rescale_slack=9)
    q256 = np.zeros((1, 1, 64, 256), np.float16)
    with pytest.raises(ValueError, match=r"q_buffers=2 at D = 256 needs 294912 bytes of shared "
                                         r"memory with k_stages=2, stages=3, more than the "
                                         r"232448 a CTA has; use shallower rings"):
        f(q256, q256, q256, q_buffers=2)
    with pytest.raises(ValueError, match=r"cluster must be 1 or 2 \(CTAs a program, sharing "
                                         r"K/V loads\), got 4"):
        f(q, q, q, cluster=4)
    with pytest.raises(ValueError, match=r"cluster=2 \(K/V multicast to a pair of Q tiles\) "
                                         r"needs causal=False, got causal=True"):
        f(q, q, q, cluster=2, causal=True)


def test_a_ragged_tiles_spare_warpgroup_computes_nothing(monkeypatch):
    # D = 64: 192-row tiles, so N_q = 300 leaves the second tile's third warpgroup (rows
    # 320-383) without a row: it passes its stages and turns (`_pass_blocks`) and runs no
    # softmax or PV product there, as the interpreter's timeline shows (3 blocks of keys:
    # 2 in-loop softmaxes a tile), and the others still match float64.
    q, k, v = hopper.random_inputs(1, 1, 1, 300, 300, 64, "float16", seed=3)
    ref_o, _ = hopper.reference(q, k, v, False)
    for seed in (0, 1):
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
        o = hopper.attention_launcher(q, k, v, num_programs=1, split_tail=False,
                                      launch_options={"timeline": True})()
        assert float(np.abs(o.astype(np.float64) - ref_o).max() / np.abs(ref_o).max()) < 2e-3
        regions = hopper.attention_kernel.last_timeline.regions
        count = lambda warp, name: sum(r.warp == warp and r.name == name  # noqa: E731
                                       for r in regions)
        assert [count(w, "softmax") for w in (0, 1, 2)] == [4, 4, 2]
        assert [count(w, "last PV") for w in (0, 1, 2)] == [2, 2, 1]
        assert [count(w, "epilogue") for w in (0, 1, 2)] == [2, 2, 2]
