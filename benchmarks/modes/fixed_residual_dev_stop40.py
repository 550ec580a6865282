"""Stop 40 (PROTOCOL_stop40.md): a change to the modes judged on development data with the residual held fixed.

The 185 development logs: base = the code before the change (BASE_CACHE), new = with it (NEW_CACHE; TVM's
per-store sums taken from BASE_CACHE). Part 1 (stop 39's hoisting patch): stop 39's caches, the defaults;
part 2 (LLVM's full-unroll budget): NEW_CACHE of the code with the change, OUT its own file. The residual (reg:headweighted, W 0.5) is fitted on the **base** terms only and applied to
each held-out log's base and new terms: LOTO (each of the 54 re-measured logs, fitted on the other 53) and
LOFO (each family, fitted on the re-measured logs not of it). Rule 1: a log whose analytical predictions
are equal under both codes gets equal product predictions. Rule 2: on the logs whose predictions change,
mean trials (rank_5pct) new <= base, top-1 and top-5 >= base - 0.01, for LOTO and LOFO.

Run from the repository root with the change in the code: python benchmarks/modes/fixed_residual_dev_stop40.py
(--report FILE: the table of a finished run)."""
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
from rmw_dev_stop38 import load  # noqa: E402
from tvm_latmodel.replay import family_of  # noqa: E402

W = 0.5
KEYS = ("spearman", "top1", "top5", "rank_5pct")


def main():
    warnings.simplefilter("ignore")
    paths = [p.rstrip("/") for p in open("benchmarks/modes/dev185_stop34.txt").read().split()]
    folder = {p.split("/")[-1]: p.split("/")[-2] for p in paths}
    base_cache = os.environ.get("BASE_CACHE", "/tmp/s38/cache_rmw")
    base = load(paths, base_cache)
    new = load(paths, os.environ.get("NEW_CACHE", "/tmp/s39/cache_hoist"), psf_from=base_cache)
    names = [n for n in folder if n in base and n in new]
    changed = {n for n in names if not np.array_equal(base[n]["log_a"], new[n]["log_a"])}
    fb = {n: h.features(base[n]) for n in names}
    fn = {n: h.features(new[n]) for n in names}
    rem = [n for n in names if folder[n] == "remeasured-znver4"]
    rows, unequal = [], []

    def score(split, S, test):
        for n in test:
            pb = base[n]["log_a"] + W * S.predict(fb[n])
            pn = new[n]["log_a"] + W * S.predict(fn[n])
            if n not in changed and not np.array_equal(pb, pn):
                unequal.append((split, n))
            for code, p in (("base", pb), ("new", pn)):
                rows.append({"split": split, "code": code, "task": n, "folder": folder[n], "changed": n in changed,
                             **h.metrics(-p, base[n]["log_m"])})

    for n in names:
        for code, d in (("base", base), ("new", new)):
            rows.append({"split": "analytical", "code": code, "task": n, "folder": folder[n], "changed": n in changed,
                         **h.metrics(-d[n]["log_a"], base[n]["log_m"])})
    for F in sorted({family_of(n) for n in names}):
        score("LOFO", fit_on(base, fb, [n for n in rem if family_of(n) != F]), [n for n in names if family_of(n) == F])
    print("[dev] LOFO done", file=sys.stderr, flush=True)
    for n in rem:
        score("LOTO", fit_on(base, fb, [m for m in rem if m != n]), [n])
    out = os.environ.get("OUT", "benchmarks/modes/hoist_fixed_dev_stop40.json")
    with open(out, "w") as f:
        json.dump({"changed": sorted(changed), "unequal_unchanged": unequal, "rows": rows}, f)
    report(json.load(open(out)))


def report(doc):
    rows = doc["rows"]
    print(f"changed logs ({len(doc['changed'])}): {', '.join(doc['changed'])}")
    print(f"rule 1: unchanged logs with unequal product predictions: {doc['unequal_unchanged'] or 'none'}")
    print("\n| split | logs | base: S / top-1 / top-5 / trials | new |\n|---|---|---|---|")
    for split in ("analytical", "LOFO", "LOTO"):
        for label, pick in (("changed", lambda r: r["changed"]), ("all", lambda r: True)):
            cells = []
            for code in ("base", "new"):
                sel = [r for r in rows if r["split"] == split and r["code"] == code and pick(r)]
                cells.append(" / ".join(f"{np.mean([r[k] for r in sel]):.{2 if k == 'rank_5pct' else 3}f}" for k in KEYS))
            n = len([r for r in rows if r["split"] == split and r["code"] == "base" and pick(r)])
            print(f"| {split} | {label} ({n}) | " + " | ".join(cells) + " |")
    print("\n| log | split | base: S / top-1 / top-5 / trials | new |\n|---|---|---|---|")
    for n in doc["changed"]:
        for split in ("analytical", "LOFO", "LOTO"):
            cells = [" / ".join(f"{r[k]:.3f}" if k != "rank_5pct" else f"{r[k]:.0f}" for k in KEYS)
                     for code in ("base", "new") for r in rows if r["split"] == split and r["code"] == code and r["task"] == n]
            if cells:
                print(f"| {n} | {split} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--report"]:
        report(json.load(open(sys.argv[2])))
    else:
        main()
