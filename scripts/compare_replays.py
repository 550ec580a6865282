#!/usr/bin/env python3
"""Side-by-side table of two or more ``tvm-latmodel replay --json`` outputs.

    python scripts/compare_replays.py before.json after.json [--names before after]

Prints per task and on average: Spearman, top-1, top-5 and trials_to_5pct
of each file, so a change to the model is read on the same tasks. Files
given the same name are seeds of one setting (``--names A A A B B B``):
per task their mean is shown, and the mean row gives the mean over seeds of
the per-seed mean over tasks, with its range over seeds.
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
    if len(names) != len(args.files):
        ap.error(f"{len(args.files)} files but {len(names)} names")
    settings: dict[str, list[dict]] = {}
    for f, n in zip(args.files, names):
        with open(f) as fh:
            settings.setdefault(n, []).append({t["task"]: t for t in json.load(fh)["tasks"]})
    runs = [r for rs in settings.values() for r in rs]
    tasks = [t for t in runs[0] if all(t in r for r in runs)]

    def fmt(m, v):
        return f"{v:.1f}" if m == "trials_to_5pct" else f"{v:.3f}"

    order = list(settings)
    head = "| task | " + " | ".join(f"{m} ({n})" for m in METRICS for n in order) + " |"
    print(head)
    print("|" + "---|" * (1 + len(METRICS) * len(order)))
    for t in tasks:
        cells = [fmt(m, statistics.fmean(r[t][m] for r in settings[n])) for m in METRICS for n in order]
        print(f"| {t} | " + " | ".join(cells) + " |")
    cells = []
    for m in METRICS:
        for n in order:
            per_seed = [statistics.fmean(r[x][m] for x in tasks) for r in settings[n]]
            cell = fmt(m, statistics.fmean(per_seed))
            if len(per_seed) > 1:
                cell += f" ({fmt(m, min(per_seed))}–{fmt(m, max(per_seed))})"
            cells.append(cell)
    print(f"| mean of {len(tasks)} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
