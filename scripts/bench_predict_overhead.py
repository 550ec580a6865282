#!/usr/bin/env python3
"""Prediction overhead: time to score N candidates of a convolution,
HybridCostModel (zero-shot and with a fitted residual) versus a trained TVM
XGBModel, same candidates, same process, alternating repeats.

    python scripts/bench_predict_overhead.py -n 2048 --out benchmarks/predict_overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="R18:1")
    ap.add_argument("-n", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/predict_overhead.json")
    args = ap.parse_args()

    import numpy as np
    from tvm.s_tir import meta_schedule as ms

    from tvm_latmodel.model.cost_model import HybridCostModel
    from tvm_latmodel.sampling import make_context, sample_schedules
    from tvm_latmodel.targets import host_target
    from tvm_latmodel.workloads import get_workload

    target = host_target()
    mod = get_workload(args.workload)
    ctx = make_context(mod, target)
    t0 = time.time()
    schs = sample_schedules(mod, target, args.n, seed=0, context=ctx)
    print(f"sampled {len(schs)} candidates in {time.time() - t0:.0f} s", file=sys.stderr)
    cands = [ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(s.mod["main"])) for s in schs]
    rng = np.random.default_rng(0)
    # Train both learned models on the same 128 synthetic-latency samples so
    # that both run their full prediction path (XGBModel needs >= 100).
    train = cands[:128]
    hybrid0 = HybridCostModel(residual=False)
    lat = hybrid0.predict_latency_s(ctx, train) * np.exp(rng.normal(0, 0.5, len(train)))
    results = [ms.runner.RunnerResult(run_secs=[float(x)], error_msg=None) for x in lat]
    xgb = ms.cost_model.XGBModel(num_tuning_cores=2)
    xgb.update(ctx, train, results)
    hybrid = HybridCostModel()
    hybrid.update(ctx, train, results)
    models = {"xgb": xgb, "hybrid_fitted": hybrid, "analytical_only": hybrid0}
    times = {k: [] for k in models}
    for _ in range(args.repeats):
        for name, m in models.items():
            t0 = time.perf_counter()
            m.predict(ctx, cands)
            times[name].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in times.items()}
    doc = {"workload": args.workload, "candidates": len(cands), "repeats": args.repeats, "seconds": times,
           "best_seconds": best,
           "ratio_hybrid_fitted_over_xgb": best["hybrid_fitted"] / best["xgb"],
           "ratio_analytical_over_xgb": best["analytical_only"] / best["xgb"]}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    json.dump(doc, open(args.out, "w"), indent=1)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
