#!/usr/bin/env bash
# 2026-12-07, twenty-fourth session: the device calls, as steps. STEPS picks what runs; logs
# under $OUT. Run as:
#   OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_07f.sh
# Ran (H100, 2026-12-07): "gpu_tests fwd bf16 paged_b1" with ROUNDS=7 at 17:07-17:11 UTC
# (the GPU tests' two fp8 `overlap` failures then again by hand at 17:12); no machine
# could be started before or after it.
# Steps:
#   gpu_tests    every GPU test, six pytest workers on the one GPU (about 2 minutes), with
#                `warp_rescale` the forward's default at D = 128
#   fwd          the forward at D = 128 (FWD_NS keys, FWD_DTYPES), causal and not, against
#                cuDNN and the hand GEMM, with variants of ours: without `warp_rescale`
#                ("nowr"), the defaults before it ("old": no lazy rescale in fp8, the barrier's
#                in 16-bit) and `warp_arrivals` on top of it ("wa": no partition barrier left
#                in the 16-bit block loop)
#   bf16         bf16 at D = 128, 1k, 4k and 16k keys, causal and not, with the rescale slack
#                at 3 and 1 (log2 units; the default 8) and without the lazy rescale: its
#                worst-element error against cuDNN's, and the speed each costs
#   paged_b1     paged decode, batch 1 at 8k keys, fp16 and bf16 (issue 11's closest row)
#   bwd          the backward against cuDNN and flash (benchmarks/attention_bwd_vs_sdpa.py)
STEPS=${STEPS:-"gpu_tests"}
source "$(dirname "$0")/_session.sh"
gpu_tests_step
fwd_step
bf16_step
paged_b1_step --splits 49 66 --breakdown
bwd_step
