#!/bin/bash
# On the GPU machine: build libfrost_gemm.so with every core (objects carried in build-gemm/ whose
# content keys still match are reused), check the SASS, then run correctness + benchmarks.
# Writes $OUT/gemm.json and $OUT/gemm_log.txt. usage: bash bench/gemm/device_run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
t0=$(date +%s)
[[ ${SKIP_CU:-0} == 1 ]] || bash bench/gemm/build.sh "$(nproc)" 2>&1 | tail -40 || { echo "build failed"; exit 1; }
echo "build: $(( $(date +%s) - t0 ))s"
# Tensor-core instructions present, no local-memory traffic in the kernels.
if command -v cuobjdump >/dev/null; then
  cuobjdump --dump-sass build-gemm/libfrost_gemm.so > /tmp/gemm.sass 2>/dev/null
  echo "SASS: HGMMA=$(grep -c HGMMA /tmp/gemm.sass) QGMMA=$(grep -c QGMMA /tmp/gemm.sass) LDL=$(grep -c 'LDL' /tmp/gemm.sass) STL=$(grep -c 'STL' /tmp/gemm.sass)"
fi
tar czf "$OUT/ptxas_logs.tgz" build-gemm/*.log 2>/dev/null
# One process per part: a kernel that faults cannot hide the results of the others.
export PYTHONUNBUFFERED=1 OUT GEMM_PART_DIR=/tmp/gemm_parts
rm -rf "$GEMM_PART_DIR"
# GEMM_PARTS (names[:seconds]) narrows a run, e.g. GEMM_PARTS="plain:45 bench_plain:90".
PARTS_SPEC=${GEMM_PARTS:-"dense:45 fp8:45 declines:30 moe:60 plain:45 bench_dense:90 bench_moe:90"}
export GEMM_PARTS=$(for p in $PARTS_SPEC; do printf "%s " "${p%%:*}"; done)
for part in $PARTS_SPEC; do
  limit=${part#*:}; part=${part%%:*}
  timeout $limit python3 bench/gemm/test_and_bench.py build-gemm/libfrost_gemm.so $part 2>&1 | tee -a "$OUT/gemm_log.txt" | grep -av "^  \[PASS\]"
  echo "part $part rc=${PIPESTATUS[0]}" | tee -a "$OUT/gemm_log.txt"
done
python3 bench/gemm/test_and_bench.py build-gemm/libfrost_gemm.so report 2>&1 | tee -a "$OUT/gemm_log.txt"
