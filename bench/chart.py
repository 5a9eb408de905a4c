#!/usr/bin/env python3
"""Draws one bar chart per results file (DESIGN.md section 6 schema): for each case, every impl's value
(TFLOP/s, GB/s or ms), frost's ratio to the best peer written above its bar.

Usage: python3 bench/chart.py bench/<suite>/results/<date>-<device>-<suite>.json [...]  -> writes .png beside each
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def draw(path):
    with open(path) as f:
        doc = json.load(f)
    # Plain impl names only (knob sweeps such as "frost[TILE_N=128]" stay in the JSON).
    records = [r for r in doc["records"] if "[" not in r["impl"] and r.get("value") is not None]
    cases = list(dict.fromkeys(r["case"] for r in records))
    impls = list(dict.fromkeys(r["impl"] for r in records))
    unit = records[0]["unit"] if records else ""
    width = 0.8 / max(len(impls), 1)
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(cases)), 4.8))
    for i, impl in enumerate(impls):
        xs, ys = [], []
        for c, case in enumerate(cases):
            v = next((r["value"] for r in records if r["case"] == case and r["impl"] == impl), None)
            if v is not None:
                xs.append(c + i * width)
                ys.append(v)
        ax.bar(xs, ys, width, label=impl)
    for c, case in enumerate(cases):
        frost = next((r["value"] for r in records if r["case"] == case and r["impl"] == "frost"), None)
        peers = [r["value"] for r in records if r["case"] == case and r["impl"] != "frost"]
        if frost and peers:
            ax.annotate(f"{frost / max(peers):.2f}x", (c, frost), ha="center", va="bottom", fontsize=8)
    ax.set_xticks([c + 0.4 - width / 2 for c in range(len(cases))])
    ax.set_xticklabels(cases, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(unit)
    ax.set_title(f"{doc['suite']} on {doc['device']} ({doc['date']}); frost / best peer above frost's bar")
    ax.legend()
    fig.tight_layout()
    out = path[: -len(".json")] + ".png"
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        draw(p)
