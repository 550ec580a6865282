"""Stop 39 exploration after part 1 was refused (development data only, no rule decided by it): LOTO on the 54
re-measured logs with the current code's features (base) and with the refused hoisting patch's (hoist), under the
shipped residual (current) and bagged variants (bagK_s: K boosters with subsample s, seeds 0..K-1, averaged).

Run from the repository root: python benchmarks/modes/hoist_residual_noise_stop39.py {base,hoist} {current,bag5_0.7,bag5_0.5}
(BASE_CACHE / NEW_CACHE: the feature caches of hoist_dev_stop39.py; OUT_DIR: where each run's rows go)."""
import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, "scripts")
sys.path.insert(0, ".")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import head_residual_study as h  # noqa: E402
from lofo_ship_stop33 import fit as fit_shipped, training_arrays  # noqa: E402
from rmw_dev_stop38 import load  # noqa: E402
from tvm_latmodel.model.residual import ResidualModel  # noqa: E402

W = 0.5


def main(code: str, variant: str) -> None:
    warnings.simplefilter("ignore")
    base_cache = os.environ.get("BASE_CACHE", "/tmp/s38/cache_rmw")
    cache = {"base": base_cache, "hoist": os.environ.get("NEW_CACHE", "/tmp/s39/cache_hoist")}[code]
    paths = [p.rstrip("/") for p in open("benchmarks/modes/dev185_stop34.txt").read().split()]
    data = load([p for p in paths if "remeasured-znver4" in p], cache, psf_from=base_cache)
    names = sorted(data)
    feats = {n: h.features(data[n]) for n in names}

    def fit(train):
        if variant == "current":
            return fit_shipped(data, feats, train)
        k, subsample = int(variant[3]), float(variant.split("_")[1])  # bagK_s
        arrays = training_arrays(data, feats, train)
        boosters = [ResidualModel(objective="reg:headweighted", subsample=subsample, seed=s).fit(*arrays)
                    for s in range(k)]

        class Mean:
            def predict(self, x):
                return np.mean([b.predict(x) for b in boosters], axis=0)
        return Mean()

    rows = []
    for n in names:
        S = fit([m for m in names if m != n])
        d = data[n]
        rows.append({"task": n, **h.metrics(-(d["log_a"] + W * S.predict(feats[n])), d["log_m"])})
    out_dir = os.environ.get("OUT_DIR", "/tmp/s39/bag")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{code}_{variant}.json"), "w") as f:
        json.dump(rows, f)
    print(code, variant, " ".join(f"{k} {np.mean([r[k] for r in rows]):.3f}"
                                  for k in ("spearman", "top1", "top5", "rank_5pct")))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
