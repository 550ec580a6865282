#!/usr/bin/env python3
"""Digest every program summary the analytical model makes, to check that a
refactoring of ``program.summarize`` (or of ``indexing``) changes nothing.

It summarizes every logged schedule of every log under ``--logs`` and
``--sampled`` schedules drawn from the design space of four workloads, and
writes the sha1 of each summary's ``repr`` (in order) to a JSON file. Run it
before the change with ``--out``, after it with ``--compare``:

    python scripts/summary_digest.py --out /tmp/before.json
    (change the code)
    python scripts/summary_digest.py --compare /tmp/before.json

``--compare`` exits 1 and names the first differing schedules when any
summary differs (a summary that raised is digested by its error message, so
a new error counts as a difference too).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import sys
import time
import warnings

SAMPLED_FROM = ("C2D_1", "GMM_1", "DEP_0", "XFM_2")


def _digest(mod) -> str:
    from tvm_latmodel.model.program import summarize

    try:
        text = repr(summarize(mod, "cpu"))
    except Exception as err:  # noqa: BLE001 - an error is part of the behaviour
        text = f"ERR {type(err).__name__}: {err}"
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def digests(logs: str, sampled: int) -> dict[str, list[str]]:
    from tvm_latmodel.replay.logs import load_database
    from tvm_latmodel.sampling import sample_schedules
    from tvm_latmodel.targets import host_target

    out: dict[str, list[str]] = {}
    dirs = sorted(glob.glob(os.path.join(logs, "*", "")))
    for n, d in enumerate(dirs, 1):
        name = os.path.basename(os.path.dirname(d))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # failed records are reported by replay, not here
            tasks = load_database(d)
        for t, task in enumerate(tasks):
            out[f"{name}/{t}"] = [_digest(c.sch.mod) for c in task.candidates()]
        print(f"[{n}/{len(dirs)}] {name}", file=sys.stderr, flush=True)
    if sampled:
        target = host_target()
        for name in SAMPLED_FROM:
            d = os.path.join(logs, name)
            if not os.path.isdir(d):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = load_database(d)[0].mod
            out[f"sampled/{name}"] = [_digest(s.mod) for s in sample_schedules(mod, target, sampled, seed=1)]
            print(f"[sampled] {name}", file=sys.stderr, flush=True)
    return out


def compare(before: dict, after: dict) -> list[str]:
    diffs = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a is None or b is None or len(a) != len(b):
            diffs.append(f"{key}: {len(a or [])} schedules before, {len(b or [])} after")
            continue
        diffs += [f"{key}: schedule {i}" for i, (x, y) in enumerate(zip(a, b)) if x != y]
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logs", default=os.path.join(os.path.dirname(__file__), "..", "tuning_logs", "cpu"))
    ap.add_argument("--sampled", type=int, default=300, help="schedules sampled per workload (0: none)")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="write the digests here")
    group.add_argument("--compare", help="compare with digests written before")
    args = ap.parse_args()
    t0 = time.perf_counter()
    now = digests(args.logs, args.sampled)
    total = sum(len(v) for v in now.values())
    print(f"{total} summaries in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(now, f)
        return 0
    with open(args.compare) as f:
        before = json.load(f)
    diffs = compare(before, now)
    print(f"{len(diffs)} of {total} summaries differ" + "".join(f"\n  {d}" for d in diffs[:20]))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
