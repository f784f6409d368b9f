#!/usr/bin/env bash
# 2026-12-06/07 (fifteenth session) device calls. STEPS picks what runs (space-separated); logs
# under $OUT. Run as: OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_06f.sh
# Each call stays under the device's 600 s a command, so the steps' limits add up to less.
# Ran (H100, 2026-12-07): "spec_tests spec gaps" (00:37; spec_dims ran with spec, gaps timed
# out after four of its seven configs), then by hand the variants again with o_direct
# (00:40) and the gaps of speculative_p and o_direct at 4k, and the forward's GPU tests with
# speculative_p the default (00:42, cut at 195 s: 57 passed, 3 option errors since fixed).
# Machine starts failed or were refused at 23:2x, 23:36, 23:44, 23:52, 00:06, 00:21 and
# 00:22 (about 16 minutes of the 30).
# Steps:
#   gaps       timelines of the forward (fp16, D = 128, 4k and 16k, causal and not, and
#              o_direct at 4k): what a tile boundary costs (benchmarks/attention_tile_gaps.py)
#   spec_tests the GPU cases of speculative_p (P against the kept maxima before the row max)
#   spec       speculative_p against a copy of ours, fp16 D = 128 at 4k, 8k and 16k, causal
#              and not; then bf16 D = 128, fp16 D = 64 and 256 at 16k (only when spec_tests
#              passed)
#   qpf        (not run yet) q_prefetch's GPU cases, then q_prefetch against a copy of ours,
#              fp16 D = 128 at 4k and 16k, causal and not, and the tile gaps with it
#   fwd_tests  the forward's GPU tests
#   gpu_tests  every GPU test
STEPS=${STEPS:-"spec_tests gaps spec"}
source "$(dirname "$0")/_session.sh"
SPEC_OK=1
if has spec_tests; then
  TAIL=5 step spec_tests 150 $PYTEST tests/gpu/test_flash_attention_gpu.py -k 'speculative_p or rescales_when'
  passed spec_tests || SPEC_OK=0
fi
if has spec && [[ $SPEC_OK == 1 ]]; then
  step spec 170 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,8192,16384 --dtypes fp16 --rounds 7 --no-triton --variants "same:;spec:speculative_p=1" --json "$OUT/spec.json"
fi
if has gaps; then
  TAIL=12 step gaps 100 python3 benchmarks/attention_tile_gaps.py 128:4096:0:fp16 128:16384:0:fp16 128:4096:1:fp16 128:16384:1:fp16 128:4096:0:fp16:speculative_p=1 128:16384:0:fp16:speculative_p=1 128:4096:0:fp16:o_direct=1 --json "$OUT/gaps.json"
fi
if has spec && [[ $SPEC_OK == 1 ]]; then
  step spec_dims 100 python3 benchmarks/attention_vs_sdpa.py --dims 64,256 --ns 16384 --dtypes fp16 --causal 0 --rounds 9 --no-triton --variants "same:;spec:speculative_p=1" --json "$OUT/spec_dims.json"
fi
if has qpf; then
  TAIL=5 step qpf_tests 120 $PYTEST tests/gpu/test_flash_attention_gpu.py -k q_prefetch
  if passed qpf_tests; then
    step qpf 150 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 9 --no-triton --variants "same:;qpf:q_prefetch=1" --json "$OUT/qpf.json"
    TAIL=6 step qpf_gaps 80 python3 benchmarks/attention_tile_gaps.py 128:4096:0:fp16 128:4096:0:fp16:q_prefetch=1 128:4096:1:fp16:q_prefetch=1
  fi
fi
if has fwd_tests; then
  TAIL=5 step fwd_tests 300 $PYTEST tests/gpu/test_flash_attention_gpu.py
fi
if has gpu_tests; then
  TAIL=15 step gpu_tests ${GPU_TESTS_S:-560} python3 -m pytest -m gpu -p no:cacheprovider -o addopts= -rf tests/gpu
fi
