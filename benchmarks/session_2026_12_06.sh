#!/usr/bin/env bash
# 2026-12-06 (tenth session) device calls, H100 (`nvidia-h100-x1`). STEPS picks what runs
# (space-separated); logs under $OUT. Run as: OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_06.sh
# Ran that day: "fwd_tests lazy paged_cold" (14:15), "bwd" (14:21, with dQ's reduce moved,
# since reverted), "ncu_paged", "paged_var", "fwd_tests rowsum bwd" (14:30), "fp8 ab_bwd"
# (14:34, carry .tut06). Not run (no machine started after 14:35): "fwd_tests promote", the
# first timing of row_sum_mma's corrected form, promote_pv and extra_n; run it next.
# Steps:
#   fwd_tests   the Hopper forward's GPU tests
#   lazy        lazy_rescale (FlashAttention-4's rescaling) and lazy_rescale with late_wait
#               as same-run variants beside a copy of ours ("same", the noise gauge): D = 128
#               fp16 and fp8, 4k and 16k, causal and not; D = 64 and 256 fp16 at 16k (ran
#               14:15 UTC: 0.90-0.99x; the option was removed after, so it no longer runs)
#   rowsum      row_sum_mma (P's row sums as a wgmma against ones) as a same-run variant,
#               with the overlap and with late_wait, same shapes as lazy
#   fp8         fp8 at D = 128 with row_sum_mma on (the new fp8 default) against it off and
#               against the overlap with late_wait, 9 rounds
#   promote     fp8 at D = 128: row_sum_mma, promote_pv (each block's P V added into O in
#               fp32) and extra_n=64 (192-key blocks) as same-run variants, with every
#               variant's error; fp16 at D = 128 with 192-key blocks (with late_wait, 2-deep
#               rings) beside late_wait alone; D = 64 and 256 fp8 at 16k with row_sum_mma
#   ab_bwd      the backward against HEAD's (before lse2 came pre-negated), same run, device
#               time (.tut06/ab_bwd.py; carry .tut06)
#   paged_cold  paged decode at batch 1 and 4, 8k and 32k keys, with every contender's
#               inputs warm in the L2 between calls (as before) and cold (--cold-sets 5)
#   paged_var   paged decode's configs as same-run variants at batch 1 and 4, 8k and 32k keys,
#               warm and cold (49 ranges of 64-key tiles; 32-key tiles in 3- and 4-deep
#               rings; 3-deep 64-key rings), after ncu found the cold batch-1 8k split kernel
#               at 57% of DRAM bandwidth with 2 of 3 program slots per SM filled
#   bwd         the backward's GPU tests, and the backward against SDPA, D = 128 fp16, 4k and
#               16k, causal and not (after lse2 came pre-negated and dQ's reduce moved under
#               the next block's first wgmmas)
#   ncu_paged   ncu of paged decode's split and merge kernels at batch 1, 8k keys (cold caches)
#   ncu_fwd     ncu of the forward at D = 128, N = 16k, fp16 and fp8, with SASS stall samples
#   gpu_tests   every GPU test
STEPS=${STEPS:-"fwd_tests rowsum"}
source "$(dirname "$0")/_session.sh"
A=benchmarks/attention_vs_sdpa.py
if has fwd_tests; then
  TAIL=3 step fwd_tests 300 python3 -m pytest -m gpu tests/gpu/test_flash_attention_gpu.py -p no:cacheprovider -o addopts="" -q -rf
fi
if has lazy; then
  step lazy128 240 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16,fp8 --rounds 5 --no-triton --variants "same:;lazy:lazy_rescale=1;lazylw:lazy_rescale=1,late_wait=1,overlap=1" --json "$OUT/lazy128.json"
  step lazy64_256 150 python3 $A --dims 64,256 --ns 16384 --dtypes fp16 --rounds 5 --no-triton --variants "same:;lazy:lazy_rescale=1" --json "$OUT/lazy64_256.json"
