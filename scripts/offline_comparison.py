#!/usr/bin/env python3
"""Offline comparison of every model on every recorded tuning log.

For each model (analytical, hybrid, xgb, xgb-nowarmup, random), each shot
count and leave-one-task-out transfer, and each seed, replays the logs (same
tasks, same seeded shots, same seed for every model) and writes:

* ``reports.json``: every per-task result (metrics, simulated-search curve);
* ``table.md``: per setting and model the mean over tasks, as the mean and
  the range over seeds, then per-task tables (first seed);
* ``metrics_vs_shots.png``, ``curves.png`` (simulated tuning curves),
  ``scatter.png`` (predicted score versus measured latency).

Transfer: each scored log first learns from every record of the other
tasks (leave one task out; ``--transfer-scope family``: one family out).
With ``--pool-logs`` the other tasks are the pool's alone: the scored logs
never learn from one another (a held-out set stays held out).

``xgb`` is TVM's XGBModel with its defaults (random below 100 samples);
``xgb-nowarmup`` is ``XGBModel(num_warmup_samples=0)``. ``hybrid`` starts
with no pretrained residual here (``pretrained=None``): the shipped one was
trained on these logs; its transfer is what the ``transfer`` setting shows.

An XGBoost result is one draw, not a repeatable run: TVM's ``PerStoreFeature``
orders two tied buffer slots either way from one extraction to the next (a
few DEP and MBV2 records), XGBModel trains on the rows as TVM gives them, so
a transfer result at one seed moves between processes.
``scripts/check_xgb_repeatability.py`` shows it: on identical rows XGBModel's
result repeats exactly. (The hybrid orders the tied slots canonically.)

Speed: tasks run in ``--jobs`` worker processes (default: every core).
Each worker loads the logs once and shares TVM's per-store features and the
analytical estimates of every schedule across models, shot counts and seeds
(``CachedPerStoreFeature``, which returns exactly what ``PerStoreFeature``
does). Each (model, setting, seed, task) result is cached as JSON under
``--cache/<code key>/``: the key hashes the package's source and the TVM and
XGBoost versions, so a change to the model starts a fresh cache; a corrupt
cache file is recomputed with a warning. An interrupted run resumes.

    python scripts/offline_comparison.py tuning_logs/cpu --out benchmarks/offline --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

MODELS = ("analytical", "hybrid", "xgb", "xgb-nowarmup", "random")
KEYS = ("spearman", "pairwise_accuracy", "top1_score", "top5_score", "trials_to_5pct")


def _setting_name(shots: int, transfer: bool, n_tasks: int, scope: str = "task") -> str:
    # Transfer results depend on the pool of other tasks: key them by its size
    # (and by what is left out of it).
    if not transfer:
        return f"s{shots}"
    return f"s{shots}-transfer{n_tasks}" + ("" if scope == "task" else f"-without-{scope}")


def code_key() -> str:
    """Hash of the package's source and of the TVM and XGBoost versions."""
    import tvm
    import xgboost

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tvm_latmodel")
    h = hashlib.sha256(f"tvm {tvm.__version__} xgboost {xgboost.__version__}".encode())
    for dirpath, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            if name.endswith((".py", ".json")):
                path = os.path.join(dirpath, name)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()[:12]


# ------------------------------------------------------------------ workers
_TASKS: list = []
_EXTRACTOR = None
_PRETRAINED = None  # None, or "shipped" (hybrid starts from the shipped residual)
_SCOPE = "task"  # what transfer leaves out: the task, or its whole family
_POOL: frozenset = frozenset()  # names of the --pool-logs tasks: transfer learns from these alone


def _init_worker(logs: list[str], pretrained: str | None = None, scope: str = "task",
                 pool: frozenset = frozenset()) -> None:
    global _TASKS, _EXTRACTOR, _PRETRAINED, _SCOPE, _POOL
    _PRETRAINED = pretrained
    _SCOPE = scope
    _POOL = frozenset(pool)
    warnings.simplefilter("ignore")
    from tvm_latmodel.model.features import shared_extractor
    from tvm_latmodel.replay import load_tasks

    _TASKS = load_tasks(logs)
    _EXTRACTOR = shared_extractor()


def transfer_pool(tasks, task, scope: str = "task", pool=frozenset()) -> list:
    """The tasks ``task`` is scored among with transfer: itself and those it
    learns from. With ``pool`` (the names of the ``--pool-logs`` tasks) it
    learns from those alone, never from the other scored logs (a held-out
    set's logs are held out from one another too); otherwise from every
    other task. ``scope="family"`` also leaves out its whole family."""
    from tvm_latmodel.replay import family_of

    keep = [t for t in tasks if t is task or not pool or t.name in pool]
    if scope == "family":
        keep = [t for t in keep if t is task or family_of(t.name) != family_of(task.name)]
    return keep


