#!/usr/bin/env python3
"""Draws one bar chart per results file (DESIGN.md section 6 schema). For each case: frost's best
configuration (every impl whose name starts with "frost") against the peers, with frost / best peer
written above frost's bar. With more than three peer names in a file, only the best peer is drawn.

Usage: python3 bench/chart.py bench/results/<date>-<device>-<suite>.json [...]  -> a .png beside each
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def series(records):
    """{case: {"frost": value, peer: value}} keeping frost's best config and every peer's value."""
    out = {}
    for r in records:
        if r.get("value") is None:
            continue
        impl = "frost" if r["impl"].startswith("frost") else r["impl"]
        row = out.setdefault(r["case"], {})
        row[impl] = max(row.get(impl, 0.0), r["value"])
    return out


def draw_unit(ax, records, unit):
    """One panel: the cases measured in `unit`."""
    rows = series(records)
    cases = list(rows)
    peers = sorted({k for row in rows.values() for k in row if k != "frost"})
    many = len(peers) > 3
    bars = ["frost", "best peer"] if many else ["frost"] + peers
    width = 0.8 / len(bars)
    for i, name in enumerate(bars):
        xs, ys = [], []
        for c, case in enumerate(cases):
            row = rows[case]
            v = max((v for k, v in row.items() if k != "frost"), default=None) if name == "best peer" else row.get(name)
            if v is not None:
                xs.append(c + i * width)
                ys.append(v)
        ax.bar(xs, ys, width, label=name)
    for c, case in enumerate(cases):
        row = rows[case]
        best = max(((v, k) for k, v in row.items() if k != "frost"), default=None)
        if "frost" in row and best:
            label = f"{row['frost'] / best[0]:.2f}x" + (f"\nvs {best[1]}" if many else "")
            ax.annotate(label, (c, row["frost"]), ha="center", va="bottom", fontsize=7)
    ax.set_xticks([c + 0.4 - width / 2 for c in range(len(cases))])
    ax.set_xticklabels(cases, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(unit)
    ax.legend(fontsize=8)
    return len(cases)


def draw(path):
    """One panel per unit (TFLOP/s beside GB/s, say), panels as wide as their case counts."""
    with open(path) as f:
        doc = json.load(f)
    units = list(dict.fromkeys(r["unit"] for r in doc["records"])) or [""]
    counts = [len({r["case"] for r in doc["records"] if r["unit"] == u}) or 1 for u in units]
    fig, axes = plt.subplots(1, len(units), figsize=(max(8, 1.5 * sum(counts)), 4.8),
                             gridspec_kw={"width_ratios": counts}, squeeze=False)
    for ax, unit in zip(axes[0], units):
        draw_unit(ax, [r for r in doc["records"] if r["unit"] == unit], unit)
    fig.suptitle(f"{doc['suite']} on {doc['device']} ({doc['date']}): frost / best peer above frost's bar", fontsize=10)
    fig.tight_layout()
    out = path[: -len(".json")] + ".png"
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        draw(p)
