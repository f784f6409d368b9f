#!/usr/bin/env bash
# 2026-12-07, twenty-first session: the device calls, as steps. STEPS picks what runs; logs
# under $OUT. Run as:
#   OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_07d.sh
# Ran (H100, 2026-12-07): "gpu_tests" and "paged_ab" with AB_BASE = the layout assignment
# before small accesses anchored last and AB_VARIANTS = "n32s3:BLOCK_N=32,num_stages=3,
# pps=2" (10:43-10:46 UTC); then by hand, 9 and 7 rounds without Triton, paged_decode.py's
# --variants at batch 1 to 8 (10:48-10:55 UTC): an L2 prefetch of the block table's row
# before seq_len is read (not kept: 1.000x), 32-key tiles in 3- to 5-deep rings and 64-key
# in 3-deep ones, two to four programs an SM (32-key 3-deep at two an SM became the split
# default at D = 128).
# Twenty-second session (H100): "gpu_tests paged_ab" at 12:28 UTC with AB_BASE_FILES = the
# conversion clean-ups and planner before the loop-invariant hoist and one-round
# conversions, and AB_VARIANTS = "m32w1:merge_block_d=32,merge_warps=1,pps=2" (a merge
# kernel variant, since removed: 0.994-1.002x); "paged_tests paged_full" at 12:42 UTC with
# TRITON_VARIANTS = "n64s2:BLOCK_N=64,num_stages=2". The device could not be started after.
# Steps:
#   gpu_tests    every GPU test, six pytest workers on the one GPU (about 2 minutes)
#   paged_ab     the paged decode rows that decide issue 11 (batch 1, 4, 8 at 8k and 128k
#                keys, fp16, cold caches, against Triton 3.6) compiled by this tree and by
#                a copy of it whose tile/passes/layout_assignment.py is $AB_BASE and
#                whose files are replaced as $AB_BASE_FILES says ("from:to ...") (when
#                either is set): two processes, Triton the common reference
#   paged_tests  the paged decode GPU tests
#   paged_short  the paged_ab rows with this tree alone
#   paged_full   issue 11's decode table: batch 1-128, 1k-128k keys, fp16 and bf16
#                (TRITON_VARIANTS: Triton also with other configs, as --triton-variants)
STEPS=${STEPS:-"gpu_tests"}
source "$(dirname "$0")/_session.sh"
PAGED="python3 benchmarks/paged_decode.py --cold-sets 5"
ROWS=${ROWS:-"--batches 1 4 8 --contexts 8192 131072 --dtypes float16 --rounds 5 --max-gb 20"}
gpu_tests_step
if has paged_ab; then
  if [ -n "${AB_BASE:-}${AB_BASE_FILES:-}" ]; then
    rm -rf /tmp/ab_base && mkdir /tmp/ab_base && cp -r . /tmp/ab_base/ 2>/dev/null
    [ -n "${AB_BASE:-}" ] && cp "$AB_BASE" /tmp/ab_base/tile/passes/layout_assignment.py
    for pair in ${AB_BASE_FILES:-}; do cp "${pair%%:*}" "/tmp/ab_base/${pair#*:}"; done
    step paged_base 200 bash -c "cd /tmp/ab_base && SC_CACHE_DIR=\$(mktemp -d) $PAGED $ROWS"
  fi
  step paged_new 200 $PAGED $ROWS ${AB_VARIANTS:+--variants "$AB_VARIANTS"}
fi
if has paged_tests; then
  TAIL=3 step paged_tests 100 $PYTEST tests/gpu/test_paged_decode_gpu.py
fi
if has paged_short; then
  step paged_short 120 $PAGED $ROWS
fi
if has paged_full; then
  step paged_full ${PAGED_S:-400} $PAGED --batches 1 4 8 32 64 128 --contexts 1024 8192 32768 131072 --dtypes float16 bfloat16 --rounds 5 --max-gb 20 --json "$OUT/paged_full.json" ${TRITON_VARIANTS:+--triton-variants "$TRITON_VARIANTS"}
fi
