#!/usr/bin/env bash
# One call on the GPU machine: the linear-attention benchmark (FLA's chunk_gated_delta_rule / chunk_kda against
# frost.ops.gdn / kda), then its chart. The machine has no network: flash-linear-attention comes as wheels in
# .whl (fla-core; its only other need, einops, is on the machine), fetched beforehand where pip reaches PyPI:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl fla-core==0.6.0
# FLA's GDN backward refuses Hopper under the Triton 3.6 of PyTorch 2.11 (a miscompile fixed in 3.7.1); a newer
# Triton wheel (~200 MB) exceeds one carry, so it travels as parts made where pip reaches PyPI. Either the wheel:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 -d /tmp/tw triton==3.7.1
#   mkdir -p .whl/triton && basename /tmp/tw/*.whl > .whl/triton/NAME && split -b 60M /tmp/tw/*.whl .whl/triton/part_
# or, in one part of ~37 MB, the wheel unpacked without what the benchmark never loads (CUPTI, the bundled ptxas
# binaries, nvdisasm, the profiler and instrumentation libraries, the AMD backend), libtriton.so stripped of its
# debug info, and xz-compressed; the machine's ptxas then serves Triton (TRITON_PTXAS_PATH, set below):
#   mkdir /tmp/tslim && cd /tmp/tslim && unzip -q /tmp/tw/*.whl && rm -rf triton/backends/nvidia/lib/cupti \
#     triton/backends/nvidia/bin/ptxas* triton/backends/nvidia/bin/nvdisasm triton/instrumentation/*.so \
#     triton/_C/libproton.so triton/backends/amd && sed -i /amd/d triton-*.dist-info/entry_points.txt \
#     && strip --strip-unneeded triton/_C/libtriton.so
#   tar -cf - . | xz -9 -T2 > /tmp/triton.tar.xz   (then NAME holds "triton-3.7.1.tar.xz" and split as above)
# carried one part per call while the machine stays warm (files under ignored paths stay between calls; name only
# the new part in carry, since a carried folder replaces the one there); here they are joined and installed for
# the FLA side only, ahead of PyTorch's Triton on its path.
# frost is pip-installed with CUDA (the command of docs/python.md) in the background while the FLA side runs,
# unless `import frost` already sees a GPU.
# Results: $OUT/linear_attention.json (+ .png), logs beside it.
# Run from the repository root: bash bench/linear_attention/device_run.sh
#   FROST_SM90_FAMILIES (default "common;linear_attention" when that family exists, else "common"),
#   BUDGET (seconds after which a side starts no new case, default 150; FLA_BUDGET for the FLA side alone),
#   FLA_TIMEOUT / FROST_TIMEOUT (hard limits of each side in seconds, default 300),
#   LA_SUITES (comma-separated suites to run, default all: gdn_fwd,gdn_bwd,kda_fwd,kda_bwd),
#   LA_PYTEST=1 (first the GPU-marked tests of python/tests/test_linear_attention_gpu.py, FLA on their path;
#   PYTEST_TIMEOUT, default 400 s), FROST_COMMIT (the tree's commit for the results; the GPU machine's .git, if
#   any, is not this tree's).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/linear_attention_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/fla_site \
    .whl/*.whl > "$OUT/fla_install.log" 2>&1 || { tail -20 "$OUT/fla_install.log"; exit 1; }
  export PYTHONPATH=/tmp/fla_site${PYTHONPATH:+:$PYTHONPATH}
fi
fla_path=${PYTHONPATH:-}
if [[ -f .whl/triton/NAME ]] && compgen -G ".whl/triton/part_*" > /dev/null; then
  name=$(cat .whl/triton/NAME)
  if [[ $name == *.tar.xz ]]; then  # an unpacked wheel, xz-compressed (see the header)
    mkdir -p /tmp/triton_site
    cat .whl/triton/part_* | xz -d | tar -x -C /tmp/triton_site || { echo "triton parts do not unpack"; exit 1; }
  else
    cat .whl/triton/part_* > "/tmp/$name"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/triton_site \
      "/tmp/$name" > "$OUT/triton_install.log" 2>&1 || { tail -20 "$OUT/triton_install.log"; exit 1; }
  fi
  fla_path=/tmp/triton_site${fla_path:+:$fla_path}
  [[ -x /tmp/triton_site/triton/backends/nvidia/bin/ptxas ]] || export TRITON_PTXAS_PATH=$(command -v ptxas)
  PYTHONPATH=$fla_path python3 -c "import triton; print('triton', triton.__version__, 'for the FLA side')"
fi
families=${FROST_SM90_FAMILIES:-common}
[[ -z ${FROST_SM90_FAMILIES:-} && -d src/engines/sm90/linear_attention ]] && families="common;linear_attention"
pip_pid=""
if ! python3 -c "import frost, sys; sys.exit(0 if frost._frost.cuda_device_count() > 0 else 1)" 2>/dev/null; then
  python3 -m pip install --no-build-isolation --no-deps . -C cmake.define.FROST_ENABLE_CUDA=ON \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90a -C "cmake.define.FROST_SM90_FAMILIES=$families" \
    > "$OUT/pip_install.log" 2>&1 &
  pip_pid=$!
fi
PYTHONPATH=$fla_path timeout "${FLA_TIMEOUT:-300}" python3 bench/linear_attention/test_and_bench.py --side fla \
  --out "$OUT" --budget "${FLA_BUDGET:-${BUDGET:-150}}" ${LA_SUITES:+--suites "$LA_SUITES"} 2>&1 |
  tee "$OUT/fla_bench.log"
if [[ -n $pip_pid ]] && ! wait "$pip_pid"; then
  tail -30 "$OUT/pip_install.log"
  exit 1
fi
if [[ ${LA_PYTEST:-0} == 1 ]]; then  # the GPU tests of gdn / kda, with FLA (and its Triton) importable
  PYTHONPATH=$fla_path timeout "${PYTEST_TIMEOUT:-400}" python3 -m pytest -q -rs -m gpu \
    python/tests/test_linear_attention_gpu.py 2>&1 | tee "$OUT/pytest_la.log" | tail -15
fi
timeout "${FROST_TIMEOUT:-300}" python3 bench/linear_attention/test_and_bench.py --side frost \
  --merge "$OUT/linear_attention_fla.json" --out "$OUT" --budget "${BUDGET:-150}" \
  ${LA_SUITES:+--suites "$LA_SUITES"} 2>&1 | tee "$OUT/frost_bench.log"
python3 bench/chart.py "$OUT/linear_attention.json" > /dev/null 2>&1 || true
