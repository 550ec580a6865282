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
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from live_side_by_side import _finished, _gmean, _tune  # noqa: E402 - this folder's sibling script

DEFAULT_WORKLOADS = ["R18:1", "XFM:2", "C2D:0", "DEP:1"]
CONFIGS = ("default", "calibrated")


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
                key, path, done = _finished(args.out, name, config, seed)
                if done is not None:
                    results[(name, config, seed)] = done
                    continue
                results[(name, config, seed)] = _tune(name, "hybrid", args.trials, seed, args.out, key, path,
                                                      args.hardware if config == "calibrated" else None)
    print(write_table(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
