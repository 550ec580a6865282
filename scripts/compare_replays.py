#!/usr/bin/env python3
"""Side-by-side table of two or more ``tvm-latmodel replay --json`` outputs.

    python scripts/compare_replays.py before.json after.json [--names before after]

Prints per task and on average: Spearman, top-1, top-5 and trials_to_5pct
of each file, so a change to the model is read on the same tasks.
"""

from __future__ import annotations

import argparse
import json
import statistics

METRICS = ("spearman", "top1_score", "top5_score", "trials_to_5pct")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--names", nargs="*")
    args = ap.parse_args()
    names = args.names or [f.rsplit("/", 1)[-1].removesuffix(".json") for f in args.files]
    runs = []
    for f in args.files:
        with open(f) as fh:
            runs.append({t["task"]: t for t in json.load(fh)["tasks"]})
    tasks = [t for t in runs[0] if all(t in r for r in runs)]
    head = "| task | " + " | ".join(f"{m} ({n})" for m in METRICS for n in names) + " |"
    print(head)
    print("|" + "---|" * (1 + len(METRICS) * len(names)))
    for t in tasks + ["mean"]:
        cells = []
        for m in METRICS:
            for r in runs:
                v = statistics.fmean(r[x][m] for x in tasks) if t == "mean" else r[t][m]
                cells.append(f"{v:.3f}" if m != "trials_to_5pct" else f"{v:.1f}")
        print(f"| {t} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
