#!/usr/bin/env bash
# 2026-11-28 device calls (H100 `nvidia-h100-x1` until about 08:45 UTC, then H200 `nvidia-h200`,
# the only kind lent from the fifth session on). STEPS picks what runs (space-separated), logs under $OUT.
# The eighth session ran t6split (GRAPH=1), matmul (MATMUL_ARGS=--graph, 10 rounds),
# converted, compile, tutorials (tile), t6test, gpu_tests, t6bwd, paged_cfg and recheck's
# D = 128 fp16 and backward rows (its table with Triton folded into the variant call), and two
# same-day pipeliner A/Bs through temporary environment knobs that were not kept
# (SC_RING_REUSE: rings of num_stages - 1 slots for register readers, dropped;
# SC_INDEX_STAGE: index loads a stage ahead, kept without the knob). Issue 15's bars and its
# GPU tests in one call (about 560 s of the 600 s a call may take; carry .tut06 and .tutorials):
#   GRAPH=1 MATMUL_ARGS=--graph MATMUL_ROUNDS=10 TUT_FRONTENDS=tile TEST_LIMIT=400 \
#   STEPS="t6split matmul converted compile tutorials t6test gpu_tests"
# 2026-12-06 (ninth session, H100 `nvidia-h100-x1` lent again): issue 15's bars ran as
#   GRAPH=1 MATMUL_ARGS=--graph MATMUL_ROUNDS=6 STEPS="t6split matmul converted compile"
# followed in the same call by `python3 -m pytest -m gpu tests` (about 300 s on the H100 in
# all; t6split took 45 s and matmul 8 s there), then again with MATMUL_ROUNDS=20 (64 s), and
# `python3 tools/upstream_tutorials/run_test_op.py`, `benchmarks/paged_decode.py --batches 1 4
# --contexts 8192 32768`, `attention_bwd_vs_sdpa.py --ns 4096,16384 --dtypes fp16 --rounds 5` and
# `attention_vs_sdpa.py --dims 128 --ns 4096,16384 --dtypes fp16,fp8 --rounds 5` as separate
# short calls. .tut06/ and .tutorials/ (git-ignored, carried) were rebuilt that day from
# stored upstream copies (tools/upstream_tutorials/README.md); their runners moved into
# tools/upstream_tutorials/. The .tut06 experiment scripts of earlier sessions
# (exp_fixed_configs.py, dump_ptx.py, exp_arrive.py, ws_compare.py) were lost with the old
# folder: the t6exp, t6fixed, t6ptx, arrive and t6ws steps no longer run.
# Steps:
#   lazy        (no longer runs: lazy_rescale was removed on 2026-12-06, see session_2026_12_06.sh)
#               lazy_rescale (FA4's rescaling) as a same-run variant beside a copy of ours, at
#               every head dim, fp16 and fp8, 4k and 16k, after the forward's GPU tests
#   fwd_tests   the Hopper forward's GPU tests
#   fwd         the forward against SDPA: the launcher options this session added, as
#               same-run variants (kv_ahead, O outside Q's buffer, fp8 overlap)
#   fwd_ncu     ncu sections of the D=128 fp16 and fp8 forwards at N=16k
#   fwd2        fp8 with the overlap inside a warpgroup as a same-run variant (the
#               exp2-on-FMA variants measured that day were removed with their option)
#   t6exp       tutorial 06 at fixed configs against Triton 3.6 with PTX-edit variants
#               (needs .tut06/, carried: it holds upstream code and stays out of the repo)
#   t6split     tutorial 06 forward, autotuned, against Triton 3.6 (needs .tut06/); GRAPH=1
#               adds interleaved CUDA-graph device times (written 2026-11-28, not yet run)
#   t6test      tutorial 06's own test_op with its imports swapped (needs .tut06/)
#   paged       paged decode at batch 1 and 4, 8k and 32k keys, with the split and merge
#               kernels' device times alone (a fused-merge variant measured that day was
#               slower and was not kept)
#   table       the forward against SDPA for the README (D=128 fp16 4k/16k, bf16 and fp8
#               16k, D=64 and D=256 16k, causal and not) and the hand GEMM in the same rounds
#   gpu_tests   every GPU test
#   matmul      tutorial 03's matmul structure, ours against Triton 3.6 and cuBLAS
#   t6fixed     tutorial 06 at fixed configs against Triton 3.6, unedited PTX only (after
#               loop bodies stopped opening with a bar.sync; needs .tut06/)
#   t6ptx       ours' and Triton's PTX of tutorial 06 at fixed configs (T6_PTX_LIST:
#               "D BM BN stages warps causal;..."; needs .tut06/), dumped under $OUT
#   t6bwd       tutorial 06 backward, autotuned, against Triton 3.6 (needs .tut06/)
#   t6ws        tutorial 06 forward: ours against Triton 3.6 with warp_specialize False and True
#               (Triton's tutorial benchmark turns it on for Hopper's non-causal forward)
#   t6bwdvar    tutorial 06 backward under each SC_WGMMA_SCHEDULE (async, hoist, off), one
#               process each against Triton 3.6 (a same-day experiment: the knob was a
#               temporary patch of tile/passes/wgmma_schedule.py, not kept; needs .tut06/)
#   converted   tutorial 03's matmul against its converted Gluon source
#   compile     cold compile time of tutorial 03's matmul on the device's host
#   tutorials   Triton's tutorials 01, 02, 03, 05, 08 and 09 with their imports swapped, and
#               as written under Triton 3.6, each against torch (needs .tutorials/, kept out
#               of the repository: upstream code)
#   wsbench     tl.range(warp_specialize=True): benchmarks/tutorial09_warp_spec.py at 8192^3
#   t9bench     tutorial 09's matmuls (persistent with flatten, TMA with and without
#               warp_specialize) against Triton 3.6 and cuBLAS at 8192^3 fp16 (needs
#               .tutorials/: .tutorials/bench09.py loads the upstream source)
#   bwd         the Hopper backward against SDPA (D=128 fp16, 4k and 16k, causal and not),
#               with dQ's TMA reduce in 8 and 4 boxes as same-run variants (BWD_VARIANTS)
#   fwdvar      the forward's options of the day's sixth session as same-run variants:
#               3 consumer warpgroups at D=64, Q in registers, D=256 without ping-pong
#               and with a 3-deep K ring
#   fwdvar2     the new defaults (3 warpgroups at D=64, D=256 without ping-pong) against
#               the old ones and further options, same-run variants; fp8 at D=64 and 256
#   fwdvar3     the producer loading K_j with V_{j-1} (v_lag=1, the consumers' order) as a
#               same-run variant at every head dim, fp16 and fp8
#   fwdvar4     ring depths with v_lag=1 (a shallower K ring, a deeper V ring) at every head
#               dim, after D=256's 2-deep K / 3-deep V ring with v_lag=1 measured 1.27-1.37x
#   table2      the forward's table after the sixth session's defaults: D=128 fp16/bf16 at
#               4k and 16k, fp8 at 16k, D=64 and D=256 fp16 at 4k and 16k and bf16 at 16k
#   fwdvar5     three consumer warpgroups at D=128 with 64-key blocks (fp16, fp8), and the
#               causal D=64 with v_lag=1 and 3/5-deep rings, as same-run variants
#   fwdvar6     turn-taking off at D=128 (fp16 with the overlap, fp8), same-run variants
#   fwdvar7     late_wait (the PV wait after the softmax's exp2s, P packed in place) at
#               D=128 fp16/bf16 and D=256, and with the overlap at D=64 (three warpgroups:
#               no spills with late_wait) and fp8, same-run variants (written after the
#               day's device time ran out, not yet run)
#   table3      the seventh session's check of its defaults (D = 64 16-bit with the overlap
#               and late_wait, dQ in 128-byte boxes): the attention GPU tests, the forward's
#               table with D = 64's previous default as a same-run variant, and the
#               backward with 32-byte dQ boxes as one
#   bwdpers     the persistent backward (one CTA per SM walking the tiles, the next tile's
#               K and V loaded under the last one's epilogue) as a same-run variant of one
#               CTA per tile (the default since), its GPU tests, and its kernel-by-kernel
#               device times
#   recheck     with each round's order shuffled (the fixed order favoured ours, listed after
#               SDPA's light flash backend): the table at D = 128 with Triton 3.6's tutorial kernel, and again
#               the options that were dropped on variant ratios the fixed order had
#               biased against them (late_wait, no turn-taking, q_in_regs, v_lag=1, three
#               warpgroups with 64-key blocks at D = 128; late_wait with q_in_regs, which
#               spills nothing where q_in_regs alone spills 20 bytes; fp8 with the overlap and
#               late_wait), 7 rounds each (written after the seventh session's device
#               time ran out, not yet run)
#   paged_cfg   paged decode's configs as same-run variants (ring depth, tile size, warps,
#               programs per SM for the split count) at D = 64, 128 and 256, batch 1 and 4,
#               8k and 32k keys, and at batch 32-128; then the README's table
#   ncu_src     ncu with per-SASS-instruction stall samples (SourceCounters) of the forward's
#               defaults at N=16k: D=128 and D=256 fp16 (NCU_SPECS), details and SASS as text
#   arrive      the Hopper forward with no bar.sync before one-thread mbarrier arrives, a
#               same-run experiment (.tut06/exp_arrive.py patches the lowering in-process)
STEPS=${STEPS:-"fwd_tests fwd"}
source "$(dirname "$0")/_session.sh"
A=benchmarks/attention_vs_sdpa.py
if has lazy; then  # written 2026-12-06 after the day's device time ran out, not yet run
  TAIL=3 step lazy_tests 300 python3 -m pytest -m gpu tests/gpu/test_flash_attention_gpu.py -p no:cacheprovider -o addopts="" -q -rf
  step lazy 300 python3 $A --dims 128,64,256 --ns 4096,16384 --dtypes fp16,fp8 --rounds 5 --no-triton --variants "same:;lazy:lazy_rescale=1" --json "$OUT/lazy.json"
