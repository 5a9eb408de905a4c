#!/bin/bash
# On the GPU machine, one call: build the cuda preset with only the common and gemm sm90 families, run the
# GPU tests of the sm90_gemm engine (SwiGLU, MoE incl. FP8, dense), then the graph-level benchmark
# (bench/gemm/swiglu_moe_bench.cpp) and its PyTorch peers, merged into $OUT/swiglu_moe.json.
# usage: bash bench/gemm/swiglu_moe_device_run.sh   (QUICK=1: smaller cases; SKIP_TESTS=1 TARGET=frost: the
# benchmark alone, building only the library)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/swiglu_moe_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader |
  tee "$OUT/gpu.txt"
t0=$(date +%s)
cmake --preset cuda -DFROST_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DFROST_WERROR=ON \
  -DFROST_SM90_FAMILIES="common;gemm" > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
if ! cmake --build --preset cuda -j "$(nproc)" --target "${TARGET:-frost_gpu_tests}" > "$OUT/build.log" 2>&1; then
  grep -E "error|FAILED" "$OUT/build.log" | head -40
  exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"
grep -hE "spill|C7510" "$OUT/build.log" | sort | uniq -c | head -10
nvcc -std=c++20 -O2 bench/gemm/swiglu_moe_bench.cpp -Iinclude -Isrc -Lbuild/cuda -lfrost \
  -Xlinker -rpath,"$PWD/build/cuda" -o build/cuda/swiglu_moe_bench > "$OUT/bench_build.log" 2>&1 &
bench_pid=$!
if [[ ${SKIP_TESTS:-0} != 1 ]]; then
  timeout "${TEST_TIMEOUT:-150}" build/cuda/tests/frost_gpu_tests \
    --gtest_filter='Sm90Swiglu.*:Sm90Moe.*:Sm90Gemm.*' 2>&1 | tee "$OUT/gpu_tests.log" |
    grep -E "^\[  |FAILED|Failure|error" | head -60
fi
wait $bench_pid || { tail -20 "$OUT/bench_build.log"; exit 1; }
quick=()
[[ ${QUICK:-0} == 1 ]] && quick=(--quick)
timeout "${BENCH_TIMEOUT:-150}" build/cuda/swiglu_moe_bench "${quick[@]}" --json "$OUT/frost_bench.json" 2>&1 |
  tee "$OUT/frost_bench.log"
timeout 90 python3 bench/gemm/swiglu_moe_peers.py "$OUT/frost_bench.json" "$OUT/swiglu_moe.json" "${quick[@]}" 2>&1 |
  tee "$OUT/peers.log"
echo "total: $(( $(date +%s) - t0 )) s"
