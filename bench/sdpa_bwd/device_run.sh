#!/usr/bin/env bash
# One call on the GPU machine: libfrost_sdpa_bwd.so (prebuilt if it loads, else built here with all cores), SASS
# summary, the GPU gtests in the background when a prebuilt test binary is at prebuilt/ (LD_LIBRARY_PATH=prebuilt),
# then under timeouts (a hung kernel must not hold the GPU for the whole call): a smoke test, the correctness sweep
# without and then with only the deterministic mode, the sweep of the split-d kernels (d256, 192/128), and the
# benchmark (the deterministic timing only when its correctness cases passed). Results: $OUT/sdpa_bwd.json and
# logs under $OUT.
# Usage (repository root): [BENCH_ONLY="s16384 s4096"] [NO_BENCH=1] bash bench/sdpa_bwd/device_run.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/sdpa_bwd_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LIB=build/sdpa_bwd/libfrost_sdpa_bwd.so
PY="python3 bench/sdpa_bwd/test_and_bench.py --lib $LIB --out $OUT"
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
  echo "SASS: HGMMA $(grep -c HGMMA /tmp/sass.txt) MUFU.EX2 $(grep -c MUFU.EX2 /tmp/sass.txt)" \
       "LDL $(grep -c 'LDL' /tmp/sass.txt) STL $(grep -c 'STL' /tmp/sass.txt) UBLKRED $(grep -c UBLKRED /tmp/sass.txt)"
fi
gtest_pid=
if [[ -x prebuilt/frost_gpu_tests ]]; then
  (LD_LIBRARY_PATH=$ROOT/prebuilt timeout ${GTEST_TIMEOUT:-240} prebuilt/frost_gpu_tests --gtest_filter='Sm90SdpaBwd*' \
     > "$OUT/gtest.log" 2>&1; echo "gtest exit $?" >> "$OUT/gtest.log") &
  gtest_pid=$!
fi
timeout 60 $PY --smoke 2>&1 | tee "$OUT/smoke.log"
[[ ${PIPESTATUS[0]} == 0 ]] || { echo "smoke test failed; stopping"; [[ -n $gtest_pid ]] && wait $gtest_pid; tail -40 "$OUT/gtest.log"; exit 1; }
timeout ${CHECK_TIMEOUT:-200} $PY --det without --no-bench --json check.json 2>&1 | tee "$OUT/check.log" | grep -v "^ok "
timeout 60 $PY --det only --no-bench --no-graph --json det.json 2>&1 | tee "$OUT/det.log"
timeout ${LARGE_TIMEOUT:-90} $PY --large --no-bench --no-graph --json check_large.json 2>&1 | tee "$OUT/check_large.log" |
  grep -v "^ok "
det_ok=$(grep -c "^correctness: \([0-9]*\)/\1 cases ok" "$OUT/det.log")
[[ -n $gtest_pid ]] && { wait $gtest_pid; tail -30 "$OUT/gtest.log"; }
if [[ "${NO_BENCH:-0}" != 1 ]]; then
  det_arg=without; [[ $det_ok == 1 ]] && det_arg=with
  timeout ${BENCH_TIMEOUT:-300} $PY --no-check --det $det_arg ${BENCH_ONLY:+--only $BENCH_ONLY} 2>&1 | tee "$OUT/bench.log"
fi