fi
if has fwd_tests; then
  TAIL=3 step fwd_tests 300 python3 -m pytest -m gpu tests/gpu/test_flash_attention_gpu.py -p no:cacheprovider -o addopts="" -q -rf
fi
if has fwd; then
  step fwd128 200 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --variants "ka0:kv_ahead=0;o2:o_in_q=0,stages=2" --json "$OUT/fwd128.json"
  step fwd8 150 python3 $A --dims 128 --ns 4096,16384 --dtypes fp8 --rounds 3 --no-triton --variants "ov:overlap=1;ka0:kv_ahead=0" --json "$OUT/fwd8.json"
  step fwd64_256 150 python3 $A --dims 64,256 --ns 16384 --causal 0 --dtypes fp16 --rounds 3 --no-triton --variants "ka0:kv_ahead=0" --json "$OUT/fwd64_256.json"
fi
if has fwdvar; then
  step fwdvar64 240 python3 $A --dims 64 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --variants "wg3:warpgroups=3,overlap=0;wg3n64:warpgroups=3,block_n=64;qr:q_in_regs=1" --json "$OUT/fwdvar64.json"
  step fwdvar256 200 python3 $A --dims 256 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --variants "pp0:pingpong=0,overlap=1;ks3:k_stages=3;pp0ks3:pingpong=0,overlap=1,k_stages=3" --json "$OUT/fwdvar256.json"
  step fwdvar128 240 python3 $A --dims 128 --ns 16384 --dtypes fp16,fp8 --rounds 3 --no-triton --variants "qr:q_in_regs=1;qr0:q_in_regs=1,overlap=0" --json "$OUT/fwdvar128.json"
