"""Stop 36, part 2 (PROTOCOL_stop36.md): the residual's tree capacity, on development data only.

For each booster setting (CONFIGS), zero-shot at pretrained_weight 0.5, objective reg:headweighted, the
features of the current code (NEW_CACHE, made at stop 35 with the terms the package computes now):
* LOFO: for each family F of the 185 development logs, fitted on the re-measured logs not of F, scored on
  F's logs (the shipped-model situation for a family no log holds);
* LOTO: for each of the 54 re-measured logs, fitted on the other 53 (the situation of a new shape of a
  family the training logs hold: what the transfer baseline wins on);
* in-sample: fitted on all 54, scored on every log.
Run from the repository root: python benchmarks/modes/capacity_dev_stop36.py [config ...] (OUT=file.json
to run configs in parallel processes; --report FILE... merges them)."""
import sys, os, json, time
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, "scripts"); sys.path.insert(0, ".")
import head_residual_study as h
from lofo_ship_stop33 import load
from tvm_latmodel.model.residual import ResidualModel
from tvm_latmodel.replay import family_of

W = 0.5
CONFIGS = {
    "base": dict(n_estimators=120, max_depth=6, learning_rate=0.1, min_child_weight=1.0),
    "deep": dict(n_estimators=120, max_depth=10, learning_rate=0.1, min_child_weight=1.0),
    "long": dict(n_estimators=400, max_depth=6, learning_rate=0.1, min_child_weight=1.0),
    "tvm": dict(n_estimators=400, max_depth=10, learning_rate=0.2, min_child_weight=0.0),
}


def fit(cfg, data, feats, train):
    X = np.concatenate([feats[n] for n in train]); la = np.concatenate([data[n]["log_a"] for n in train])
    lm = np.concatenate([data[n]["log_m"] for n in train])
    g = np.concatenate([[i] * len(data[n]["log_a"]) for i, n in enumerate(train)])
    return ResidualModel(objective="reg:headweighted", **CONFIGS[cfg]).fit(X, la, lm, g)


def score(S, n, data, feats):
    d = data[n]
    return h.metrics(-(d["log_a"] + W * S.predict(feats[n])), d["log_m"])


def main():
    if sys.argv[1:2] == ["--report"]:  # merge the JSON files given and print the table
        return report([r for f in sys.argv[2:] for r in json.load(open(f))])
    cfgs = sys.argv[1:] or list(CONFIGS)
    data, names, feats, folder = load(os.environ.get("DEV_LIST", "benchmarks/modes/dev185_stop34.txt"),
                                      os.environ.get("NEW_CACHE", "/tmp/s35/cache_new"))
    rem = [n for n in names if folder[n] == "remeasured-znver4"]
    out = os.environ.get("OUT", "benchmarks/modes/capacity_dev_stop36.json")  # one per process when run in parallel
    rows = json.load(open(out)) if os.path.exists(out) else []
    done = {r["config"] for r in rows}
    if "analytical" not in done:
        rows += [{"config": "analytical", "split": "any", "task": n, "folder": folder[n],
                  **h.metrics(-data[n]["log_a"], data[n]["log_m"])} for n in names]
    for cfg in cfgs:
        if cfg in done:
            continue
        t0 = time.time()
        for F in sorted({family_of(n) for n in names}):
            S = fit(cfg, data, feats, [n for n in rem if family_of(n) != F])
            rows += [{"config": cfg, "split": "lofo", "task": n, "folder": folder[n], **score(S, n, data, feats)}
                     for n in names if family_of(n) == F]
        for n in rem:
            S = fit(cfg, data, feats, [m for m in rem if m != n])
            rows.append({"config": cfg, "split": "loto", "task": n, "folder": folder[n], **score(S, n, data, feats)})
        S = fit(cfg, data, feats, rem)
        rows += [{"config": cfg, "split": "in-sample", "task": n, "folder": folder[n], **score(S, n, data, feats)}
                 for n in names]
        json.dump(rows, open(out, "w"))
        print(f"[capacity] {cfg}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    report(rows)


def report(rows):
    keys = ("spearman", "top1", "top5", "rank_5pct")
    groups = ((("remeasured-znver4",), "54 re-measured"), (("cpu-znver4-net", "cpu-znver3-net"), "131 nets"),
              (("remeasured-znver4", "cpu-znver4-net", "cpu-znver3-net"), "all 185"))
    cfgs = list(dict.fromkeys(r["config"] for r in rows))
    print("| split | logs | config | " + " | ".join(keys) + " |\n|---|---|---|" + "---|" * len(keys))
    for split in ("lofo", "loto", "in-sample"):
        for fset, label in groups:
            for c in cfgs:
                sel = [r for r in rows if r["folder"] in fset and (r["split"] == split or
                                                                    (c == "analytical" and r["split"] == "any"))
                       and r["config"] == c]
                if split == "loto":
                    sel = [r for r in sel if r["folder"] == "remeasured-znver4"]
                if sel:
                    print(f"| {split} | {label} ({len(sel)}) | {c} | "
                          + " | ".join(f"{np.mean([r[k] for r in sel]):.3f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
