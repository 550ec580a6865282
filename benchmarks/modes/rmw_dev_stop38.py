"""Stop 38, part 3 (PROTOCOL_stop38.md): a read-modify-write counted once in the cache capacity check.

The 185 development logs (DEV_LIST), each featurised with the spec of its own folder's hardware.json:
base from BASE_CACHE (the code before the change, part 1's cache), new into NEW_CACHE (the code now; TVM's
per-store sums taken from BASE_CACHE). For each: the analytical model alone; zero-shot with the residual
(reg:headweighted, pretrained weight 0.5) refitted on that code's terms: LOFO (each family of the 185
held out, fitted on the re-measured logs not of it), LOTO (each of the 54 re-measured logs, fitted on the
other 53) and in-sample (fitted on all 54, scored on all 185).

Run from the repository root with the change in the code: python benchmarks/modes/rmw_dev_stop38.py
(--report FILE prints the table of a finished run)."""
import json
import os
import sys
import warnings
from collections import defaultdict

import numpy as np

sys.path.insert(0, "scripts")
sys.path.insert(0, ".")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import head_residual_study as h  # noqa: E402
from lofo_ship_stop33 import fit as fit_on  # noqa: E402
from tvm_latmodel.replay import family_of  # noqa: E402

W = 0.5


def load(paths, cache, psf_from=None):
    by_folder = defaultdict(list)
    for p in paths:
        by_folder[os.path.dirname(p)].append(p)
    data = {}
    for fdir, ps in sorted(by_folder.items()):
        spec = os.path.join(fdir, "hardware.json")
        data.update(h.featurise(ps, cache, psf_from=psf_from, hardware=spec if os.path.isfile(spec) else None))
    return data


def study(code, data, names, folder, rows):
    feats = {n: h.features(data[n]) for n in names}
    rem = [n for n in names if folder[n] == "remeasured-znver4"]

    def fit(train):
        return fit_on(data, feats, train)

    def score(split, S, test):
        for n in test:
            d = data[n]
            rows.append({"code": code, "split": split, "task": n, "folder": folder[n],
                         **h.metrics(-(d["log_a"] + W * S.predict(feats[n])), d["log_m"])})

    for n in names:
        d = data[n]
        rows.append({"code": code, "split": "analytical", "task": n, "folder": folder[n],
                     **h.metrics(-d["log_a"], d["log_m"])})
    for F in sorted({family_of(n) for n in names}):
        score("LOFO", fit([n for n in rem if family_of(n) != F]), [n for n in names if family_of(n) == F])
    for n in rem:
        score("LOTO", fit([m for m in rem if m != n]), [n])
    score("in-sample", fit(rem), names)
    print(f"[dev] {code} done", file=sys.stderr, flush=True)


def main():
    warnings.simplefilter("ignore")
    paths = [p.rstrip("/") for p in open(os.environ.get("DEV_LIST", "benchmarks/modes/dev185_stop34.txt")).read().split()]
    folder = {p.split("/")[-1]: p.split("/")[-2] for p in paths}
    base_cache = os.environ.get("BASE_CACHE", "/tmp/s38/cache")
    new_cache = os.environ.get("NEW_CACHE", "/tmp/s38/cache_rmw")
    base = load(paths, base_cache)
    new = load(paths, new_cache, psf_from=base_cache)
    names = [n for n in folder if n in base and n in new]
    rows = []
    study("base", base, names, folder, rows)
    study("new", new, names, folder, rows)
    out = os.environ.get("OUT", "benchmarks/modes/rmw_dev_stop38.json")
    with open(out, "w") as f:
        json.dump(rows, f)
    report(rows)


def report(rows):
    keys = ("spearman", "top1", "top5", "rank_5pct")
    sets = [("all 185", None), ("54 re-measured", {"remeasured-znver4"}),
            ("131 network", {"cpu-znver3-net", "cpu-znver4-net"})]
    print("| split | logs | base: S / top-1 / top-5 / trials | new |")
    print("|---|---|---|---|")
    for split in ("analytical", "LOFO", "LOTO", "in-sample"):
        for label, fset in sets:
            if split == "LOTO" and fset != {"remeasured-znver4"}:
                continue
            cells = []
            for code in ("base", "new"):
                sel = [r for r in rows if r["split"] == split and r["code"] == code
                       and (fset is None or r["folder"] in fset)]
                cells.append(" / ".join((f"{np.mean([r[k] for r in sel]):.3f}" if k != "rank_5pct"
                                         else f"{np.mean([r[k] for r in sel]):.2f}") for k in keys))
            print(f"| {split} | {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--report"]:
        report(json.load(open(sys.argv[2])))
    else:
        main()
