#!/usr/bin/env python3
"""How reliable is a tuning log's ground truth? Re-measure its records here.

Every valid record of each log is built and run again on this machine with
the settings the logs were recorded with (MetaSchedule's LocalBuilder and
LocalRunner, ``number=3, repeat=1, min_repeat_ms=50``: ``measure.measure_schedules``),
``--passes`` times, pass after pass. A log recorded for another CPU is
refused unless ``--other-cpu`` is given: then its schedules are built for
this machine's target and the comparison mixes the two CPUs' differences
with measurement noise (still telling whether a logged verdict, such as a
pick 30x slower than the best, holds on other hardware).

Per log it reports:

* Spearman of the logged latencies with the first pass, and of the first
  pass with the second (how far a ranking metric can be trusted);
* whether the logged fastest record is still the fastest, and what a
  search that picked it would get, ``best re-measured / re-measured latency
  of the logged best`` (the top-1 score of a perfect model of the log);
* the analytical model's top-1 and top-5 scores against the logged
  latencies and against the median of the passes.

Results go to ``--out`` (JSON, written after every log and pass, so a stop
loses at most one log's pass; rerun the same command to continue).

    nice -n 5 python scripts/remeasure_logs.py tuning_logs/cpu-znver4/* --out benchmarks/remeasure/znver4.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def report(out: dict) -> str:
    from tvm_latmodel.replay.metrics import spearman, top_k_score

    lines = ["| log | records | Spearman logged vs pass 1 | pass 1 vs pass 2 | logged best still best | "
             "top-1 of the logged best (re-measured) | analytical top-1 / top-5, logged truth | "
             "analytical top-1 / top-5, re-measured truth |", "|---|---|---|---|---|---|---|---|"]
    for name, log in sorted(out["logs"].items()):
        passes = [np.array(p, dtype=float) for p in log["passes"]]
        if not passes:
            continue
        logged = np.array(log["logged_s"], dtype=float)
        ok = np.all([np.isfinite(p) for p in passes], axis=0) & np.isfinite(logged)
        logged = logged[ok]
        passes = [p[ok] for p in passes]
        truth = np.median(np.vstack(passes), axis=0)
        a = np.array(log["analytical_s"], dtype=float)[ok]
        a_here = np.array(log.get("analytical_here_s", log["analytical_s"]), dtype=float)[ok]
        s12 = f"{spearman(-passes[0], passes[1]):.3f}" if len(passes) > 1 else "-"
        lb = int(np.argmin(logged))
        lines.append(
            f"| {name} | {int(ok.sum())} | {spearman(-logged, passes[0]):.3f} | {s12} | "
            f"{'yes' if lb == int(np.argmin(truth)) else 'no'} | {truth.min() / truth[lb]:.3f} | "
            f"{top_k_score(-a, logged, 1):.3f} / {top_k_score(-a, logged, 5):.3f} | "
            f"{top_k_score(-a_here, truth, 1):.3f} / {top_k_score(-a_here, truth, 5):.3f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="log directories recorded for this machine's CPU")
    ap.add_argument("--out", required=True)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--other-cpu", action="store_true",
                    help="measure logs recorded for another CPU too, built for this machine's target")
    args = ap.parse_args()

    from tvm_latmodel.fileformat import load_json, write_json
    from tvm_latmodel.measure import measure_schedules
    from tvm_latmodel.model.cost_model import HybridCostModel
    from tvm_latmodel.replay.logs import load_tasks
    from tvm_latmodel.targets import host_target

    host = host_target()
    out = {"machine": str(host), "logs": {}}
    if os.path.exists(args.out):
        try:
            out = load_json(args.out, "re-measurement", strict=False)
        except ValueError as err:
            sys.exit(f"error: {err}; move it aside to start over (nothing was overwritten)")
        if not isinstance(out, dict) or not isinstance(out.get("logs"), dict):
            sys.exit(f"error: {args.out}: not this script's output (no 'logs' object); move it aside to start over")
    here = HybridCostModel(residual=False, pretrained=None, target=host)
    for path in args.logs:
        name = os.path.basename(os.path.normpath(path))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (task,) = load_tasks(path)
        other = task.target.attrs.get("mcpu") != host.attrs.get("mcpu")
        if other and not args.other_cpu:
            sys.exit(f"error: {path}: recorded for mcpu {task.target.attrs.get('mcpu')}, this machine is "
                     f"{host.attrs.get('mcpu')}: its times cannot be compared here (--other-cpu to measure it anyway)")
        key = f"{os.path.basename(os.path.dirname(os.path.normpath(path)))}/{name}"
        log = out["logs"].setdefault(key, {"logged_s": [r.latency_s for r in task.records], "passes": [],
                                           "recorded_for": str(task.target)})
        if "analytical_s" not in log:
            own = HybridCostModel(residual=False, pretrained=None, target=task.target)
            log["analytical_s"] = [float(x) for x in own.predict_latency_s(None, task.candidates())]
            if other:
                log["analytical_here_s"] = [float(x) for x in here.predict_latency_s(None, task.candidates())]
        schedules = [r.schedule for r in task.records]
        while len(log["passes"]) < args.passes:
            t0 = time.time()
            lat = measure_schedules(schedules, host, progress=True)
            log["passes"].append([float("nan") if x is None else float(x) for x in lat])
            write_json(args.out, out, indent=1)
            print(f"[remeasure] {name}: pass {len(log['passes'])} of {len(schedules)} records in "
                  f"{time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        write_json(args.out, out, indent=1)
    table = report(out)
    with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
        f.write(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
