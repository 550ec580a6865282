"""Stop 35, part 1 (PROTOCOL_stop35.md): leave-one-family-out over the 185 development logs of stop 34.
S_old: the shipped-style residual (fitted on the re-measured logs) on the terms before stop 34's part 2
(OLD_CACHE, made at stop 33); S_new: the same on the terms after it (NEW_CACHE, made by this script with the
current code, the per-store sums taken from OLD_CACHE). Both are applied to the held-out family's terms after
part 2, which is what the product computes. Zero-shot, pretrained_weight W (env, default 0.5), objective
reg:headweighted. Also the in-sample rows: each fitted on all 54 re-measured logs, scored on every log.
Run from the repository root: python benchmarks/modes/lofo_refit_stop35.py."""
import sys, os, json
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, "scripts")
import head_residual_study as h
from lofo_ship_stop33 import load, fit, report
from tvm_latmodel.replay import family_of

W = float(os.environ.get("W", 0.5))
dev = os.environ.get("DEV_LIST", "benchmarks/modes/dev185_stop34.txt")
old_cache = os.environ.get("OLD_CACHE", "/tmp/s33/hs/cache")
new_cache = os.environ.get("NEW_CACHE", "/tmp/s35/cache_new")
h.featurise(open(dev).read().split(), new_cache, psf_from=old_cache)  # fills NEW_CACHE
old, names, fold, folder = load(dev, old_cache)
new, names_new, fnew, _ = load(dev, new_cache)
assert names == names_new


def rows_for(test, S_old, S_new, label):
    out = []
    for n in test:
        d, x = new[n], fnew[n]
        out.append({"fam": family_of(n), "task": n, "folder": folder[n], "model": "analytical", "fit": label,
                    **h.metrics(-d["log_a"], d["log_m"])})
        for k, S in (("S_old", S_old), ("S_new", S_new)):
            out.append({"fam": family_of(n), "task": n, "folder": folder[n], "model": k, "fit": label,
                        **h.metrics(-(d["log_a"] + W * S.predict(x)), d["log_m"])})
    return out


rows = []
for F in sorted({family_of(n) for n in names}):
    train = [n for n in names if folder[n] == "remeasured-znver4" and family_of(n) != F]
    rows += rows_for([n for n in names if family_of(n) == F], fit(old, fold, train), fit(new, fnew, train), "held-out")
    print(f"[lofo] {F}", file=sys.stderr, flush=True)
train = [n for n in names if folder[n] == "remeasured-znver4"]
rows += rows_for(names, fit(old, fold, train), fit(new, fnew, train), "in-sample")
json.dump(rows, open(f"benchmarks/modes/lofo_refit_stop35_W{W}.json", "w"))
groups = [(("remeasured-znver4",), "54 remeasured"), (("cpu-znver4-net", "cpu-znver3-net"), "131 nets"),
          (("remeasured-znver4", "cpu-znver4-net", "cpu-znver3-net"), "all 185")]
for label in ("held-out", "in-sample"):
    print(f"== {label}")
    report([r for r in rows if r["fit"] == label], groups, ("analytical", "S_old", "S_new"))
