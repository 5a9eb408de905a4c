#!/usr/bin/env python3
"""Checks frost's own declarations of the cuDNN backend interface against cuDNN's headers.

src/engines/cudnn/cudnn_backend_abi.h declares the enum values frost passes to libcudnn. This script
writes a throwaway C++ file with one static_assert per value, comparing it with cuDNN's
cudnn_graph.h, and compiles it (syntax only). Nothing it reads or writes is kept.

Usage: python3 scripts/check_cudnn_abi.py CUDNN_INCLUDE_DIR [--cuda-include DIR]
       (e.g. site-packages/nvidia/cudnn/include from the nvidia-cudnn-cu13 wheel)
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HEADER = os.path.join(os.path.dirname(__file__), "..", "src", "engines", "cudnn", "cudnn_backend_abi.h")

# frost namespace -> how cuDNN spells the same constant.
SPELLING = {
    "desc": lambda n: f"CUDNN_BACKEND_{n}_DESCRIPTOR",
    "type": lambda n: f"CUDNN_TYPE_{n}",
    "attr": lambda n: f"CUDNN_ATTR_{n}",
    "dtype": lambda n: f"CUDNN_DATA_{n}",
    "pw": lambda n: f"CUDNN_POINTWISE_{n}",
    "reduce": lambda n: f"CUDNN_REDUCE_TENSOR_{n}",
    "heur": lambda n: f"CUDNN_HEUR_MODE_{n}",
}
SINGLES = {
    "kSuccess": "CUDNN_STATUS_SUCCESS",
    "kNotSupported": "CUDNN_STATUS_NOT_SUPPORTED",
    "kConvolution": "CUDNN_CONVOLUTION",
    "kCrossCorrelation": "CUDNN_CROSS_CORRELATION",
    "kLayerNorm": "CUDNN_LAYER_NORM",
    "kRmsNorm": "CUDNN_RMS_NORM",
    "kNormInference": "CUDNN_NORM_FWD_INFERENCE",
    "kNormTraining": "CUDNN_NORM_FWD_TRAINING",
    "kKnobCount": "CUDNN_KNOB_TYPE_COUNTS",
}


def constants(text):
    """(namespace or None, name, value) for every integer constant in the header."""
    out, ns = [], None
    for line in text.splitlines():
        m = re.match(r"namespace (\w+) \{", line)
        if m and m.group(1) in SPELLING:
            ns = m.group(1)
            continue
        if re.match(r"\}\s*// namespace (\w+)", line) or line.strip() == "}":
            ns = None
        body = re.sub(r"^\s*constexpr (int32_t|Status) ", "", line)
        if body == line:
            continue
        for name, value in re.findall(r"(\w+) = (\d+)", body):
            out.append((ns, name, int(value)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cudnn_include")
    ap.add_argument("--cuda-include", default="/usr/local/cuda/include")
    args = ap.parse_args()
    items = constants(open(HEADER).read())
    lines = ['#include "cudnn_graph.h"']
    for ns, name, value in items:
        theirs = SPELLING[ns](name) if ns else SINGLES.get(name)
        if theirs is None:
            print(f"no cuDNN spelling for {name}", file=sys.stderr)
            return 2
        lines.append(f'static_assert(static_cast<int>({theirs}) == {value}, "{theirs} is not {value}");')
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    try:
        r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-I", args.cudnn_include, "-I", args.cuda_include,
                            path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        return 1
    print(f"{len(items)} constants of cudnn_backend_abi.h match {args.cudnn_include}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
