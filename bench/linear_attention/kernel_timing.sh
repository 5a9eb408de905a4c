#!/usr/bin/env bash
# One call on the GPU machine: build frost with the linear-attention family, run its GPU tests (forward and
# backward), build and run the timing program. Logs and results under $OUT. Run from the repository root:
#   bash bench/linear_attention/kernel_timing.sh   (QUICK=1: heuristic plan only)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/linear_attention_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
cmake --preset cuda -DFROST_SM90_FAMILIES="common;linear_attention" > "$OUT/configure.log" 2>&1 ||
  { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build --preset cuda -j"$(nproc)" > "$OUT/build.log" 2>&1 || { grep -B2 -A12 "error" "$OUT/build.log" | head -80; exit 1; }
grep -i "warning" "$OUT/build.log" | head -20
timeout "${TEST_TIMEOUT:-300}" ctest --preset cuda -L gpu -R "LinearAttention|linear_attention|GdnBackward|KdaBackward" --output-on-failure \
  > "$OUT/ctest.log" 2>&1
tail -25 "$OUT/ctest.log"
grep "\[ errors" build/cuda/Testing/Temporary/LastTest.log > "$OUT/errors.txt" 2>/dev/null
CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
nvcc -std=c++20 -O2 bench/linear_attention/gdn_bench.cpp -Iinclude -Isrc -Lbuild/cuda -lfrost \
  -Xlinker -rpath,"$ROOT/build/cuda" -o build/cuda/gdn_bench > "$OUT/bench_build.log" 2>&1 ||
  { cat "$OUT/bench_build.log"; exit 1; }
EXTRA=""
[[ "${QUICK:-0}" == 1 ]] && EXTRA="--quick"
timeout "${BENCH_TIMEOUT:-240}" build/cuda/gdn_bench --json "$OUT/gdn_bench.json" $EXTRA 2>&1 | tee "$OUT/gdn_bench.log"
