#!/usr/bin/env bash
# 2026-12-07 (sixteenth to eighteenth sessions) device calls. STEPS picks what runs
# (space-separated); logs under $OUT. Run as:
#   OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_07.sh
# Each call stays under the device's 600 s a command, so the steps' limits add up to less.
# Ran (H100, 2026-12-07): "new_tests short" (02:40: 7 GPU cases passed, then the 5-round
# runs), then by hand the 9-round q_buffers run at 4k, 8k and 16k, D = 64's, the tile gaps
# and the backward's and examples' GPU tests (02:41, 39 passed), and with q_buffers the
# default the forward's main, split_tail, speculative_p and q_buffers GPU cases (02:44, 24
# passed). Machine starts failed or were refused from 01:35 to 02:38.
# Seventeenth session (same day): starts failed or were refused from 03:30 to 04:47; then
# "bwd_short" (04:49: its two GPU cases passed, then the 7-round run), by hand a 9-round
# split_tail run with two copies of each (04:50), and the machine was taken back at 04:51.
# Eighteenth session (same day): starts failed or were refused from 05:36 to 07:31; then
# "fp8wg bwd_full" with BWD_FULL_NS=4096,8192,16384 (07:32-07:33), "bwd_tests" (45 passed)
# and the fwd_snake benchmark at 4k and 16k (07:34-07:36), the snake GPU cases (07:36, 4
# passed), "fwd_snake_more" (07:36), and by hand fp8 with snake=1 and fp16 / fp8 at 16k
# (07:37). snake became the causal 16-bit default after them. rings, bwd_split, bwd_lpt,
# fwd_tests and gpu_tests have not run: next, "gpu_tests" (the forward's GPU cases have
# not run with snake the causal default), then "rings".
# Steps:
#   new_tests  the GPU cases of q_prefetch and q_buffers (the next tile's Q into L2, or into
#              a second buffer while this tile runs)
#   qbuf       (only when new_tests passed) q_buffers=2 (which takes a K stage: k_stages=2),
#              k_stages=2 alone and q_prefetch against a copy of ours, fp16 D = 128 at 4k,
#              8k and 16k, causal and not; q_buffers=2 at D = 64 (16k); in fp8 (16k)
#              q_buffers=2 and lazy_rescale (0.937x at 2026-12-06 21:46, before later
#              changes); then the tile gaps with q_buffers=2 at 4k
#   short      qbuf's essentials (fp16 D = 128 at 4k and 16k: q_buffers=2, q_prefetch; fp8)
#   rings      (not run yet) with two Q buffers the default at D = 128: K's ring 3 deep and
#              V's 2 instead, V_{j-1} loaded after K_j (v_lag=1), and one Q buffer again,
#              fp16 at 4k and 16k, causal and not, 9 rounds; and two Q buffers at D = 64
#              (1.025x and 1.052x at 16k against a copy at 1.013x and 1.025x, 5 rounds)
#   fp8wg      (not run yet) fp8 at D = 128 with three consumer warpgroups and 128-key
#              blocks: without the overlap a warpgroup's period is its GEMMs plus its
#              softmax, so a third warpgroup could keep the tensor cores fed (ptxas spills
#              24 words a block in the loop at 160 registers); and with 64-key blocks (no
#              spills, 367 SASS instructions a block against 553 for 128 keys at two
#              warpgroups); 4k and 16k, 7 rounds
#   bwd_split  (not run yet; bwd_short ran its essentials) the GPU cases of both, then
#              ours (split_tail the default) against it off and a copy (fp16 D = 128, 4k,
#              8k and 16k, non-causal, 9 rounds): the last 1.5 waves' tiles dealt out as
#              query blocks to the SMs instead of a half-empty 16th wave
#   bwd_lpt    (not run yet; see bwd_split) the GPU cases, then causal with the last
#              heads' key blocks longest first across heads (lpt_tail: about three waves'
#              worth; lpt_heads=999: the whole grid) against a copy of ours, 4k, 8k and
#              16k, 9 rounds
#   bwd_short  (ran 04:49) the GPU cases as bwd_split, then both options at 4k and 8k,
#              causal and not, 7 rounds
#   fwd_snake  (not run yet) the forward's snake GPU cases, then causal with snake=1 (the
#              waves of longest-first tiles dealt out in alternating directions; the model
#              of the static assignment: 6.0-6.3% past the mean without, 0.1-0.3% with)
#              against a copy of ours, fp16 D = 128 at 4k, 8k and 16k, 7 rounds
#   fwd_snake_more  the same in bf16 (4k and 16k), and D = 64 and 256 at 16k
#   fwd_tests  the forward's GPU tests
#   bwd_tests  the backward's GPU tests (split_tail and lpt_tail the defaults) and the
#              examples'
#   gpu_tests  every GPU test
#   bwd_full   the issue's backward run with the defaults: fp16 D = 128, N = 1k-16k, causal
#              and not, the backward alone and forward + backward, against cuDNN and flash
STEPS=${STEPS:-"new_tests qbuf"}
source "$(dirname "$0")/_session.sh"
NEW_OK=1
if has new_tests; then
  TAIL=5 step new_tests 150 $PYTEST tests/gpu/test_flash_attention_gpu.py -k 'q_prefetch or q_buffers'
  passed new_tests || NEW_OK=0
