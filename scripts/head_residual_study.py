#!/usr/bin/env python3
"""Which residual puts the fastest schedules first? Leave-one-family-out study.

Every logged record is featurised once (TVM's per-store features summed over
stores, the analytical terms, the analytical latency and the task's roofline bound) and
cached per task as ``.npz`` under ``--cache`` (data only; resumable). Then,
for each residual objective and each held-out family F:

* **zero-shot transfer**: the residual is fitted on every task of the other
  families (the shipped-model situation) and scores F's tasks;
* **k shots** (16/32/64, ``--seeds`` seeds): as HybridCostModel does it, the
  transfer residual (damped by ``pretrained_weight``) plus a task residual
  fitted on k records of the task (weight k / (k + 16)); scored on the rest.

Metrics per task (worst-case ties): Spearman, top-1 and top-5 score, and
``rank_5pct``: the position in the model's order of the first record within
5% of the pool's best (the measurements a search that trusts the ranking
needs; 1 is perfect). Families are held out one at a time; ``--families``
restricts which families are used at all (the development set), so families
kept for a final held-out check are never looked at while choosing.

    python scripts/head_residual_study.py tuning_logs/cpu --out benchmarks/head_study

A change to the analytical model needs a cache of its own, but not TVM's
per-store features again: ``--psf-from`` takes them from another cache of
the same logs (on the 54 CPU logs a whole study then takes about a minute
on 2 cores). ``--hardware`` takes a spec from ``tvm-latmodel calibrate``
for the analytical model in place of the defaults of each log's target (it
changes the analytical terms, so it too needs a cache of its own: a cache
records the spec its terms were computed with and refuses to serve another).

The transfer residual's fit is deterministic; what moves its
held-out metrics is the training set (stop 22: leaving one more family out
moved held-out zero-shot top-1 by -0.040 to +0.018), so a limit tighter
than that cannot tell a change from a reshuffled training set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

SHOTS = (16, 32, 64)


# ----------------------------------------------------------------- featurising
def _cached(cache_dir: str | None, name: str, n_lines: int, hardware: str | None = None) -> dict | None:
    """The cached features of task ``name`` in ``cache_dir``, or None when
    there are none for its current ``n_lines`` log lines (older caches,
    without ``canonical``, held raw per-store rows). ``hardware``: the
    :func:`_hardware_key` the analytical terms must have been computed with
    (None: not checked, for the per-store sums alone)."""
    if not cache_dir:
        return None
    f = os.path.join(cache_dir, name + ".npz")
    if not os.path.exists(f):
        return None
    z = np.load(f, allow_pickle=False)
    if int(z["n_lines"]) != n_lines or "canonical" not in z.files:
        return None
    made_with = str(z["hardware"]) if "hardware" in z.files else "defaults"  # older caches: defaults
    if hardware is not None and made_with != hardware:
        raise SystemExit(f"{f}: analytical terms computed with hardware {made_with}, not {hardware}: "
                         "give a --cache of its own")
    return {k: z[k] for k in z.files}


def _hardware_key(path: str | None) -> str:
    """What a cache records of the hardware spec: ``defaults``, or the spec
    file's name and the sha1 of its bytes."""
    if path is None:
        return "defaults"
    import hashlib

    with open(path, "rb") as f:
        return f"{os.path.basename(path)}:{hashlib.sha1(f.read()).hexdigest()[:12]}"