fi
if has fwdvar2; then
  step fwdvar2_64 300 python3 $A --dims 64 --ns 4096,16384 --dtypes fp16,bf16 --rounds 3 --no-triton --variants "old:warpgroups=2,overlap=1;st4:stages=4;ka2:kv_ahead=2;pp0:pingpong=0" --json "$OUT/fwdvar2_64.json"
  step fwdvar2_256 200 python3 $A --dims 256 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --variants "old:pingpong=1,overlap=0,k_stages=2;ka2:kv_ahead=2;ka0:kv_ahead=0" --json "$OUT/fwdvar2_256.json"
  step fwdvar2_8_64 150 python3 $A --dims 64 --ns 16384 --dtypes fp8 --rounds 3 --no-triton --variants "wg3:warpgroups=3" --json "$OUT/fwdvar2_8_64.json"
  step fwdvar2_8_256 150 python3 $A --dims 256 --ns 16384 --dtypes fp8 --rounds 3 --no-triton --variants "pp0:pingpong=0;ks2:k_stages=2;st3:stages=3" --json "$OUT/fwdvar2_8_256.json"
fi
if has fwdvar3; then
  step fwdvar3_128 200 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --variants "vl1:v_lag=1" --json "$OUT/fwdvar3_128.json"
  step fwdvar3_64 150 python3 $A --dims 64 --ns 16384 --dtypes fp16 --rounds 3 --no-triton --variants "vl1:v_lag=1" --json "$OUT/fwdvar3_64.json"
  step fwdvar3_256 200 python3 $A --dims 256 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --variants "vl1:v_lag=1;vl1k2v3:v_lag=1,k_stages=2,stages=3" --json "$OUT/fwdvar3_256.json"
  step fwdvar3_8 150 python3 $A --dims 128 --ns 16384 --dtypes fp8 --rounds 3 --no-triton --variants "vl1:v_lag=1" --json "$OUT/fwdvar3_8.json"
