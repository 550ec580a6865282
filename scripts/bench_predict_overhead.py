#!/usr/bin/env python3
"""Prediction overhead: HybridCostModel (shipped pretrained residual, refitted
on the task) versus TVM's XGBModel(num_warmup_samples=0), both updated with
the same measured results, timed side by side in one process on the same
candidates, interleaved (A B A B ...).

    nice -n 5 python3 scripts/bench_predict_overhead.py \
        --workloads GMM:1 DEP:0 C2D:1 -n 2048 --repeats 5 --out benchmarks/predict_overhead.json

Per workload:

1. The context is built as ``ms.tune_tir`` builds it (post-order-apply space,
   evolutionary search, ``num_threads="physical"``): that is the context a
   cost model sees in a search, and the thread count TVM's ``PerStoreFeature``
   (used by both models) extracts with.
2. ``-n`` candidates are drawn from MetaSchedule's design space
   (``sampling.sample_schedules``) and deduplicated by structural hash; the
   count kept is reported.
3. Both models are updated with the first ``--shots`` valid records (file
   order) of the workload's log in ``tuning_logs/cpu/`` (real measurements
   of this project's CPU); a workload without a log gets synthetic latencies
   (analytical x log-normal noise) and is marked so. One untimed predict on
   those records then lets the hybrid do its lazy refit, so no fit is timed.
4. Timings:

   * ``cold``: one predict on all candidates, nothing of them cached (the
     hybrid's feature/estimate caches are reset to their state after the
     update before every repeat; XGBModel caches nothing).
   * ``warm``: the same predict again, everything cached (the hybrid's
     best case), against XGBModel's cold time of the same repeat (it caches
     nothing, so a second predict costs it the same).
   * ``search_round``: the predict calls of one real round of TVM 0.27's
     EvolutionarySearch (population 512, 4 genetic iterations: 5 calls of
     512; the first population holds the database's measured records and
     fresh random samples, later ones about 15% unmutated survivors and 85%
     fresh mutants). The round is run once with the hybrid driving it and a
     recorder in between; the recorded calls are then replayed in order
     against both models, the hybrid's caches reset to their post-update
     state before each replay (so repeats within the round hit its cache
     as in a real search).

   Every timing is repeated ``--repeats`` times, interleaved; the report
   gives the median wall time, the range and the ratio hybrid / XGBModel
   (ratio of medians, and the range of the per-repeat paired ratios). The
   JSON also keeps the process CPU time of each timing (all threads): on a
   machine whose cores are busy with other work, wall time follows CPU time.

The JSON counts the candidates whose hybrid score differed between cold
repeats (0 since stop 19: TVM's PerStoreFeature orders two tied buffers
either way on a few candidates of some workloads, e.g. DEP:0, and the
hybrid puts them in a canonical order).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections import OrderedDict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

LOG_ROOT = os.path.join(os.path.dirname(__file__), "..", "tuning_logs", "cpu")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _search_context(mod, target, seed: int):
    from tvm.s_tir import meta_schedule as ms

    # What ms.tune_tir gives the cost model (tir_integration.py): default
    # num_tuning_cores="physical".
    return ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                          search_strategy="evolutionary", task_name="main",
                          rand_state=max(1, seed), num_threads="physical").clone()


def _cache_state():
    from tvm_latmodel.model import cost_model as cm
    from tvm_latmodel.model.features import shared_extractor

    return cm._ESTIMATES, shared_extractor().cache_


def _snapshot():
    return [OrderedDict(c.data) for c in _cache_state()]


def _restore(snap) -> None:
    for cache, data in zip(_cache_state(), snap):
        cache.data = OrderedDict(data)


def _recorder_class():
    import tvm
    from tvm.s_tir import meta_schedule as ms

    @tvm.ir.utils.derived_object
    class Recorder(ms.cost_model.PyCostModel):
        """Passes predict to ``inner`` and keeps each call's candidates."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.calls: list[list] = []

        def load(self, path):  # pragma: no cover - unused
            pass

        def save(self, path):  # pragma: no cover - unused
            pass

        def update(self, context, candidates, results):
            self.inner.update(context, candidates, results)

        def predict(self, context, candidates):
            cands = list(candidates)
            self.calls.append(cands)
            return self.inner.predict(context, cands)

    return Recorder


