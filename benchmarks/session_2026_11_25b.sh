#!/usr/bin/env bash
# Second 2026-11-25 session, one device call after the merges: every GPU test, then the
# benchmarks this session's compiler changes can move (wgmma/shared-memory addressing, the
# setmaxnreg loader, the tile attention schedule). Logs under $OUT. Needs the reconstructed
# tutorial-06 source in .tut06/ and last session's tree in .base/ (launch-overhead A/B);
# steps whose inputs are missing say so.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=.:${PYTHONPATH:-} PYTHONUNBUFFERED=1 SC_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
step() { local name=$1; shift; local t0=$SECONDS; timeout "$@" > "$OUT/$name.log" 2>&1; echo "$name rc=$? $((SECONDS-t0))s"; grep -E "^(FAILED|ERROR)" "$OUT/$name.log" | head -20; tail -${TAIL:-14} "$OUT/$name.log"; }
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  TAIL=3 step gpu_tests ${TEST_LIMIT:-400} python3 -m pytest -m gpu tests -p no:cacheprovider -o addopts="" -q -rf -x --maxfail=20
fi
[ "${TESTS_ONLY:-0}" = 1 ] && exit 0
step gemm 60 python3 benchmarks/gemm_vs_cublas.py --dtypes fp16,fp8 --rounds 5 --json "$OUT/gemm.json"
step tile_matmul 100 python3 benchmarks/tile_matmul.py --rounds 6 --json "$OUT/tile_matmul.json"
[ -d .tut06 ] && step tut06_split 200 python3 benchmarks/tutorial06_split.py .tut06/06-fused-attention.py "$OUT" 64,128 1024,4096,16384
step attn_fwd 80 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 3 --no-triton --json "$OUT/attn_fwd.json"
step attn_bwd 80 python3 benchmarks/attention_bwd_vs_sdpa.py --ns 4096,16384 --dtypes fp16 --rounds 3 --json "$OUT/attn_bwd.json"
if [ -d .base ]; then
  for r in 1 2 3; do
    for tree in . .base; do
      (cd $tree && PYTHONPATH=$PWD SC_CACHE_DIR=$(mktemp -d) timeout 60 python3 benchmarks/launch_overhead.py --rounds 3 2>&1 | grep -E "^ *(ours|raw)" | sed "s|^|$tree r$r |")
    done
  done | tee "$OUT/launch_ab.log"
fi
