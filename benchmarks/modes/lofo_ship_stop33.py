"""Stop 33, part 1 (PROTOCOL_stop33.md): leave-one-family-out over the 174 development logs, the
shipped-style residual fitted on the 54 re-measured logs (S) against one fitted on every development log (N).
Run from the repository root: python benchmarks/modes/lofo_ship_stop33.py (CACHE: head_residual_study.py feature cache).
Zero-shot, pretrained_weight W (env, default 0.5), objective reg:headweighted (the default).
``load`` and ``fit`` are shared with stop 34's ``lofo_mean_stop34.py``."""
import sys, os, json, numpy as np
sys.path.insert(0, "scripts"); sys.path.insert(0, ".")
import head_residual_study as h
from tvm_latmodel.replay import family_of


def load(dev_list, cache):
    """(data, names, feats, folder) of the logs listed in ``dev_list``, featurised into ``cache``."""
    paths = open(dev_list).read().split()
    folder = {p.rstrip("/").split("/")[-1]: p.split("/")[-2] for p in paths}
    data = h.featurise(paths, cache)
    names = [n for n in data if n in folder]
    return data, names, {n: h.features(data[n]) for n in names}, folder


def training_arrays(data, feats, train):
    """(X, log analytical, log measured, task groups) of the logs named in ``train``."""
    X = np.concatenate([feats[n] for n in train]); la = np.concatenate([data[n]["log_a"] for n in train])
    lm = np.concatenate([data[n]["log_m"] for n in train]); g = np.concatenate([[i] * len(data[n]["log_a"]) for i, n in enumerate(train)])
    return X, la, lm, g


def fit(data, feats, train):
    """The residual (reg:headweighted) fitted on the logs named in ``train``."""
    return h.fit("reg:headweighted", *training_arrays(data, feats, train))


def lofo(data, names, feats, folder, W, combine=lambda cs, cn: {}):
    """Rows of metrics per held-out family: the analytical model, S, N and whatever ``combine(cs, cn)``
    makes of their corrections (label -> correction)."""
    rows = []
    for F in sorted({family_of(n) for n in names}):
        test = [n for n in names if family_of(n) == F]
        S = fit(data, feats, [n for n in names if folder[n] == "remeasured-znver4" and family_of(n) != F])
        N = fit(data, feats, [n for n in names if family_of(n) != F])
        for n in test:
            d, x = data[n], feats[n]
            cs, cn = S.predict(x), N.predict(x)
            rows.append({"fam": F, "task": n, "folder": folder[n], "model": "analytical", **h.metrics(-d["log_a"], d["log_m"])})
            for k, c in {"S": cs, "N": cn, **combine(cs, cn)}.items():
                rows.append({"fam": F, "task": n, "folder": folder[n], "model": k, **h.metrics(-(d["log_a"] + W * c), d["log_m"])})
        print(f"[lofo] {F}: {len(test)} tasks", file=sys.stderr, flush=True)
    return rows


def report(rows, groups, models):
    keys = ("spearman", "top1", "top5", "rank_5pct")
    for fset, label in groups:
        for mdl in models:
            sel = [r for r in rows if r["folder"] in fset and r["model"] == mdl]
            print(f"{label:14s} {mdl:10s} n={len(sel):3d} " + " ".join(f"{k} {np.mean([r[k] for r in sel]):.3f}" for k in keys))


def main():
    W = float(os.environ.get("W", 0.5))
    data, names, feats, folder = load(os.environ.get("DEV_LIST", "benchmarks/modes/dev174_stop33.txt"),
                                      os.environ.get("CACHE", "/tmp/s33/hs/cache"))
    rows = lofo(data, names, feats, folder, W)
    json.dump(rows, open(f"benchmarks/modes/lofo_ship_stop33_W{W}.json", "w"))
    report(rows, [(("remeasured-znver4",), "54 remeasured"), (("cpu-znver4-net",), "Zen 4 nets"),
                  (("cpu-znver3-net",), "Zen 3 nets"), (("cpu-znver4-net", "cpu-znver3-net"), "all nets")],
           ("analytical", "S", "N"))


if __name__ == "__main__":
    main()
