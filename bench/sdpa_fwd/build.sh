#!/usr/bin/env bash
# Builds libfrost_sdpa_fwd.so from src/engines/sm90/sdpa_fwd with nvcc, one compile per .cu in parallel.
# Usage: bash bench/sdpa_fwd/build.sh [build_dir]   (run from the repository root)
# REUSE_OBJS=<dir>: take <name>.cu.o from that folder where it exists (the CMake build's objects of
# src/engines/sm90/sdpa_fwd, same sources, PIC, sm_90a) instead of compiling the file again.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build/sdpa_fwd}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$BUILD"
SRC=$ROOT/src/engines/sm90/sdpa_fwd
FLAGS="-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I$ROOT/.deps/cutlass-include -I$ROOT/src"
FLAGS="$FLAGS -Xcompiler -fPIC -Xptxas -v -DNDEBUG ${EXTRA_NVCC_FLAGS:-}"  # e.g. -DFROST_FWD_TIMELINE
REUSE=${REUSE_OBJS:-}
ls "$SRC"/*.cu | xargs -P "$JOBS" -I{} sh -c \
  'f={}; o='"$BUILD"'/$(basename $f .cu).o; r='"$REUSE"'/$(basename $f).o
   if [ -n "'"$REUSE"'" ] && [ -f "$r" ]; then cp "$r" "$o"; echo "reused $r" > $o.log; exit 0; fi
   nvcc '"$FLAGS"' -c $f -o $o > $o.log 2>&1 || { cat $o.log; exit 255; }'
grep -h "registers\|spill\|C7510\|C7508" "$BUILD"/*.log | grep -v "^ptxas info    : Compiling" | sort | uniq -c || true
# Export only the C API: the kernels' static state (the per-kernel "shared-memory limit raised" bits) would otherwise
# be one GNU_UNIQUE symbol shared by every copy of the library loaded into one process (test_and_bench.py --base).
printf '{\n  global: frost_*;\n  local: *;\n};\n' > "$BUILD/exports.map"
nvcc -shared -cudart static -Xlinker --version-script="$BUILD/exports.map" -o "$BUILD/libfrost_sdpa_fwd.so" "$BUILD"/*.o
echo "built $BUILD/libfrost_sdpa_fwd.so"
