#!/usr/bin/env bash
# One call on the GPU machine: the norm benchmark through frost's Python package (installed with CUDA by the
# command of docs/python.md when `import frost` finds no GPU engine), then its chart. Results: $OUT/norm.json.
# Run from the repository root: bash bench/norm/device_run.sh   (QUICK=1: the TARGETS.md shape only)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/norm_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ! python3 -c "import frost, sys; sys.exit(0 if frost._frost.cuda_device_count() > 0 else 1)" 2>/dev/null; then
  python3 -m pip install --no-build-isolation --no-deps . -C cmake.define.FROST_ENABLE_CUDA=ON \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90a -C "cmake.define.FROST_SM90_FAMILIES=common;norm" \
    > "$OUT/pip_install.log" 2>&1 || { tail -30 "$OUT/pip_install.log"; exit 1; }
fi
EXTRA=""
[[ "${QUICK:-0}" == 1 ]] && EXTRA="--quick"
timeout "${FULL_TIMEOUT:-420}" python3 bench/norm/test_and_bench.py --out "$OUT" $EXTRA 2>&1 | tee "$OUT/norm_bench.log"
python3 bench/chart.py "$OUT/norm.json" > /dev/null 2>&1 || true
