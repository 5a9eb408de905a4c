#!/usr/bin/env bash
# The `frost` command: exit codes and messages for good and bad input.
# Usage: cli_test.sh FROST_BINARY DATA_DIR
set -u
frost=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0

# expect NAME EXIT_CODE PATTERN -- command...
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $code ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $rc (want $code), output:"
    echo "$out" | head -20
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
}

printf '{"json_version": "2.0", "tensors": ' >"$tmp/truncated.json"
printf '{"json_version": "9.9", "tensors": {}, "nodes": []}' >"$tmp/version.json"
printf '{"json_version": "2.0", "tensors": {}, "nodes": []}' >"$tmp/empty_graph.json"

expect usage 2 "usage: frost" -- "$frost"
expect unknown-command 2 "unknown command 'bogus'" -- "$frost" bogus
expect missing-file 2 "cannot read" -- "$frost" run "$tmp/nope.json"
expect truncated-json 1 "UNSUPPORTED_GRAPH_FORMAT.*not valid JSON" -- "$frost" run "$tmp/truncated.json"
expect bad-version 1 "json_version.*9.9" -- "$frost" run "$tmp/version.json"
expect empty-graph 1 "no operations" -- "$frost" plans "$tmp/empty_graph.json"
expect bad-seed 2 "--seed takes a non-negative integer" -- "$frost" run "$data/sdpa_gqa_bshd_causal.json" --seed abc
expect plans 0 "reference" -- "$frost" plans "$data/sdpa_gqa_bshd_causal.json"
expect demo-save 0 "y vs fp64 reference: .* ok" -- "$frost" demo --save "$tmp/demo.json"
expect run-demo 0 "output y .* ok" -- "$frost" run "$tmp/demo.json" --seed 11
expect bench-usage 2 "usage: frost bench GRAPH.json.*|frost bench overhead GRAPH.json" -- "$frost" bench
expect bench-overhead 0 "execute\\(\\) host time" -- "$frost" bench overhead "$data/matmul_bf16_128.json" --json "$tmp/ov.json"
expect bench-json 0 "execute_us" -- cat "$tmp/ov.json"
expect bench-tflops 0 "reference +reference .* ms .* TFLOP/s +unchecked" -- "$frost" bench "$data/matmul_bf16_128.json" \
  --engines reference --no-check --warmup 1 --iters 2 --reps 3 --flops 4194304 --case mm128 --json "$tmp/b.json"
expect bench-json-record 0 '"case": "mm128"' -- cat "$tmp/b.json"
expect bench-checked 0 "reference .* ok$" -- "$frost" bench "$data/matmul_bf16_128.json" --engines reference --iters 1 --reps 1
expect bench-decline 0 "cudnn +declined: cudnn: (needs a CUDA handle|.*libcudnn)" -- "$frost" bench "$data/matmul_bf16_128.json" --engines cudnn
expect bench-bad-iters 2 "bad or unexpected argument '--iters'" -- "$frost" bench "$data/matmul_bf16_128.json" --iters 0
expect env 0 "engines .*reference" -- "$frost" env

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
