#!/usr/bin/env bash
# 2026-12-07, twenty-sixth session: the device calls, as steps. STEPS picks what runs; logs
# under $OUT. Run as:
#   OUT=$OUT STEPS="..." bash benchmarks/session_2026_12_07h.sh
# Ran (H100, 2026-12-07): every start from 19:27 to 20:32 UTC failed or was refused (1231 s
# of the 1800 s budget) and the loans were paused; at 21:00 "gpu_tests d64 exact" with
# ROUNDS=5 GPU_TESTS_S=230 D64_S=130 EXACT_S=200 EXACT_NS=4096 EXACT_DTYPES=bf16, then
# "exact" with EXACT_DTYPES=fp16 (21:05). Not run for want of device time: "ncu_smem",
# "splits", and "exact" at 16k keys.
# Steps:
#   gpu_tests    every GPU test, six pytest workers on the one GPU (about 2 minutes)
#   d64          the forward at D = 64, 4032 and 4096 keys, bf16 before fp16 (fp16 4k had been
#                the first row of the D = 64 runs, and the only 16-bit row under cuDNN in
#                both), with a copy of ours ("copy") and two Q buffers ("qb2") in the same
#                rounds. 4032 keys are 21 whole 192-row tiles; at 4096 the 22nd has two
#                spare warpgroups, which now compute nothing (_pass_blocks): 4096's TFLOP/s
#                should now come near 4032's (causal, before ragged_first: 0.94x)
#   ncu_smem     ncu of the forward at D = 128, 16k keys, fp16, non-causal: shared-memory
#                and tensor-pipe throughput, issue and stall reasons (is the QK^T's
#                shared-memory traffic, with the TMA writes beside it, near the limit?)
#   splits       paged decode, batch 1 at 8k keys, with the split count forced to 16-33
#                (the heuristic's 33 was chosen when a tile cost 7 barriers; now 3)
#   exact        the forward at D = 128, 4k and 16k, bf16 and fp16, causal and not, with
#                exact row maxima and O's rescale only in the warps holding a row that grew
#                ("ex": rescale_slack=0 without speculative_p; bf16's error as without the
#                lazy rescale), the same with P against the kept maxima first and times
#                alpha in the warps where a row grew ("sx0": scaled_p), scaled_p at the
#                default slack ("sx8") and the loop without the lazy rescale ("nolz")
#   fwd          the forward at D = 128 (_session.sh's fwd_step)
STEPS=${STEPS:-"d64 exact ncu_smem splits"}
source "$(dirname "$0")/_session.sh"
gpu_tests_step
if has d64; then
  step d64 ${D64_S:-240} python3 benchmarks/attention_vs_sdpa.py --rounds ${ROUNDS:-11} \
    --dims 64 --ns 4032,4096 --dtypes bf16,fp16 --no-triton --variants "copy:;qb2:q_buffers=2" --json "$OUT/d64.json"
fi
if has exact; then
  step exact ${EXACT_S:-300} python3 benchmarks/attention_vs_sdpa.py --rounds ${ROUNDS:-9} \
    --dims 128 --ns ${EXACT_NS:-4096,16384} --dtypes ${EXACT_DTYPES:-bf16,fp16} --no-triton \
    --variants "ex:rescale_slack=0,speculative_p=0;sx0:rescale_slack=0,scaled_p=1;sx8:scaled_p=1;nolz:lazy_rescale=0,warp_rescale=0" \
    --json "$OUT/exact.json"
fi
if has ncu_smem; then
  TAIL=80 step ncu_smem 200 ncu -k regex:attention_kernel -c 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
    -f -o /tmp/ncu_smem python3 benchmarks/attention_profile_target.py 128:16384:0:fp16
  ncu -i /tmp/ncu_smem.ncu-rep --page details > "$OUT/ncu_smem.details.txt" 2>&1
fi
if has splits; then
  step splits ${SPLITS_S:-200} python3 benchmarks/paged_decode.py --cold-sets 5 --batches 1 \
    --contexts 8192 --dtypes float16 bfloat16 --rounds ${PAGED_ROUNDS:-15} --max-gb 20 \
    --no-triton --splits 16 20 24 28 --json "$OUT/splits.json"
fi
fwd_step
