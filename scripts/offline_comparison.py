#!/usr/bin/env python3
"""Offline comparison of every model on every recorded tuning log.

For each model (analytical, hybrid, xgb, random) and each shot count, and
for leave-one-task-out transfer, replays the logs (same tasks, same seeded
shots, same seed for every model) and writes:

* ``reports.json``: every per-task result (metrics, simulated-search curve);
* ``table.md``: means per setting and model, then per-task tables;
* ``metrics_vs_shots.png``: mean metrics versus shots, one line per model;
* ``curves.png``: simulated tuning curves (best latency found over the pool's
  best, versus schedules measured), averaged over tasks, one line per model;
* ``scatter.png``: predicted score versus measured latency of the held-out
  records, one panel per task: analytical at the fewest shots, hybrid and
  xgb at the most.

Each (model, setting, task) result is cached as JSON under ``--cache``
(default ``OUT/cache``), so an interrupted run resumes and new logs only add
their own work. Delete the cache after changing a model.

    python scripts/offline_comparison.py tuning_logs/cpu --out benchmarks/offline
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

MODELS = ("analytical", "hybrid", "xgb", "random")
KEYS = ("spearman", "pairwise_accuracy", "top1_score", "top5_score", "trials_to_5pct")


def _setting_name(shots: int, transfer: bool, n_tasks: int) -> str:
    # Transfer results depend on the pool of other tasks: key them by its size.
    return f"s{shots}" + (f"-transfer{n_tasks}" if transfer else "")


def run_one(tasks, task, model: str, shots: int, transfer: bool, seed: int) -> dict:
    from tvm_latmodel.model.registry import make_model
    from tvm_latmodel.replay import ReplayEvaluator

    ev = ReplayEvaluator(shots=shots, transfer=transfer, seed=seed)
    t0 = time.time()
    rep = ev.evaluate(tasks, lambda t: make_model(model, seed=seed, target=t.target), model_name=model,
                      only=[task.name])
    (metrics,) = rep.to_dict()["tasks"]
    search = rep.searches[task.name]
    return {
        "model": model, "shots": shots, "transfer": transfer, "task": task.name, "seed": seed,
        "metrics": metrics, "best_so_far_s": [float(x) for x in search.best_so_far_s],
        "pool_best_s": float(task.latencies_s.min()),
        "predictions": [{"measured_s": p["measured_s"], "score": p["score"]} for p in rep.predictions],
        "seconds": round(time.time() - t0, 1),
    }


def mean_metrics(results: list[dict]) -> dict:
    return {k: float(np.mean([r["metrics"][k] for r in results])) for k in KEYS}


def write_tables(out: str, settings, models, results: dict, task_names: list[str]) -> str:
    lines = ["| setting | model | " + " | ".join(KEYS) + " |", "|---|---|" + "---|" * len(KEYS)]
    for shots, transfer in settings:
        for model in models:
            rs = [results[(model, shots, transfer, t)] for t in task_names]
            m = mean_metrics(rs)
            label = f"{shots} shots" + (" + transfer" if transfer else "")
            lines.append(f"| {label} | {model} | " + " | ".join(
                f"{m[k]:.1f}" if k == "trials_to_5pct" else f"{m[k]:.3f}" for k in KEYS) + " |")
    lines.append(f"\nMeans over {len(task_names)} tasks: {', '.join(task_names)}.\n")
    for key in ("spearman", "top5_score", "trials_to_5pct"):
        lines.append(f"\n**{key} per task**\n")
        cols = [(s, tr, m) for s, tr in settings for m in models]
        lines.append("| task | " + " | ".join(f"{m}@{s}{'T' if tr else ''}" for s, tr, m in cols) + " |")
        lines.append("|---|" + "---|" * len(cols))
        for t in task_names:
            vals = [results[(m, s, tr, t)]["metrics"][key] for s, tr, m in cols]
            lines.append(f"| {t} | " + " | ".join(f"{v:.0f}" if key == "trials_to_5pct" else f"{v:.2f}"
                                                  for v in vals) + " |")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    return table


def write_plots(out: str, settings, models, results: dict, task_names: list[str]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    plain = [s for s, tr in settings if not tr]
    fig = Figure(figsize=(4 * len(KEYS), 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    for i, key in enumerate(KEYS):
        ax = fig.add_subplot(1, len(KEYS), i + 1)
        for model in models:
            ys = [mean_metrics([results[(model, s, False, t)] for t in task_names])[key] for s in plain]
            ax.plot(plain, ys, marker="o", label=model)
        ax.set_xlabel("shots per task")
        ax.set_title(key)
        ax.legend(fontsize=7)
    fig.savefig(os.path.join(out, "metrics_vs_shots.png"), dpi=80)

    # Tuning curves: best found / pool best after n measured, mean over tasks.
    fig = Figure(figsize=(4.2 * len(plain), 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    for i, shots in enumerate(plain):
        ax = fig.add_subplot(1, len(plain), i + 1)
        for model in models:
            curves = []
            for t in task_names:
                r = results[(model, shots, False, t)]
                c = np.array(r["best_so_far_s"]) / r["pool_best_s"]
                curves.append(c)
            n = max(len(c) for c in curves)
            padded = np.array([np.concatenate([c, np.full(n - len(c), c[-1])]) for c in curves])
            ax.plot(np.arange(1, n + 1), padded.mean(axis=0), label=model)
        ax.set_yscale("log")
        ax.set_xlabel("schedules measured (simulated)")
        ax.set_ylabel("best found / pool best (mean over tasks)")
        ax.set_title(f"{shots} shots")
        ax.legend(fontsize=7)
    fig.savefig(os.path.join(out, "curves.png"), dpi=80)

    # Predicted versus measured: analytical at the fewest shots, the learned
    # models at the most.
    cols = 4
    rows = -(-len(task_names) // cols)
    fig = Figure(figsize=(4 * cols, 3.2 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    for i, t in enumerate(task_names):
        ax = fig.add_subplot(rows, cols, i + 1)
        series = [("analytical", plain[0], "tab:blue"), ("hybrid", plain[-1], "tab:orange"),
                  ("xgb", plain[-1], "tab:green")]
        for model, shots, color in series:
            if model not in models:
                continue
            r = results[(model, shots, False, t)]
            meas = np.array([p["measured_s"] for p in r["predictions"]])
            score = np.array([p["score"] for p in r["predictions"]])
            ax.scatter(meas / r["pool_best_s"], score / score.max(), s=8, alpha=0.6, color=color,
                       label=f"{model}@{shots} (Spearman {r['metrics']['spearman']:.2f})")
        ax.set_xscale("log")
        ax.set_xlabel("measured / pool best")
        ax.set_ylabel("score / max score")
        ax.set_title(t)
        ax.legend(fontsize=6)
    fig.savefig(os.path.join(out, "scatter.png"), dpi=80)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--shots", nargs="+", type=int, default=[0, 16, 32, 64])
    ap.add_argument("--no-transfer", action="store_true")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/offline")
    ap.add_argument("--cache", default=None, help="per-result JSON cache (default OUT/cache)")
    args = ap.parse_args()

    from tvm_latmodel.replay import load_tasks

    models = tuple(args.models)
    tasks = load_tasks(args.logs, progress=True)
    names = [t.name for t in tasks]
    cache = args.cache or os.path.join(args.out, "cache")
    os.makedirs(cache, exist_ok=True)
    settings = [(s, False) for s in args.shots] + ([] if args.no_transfer else [(0, True)])
    results: dict = {}
    todo = [(m, s, tr, t) for s, tr in settings for m in models for t in tasks]
    for i, (model, shots, transfer, task) in enumerate(todo):
        path = os.path.join(cache, f"{model}-{_setting_name(shots, transfer, len(tasks))}-seed{args.seed}-{task.name}.json")
        if os.path.exists(path):
            with open(path) as f:
                results[(model, shots, transfer, task.name)] = json.load(f)
            continue
        r = run_one(tasks, task, model, shots, transfer, args.seed)
        with open(path + ".tmp", "w") as f:
            json.dump(r, f)
        os.replace(path + ".tmp", path)
        results[(model, shots, transfer, task.name)] = r
        m = r["metrics"]
        print(f"[{i + 1}/{len(todo)}] {task.name} {model} shots {shots}{' transfer' if transfer else ''}: "
              + " ".join(f"{k} {m[k]:.3f}" for k in KEYS) + f" ({r['seconds']} s)", file=sys.stderr, flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "reports.json"), "w") as f:
        json.dump({"logs": args.logs, "seed": args.seed, "tasks": names,
                   "results": [{k: v for k, v in r.items() if k != "predictions"} for r in results.values()]},
                  f, indent=1)
    print(write_tables(args.out, settings, models, results, names))
    write_plots(args.out, settings, models, results, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
