"""``tvm-latmodel tune`` and ``tvm-latmodel train``."""

from __future__ import annotations

import json
import sys

from ..workloads import DEFAULT_WORKLOAD


def add_parser(sub) -> None:
    p = sub.add_parser("tune", help="tune a workload on this CPU with MetaSchedule and a cost model",
                       description="Tune WORKLOAD with MetaSchedule's evolutionary search guided by the chosen "
                       "cost model; writes a MetaSchedule JSON database TVM can compile from.")
    p.add_argument("--workload", default=DEFAULT_WORKLOAD, help=f"FAMILY:IDX (default {DEFAULT_WORKLOAD}); see `workloads`")
    p.add_argument("--target", default=None, help="host (default) or an LLVM target JSON dict for this CPU")
    p.add_argument("--trials", type=int, default=32, help="measurement budget (default 32)")
    p.add_argument("--cost-model", default="hybrid", choices=("hybrid", "analytical", "xgb", "random"))
    p.add_argument("--pretrained", default=None, help="a model from `tvm-latmodel train` (hybrid only)")
    p.add_argument("--hardware", default=None, help="a HardwareSpec JSON from `calibrate`")
    p.add_argument("--work-dir", default=None, help="database directory (default work_dirs/WORKLOAD-MODEL)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stop-within", type=float, default=None,
                   help="stop when the best latency is within this fraction of the roofline bound (e.g. 0.5)")
    p.add_argument("--patience", type=int, default=None, help="stop after this many rounds without a 1%% gain")
    p.add_argument("--round-trials", type=int, default=16, help="trials per search round (default 16)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=_cmd_tune)

    p = sub.add_parser("train", help="pretrain the hybrid model's residual on tuning logs",
                       description="Fit the residual on every valid record of the given MetaSchedule databases "
                       "(directories or folders holding them) and save the model (JSON + XGBoost JSON).")
    p.add_argument("logs", nargs="+", help="tuning database directories or folders holding them")
    p.add_argument("-o", "--output", required=True, help="model file to write (JSON)")
    p.add_argument("--objective", default="reg:squarederror", choices=("reg:squarederror", "rank:pairwise"))
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_train)


def _cmd_tune(args) -> int:
    import logging

    from ..targets import parse_target
    from ..tuning import tune_workload
    from ..workloads import get_workload

    # MetaSchedule logs a table per round at INFO; our progress bar and
    # report replace it (its full logs still go to WORK_DIR/logs).
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)

    target = parse_target(args.target)
    mod = get_workload(args.workload)
    work_dir = args.work_dir or f"work_dirs/{args.workload.replace(':', '_')}-{args.cost_model}"
    report = tune_workload(mod, target, work_dir=work_dir, trials=args.trials, cost_model=args.cost_model,
                           seed=args.seed, pretrained=args.pretrained, hardware=args.hardware,
                           stop_within=args.stop_within, patience=args.patience, round_trials=args.round_trials,
                           workload_name=args.workload)
    if args.json:
        print(json.dumps(report.to_dict()))
        return 0 if report.best_latency_s is not None else 1
    print(f"workload        {report.workload} ({report.cost_model} cost model)")
    if report.best_latency_s is None:
        print(f"no valid measurement in {report.trials_measured} trials (all failed)")
        return 1
    print(f"best latency    {report.best_latency_s * 1e6:.1f} us  ({report.gflops:.2f} GFLOP/s)")
    print(f"roofline bound  {report.roofline_bound_s * 1e6:.1f} us  (best reaches {report.roofline_fraction:.1%} of it)")
    print(f"trials          {report.trials_measured} measured of {report.trials_budget} "
          f"({report.trials_failed} failed, {report.trials_saved} saved)")
    if report.stopped_early:
        print(f"stopped early   {report.stopped_early}")
    print(f"database        {report.work_dir}")
    print(f"wall time       {report.wall_s:.0f} s")
    return 0


def _cmd_train(args) -> int:
    from ..model.cost_model import HybridCostModel
    from ..replay import load_tasks
    from ..sampling import make_context

    tasks = load_tasks(args.logs, progress=True)
    families = {("gpu" if t.target.kind.name == "cuda" else "cpu") for t in tasks}
    if len(families) > 1:
        raise ValueError("the logs mix CPU and GPU targets; train one model per target family")
    model = HybridCostModel(target=tasks[0].target, objective=args.objective, seed=args.seed,
                            min_samples=10**9)  # fit once, at the end
    for t in tasks:
        print(f"[train] {t.name}: {len(t)} records", file=sys.stderr)
        model.update(make_context(t.mod, t.target), t.candidates(), t.results())
    if not model.X_:
        raise ValueError("no valid record to train on")
    model.min_samples = HybridCostModel().min_samples
    model.refit()
    model.save(args.output)
    print(f"trained the residual on {model.fitted_on_} records of {len(tasks)} tasks -> {args.output}")
    return 0
