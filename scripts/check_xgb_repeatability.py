#!/usr/bin/env python3
"""Why does TVM's XGBModel give different transfer results at one seed?

``offline_comparison.py --models xgb-nowarmup --transfer-scope family`` run
twice at the same seed gave different metrics on every task (stop 20),
where the hybrid's runs were identical. This checks the two possible
sources on one task:

1. **XGBoost itself.** The task is replayed twice (leave-its-family-out
   transfer, 0 shots) with one shared feature cache, so XGBModel trains and
   predicts on identical feature rows both times.
2. **TVM's feature rows.** The same replay with a second cache, which
   extracts every feature again; then every candidate of the transfer pool
   is extracted by both caches and compared, raw and after
   :func:`tvm_latmodel.model.features.canonical_rows` (which orders TVM's
   tied buffer slots by content, as the hybrid does before it sums them).

    python scripts/check_xgb_repeatability.py tuning_logs/remeasured-znver4 --task C2D_1 \\
        --out benchmarks/xgb_repeatability.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", help="a folder of MetaSchedule databases, one per task (e.g. tuning_logs/remeasured-znver4)")
    ap.add_argument("--task", default="C2D_1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/xgb_repeatability.json")
    args = ap.parse_args()

    warnings.simplefilter("ignore")
    import numpy as np

    from tvm_latmodel.model.features import CachedPerStoreFeature, canonical_rows
    from tvm_latmodel.model.registry import make_model
    from tvm_latmodel.replay import ReplayEvaluator, family_of, load_tasks
    from tvm_latmodel.sampling import make_context

    paths = sorted(p for p in glob.glob(os.path.join(args.logs, "*")) if os.path.isdir(p))
    if not paths:
        ap.error(f"{args.logs}: no task folders")
    tasks = load_tasks(paths)
    task = next((t for t in tasks if t.name == args.task), None)
    if task is None:
        ap.error(f"{args.logs}: no task {args.task}; there are {', '.join(t.name for t in tasks)}")
    pool = [t for t in tasks if t is task or family_of(t.name) != family_of(task.name)]

    def replay(extractor) -> tuple[dict, np.ndarray]:
        t0 = time.time()
        ev = ReplayEvaluator(shots=0, transfer=True, seed=args.seed)
        rep = ev.evaluate(pool, lambda t: make_model("xgb-nowarmup", seed=args.seed, target=t.target,
                                                     extractor=extractor),
                          model_name="xgb-nowarmup", only=[task.name])
        m = rep.to_dict()["tasks"][0]
        metrics = {k: m[k] for k in ("spearman", "top1_score", "top5_score", "trials_to_5pct")}
        _log(f"[check] replay of {task.name} in {time.time() - t0:.0f} s: {metrics}")
        return metrics, np.array([p["score"] for p in rep.predictions])

    first = CachedPerStoreFeature()
    m_a, s_a = replay(first)
    m_b, s_b = replay(first)
    second = CachedPerStoreFeature()
    m_c, s_c = replay(second)

    # Every candidate of the pool, from both caches (the replays filled them).
    differ = []
    n = 0
    for t in pool:
        ctx = make_context(t.mod, t.target, args.seed + 1)
        cands = t.candidates()
        n += len(cands)
        for i, (x, y) in enumerate(zip(first.features(ctx, cands), second.features(ctx, cands))):
            if not np.array_equal(x, y):
                same = x.shape == y.shape and np.array_equal(canonical_rows(x), canonical_rows(y))
                differ.append({"task": t.name, "record": i, "equal_after_canonical_rows": bool(same)})
    out = {
        "what": __doc__.split("\n\n")[0],
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "task": task.name, "seed": args.seed, "pool_tasks": len(pool), "pool_candidates": n,
        "same_rows_twice": {"metrics": [m_a, m_b], "max_abs_score_difference": float(np.max(np.abs(s_a - s_b)))},
        "rows_extracted_again": {"metrics": [m_a, m_c],
                                 "max_abs_score_difference": float(np.max(np.abs(s_a - s_c)))},
        "candidates_whose_rows_differ": differ,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    _log(f"[check] same rows twice: scores differ by at most {out['same_rows_twice']['max_abs_score_difference']:.3g}; "
         f"rows extracted again: {out['rows_extracted_again']['max_abs_score_difference']:.3g}; "
         f"{len(differ)} of {n} candidates' rows differ, "
         f"{sum(d['equal_after_canonical_rows'] for d in differ)} of them equal after canonical_rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
