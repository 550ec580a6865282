"""Stop 38 (PROTOCOL_stop38.md): a full pretrained weight on kernels the residual knows, development data only.

The 185 development logs (DEV_LIST), each featurised with the spec of its own folder's hardware.json into
CACHE. Zero-shot, the residual fitted as shipped (reg:headweighted) on the re-measured logs of each split:
LOFO (each family of the 185 held out; fitted on the re-measured logs not of it) and LOTO (each of the 54
re-measured logs; fitted on the other 53). A scored log's pretrained weight is K when its kernel signature
(tvm_latmodel.model.program.kernel_signature of the workload) is one of the fit's training logs', else 0.5;
base is 0.5 everywhere. Fits do not depend on K: one fit per split serves every candidate.

Needs known_kernel_weight_refused.patch applied (kernel_signature). Run from the repository root:
python benchmarks/modes/known_kernel_dev_stop38.py
(CACHE=folder for the features, default /tmp/s38/cache; OUT=results json)."""
import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, "scripts")
sys.path.insert(0, ".")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import head_residual_study as h  # noqa: E402
from lofo_ship_stop33 import fit as fit_on  # noqa: E402
from rmw_dev_stop38 import load  # noqa: E402 - each log featurised with its folder's hardware.json
from tvm_latmodel.replay import family_of, load_database  # noqa: E402

BASE_W = 0.5
CANDIDATES = {"base": BASE_W, "K0.75": 0.75, "K1.0": 1.0}


def main():
    from tvm_latmodel.model.program import kernel_signature  # known_kernel_weight_refused.patch

    warnings.simplefilter("ignore")
    paths = [p.rstrip("/") for p in open(os.environ.get("DEV_LIST", "benchmarks/modes/dev185_stop34.txt")).read().split()]
    cache = os.environ.get("CACHE", "/tmp/s38/cache")
    folder = {p.split("/")[-1]: p.split("/")[-2] for p in paths}
    assert len(folder) == len(paths), "two logs of one name"
    data = load(paths, cache)
    names = [n for n in folder if n in data]
    feats = {n: h.features(data[n]) for n in names}
    sig = {}
    for p in paths:
        (t,) = load_database(p)[:1]
        sig[p.split("/")[-1]] = kernel_signature(t.mod)
    rem = [n for n in names if folder[n] == "remeasured-znver4"]

    def fit(train):
        return fit_on(data, feats, train)

    rows = []

    def score(split, S, train, test):
        known = {sig[n] for n in train}
        for n in test:
            c = S.predict(feats[n])
            d = data[n]
            rows.append({"config": "analytical", "split": split, "task": n, "folder": folder[n], "known": False,
                         **h.metrics(-d["log_a"], d["log_m"])})
            for cfg, K in CANDIDATES.items():
                w = K if sig[n] in known else BASE_W
                rows.append({"config": cfg, "split": split, "task": n, "folder": folder[n],
                             "known": sig[n] in known, **h.metrics(-(d["log_a"] + w * c), d["log_m"])})

    fams = sorted({family_of(n) for n in names})
    for F in fams:
        train = [n for n in rem if family_of(n) != F]
        score("LOFO", fit(train), train, [n for n in names if family_of(n) == F])
        print(f"[lofo] {F}", file=sys.stderr, flush=True)
    for n in rem:
        train = [m for m in rem if m != n]
        score("LOTO", fit(train), train, [n])
    print(f"[loto] {len(rem)} logs", file=sys.stderr, flush=True)
    out = os.environ.get("OUT", "benchmarks/modes/known_kernel_dev_stop38.json")
    with open(out, "w") as f:
        json.dump(rows, f)
    report(rows)


def report(rows):
    keys = ("spearman", "top1", "top5", "rank_5pct")
    groups = [("LOTO", {"remeasured-znver4"}, "LOTO 54"), ("LOFO", None, "LOFO all 185"),
              ("LOFO", {"remeasured-znver4"}, "LOFO 54"), ("LOFO", {"cpu-znver3-net", "cpu-znver4-net"}, "LOFO 131")]
    print("| split | logs (known) | " + " | ".join(["analytical"] + list(CANDIDATES)) + " |")
    print("|---|---|" + "---|" * (1 + len(CANDIDATES)))
    for split, fset, label in groups:
        cells = []
        for cfg in ["analytical"] + list(CANDIDATES):
            sel = [r for r in rows if r["split"] == split and r["config"] == cfg
                   and (fset is None or r["folder"] in fset)]
            cells.append(" / ".join(f"{np.mean([r[k] for r in sel]):.3f}" if k != "rank_5pct" else
                                    f"{np.mean([r[k] for r in sel]):.2f}" for k in keys))
        known = sum(r["known"] for r in rows if r["split"] == split and r["config"] == "base"
                    and (fset is None or r["folder"] in fset))
        n = len(sel)
        print(f"| {label} | {n} ({known}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--report"]:
        report(json.load(open(sys.argv[2])))
    else:
        main()
