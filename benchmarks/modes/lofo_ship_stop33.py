"""Stop 33, part 1 (PROTOCOL_stop33.md): leave-one-family-out over the 174 development logs, the
shipped-style residual fitted on the 54 re-measured logs (S) against one fitted on every development log (N).
Run from the repository root: python benchmarks/modes/lofo_ship_stop33.py (CACHE: head_residual_study.py feature cache).
Zero-shot, pretrained_weight W (env, default 0.5), objective reg:headweighted (the default)."""
import sys, os, json, numpy as np
sys.path.insert(0, "scripts"); sys.path.insert(0, ".")
import head_residual_study as h
from tvm_latmodel.replay import family_of
W = float(os.environ.get("W", 0.5))
paths = open(os.environ.get("DEV_LIST", "benchmarks/modes/dev174_stop33.txt")).read().split()
folder = {p.rstrip("/").split("/")[-1]: p.split("/")[-2] for p in paths}
data = h.featurise(paths, os.environ.get("CACHE", "/tmp/s33/hs/cache"))
names = [n for n in data if n in folder]
feats = {n: h.features(data[n]) for n in names}
def fit(train):
    X = np.concatenate([feats[n] for n in train]); la = np.concatenate([data[n]["log_a"] for n in train])
    lm = np.concatenate([data[n]["log_m"] for n in train]); g = np.concatenate([[i] * len(data[n]["log_a"]) for i, n in enumerate(train)])
    return h.fit("reg:headweighted", X, la, lm, g)
rows = []
fams = sorted({family_of(n) for n in names})
for F in fams:
    test = [n for n in names if family_of(n) == F]
    S = [n for n in names if folder[n] == "remeasured-znver4" and family_of(n) != F]
    N = [n for n in names if family_of(n) != F]
    models = {"S": fit(S), "N": fit(N)}
    for n in test:
        d = data[n]
        rows.append({"fam": F, "task": n, "folder": folder[n], "model": "analytical", **h.metrics(-d["log_a"], d["log_m"])})
        for k, m in models.items():
            rows.append({"fam": F, "task": n, "folder": folder[n], "model": k, **h.metrics(-(d["log_a"] + W * m.predict(feats[n])), d["log_m"])})
    print(f"[lofo] {F}: {len(test)} tasks, S {len(S)} N {len(N)}", file=sys.stderr, flush=True)
json.dump(rows, open(f"benchmarks/modes/lofo_ship_stop33_W{W}.json", "w"))
keys = ("spearman", "top1", "top5", "rank_5pct")
for fset, label in [(("remeasured-znver4",), "54 remeasured"), (("cpu-znver4-net",), "Zen 4 nets"), (("cpu-znver3-net",), "Zen 3 nets"), (("cpu-znver4-net", "cpu-znver3-net"), "all nets")]:
    for mdl in ("analytical", "S", "N"):
        sel = [r for r in rows if r["folder"] in fset and r["model"] == mdl]
        print(f"{label:14s} {mdl:10s} n={len(sel):3d} " + " ".join(f"{k} {np.mean([r[k] for r in sel]):.3f}" for k in keys))
