#!/bin/bash
# Builds build-gemm/libfrost_gemm.so (all sm90 GEMM instantiations + dispatch + C ABI shim).
# Each object is rebuilt only when its source, the headers it includes or the flags change
# (content keys, not timestamps, so objects copied between machines stay valid). An
# instantiation that fails to compile is replaced by a stub that returns cudaErrorNotSupported,
# so one broken kernel cannot take the whole library (and test run) down; the build says so.
# usage: bench/gemm/build.sh [jobs]; ONLY='grouped_*' compiles only the instantiations whose names match
# (the rest become stubs): a quicker build when one family of kernels is under study.
set -uo pipefail
cd "$(dirname "$0")/../.."
JOBS=${1:-$(nproc)}
SRC=src/engines/sm90/gemm
OUT=build-gemm
mkdir -p "$OUT"
NVCC=${NVCC:-nvcc}
FLAGS="-std=c++20 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I.deps/cutlass-include -I$SRC -Xcompiler -fPIC,-fvisibility=hidden -diag-suppress 2908 -Xptxas -v"
export NVCC FLAGS OUT SRC

build_one() {
  src=$1
  name=$(basename "$src" .cu)
  key=$( (echo "$FLAGS"; bash bench/gemm/local_includes.sh "$src" | xargs cat) | sha256sum | cut -c1-32)
  if [[ -f $OUT/$name.o && -f $OUT/$name.key && $(cat $OUT/$name.key) == "$key" ]]; then
    return 0
  fi
  rm -f "$OUT/$name.key"
  t0=$(date +%s)
  if $NVCC $FLAGS -c "$src" -o "$OUT/$name.o" > "$OUT/$name.log" 2>&1; then
    echo "$key" > "$OUT/$name.key"
    spill=$(grep -a -c "[1-9][0-9]* bytes spill" "$OUT/$name.log" || true)
    c7510=$(grep -a -c "C7510" "$OUT/$name.log" || true)
    echo "built $name in $(( $(date +%s) - t0 ))s (spill lines: $spill, C7510: $c7510)"
  else
    rm -f "$OUT/$name.o"
    echo "FAILED $name"; grep -a -m5 "error" "$OUT/$name.log" | cut -c1-400
  fi
}
export -f build_one

inst_sources() {
  for src in $SRC/inst/*.cu; do
    name=$(basename "$src" .cu)
    # shellcheck disable=SC2053
    [[ ${name#sm90_gemm_inst_} == ${ONLY:-*} ]] && echo "$src"
  done
}
[[ ${SKIP_CU:-0} == 1 ]] || { inst_sources; ls $SRC/*.cu; } | xargs -P "$JOBS" -I{} bash -c 'build_one {}'

# Stubs for instantiations that did not build (family from the name prefix).
objs=()
for src in $SRC/*.cu; do
  name=$(basename "$src" .cu)
  [[ -f $OUT/$name.o && -f $OUT/$name.key ]] || { echo "FAILED $name (required)"; exit 1; }
  objs+=("$OUT/$name.o")
done
for src in $SRC/inst/*.cu; do
  name=$(basename "$src" .cu)
  if [[ -f $OUT/$name.o && -f $OUT/$name.key ]]; then objs+=("$OUT/$name.o"); continue; fi
  inst=${name#sm90_gemm_inst_}
  case $inst in
    grouped_*) ptype=GroupedGemmParams ;;
    swiglu_*) ptype=SwigluParams ;;
    *) ptype=GemmParams ;;
  esac
  echo "STUB $inst (no object: failed or not built)"
  cat > "$OUT/stub_$inst.cpp" <<STUB
#include "sm90_gemm.h"
namespace frost::sm90::gemm_detail {
size_t ${inst}_workspace(const $ptype&, const GemmConfig&) { return 0; }
cudaError_t ${inst}_run(const $ptype&, const GemmConfig&, void*, cudaStream_t) { return cudaErrorNotSupported; }
}
STUB
  objs+=("$OUT/stub_$inst.o")
  g++ -std=c++20 -fPIC -I$SRC -I"$(dirname "$(which $NVCC)")/../include" -c "$OUT/stub_$inst.cpp" -o "$OUT/stub_$inst.o"
done
# Host-only dispatch: plain C++ compiler, CUDA runtime headers only.
CUDA_INC="$(dirname "$(which $NVCC)")/../include"
for f in $SRC/*.cpp; do
  g++ -std=c++20 -O2 -Wall -Werror -fPIC -fvisibility=hidden -I$SRC -I"$CUDA_INC" -c "$f" -o "$OUT/$(basename "$f" .cpp).o" || exit 1
  objs+=("$OUT/$(basename "$f" .cpp).o")
done
# Static CUDA runtime; no -lcuda: the driver is reached through cudaGetDriverEntryPoint.
$NVCC -shared -cudart static -gencode=arch=compute_90a,code=sm_90a -o $OUT/libfrost_gemm.so "${objs[@]}" || exit 1
echo "linked $OUT/libfrost_gemm.so from ${#objs[@]} objects"
