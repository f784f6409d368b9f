#!/usr/bin/env bash
# 2026-12-06 (fourteenth session) device calls. STEPS picks what runs (space-separated); logs
# under $OUT. Run as: OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_06e.sh
# Each call stays under the device's 600 s a command, so the steps' limits add up to less.
# Ran (H100): "lazy_tests lazy waves" (21:45), "fwd2 bwd_pers paged" (21:46-21:49), "final"
# (22:12-22:14, with lazy_rescale and split_tail the defaults), "users" (22:20). Machine
# starts failed at about 21:03, 21:16, 21:29 and 21:54.
# Steps:
#   lazy_tests the forward's lazy_rescale GPU cases (FA4's conditional rescale) and split_tail
#              cases (stream-K for the last tiles: gluon/stream_k.py)
#   lazy       lazy_rescale, alone and with warp_arrivals, against a copy of ours, fp16 D = 128
#              at 4k and 16k, causal and not, 7 rounds (only when lazy_tests passed); and
#              2-deep K and V rings (FA3's depth at D = 128; stage indices without a division
#              by 3), with and without lazy_rescale; split_tail (non-causal rows), with and
#              without lazy_rescale
#   lazy8      the same for fp8 D = 128 at 16k (row_sum_mma is fp8's default)
#   waves      ours and cuDNN at N = 4096 (B = 4: 2048 tiles, 15.5 waves on 132 SMs) and 4224
#              (B = 3: 1584 tiles, 12 waves exactly), 8192 (15.5 waves) and 8448 (B = 1: 1056
#              tiles, 8 waves): if the half-empty last wave costs its 3%, ours is 3% faster at
#              the whole-wave shapes (what split_tail's stream-K split should win); and
#              split_tail
#   lazy_dims  lazy_rescale at D = 64 and 256, 16k, fp16
#   fwd2       (after "lazy_tests lazy waves" ran at 21:45 with copies of ours at 0.915-1.065x)
#              fewer variants, 21 rounds: lazy_rescale, split_tail and both, fp16 D = 128,
#              4k, 8k and 16k, causal and not; then the whole-wave shapes (4224, 8448) with
#              split_tail, and bf16 D = 128, fp16 D = 64 and 256 and fp8 D = 128 at 16k
#   ncu_lazy   ncu of the forward at D = 128, 16k, fp16: default against lazy_rescale
#   bwd_pers   the paired backward with persistent CTAs against one CTA per tile, 4k to 16k
#   paged      paged decode, batch 1 and 4, 8k and 32k keys, cold, split and merge alone
#   final      with lazy_rescale (16-bit) and split_tail as the defaults: the
#              benchmark of the defaults against the old ones ("old"), fp16 and bf16 D = 128
#              at 4k, 8k and 16k, causal and not, and D = 64, 256 and fp8 D = 128 at 16k;
#              the backward (its fwd + bwd rows run our forward); then the forward's GPU
#              tests. Variant "od": o_direct (O from registers, Q's buffer freed early)
#   users      the GPU tests of the forward's users: the backward and the torch operator
#              (their lse comes from the forward), and the examples' main
#   gpu_tests  every GPU test
STEPS=${STEPS:-"lazy_tests lazy lazy8"}
source "$(dirname "$0")/_session.sh"
LAZY_OK=1
if has lazy_tests; then
  TAIL=3 step lazy_tests 150 $PYTEST tests/gpu/test_flash_attention_gpu.py -k 'lazy_rescale or split_tail'
  passed lazy_tests || LAZY_OK=0
fi
if has lazy && [[ $LAZY_OK == 1 ]]; then
  step lazy 300 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 7 --no-triton --variants "same:;lazy:lazy_rescale=1;lzwa:lazy_rescale=1,warp_arrivals=1;s2:stages=2,k_stages=2;lzs2:lazy_rescale=1,stages=2,k_stages=2;sk:split_tail=1;lzsk:lazy_rescale=1,split_tail=1" --json "$OUT/lazy.json"
