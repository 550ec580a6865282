#!/usr/bin/env python3
"""Do the analytical model's worst top picks spill? A study for the next mode.

For each log given, the analytical model (no residual) ranks the records;
its top ``--top`` picks and the measured best are compiled for the log's
own target (what TVM built when the log was measured), and the x86
assembly is counted: stack references (``(%rsp)``/``(%rbp)`` operands:
register spills and reloads, vector or general-purpose), packed FMAs, and
the vector registers named. Beside each record: its measured time over
the model's prediction, divided by the same ratio for the task's measured
best (``under``: how many times slower than predicted it runs, relative to
the best; 1 = as well predicted as the best).

    python scripts/check_spills.py LOG_DIR ... [--top 3] [--out benchmarks/modes/spills.json]

It prints one line per record and, at the end, the rank (Spearman)
correlation of stack references with ``under`` over all picks (not the best), and writes
the rows to ``--out`` (JSON). Development data only: it reads schedules.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings


def _asm_counts(mod, target) -> dict:
    import tvm

    asm = tvm.compile(mod, target=target).mod.inspect_source("asm")
    return {
        "stack_refs": len(re.findall(r"\(%r[sb]p\)", asm)),
        "packed_fma": len(re.findall(r"vfmadd\d+ps", asm)),
        "scalar_fma": len(re.findall(r"vfmadd\d+ss", asm)),
        "zmm": len(set(re.findall(r"zmm\d+", asm))),
        "ymm": len(set(re.findall(r"ymm\d+", asm))),
        "gathers": len(re.findall(r"vgather", asm)),
        "lines": asm.count("\n"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--top", type=int, default=3, help="the model's top picks per log")
    ap.add_argument("--out", default=None, help="JSON rows, rewritten after every log (a stopped run keeps the logs it finished)")
    args = ap.parse_args()

    import numpy as np
    from tvm.s_tir import meta_schedule as ms

    from tvm_latmodel.model.cost_model import HybridCostModel
    from tvm_latmodel.replay.logs import load_tasks

    warnings.simplefilter("ignore")
    rows = []
    t0 = time.time()
    for n, task in enumerate(load_tasks(args.logs)):
        ctx = ms.TuneContext(mod=task.mod, target=task.target)
        pred = HybridCostModel(pretrained=None, residual=False).predict_latency_s(ctx, task.candidates())
        lat = task.latencies_s
        best = int(np.argmin(lat))
        ratio = lat / pred
        picks = [int(i) for i in np.argsort(pred, kind="stable")[:args.top]]
        for i in picks + ([best] if best not in picks else []):
            c = _asm_counts(task.records[i].schedule.mod, task.target)
            row = dict(task=task.name, record=i, is_best=i == best, pick=i in picks,
                       measured_us=float(lat[i] * 1e6), predicted_us=float(pred[i] * 1e6),
                       under=float(ratio[i] / ratio[best]), **c)
            rows.append(row)
            print(f"[spills] {task.name} rec {i:3d}{' best' if i == best else '     '} "
                  f"measured {row['measured_us']:9.1f} us predicted {row['predicted_us']:9.1f} us "
                  f"under {row['under']:5.2f}  stack {c['stack_refs']:4d} fma {c['packed_fma']:4d}/{c['scalar_fma']:4d} "
                  f"zmm {c['zmm']:2d} ymm {c['ymm']:2d} gathers {c['gathers']}", flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)
        print(f"[spills] {n + 1} logs, {len(rows)} records, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    picks = [r for r in rows if r["pick"] and not r["is_best"]]
    if len(picks) > 2:
        x = np.argsort(np.argsort([r["stack_refs"] for r in picks], kind="stable"))
        y = np.argsort(np.argsort([r["under"] for r in picks], kind="stable"))
        s = float(np.corrcoef(x, y)[0, 1])  # rank correlation (ties broken by order)
        print(f"Spearman(stack references, under) over {len(picks)} top picks: {s:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
