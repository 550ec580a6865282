"""Subcommands about one workload: ``workloads``, ``explain``, ``rank``."""

from __future__ import annotations

import argparse
import json
import sys

from ..workloads import DEFAULT_WORKLOAD


def add_parser(sub) -> None:
    p = sub.add_parser("workloads", help="list the workload names")
    p.set_defaults(func=_cmd_workloads)

    p = sub.add_parser(
        "explain",
        help="sample schedules of a workload and print every analytical term of each",
        description="Sample N schedules of WORKLOAD from MetaSchedule's default space, estimate "
        "them with the analytical model, rank them, and print every term of each so you can "
        "see why the model ranks it where it does.",
    )
    _common(p)
    p.add_argument("-n", "--num", type=int, default=8, help="schedules to sample (default 8)")
    p.add_argument("--show", type=int, default=3, help="schedules whose full terms are printed (default 3)")
    p.add_argument("--measure", action="store_true", help="also build and run them on this CPU (llvm only)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=_cmd_explain)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", default=DEFAULT_WORKLOAD, help=f"FAMILY:IDX (default {DEFAULT_WORKLOAD}); see `workloads`")
    p.add_argument("--target", default=None, help="host (default), a GPU preset (h200, a100, ...) or a target JSON dict")
    p.add_argument("--hardware", default=None, help="a HardwareSpec JSON (from `calibrate`) instead of the defaults")
    p.add_argument("--seed", type=int, default=0)


def _cmd_workloads(args) -> int:
    from ..workloads import list_workloads

    for name in list_workloads():
        print(name)
    return 0


def _cmd_explain(args) -> int:
    from ..hardware import load_hardware
    from ..model.modes import estimate, task_bound_s
    from ..model.program import summarize
    from ..sampling import sample_schedules
    from ..targets import parse_target
    from ..workloads import get_workload

    target = parse_target(args.target)
    hw = load_hardware(target, args.hardware)
    kind = "gpu" if hw.kind == "gpu" else "cpu"
    mod = get_workload(args.workload)
    print(f"[explain] sampling {args.num} schedules of {args.workload} for {hw.name}", file=sys.stderr)
    schedules = sample_schedules(mod, target, args.num, seed=args.seed)
    if not schedules:
        raise ValueError(f"MetaSchedule produced no valid schedule of {args.workload} for this target")
    ests = [estimate(summarize(s.mod, kind), hw) for s in schedules]
    measured = [None] * len(schedules)
    if args.measure:
        from ..measure import measure_schedules

        measured = measure_schedules(schedules, target)
    order = sorted(range(len(ests)), key=lambda i: ests[i].latency_s)
    if args.json:
        out = {"workload": args.workload, "hardware": hw.name, "schedules": [
            {"rank": r, "sample": i, "estimate_s": ests[i].latency_s, "measured_s": measured[i],
             "terms": ests[i].terms(), "regions": [vars(x) for x in ests[i].regions]}
            for r, i in enumerate(order)]}
        if args.measure:
            out["spearman"] = _spearman(ests, measured)
        print(json.dumps(out, default=float))
        return 0
    flops = ests[0].flops
    print(f"workload {args.workload}: {flops / 1e6:.1f} MFLOP on {hw.name} ({hw.source})")
    print(f"roofline bound: {task_bound_s(mod, hw) * 1e6:.1f} us")
    head = f"{'rank':>4} {'sample':>6} {'estimate_us':>11} {'measured_us':>11} {'waves':>6} {'wave_eff':>8} {'lanes':>6} {'pad':>5} bound"
    print(head)
    for r, i in enumerate(order):
        e = ests[i]
        t = e.terms()
        dom = max(e.regions, key=lambda x: x.latency_s)
        m = f"{measured[i] * 1e6:11.1f}" if measured[i] is not None else f"{'-':>11}"
        print(f"{r:>4} {i:>6} {e.latency_s * 1e6:11.1f} {m} {int(t['waves']):>6} {t['wave_efficiency']:8.2f} "
              f"{t['lane_efficiency']:6.2f} {t['padded_work_ratio']:5.2f} {dom.bound}")
    for i in order[: args.show]:
        print()
        print(format_estimate(ests[i], title=f"sample {i}"))
    if args.measure:
        print(f"\nSpearman(estimate, measured) = {_spearman(ests, measured):.3f}")
    return 0


def format_estimate(est, title: str = "") -> str:
    """Every term of an estimate, one region per paragraph."""
    lines = [f"== {title}: estimate {est.latency_s * 1e6:.2f} us "
             f"(this schedule's roofline bound {est.roofline_bound_s * 1e6:.2f} us, {est.flops / 1e6:.2f} MFLOP)"]
    for r in est.regions:
        name = "serial region" if r.index < 0 else f"region {r.index}"
        lines.append(f"  {name}: latency = overhead {r.overhead_s * 1e6:.2f} us + waves {r.waves} x unit {r.unit_s * 1e6:.3f} us"
                     f" = {r.latency_s * 1e6:.2f} us")
        lines.append(f"    wave quantization: units {r.units}, concurrent {r.concurrent_units}, "
                     f"waves = ceil({r.units}/{r.concurrent_units}) = {r.waves}, efficiency {r.wave_efficiency:.3f}")
        lines.append(f"    lane efficiency {r.lane_efficiency:.3f}; padded work ratio {r.padded_work_ratio:.3f}")
        lines.append(f"    per unit: {r.flops_per_unit / 1e3:.1f} kFLOP, compute {r.compute_s * 1e6:.3f} us, "
                     f"memory {r.memory_s * 1e6:.3f} us -> {r.bound}")
        if r.bytes_per_unit:
            parts = ", ".join(f"{k} {v / 1024:.1f} KiB" for k, v in r.bytes_per_unit.items())
            lines.append(f"    bytes per unit served by: {parts}")
        if r.occupancy:
            lines.append("    occupancy: " + ", ".join(f"{k} {v}" for k, v in r.occupancy.items()))
    return "\n".join(lines)


def _spearman(ests, measured) -> float:
    """Spearman of the estimates' ranking with the measured latencies (NaN below 3 pairs)."""
    from ..replay.metrics import spearman

    pairs = [(e.latency_s, m) for e, m in zip(ests, measured) if m is not None]
    if len(pairs) < 3:
        return float("nan")
    return spearman([-p[0] for p in pairs], [p[1] for p in pairs])