fi
if has fwdvar4; then
  step fwdvar4_128 200 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --variants "vl1k2v4:v_lag=1,k_stages=2,stages=4;k2v4:k_stages=2,stages=4" --json "$OUT/fwdvar4_128.json"
  step fwdvar4_64 200 python3 $A --dims 64 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --variants "vl1k2v4:v_lag=1,k_stages=2,stages=4;vl1k3v5:v_lag=1,k_stages=3,stages=5" --json "$OUT/fwdvar4_64.json"
  step fwdvar4_8 200 python3 $A --dims 128,256 --ns 16384 --dtypes fp8 --rounds 3 --no-triton --variants "vl1k2v4:v_lag=1,k_stages=2,stages=4;vl1k3v5:v_lag=1,k_stages=3,stages=5" --json "$OUT/fwdvar4_8.json"
  step fwdvar4_256 150 python3 $A --dims 256 --ns 16384 --dtypes bf16 --rounds 3 --no-triton --json "$OUT/fwdvar4_256.json"
fi
if has fwdvar5; then
  step fwdvar5_128 200 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --variants "wg3n64:warpgroups=3,block_n=64;wg3n64s4:warpgroups=3,block_n=64,stages=4;wg3n64vl:warpgroups=3,block_n=64,v_lag=1,k_stages=3,stages=5" --json "$OUT/fwdvar5_128.json"
  step fwdvar5_8 120 python3 $A --dims 128 --ns 16384 --dtypes fp8 --rounds 3 --no-triton --variants "wg3n64s4:warpgroups=3,block_n=64,stages=4" --json "$OUT/fwdvar5_8.json"
  step fwdvar5_64 120 python3 $A --dims 64 --ns 4096,16384 --causal 1 --dtypes fp16 --rounds 3 --no-triton --variants "vl1k3v5:v_lag=1,k_stages=3,stages=5" --json "$OUT/fwdvar5_64.json"
fi
if has fwdvar6; then
  step fwdvar6 150 python3 $A --dims 128 --ns 16384 --dtypes fp16,fp8 --rounds 3 --no-triton --variants "pp0:pingpong=0" --json "$OUT/fwdvar6.json"