fi
if has qbuf && [[ $NEW_OK == 1 ]]; then
  step qbuf 250 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,8192,16384 --dtypes fp16 --rounds 7 --no-triton --variants "same:;k2:k_stages=2;q2:q_buffers=2;qpf:q_prefetch=1" --json "$OUT/qbuf.json"
  step qbuf64 60 python3 benchmarks/attention_vs_sdpa.py --dims 64 --ns 16384 --dtypes fp16 --rounds 5 --no-triton --variants "same:;q2:q_buffers=2" --json "$OUT/qbuf64.json"
  step qbuf8 70 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 16384 --dtypes fp8 --rounds 5 --no-triton --variants "same:;lazy:lazy_rescale=1;q2:q_buffers=2" --json "$OUT/qbuf8.json"
  TAIL=8 step qbuf_gaps 80 python3 benchmarks/attention_tile_gaps.py 128:4096:0:fp16 128:4096:0:fp16:q_buffers=2 128:4096:1:fp16:q_buffers=2 --json "$OUT/qbuf_gaps.json"
fi
if has short && [[ $NEW_OK == 1 ]]; then  # qbuf's essentials, when little device time is left
  step qbuf_short 150 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 5 --no-triton --variants "same:;q2:q_buffers=2;qpf:q_prefetch=1" --json "$OUT/qbuf_short.json"
  step qbuf8 70 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 16384 --dtypes fp8 --rounds 5 --no-triton --variants "same:;lazy:lazy_rescale=1;q2:q_buffers=2" --json "$OUT/qbuf8.json"
fi
if has rings; then  # not run yet: with two Q buffers, which ring takes the cut, and in what order
  step rings 250 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 9 --no-triton --variants "same:;k3v2:k_stages=3,stages=2;lag:v_lag=1;q1:q_buffers=1" --json "$OUT/rings.json"
  step rings64 100 python3 benchmarks/attention_vs_sdpa.py --dims 64 --ns 4096,16384 --dtypes fp16 --rounds 9 --no-triton --variants "same:;q2:q_buffers=2" --json "$OUT/rings64.json"
fi
if has fp8wg; then  # not run yet: fp8's softmax outlasts the other warpgroup's GEMMs
  step fp8wg 160 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,16384 --dtypes fp8 --rounds 7 --no-triton --variants "same:;wg3:warpgroups=3;wg3n64:warpgroups=3,block_n=64" --json "$OUT/fp8wg.json"
fi
if has bwd_split || has bwd_lpt; then  # not run yet: the backward's grid tails
  TAIL=5 step bwd_new_tests 150 $PYTEST tests/gpu/test_flash_attention_bwd_gpu.py -k "split_tail or lpt_tail"
  if passed bwd_new_tests && has bwd_split; then
    step bwd_split 200 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,8192,16384 --dtypes fp16 --causal 0 --rounds 9 --variants "same:;off:split_tail=0" --json "$OUT/bwd_split.json"
  fi
  if passed bwd_new_tests && has bwd_lpt; then
    step bwd_lpt 200 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,8192,16384 --dtypes fp16 --causal 1 --rounds 9 --variants "same:;off:lpt_tail=0;all:lpt_heads=999" --json "$OUT/bwd_lpt.json"
  fi
fi
if has bwd_short; then  # bwd_split's and bwd_lpt's essentials, when little device time is left
  TAIL=5 step bwd_new_tests 100 $PYTEST tests/gpu/test_flash_attention_bwd_gpu.py -k "(split_tail or lpt_tail) and 4096"
  if passed bwd_new_tests; then  # causal rows: st is a copy of ours; non-causal: lpt is (both
    # options are the defaults since 04:50: the variants turn them off)
    step bwd_short 220 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,8192 --dtypes fp16 --causal 0,1 --rounds 7 --variants "same:;st:split_tail=0;lpt:lpt_tail=0" --json "$OUT/bwd_short.json"
  fi
fi
if has fwd_snake; then  # not run yet: the causal forward's static assignment
  TAIL=5 step fwd_snake_tests 100 $PYTEST tests/gpu/test_flash_attention_gpu.py -k snake
  if passed fwd_snake_tests; then
    step fwd_snake 230 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,8192,16384 --dtypes fp16 --causal 1 --rounds 7 --no-triton --variants "same:;sn:snake=1" --json "$OUT/fwd_snake.json"
  fi
fi
if has fwd_snake_more; then  # bf16, D = 64 and 256
  step fwd_snake_bf16 130 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,16384 --dtypes bf16 --causal 1 --rounds 7 --no-triton --variants "same:;sn:snake=1" --json "$OUT/fwd_snake_bf16.json"
  step fwd_snake_dims 120 python3 benchmarks/attention_vs_sdpa.py --dims 64,256 --ns 16384 --dtypes fp16 --causal 1 --rounds 7 --no-triton --variants "same:;sn:snake=1" --json "$OUT/fwd_snake_dims.json"
fi
if has fwd_tests; then
  TAIL=5 step fwd_tests 300 $PYTEST tests/gpu/test_flash_attention_gpu.py
fi
if has bwd_tests; then
  TAIL=5 step bwd_tests ${BWD_TESTS_S:-240} $PYTEST tests/gpu/test_flash_attention_bwd_gpu.py tests/gpu/test_examples_gpu.py
fi
if has bwd_full; then
  step bwd_full ${BWD_FULL_S:-320} python3 benchmarks/attention_bwd_vs_sdpa.py --ns ${BWD_FULL_NS:-1024,2048,4096,8192,16384} --dtypes fp16 --rounds 7 --json "$OUT/bwd_full.json"
fi
if has gpu_tests; then
  TAIL=15 step gpu_tests ${GPU_TESTS_S:-560} python3 -m pytest -m gpu -p no:cacheprovider -o addopts= -rf tests/gpu
fi
