#!/usr/bin/env bash
# One call on the GPU machine: build libfrost_sdpa_fwd.so with all cores, disassembly checks, a short smoke test
# under a timeout (a hung kernel must not hold the GPU for the whole run), then the full correctness suite and the benchmark.
# Results: $OUT/sdpa_fwd.json, logs under $OUT. Run from the repository root: bash bench/sdpa_fwd/device_run.sh
# SKIP_BUILD=1 reuses build/sdpa_fwd/libfrost_sdpa_fwd.so when it loads.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/sdpa_fwd_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LIB=build/sdpa_fwd/libfrost_sdpa_fwd.so
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
if [[ "${SKIP_BUILD:-0}" == 1 && -f $LIB ]] && python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$LIB"; then
  echo "using prebuilt $LIB"
else
  t0=$(date +%s)
  JOBS=$(nproc) bash bench/sdpa_fwd/build.sh build/sdpa_fwd > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
  tail -12 "$OUT/build.log"
  echo "build took $(( $(date +%s) - t0 )) s"
fi
if command -v cuobjdump > /dev/null; then
  for o in build/sdpa_fwd/sm90_fwd_inst_*bf16.o; do
    [[ -f $o ]] || continue
    cuobjdump --dump-sass "$o" > /tmp/sass.txt 2>/dev/null
    echo "$(basename $o): HGMMA $(grep -c HGMMA /tmp/sass.txt) MUFU.EX2 $(grep -c MUFU.EX2 /tmp/sass.txt)" \
         "LDL $(grep -c 'LDL' /tmp/sass.txt) STL $(grep -c 'STL' /tmp/sass.txt)"
  done
fi
# SKIP_SMOKE=1 goes straight to the full run (still under FULL_TIMEOUT); QUICK=1 runs a smaller correctness sweep,
# BENCH_ONLY=1 none (the GPU tests cover correctness).
if [[ "${SKIP_SMOKE:-0}" != 1 ]]; then
  timeout 90 python3 bench/sdpa_fwd/test_and_bench.py --lib $LIB --smoke 2>&1 | tee "$OUT/smoke.log"
  rc=$?
  if [[ $rc != 0 ]]; then echo "smoke test failed (rc=$rc); stopping"; exit 1; fi
fi
EXTRA=""
[[ "${QUICK:-0}" == 1 ]] && EXTRA="--quick"
[[ "${BENCH_ONLY:-0}" == 1 ]] && EXTRA="$EXTRA --bench-only"
timeout ${FULL_TIMEOUT:-420} python3 bench/sdpa_fwd/test_and_bench.py --lib $LIB --out "$OUT" $EXTRA 2>&1 | tee "$OUT/test_and_bench.log"
