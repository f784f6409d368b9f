# What every benchmarks/session_*.sh shares, sourced after it sets its default STEPS:
# logs under $OUT, the GPU's clocks first, `step NAME SECONDS CMD...` (runs CMD under a
# timeout into $OUT/NAME.log and prints its status, failures and tail; TAIL lines, 30 by
# default), `has STEP` (whether STEPS names it), `passed NAME` (whether step NAME's tests
# passed, none failing), $PYTEST (the GPU tests, quiet), `gpu_tests_step` (step
# gpu_tests, when STEPS names it: every GPU test, six pytest workers on the one GPU), and
# the attention steps of the 2026-12-07 scripts, each when STEPS names it: `fwd_step` (the
# forward at D = 128 against cuDNN and the hand GEMM, with FWD_VARIANTS, unset: the default
# loop's older forms; empty: none), `bf16_step` (bf16 with other rescale slacks) and
# `bwd_step` (the backward, BWD_ARGS passed on); `paged_b1_step ARGS...` (paged decode at
# batch 1 and 8k keys, issue 11's closest row, with the script's own options).
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=.:${PYTHONPATH:-} PYTHONUNBUFFERED=1 SC_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
step() { local name=$1; shift; local t0=$SECONDS; timeout "$@" > "$OUT/$name.log" 2>&1; echo "$name rc=$? $((SECONDS-t0))s"; grep -E "^(FAILED|ERROR)" "$OUT/$name.log" | head -20; tail -${TAIL:-30} "$OUT/$name.log"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
passed() { grep -q " passed" "$OUT/$1.log" && ! grep -qE "failed|error" "$OUT/$1.log"; }
PYTEST="python3 -m pytest -m gpu -p no:cacheprovider -o addopts= -q -rf"
gpu_tests_step() {
  if has gpu_tests; then TAIL=5 step gpu_tests ${GPU_TESTS_S:-300} $PYTEST -n 6 tests/gpu; fi
}
fwd_step() {
  if has fwd; then
    step fwd ${FWD_S:-300} python3 benchmarks/attention_vs_sdpa.py --rounds ${ROUNDS:-9} \
      --dims 128 --ns ${FWD_NS:-4096,16384} --dtypes ${FWD_DTYPES:-fp16,fp8} --no-triton \
      --variants "${FWD_VARIANTS-nowr:warp_rescale=0;old:lazy_rescale=0,warp_rescale=0;wa:warp_arrivals=1}" \
      --json "$OUT/fwd.json"
  fi
}
bf16_step() {
  if has bf16; then
    step bf16 ${BF16_S:-300} python3 benchmarks/attention_vs_sdpa.py --rounds ${ROUNDS:-9} \
      --dims 128 --ns ${BF16_NS:-1024,4096,16384} --dtypes bf16 --no-triton \
      --variants "s3:rescale_slack=3;s1:rescale_slack=1;nolz:lazy_rescale=0,warp_rescale=0" \
      --json "$OUT/bf16.json"
  fi
}
paged_b1_step() {  # "$@": the run's own options after the common ones
  if has paged_b1; then
    step paged_b1 ${PAGED_S:-150} python3 benchmarks/paged_decode.py --cold-sets 5 --batches 1 \
      --contexts 8192 --dtypes float16 bfloat16 --rounds ${PAGED_ROUNDS:-15} --max-gb 20 \
      --no-triton "$@"
  fi
}
bwd_step() {
  if has bwd; then step bwd ${BWD_S:-300} python3 benchmarks/attention_bwd_vs_sdpa.py ${BWD_ARGS:-}; fi
}
