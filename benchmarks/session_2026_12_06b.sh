#!/usr/bin/env bash
# 2026-12-06 (eleventh session) device calls, H100 (`nvidia-h100-x1`). STEPS picks what runs
# (space-separated); logs under $OUT. Run as: OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_06b.sh
# Ran that day: "cl_tests cluster fwd_tests ncu_l2" (16:44, remote arrivals still at cluster
# scope: cluster=2 at 0.44-0.58x; ncu_l2 failed on a dtype name and never ran), the probe by
# hand, then "cl_tests cluster probe cl_other_tests" (16:50, arrivals at CTA scope). The
# device time then ran out. "warp" ran in the next session (17:45 UTC: within the noise);
# "timeline" has not run.
# Steps:
#   cl_tests    the forward's GPU tests of cluster=2 (120 s limit: a cluster that waits
#               forever must not eat the session); the `cluster` step runs only after them
#   probe       cluster=2 against 1 at several program counts (benchmarks/cluster_probe.py)
#   cluster     cluster=2 (K/V multicast to a pair of Q tiles) as a same-run variant:
#               D = 128 fp16 and bf16, 4k and 16k; D = 64 and 256 fp16 and fp8 D = 128 at 16k
#   cl_other_tests  the other cluster kernels' GPU tests (tests/gpu/test_clusters_gpu.py)
#   fwd_tests   the Hopper forward's other GPU tests
#   ncu_l2      ncu (real clocks) of the forward at D = 128, N = 16k, fp16 with and without
#               cluster=2: L2 and DRAM throughput, whether K/V reads from L2 bound the kernel
#   timeline    the forward's timeline at D = 128, B = 4, N = 4096, non-causal (median of each
#               region: softmax, wait turn, wait K), under --out $OUT/timelines
#   warp        warp_arrivals (each consumer warp releases K/V stages and hands the turn over
#               on its own: no partition barrier in the block loop) as a same-run variant,
#               D = 128 fp16 4k and 16k causal and not, D = 64 and 256 fp16 at 16k, and fp8
#               D = 128 at 4k and 16k with and beside the overlap with late_wait (with the
#               first row_sum_mma it gave 1.09x at 16k, 0.98-1.01x at 4k), after its GPU
#               tests (not run this session: no device time left)
#   gpu_tests   every GPU test
STEPS=${STEPS:-"cl_tests cluster fwd_tests"}
source "$(dirname "$0")/_session.sh"
A=benchmarks/attention_vs_sdpa.py
T=tests/gpu/test_flash_attention_gpu.py
CL_OK=0
if has cl_tests; then
  TAIL=3 step cl_tests 120 python3 -m pytest -m gpu $T -k cluster -p no:cacheprovider -o addopts="" -q -rf -x
  passed cl_tests && CL_OK=1
fi
if has cluster && [[ $CL_OK == 1 ]]; then
  step cluster128 240 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16,bf16 --causal 0 --rounds 5 --no-triton --variants "same:;cl:cluster=2" --json "$OUT/cluster128.json"
  step cluster_other 200 python3 $A --dims 64,256 --ns 16384 --dtypes fp16 --causal 0 --rounds 5 --no-triton --variants "same:;cl:cluster=2" --json "$OUT/cluster_other.json"
  step cluster_fp8 150 python3 $A --dims 128 --ns 16384 --dtypes fp8 --causal 0 --rounds 5 --no-triton --variants "same:;nors:row_sum_mma=0;cl:cluster=2" --json "$OUT/cluster_fp8.json"
fi
if has probe && [[ $CL_OK == 1 ]]; then
  step probe 60 python3 benchmarks/cluster_probe.py
fi
if has cl_other_tests; then
  TAIL=3 step cl_other_tests 120 python3 -m pytest -m gpu tests/gpu/test_clusters_gpu.py -p no:cacheprovider -o addopts="" -q -rf
fi
if has fwd_tests; then
  TAIL=3 step fwd_tests 300 python3 -m pytest -m gpu $T -k "not cluster" -p no:cacheprovider -o addopts="" -q -rf
fi
if has ncu_l2; then
  TAIL=60 step ncu_l2 200 ncu --clock-control none -k regex:attention_kernel -c 2 --section SpeedOfLight --section MemoryWorkloadAnalysis python3 benchmarks/attention_profile_target.py 128:16384:0:fp16 128:16384:0:fp16:cluster=2
fi
if has timeline; then
  TAIL=12 step timeline 200 env SC_TIMELINE_EVENTS=8192 python3 benchmarks/timelines.py --out "$OUT/timelines" --rounds 5 --attention 4 16 4096 128 --causal 0
fi
if has warp; then
  TAIL=3 step warp_tests 200 python3 -m pytest -m gpu $T -k warp_arrivals -p no:cacheprovider -o addopts="" -q -rf -x
  if passed warp_tests; then
    step warp128 240 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 7 --no-triton --variants "same:;wa:warp_arrivals=1" --json "$OUT/warp128.json"
    step warp_other 200 python3 $A --dims 64,256 --ns 16384 --dtypes fp16 --rounds 5 --no-triton --variants "same:;wa:warp_arrivals=1" --json "$OUT/warp_other.json"
    step warp_fp8 200 python3 $A --dims 128 --ns 4096,16384 --dtypes fp8 --rounds 7 --no-triton --variants "same:;wa:warp_arrivals=1;lw:overlap=1,late_wait=1;walw:warp_arrivals=1,overlap=1,late_wait=1" --json "$OUT/warp_fp8.json"
  fi
fi
if has gpu_tests; then
  TAIL=5 step gpu_tests 420 python3 -m pytest -m gpu tests -p no:cacheprovider -o addopts="" -q -rf
fi
