"""Stop 35, part 2 (PROTOCOL_stop35.md): the analytical model alone with and without cache-set conflicts
(``MemoryLevel.sets``; without = every level's sets 0, which is the model before the change), zero-shot, on
the 194 development logs. Each log's spec is ``HardwareSpec.from_target`` of its own target (the Zen 3's
sysfs sets for L1 and L2 on this host; 64 L1 sets and no L2 sets for the Zen 4's logs). Run from the
repository root, with the change applied (it was dropped: ``git apply
benchmarks/modes/set_conflicts_refused.patch``): python benchmarks/modes/conflict_dev_stop35.py [DEV_LIST];
rows go to conflict_dev_stop35.json."""
import dataclasses, json, sys, warnings
import numpy as np
sys.path.insert(0, "scripts"); sys.path.insert(0, ".")
import head_residual_study as h
from tvm_latmodel.hardware import HardwareSpec
from tvm_latmodel.model import program
from tvm_latmodel.model.modes import estimate
from tvm_latmodel.replay import family_of, load_database

warnings.simplefilter("ignore")
paths = open(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/modes/dev194_stop34.txt").read().split()
rows = []
for i, p in enumerate(paths):
    name = p.rstrip("/").split("/")[-1]
    (task,) = load_database(p, name=name)
    new = HardwareSpec.from_target(task.target)
    old = dataclasses.replace(new, memory=tuple(dataclasses.replace(m, sets=0) for m in new.memory))
    lm = np.log(task.latencies_s)  # (failed runs are not records)
    sums = [program.summarize(c.sch.mod, "cpu") for c in task.candidates()]
    out = {}
    for label, hw in (("old", old), ("new", new)):
        la = np.log(np.maximum([estimate(s, hw).latency_s for s in sums], 1e-12))
        out[label] = h.metrics(-la, lm)
    for label, m in out.items():
        rows.append({"task": name, "folder": p.split("/")[-2], "fam": family_of(name), "model": label, **m})
    print(f"[dev] {i + 1}/{len(paths)} {name}: top1 {out['old']['top1']:.3f} -> {out['new']['top1']:.3f}"
          f" trials {out['old']['rank_5pct']} -> {out['new']['rank_5pct']}", file=sys.stderr, flush=True)
json.dump(rows, open("benchmarks/modes/conflict_dev_stop35.json", "w"))
keys = ("spearman", "top1", "top5", "rank_5pct")
for label in ("old", "new"):
    sel = [r for r in rows if r["model"] == label]
    print(f"all {len(sel)} {label}: " + " ".join(f"{k} {np.mean([r[k] for r in sel]):.4f}" for k in keys))
for folder in sorted({r["folder"] for r in rows}):
    for label in ("old", "new"):
        sel = [r for r in rows if r["model"] == label and r["folder"] == folder]
        print(f"{folder} {len(sel)} {label}: " + " ".join(f"{k} {np.mean([r[k] for r in sel]):.4f}" for k in keys))
