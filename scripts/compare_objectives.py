#!/usr/bin/env python3
"""Which residual objective should be the default? Replays the hybrid model
with the squared-error and the pairwise-ranking residual (and TVM's XGBModel
beside them) on the same logs, same shots, same seed.

    python scripts/compare_objectives.py tuning_logs/cpu --shots 16 32 64 --out benchmarks/objectives.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--shots", nargs="+", type=int, default=[16, 32, 64])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/objectives.json")
    args = ap.parse_args()

    from tvm_latmodel.model.cost_model import HybridCostModel
    from tvm_latmodel.model.registry import make_model
    from tvm_latmodel.replay import ReplayEvaluator, load_tasks

    tasks = load_tasks(args.logs)
    factories = {
        "hybrid:reg:squarederror": lambda t: HybridCostModel(target=t.target, objective="reg:squarederror", seed=args.seed),
        "hybrid:rank:pairwise": lambda t: HybridCostModel(target=t.target, objective="rank:pairwise", seed=args.seed),
        "xgb": lambda t: make_model("xgb", seed=args.seed, target=t.target),
    }
    out = {"logs": args.logs, "seed": args.seed, "runs": []}
    for shots in args.shots:
        ev = ReplayEvaluator(shots=shots, seed=args.seed)
        for name, factory in factories.items():
            rep = ev.evaluate(tasks, factory, model_name=name).to_dict()
            out["runs"].append(rep)
            m = rep["mean"]
            print(f"shots {shots:3d} {name:26s} spearman {m['spearman']:.3f} pairwise {m['pairwise_accuracy']:.3f} "
                  f"top5 {m['top5_score']:.3f} trials_to_5pct {m['trials_to_5pct']:.1f}", flush=True)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    json.dump(out, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