fi
if has rowsum; then
  step rowsum128 240 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16,fp8 --rounds 5 --no-triton --variants "same:;rs:row_sum_mma=1;rsov:row_sum_mma=1,overlap=1;rslw:row_sum_mma=1,overlap=1,late_wait=1" --json "$OUT/rowsum128.json"
  step rowsum64_256 150 python3 $A --dims 64,256 --ns 16384 --dtypes fp16,fp8 --rounds 5 --no-triton --variants "same:;rs:row_sum_mma=1" --json "$OUT/rowsum64_256.json"
fi
if has fp8; then
  step fp8 240 python3 $A --dims 128 --ns 4096,16384 --dtypes fp8 --rounds 9 --no-triton --variants "same:;nors:row_sum_mma=0;lw:overlap=1,late_wait=1" --json "$OUT/fp8.json"
fi
if has promote; then
  step promote 240 python3 $A --dims 128 --ns 4096,16384 --dtypes fp8 --rounds 7 --no-triton --variants "same:;rs:row_sum_mma=1;pp:promote_pv=1,row_sum_mma=1;xn:extra_n=64" --json "$OUT/promote.json"
  step x128 200 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 7 --no-triton --variants "same:;lw:late_wait=1;xlw:extra_n=64,late_wait=1,stages=2,k_stages=2" --json "$OUT/x128.json"
  step fp8_64_256 150 python3 $A --dims 64,256 --ns 16384 --dtypes fp8 --rounds 5 --no-triton --variants "same:;rs:row_sum_mma=1" --json "$OUT/fp8_64_256.json"
fi
if has ab_bwd; then
  step ab_bwd 200 python3 .tut06/ab_bwd.py
fi
if has paged_cold; then
  step paged_warm 120 python3 benchmarks/paged_decode.py --batches 1 4 --contexts 8192 32768 --dtypes float16 --rounds 5 --json "$OUT/paged_warm.json"
  step paged_cold 120 python3 benchmarks/paged_decode.py --batches 1 4 --contexts 8192 32768 --dtypes float16 --rounds 5 --cold-sets 5 --json "$OUT/paged_cold.json"
fi
if has paged_var; then
  PV="mt2:mt=2;t32s3:BLOCK_N=32,num_stages=3;t32s4:BLOCK_N=32,num_stages=4;s3:num_stages=3"
  step paged_var_cold 150 python3 benchmarks/paged_decode.py --batches 1 4 --contexts 8192 32768 --dtypes float16 --rounds 5 --cold-sets 5 --variants "$PV" --json "$OUT/paged_var_cold.json"
  step paged_var_warm 150 python3 benchmarks/paged_decode.py --batches 1 4 --contexts 8192 32768 --dtypes float16 --rounds 5 --variants "$PV" --json "$OUT/paged_var_warm.json"
fi
if has bwd; then
  TAIL=3 step bwd_tests 300 python3 -m pytest -m gpu tests/gpu/test_flash_attention_bwd_gpu.py -p no:cacheprovider -o addopts="" -q -rf
  step bwd 200 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,16384 --dtypes fp16 --rounds 5 --json "$OUT/bwd.json"
fi
if has ncu_paged; then
  step ncu_paged 200 ncu -k regex:paged_decode -s 2 -c 2 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats -f -o /tmp/ncu_paged python3 benchmarks/profile_paged_decode.py 1 8192
  ncu -i /tmp/ncu_paged.ncu-rep --page details > "$OUT/ncu_paged.details.txt" 2>&1
fi
if has ncu_fwd; then
  for spec in 128:16384:0:fp16 128:16384:0:fp8; do
    name=ncu_fwd_$(echo $spec | tr ':' '_')
    step $name 240 ncu -k regex:attention_kernel -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats --section SourceCounters -f -o /tmp/$name python3 benchmarks/attention_profile_target.py $spec
    ncu -i /tmp/$name.ncu-rep --page details > "$OUT/$name.details.txt" 2>&1
    ncu -i /tmp/$name.ncu-rep --page source --csv --print-source sass > "$OUT/$name.sass.csv" 2>&1 || true
  done
fi
if has gpu_tests; then
  TAIL=5 step gpu_tests 420 python3 -m pytest -m gpu tests -p no:cacheprovider -o addopts="" -q -rf
fi
