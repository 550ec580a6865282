#!/usr/bin/env python3
"""Check the model's auto-vectorization verdicts against LLVM's assembly.

For the first N records per log whose reduction block has no explicit
vectorized loop, it builds the schedule with TVM and counts packed
(``v{fmadd,mul,add,max}ps``) and scalar (``...ss``) arithmetic in the x86
assembly: the truth is "LLVM emitted packed arithmetic". The model's verdict
is ``auto_vector_extent > 1`` of the reduction block. Prints the agreement
and the two kinds of error; the assembly counts are cached in
``--cache`` so another version of the model can be checked on the same
records without building them again.

    python scripts/check_vectorization.py 8 mytag C2D_1 GMM_1 DEP_0 ...

Caveat: "packed" includes partial SLP vectorization that builds vectors
lane by lane (vinsertps), which is vector code but not fast code.
"""
import argparse
import json, os, re, sys, tvm
from tvm_latmodel.replay.logs import load_tasks
from tvm_latmodel.model.program import summarize
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("per_log", type=int)
ap.add_argument("tag")
ap.add_argument("logs", nargs="+", help="log directories (or names under tuning_logs/cpu)")
ap.add_argument("--cache", default="/tmp/vec_truth_cache.json")
args = ap.parse_args()
cache_path = args.cache
cache = json.load(open(cache_path)) if os.path.exists(cache_path) else {}
per_log, tag, logs = args.per_log, args.tag, args.logs
rows = []
for path in logs:
    (task,) = load_tasks(path if path.startswith("/") else f"/work/main/tuning_logs/cpu/{path}")
    n = 0
    for i, r in enumerate(task.records):
        ps = summarize(r.schedule.mod, "cpu")
        reds = [b for b in ps.blocks if b.reduce_level > 0 and b.ops_per_point > 0]
        if not reds or any(b.vector_extent > 1 for b in reds):
            continue
        key = f"{os.path.basename(path)}:{i}"
        if key not in cache:
            lib = tvm.compile(r.schedule.mod, target=task.target)
            asm = lib.mod.inspect_source("asm")
            pk = len(re.findall(r"v(fmadd\d+|mul|add|max)ps", asm))
            sc = len(re.findall(r"v(fmadd\d+|mul|add|max)ss", asm))
            cache[key] = {"packed": pk, "scalar": sc}
            json.dump(cache, open(cache_path, "w"))
        truth = cache[key]["packed"] > 0
        pred = any(b.auto_vector_extent > 1 for b in reds)
        rows.append((key, truth, pred))
        n += 1
        if n >= per_log:
            break
tp = sum(t and p for _, t, p in rows); tn = sum((not t) and (not p) for _, t, p in rows)
fp = sum((not t) and p for _, t, p in rows); fn = sum(t and (not p) for _, t, p in rows)
print(f"{tag}: n={len(rows)} agree={(tp+tn)/max(1,len(rows)):.3f} tp={tp} tn={tn} fp(credited, scalar)={fp} fn(missed)={fn}")
