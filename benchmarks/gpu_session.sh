#!/usr/bin/env bash
# One device call: GPU tests, then the benchmarks; logs under $OUT (or ./out).
# Usage: bash benchmarks/gpu_session.sh [tests|bench|all]
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=.:${PYTHONPATH:-} PYTHONUNBUFFERED=1 SC_CACHE_DIR=$(mktemp -d)
what=${1:-all}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
if [[ $what == tests || $what == all ]]; then
  python3 -m pytest -q -m gpu -x tests 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
  python3 examples/vector_add.py 2>&1 | tee -a "$OUT/examples.log"
  python3 examples/softmax.py 2>&1 | tee -a "$OUT/examples.log"
  python3 examples/layer_norm.py 2>&1 | tee -a "$OUT/examples.log"
  python3 examples/gemm/gemm.py 2>&1 | tee -a "$OUT/examples.log"
fi
if [[ $what == bench || $what == all ]]; then
  python3 benchmarks/launch_overhead.py 2>&1 | tee "$OUT/launch_overhead.log"
  python3 benchmarks/memory_bound.py --json "$OUT/memory_bound.json" 2>&1 | tee "$OUT/memory_bound.log"
  python3 benchmarks/compile_time.py 2>&1 | tee "$OUT/compile_time.log"
  python3 benchmarks/gluon_copy_transpose.py 2>&1 | tee "$OUT/gluon_copy_transpose.log"
  python3 benchmarks/gluon_matmul.py 2>&1 | tee "$OUT/gluon_matmul.log"
  python3 benchmarks/gemm_vs_cublas.py --json "$OUT/gemm.json" 2>&1 | tee "$OUT/gemm.log"
  python3 benchmarks/debug_overhead.py --json "$OUT/debug_overhead.json" 2>&1 | tee "$OUT/debug_overhead.log"
  python3 benchmarks/timelines.py --out "$OUT/timelines" 2>&1 | tee "$OUT/timelines.log"
fi
