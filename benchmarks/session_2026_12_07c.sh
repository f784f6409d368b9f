#!/usr/bin/env bash
# 2026-12-07, twentieth session: the device calls, as steps. STEPS picks what runs; logs
# under $OUT. Run as:
#   OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_07c.sh
# Ran (H100, 2026-12-07): "gpu_tests" (09:36-09:38: 558 passed, 19 skipped), "probe" and
# "paged_full" (09:40-09:43, after graph_medians began to settle its samples), the
# "paged_variants" runs (09:43-10:05, by hand, one variant list at a time), the batch-64
# ring depths (10:15) and, with 32-key 2-deep rings the many-program default at D = 128,
# "paged_tests" and "paged_full" again (10:16-10:17). Between them, by hand and not kept:
# the tile DSL's Q-tile conversion hoisted out of the decode loop (in registers: 09:49, in
# shared memory: 10:00; examples/flash_attention/README.md, "Measured", says what came of
# it) and a dump of Triton 3.6's compiled split kernel for comparison (09:47).
# Steps:
#   gpu_tests       every GPU test, six pytest workers on the one GPU (about 2 minutes)
#   paged_tests     the paged decode GPU tests
#   probe           benchmarks/paged_decode_probe.py: batch 1 at 8k keys from inside (a
#                   timeline of the split kernel on cold caches, and a seq_len sweep)
#   paged_full      issue 11's decode table: batch 1-128, 1k-128k keys, fp16 and bf16,
#                   cold caches, against Triton 3.6 on the same source and the copy
#   paged_variants  batch 1 and 4 at 8k and 32k keys: tile sizes, ring depths, warps and
#                   split counts against ours (as ratios), then batch 64 and 128's rings
STEPS=${STEPS:-"gpu_tests"}
source "$(dirname "$0")/_session.sh"
PAGED="python3 benchmarks/paged_decode.py --cold-sets 5"
gpu_tests_step
if has paged_tests; then
  TAIL=5 step paged_tests 100 $PYTEST tests/gpu/test_paged_decode_gpu.py
fi
if has probe; then
  step probe 150 python3 benchmarks/paged_decode_probe.py
fi
if has paged_full; then
  step paged_full ${PAGED_S:-400} $PAGED --batches 1 4 8 32 64 128 --contexts 1024 8192 32768 131072 --dtypes float16 bfloat16 --rounds 5 --max-gb 20 --json "$OUT/paged_full.json"
fi
if has paged_variants; then
  step paged_variants 120 $PAGED --batches 1 4 --contexts 8192 32768 --dtypes float16 --rounds 9 --no-triton --variants "n32s3:BLOCK_N=32,num_stages=3,pps=2;n32s2:BLOCK_N=32,num_stages=2,pps=2;w8:num_warps=8;w2:num_warps=2;s3:num_stages=3;p3mt2:pps=3,mt=2;same:"
  step paged_splits 120 $PAGED --batches 1 --contexts 8192 32768 --dtypes float16 --rounds 9 --no-triton --splits 48 64 96 128
  step paged_rings 120 $PAGED --batches 64 128 --contexts 1024 8192 --dtypes float16 --rounds 7 --variants "n32s3:BLOCK_N=32,num_stages=3;n32s4:BLOCK_N=32,num_stages=4;same:"
fi
