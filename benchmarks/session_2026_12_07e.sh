#!/usr/bin/env bash
# 2026-12-07, twenty-third session: the device calls, as steps. STEPS picks what runs; logs
# under $OUT. Run as:
#   OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_07e.sh
# Ran (H100, 2026-12-07): "gpu_tests fwd_warp" at 14:44-14:47 UTC; "fwd_warp paged_ab" with
# ROUNDS=15 FWD_NS=16384 and AB_BASE_FILES = ae81752^'s tile/passes/cleanup.py and
# tile/passes/__init__.py (the hoist before software pipelining) at 14:47; by hand the
# fwd_warp benchmark at 4k and 8k in fp16, bf16 and fp8, at D = 64 and 256 (14:48-14:49, 7
# rounds) and at 8k and 16k (14:50, 21 rounds). Machine starts failed after that.
# Steps:
#   gpu_tests    every GPU test, six pytest workers on the one GPU (about 2 minutes)
#   fwd_warp     the forward at D = 128, 4k and 16k keys, fp16 and fp8, causal and not,
#                against cuDNN and the hand GEMM, with variants of ours: a copy ("same"),
#                `warp_rescale` (O's rescale decided per warp by gl.warp_any; fp8 with the
#                lazy rescale it turns on) and, for fp8, the lazy rescale decided at a
#                barrier (`lazy_rescale` alone)
#   paged_ab     benchmarks/session_2026_12_07d.sh's step of that name (AB_BASE_FILES)
STEPS=${STEPS:-"gpu_tests"}
source "$(dirname "$0")/_session.sh"
FWD="python3 benchmarks/attention_vs_sdpa.py --rounds ${ROUNDS:-7}"
gpu_tests_step
if has fwd_warp; then
  step fwd_warp ${FWD_WARP_S:-240} $FWD --dims 128 --ns ${FWD_NS:-4096,16384} --dtypes ${FWD_DTYPES:-fp16,fp8} --no-triton --variants "same:;wr:lazy_rescale=1,warp_rescale=1;lz:lazy_rescale=1" --json "$OUT/fwd_warp.json"
fi
if has paged_ab; then
  STEPS=paged_ab bash "$(dirname "$0")/session_2026_12_07d.sh"
fi
