"""Stop 39 exploration after part 1 was refused (development data only, no rule decided by it): LOTO on the 54
re-measured logs with the current code's features (base) and with the refused hoisting patch's (hoist), under the
shipped residual (current) and bagged variants (bagK_s: K boosters with subsample s, seeds 0..K-1, averaged).
Run: python hoist_residual_noise_stop39.py {base,hoist} {current,bag5_0.7,bag5_0.5} (feature caches of the stop-39 session)."""
import sys, json, warnings
import numpy as np
sys.path.insert(0, "/work/main/scripts"); sys.path.insert(0, "/work/main/benchmarks/modes"); sys.path.insert(0, "/work/main")
warnings.simplefilter("ignore")
import head_residual_study as h
import rmw_dev_stop38 as harness
from tvm_latmodel.model.residual import ResidualModel
code = sys.argv[1]; variant = sys.argv[2]
cache = {"base": "/tmp/s38/cache_rmw", "hoist": "/tmp/s39/cache_hoist"}[code]
paths = [p.rstrip("/") for p in open("/work/main/benchmarks/modes/dev185_stop34.txt").read().split()]
paths = [p if p.startswith("/") else "/work/main/" + p for p in paths]
rem = [p for p in paths if "remeasured-znver4" in p]
data = harness.load(rem, cache, psf_from="/tmp/s38/cache_rmw")
names = sorted(data)
feats = {n: h.features(data[n]) for n in names}
def fit(train):
    X = np.concatenate([feats[n] for n in train]); la = np.concatenate([data[n]["log_a"] for n in train])
    lm = np.concatenate([data[n]["log_m"] for n in train]); g = np.concatenate([[i] * len(data[n]["log_a"]) for i, n in enumerate(train)])
    if variant == "current":
        ms = [ResidualModel(objective="reg:headweighted").fit(X, la, lm, g)]
    elif variant.startswith("bag"):
        k, ss = int(variant[3]), float(variant.split("_")[1])
        ms = [ResidualModel(objective="reg:headweighted", subsample=ss, seed=s).fit(X, la, lm, g) for s in range(k)]
    class M:
        def predict(self, x): return np.mean([m.predict(x) for m in ms], axis=0)
    return M()
rows = []
for n in names:
    S = fit([m for m in names if m != n])
    d = data[n]
    rows.append({"task": n, **h.metrics(-(d["log_a"] + 0.5 * S.predict(feats[n])), d["log_m"])})
json.dump(rows, open(f"/tmp/s39/bag/{code}_{variant}.json", "w"))
print(code, variant, " ".join(f"{k} {np.mean([r[k] for r in rows]):.3f}" for k in ("spearman", "top1", "top5", "rank_5pct")))