def featurise(paths, cache_dir: str, psf_from: str | None = None, hardware: str | None = None) -> dict[str, dict]:
    """Per task: {"psf": (n,164), "terms": (n,k), "term_names", "log_a", "log_m", "task_bound"}
    (``psf_from``: a cache folder of the same logs to take the per-store sums from;
    ``hardware``: a spec JSON from ``tvm-latmodel calibrate`` for the analytical model)."""
    from tvm_latmodel.hardware import HardwareSpec
    from tvm_latmodel.model.cost_model import HybridCostModel
    from tvm_latmodel.model.features import per_store_sums
    from tvm_latmodel.model.modes import task_bound_s
    from tvm_latmodel.replay import find_databases, load_database
    from tvm_latmodel.sampling import make_context

    os.makedirs(cache_dir, exist_ok=True)
    hw_key = _hardware_key(hardware)
    spec = HardwareSpec.load(hardware) if hardware is not None else None  # read once, checked before any task
    out = {}
    dbs = []
    for p in paths:
        dbs.extend(find_databases(p))
    for db in dbs:
        name = db.name
        f = os.path.join(cache_dir, name + ".npz")
        n_lines = sum(1 for line in open(db / "database_tuning_record.json") if line.strip())
        cached = _cached(cache_dir, name, n_lines, hw_key)
        if cached is not None and "task_bound" not in cached:
            # Caches before stop 26 hold each record's own bound: add the task's.
            (task,) = load_database(db, name=name)
            hw = HybridCostModel(target=task.target, pretrained=None, hardware=spec)._hardware(task.target)
            cached["task_bound"] = np.array(task_bound_s(task.mod, hw))
            np.savez_compressed(f, **cached)
        if cached is not None:
            out[name] = cached
            continue
        t0 = time.time()
        (task,) = load_database(db, name=name)
        model = HybridCostModel(target=task.target, pretrained=None, hardware=spec)
        ctx = make_context(task.mod, task.target)
        cands = task.candidates()
        ests = model._analytical(ctx, cands)
        # TVM's per-store sums do not depend on the analytical model: a
        # study of a change to the modes takes them from ``psf_from``.
        other = _cached(psf_from, name, n_lines)
        psf = None if other is None else other["psf"]
        if psf is None:
            psf = per_store_sums(model._extractor_for().features(ctx, cands))
        elif len(psf) != len(cands):
            raise SystemExit(f"{psf_from}: {name} has {len(psf)} feature rows for {len(cands)} records")
        names = sorted(ests[0].terms())
        terms = np.array([[e.terms()[k] for k in names] for e in ests], dtype=np.float64)
        d = {"psf": psf, "terms": terms, "term_names": np.array(names),
             "log_a": np.log(np.maximum([e.latency_s for e in ests], 1e-12)),
             "log_m": np.log(task.latencies_s),
             "task_bound": np.array(task_bound_s(task.mod, model._hardware(task.target))),
             "n_lines": np.array(n_lines), "canonical": np.array(1), "hardware": np.array(hw_key)}
        np.savez_compressed(f, **d)
        out[name] = d
        print(f"[features] {name}: {len(cands)} records, {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    return out


FEATURE_SETS = ("psf+terms", "terms")


def features(d: dict, feature_set: str = "psf+terms") -> np.ndarray:
    """What the residual sees: per-store sums (``psf+terms`` only) and the
    analytical terms, the times relative to the roofline bound (so they
    transfer across CPUs)."""
    from tvm_latmodel.model.cost_model import analytical_features

    names = [str(n) for n in d["term_names"]]
    bound = float(d["task_bound"])
    rows = np.array([analytical_features(dict(zip(names, t)), bound) for t in d["terms"]])
    if feature_set == "terms":
        return rows.astype(np.float32)
    return np.concatenate([d["psf"], rows], axis=1).astype(np.float32)


# ------------------------------------------------------------------- metrics
def metrics(scores: np.ndarray, log_m: np.ndarray) -> dict:
    from tvm_latmodel.replay.metrics import rank_order, spearman, top_k_score

    lat = np.exp(log_m)
    order = rank_order(scores, lat)
    good = lat <= lat.min() * 1.05
    return {"spearman": spearman(scores, lat), "top1": top_k_score(scores, lat, 1),
            "top5": top_k_score(scores, lat, 5), "rank_5pct": int(np.flatnonzero(good[order])[0]) + 1}


# --------------------------------------------------------------- objectives
def fit(objective: str, X, la, lm, groups, base=None, seed: int = 0):
    """A ResidualModel for ``objective``; ``base`` is an extra log-correction
    already applied (the damped transfer residual)."""
    from tvm_latmodel.model.residual import ResidualModel

    la = la if base is None else la + base
    return ResidualModel(objective=objective, seed=seed).fit(X, la, lm, groups)


def run(data: dict, objectives, families, seeds: int, pretrained_weight: float, evidence_half: float,
        feature_set: str = "psf+terms", in_sample: bool = False) -> list[dict]:
    """Rows of metrics per (objective, held-out family, task, shots, seed).
    ``in_sample``: the transfer residual is fitted on every task, the scored
    family's included (the in-sample reference for the held-out numbers)."""
    from tvm_latmodel.replay import family_of

    names = [n for n in data if family_of(n) in families]
    feats = {n: features(data[n], feature_set) for n in names}
    rows = []
    for held in sorted(families):
        test = [n for n in names if family_of(n) == held]
        train = [n for n in names if in_sample or family_of(n) != held]
        if not test or not train:
            continue
        X = np.concatenate([feats[n] for n in train])
        la = np.concatenate([data[n]["log_a"] for n in train])
        lm = np.concatenate([data[n]["log_m"] for n in train])
        groups = np.concatenate([[i] * len(data[n]["log_a"]) for i, n in enumerate(train)])
        for obj in objectives:
            pre = None if obj == "analytical" else fit(obj, X, la, lm, groups)
            for n in test:
                d, x = data[n], feats[n]
                corr0 = np.zeros(len(x)) if pre is None else pretrained_weight * pre.predict(x)
                m = metrics(-(d["log_a"] + corr0), d["log_m"])
                rows.append({"objective": obj, "family": held, "task": n, "shots": 0, "seed": 0, **m})
                for k in SHOTS:
                    if len(x) - k < 8:
                        continue
                    for s in range(seeds):
                        rng = np.random.default_rng([s, k])
                        shots = np.sort(rng.choice(len(x), size=k, replace=False))
                        rest = np.setdiff1d(np.arange(len(x)), shots)
                        corr = corr0.copy()
                        if obj != "analytical":
                            task = fit(obj, x[shots], d["log_a"][shots], d["log_m"][shots],
                                       np.zeros(k, dtype=int), base=corr0[shots], seed=s)
                            corr += k / (k + evidence_half) * task.predict(x)
                        m = metrics(-(d["log_a"] + corr)[rest], d["log_m"][rest])
                        rows.append({"objective": obj, "family": held, "task": n, "shots": k, "seed": s, **m})
            print(f"[study] held out {held}: {obj} done", file=sys.stderr, flush=True)
    return rows


def summarise(rows: list[dict]) -> str:
    keys = ("spearman", "top1", "top5", "rank_5pct")
    objs = list(dict.fromkeys(r["objective"] for r in rows))
    lines = ["| shots | objective | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for k in (0, *SHOTS):
        for o in objs:
            sel = [r for r in rows if r["objective"] == o and r["shots"] == k]
            if not sel:
                continue
            # mean over tasks of each seed, then mean and spread (min-max) over seeds
            seeds = sorted({r["seed"] for r in sel})
            per_seed = {key: [np.mean([r[key] for r in sel if r["seed"] == s]) for s in seeds] for key in keys}
            cell = []
            for key in keys:
                v = per_seed[key]
                fmt = "{:.1f}" if key == "rank_5pct" else "{:.3f}"
                cell.append(fmt.format(np.mean(v)) + (f" ({fmt.format(min(v))}–{fmt.format(max(v))})"
                                                       if len(v) > 1 else ""))
            lines.append(f"| {k} | {o} | " + " | ".join(cell) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--out", default="benchmarks/head_study")
    ap.add_argument("--cache", default=None, help="feature cache folder (default OUT/cache)")
    ap.add_argument("--psf-from", default=None,
                    help="another cache folder of the same logs: take TVM's per-store sums from it "
                         "(they do not depend on the analytical model) and compute only the analytical terms")
    ap.add_argument("--hardware", default=None,
                    help="a hardware spec JSON (from `tvm-latmodel calibrate`) for the analytical model "
                         "instead of the defaults of each log's target (use a cache of its own)")
    ap.add_argument("--families", nargs="*", default=None, help="families to use (default: all)")
    ap.add_argument("--objectives", nargs="*",
                    default=["analytical", "reg:squarederror", "reg:headweighted", "rank:pairwise", "rank:ndcg"])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--pretrained-weight", type=float, default=0.5,
                    help="weight of the transfer residual (HybridCostModel's pretrained_weight)")
    ap.add_argument("--evidence-half", type=float, default=16.0)
    ap.add_argument("--tag", default="study")
    ap.add_argument("--feature-set", choices=FEATURE_SETS, default="psf+terms",
                    help="the residual's features: TVM's per-store sums and the analytical terms, or the terms only")
    ap.add_argument("--in-sample", action="store_true",
                    help="fit the transfer residual on every task, the scored family's included")
    args = ap.parse_args()
    from tvm_latmodel.replay import family_of

    data = featurise(args.logs, args.cache or os.path.join(args.out, "cache"), args.psf_from, args.hardware)
    fams = set(args.families) if args.families else {family_of(n) for n in data}
    rows = run(data, args.objectives, fams, args.seeds, args.pretrained_weight, args.evidence_half,
               args.feature_set, args.in_sample)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"{args.tag}.json"), "w") as f:
        json.dump({"families": sorted(fams), "args": vars(args), "rows": rows}, f)
    table = summarise(rows)
    with open(os.path.join(args.out, f"{args.tag}.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
