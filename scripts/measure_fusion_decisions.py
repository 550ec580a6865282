#!/usr/bin/env python3
"""Predicted against measured gain of every fusion decision of the planner.

For each network, ``FusionPlanner`` (hybrid model, best of ``--samples``
sampled schedules per PrimFunc) predicts each pattern group fused and split
and decides. This script then *measures* both forms on this CPU: the fused
PrimFunc and each of the split form's kernels are tuned with MetaSchedule and
the hybrid model, ``--trials`` trials per PrimFunc (so both forms get the
same search per kernel), and compared by their best measured latencies:

    measured gain = sum(best of each split kernel) - best of the fused kernel

Each form's latency is that of its best schedule whose outputs match the
untuned loop nest's on the same random inputs, with its intermediate buffers
poisoned (``best_correct``, :func:`~tvm_latmodel.networks.kernels.check_kernel`): MetaSchedule
does not check what a schedule computes, and TVM 0.27 produces wrong
schedules of some fused kernels. ``--verify-existing`` applies this check to
decisions measured (or verified by an older check) before it existed.

A decision is right when its sign matches the measured gain's (fuse when
fusing measured faster, split otherwise). Each decision's JSON is written to
``OUT/decisions/`` as soon as it is measured, so a stopped run resumes;
``OUT/summary.md`` (table and accuracy) and ``OUT/gains.png`` (predicted
against measured gain) are rewritten after each one.

Caveats: the split form's kernels are timed one by one, each on its own
warm inputs, as MetaSchedule times any kernel; the time a real network spends
writing and re-reading the intermediate tensor between them is only counted
as far as each kernel's own loads and stores count it.

    nice -n 5 python scripts/measure_fusion_decisions.py --networks avmnist mmimdb transfuser --trials 16
    python scripts/measure_fusion_decisions.py --networks transfuser --groups attention1 --predict-only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def _tune(mod, target, work_dir: str, trials: int, seed: int, label: str) -> dict:
    from tvm_latmodel.tuning import tune_workload

    report = tune_workload(mod, target, work_dir=work_dir, trials=trials, cost_model="hybrid", seed=seed,
                           workload_name=label, progress=True)
    return {"best_s": report.best_latency_s, "trials_measured": report.trials_measured,
            "trials_failed": report.trials_failed, "wall_s": report.wall_s}


def _write_record(record: dict, path: str) -> None:
    """Write one decision's JSON atomically (a stopped run never leaves half a file)."""
    from tvm_latmodel.fileformat import write_json

    write_json(path, record, indent=1)


#: How ``best_correct`` checks a schedule; decisions verified otherwise are verified again.
CHECK = "intermediates poisoned (NaN, then 1e30)"


def checked_records(work_dir: str, target):
    """A tuning database's records, fastest measured first: (seconds, matches, max |error|) each.

    MetaSchedule times a schedule without checking what it computes. TVM 0.27
    can produce wrong schedules of fused kernels (seen on fused conv -> conv:
    ``reverse_compute_at`` of the second conv's padding leaves its border
    unwritten, so it reads uninitialized memory). Each record runs with its
    intermediates poisoned against the untuned loop nest
    (:func:`tvm_latmodel.networks.kernels.check_kernel`), lazily, as consumed.
    """
    import numpy as np

    from tvm_latmodel.networks.kernels import check_kernel, run_kernel
    from tvm_latmodel.replay import load_database

    (task,) = load_database(work_dir)
    _, reference = run_kernel(task.mod, target, number=1, min_repeat_ms=1)
    for i in np.argsort(task.latencies_s):
        ok, error = check_kernel(task.records[i].schedule.mod, target, reference)
        yield float(task.latencies_s[i]), ok, error


def best_correct(work_dir: str, target) -> dict:
    """The fastest record of a tuning database whose outputs match the untuned loop nest's
    (:func:`checked_records`, checked until one matches)."""
    wrong = []
    for latency_s, ok, error in checked_records(work_dir, target):
        if ok:
            return {"best_correct_s": latency_s, "wrong_faster": wrong}
        wrong.append({"latency_s": latency_s, "max_abs_error": error})
    return {"best_correct_s": None, "wrong_faster": wrong}


def apply_verification(record: dict, work: str, target) -> None:
    """Measured gain from each form's best correct schedule (the raw best kept as ``measured_*_raw_us``)."""
    fused = best_correct(os.path.join(work, "fused"), target)
    split = [best_correct(os.path.join(work, f"split{i}"), target) for i in range(len(record["split"]))]
    record["verified"] = {"fused_wrong_faster": len(fused["wrong_faster"]),
                          "split_wrong_faster": [len(s["wrong_faster"]) for s in split], "check": CHECK}
    record.pop("failed", None)
    if "measured_fused_us" in record and "measured_fused_raw_us" not in record:
        record["measured_fused_raw_us"] = record["measured_fused_us"]
        record["measured_split_raw_us"] = record["measured_split_us"]
    if fused["best_correct_s"] is None or any(s["best_correct_s"] is None for s in split):
        record["failed"] = "a form has no schedule whose output matches its untuned loop nest"
        for key in ("measured_fused_us", "measured_split_us", "measured_gain_us", "measured_decision", "correct"):
            record.pop(key, None)
        return
    split_s = sum(s["best_correct_s"] for s in split)
    record["measured_fused_us"] = fused["best_correct_s"] * 1e6
    record["measured_split_us"] = split_s * 1e6
    record["measured_gain_us"] = (split_s - fused["best_correct_s"]) * 1e6
    record["measured_decision"] = "fuse" if split_s > fused["best_correct_s"] else "split"
    record["correct"] = record["measured_decision"] == record["decision"]


