#!/usr/bin/env python3
"""Live side-by-side tuning: hybrid vs TVM's XGBModel vs random, same
workloads, same seed, same machine, one run.

For each workload it tunes with ``hybrid`` for H trials, ``xgb`` for X
trials (its best after H trials is read off the same run's curve: the first
H trials of a run do not depend on the total budget, because tuning goes in
identical rounds of 16 with the same seeds) and ``random`` for H trials.
Each (workload, model) result is written as soon as it finishes, so the run
can be resumed; at the end a table (Markdown) and tuning curves (PNG) are
written.

    python scripts/live_side_by_side.py --out benchmarks/live
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

DEFAULT_WORKLOADS = ["C2D:1", "GMM:1", "DEP:0", "NRM:3"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/live")
    ap.add_argument("--workloads", nargs="*", default=DEFAULT_WORKLOADS)
    ap.add_argument("--hybrid-trials", type=int, default=64)
    ap.add_argument("--xgb-trials", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from tvm_latmodel.targets import host_target
    from tvm_latmodel.tuning import tune_workload
    from tvm_latmodel.workloads import get_workload

    target = host_target()
    os.makedirs(args.out, exist_ok=True)
    plan = [("hybrid", args.hybrid_trials), ("xgb", args.xgb_trials), ("random", args.hybrid_trials)]
    results = {}
    for name in args.workloads:
        for model, trials in plan:
            key = f"{name.replace(':', '_')}-{model}"
            path = os.path.join(args.out, key + ".json")
            if os.path.exists(path):
                results[(name, model)] = json.load(open(path))
                continue
            work_dir = os.path.join(args.out, "work_dirs", key)
            if os.path.isdir(work_dir):  # an interrupted run: start it again cleanly
                import shutil

                shutil.rmtree(work_dir)
            rep = tune_workload(get_workload(name), target, work_dir=work_dir, trials=trials, cost_model=model,
                                seed=args.seed, workload_name=name)
            d = rep.to_dict()
            d["target"] = str(target)
            json.dump(d, open(path, "w"))
            results[(name, model)] = d
    write_table(results, args)
    plot_curves(results, args)
    return 0


def _best_at(d, n):
    curve = d["curve"][:n]
    vals = [c for c in curve if c is not None]
    return min(vals) if vals else None


def write_table(results, args) -> None:
    h, x = args.hybrid_trials, args.xgb_trials
    lines = [f"| workload | hybrid@{h} (us) | xgb@{h} (us) | xgb@{x} (us) | random@{h} (us) | "
             f"xgb@{x} / hybrid@{h} | xgb@{h} / hybrid@{h} | random@{h} / hybrid@{h} |",
             "|---|---|---|---|---|---|---|---|"]
    for name in args.workloads:
        hy = _best_at(results[(name, "hybrid")], h)
        xh = _best_at(results[(name, "xgb")], h)
        xx = _best_at(results[(name, "xgb")], x)
        rn = _best_at(results[(name, "random")], h)
        f = lambda v: f"{v * 1e6:.1f}" if v else "-"  # noqa: E731
        r = lambda a, b: f"{a / b:.2f}" if a and b else "-"  # noqa: E731
        lines.append(f"| {name} | {f(hy)} | {f(xh)} | {f(xx)} | {f(rn)} | {r(xx, hy)} | {r(xh, hy)} | {r(rn, hy)} |")
    text = "\n".join(lines) + "\n\nRatios above 1 mean the hybrid model found the faster schedule.\n"
    open(os.path.join(args.out, "table.md"), "w").write(text)
    print(text)


def plot_curves(results, args) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = len(args.workloads)
    fig = Figure(figsize=(4.5 * n, 3.6))
    FigureCanvasAgg(fig)
    for i, name in enumerate(args.workloads):
        ax = fig.add_subplot(1, n, i + 1)
        for model in ("hybrid", "xgb", "random"):
            d = results[(name, model)]
            ys = [c * 1e6 if c is not None else float("nan") for c in d["curve"]]
            ax.plot(range(1, len(ys) + 1), ys, label=model)
        ax.set_title(name)
        ax.set_xlabel("trials measured")
        ax.set_ylabel("best latency (us)")
        ax.set_yscale("log")
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "curves.png"), dpi=90)


if __name__ == "__main__":
    sys.exit(main())
