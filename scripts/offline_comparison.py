#!/usr/bin/env python3
"""Offline comparison of every model on every recorded tuning log.

For each model (analytical, hybrid, xgb, random) and each shot count, and
for leave-one-task-out transfer, replays the logs (same tasks, same seeded
shots) and writes one JSON with every report, a Markdown table of the means
and a plot of mean metrics versus shots.

    python scripts/offline_comparison.py tuning_logs/cpu --out benchmarks/offline
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

MODELS = ("analytical", "hybrid", "xgb", "random")
KEYS = ("spearman", "pairwise_accuracy", "top1_score", "top5_score", "trials_to_5pct")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--shots", nargs="+", type=int, default=[0, 16, 32, 64])
    ap.add_argument("--no-transfer", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/offline")
    args = ap.parse_args()

    from tvm_latmodel.replay import ReplayEvaluator, load_tasks, make_model

    tasks = load_tasks(args.logs, progress=True)
    runs = [(s, False) for s in args.shots] + ([] if args.no_transfer else [(0, True)])
    reports = []
    for shots, transfer in runs:
        ev = ReplayEvaluator(shots=shots, transfer=transfer, seed=args.seed, progress=True)
        for name in MODELS:
            rep = ev.evaluate(tasks, lambda t, n=name: make_model(n, seed=args.seed, target=t.target),
                              model_name=name).to_dict()
            rep["transfer"] = transfer
            reports.append(rep)
            m = rep["mean"]
            print(f"shots {shots:3d}{' transfer' if transfer else ''} {name:10s} "
                  + " ".join(f"{k} {m[k]:.3f}" for k in KEYS), file=sys.stderr, flush=True)
    os.makedirs(args.out, exist_ok=True)
    json.dump({"logs": args.logs, "seed": args.seed, "tasks": [t.name for t in tasks], "reports": reports},
              open(os.path.join(args.out, "reports.json"), "w"), indent=1)
    lines = ["| shots | model | " + " | ".join(KEYS) + " |", "|---|---|" + "---|" * len(KEYS)]
    for r in reports:
        label = f"{r['shots']}{' (transfer)' if r['transfer'] else ''}"
        lines.append(f"| {label} | {r['model']} | " + " | ".join(f"{r['mean'][k]:.3f}" for k in KEYS) + " |")
    table = "\n".join(lines) + f"\n\nMeans over {len(tasks)} tasks: {', '.join(t.name for t in tasks)}.\n"
    open(os.path.join(args.out, "table.md"), "w").write(table)
    print(table)

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4 * len(KEYS), 3.4))
    FigureCanvasAgg(fig)
    for i, key in enumerate(KEYS):
        ax = fig.add_subplot(1, len(KEYS), i + 1)
        for name in MODELS:
            pts = [(r["shots"], r["mean"][key]) for r in reports if r["model"] == name and not r["transfer"]]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_xlabel("shots per task")
        ax.set_title(key)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "metrics_vs_shots.png"), dpi=80)
    return 0


if __name__ == "__main__":
    sys.exit(main())
