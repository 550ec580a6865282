"""Stop 34, part 1 (PROTOCOL_stop34.md): leave-one-family-out over the 185 development logs. S: the
shipped-style residual (fitted on the re-measured logs), N: fitted on every development log, E: the mean of
S's and N's corrections. Zero-shot, pretrained_weight W (env, default 0.5), objective reg:headweighted.
Run from the repository root: python benchmarks/modes/lofo_mean_stop34.py (CACHE: head_residual_study.py
feature cache folder)."""
import sys, os, json, numpy as np
sys.path.insert(0, "scripts"); sys.path.insert(0, ".")
import head_residual_study as h
from tvm_latmodel.replay import family_of
W = float(os.environ.get("W", 0.5))
paths = open(os.environ.get("DEV_LIST", "benchmarks/modes/dev185_stop34.txt")).read().split()
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
    S = fit([n for n in names if folder[n] == "remeasured-znver4" and family_of(n) != F])
    N = fit([n for n in names if family_of(n) != F])
    for n in test:
        d, x = data[n], feats[n]
        cs, cn = S.predict(x), N.predict(x)
        rows.append({"fam": F, "task": n, "folder": folder[n], "model": "analytical", **h.metrics(-d["log_a"], d["log_m"])})
        for k, c in (("S", cs), ("N", cn), ("E", 0.5 * (cs + cn))):
            rows.append({"fam": F, "task": n, "folder": folder[n], "model": k, **h.metrics(-(d["log_a"] + W * c), d["log_m"])})
    print(f"[lofo] {F}: {len(test)} tasks", file=sys.stderr, flush=True)
json.dump(rows, open(f"benchmarks/modes/lofo_mean_stop34_W{W}.json", "w"))
keys = ("spearman", "top1", "top5", "rank_5pct")
for fset, label in [(("remeasured-znver4",), "54 remeasured"), (("cpu-znver4-net", "cpu-znver3-net"), "all nets")]:
    for mdl in ("analytical", "S", "N", "E"):
        sel = [r for r in rows if r["folder"] in fset and r["model"] == mdl]
        print(f"{label:14s} {mdl:10s} n={len(sel):3d} " + " ".join(f"{k} {np.mean([r[k] for r in sel]):.3f}" for k in keys))
