#!/usr/bin/env bash
# One call on the GPU machine: build libfrost_sdpa_bwd.so with all cores (unless a prebuilt one loads), disassembly
# checks, a short smoke test under a timeout (a hung kernel must not hold the GPU for the whole run), then the full
# correctness suite and the benchmark. Results: $OUT/sdpa_bwd.json, logs under $OUT.
# Run from the repository root: bash bench/sdpa_bwd/device_run.sh [extra test_and_bench.py arguments]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/sdpa_bwd_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LIB=build/sdpa_bwd/libfrost_sdpa_bwd.so
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
if [[ -f $LIB ]] && python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$LIB"; then
  echo "using prebuilt $LIB"
else
  t0=$(date +%s)
  JOBS=$(nproc) bash bench/sdpa_bwd/build.sh build/sdpa_bwd > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
  tail -12 "$OUT/build.log"
  echo "build took $(( $(date +%s) - t0 )) s"
fi
if command -v cuobjdump > /dev/null; then
  cuobjdump --dump-sass "$LIB" > /tmp/sass.txt 2>/dev/null
  echo "SASS of $LIB: HGMMA $(grep -c HGMMA /tmp/sass.txt) MUFU.EX2 $(grep -c MUFU.EX2 /tmp/sass.txt)" \
       "LDL $(grep -c 'LDL' /tmp/sass.txt) STL $(grep -c 'STL' /tmp/sass.txt) UBLKRED $(grep -c UBLKRED /tmp/sass.txt)"
fi
if [[ "${SKIP_SMOKE:-0}" != 1 ]]; then
  timeout 90 python3 bench/sdpa_bwd/test_and_bench.py --lib $LIB --smoke 2>&1 | tee "$OUT/smoke.log"
  rc=${PIPESTATUS[0]}
  if [[ $rc != 0 ]]; then echo "smoke test failed (rc=$rc); stopping"; exit 1; fi
fi
timeout ${FULL_TIMEOUT:-420} python3 bench/sdpa_bwd/test_and_bench.py --lib $LIB --out "$OUT" "$@" 2>&1 | tee "$OUT/test_and_bench.log"
