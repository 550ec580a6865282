"""Stop 43 part 3 (PROTOCOL_stop43.md): does the shipped residual gain from the Intel guest's used logs?

S' = the shipped recipe (``train_shipped_model.py tuning_logs/remeasured-znver4/* --hold-out``) on HEAD's
code; R1 = the same with the used logs of ``tuning_logs/cpu-rocketlake-te`` (the 46 listed in ``benchmarks/shipped_residual_logs.txt``: every log there up to set 23).
Every log is featurised once, each folder with its own ``hardware.json`` (as ``train_on_machines`` does),
then residuals are fitted (``ResidualModel``, the shipped objective ``DEFAULT_OBJECTIVE``, seed 0) on subsets of the rows:

* LOFO: for each of the 13 families of ``cpu-rocketlake-te``, S' and R1 fitted without any log of the
  family (either machine) score its logs zero-shot; in-sample (fitted on everything) beside it;
* networks: the logs of ``cpu-znver3-net`` and ``cpu-znver4-net`` (in neither training set) scored by the
  full S' and R1.

A zero-shot score is the product's: log analytical + 0.5 x residual (``HybridCostModel``'s
``pretrained_weight``). Per log (``head_residual_study.metrics``): Spearman, top-1, top-5 and trials = the position in the
model's order of the first record within 5% of the best (ties worst case; the static ranking, as the
development gate's ``rank_5pct``). Run from the repository root:

    FEATURE_CACHE=DIR python benchmarks/modes/residual_data_lofo_stop43.py OUT.json

(A log that loads no task, e.g. one whose every run failed, is skipped and named.)
"""
import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
sys.path.insert(0, os.getcwd())
import head_residual_study as h  # noqa: E402
from tvm_latmodel.hardware import HardwareSpec  # noqa: E402
from tvm_latmodel.model.cost_model import HybridCostModel  # noqa: E402
from tvm_latmodel.model.residual import DEFAULT_OBJECTIVE  # noqa: E402
from tvm_latmodel.replay import family_of, find_databases, load_database  # noqa: E402
from tvm_latmodel.sampling import make_context  # noqa: E402

# The Intel logs R1 is fitted on (``benchmarks/shipped_residual_logs.txt``, the shipped recipe's list): every
# log of ``cpu-rocketlake-te`` up to set 23, so that sets recorded there later stay out of a rerun.
INTEL_LOGS = frozenset(os.path.basename(line.strip().rstrip("/")) for line in open("benchmarks/shipped_residual_logs.txt")
                       if line.strip().startswith("tuning_logs/cpu-rocketlake-te/"))
FAMILIES = ["T2D", "C3D", "DIL", "CBR", "GMM", "C1D", "DEP", "C2D", "GRP", "NRM", "CAP", "SFM", "TBG"]
ZEN4_SPEC = "benchmarks/remeasure/znver4_hardware.json"
W = 0.5
CACHE = os.environ.get("FEATURE_CACHE")  # a folder: each log's rows kept there, so a rerun resumes


def featurise(folder: str, keep=None):
    """{task name: (X, log analytical, log measured)} of every log in ``folder`` (or of those named in ``keep``)."""
    own = os.path.join(folder, "hardware.json")
    spec = HardwareSpec.load(own if os.path.isfile(own) else ZEN4_SPEC)
    out = {}
    for db in find_databases(folder):
        if keep is not None and db.name not in keep:
            continue
        cached = os.path.join(CACHE, f"{os.path.basename(folder)}__{db.name}.npz") if CACHE else None
        if cached and os.path.exists(cached):
            z = np.load(cached)
            out[db.name] = (z["X"], z["la"], z["lm"])
            continue
        tasks = load_database(db, name=db.name)
        if len(tasks) != 1:
            print(f"[feat] {folder} {db.name}: skipped ({len(tasks)} tasks loaded)", file=sys.stderr, flush=True)
            continue
        (task,) = tasks
        m = HybridCostModel(target=task.target, hardware=spec, pretrained=None, min_samples=10**9)
        m.update(make_context(task.mod, task.target), task.candidates(), task.results())
        out[db.name] = (np.asarray(m.X_, dtype=np.float32), np.asarray(m.log_analytical_),
                        np.asarray(m.log_measured_))
        if cached:
            np.savez(cached, X=out[db.name][0], la=out[db.name][1], lm=out[db.name][2])
        print(f"[feat] {folder} {db.name}: {len(m.X_)} rows", file=sys.stderr, flush=True)
    return out


