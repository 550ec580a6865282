#!/usr/bin/env python3
"""Live side-by-side tuning: hybrid@H against TVM's XGBModel@X, both settings.

For each workload and seed it tunes with ``hybrid`` for H trials and with
TVM's ``xgb`` (its default: random scores below 100 samples) and
``xgb-nowarmup`` (``XGBModel(num_warmup_samples=0)``) for X trials each,
on this machine, one after the other in the same run. Tuning goes in
identical rounds with the same seed, so the first H trials of an X-trial run
are what an H-trial run would have done: the XGBoost rows also give their
best after H trials.

The goal of issue 10: hybrid@H at least as fast as the *best* XGBoost
baseline@X (per seed the faster of the two settings), per workload and as a
geometric mean over workloads.

Each (workload, model, seed) result is written as soon as it finishes, so
the run resumes where it stopped; at the end ``table.md`` (per-workload
geometric means over seeds, with the spread) and ``curves.png`` are written.

    nice -n 5 python scripts/live_side_by_side.py --out benchmarks/live --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

#: In no tuning log, so in no training data of the shipped residual (which
#: since stop 27 is trained on every log; stops 18-26 used R18:1, XFM:2,
#: C2D:0 and DEP:1, out of its data then).
DEFAULT_WORKLOADS = ["R18:1", "C2D:3", "TBG:2", "CAP:3"]
MODELS = ("hybrid", "xgb", "xgb-nowarmup")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/live")
    ap.add_argument("--workloads", nargs="*", default=DEFAULT_WORKLOADS)
    ap.add_argument("--hybrid-trials", type=int, default=64)
    ap.add_argument("--xgb-trials", type=int, default=128)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument("--report-only", action="store_true", help="write the table from finished runs")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    results = {}
    for seed in args.seeds:  # seed-major: a stopped run leaves whole seeds done
        for name in args.workloads:
            for model in MODELS:
                trials = args.hybrid_trials if model == "hybrid" else args.xgb_trials
                key, path, done = _finished(args.out, name, model, seed)
                if done is not None:
                    results[(name, model, seed)] = done
                    continue
                if args.report_only:
                    continue
                results[(name, model, seed)] = _tune(name, model, trials, seed, args.out, key, path)
    write_table(results, args)
    plot_curves(results, args)
    return 0


def _finished(out, name, label, seed):
    """``(key, path, result)`` of one run in ``out``: its file name, and the
    report a finished run left there (None if not run yet), so a stopped
    benchmark resumes."""
    key = f"{name.replace(':', '_')}-{label}-s{seed}"
    path = os.path.join(out, key + ".json")
    if not os.path.exists(path):
        return key, path, None
    with open(path) as f:
        return key, path, json.load(f)


def _tune(name, model, trials, seed, out, key, path, hardware=None) -> dict:
    """Tune ``name`` with cost model ``model`` and write the report to
    ``path``; ``hardware``: a spec JSON from ``calibrate`` (default: the
    target's defaults, as ``tune`` without ``--hardware``)."""
    from tvm_latmodel.fileformat import write_json
    from tvm_latmodel.targets import host_target
    from tvm_latmodel.tuning import tune_workload
    from tvm_latmodel.workloads import get_workload

    target = host_target()
    work_dir = os.path.join(out, "work_dirs", key)
    if os.path.isdir(work_dir):  # an interrupted run: start it again cleanly
        shutil.rmtree(work_dir)
    spec = "defaults" if hardware is None else os.path.abspath(hardware)
    print(f"[live] {name} {model} seed {seed}: {trials} trials, hardware {spec}, target {target}",
          file=sys.stderr, flush=True)
    rep = tune_workload(get_workload(name), target, work_dir=work_dir, trials=trials, cost_model=model,
                        seed=seed, workload_name=name, hardware=hardware)
    d = rep.to_dict()
    d["target"] = str(target)
    d["seed"] = seed
    d["hardware"] = spec
    write_json(path, d)
    shutil.rmtree(work_dir, ignore_errors=True)  # the curve is in the JSON
    return d


def _best_at(d, n):
    vals = [c for c in d["curve"][:n] if c is not None]
    return min(vals) if vals else None


def _gmean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def write_table(results, args) -> None:
    h, x = args.hybrid_trials, args.xgb_trials
    lines = [f"| workload | seeds | hybrid@{h} (us) | xgb@{x} (us) | xgb-nowarmup@{x} (us) | "
             f"best XGB@{x} / hybrid@{h} (gmean, min-max over seeds) | xgb-nowarmup@{h} / hybrid@{h} |",
             "|---|---|---|---|---|---|---|"]
    all_ratios = []
    for name in args.workloads:
        seeds = [s for s in args.seeds if all((name, m, s) in results for m in MODELS)]
        if not seeds:
            continue
        hy = [_best_at(results[(name, "hybrid", s)], h) for s in seeds]
        xg = [_best_at(results[(name, "xgb", s)], x) for s in seeds]
        xn = [_best_at(results[(name, "xgb-nowarmup", s)], x) for s in seeds]
        xnh = [_best_at(results[(name, "xgb-nowarmup", s)], h) for s in seeds]
        ratios = [min(a, b) / c for a, b, c in zip(xg, xn, hy) if a and b and c]
        ratios_h = [b / c for b, c in zip(xnh, hy) if b and c]
        all_ratios.append(_gmean(ratios))
        us = lambda v: f"{v * 1e6:.1f}" if v else "-"  # noqa: E731
        lines.append(f"| {name} | {len(seeds)} | {us(_gmean(hy))} | {us(_gmean(xg))} | {us(_gmean(xn))} | "
                     f"{_gmean(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {_gmean(ratios_h):.2f} |")
    if all_ratios:
        lines.append(f"| geometric mean | | | | | {_gmean(all_ratios):.2f} | |")
    text = ("\n".join(lines) + "\n\nLatencies are geometric means over seeds of each run's best. A ratio above 1 "
            f"means hybrid@{h} found a faster schedule than the better XGBoost setting@{x}.\n")
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    print(text)


def plot_curves(results, args) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = [n for n in args.workloads if any((n, m, s) in results for m in MODELS for s in args.seeds)]
    if not names:
        return
    fig = Figure(figsize=(4.5 * len(names), 3.6))
    FigureCanvasAgg(fig)
    colors = {"hybrid": "C0", "xgb": "C1", "xgb-nowarmup": "C2"}
    for i, name in enumerate(names):
        ax = fig.add_subplot(1, len(names), i + 1)
        for model in MODELS:
            for j, s in enumerate(args.seeds):
                d = results.get((name, model, s))
                if d is None:
                    continue
                ys = [c * 1e6 if c is not None else float("nan") for c in d["curve"]]
                ax.plot(range(1, len(ys) + 1), ys, color=colors[model], alpha=0.7,
                        label=model if j == 0 else None)
        ax.set_title(name)
        ax.set_xlabel("trials measured")
        ax.set_ylabel("best latency (us)")
        ax.set_yscale("log")
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "curves.png"), dpi=90)


if __name__ == "__main__":
    sys.exit(main())
