"""Subcommand ``tune-network``: plan, tune, compile, run and check a whole network."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings

from ..model.registry import MODEL_NAMES


def add_parser(sub) -> None:
    p = sub.add_parser(
        "tune-network",
        help="tune a whole network on this CPU and report its latency per stage",
        description="Fuse NETWORK (TVM's default groups, or the fusion planner's decisions with "
        "--plan predicted), tune its kernels with MetaSchedule, the chosen cost model and task "
        "scheduler, compile it with the database, run it and check its output against the untuned "
        "build. Per-stage latency is each kernel's best measured time times its calls.",
    )
    p.add_argument("network", help="a network name (see tvm_latmodel.networks.list_networks)")
    p.add_argument("--trials", type=int, required=True, help="global measurement budget")
    p.add_argument("--plan", default="default", choices=("default", "predicted"),
                   help="default: TVM's FuseOps groups; predicted: the fusion planner's decisions")
    p.add_argument("--cost-model", default="hybrid", choices=MODEL_NAMES)
    p.add_argument("--scheduler", default="gain", choices=("gain", "gradient", "round-robin"),
                   help="gain (ours: weight x gap to the predicted lower bound), or TVM's gradient / round-robin")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work-dir", default=None,
                   help="database directory (default work_dirs/network-NAME-PLAN-MODEL-SCHEDULER-sSEED)")
    p.add_argument("--trials-per-iter", type=int, default=None,
                   help="trials per scheduler pick (default trials // tasks, clamped to 2..16)")
    p.add_argument("--samples", type=int, default=4,
                   help="schedules sampled per PrimFunc for the planner and the lower bounds (default 4)")
    p.add_argument("--pretrained", default="shipped",
                   help="the hybrid model's starting residual: 'shipped', a model file, or 'none'")
    p.add_argument("--repeat", type=int, default=10, help="timed runs of the whole network (median)")
    p.add_argument("--population", type=int, default=None,
                   help="population of the evolutionary search (default TVM's 512; smaller searches faster)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a network option, e.g. image_size=64 (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--verbose", action="store_true", help="also show MetaSchedule's logs on stderr")
    p.set_defaults(func=_cmd_tune_network)


@contextlib.contextmanager
def _stdout_to_stderr():
    """File descriptor 1 to stderr for the block (C++ logs and worker processes included)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _cmd_tune_network(args) -> int:
    from ..networks import list_networks

    if args.network not in list_networks():
        raise ValueError(f"unknown network {args.network!r}; known networks: {', '.join(list_networks())}")
    if args.trials < 1:
        raise ValueError(f"--trials must be >= 1, got {args.trials}")
    if args.trials_per_iter is not None and args.trials_per_iter < 1:
        raise ValueError(f"--trials-per-iter must be >= 1, got {args.trials_per_iter}")
    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    from ..fusion import FusionFallbackWarning
    from ..networks import get_network
    from ..networks.tune import tune_network
    from ..tuning import WorkDirLockedError
    from .fusion import _parse_options

    network = get_network(args.network, seed=args.seed, **_parse_options(args.option))

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    pretrained = None if args.pretrained.lower() == "none" else args.pretrained
    try:
        with warnings.catch_warnings(record=True) as caught, _stdout_to_stderr():
            warnings.simplefilter("always", FusionFallbackWarning)
            result = tune_network(network, trials=args.trials, plan=args.plan, cost_model=args.cost_model,
                                  scheduler=args.scheduler, seed=args.seed, work_dir=args.work_dir,
                                  num_trials_per_iter=args.trials_per_iter, samples=args.samples,
                                  pretrained=pretrained, repeat=args.repeat, population=args.population,
                                  verbose=args.verbose,
                                  progress=progress)
    except WorkDirLockedError as err:
        print(f"tvm-latmodel tune-network: error: {err}", file=sys.stderr)
        return 2
    except ValueError as err:  # a plan that fails, bad options: say so, exit 2
        print(f"tvm-latmodel tune-network: error: {err}", file=sys.stderr)
        return 2
    for warning in caught:
        if issubclass(warning.category, FusionFallbackWarning):
            print(f"warning: {warning.message}", file=sys.stderr)
    if not result.output_matches:
        print(f"tvm-latmodel tune-network: error: the tuned network's output differs from the untuned "
              f"build (max |error| {result.max_abs_error:.3g})", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0 if result.output_matches else 1
    print_summary(result)
    return 0 if result.output_matches else 1


#: The first word(s) of every line the summary prints (the tests hold it to this).
SUMMARY_LABELS = ("network", "latency", "per stage", "tuning", "output check", "database")


def print_summary(result, file=None) -> None:
    """The short human summary of a :class:`~tvm_latmodel.networks.tune.NetworkTuneResult`."""
    file = file or sys.stdout
    stages = ", ".join(f"{stage} {us:.1f} us" for stage, us in result.stages.items())
    tuned = sum(1 for t in result.tasks if t["source"] == "tuned")
    picked = sum(1 for t in result.tasks if t["source"] == "predicted")
    print(f"network         {result.network} ({result.plan} plan, {result.kernels} kernels)", file=file)
    print(f"latency         {result.latency_us:.1f} us tuned, {result.untuned_latency_us:.1f} us untuned "
          f"(speed-up {result.untuned_latency_us / result.latency_us:.2f}x)", file=file)
    print(f"per stage       {stages}", file=file)
    print(f"tuning          {result.trials_measured} trials of {result.trials} in {result.tuning_seconds:.0f} s "
          f"({result.cost_model} model, {result.scheduler} scheduler); {tuned} of {len(result.tasks)} tasks tuned, "
          f"{picked} run the model's unmeasured pick, {result.tuned_kernels} of {result.kernels} kernels "
          "run a scheduled kernel", file=file)
    print(f"output check    max |error| {result.max_abs_error:.2e} "
          f"({'matches' if result.output_matches else 'DIFFERS from'} the untuned build)", file=file)
    print(f"database        {result.database}", file=file)