def fit(data: dict, names):
    names = [n for n in names if n in data]
    X = np.concatenate([data[n][0] for n in names])
    la = np.concatenate([data[n][1] for n in names])
    lm = np.concatenate([data[n][2] for n in names])
    groups = np.concatenate([np.full(len(data[n][0]), i) for i, n in enumerate(names)])
    return h.fit(DEFAULT_OBJECTIVE, X, la, lm, groups)


def score(model, rows) -> dict:
    """``head_residual_study.metrics`` of the product's zero-shot scores (its ``rank_5pct`` as ``trials``)."""
    X, la, lm = rows
    m = h.metrics(-(la + W * model.predict(X)), lm)
    return {"spearman": m["spearman"], "top1": m["top1"], "top5": m["top5"], "trials": m["rank_5pct"]}


def mean(rows):
    return {k: float(np.mean([r[k] for r in rows])) for k in ("spearman", "top1", "top5", "trials")}


def compare(recipes: dict, data: dict, lofo_names, nets, out: str) -> dict:
    """LOFO over FAMILIES (the logs ``lofo_names`` of each family held out of every recipe) and the network
    logs ``nets`` scored by each recipe fitted on all its logs; written to ``out`` and printed."""
    full = {r: fit(data, names) for r, names in recipes.items()}
    report = {"lofo": {}, "networks": {}}
    for fam in FAMILIES:
        logs = sorted(n for n in lofo_names if family_of(n) == fam)
        row = {}
        for r, names in recipes.items():
            held = fit(data, [n for n in names if family_of(n) != fam])
            row[r] = {"held_out": mean([score(held, data[n]) for n in logs]),
                      "in_sample": mean([score(full[r], data[n]) for n in logs])}
        report["lofo"][fam] = {"logs": logs, **row}
        print(f"[lofo] {fam} ({len(logs)} logs): " + "; ".join(
            f"{r} held-out {v['held_out']['top1']:.3f}/{v['held_out']['top5']:.3f}/{v['held_out']['trials']:.2f}"
            for r, v in row.items()), file=sys.stderr, flush=True)
    for r in recipes:
        report["networks"][r] = {n: score(full[r], data[n]) for n in sorted(nets)}
    summary = {}
    for r in recipes:
        summary[r] = {"lofo_held_out": mean([report["lofo"][f][r]["held_out"] for f in FAMILIES]),
                      "lofo_in_sample": mean([report["lofo"][f][r]["in_sample"] for f in FAMILIES]),
                      "networks": mean(list(report["networks"][r].values()))}
    report["summary"] = summary
    report["recipes"] = recipes
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    for r, s in summary.items():
        for k, v in s.items():
            print(f"{r:3s} {k:15s} S {v['spearman']:.3f} top-1 {v['top1']:.3f} top-5 {v['top5']:.3f} "
                  f"trials {v['trials']:.2f}")
    return report


def main(out: str) -> None:
    warnings.simplefilter("ignore")
    zen4 = featurise("tuning_logs/remeasured-znver4")
    intel = featurise("tuning_logs/cpu-rocketlake-te", keep=INTEL_LOGS)
    nets = {**featurise("tuning_logs/cpu-znver3-net"), **featurise("tuning_logs/cpu-znver4-net")}
    data = {**zen4, **intel, **nets}
    recipes = {"S'": sorted(zen4), "R1": sorted(zen4) + sorted(intel)}
    compare(recipes, data, list(zen4) + list(intel), nets, out)


if __name__ == "__main__":
    main(sys.argv[1])