def transfer_pool_size(names, pool_names) -> int:
    """How many tasks each scored task is among with transfer (itself and
    what it learns from): the key of a transfer result in the cache."""
    return len(pool_names) + 1 if pool_names else len(names)


def run_one(tasks, task, model: str, shots: int, transfer: bool, seed: int) -> dict:
    from tvm_latmodel.model.registry import make_model
    from tvm_latmodel.replay import ReplayEvaluator

    ev = ReplayEvaluator(shots=shots, transfer=transfer, seed=seed)
    if not ev.scorable(task):
        # Mark the result skipped (cached like any other) instead of failing
        # the whole grid.
        return {"model": model, "shots": shots, "transfer": transfer, "task": task.name, "seed": seed,
                "skipped": f"{len(task.records)} valid records, too few to hold out two after {shots} shots"}
    t0 = time.time()
    if transfer:
        tasks = transfer_pool(tasks, task, _SCOPE, _POOL)
    rep = ev.evaluate(tasks, lambda t: make_model(model, seed=seed, target=t.target, pretrained=_PRETRAINED,
                                                  extractor=_EXTRACTOR, hardware=t.hardware),
                      model_name=model, only=[task.name])
    (metrics,) = rep.to_dict()["tasks"]
    search = rep.searches[task.name]
    return {
        "model": model, "shots": shots, "transfer": transfer, "task": task.name, "seed": seed,
        "metrics": metrics, "best_so_far_s": [float(x) for x in search.best_so_far_s],
        "pool_best_s": float(task.latencies_s.min()),
        "predictions": [{"measured_s": p["measured_s"], "score": p["score"]} for p in rep.predictions],
        "seconds": round(time.time() - t0, 1),
    }


def _run_task(task_name: str, jobs: list[tuple], cache_dir: str) -> list[dict]:
    """Every (model, shots, transfer, seed) of one task, in a worker; each
    result is written to the cache as soon as it exists."""
    from tvm_latmodel.fileformat import write_json

    (task,) = [t for t in _TASKS if t.name == task_name]
    out = []
    for model, shots, transfer, seed, path in jobs:
        r = run_one(_TASKS, task, model, shots, transfer, seed)
        write_json(path, r)
        out.append(r)
    return out