def audit(out: str, target, say) -> dict:
    """Check *every* fused record of each measured decision (not just until the first correct one);
    writes ``OUT/audit.json``: per group, how many fused records there are and how many are wrong."""
    result = {}
    for name in sorted(os.listdir(os.path.join(out, "decisions"))):
        with open(os.path.join(out, "decisions", name)) as f:
            record = json.load(f)
        work = os.path.join(out, "work_dirs", f"{record['network']}-{_slug(record['group'])}", "fused")
        if not os.path.isdir(work):
            continue
        checks = [ok for _, ok, _ in checked_records(work, target)]
        key = f"{record['network']} {record['group']}"
        result[key] = {"fused_records": len(checks), "wrong": checks.count(False), "check": CHECK}
        say(f"[audit] {key}: {checks.count(False)} of {len(checks)} fused records wrong")
    with open(os.path.join(out, "audit.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


def verify_existing(out: str, target, say) -> None:
    """Verify the decisions already measured under OUT (their databases in OUT/work_dirs)."""
    folder = os.path.join(out, "decisions")
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        with open(path) as f:
            record = json.load(f)
        if record.get("verified", {}).get("check") == CHECK or "split" not in record:
            continue
        work = os.path.join(out, "work_dirs", f"{record['network']}-{_slug(record['group'])}")
        apply_verification(record, work, target)
        _write_record(record, path)
        say(f"[decisions] verified {record['network']} {record['group']}: wrong schedules faster than the best "
            f"correct one: fused {record['verified']['fused_wrong_faster']}, split "
            f"{record['verified']['split_wrong_faster']}")


def measure_network(name: str, args, out: str) -> None:
    from tvm_latmodel.fusion import FusionPlanner
    from tvm_latmodel.fusion.planner import _task_mod, fuse_group
    from tvm_latmodel.networks import get_network
    from tvm_latmodel.targets import host_target

    target = host_target()
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    planner = FusionPlanner(target, samples=args.samples, seed=args.seed, progress=say)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = planner.plan(get_network(name, seed=args.seed))
    groups = [g for g in plan.groups if g.match is not None]
    if args.groups:
        groups = [g for g in groups if g.name.split(":")[0] in args.groups]
    groups = groups[: args.max_groups]
    if args.predict_only:
        path = os.path.join(out, "predictions", f"{name}-s{args.seed}.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump([{"network": name, "group": g.name, "decision": g.decision, "predicted_us": g.predicted_us,
                        "unfused_predicted_us": g.unfused_predicted_us, "predicted_gain_us": g.predicted_gain}
                       for g in groups], f, indent=1)
        say(f"[decisions] {name}: {len(groups)} predictions -> {path}")
        return
    say(f"[decisions] {name}: {len(groups)} pattern groups to measure")
    for g in groups:
        path = os.path.join(out, "decisions", f"{name}-{_slug(g.name)}-t{args.trials}-s{args.seed}.json")
        if os.path.exists(path):
            continue
        record = {"network": name, "group": g.name, "source": g.source, "stage": g.stage, "ops": g.ops,
                  "decision": g.decision, "predicted_us": g.predicted_us,
                  "unfused_predicted_us": g.unfused_predicted_us, "predicted_gain_us": g.predicted_gain,
                  "dram_bytes_saved": g.dram_bytes_saved, "trials_per_kernel": args.trials, "seed": args.seed,
                  "planner_note": g.note}
        work = os.path.join(out, "work_dirs", f"{name}-{_slug(g.name)}")
        start = time.time()
        try:
            fused_mod = fuse_group(plan.module, g.match)
            fused = _tune(fused_mod, target, os.path.join(work, "fused"), args.trials, args.seed, f"{g.name} fused")
            split = [_tune(_task_mod(plan.module[k.prim_func]), target, os.path.join(work, f"split{i}"),
                           args.trials, args.seed, f"{g.name} split {k.prim_func}")
                     for i, k in enumerate(g.match.kernels)]
        except Exception as err:  # noqa: BLE001 - one group failing must not stop the benchmark
            record["failed"] = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
        else:
            record["fused"] = fused
            record["split"] = split
            if fused["best_s"] is not None and all(s["best_s"] is not None for s in split):
                apply_verification(record, work, target)
            else:
                record["failed"] = "a form had no valid measurement"
        record["wall_s"] = time.time() - start
        _write_record(record, path)
        say(f"[decisions] {name} {g.name}: predicted {g.predicted_gain:+.1f} us ({g.decision}), "
            f"measured {record.get('measured_gain_us', float('nan')):+.1f} us "
            f"({record.get('measured_decision', record.get('failed'))})")
        write_summary(out)