fi
if has lazy8 && [[ $LAZY_OK == 1 ]]; then
  step lazy8 120 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 16384 --dtypes fp8 --causal 0 --rounds 7 --no-triton --variants "same:;lazy:lazy_rescale=1;lzwa:lazy_rescale=1,warp_arrivals=1" --json "$OUT/lazy8.json"
fi
if has waves; then
  step waves 120 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,4224,8192,8448 --dtypes fp16 --causal 0 --rounds 7 --no-triton --variants "same:;sk:split_tail=1" --json "$OUT/waves.json"
fi
if has fwd2; then
  V4="same:;lazy:lazy_rescale=1;sk:split_tail=1;lzsk:lazy_rescale=1,split_tail=1"
  step fwd2 150 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,8192,16384 --dtypes fp16 --rounds 21 --no-triton --variants "$V4" --json "$OUT/fwd2.json"
  step waves2 60 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4224,8448 --dtypes fp16 --causal 0 --rounds 21 --no-triton --variants "same:;sk:split_tail=1" --json "$OUT/waves2.json"
  step fwd2_dt 100 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 16384 --dtypes bf16,fp8 --causal 0 --rounds 15 --no-triton --variants "$V4" --json "$OUT/fwd2_dt.json"
  step fwd2_dims 100 python3 benchmarks/attention_vs_sdpa.py --dims 64,256 --ns 16384 --dtypes fp16 --causal 0 --rounds 15 --no-triton --variants "$V4" --json "$OUT/fwd2_dims.json"
fi
if has lazy_dims && [[ $LAZY_OK == 1 ]]; then
  step lazy_dims 150 python3 benchmarks/attention_vs_sdpa.py --dims 64,256 --ns 16384 --dtypes fp16 --causal 0 --rounds 7 --no-triton --variants "same:;lazy:lazy_rescale=1" --json "$OUT/lazy_dims.json"
fi
if has ncu_lazy; then
  TAIL=60 step ncu_lazy 150 ncu --clock-control none -k regex:attention_kernel -c 3 --section SpeedOfLight --section WarpStateStats --section SchedulerStats python3 benchmarks/attention_profile_target.py 128:16384:0:fp16 128:16384:0:fp16:lazy_rescale=1 128:16384:0:fp16:lazy_rescale=1:warp_arrivals=1
fi
if has bwd_pers; then
  step bwd_pers 170 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,8192,16384 --dtypes fp16 --rounds 7 --variants "same:;pers:persistent=1" --json "$OUT/bwd_pers.json"
fi
if has paged; then
  step paged 120 python3 benchmarks/paged_decode.py --batches 1 4 --contexts 8192 32768 --dtypes float16 --rounds 7 --cold-sets 5 --breakdown --json "$OUT/paged.json"
fi
if has final; then
  step final_bench 150 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,8192,16384 --dtypes fp16,bf16 --rounds 15 --no-triton --variants "old:lazy_rescale=0,split_tail=0;od:o_direct=1" --json "$OUT/final_bench.json"
  step final_dims 80 python3 benchmarks/attention_vs_sdpa.py --dims 64,256 --ns 16384 --dtypes fp16 --rounds 15 --no-triton --variants "old:lazy_rescale=0,split_tail=0" --json "$OUT/final_dims.json"
  step final_fp8 50 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 16384 --dtypes fp8 --causal 0 --rounds 15 --no-triton --variants "old:split_tail=0;od:o_direct=1" --json "$OUT/final_fp8.json"
  step final_bwd 70 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,8192,16384 --dtypes fp16 --rounds 9 --json "$OUT/final_bwd.json"
  TAIL=5 step final_tests 300 $PYTEST tests/gpu/test_flash_attention_gpu.py
fi
if has users; then
  TAIL=5 step users 230 $PYTEST tests/gpu/test_flash_attention_bwd_gpu.py tests/gpu/test_examples_gpu.py::test_examples_main_on_gpu
fi
if has gpu_tests; then
  TAIL=15 step gpu_tests ${GPU_TESTS_S:-560} python3 -m pytest -m gpu -p no:cacheprovider -o addopts= -rf tests/gpu ${GPU_TESTS_SKIP_BWD:+--ignore=tests/gpu/test_flash_attention_bwd_gpu.py}
fi
