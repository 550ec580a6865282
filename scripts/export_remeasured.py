#!/usr/bin/env python3
"""Write ``remeasure_logs.py``'s times out as MetaSchedule databases of the machine that took them.

``remeasure_logs.py`` times every valid record of a log again, ``--passes``
times. This writes, per log, a database whose records are the log's own
lines (same traces, same order, same workload file byte for byte) with

* ``run_secs``: the re-measured passes (so a record's latency, the mean of
  ``run_secs``, is the mean of the passes: the median, for two passes);
* ``target``: the machine that re-measured them (the JSON's ``machine``),
  not the one that recorded the log;

so ``replay``, ``train`` and the offline scripts can use the cleaner truth
as they use any log. A record that failed on the recording machine stays
failed (``run_secs`` 1e10, as MetaSchedule writes it); one that failed in a
re-measured pass becomes failed too. Unreadable lines of the source log are
left out (the source database says which, when replayed).

A log with fewer than ``--min-passes`` passes is refused, as is one whose
valid records or logged times no longer match the JSON (the log changed
since it was re-measured). Output folders are named after the logs; two logs
of one name from different folders are an error. ``--hardware`` copies the
re-measuring machine's spec to ``OUT/hardware.json``, so that ``replay`` and
``train`` score the databases with it on any host (without it they fall back
to ``HardwareSpec.from_target`` of the machine's target: defaults elsewhere).

    python scripts/export_remeasured.py benchmarks/remeasure/znver4.json \\
        benchmarks/remeasure/znver3_logs_on_znver4.json --out tuning_logs/remeasured-znver4 \\
        --hardware benchmarks/remeasure/znver4_hardware.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

FAILED = 1e10  # MetaSchedule's run_secs for a failed build or run


def export_log(source: str, log: dict, machine: dict, out_dir: str, min_passes: int) -> dict:
    """Write one log's re-measured database to ``out_dir``; return a summary."""
    from tvm_latmodel.fileformat import write_text
    from tvm_latmodel.replay.logs import RECORD_FILE, WORKLOAD_FILE, load_tasks

    passes = log.get("passes") or []
    if len(passes) < min_passes:
        raise ValueError(f"{source}: {len(passes)} re-measured pass(es), --min-passes is {min_passes}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks = load_tasks(source)
    if len(tasks) != 1:
        raise ValueError(f"{source}: {len(tasks)} workloads in one database; one expected")
    (task,) = tasks
    logged = log["logged_s"]
    if len(task.records) != len(logged) or any(len(p) != len(logged) for p in passes):
        raise ValueError(f"{source}: {len(task.records)} valid records now, the re-measurement has "
                         f"{len(logged)} logged and {[len(p) for p in passes]} re-measured: the log changed")
    for r, t in zip(task.records, logged):
        if not math.isclose(r.latency_s, t, rel_tol=1e-9):
            raise ValueError(f"{source}: line {r.index + 1} logged {r.latency_s} s now, {t} s when re-measured: "
                             "the log changed")
    by_line = {r.index: i for i, r in enumerate(task.records)}
    with open(os.path.join(source, RECORD_FILE), encoding="utf-8") as f:
        lines = f.read().splitlines()
    written = failed_here = 0
    out_lines = []
    for n, text in enumerate(lines):
        if not text.strip():
            continue
        try:
            entry = json.loads(text)
        except json.JSONDecodeError:
            continue  # an unreadable line: load_tasks skipped it as well
        i = by_line.get(n)
        if i is None:
            entry[1][1] = [FAILED]  # failed (or unusable) on the recording machine
        else:
            secs = [float(p[i]) for p in passes]
            if all(math.isfinite(s) and s > 0 for s in secs):
                entry[1][1] = secs
            else:
                entry[1][1] = [FAILED]
                failed_here += 1
        entry[1][2] = machine
        out_lines.append(json.dumps(entry, separators=(",", ":")))
        written += 1
    write_text(os.path.join(out_dir, RECORD_FILE), "\n".join(out_lines) + "\n")
    with open(os.path.join(source, WORKLOAD_FILE), encoding="utf-8", newline="") as f:
        write_text(os.path.join(out_dir, WORKLOAD_FILE), f.read())
    return {"source": source, "lines": written, "valid": len(task.records) - failed_here,
            "failed_here": failed_here, "passes": len(passes)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("remeasured", nargs="+", help="remeasure_logs.py output JSON files")
    ap.add_argument("--out", required=True, help="folder for the databases (one subfolder per log)")
    ap.add_argument("--logs-root", default="tuning_logs",
                    help="where the JSON's folder/name keys point (default: tuning_logs)")
    ap.add_argument("--min-passes", type=int, default=2)
    ap.add_argument("--hardware", metavar="SPEC.json",
                    help="spec of the machine that re-measured (copied to OUT/hardware.json)")
    args = ap.parse_args()

    import tvm

    from tvm_latmodel.fileformat import load_json

    jobs = {}
    for path in args.remeasured:
        try:
            data = load_json(path, "re-measurement", strict=False)
        except ValueError as err:
            sys.exit(f"error: {err}")
        if not isinstance(data, dict) or not isinstance(data.get("logs"), dict) or "machine" not in data:
            sys.exit(f"error: {path}: not remeasure_logs.py output (no 'machine' and 'logs')")
        try:
            machine = json.loads(data["machine"])
            tvm.target.Target(machine)
        except Exception as err:  # noqa: BLE001 - any bad target is the file's problem
            sys.exit(f"error: {path}: machine {data['machine']!r} is not a TVM target in JSON: {err}")
        for key, log in data["logs"].items():
            name = key.split("/")[-1]
            if name in jobs:
                sys.exit(f"error: two logs named {name}: {jobs[name][0]} and {key}")
            jobs[name] = (key, log, machine)
    spec_text = None
    if args.hardware:
        from tvm_latmodel.replay.logs import spec_for_records

        for _, _, machine in jobs.values():
            try:
                spec_for_records(args.hardware, tvm.target.Target(machine), "the re-measured logs")
            except (ValueError, OSError) as err:
                sys.exit(f"error: {err}")
        with open(args.hardware, encoding="utf-8") as f:
            spec_text = f.read()
    summaries = []
    for name, (key, log, machine) in sorted(jobs.items()):
        try:
            s = export_log(os.path.join(args.logs_root, key), log, machine, os.path.join(args.out, name),
                           args.min_passes)
        except (ValueError, FileNotFoundError) as err:
            sys.exit(f"error: {err}")
        summaries.append(s)
        print(f"{name}: {s['valid']} valid of {s['lines']} lines ({s['failed_here']} failed here), "
              f"{s['passes']} passes, from {s['source']}", file=sys.stderr)
    if spec_text is not None:
        from tvm_latmodel.fileformat import write_text

        write_text(os.path.join(args.out, "hardware.json"), spec_text)
    print(f"{len(summaries)} databases in {args.out}" + (f", with {args.hardware}" if spec_text else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
