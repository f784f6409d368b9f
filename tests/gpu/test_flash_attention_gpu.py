"""The Hopper flash-attention forward (examples/flash_attention/hopper.py) on the GPU against
a float32 computation: every dtype and head dim, causal and not, GQA, ragged N."""

import math
import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "flash_attention"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _reference(torch, q, k, v, causal):
    H, H_kv = q.shape[1], k.shape[1]
    q, k, v = q.float(), k.float().repeat_interleave(H // H_kv, 1), \
        v.float().repeat_interleave(H // H_kv, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    n_q, n_kv = q.shape[2], k.shape[2]
    if causal:
        keep = torch.arange(n_kv, device=q.device)[None, :] <= \
            torch.arange(n_q, device=q.device)[:, None] + (n_kv - n_q)
        s = s.masked_fill(~keep, -float("inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ v, lse


@pytest.mark.parametrize("dtype, D, causal, B, H, H_kv, N_q, N_kv", [
    ("float16", 128, False, 2, 8, 2, 1000, 1000),
    ("float16", 128, True, 2, 8, 8, 1000, 1000),
    ("bfloat16", 128, True, 1, 4, 2, 700, 1500),
    ("bfloat16", 64, False, 2, 4, 4, 2048, 2048),
    ("float16", 64, True, 1, 4, 1, 1500, 600),
    ("float16", 256, True, 1, 4, 2, 777, 777),
    ("bfloat16", 256, False, 1, 2, 2, 1024, 1024),
    ("float8_e4m3fn", 128, False, 1, 4, 4, 1024, 1024),
    ("float8_e4m3fn", 128, True, 1, 4, 2, 1000, 1000),
    ("float8_e4m3fn", 64, False, 1, 2, 2, 512, 512),
    ("float8_e4m3fn", 256, True, 1, 2, 2, 512, 512),
])
def test_matches_float32(torch, dtype, D, causal, B, H, H_kv, N_q, N_kv):
    from hopper import attention_forward

    gen = torch.Generator(device="cuda").manual_seed(N_q + D)
    mk = lambda h, n: torch.randn((B, h, n, D), device="cuda", generator=gen)  # noqa: E731
    q, k, v = mk(H, N_q), mk(H_kv, N_kv), mk(H_kv, N_kv)
    tdt = getattr(torch, dtype)
    q, k, v = q.to(tdt), k.to(tdt), v.to(tdt)
    o, lse = attention_forward(q, k, v, causal=causal, return_lse=True)
    ref, ref_lse = _reference(torch, q, k, v, causal)
    err = float((o.float() - ref).abs().max() / ref.abs().max())
    tol = {"float16": 4e-3, "bfloat16": 2e-2, "float8_e4m3fn": 8e-2}[dtype]
    assert err <= tol, err
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse))
    assert float((lse[fin] - ref_lse[fin]).abs().max()) < 1e-3


@pytest.mark.parametrize("dtype, D, causal, options", [
    ("float8_e4m3fn", 128, True, {"overlap": True}),
    ("float16", 128, True, {"kv_ahead": 3}),
    ("float16", 128, False, {"kv_ahead": 0, "o_in_q": False, "stages": 2}),
    ("float16", 64, True, {"warpgroups": 3, "overlap": False}),   # 192-row tiles
    ("bfloat16", 64, False, {"warpgroups": 3, "block_n": 64}),
    ("float8_e4m3fn", 64, True, {"warpgroups": 3, "q_in_regs": True}),
    ("float16", 128, False, {"q_in_regs": True, "overlap": False}),
    ("float16", 256, True, {"pingpong": True, "overlap": False, "v_lag": 0, "k_stages": 3,
                            "stages": 2}),
    ("float16", 128, False, {"v_lag": 1, "kv_ahead": 2}),
    ("bfloat16", 128, True, {"late_wait": True}),
    ("float16", 64, False, {"overlap": False, "late_wait": False}),  # D = 64's older default
    ("float16", 128, False, {"row_sum_mma": True}),    # P's row sums by wgmma
    ("float8_e4m3fn", 128, True, {"row_sum_mma": True}),
    ("float8_e4m3fn", 128, False, {"row_sum_mma": True, "overlap": True}),
    ("bfloat16", 64, True, {"row_sum_mma": True}),
    ("float8_e4m3fn", 128, True, {"promote_pv": True, "row_sum_mma": True}),  # P V in fp32
    ("float8_e4m3fn", 128, False, {"extra_n": 64}),     # 192-key blocks, 128 + 64
    ("float8_e4m3fn", 128, True, {"extra_n": 64}),
    ("float16", 128, False, {"extra_n": 64, "late_wait": True, "stages": 2}),
    # Per-warp releases and hand-overs (ids for `-k warp_arrivals`).
    pytest.param("float16", 128, True, {"warp_arrivals": True}, id="warp_arrivals-fp16-128"),
    pytest.param("bfloat16", 64, False, {"warp_arrivals": True}, id="warp_arrivals-bf16-64"),
    pytest.param("float8_e4m3fn", 128, False, {"warp_arrivals": True},
                 id="warp_arrivals-fp8-128"),
    pytest.param("float16", 256, True, {"warp_arrivals": True}, id="warp_arrivals-fp16-256"),
    # O's rescale skipped while no row maximum outgrows the kept one by 8 (16-bit's
    # default since 2026-12-06), and the rescale of every block it replaced.
    pytest.param("float16", 128, True, {"lazy_rescale": True}, id="lazy_rescale-fp16-128"),
    pytest.param("bfloat16", 64, False, {"lazy_rescale": True}, id="lazy_rescale-bf16-64"),
    pytest.param("float16", 256, False, {"lazy_rescale": True}, id="lazy_rescale-fp16-256"),
    pytest.param("float16", 128, False, {"lazy_rescale": False, "split_tail": False},
                 id="lazy_rescale-off-fp16-128"),
    pytest.param("bfloat16", 256, True, {"lazy_rescale": False}, id="lazy_rescale-off-bf16-256"),
    pytest.param("float8_e4m3fn", 128, True, {"lazy_rescale": True}, id="lazy_rescale-fp8-128"),
    pytest.param("float16", 128, False, {"lazy_rescale": True, "warp_arrivals": True},
                 id="lazy_rescale-warp_arrivals-fp16-128"),
    pytest.param("float8_e4m3fn", 128, True, {"lazy_rescale": True, "warp_rescale": True},
                 id="warp_rescale-fp8-128-causal"),
    pytest.param("bfloat16", 64, False, {"warp_rescale": True}, id="warp_rescale-bf16-64"),
    pytest.param("float16", 256, True, {"warp_rescale": True}, id="warp_rescale-fp16-256"),
    # O stored from registers, Q's buffer freed when the tile's last S_j is done.
    pytest.param("float16", 128, False, {"o_direct": True}, id="o_direct-fp16-128"),
    pytest.param("bfloat16", 128, True, {"o_direct": True}, id="o_direct-bf16-128-causal"),
    pytest.param("float8_e4m3fn", 128, False, {"o_direct": True}, id="o_direct-fp8-128"),
    pytest.param("float16", 64, True, {"o_direct": True}, id="o_direct-fp16-64"),
    # P first against the kept maxima (lazy_rescale's), taken again where a block rescales.
    pytest.param("float16", 128, False, {"speculative_p": True}, id="speculative_p-fp16-128"),
    pytest.param("bfloat16", 128, True, {"speculative_p": True},
                 id="speculative_p-bf16-128-causal"),
    pytest.param("float16", 64, False, {"speculative_p": True}, id="speculative_p-fp16-64"),
    pytest.param("float16", 256, True, {"speculative_p": True}, id="speculative_p-fp16-256"),
    # Exact maxima (bf16's default at D = 128) in fp16, and scaled_p's P * alpha.
    pytest.param("float16", 128, True, {"speculative_p": False, "rescale_slack": 0},
                 id="exact_maxima-fp16-128-causal"),
    pytest.param("bfloat16", 128, False, {"scaled_p": True, "speculative_p": True,
                                          "rescale_slack": 0}, id="scaled_p-bf16-128"),
    # The next tile's Q prefetched into L2 (tma.async_prefetch).
    pytest.param("float16", 128, False, {"q_prefetch": True}, id="q_prefetch-fp16-128"),
    pytest.param("bfloat16", 128, True, {"q_prefetch": True}, id="q_prefetch-bf16-128-causal"),
    pytest.param("float8_e4m3fn", 128, False, {"q_prefetch": True}, id="q_prefetch-fp8-128"),
    # Two tiles' Q buffers: the next Q loads during this tile; O's store is waited for later.
    pytest.param("float16", 128, False, {"q_buffers": 2}, id="q_buffers-fp16-128"),
    pytest.param("bfloat16", 128, True, {"q_buffers": 2}, id="q_buffers-bf16-128-causal"),
    pytest.param("float8_e4m3fn", 128, True, {"q_buffers": 2}, id="q_buffers-fp8-128-causal"),
    pytest.param("float16", 64, False, {"q_buffers": 2}, id="q_buffers-fp16-64"),
    # Waves of causal tiles dealt out in alternating directions (2 programs, 24-32 tiles).
    pytest.param("float16", 128, True, {"snake": True}, id="snake-fp16-128-causal"),
    pytest.param("bfloat16", 64, True, {"snake": True}, id="snake-bf16-64-causal"),
    pytest.param("float8_e4m3fn", 128, True, {"snake": True}, id="snake-fp8-128-causal"),
    pytest.param("float16", 256, True, {"snake": True}, id="snake-fp16-256-causal"),
    # The spare rows' whole warpgroups before row 0 (causal's default; 500 rows in 192-row
    # tiles: the first tile starts at row -64).
    pytest.param("float16", 64, True, {"ragged_first": False}, id="ragged_first-off-fp16-64"),
    pytest.param("bfloat16", 64, True, {"ragged_first": True, "o_direct": True},
                 id="ragged_first-o_direct-bf16-64"),
    pytest.param("float8_e4m3fn", 64, True, {"ragged_first": True}, id="ragged_first-fp8-64"),
])
def test_launcher_options_match_float32(torch, dtype, D, causal, options):
    # 2 programs over 12-16 tiles: each walks several, so every option's tile hand-over runs.
    from hopper import attention_forward

    gen = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = (torch.randn((2, 4, 500, D), device="cuda", generator=gen).to(
        getattr(torch, dtype)) for _ in range(3))
    o = attention_forward(q, k, v, causal=causal, num_programs=2, **options)
    ref, _ = _reference(torch, q, k, v, causal)
    err = float((o.float() - ref).abs().max() / ref.abs().max())
    assert err <= {"float16": 4e-3, "bfloat16": 2e-2, "float8_e4m3fn": 8e-2}[dtype], err


def test_lazy_rescale_rescales_when_the_maxima_grow(torch):
    # Keys scaled up along N: later blocks outgrow the kept maxima and take the rescale.
    from hopper import attention_forward

    gen = torch.Generator(device="cuda").manual_seed(6)
    q, k, v = (torch.randn((2, 4, 1000, 128), device="cuda", generator=gen) for _ in range(3))
    k = k * (1.0 + torch.arange(1000, device="cuda") / 100.0)[:, None]
    q, k, v = q.half(), k.half(), v.half()
    ref, ref_lse = _reference(torch, q, k, v, False)
    # warp_rescale: each warp rescales on its own vote (gl.warp_any), no barrier deciding.
    for speculative_p, warp_rescale in ((False, False), (True, False), (False, True),
                                        (True, True)):
        o, lse = attention_forward(q, k, v, return_lse=True, num_programs=4, lazy_rescale=True,
                                   speculative_p=speculative_p, warp_rescale=warp_rescale)
        case = (speculative_p, warp_rescale)
        assert float((o.float() - ref).abs().max() / ref.abs().max()) <= 4e-3, case
        assert float((lse - ref_lse).abs().max()) < 1e-3, case


@pytest.mark.parametrize("dtype, D, B, N, programs, options", [
    ("float16", 128, 4, 4096, None, {}),          # 2048 tiles on every SM: 200 split
    ("bfloat16", 128, 2, 8192, None, {"lazy_rescale": True}),
    ("float16", 64, 2, 1000, 5, {}),              # 3 warpgroups, 192-row tiles
    ("float16", 256, 2, 1000, 3, {}),             # O through Q's buffer
    ("float8_e4m3fn", 128, 2, 1000, 5, {}),
])
def test_split_tail_matches_float32(torch, dtype, D, B, N, programs, options):
    # split_tail: the last tiles cut into K/V blocks, a tile shared by two programs finished
    # by the second from both partials. A second call reuses the workspace (its counts back
    # at 0), so it must give the same bits.
    from hopper import attention_launcher

    gen = torch.Generator(device="cuda").manual_seed(11)
    q, k, v = (torch.randn((B, 2048 // D if N >= 4096 else 4, N, D), device="cuda",
                           generator=gen).to(getattr(torch, dtype)) for _ in range(3))
    run = attention_launcher(q, k, v, return_lse=True, split_tail=True, num_programs=programs,
                             **options)
    o, lse = run()
    o, lse = o.clone(), lse.clone()
    ref, ref_lse = _reference(torch, q, k, v, False)
    err = float((o.float() - ref).abs().max() / ref.abs().max())
    assert err <= {"float16": 4e-3, "bfloat16": 2e-2, "float8_e4m3fn": 8e-2}[dtype], err
    assert float((lse - ref_lse).abs().max()) < 1e-3
    o2, lse2 = run()
    assert torch.equal(o, o2) and torch.equal(lse, lse2)


@pytest.mark.parametrize("dtype, D, N, options", [
    ("float16", 128, 500, {}),          # 4 Q tiles a head: 2 pairs
    ("bfloat16", 256, 500, {}),
    ("float16", 64, 500, {}),           # 3 tiles of 192 rows a head: a phantom fourth
    ("float8_e4m3fn", 128, 500, {}),    # V^T's slices split D
    ("float16", 128, 700, {"extra_n": 64, "late_wait": True, "stages": 2}),
    ("float16", 128, 4096, {}),         # whole clusters: 66 of them on 132 SMs
])
def test_cluster_matches_float32(torch, dtype, D, N, options):
    # cluster=2: two CTAs on neighbouring Q tiles of a head, each K/V block multicast (half
    # fetched by each CTA); a stage frees only when both CTAs' consumers released it.
    from hopper import attention_forward

    gen = torch.Generator(device="cuda").manual_seed(9)
    q, k, v = (torch.randn((2, 4, N, D), device="cuda", generator=gen).to(
        getattr(torch, dtype)) for _ in range(3))
    programs = {"num_programs": 2} if N < 4096 else {}
    o = attention_forward(q, k, v, cluster=2, **programs, **options)
    ref, _ = _reference(torch, q, k, v, False)
    err = float((o.float() - ref).abs().max() / ref.abs().max())
    assert err <= {"float16": 4e-3, "bfloat16": 2e-2, "float8_e4m3fn": 8e-2}[dtype], err


def test_every_variant_keeps_setmaxnreg_and_spills_nothing(torch):
    # Each specialization (here at least two: B * H = 8 and 16 specialize differently) loads
    # through the driver JIT, which keeps setmaxnreg: a consumer left with the 168 entry
    # registers spills its D = 256 accumulator to local memory, and a second specialization
    # loaded that way ran 2.3x slower (issue 10's D = 256, N = 16k anomaly).
    from hopper import attention_forward, attention_kernel

    from shared_codegen.runtime.driver import function_attribute

    before = set(attention_kernel._variants)
    for B in (1, 2):
        q, k, v = (torch.randn((B, 8, 256, 256), device="cuda").half() for _ in range(3))
        attention_forward(q, k, v)
    torch.cuda.synchronize()
    # Only this test's variants: D = 128 causal keeps an 8-byte epilogue spill (README).
    variants = [v for key, v in attention_kernel._variants.items() if key not in before]
    assert len(variants) >= 2
    for variant in variants:
        assert variant.kernel.metadata["driver_jit"]
        assert function_attribute(variant.function, "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES") == 0
