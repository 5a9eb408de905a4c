#!/usr/bin/env bash
# Builds libfrost_sdpa_bwd.so from src/engines/sm90/sdpa_bwd with nvcc, one compile per .cu in parallel.
# Usage: bash bench/sdpa_bwd/build.sh [build_dir]   (run from the repository root)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build/sdpa_bwd}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$BUILD"
SRC=$ROOT/src/engines/sm90/sdpa_bwd
FLAGS="-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I$ROOT/.deps/cutlass-include -I$ROOT/src"
FLAGS="$FLAGS -Xcompiler -fPIC -Xptxas -v -DNDEBUG -lineinfo"
ls "$SRC"/*.cu | xargs -P "$JOBS" -I{} sh -c \
  'f={}; o='"$BUILD"'/$(basename $f .cu).o; nvcc '"$FLAGS"' -c $f -o $o > $o.log 2>&1 || { cat $o.log; exit 255; }'
grep -h "registers\|spill\|C7510\|C7508" "$BUILD"/*.log | grep -v "^ptxas info    : Compiling" | sort | uniq -c || true
# Only the C API is exported: template statics (the per-kernel "smem limit raised" flags) are GNU_UNIQUE symbols
# otherwise, shared by every copy of the library loaded into one process (test_and_bench.py --base).
printf '{\n  global: frost_*;\n  local: *;\n};\n' > "$BUILD/exports.map"
nvcc -shared -cudart static -Xlinker --version-script="$BUILD/exports.map" -o "$BUILD/libfrost_sdpa_bwd.so" "$BUILD"/*.o
echo "built $BUILD/libfrost_sdpa_bwd.so"
