"""Stop 34, part 2 (PROTOCOL_stop34.md): the analytical model alone with and without the cap of a compacted
intermediate's footprint at its allocation (``program._within_allocations``), zero-shot, on the 194
development logs. Each log's spec is ``HardwareSpec.from_target`` of its own target. Run from the repository
root: python benchmarks/modes/compacted_dev_stop34.py [DEV_LIST]; rows go to compacted_dev_stop34.json.
``compare`` (old against new on a list of logs) is shared with stop 35's ``conflict_dev_stop35.py``."""
import json, sys, warnings
import numpy as np
sys.path.insert(0, "scripts"); sys.path.insert(0, ".")
import head_residual_study as h
from tvm_latmodel.hardware import HardwareSpec
from tvm_latmodel.model import program
from tvm_latmodel.model.modes import estimate
from tvm_latmodel.replay import family_of, load_database


def compare(paths, score, out_json):
    """Per log, the metrics of the analytical model's old and new estimates (``score(task)``: label -> log
    latencies per record), zero-shot; rows written to ``out_json``, means printed (all, then per folder)."""
    rows = []
    for i, p in enumerate(paths):
        name = p.rstrip("/").split("/")[-1]
        (task,) = load_database(p, name=name)
        lm = np.log(task.latencies_s)  # (failed runs are not records)
        out = {label: h.metrics(-la, lm) for label, la in score(task).items()}
        for label, m in out.items():
            rows.append({"task": name, "folder": p.split("/")[-2], "fam": family_of(name), "model": label, **m})
        print(f"[dev] {i + 1}/{len(paths)} {name}: top1 {out['old']['top1']:.3f} -> {out['new']['top1']:.3f}"
              f" trials {out['old']['rank_5pct']} -> {out['new']['rank_5pct']}", file=sys.stderr, flush=True)
    json.dump(rows, open(out_json, "w"))
    keys = ("spearman", "top1", "top5", "rank_5pct")
    for label in ("old", "new"):
        sel = [r for r in rows if r["model"] == label]
        print(f"all {len(sel)} {label}: " + " ".join(f"{k} {np.mean([r[k] for r in sel]):.4f}" for k in keys))
    for folder in sorted({r["folder"] for r in rows}):
        for label in ("old", "new"):
            sel = [r for r in rows if r["model"] == label and r["folder"] == folder]
            print(f"{folder} {len(sel)} {label}: " + " ".join(f"{k} {np.mean([r[k] for r in sel]):.4f}" for k in keys))
    return rows


def _score(task):
    """Log latencies without and with the cap."""
    hw = HardwareSpec.from_target(task.target)
    capped = program._within_allocations
    out = {}
    for label, fn in (("old", lambda b, nbytes: b), ("new", capped)):
        program._within_allocations = fn
        out[label] = np.log(np.maximum([estimate(program.summarize(c.sch.mod, "cpu"), hw).latency_s
                                        for c in task.candidates()], 1e-12))
    program._within_allocations = capped
    return out


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    compare(open(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/modes/dev194_stop34.txt").read().split(),
            _score, "benchmarks/modes/compacted_dev_stop34.json")