def write_summary(out: str) -> str:
    folder = os.path.join(out, "decisions")
    records = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                records.append(json.load(f))
    done = [r for r in records if "correct" in r]
    lines = ["| network | group | stage | predicted fused / split (us) | measured fused / split (us) "
             "| predicted gain (us) | measured gain (us) | decision | measured | right |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if "correct" not in r:
            lines.append(f"| {r['network']} | {r['group']} | {r['stage']} | {r['predicted_us']:.1f} / "
                         f"{r['unfused_predicted_us']:.1f} | failed: {r.get('failed', '')} | "
                         f"{r['predicted_gain_us']:+.1f} | – | {r['decision']} | – | – |")
            continue
        v = r.get("verified", {})
        wrong = v.get("fused_wrong_faster", 0) + sum(v.get("split_wrong_faster", []))
        raw = (f" (raw {r['measured_fused_raw_us']:.1f} / {r['measured_split_raw_us']:.1f}, {wrong} wrong faster)"
               if wrong else "")
        lines.append(f"| {r['network']} | {r['group']} | {r['stage']} | {r['predicted_us']:.1f} / "
                     f"{r['unfused_predicted_us']:.1f} | {r['measured_fused_us']:.1f} / {r['measured_split_us']:.1f}"
                     f"{raw} | {r['predicted_gain_us']:+.1f} | {r['measured_gain_us']:+.1f} | {r['decision']} "
                     f"| {r['measured_decision']} | {'yes' if r['correct'] else 'no'} |")
    right = sum(r["correct"] for r in done)
    lines.append("")
    lines.append(f"Decisions right: {right} of {len(done)}" + (f" ({right / len(done):.0%})" if done else "")
                 + f"; {len(records) - len(done)} failed to measure. Measured latencies are each form's best "
                 "schedule whose outputs match its untuned loop nest's, with its intermediates poisoned (`raw`: "
                 "the best measured, when a wrong "
                 "schedule was faster).")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    if done:
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError:
            return text
        fig = Figure(figsize=(5, 4), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        for r in done:
            ax.scatter(r["predicted_gain_us"], r["measured_gain_us"], color="tab:green" if r["correct"] else "tab:red")
            ax.annotate(f"{r['network']}:{r['group'].split(':')[0]}", (r["predicted_gain_us"], r["measured_gain_us"]),
                        fontsize=6)
        ax.axhline(0, color="grey", lw=0.5)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_xscale("symlog")
        ax.set_yscale("symlog")
        ax.set_xlabel("predicted gain of fusing (us)")
        ax.set_ylabel("measured gain of fusing (us)")
        ax.set_title(f"fusion decisions: {right}/{len(done)} right (green)")
        fig.savefig(os.path.join(out, "gains.png"), dpi=90)
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--networks", nargs="+", default=["avmnist", "mmimdb", "transfuser", "mobilenetv2"])
    ap.add_argument("--trials", type=int, default=16, help="trials per PrimFunc, fused and each split kernel alike")
    ap.add_argument("--samples", type=int, default=8, help="the planner's sampled schedules per PrimFunc")
    ap.add_argument("--max-groups", type=int, default=None, help="measure at most this many groups per network")
    ap.add_argument("--groups", nargs="*", default=None,
                    help="only these groups, by name before the colon (e.g. attention1 conv_conv4)")
    ap.add_argument("--predict-only", action="store_true",
                    help="write the planner's predictions to OUT/predictions/ and measure nothing (commit "
                         "them before measuring)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/fusion_decisions")
    ap.add_argument("--report-only", action="store_true", help="rewrite summary.md and gains.png only")
    ap.add_argument("--audit", action="store_true",
                    help="check every fused record of the decisions under OUT and write OUT/audit.json")
    ap.add_argument("--verify-existing", action="store_true",
                    help="check the decisions already measured: each form's best schedule must compute what its "
                         "untuned loop nest computes (the gain is recomputed from the best correct ones)")
    args = ap.parse_args()
    if args.trials < 1:
        ap.error("--trials must be at least 1")
    from tvm_latmodel.networks import list_networks

    unknown = [n for n in args.networks if n not in list_networks()]
    if unknown:
        ap.error(f"unknown network(s) {', '.join(unknown)}; known: {', '.join(list_networks())}")
    os.makedirs(args.out, exist_ok=True)
    if args.audit:
        from tvm_latmodel.targets import host_target

        audit(args.out, host_target(), lambda text: print(text, file=sys.stderr, flush=True))
        return 0
    if args.verify_existing:
        from tvm_latmodel.targets import host_target

        verify_existing(args.out, host_target(), lambda text: print(text, file=sys.stderr, flush=True))
    elif not args.report_only:
        for name in args.networks:
            measure_network(name, args, args.out)
    if args.predict_only:
        return 0
    print(write_summary(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
