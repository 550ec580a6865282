#!/usr/bin/env python3
"""Sampled schedules of a fused group: which compute something else, and does the static
pattern of TVM 0.27's ``decompose_reduction`` bug (:func:`tvm_latmodel.schedule_checks.repeated_reductions`)
say which?

Samples ``--samples`` schedules (MetaSchedule's design space, as the planner
does) of one pattern group of a network, runs each with poisoned
intermediates against the group's loop nest (``check_kernel``), and records
the static finding next to the run's verdict. ``--space default`` samples
MetaSchedule's own space; ``--space checked`` (what the package samples and
tunes with) adds :class:`tvm_latmodel.schedule_checks.RejectRepeatedReductions`.

    python scripts/audit_repeated_reductions.py --network mmimdb --pattern attention \\
        --option image_size=16 --option seq_len=8 --option width=32 --option layers=1 --option hidden=32 \\
        --samples 32 --space default --out benchmarks/repeated_reductions/mmimdb_tiny_attention_default.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", default="mmimdb")
    ap.add_argument("--pattern", default="attention")
    ap.add_argument("--option", action="append", default=[], help="network option KEY=VALUE")
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--space", choices=["default", "checked"], default="default",
                    help="MetaSchedule's design space, or the package's (default: MetaSchedule's)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from tvm.s_tir import meta_schedule as ms

    from tvm_latmodel.fusion import FusionPlanner
    from tvm_latmodel.fusion.planner import fuse_group
    from tvm_latmodel.networks import get_network
    from tvm_latmodel.networks.kernels import check_kernel, run_kernel
    from tvm_latmodel.sampling import make_context, sample_schedules
    from tvm_latmodel.schedule_checks import repeated_reductions
    from tvm_latmodel.targets import host_target

    target = host_target()
    options = dict(o.split("=", 1) for o in args.option)
    network = get_network(args.network, **{k: _value(v) for k, v in options.items()})
    planner = FusionPlanner(target, samples=1, seed=args.seed)
    _, module, _, groups, _ = planner.partition(network)
    group = next(g for g in groups if g.pattern == args.pattern)
    fused = fuse_group(module, group)
    _, reference = run_kernel(fused, target, number=1, min_repeat_ms=0)
    rows = []
    start = time.time()
    context = make_context(fused, target, args.seed + 1)  # as sample_schedules makes it
    if args.space == "default":
        context = ms.TuneContext(fused, target=target, space_generator="post-order-apply",
                                 search_strategy="evolutionary", task_name="main",
                                 rand_state=max(1, args.seed + 1), num_threads=1)
    for n, sch in enumerate(sample_schedules(fused, target, args.samples, seed=args.seed, context=context)):
        ok, error = check_kernel(sch.mod, target, reference)
        found = repeated_reductions(sch.mod["main"])
        rows.append({"sample": n, "correct": ok, "max_abs_error": None if error == float("inf") else error,
                     "repeated_reductions": [list(f) for f in found]})
        print(f"[audit] sample {n}: {'correct' if ok else 'WRONG'} (max |error| {error:.3g}); "
              f"repeated reductions: {found or 'none'}", file=sys.stderr, flush=True)
    wrong = [r for r in rows if not r["correct"]]
    flagged = [r for r in rows if r["repeated_reductions"]]
    summary = {
        "network": args.network, "options": options, "pattern": args.pattern, "space": args.space,
        "target": str(target),
        "samples": len(rows), "seed": args.seed, "wrong": len(wrong), "flagged": len(flagged),
        "wrong_and_flagged": sum(1 for r in wrong if r["repeated_reductions"]),
        "flagged_but_correct": sum(1 for r in flagged if r["correct"]), "seconds": time.time() - start,
        "rows": rows,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