def _summary(ts: list[tuple[float, float]]) -> dict:
    xs = [w for w, _ in ts]
    return {"median_s": statistics.median(xs), "min_s": min(xs), "max_s": max(xs), "all_s": xs,
            "cpu_median_s": statistics.median(c for _, c in ts), "cpu_all_s": [c for _, c in ts]}


def _compare(times_h: list[tuple[float, float]], times_x: list[tuple[float, float]]) -> dict:
    h, x = _summary(times_h), _summary(times_x)
    paired = [a / b for a, b in zip(h["all_s"], x["all_s"])]
    return {"hybrid": h, "xgb": x, "ratio": h["median_s"] / x["median_s"],
            "paired_ratio_min": min(paired), "paired_ratio_max": max(paired),
            "cpu_ratio": h["cpu_median_s"] / x["cpu_median_s"]}


def bench_workload(name: str, n: int, shots: int, repeats: int, seed: int, search: bool) -> dict:
    import numpy as np
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    from tvm_latmodel.model.cost_model import HybridCostModel
    from tvm_latmodel.replay.logs import load_database
    from tvm_latmodel.sampling import sample_schedules
    from tvm_latmodel.targets import host_target
    from tvm_latmodel.workloads import get_workload

    target = host_target()
    log_dir = os.path.join(LOG_ROOT, name.replace(":", "_"))
    task = None
    if os.path.isdir(log_dir):
        task = load_database(log_dir)[0]
        mod = task.mod
    else:
        mod = get_workload(name)
    ctx = _search_context(mod, target, seed + 1)

    t0 = time.perf_counter()
    schs = sample_schedules(mod, target, n, seed=seed, context=ctx)
    seen, cands = set(), []
    for s in schs:
        h = int(tvm_ffi.structural_hash(s.mod))
        if h not in seen:
            seen.add(h)
            cands.append(ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(s.mod["main"])))
    _log(f"[{name}] drew {len(schs)}, kept {len(cands)} distinct in {time.perf_counter() - t0:.0f} s")

    hybrid = HybridCostModel()
    xgb = ms.cost_model.XGBModel(num_warmup_samples=0)
    if task is not None:
        upd_c, upd_r = task.candidates()[:shots], task.results()[:shots]
        update_source = f"{os.path.relpath(log_dir)}: first {len(upd_c)} valid records"
    else:
        upd_c = cands[-shots:]
        rng = np.random.default_rng(seed)
        lat = HybridCostModel(residual=False).predict_latency_s(ctx, upd_c) * np.exp(rng.normal(0, 0.5, len(upd_c)))
        upd_r = [ms.runner.RunnerResult(run_secs=[float(x)], error_msg=None) for x in lat]
        update_source = f"no log: {len(upd_c)} sampled candidates with synthetic latencies"
    hybrid.update(ctx, upd_c, upd_r)
    xgb.update(ctx, upd_c, upd_r)
    hybrid.predict(ctx, upd_c)  # the lazy refit happens here, untimed
    xgb.predict(ctx, upd_c)
    base = _snapshot()

    def timed(fn):
        """((wall s, process CPU s), fn())"""
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        return (time.perf_counter() - t, time.process_time() - c), out

    cold_h, cold_x, warm_h = [], [], []
    ref, changed = None, 0
    for _ in range(repeats):
        _restore(base)
        dt, scores = timed(lambda: hybrid.predict(ctx, cands))
        cold_h.append(dt)
        if ref is None:
            ref = scores
        else:
            # Must stay 0: the hybrid puts PerStoreFeature's tied buffer
            # slots (DEP:0) in a canonical order.
            changed = max(changed, int(np.sum(ref != scores)))
        cold_x.append(timed(lambda: xgb.predict(ctx, cands))[0])
        warm_h.append(timed(lambda: hybrid.predict(ctx, cands))[0])
        _log(f"[{name}] cold hybrid {cold_h[-1][0]:.2f} s xgb {cold_x[-1][0]:.2f} s; "
             f"warm hybrid {warm_h[-1][0]:.2f} s")
    out = {"workload": name, "candidates_drawn": len(schs), "candidates": len(cands),
           "update": update_source, "scores_sha": _digest(ref), "scores_changed_between_repeats": changed,
           "cold": _compare(cold_h, cold_x),
           # XGBModel caches nothing: its second predict costs what its first does
           "warm": _compare(warm_h, cold_x)}

    if search:
        _restore(base)
        db = ms.database.MemoryDatabase()
        wl = db.commit_workload(mod)
        for c, r in zip(upd_c, upd_r):
            db.commit_tuning_record(ms.database.TuningRecord(c.sch.trace, wl, [float(s) for s in r.run_secs],
                                                             target, c.args_info))
        rec = _recorder_class()(hybrid)
        ctx.pre_tuning(max_trials=2 * 64, num_trials_per_iter=64, design_spaces=ctx.generate_design_space(),
                       database=db, cost_model=rec)
        picks = ctx.generate_measure_candidates()
        ctx.post_tuning()
        calls = rec.calls
        total = sum(len(c) for c in calls)
        distinct = len({int(tvm_ffi.structural_hash(c.sch.mod)) for call in calls for c in call})
        _log(f"[{name}] search round: {len(calls)} predict calls, {total} candidates, {distinct} distinct, "
             f"{len(picks or [])} picks")

        def round_(model):
            for call in calls:
                model.predict(ctx, call)

        sr_h, sr_x = [], []
        for _ in range(repeats):
            _restore(base)
            sr_h.append(timed(lambda: round_(hybrid))[0])
            sr_x.append(timed(lambda: round_(xgb))[0])
            _log(f"[{name}] search round hybrid {sr_h[-1][0]:.2f} s xgb {sr_x[-1][0]:.2f} s")
        out["search_round"] = {"predict_calls": [len(c) for c in calls], "candidates": total,
                               "distinct": distinct, **_compare(sr_h, sr_x)}
    _restore(base)
    return out