def _read_cached(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            r = json.load(f)
        if not isinstance(r, dict) or not (
            "skipped" in r or all(k in r.get("metrics", {}) for k in KEYS)
        ):
            raise ValueError("missing metrics")
        return r
    except (OSError, ValueError) as err:
        print(f"warning: {path}: corrupt cache file ({err}); recomputing it", file=sys.stderr)
        return None


_NAN = {"metrics": {k: float("nan") for k in KEYS}}


def mean_metrics(results: list[dict]) -> dict:
    return {k: float(np.mean([r["metrics"][k] for r in results])) for k in KEYS}


def scored_tasks(results: dict, shots: int, transfer: bool, task_names, seeds, models) -> list[str]:
    """Tasks every model scored at this setting for every seed (a task with
    too few records for the shots is skipped for all of them alike)."""
    return [t for t in task_names
            if all("skipped" not in results[(m, shots, transfer, t, s)] for m in models for s in seeds)]


def seed_spread(results: dict, model: str, shots: int, transfer: bool, task_names, seeds) -> dict:
    """Per metric: (mean over seeds, min, max) of the mean over tasks."""
    per_seed = [mean_metrics([results[(model, shots, transfer, t, s)] for t in task_names]) for s in seeds]
    return {k: (float(np.mean([p[k] for p in per_seed])), min(p[k] for p in per_seed), max(p[k] for p in per_seed))
            for k in KEYS}


def write_tables(out: str, settings, models, results: dict, task_names: list[str], seeds,
                 scope: str = "task") -> str:
    lines = [f"Mean over the tasks scored at each setting (of {len(task_names)}); "
             "with several seeds: mean over seeds (min–max).\n",
             "| setting | model | tasks | " + " | ".join(KEYS) + " |", "|---|---|---|" + "---|" * len(KEYS)]
    skipped_notes = []
    for shots, transfer in settings:
        scored = scored_tasks(results, shots, transfer, task_names, seeds, models)
        label = f"{shots} shots" + ((" + transfer" + ("" if scope == "task" else f" (without the {scope})"))
                                    if transfer else "")
        if len(scored) < len(task_names):
            missing = [t for t in task_names if t not in scored]
            skipped_notes.append(f"{label}: not scored on {', '.join(missing)} (too few records to hold out two).")
        if not scored:
            continue
        for model in models:
            m = seed_spread(results, model, shots, transfer, scored, seeds)
            cells = []
            for k in KEYS:
                fmt = "{:.1f}" if k == "trials_to_5pct" else "{:.3f}"
                mean, lo, hi = m[k]
                cells.append(fmt.format(mean) + (f" ({fmt.format(lo)}–{fmt.format(hi)})" if len(seeds) > 1 else ""))
            lines.append(f"| {label} | {model} | {len(scored)} | " + " | ".join(cells) + " |")
    lines.extend("\n" + n for n in skipped_notes)
    lines.append(f"\nSeeds {', '.join(map(str, seeds))}. Tasks: {', '.join(task_names)}.\n")
    lines.append(f"\nPer-task tables below are seed {seeds[0]}.\n")
    first = {k[:4]: v for k, v in results.items() if k[4] == seeds[0]}
    results = first
    for key in ("spearman", "top5_score", "trials_to_5pct"):
        lines.append(f"\n**{key} per task**\n")
        cols = [(s, tr, m) for s, tr in settings for m in models]
        lines.append("| task | " + " | ".join(f"{m}@{s}{'T' if tr else ''}" for s, tr, m in cols) + " |")
        lines.append("|---|" + "---|" * len(cols))
        for t in task_names:
            vals = [results[(m, s, tr, t)].get("metrics", {}).get(key) for s, tr, m in cols]
            lines.append(f"| {t} | " + " | ".join("–" if v is None else f"{v:.0f}" if key == "trials_to_5pct"
                                                  else f"{v:.2f}" for v in vals) + " |")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    return table


def write_plots(out: str, settings, models, results: dict, task_names: list[str]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    plain = [s for s, tr in settings if not tr]
    fig = Figure(figsize=(4 * len(KEYS), 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    for i, key in enumerate(KEYS):
        ax = fig.add_subplot(1, len(KEYS), i + 1)
        for model in models:
            ys = [mean_metrics([results[(model, s, False, t)] for t in task_names
                                if "skipped" not in results[(model, s, False, t)]] or [_NAN])[key] for s in plain]
            ax.plot(plain, ys, marker="o", label=model)
        ax.set_xlabel("shots per task")
        ax.set_title(key)
        ax.legend(fontsize=7)
    fig.savefig(os.path.join(out, "metrics_vs_shots.png"), dpi=80)

    # Tuning curves: best found / pool best after n measured, mean over tasks.
    fig = Figure(figsize=(4.2 * len(plain), 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    for i, shots in enumerate(plain):
        ax = fig.add_subplot(1, len(plain), i + 1)
        for model in models:
            curves = []
            for t in task_names:
                r = results[(model, shots, False, t)]
                if "skipped" not in r:
                    curves.append(np.array(r["best_so_far_s"]) / r["pool_best_s"])
            if not curves:
                continue
            n = max(len(c) for c in curves)
            padded = np.array([np.concatenate([c, np.full(n - len(c), c[-1])]) for c in curves])
            ax.plot(np.arange(1, n + 1), padded.mean(axis=0), label=model)
        ax.set_yscale("log")
        ax.set_xlabel("schedules measured (simulated)")
        ax.set_ylabel("best found / pool best (mean over tasks)")
        ax.set_title(f"{shots} shots" + ("" if ax.lines else ": no task has enough records"))
        if ax.lines:
            ax.legend(fontsize=7)
    fig.savefig(os.path.join(out, "curves.png"), dpi=80)

    # Predicted versus measured: analytical at the fewest shots, the learned
    # models at the most.
    cols = 4
    rows = -(-len(task_names) // cols)
    fig = Figure(figsize=(4 * cols, 3.2 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    for i, t in enumerate(task_names):
        ax = fig.add_subplot(rows, cols, i + 1)
        series = [("analytical", plain[0], "tab:blue"), ("hybrid", plain[-1], "tab:orange"),
                  ("xgb", plain[-1], "tab:green")]
        for model, shots, color in series:
            if model not in models:
                continue
            r = results[(model, shots, False, t)]
            if "skipped" in r:
                continue
            meas = np.array([p["measured_s"] for p in r["predictions"]])
            score = np.array([p["score"] for p in r["predictions"]])
            ax.scatter(meas / r["pool_best_s"], score / score.max(), s=8, alpha=0.6, color=color,
                       label=f"{model}@{shots} (Spearman {r['metrics']['spearman']:.2f})")
        ax.set_xscale("log")
        ax.set_xlabel("measured / pool best")
        ax.set_ylabel("score / max score")
        ax.set_title(t)
        ax.legend(fontsize=6)
    fig.savefig(os.path.join(out, "scatter.png"), dpi=80)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--shots", nargs="+", type=int, default=[0, 16, 32, 64])
    ap.add_argument("--no-transfer", action="store_true")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: every core)")
    ap.add_argument("--out", default="benchmarks/offline")
    ap.add_argument("--cache", default=None, help="per-result JSON cache (default OUT/cache)")
    ap.add_argument("--pretrained", choices=("none", "shipped"), default="none",
                    help="hybrid's residual to start from: none (default; the shipped one was trained on the "
                         "recorded logs) or shipped (for logs it was not trained on: held-out checks)")
    ap.add_argument("--transfer-scope", choices=("task", "family"), default="task",
                    help="what transfer leaves out of the other tasks' records: the scored task only "
                         "(leave one task out, default) or its whole family (leave one family out)")
    ap.add_argument("--pool-logs", nargs="+", default=[],
                    help="logs used only as the transfer pool, never scored: each scored log then learns "
                         "from these alone, not from the other scored logs (e.g. the training logs when "
                         "the scored logs are a held-out set)")
    ap.add_argument("--cache-key", default=None,
                    help="reuse the results of this code key (knowingly: after a change that cannot "
                         "affect them); default: the hash of the current code")
    args = ap.parse_args()

    from tqdm import tqdm

    from tvm_latmodel.replay import find_databases

    t_start = time.time()
    models = tuple(args.models)
    names = sorted({d.name for p in args.logs for d in find_databases(p)})
    pool_names = {d.name for p in args.pool_logs for d in find_databases(p)}
    if pool_names & set(names):
        ap.error(f"--pool-logs repeats scored tasks: {sorted(pool_names & set(names))}")
    if args.pool_logs and args.no_transfer:
        ap.error("--pool-logs is the transfer pool; it means nothing with --no-transfer")
    n_pool = transfer_pool_size(names, pool_names)
    pretrained = None if args.pretrained == "none" else "shipped"
    key = args.cache_key or code_key()
    if pretrained and not args.cache_key:
        key += "-shipped"
    cache = os.path.join(args.cache or os.path.join(args.out, "cache"), key)
    os.makedirs(cache, exist_ok=True)
    settings = [(s, False) for s in args.shots] + ([] if args.no_transfer else [(0, True)])
    results: dict = {}
    # Work units are (seed, task), seed-major: a stopped run leaves whole seeds done.
    todo: dict[tuple[int, str], list] = {}
    for seed in args.seeds:
        for task in names:
            for shots, transfer in settings:
                for model in models:
                    path = os.path.join(cache, f"{model}-{_setting_name(shots, transfer, n_pool, args.transfer_scope)}"
                                                       f"-seed{seed}-{task}.json")
                    r = _read_cached(path)
                    if r is not None:
                        results[(model, shots, transfer, task, seed)] = r
                    else:
                        todo.setdefault((seed, task), []).append((model, shots, transfer, seed, path))
    n_jobs = sum(len(v) for v in todo.values())
    print(f"[offline] {len(names)} tasks, {len(results)} results cached, {n_jobs} to compute "
          f"with {args.jobs} workers (cache {cache})", file=sys.stderr, flush=True)
    if todo:
        bar = tqdm(total=n_jobs, desc="replay", unit="result", file=sys.stderr)
        with ProcessPoolExecutor(max_workers=max(1, min(args.jobs, len(todo))), initializer=_init_worker,
                                 initargs=(list(args.logs) + list(args.pool_logs), pretrained, args.transfer_scope,
                                           frozenset(pool_names))) as pool:
            futures = {pool.submit(_run_task, unit[1], jobs, cache): unit for unit, jobs in todo.items()}
            for fut in as_completed(futures):
                for r in fut.result():
                    results[(r["model"], r["shots"], r["transfer"], r["task"], r["seed"])] = r
                bar.update(len(todo[futures[fut]]))
        bar.close()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "reports.json"), "w") as f:
        json.dump({"logs": args.logs, "pool_logs": args.pool_logs, "seeds": args.seeds, "tasks": names, "code_key": os.path.basename(cache),
                   "results": [{k: v for k, v in r.items() if k != "predictions"} for r in results.values()]},
                  f, indent=1)
    done = [s for s in args.seeds
            if all((m, sh, tr, t, s) in results for m in models for sh, tr in settings for t in names)]
    if not done:
        print("[offline] no seed is complete yet: rerun the same command to resume", file=sys.stderr)
        return 1
    if done != list(args.seeds):
        print(f"[offline] tables over the complete seeds only: {done}", file=sys.stderr)
    print(write_tables(args.out, settings, models, results, names, done, args.transfer_scope))
    first = {k[:4]: v for k, v in results.items() if k[4] == done[0]}
    write_plots(args.out, settings, models, first, names)
    print(f"[offline] wall time {time.time() - t_start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
