# What every benchmarks/session_*.sh shares, sourced after it sets its default STEPS:
# logs under $OUT, the GPU's clocks first, `step NAME SECONDS CMD...` (runs CMD under a
# timeout into $OUT/NAME.log and prints its status, failures and tail; TAIL lines, 30 by
# default), `has STEP` (whether STEPS names it), `passed NAME` (whether step NAME's tests
# passed, none failing), $PYTEST (the GPU tests, quiet) and `gpu_tests_step` (step
# gpu_tests, when STEPS names it: every GPU test, six pytest workers on the one GPU).
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
