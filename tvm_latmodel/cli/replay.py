"""``tvm-latmodel replay``: evaluate a cost model on MetaSchedule tuning logs offline.

Results go to stdout (a table, or with ``--json`` exactly one JSON object);
progress bars and warnings about bad log lines go to stderr.
"""

from __future__ import annotations

import json
import sys
import warnings


def add_parser(subparsers) -> None:
    """Add the ``replay`` subcommand to an argparse ``subparsers`` object."""
    from ..model.registry import MODEL_NAMES

    p = subparsers.add_parser(
        "replay",
        help="rank logged MetaSchedule candidates with a cost model, without hardware",
        description=(
            "Read MetaSchedule tuning databases (directories holding database_workload.json "
            "and database_tuning_record.json, or folders searched recursively for them), "
            "rebuild every logged schedule from its trace, and score a cost model's ranking "
            "of them: Spearman, Kendall, pairwise accuracy, top-1/top-5 score, MAPE (models "
            "that predict latency), and the trials a simulated search over the logged pool "
            "needs to find a schedule within 5% of the best. Ties in the model's scores "
            "are always broken against it."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="tuning database directories or folders holding them")
    p.add_argument("--model", required=True, choices=MODEL_NAMES,
                   help="hybrid/analytical: tvm-latmodel's model with/without its residual; "
                        "xgb: TVM's XGBModel (random scores below 100 samples, as in a real search); "
                        "random: a seeded random scorer")
    p.add_argument("--shots", type=int, default=0, metavar="K",
                   help="give the model K records of each task (seeded sample) through update() "
                        "before scoring the rest (default 0)")
    p.add_argument("--pretrained", default="shipped", metavar="FILE",
                   help="the hybrid model's starting residual: 'shipped' (default: the one in the "
                        "package for this target family), 'none', or a saved model file")
    p.add_argument("--transfer", action="store_true",
                   help="leave-one-task-out: give the model all records of every other task first")
    p.add_argument("--seed", type=int, default=0, help="seed of the shots and the models (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--dump", default=None, metavar="FILE",
                   help="write one JSON line per scored record: task, index, measured_s, score")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="write a PNG: score vs measured latency, and the simulated search curve, per task")
    p.set_defaults(func=run_replay)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"tvm-latmodel replay: warning: {message}", file=sys.stderr)


def skipped_summary(tasks) -> list[str]:
    """One line per database that had lines skipped: how many records were used,
    how many lines skipped, and whether a file is still being written."""
    by_path: dict = {}
    for task in tasks:
        by_path.setdefault(str(task.path), []).append(task)
    out = []
    for path, group in by_path.items():
        skipped = group[0].skipped_lines  # the same for every task of a database
        n_skipped = sum(len(v) for v in skipped.values())
        n_failed = sum(len(t.failed_indices) for t in group)
        if not n_skipped and not n_failed:
            continue
        used = sum(len(t) for t in group)
        text = f"{path}: used {used} records; skipped {n_skipped} unreadable line{'s' * (n_skipped != 1)}"
        per_file = [f"{len(v)} of {name}" for name, v in skipped.items() if v]
        if per_file:
            text += f" ({', '.join(per_file)})"
        text += f" and {n_failed} failed measurement{'s' * (n_failed != 1)}"
        for name in group[0].incomplete_files:
            text += f"; the last line of {name} is incomplete (still being written?)"
        out.append(text)
    return out


def run_replay(args) -> int:
    """Run the ``replay`` command. Returns the exit status."""
    from ..replay import ReplayWarning, format_table, plot_report, replay, write_dump

    if args.shots < 0:
        raise ValueError(f"--shots must be >= 0, got {args.shots}")
    with warnings.catch_warnings():
        warnings.simplefilter("always", ReplayWarning)
        old_show = warnings.showwarning
        warnings.showwarning = _show_warning
        try:
            tasks, report = replay(
                args.paths,
                args.model,
                shots=args.shots,
                transfer=args.transfer,
                seed=args.seed,
                pretrained=None if args.pretrained == "none" else args.pretrained,
                progress=True,
            )
        finally:
            warnings.showwarning = old_show
    for line in skipped_summary(tasks):
        print(f"tvm-latmodel replay: {line}", file=sys.stderr)
    if args.dump:
        write_dump(report, args.dump)
        print(f"wrote {len(report.predictions)} predictions to {args.dump}", file=sys.stderr)
    if args.plot:
        plot_report(report, args.plot)
        print(f"wrote plot to {args.plot}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print(format_table(report))
    return 0
