"""The Hopper flash-attention forward (examples/flash_attention/hopper.py) against torch SDPA
(cuDNN and flash backends), a Triton 3.6 tutorial-06-style forward and our hand GEMM at
8192^3, interleaved round by round in one process.

    B*N = 16k tokens, H*D = 2048; TFLOP/s = 4*B*H*N^2*D / time (half that when causal)

Each row reports ours / cuDNN / flash / Triton TFLOP/s, ours over cuDNN (the ratio of the
medians, then the median, lowest and highest of the ratios round by round: how far the run's
ratio can be trusted), and ours over the hand GEMM's TFLOP/s measured in the same round (the
wgmma ceiling under the power cap).
Errors: max |o - o32| / max |o32| against a float32 computation of the same inputs, on the
first and last head (ours, cuDNN).

    PYTHONPATH=. python benchmarks/attention_vs_sdpa.py [--dims 128,64,256] [--ns 1024,...]
        [--dtypes fp16,bf16,fp8] [--causal 0,1] [--rounds 10] [--json out.json] [--no-triton]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "..", "examples", "flash_attention"),
          os.path.join(HERE, "..", "examples", "gemm"), os.path.join(HERE, "..", "examples"),
          os.path.join(HERE, ".."), HERE):
    sys.path.insert(0, p)

from _bench import (gpu_torch, interleaved_samples, parse_variants,  # noqa: E402
                    round_ratios)

TOKENS, WIDTH = 16384, 2048


def triton_forward():
    """A Triton forward in the style of Triton 3.6's tutorial 06 (FA2 algorithm: one program
    per 128-row Q block, K/V streamed in BLOCK_N blocks, exp2 online softmax; causal runs the
    off-diagonal blocks unmasked and the diagonal band masked)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, start_m, lo, hi,
               qk_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr,
               offs_m, offs_n):
        k_ptrs += lo * stride_kn
        v_ptrs += lo * stride_vn
        for start_n in tl.range(lo, hi, BLOCK_N):
            k = tl.load(k_ptrs)
            s = tl.dot(q, tl.trans(k))
            if MASK:
                keep = offs_m[:, None] >= (start_n + offs_n[None, :])
                s = s * qk_scale + tl.where(keep, 0, -1.0e6)
                m_new = tl.maximum(m_i, tl.max(s, 1))
                s -= m_new[:, None]
            else:
                m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
                s = s * qk_scale - m_new[:, None]
            p = tl.math.exp2(s)
            alpha = tl.math.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            v = tl.load(v_ptrs)
            acc = tl.dot(p.to(v.dtype), v, acc)
            m_i = m_new
            k_ptrs += BLOCK_N * stride_kn
            v_ptrs += BLOCK_N * stride_vn
        return acc, l_i, m_i

    configs = [triton.Config({"BLOCK_M": 128, "BLOCK_N": bn}, num_warps=8, num_stages=s)
               for bn in (64, 128) for s in (2, 3, 4)]

    @triton.autotune(configs, key=["HEAD_DIM", "CAUSAL", "N_CTX"])
    @triton.jit
    def _fwd(Q, K, V, O, qk_scale, stride_h, stride_n, N_CTX, HEAD_DIM: tl.constexpr,
             CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        start_m = tl.program_id(0)
        off = tl.program_id(1).to(tl.int64) * stride_h
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(Q + off + offs_m[:, None] * stride_n + offs_d[None, :])
        k_ptrs = K + off + offs_n[:, None] * stride_n + offs_d[None, :]
        v_ptrs = V + off + offs_n[:, None] * stride_n + offs_d[None, :]
        m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
        l_i = tl.full([BLOCK_M], 1.0, tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        qk_scale = qk_scale * 1.44269504
        if CAUSAL:
            acc, l_i, m_i = _inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_n, stride_n,
                                   start_m, 0, start_m * BLOCK_M, qk_scale, BLOCK_M, BLOCK_N,
                                   False, offs_m, offs_n)
            acc, l_i, m_i = _inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_n, stride_n,
                                   start_m, start_m * BLOCK_M, (start_m + 1) * BLOCK_M,
                                   qk_scale, BLOCK_M, BLOCK_N, True, offs_m, offs_n)
        else:
            acc, l_i, m_i = _inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_n, stride_n,
                                   start_m, 0, N_CTX, qk_scale, BLOCK_M, BLOCK_N, False,
                                   offs_m, offs_n)
        acc = acc / l_i[:, None]
        tl.store(O + off + offs_m[:, None] * stride_n + offs_d[None, :], acc.to(O.dtype.element_ty))

    def run(q, k, v, o, causal):
        B, H, N, D = q.shape
        grid = lambda meta: (triton.cdiv(N, meta["BLOCK_M"]), B * H)  # noqa: E731
        _fwd[grid](q, k, v, o, 1.0 / math.sqrt(D), q.stride(1), q.stride(2), N, HEAD_DIM=D,
                   CAUSAL=causal)
        return o
    return run


