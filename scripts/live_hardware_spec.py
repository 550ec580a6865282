#!/usr/bin/env python3
"""Live: the hybrid with the target's default hardware spec against the
hybrid with a spec from ``tvm-latmodel calibrate``, side by side.

For each seed and workload it tunes twice for ``--trials`` trials, one right
after the other: ``default`` (``HardwareSpec.from_target``, what ``tune``
uses without ``--hardware``) and ``calibrated`` (``--hardware FILE``). Both
use the shipped pretrained residual, as ``tune`` does. Each result is written
as soon as it finishes, so a stopped run resumes; ``table.md`` gives per
workload the geometric mean over seeds of each run's best latency and the
ratio default / calibrated (above 1: the calibrated spec found the faster
schedule).

    nice -n 5 python scripts/live_hardware_spec.py --hardware benchmarks/modes/calibrated_znver4.json \\
        --out benchmarks/live_stop24_hardware --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

DEFAULT_WORKLOADS = ["R18:1", "XFM:2", "C2D:0", "DEP:1"]
CONFIGS = ("default", "calibrated")


def _gmean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _tune(name, config, hardware, trials, seed, out, path) -> dict:
    from tvm_latmodel.fileformat import write_json
    from tvm_latmodel.targets import host_target
    from tvm_latmodel.tuning import tune_workload
    from tvm_latmodel.workloads import get_workload

    target = host_target()
    work_dir = os.path.join(out, "work_dirs", os.path.basename(path)[:-5])
    if os.path.isdir(work_dir):  # an interrupted run: start it again cleanly
        shutil.rmtree(work_dir)
    print(f"[live] {name} {config} seed {seed}: {trials} trials", file=sys.stderr, flush=True)
    rep = tune_workload(get_workload(name), target, work_dir=work_dir, trials=trials, cost_model="hybrid",
                        seed=seed, workload_name=name, hardware=hardware if config == "calibrated" else None)
    d = rep.to_dict()
    d.update(target=str(target), seed=seed, config=config,
             hardware=os.path.abspath(hardware) if config == "calibrated" else "defaults")
    write_json(path, d)
    shutil.rmtree(work_dir, ignore_errors=True)  # the curve is in the JSON
    return d


def write_table(results, args) -> str:
    lines = [f"| workload | seeds | default@{args.trials} (us) | calibrated@{args.trials} (us) | "
             "default / calibrated (gmean, min-max over seeds) |", "|---|---|---|---|---|"]
    means = []
    for name in args.workloads:
        seeds = [s for s in args.seeds if all((name, c, s) in results for c in CONFIGS)]
        if not seeds:
            continue
        d = [results[(name, "default", s)]["best_latency_s"] for s in seeds]
        c = [results[(name, "calibrated", s)]["best_latency_s"] for s in seeds]
        ratios = [a / b for a, b in zip(d, c) if a and b]
        means.append(_gmean(ratios))
        lines.append(f"| {name} | {len(seeds)} | {_gmean(d) * 1e6:.1f} | {_gmean(c) * 1e6:.1f} | "
                     f"{_gmean(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) |")
    if means:
        lines.append(f"| geometric mean | | | | {_gmean(means):.3f} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hardware", required=True, help="the spec JSON written by `tvm-latmodel calibrate`")
    ap.add_argument("--out", default="benchmarks/live_hardware")
    ap.add_argument("--workloads", nargs="*", default=DEFAULT_WORKLOADS)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    args = ap.parse_args()
    from tvm_latmodel.hardware import HardwareSpec

    HardwareSpec.load(args.hardware)  # a bad file fails here, before any tuning
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for seed in args.seeds:  # seed-major: a stopped run leaves whole seeds done
        for name in args.workloads:
            for config in CONFIGS:
                path = os.path.join(args.out, f"{name.replace(':', '_')}-{config}-s{seed}.json")
                if os.path.exists(path):
                    with open(path) as f:
                        results[(name, config, seed)] = json.load(f)
                    continue
                results[(name, config, seed)] = _tune(name, config, args.hardware, args.trials, seed,
                                                      args.out, path)
    print(write_table(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
