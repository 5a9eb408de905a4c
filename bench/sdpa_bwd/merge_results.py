#!/usr/bin/env python3
"""Merges the pieces of one device run (bench.log's sdpa_bwd.json, check.json, det.json, gtest.log under OUT) into
one results file in the DESIGN.md section 6 schema: bench/results/<date>-h200-sdpa_bwd.json.

Usage: python3 bench/sdpa_bwd/merge_results.py OUT_DIR [--commit SHA] [--dest bench/results]
"""
import argparse
import json
import os
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--commit")
    ap.add_argument("--dest", default="bench/results")
    args = ap.parse_args()
    doc = json.load(open(os.path.join(args.out, "sdpa_bwd.json")))
    correctness, cases = {}, []
    for part, key in (("check.json", "default"), ("det.json", "deterministic")):
        path = os.path.join(args.out, part)
        if os.path.exists(path):
            d = json.load(open(path))
            correctness[key] = d["correctness"]
            cases += d.get("correctness_cases", [])
    gtest = os.path.join(args.out, "gtest.log")
    if os.path.exists(gtest):
        text = open(gtest).read()
        m = re.search(r"\[  PASSED  \] (\d+) tests?", text)
        failed = re.findall(r"\[  FAILED  \] (\S+)", text)
        correctness["gtest"] = {"passed": int(m.group(1)) if m else 0, "failed": sorted(set(failed))}
    doc["correctness"] = correctness
    doc["correctness_cases"] = cases
    if args.commit:
        doc["commit"] = args.commit
    name = f"{doc['date']}-h200-sdpa_bwd.json"
    os.makedirs(args.dest, exist_ok=True)
    with open(os.path.join(args.dest, name), "w") as f:
        json.dump(doc, f, indent=1)
    print(os.path.join(args.dest, name))


if __name__ == "__main__":
    main()