fi
if has fwdvar7; then
  step fwdvar7_128 200 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16,bf16 --rounds 3 --no-triton --variants "lw:late_wait=1" --json "$OUT/fwdvar7_128.json"
  step fwdvar7_256 120 python3 $A --dims 256 --ns 16384 --dtypes fp16 --rounds 3 --no-triton --variants "lw:late_wait=1" --json "$OUT/fwdvar7_256.json"
  step fwdvar7_64 150 python3 $A --dims 64 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --variants "ovlw:overlap=1,late_wait=1" --json "$OUT/fwdvar7_64.json"
  step fwdvar7_8 120 python3 $A --dims 128 --ns 16384 --dtypes fp8 --rounds 3 --no-triton --variants "ovlw:overlap=1,late_wait=1" --json "$OUT/fwdvar7_8.json"
fi
if has table3; then
  TAIL=3 step table3_tests 300 python3 -m pytest -m gpu tests/gpu/test_flash_attention_gpu.py tests/gpu/test_flash_attention_bwd_gpu.py -p no:cacheprovider -o addopts="" -q -rf
  step table3_128 200 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16,bf16 --rounds 3 --no-triton --json "$OUT/table3_128.json"
  step table3_8 100 python3 $A --dims 128,256 --ns 16384 --dtypes fp8 --rounds 3 --no-triton --json "$OUT/table3_8.json"
  step table3_64 200 python3 $A --dims 64 --ns 4096,16384 --dtypes fp16,bf16 --rounds 3 --no-triton --variants "old:overlap=0,late_wait=0" --json "$OUT/table3_64.json"
  step table3_256 200 python3 $A --dims 256 --ns 4096,16384 --dtypes fp16,bf16 --rounds 3 --no-triton --json "$OUT/table3_256.json"
  step table3_bwd 300 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,16384 --dtypes fp16,bf16 --rounds 3 --variants "sw32:dq_swizzle=32" --json "$OUT/table3_bwd.json"
fi
if has bwdpers; then
  TAIL=3 step bwdpers_tests 300 python3 -m pytest -m gpu tests/gpu/test_flash_attention_bwd_gpu.py -p no:cacheprovider -o addopts="" -q -rf
  step bwdpers 300 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,16384 --dtypes fp16,bf16 --rounds 3 --variants "p:persistent=1" --json "$OUT/bwdpers.json"
  step bwdpers_breakdown 200 python3 benchmarks/attention_bwd_breakdown.py --ns 4096 --causal 0,1
fi
if has recheck; then
  step recheck_table 300 python3 $A --dims 128 --ns 1024,4096,16384 --dtypes fp16,bf16 --rounds 7 --json "$OUT/recheck_table.json"
  step recheck_128 300 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 7 --no-triton --variants "same:;lw:late_wait=1;lwqr:late_wait=1,q_in_regs=1;pp0:pingpong=0;qr:q_in_regs=1;vl1:v_lag=1;wg3n64:warpgroups=3,block_n=64" --json "$OUT/recheck_128.json"
  step recheck_8 200 python3 $A --dims 128 --ns 16384 --dtypes fp8 --rounds 7 --no-triton --variants "same:;ovlw:overlap=1,late_wait=1;pp0:pingpong=0" --json "$OUT/recheck_8.json"
  step recheck_bwd 200 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,16384 --dtypes fp16,bf16 --rounds 7 --variants "same:;sw32:dq_swizzle=32" --json "$OUT/recheck_bwd.json"
