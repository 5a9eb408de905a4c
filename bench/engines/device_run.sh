#!/usr/bin/env bash
# On the GPU machine: the engines suite (bench/engines/run_suites.py) with the frost command of the cuda
# preset (scripts/device builds it; built here when missing), then the chart. Results: $OUT/engines.json,
# $OUT/engines.png, the graphs under $OUT/graphs. DEADLINE (epoch seconds): no case starts after it.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/frost_engines}
mkdir -p "$OUT"
FROST=build/cuda/tools/frost
if [[ ! -x $FROST ]]; then
  cmake --preset cuda > "$OUT/engines_configure.log" 2>&1 &&
    cmake --build --preset cuda -j "$(nproc)" --target frost_cli > "$OUT/engines_build.log" 2>&1 ||
    { tail -30 "$OUT/engines_build.log"; exit 1; }
fi
FROST_CUDNN_VERSION=$($FROST env | awk '$1 == "cudnn" {print $NF}' | tr -d ')')
export FROST_CUDNN_VERSION
python3 bench/engines/run_suites.py --frost "$FROST" --out "$OUT" --deadline "${DEADLINE:-0}" \
  ${ENGINES_SUITES:+--suites "$ENGINES_SUITES"} 2>&1 | tee "$OUT/engines.log"
[[ -f $OUT/engines.json ]] && python3 bench/chart.py "$OUT/engines.json"
