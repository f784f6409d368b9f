#!/usr/bin/env bash
# 2026-12-07, twenty-fifth session: the device calls, as steps. STEPS picks what runs; logs
# under $OUT. Run as:
#   OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_07g.sh
# Ran (H100, 2026-12-07): "gpu_tests paged_b1 fwd" with ROUNDS=5 FWD_NS=16384
# FWD_DTYPES=fp16,fp8 at 18:38-18:43 (the empty FWD_VARIANTS fell back to the default
# variants), then on the warm machine "paged_full" (18:44), "bwd" with BWD_ARGS="--dtypes
# fp16 --rounds 5" and "--dtypes fp16 --rounds 11 --ns 4096,8192" (18:46), "fwd" with
# FWD_NS=4096,16384 FWD_DTYPES=fp16,bf16 FWD_VARIANTS=" " (5 rounds) and FWD_NS=4096 (11
# rounds) at 18:47-18:48, and by hand ncu of paged decode (the ncu_paged line of
# session_2026_12_06.sh) and attention_vs_sdpa.py --dims 64,256 --ns 4096,16384 --dtypes
# fp16,bf16 --rounds 7, --dims 128 --ns 16384 --dtypes fp16,fp8 --rounds 9 (18:49-18:51).
# Eight refused or failed starts before the first call.
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
#   paged_b1     paged decode, batch 1 at 8k keys, fp16 and bf16 (issue 11's closest row),
#                against the kernel without the block-table prefetch ("nopf"), without the
#                deferred row sum ("nods"), and with one or two warps a program (fewer
#                cross-warp reductions; 4 warps: 3 BAR.SYNC a tile)
#   paged_full   issue 11's table: batch 1 to 128, 1k to 128k keys, fp16 and bf16, ours,
#                Triton 3.6 on the same source and the copy, cold caches
#   bwd          the backward against cuDNN and flash (benchmarks/attention_bwd_vs_sdpa.py)
STEPS=${STEPS:-"gpu_tests"}
PAGED_B1_VARIANTS="nopf:table_prefetch=0,pps=2;nods:defer_row_sum=0,pps=2;w1:num_warps=1,pps=4;w1p2:num_warps=1,pps=2"
PAGED_B1_VARIANTS+=";w1n16:num_warps=1,BLOCK_N=16,num_stages=4,pps=4;w2:num_warps=2,pps=2"
source "$(dirname "$0")/_session.sh"
gpu_tests_step
fwd_step
bf16_step
paged_b1_step --breakdown --variants "${PAGED_VARIANTS:-$PAGED_B1_VARIANTS}" \
  --json "$OUT/paged_b1.json"
if has paged_full; then
  step paged_full ${PAGED_S:-420} python3 benchmarks/paged_decode.py --cold-sets 5 \
    --batches 1 4 8 32 64 128 --contexts 1024 8192 32768 131072 --dtypes float16 bfloat16 \
    --rounds ${PAGED_ROUNDS:-5} --max-gb 20 --json "$OUT/paged_full.json"
fi
bwd_step
