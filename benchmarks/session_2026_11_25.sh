#!/usr/bin/env bash
# One device call for this session's new work: its GPU tests, then its benchmarks; logs in $OUT.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=.:${PYTHONPATH:-} PYTHONUNBUFFERED=1 SC_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
step() { local name=$1; shift; local t0=$SECONDS; timeout "$@" > "$OUT/$name.log" 2>&1; echo "$name rc=$? $((SECONDS-t0))s"; tail -25 "$OUT/$name.log"; }
step gpu_tests_new 200 python3 -m pytest -m gpu -q -o addopts="" -p no:cacheprovider -rf \
  tests/gpu/test_tile_dot_gpu.py tests/gpu/test_paged_decode_gpu.py tests/gpu/test_flash_attention_bwd_gpu.py \
  tests/gpu/test_gemm_gpu.py tests/gpu/test_flash_attention_gpu.py tests/gpu/test_gluon_parity_gpu.py
step tile_matmul 110 python3 benchmarks/tile_matmul.py --rounds 8 --json "$OUT/tile_matmul.json"
step gemm 60 python3 benchmarks/gemm_vs_cublas.py --dtypes fp16,fp8 --rounds 6 --json "$OUT/gemm.json"
step paged_decode 110 python3 benchmarks/paged_decode.py --batches 1 32 128 --contexts 1024 8192 32768 131072 --dtypes float16 --rounds 5 --json "$OUT/paged_decode.json"
step attn_fwd 70 python3 benchmarks/attention_vs_sdpa.py --dims 128 --ns 4096,16384 --dtypes fp16 --rounds 4 --no-triton --json "$OUT/attn_fwd.json"
