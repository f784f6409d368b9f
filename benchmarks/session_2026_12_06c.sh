#!/usr/bin/env bash
# 2026-12-06 (twelfth session) device calls, H100 (`nvidia-h100-x1`). STEPS picks what runs
# (space-separated); logs under $OUT. Run as: OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_06c.sh
# Ran that day: "bwd_tests bwd_var" (17:54), "bwd_var2" (17:58), "bwd_stages paged_deep
# ncu_bwd" (18:16). Not run (no machine started after 18:16, then the device time ran out):
# "final" / "final_tests", with the causal {"stages": 2} and the `paired` GPU cases; run
# "final" next, make 2 stages the causal default if they pass, and `paired` the default if
# it wins beyond the "same" copy's spread. "final" ran in the thirteenth session (19:26 UTC,
# on an H100): tests passed; session_2026_12_06d.sh follows it.
# Steps:
#   bwd_tests   the backward's GPU tests (dq_writer and early_dv cases included)
#   bwd_var     the backward against SDPA, D = 128 fp16, 4k and 16k, causal and not, with
#               same-run variants: a copy of ours, dq_writer (a writer warp issues dQ's
#               reduces, consumer warps arrive each on its own), early_dv (dV issued before
#               dP^T's wait), both
#   bwd_var2    the same at 4k, 8k and 16k, 7 rounds, with dq_stages=2 (two dQ tiles, so the
#               consumers never wait for the writer's reduce to read one; with 2 Q / dO
#               stages, which s2 times alone) after the GPU tests of the gradients
#   bwd_stages  causal backward, 2 against 3 Q / dO stages (s2 gave 0.99x at 4k, 1.03x at 8k
#               and 1.09x at 16k against ours at 17:58, beside a copy of ours at 1.00-1.04x),
#               4k, 8k and 16k, 11 rounds
#   ncu_bwd     ncu of ours and cuDNN's backward kernels (and its forward), N = 4k, causal and not:
#               tensor pipe, issue, stall reasons, L2
#   paged_deep  paged decode at batch 1, 8k and 32k keys, cold: one program per SM with deep
#               K/V rings (16 ranges of 8 64-key tiles in 4- and 6-deep rings, or 4 128-key
#               tiles in a 3-deep one), so that each SM keeps 128-192 KB of loads in flight
#               from its first block-table read on, against the default 33 ranges of 64-key
#               tiles in 2-deep rings (2 programs per SM); --splits 16 times the default
#               config at 16 ranges too
#   final       the backward's GPU tests (causal with 2 stages among them), the forward's
#               warp_arrivals cases (per-warp arrivals now sync the warp first)
#               and the backward against SDPA (fp16, 4k, 8k and 16k, causal and not, 7
#               rounds) with variants: a copy of ours, causal-default stages=2, and `paired`
#               (query blocks in pairs through two dS^T and two dQ tiles: one partition
#               barrier a block instead of two, where ncu found 6.4 of every 17 warp cycles);
#               final_tests: the tests alone
#   fwd_tests   the Hopper forward's GPU tests (not the cluster ones)
#   gpu_tests   every GPU test
STEPS=${STEPS:-"bwd_tests bwd_var"}
source "$(dirname "$0")/_session.sh"
BWD_OK=1
if has bwd_tests; then
  TAIL=3 step bwd_tests 300 $PYTEST tests/gpu/test_flash_attention_bwd_gpu.py
  passed bwd_tests || BWD_OK=0
fi
if has bwd_var && [[ $BWD_OK == 1 ]]; then
  step bwd_var 400 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,16384 --dtypes fp16 --rounds 5 --variants "same:;dqw:dq_writer=1;edv:early_dv=1;both:dq_writer=1,early_dv=1" --json "$OUT/bwd_var.json"
fi
if has bwd_var2; then
  TAIL=3 step dqw_tests 200 $PYTEST tests/gpu/test_flash_attention_bwd_gpu.py -k gradients
  if passed dqw_tests; then
    step bwd_var2 400 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,8192,16384 --dtypes fp16 --rounds 7 --variants "same:;dqw:dq_writer=1;both:dq_writer=1,early_dv=1;dqw2:dq_writer=1,dq_stages=2,stages=2;s2:stages=2" --json "$OUT/bwd_var2.json"
  fi
fi
if has bwd_stages; then
  step bwd_stages 300 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,8192,16384 --dtypes fp16 --causal 1 --rounds 11 --variants "same:;s2:stages=2;s3:stages=3" --json "$OUT/bwd_stages.json"
fi
if has ncu_bwd; then
  TAIL=5 step ncu_bwd 300 ncu --clock-control none -k regex:"attention_bwd_kernel|sdpa|bprop" -c 10 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats -f -o /tmp/ncu_bwd python3 benchmarks/attention_bwd_profile_target.py 4096:0 4096:1
  ncu -i /tmp/ncu_bwd.ncu-rep --page details --print-details all > "$OUT/ncu_bwd.details.txt" 2>&1
  ncu -i /tmp/ncu_bwd.ncu-rep --page raw --csv > "$OUT/ncu_bwd.raw.csv" 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|Throughput|Busy|Issued|Eligible|Warp Cycles|Stall|Pipe" "$OUT/ncu_bwd.details.txt" | head -150
fi
if has paged_deep; then
  step paged_deep 200 python3 benchmarks/paged_decode.py --batches 1 --contexts 8192 32768 --dtypes float16 --rounds 7 --cold-sets 5 --splits 16 --variants "d4:num_stages=4;d6:num_stages=6;t128:BLOCK_N=128,num_stages=3" --json "$OUT/paged_deep.json"
fi
if has final || has final_tests; then
  TAIL=3 step final_bwd_tests 200 $PYTEST tests/gpu/test_flash_attention_bwd_gpu.py -k gradients
  TAIL=3 step final_warp_tests 100 $PYTEST tests/gpu/test_flash_attention_gpu.py -k warp_arrivals
fi
if has final; then
  step final_bwd 300 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,8192,16384 --dtypes fp16 --rounds 7 --variants "same:;s2:stages=2;paired:paired=1" --json "$OUT/final_bwd.json"
fi
if has fwd_tests; then
  TAIL=3 step fwd_tests 300 $PYTEST tests/gpu/test_flash_attention_gpu.py -k "not cluster"
fi
if has gpu_tests; then
  TAIL=15 step gpu_tests 580 $PYTEST tests/gpu
fi