def _digest(scores) -> str:
    import hashlib

    return hashlib.sha256(scores.astype("float64").tobytes()).hexdigest()[:16]


def _fmt(d: dict) -> str:
    return f"{d['median_s']:.2f} ({d['min_s']:.2f}-{d['max_s']:.2f})"


def table(results: list[dict]) -> str:
    lines = ["| workload | timing | candidates | hybrid s, median (range) | XGBModel s, median (range) "
             "| ratio hybrid/XGB (paired range) | CPU-time ratio |", "|---|---|---|---|---|---|---|"]
    for r in results:
        for kind in ("cold", "search_round", "warm"):
            if kind not in r:
                continue
            c = r[kind]
            count = (f"{c['candidates']} in {len(c['predict_calls'])} calls ({c['distinct']} distinct)"
                     if kind == "search_round" else str(r["candidates"]))
            lines.append(f"| {r['workload']} | {kind} | {count} | {_fmt(c['hybrid'])} | {_fmt(c['xgb'])} "
                         f"| **{c['ratio']:.2f}x** ({c['paired_ratio_min']:.2f}-{c['paired_ratio_max']:.2f}) "
                         f"| {c['cpu_ratio']:.2f}x |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", nargs="+", default=["GMM:1", "DEP:0", "C2D:1"])
    ap.add_argument("-n", type=int, default=2048, help="candidates to draw per workload")
    ap.add_argument("--shots", type=int, default=64, help="measured results both models are updated with")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-search", action="store_true", help="skip the evolutionary-search round")
    ap.add_argument("--out", default="benchmarks/predict_overhead.json")
    ap.add_argument("--note", default="", help="free text kept in the JSON (what code was measured)")
    args = ap.parse_args()

    import tvm

    from tvm_latmodel.targets import host_target

    _log(f"[bench] this machine's target: {host_target()}")
    results = [bench_workload(w, args.n, args.shots, args.repeats, args.seed, not args.no_search)
               for w in args.workloads]
    doc = {"command": "python3 " + " ".join(sys.argv), "target": str(host_target()),
           "tvm": tvm.__version__, "machine": platform.processor() or platform.machine(),
           "cpus": os.cpu_count(), "repeats": args.repeats,
           "note": "interleaved repeats in one process; only ratios are meaningful on a shared machine. "
           + args.note,
           "results": results}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