fi
if has paged_cfg; then
  B=benchmarks/paged_decode.py
  step paged_cfg128 150 python3 $B --batches 1 4 --contexts 8192 32768 --dtypes float16 --rounds 10 --breakdown --variants "old:num_stages=3,pps=4;n64s2m2:num_stages=2,mt=2;w8:num_warps=8;n32s2:BLOCK_N=32,num_stages=2,pps=5" --json "$OUT/paged_cfg128.json"
  step paged_cfg64 100 python3 $B --head-dim 64 --batches 1 4 --contexts 8192 32768 --dtypes float16 --rounds 10 --no-triton --variants "old:num_stages=3;n128s2:BLOCK_N=128,num_stages=2" --json "$OUT/paged_cfg64.json"
  step paged_cfg256 100 python3 $B --head-dim 256 --batches 1 4 --contexts 8192 32768 --dtypes float16 --rounds 10 --no-triton --variants "old:BLOCK_N=64,num_stages=2,pps=2;n32s2:BLOCK_N=32,num_stages=2" --json "$OUT/paged_cfg256.json"
  step paged_cfgbig 150 python3 $B --batches 32 64 128 --contexts 1024 8192 32768 --dtypes float16 --rounds 5 --variants "n64s2:BLOCK_N=64,num_stages=2;s3:BLOCK_N=64,num_stages=3" --json "$OUT/paged_cfgbig.json"
  step paged_table 300 python3 $B --batches 1 4 8 32 64 128 --contexts 1024 8192 32768 131072 --dtypes float16 bfloat16 --rounds 5 --json "$OUT/paged_table.json"
fi
if has ncu_src; then
  for spec in ${NCU_SPECS:-128:16384:0:fp16 256:16384:0:fp16}; do
    name=ncu_$(echo $spec | tr ':=' '__')
    step $name 240 ncu -k regex:attention_kernel -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section InstructionStats --section SourceCounters -f -o /tmp/$name python3 benchmarks/attention_profile_target.py $spec
    ncu -i /tmp/$name.ncu-rep --page details > "$OUT/$name.details.txt" 2>&1
    ncu -i /tmp/$name.ncu-rep --page source --csv --print-source sass > "$OUT/$name.sass.csv" 2>&1 || true
    gzip -f "$OUT/$name.sass.csv"
  done
fi
if has fwd_ncu; then
  step fwd_ncu 200 ncu -k regex:attention_kernel -c 2 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats python3 benchmarks/attention_profile_target.py 128:16384:0:fp16 128:16384:0:fp8
fi
if has fwd2; then
  step fwd2_8 200 python3 $A --dims 128 --ns 16384 --dtypes fp8 --rounds 3 --no-triton --variants "ov:overlap=1" --json "$OUT/fwd2_8.json"
fi
if has t6exp && [ -d .tut06 ]; then
  SC_CACHE_DISABLE=1 step t6exp 240 python3 .tut06/exp_fixed_configs.py --ns 16384 --configs "128,128,3,8;128,64,3,4" --rounds 3 --json "$OUT/t6exp.json"
fi
if has t6fixed && [ -d .tut06 ]; then
  SC_CACHE_DISABLE=1 step t6fixed 240 python3 .tut06/exp_fixed_configs.py --dims ${T6_DIMS:-128} --ns 4096,16384 --configs "${T6_CONFIGS:-128,128,3,8;128,64,3,4}" --variants base --rounds 3 --json "$OUT/t6fixed.json"
fi
if has t6ptx && [ -d .tut06 ]; then
  echo "${T6_PTX_LIST:-64 128 64 3 4 0}" | tr ';' '\n' | while read -r cfg; do
    [ -n "$cfg" ] && TAIL=2 step t6ptx 120 python3 .tut06/dump_ptx.py $cfg
  done
fi
if has t6bwd && [ -d .tut06 ]; then
  step t6bwd 300 python3 benchmarks/tutorial06_attention.py --source .tut06/06-fused-attention.py --modes bwd --n-ctx 1024 4096 16384 --rounds 3 --json "$OUT/t6bwd.json"
fi
if has arrive && [ -d .tut06 ]; then
  SC_CACHE_DISABLE=1 step arrive 240 python3 .tut06/exp_arrive.py
fi
if has t6split && [ -d .tut06 ]; then
  step t6split 300 python3 benchmarks/tutorial06_split.py .tut06/06-fused-attention.py "$OUT" 64,128 1024,4096,16384
fi
if has bwd; then
  step bwd 300 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,16384 --dtypes fp16 --rounds 3 --variants "${BWD_VARIANTS:-sw64:dq_swizzle=64;sw128:dq_swizzle=128}" --json "$OUT/bwd.json"
