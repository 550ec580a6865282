"""``tvm-latmodel tune`` and ``tvm-latmodel train``."""

from __future__ import annotations

import contextlib
import json
import os
import sys

from ..model.residual import DEFAULT_OBJECTIVE, OBJECTIVES
from ..workloads import DEFAULT_WORKLOAD


def add_parser(sub) -> None:
    p = sub.add_parser("tune", help="tune a workload on this CPU with MetaSchedule and a cost model",
                       description="Tune WORKLOAD with MetaSchedule's evolutionary search guided by the chosen "
                       "cost model; writes a MetaSchedule JSON database TVM can compile from.")
    p.add_argument("--workload", default=DEFAULT_WORKLOAD, help=f"FAMILY:IDX (default {DEFAULT_WORKLOAD}); see `workloads`")
    p.add_argument("--target", default=None, help="host (default) or an LLVM target JSON dict for this CPU")
    p.add_argument("--trials", type=int, default=32, help="measurement budget (default 32)")
    p.add_argument("--cost-model", default="hybrid",
                   choices=("hybrid", "analytical", "xgb", "xgb-nowarmup", "random"))
    p.add_argument("--pretrained", default="shipped",
                   help="the hybrid model's starting residual: 'shipped' (default, the residual shipped for "
                        "x86 CPUs), a model from `tvm-latmodel train`, or 'none'")
    p.add_argument("--hardware", default=None, help="a HardwareSpec JSON from `calibrate`")
    p.add_argument("--work-dir", default=None, help="database directory (default work_dirs/WORKLOAD-MODEL)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stop-within", type=float, default=None,
                   help="stop when the best latency is within this fraction of the roofline bound (e.g. 0.5)")
    p.add_argument("--patience", type=int, default=None, help="stop after this many rounds without a 1%% gain")
    p.add_argument("--round-trials", type=int, default=16, help="trials per search round (default 16)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--rpc", default=None, metavar="HOST:PORT:KEY",
                   help="run the candidates on the boards of this RPC tracker (builds stay here); "
                        "give the boards' spec with --hardware (see `calibrate --rpc`)")
    p.add_argument("--rpc-timeout", type=float, default=60.0, metavar="S",
                   help="with --rpc: longest wait for the tracker and a free board, and longest session "
                        "per candidate, in seconds (default 60)")
    p.add_argument("--verbose", action="store_true",
                   help="also show MetaSchedule's logs (a table per round) on stderr; they always go to "
                        "WORK_DIR/logs")
    p.set_defaults(func=_cmd_tune)

    p = sub.add_parser("train", help="pretrain the hybrid model's residual on tuning logs",
                       description="Fit the residual on every valid record of the given MetaSchedule databases "
                       "(directories or folders holding them) and save the model (JSON + XGBoost JSON).")
    p.add_argument("logs", nargs="+", help="tuning database directories or folders holding them")
    p.add_argument("-o", "--output", required=True, help="model file to write (JSON)")
    p.add_argument("--objective", default=DEFAULT_OBJECTIVE, choices=OBJECTIVES,
                   help=f"the residual's objective (default {DEFAULT_OBJECTIVE})")
    p.add_argument("--hardware", default=None, metavar="SPEC.json",
                   help="the spec of the machine that measured the logs (from `calibrate` there); default: "
                        "the hardware.json beside each log (record_logs.py writes one; logs of several machines "
                        "are each fitted with their own), else the logs' target's spec, which is this host's "
                        "only when they were measured on this kind of CPU")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_train)


#: The first word(s) of every line `tune` prints on stdout (the tests hold it to this).
SUMMARY_LABELS = ("workload", "measured on", "best latency", "roofline bound", "trials", "stopped early",
                  "fleet error", "database", "wall time", "no valid measurement")


@contextlib.contextmanager
def _stdout_to_stderr():
    """Send file descriptor 1 to stderr for the block (C++ logs and worker
    processes included), so that stdout holds only the results printed after."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _cmd_tune(args) -> int:
    tracker = None
    if args.rpc is not None:
        from ..rpc import parse_tracker

        tracker = parse_tracker(args.rpc)  # a malformed value fails before anything slow
        if args.rpc_timeout <= 0:
            raise ValueError(f"--rpc-timeout must be > 0, got {args.rpc_timeout}")
        from ..rpc import tracker_summary

        tracker_summary(tracker, timeout_s=min(args.rpc_timeout, 10.0))  # an unreachable tracker fails here

    from ..hardware import HardwareSpec
    from ..targets import parse_target
    from ..tuning import WorkDirLockedError, tune_workload
    from ..workloads import get_workload

    target = parse_target(args.target)
    mod = get_workload(args.workload)
    work_dir = args.work_dir or f"work_dirs/{args.workload.replace(':', '_')}-{args.cost_model}"
    if tracker is not None and args.hardware is None and target.kind.name == "llvm":
        hw = HardwareSpec.from_target(target)
        print(f"tvm-latmodel tune: no --hardware given; the model assumes the boards are {hw.name} "
              f"({hw.parallel_units} cores, {hw.vector_bits}-bit vectors: HardwareSpec.from_target of "
              f"mcpu={target.attrs.get('mcpu')}, num-cores={target.attrs.get('num-cores')}); run `tvm-latmodel calibrate --rpc {tracker} "
              "-o board.json` and pass --hardware board.json to use the boards' measured numbers",
              file=sys.stderr)
    try:
        with _stdout_to_stderr():
            report = tune_workload(mod, target, work_dir=work_dir, trials=args.trials, cost_model=args.cost_model,
                                   seed=args.seed, hardware=args.hardware,
                                   pretrained=None if args.pretrained.lower() == "none" else args.pretrained,
                                   stop_within=args.stop_within, patience=args.patience,
                                   round_trials=args.round_trials, workload_name=args.workload, rpc=tracker,
                                   rpc_timeout_s=args.rpc_timeout, verbose=args.verbose)
    except WorkDirLockedError as err:
        print(f"tvm-latmodel tune: error: {err}", file=sys.stderr)
        return 2
    failed = report.best_latency_s is None or report.fleet_error is not None
    if args.json:
        print(json.dumps(report.to_dict()))
        return 1 if failed else 0
    print(f"workload        {report.workload} ({report.cost_model} cost model)")
    if report.measured_on != "local":
        print(f"measured on     {report.measured_on}")
    if report.best_latency_s is None:
        print(f"no valid measurement in {report.trials_measured} trials (all failed)")
    else:
        print(f"best latency    {report.best_latency_s * 1e6:.1f} us  ({report.gflops:.2f} GFLOP/s)")
        print(f"roofline bound  {report.roofline_bound_s * 1e6:.1f} us  "
              f"(best reaches {report.roofline_fraction:.1%} of it)")
        print(f"trials          {report.trials_measured} measured of {report.trials_budget} "
              f"({report.trials_failed} failed, {report.trials_saved} saved)")
    if report.stopped_early:
        print(f"stopped early   {report.stopped_early}")
    if report.fleet_error:
        print(f"fleet error     {report.fleet_error}")
    print(f"database        {report.work_dir}")
    print(f"wall time       {report.wall_s:.0f} s")
    return 1 if failed else 0


def _cmd_train(args) -> int:
    from ..model.cost_model import train_on_tasks
    from ..replay import load_tasks

    model = train_on_tasks(load_tasks(args.logs, progress=True), hardware=args.hardware, objective=args.objective,
                           seed=args.seed)
    model.save(args.output)
    print(f"trained the residual on {model.fitted_on_} records of {len(set(model.groups_))} tasks -> {args.output}")
    return 0