def _err(torch, o, q, k, v, causal, heads):
    """max |o - o32| / max |o32| over the listed heads (float32 reference)."""
    worst = 0.0
    for h in heads:
        q32, k32, v32 = (x[0, h].float() for x in (q, k, v))
        s = (q32 @ k32.t()) / math.sqrt(q.shape[-1])
        if causal:
            n = s.shape[0]
            s.masked_fill_(torch.ones(n, n, device=s.device, dtype=torch.bool).triu(1),
                           -float("inf"))
        ref = torch.softmax(s, -1) @ v32
        worst = max(worst, float((o[0, h].float() - ref).abs().max() / ref.abs().max()))
    return worst


def run_row(torch, tri, gemm_fns, D, N, causal, dtype, rounds, variants=()):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from hopper import attention_launcher

    import torch.nn.functional as F
    B, H = TOKENS // N, WIDTH // D
    gen = torch.Generator(device="cuda").manual_seed(N + D)
    mk = lambda: torch.randn((B, H, N, D), device="cuda", generator=gen)  # noqa: E731
    q32, k32, v32 = mk(), mk(), mk()
    fp8 = dtype == "fp8"
    tdt = torch.float8_e4m3fn if fp8 else getattr(torch, {"fp16": "float16",
                                                            "bf16": "bfloat16"}[dtype])
    q, k, v = q32.to(tdt), k32.to(tdt), v32.to(tdt)
    ours = attention_launcher(q, k, v, causal=causal)
    fns = {"ours": ours}
    for name, opts in variants:  # more of ours in the same rounds (_bench.parse_variants)
        fns[name] = attention_launcher(q, k, v, causal=causal, **opts)
    ref16 = (q, k, v) if not fp8 else tuple(x.to(torch.float16) for x in (q, k, v))
    outs = {}

    def sdpa(backend, name):
        def f():
            with sdpa_kernel(backend):
                outs[name] = F.scaled_dot_product_attention(*ref16, is_causal=causal)
            return outs[name]
        return f
    fns["cuDNN"] = sdpa(SDPBackend.CUDNN_ATTENTION, "cuDNN")
    fns["flash"] = sdpa(SDPBackend.FLASH_ATTENTION, "flash")
    if tri is not None:
        o_tri = torch.empty_like(ref16[0])
        try:  # its autotuned configs may not fit (D = 256: shared memory)
            tri(*ref16, o_tri, causal)
            fns["triton"] = lambda: tri(*ref16, o_tri, causal)
        except Exception as exc:
            print(f"  triton: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
    fns.update(gemm_fns)
    samples = interleaved_samples(fns, rounds, torch)
    med = {name: statistics.median(ts) for name, ts in samples.items()}
    flop = 4.0 * B * H * N * N * D / (2 if causal else 1)
    tf = {n: flop / med[n] / 1e9 for n in fns if not n.startswith("gemm")}
    gemm_tf = {n: 2.0 * 8192 ** 3 / med[n] / 1e9 for n in fns if n.startswith("gemm")}
    o = ours()
    heads = (0, H - 1)
    row = {"D": D, "N": N, "causal": causal, "dtype": dtype, "B": B, "H": H, "tflops": tf,
           "gemm_tflops": gemm_tf,
           "err_ours": _err(torch, o, *ref16, causal, heads),
           "err_cudnn": _err(torch, fns["cuDNN"](), *ref16, causal, heads),
           "err_variants": {name: _err(torch, fns[name](), *ref16, causal, heads)
                            for name, _ in variants}}
    gemm_name = "gemm bf16" if dtype == "bf16" else "gemm fp16"
    row["vs_cudnn"] = tf["ours"] / tf["cuDNN"]
    row["vs_cudnn_rounds"] = round_ratios(samples, "ours", "cuDNN")
    row["vs_gemm"] = tf["ours"] / gemm_tf[gemm_name]
    return row


def print_row(r):
    t, rr = r["tflops"], r["vs_cudnn_rounds"]
    print(f"{r['dtype']:5s} D={r['D']:3d} N={r['N']:5d} {'causal' if r['causal'] else 'full  '} "
          f"ours {t['ours']:6.1f} cuDNN {t['cuDNN']:6.1f} flash {t['flash']:6.1f} "
          f"triton {t.get('triton', float('nan')):6.1f} | x cuDNN {r['vs_cudnn']:.3f} "
          f"(rounds {rr['median']:.3f}, {rr['low']:.3f}-{rr['high']:.3f}) "
          f"x GEMM {r['vs_gemm']:.3f} | err {r['err_ours']:.1e} (cuDNN {r['err_cudnn']:.1e})",
          flush=True)
    for name, v in t.items():
        if name not in ("ours", "cuDNN", "flash", "triton"):
            print(f"      variant {name}: {v:6.1f} TFLOP/s ({v / t['ours']:.3f}x ours), "
                  f"err {r['err_variants'][name]:.1e}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dims", default="128,64,256")
    ap.add_argument("--ns", default="1024,2048,4096,8192,16384")
    ap.add_argument("--dtypes", default="fp16,bf16")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--variants", default="", help="more of ours: name:key=val,...;...")
    args = ap.parse_args(argv)
    torch = gpu_torch("benchmarks/attention_vs_sdpa.py")
    if torch is None:
        return 0
    import datetime
    now = datetime.datetime.now(datetime.timezone.utc)
    print(f"device: {torch.cuda.get_device_name()}  {now:%Y-%m-%d %H:%M} UTC")
    from gemm import gemm_launcher
    gemm_fns = {}
    for name, dt in (("gemm fp16", torch.float16), ("gemm bf16", torch.bfloat16)):
        a = torch.randn((8192, 8192), device="cuda", dtype=dt)
        b = torch.randn((8192, 8192), device="cuda", dtype=dt)
        gemm_fns[name] = gemm_launcher(a, b, torch.empty_like(a), block=(128, 256, 64))
    tri = None if args.no_triton else triton_forward()
    rows = []
    for D in (int(x) for x in args.dims.split(",")):
        for dtype in args.dtypes.split(","):
            for N in (int(x) for x in args.ns.split(",")):
                for causal in (bool(int(c)) for c in args.causal.split(",")):
                    try:
                        rows.append(run_row(torch, None if dtype == "fp8" else tri, gemm_fns,
                                            D, N, causal, dtype, args.rounds,
                                            parse_variants(args.variants)))
                    except Exception as exc:  # keep the other rows
                        print(f"{dtype} D={D} N={N} causal={causal}: {type(exc).__name__}: "
                              f"{str(exc)[:400]}", flush=True)
                        continue
                    print_row(rows[-1])
                    if args.json:
                        with open(args.json, "w") as f:
                            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