fi
if has paged; then
  step paged 150 python3 benchmarks/paged_decode.py --batches 1 4 --contexts 8192 32768 --dtypes float16 --rounds 10 --breakdown --json "$OUT/paged.json"
fi
if has table; then
  step table128 200 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --json "$OUT/table128.json"
  step table_more 200 python3 $A --dims 128 --ns 16384 --dtypes bf16,fp8 --rounds 3 --no-triton --json "$OUT/table_more.json"
  step table64_256 200 python3 $A --dims 64,256 --ns 16384 --dtypes fp16 --rounds 3 --no-triton --json "$OUT/table64_256.json"
fi
if has table2; then
  step table2_128 200 python3 $A --dims 128 --ns 4096,16384 --dtypes fp16,bf16 --rounds 3 --no-triton --json "$OUT/table2_128.json"
  step table2_8 100 python3 $A --dims 128 --ns 16384 --dtypes fp8 --rounds 3 --no-triton --json "$OUT/table2_8.json"
  step table2_64_256 200 python3 $A --dims 64,256 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --json "$OUT/table2_64_256.json"
  step table2_bf 150 python3 $A --dims 64,256 --ns 16384 --dtypes bf16 --rounds 3 --no-triton --json "$OUT/table2_bf.json"
fi
if has matmul; then  # MATMUL_RUNS separate runs (the 4096^3 fp16 ratio moves from run to run)
  for i in $(seq ${MATMUL_RUNS:-1}); do
    TAIL=${MATMUL_TAIL:-30} step matmul$i 200 python3 benchmarks/tile_matmul.py --rounds ${MATMUL_ROUNDS:-6} ${MATMUL_ARGS:-} --json "$OUT/matmul$i.json"
  done
fi
if has t6ws && [ -d .tut06 ]; then
  step t6ws 400 python3 .tut06/ws_compare.py .tut06/06-fused-attention.py "$OUT" ${T6_DIMS:-64,128} ${T6_NS:-1024,4096,16384} ${T6_CAUSAL:-0,1}
fi
if has t6bwdvar && [ -d .tut06 ]; then
  for mode in ${T6_BWD_MODES:-async hoist off}; do
    SC_WGMMA_SCHEDULE=$mode SC_CACHE_DISABLE=1 TAIL=8 step t6bwd_$mode 200 python3 benchmarks/tutorial06_attention.py --source .tut06/06-fused-attention.py --modes bwd --head-dims ${T6_BWD_DIMS:-64} --n-ctx 1024 4096 16384 --rounds 3 --json "$OUT/t6bwd_$mode.json"
  done
fi
if has tutorials && [ -d .tutorials ]; then
  for fe in ${TUT_FRONTENDS:-tile triton}; do
    TAIL=12 step tutorials_$fe 280 python3 tools/upstream_tutorials/run_tutorials.py --frontend $fe --device cuda --configs 4
  done
fi
if has wsbench; then
  TAIL=20 step wsbench 200 python3 benchmarks/tutorial09_warp_spec.py --sizes 8192 --json "$OUT/wsbench.json"
fi
if has t9bench && [ -d .tutorials ]; then
  TAIL=20 step t9bench 280 python3 tools/upstream_tutorials/bench09.py --size 8192 --configs 4 --rounds 5
fi
if has converted; then
  step converted 200 python3 benchmarks/converted_matmul.py --rounds 10 --json "$OUT/converted.json"
fi
if has compile; then
  step compile 200 python3 benchmarks/compile_time.py --samples 5 --kernel tutorial03
fi
if has gpu_tests; then
  TAIL=3 step gpu_tests ${TEST_LIMIT:-420} python3 -m pytest -m gpu tests -p no:cacheprovider -o addopts="" -q -rf --maxfail=20
fi
if has t6test && [ -d .tut06 ]; then
  TAIL=8 step t6test 200 python3 tools/upstream_tutorials/run_test_op.py
fi
