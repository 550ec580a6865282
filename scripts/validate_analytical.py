#!/usr/bin/env python3
"""Measured check of the analytical model (no fitting to the measurements).

Samples N schedules of a workload from MetaSchedule's default space, builds
and runs them on this CPU with MetaSchedule's builder and runner, and reports
the Spearman rank correlation between the analytical estimate and the
measured latency. Writes a JSON of every pair and a predicted-vs-measured
scatter plot.

    python scripts/validate_analytical.py --workload R18:1 -n 40 --out benchmarks/validate

``--reuse-measurements`` re-estimates the schedules of an earlier run with
the current model without measuring again: sampling is deterministic for a
seed, and each schedule's structural hash in the JSON must match.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="R18:1")
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/validate")
    ap.add_argument("--reuse-measurements", action="store_true",
                    help="keep the measured latencies of OUT/WORKLOAD.json (schedules checked by hash)")
    args = ap.parse_args()

    import tvm
    import tvm_ffi
    from scipy.stats import kendalltau, spearmanr

    from tvm_latmodel.hardware import HardwareSpec
    from tvm_latmodel.measure import measure_schedules
    from tvm_latmodel.model.modes import estimate
    from tvm_latmodel.model.program import summarize
    from tvm_latmodel.sampling import sample_schedules
    from tvm_latmodel.targets import host_target
    from tvm_latmodel.workloads import get_workload

    target = host_target()
    hw = HardwareSpec.from_target(target)
    schedules = sample_schedules(get_workload(args.workload), target, args.n, seed=args.seed)
    est = [estimate(summarize(s.mod, "cpu"), hw).latency_s for s in schedules]
    hashes = [str(tvm_ffi.structural_hash(s.mod)) for s in schedules]
    stem = os.path.join(args.out, args.workload.replace(":", "_"))
    if args.reuse_measurements:
        if not os.path.exists(stem + ".json"):
            raise SystemExit(f"{stem}.json: no earlier run to reuse; measure first without --reuse-measurements")
        with open(stem + ".json") as f:
            old = json.load(f)
        old_hashes = [p.get("schedule_hash") for p in old["pairs"]]
        if old.get("target") != str(target) or old_hashes != hashes:
            raise SystemExit(f"{stem}.json: its schedules or target differ from this sampling "
                             f"(seed {args.seed}, n {args.n}); measure again without --reuse-measurements")
        meas = [p["measured_s"] for p in old["pairs"]]
    else:
        meas = measure_schedules(schedules, target)
    ok = [i for i, m in enumerate(meas) if m is not None]
    rho = float(spearmanr([est[i] for i in ok], [meas[i] for i in ok])[0])
    tau = float(kendalltau([est[i] for i in ok], [meas[i] for i in ok])[0])
    os.makedirs(args.out, exist_ok=True)
    doc = {"workload": args.workload, "target": str(target), "tvm": tvm.__version__, "hardware": hw.name,
           "samples": len(schedules), "measured": len(ok), "spearman": rho, "kendall": tau,
           "pairs": [{"estimate_s": est[i], "measured_s": meas[i], "schedule_hash": hashes[i]}
                     for i in range(len(schedules))]}
    json.dump(doc, open(stem + ".json", "w"), indent=1)

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.8, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter([meas[i] * 1e6 for i in ok], [est[i] * 1e6 for i in ok], s=14)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured latency (us)")
    ax.set_ylabel("analytical estimate (us)")
    ax.set_title(f"{args.workload}: Spearman {rho:.2f} ({len(ok)} schedules)")
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=90)
    print(f"{args.workload}: {len(ok)}/{len(schedules)} measured, Spearman {rho:.3f}, Kendall {tau:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
