#!/usr/bin/env python3
"""Whole networks side by side at equal trials: (a) default Relax fusion + TVM's
XGBoost model, (b) default + hybrid, (c) planner + hybrid, and the task schedulers.

Each configuration is one ``tvm-latmodel tune-network ... --json`` run in its
own process and work directory; its JSON is written to
``OUT/NETWORK/CONFIG-tTRIALS-sSEED.json`` as soon as it finishes, so an
interrupted benchmark resumes where it stopped (``--force`` reruns). A run
that fails is recorded with its exit status and the tail of its stderr, and
the benchmark goes on. At the end ``OUT/summary.json`` and ``OUT/summary.md``
hold one row per run: end-to-end latency, untuned latency, trials, tuning
wall time, per-stage latency; with matplotlib, ``OUT/stages.png`` draws the
per-stage breakdown. PyTorch eager on this CPU is timed as a reference when
torch is installed (``OUT/NETWORK/torch-eager.json``).

    python scripts/bench_networks.py --trials 256                    # everything
    python scripts/bench_networks.py --networks avmnist --configs b c --trials 64
    python scripts/bench_networks.py --smoke                         # 1 network, 2 trials, 1 config
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

#: name -> (plan, cost model, scheduler, what it is)
CONFIGS = {
    "a": ("default", "xgb", "gradient", "default fusion + TVM's XGBModel (defaults), TVM's gradient scheduler"),
    "a-nowarmup": ("default", "xgb-nowarmup", "gradient", "default fusion + XGBModel(num_warmup_samples=0)"),
    "b": ("default", "hybrid", "gain", "default fusion + hybrid model, gain scheduler"),
    "c": ("predicted", "hybrid", "gain", "fusion planner + hybrid model, gain scheduler"),
    "b-gradient": ("default", "hybrid", "gradient", "default fusion + hybrid, TVM's gradient scheduler"),
    "b-round-robin": ("default", "hybrid", "round-robin", "default fusion + hybrid, round-robin"),
}
DEFAULT_CONFIGS = ["a", "a-nowarmup", "b", "c", "b-gradient"]
DEFAULT_NETWORKS = ["avmnist", "mmimdb", "transfuser", "mobilenetv2", "resnet18"]


def run_config(network: str, config: str, trials: int, seed: int, out: str, timeout_s: float,
               extra: list[str]) -> dict:
    """Run one configuration in a subprocess; its JSON result (or a failure record)."""
    plan, model, scheduler, _ = CONFIGS[config]
    work_dir = os.path.join(out, "work_dirs", f"{network}-{config}-t{trials}-s{seed}")
    if os.path.isdir(work_dir):  # an interrupted run: start it again cleanly
        shutil.rmtree(work_dir)
    command = [sys.executable, "-m", "tvm_latmodel.cli.main", "tune-network", network, "--trials", str(trials),
               "--plan", plan, "--cost-model", model, "--scheduler", scheduler, "--seed", str(seed),
               "--work-dir", work_dir, "--json", *extra]
    print(f"[bench] {network} {config}: {' '.join(command[3:])}", file=sys.stderr, flush=True)
    start = time.time()
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"network": network, "config": config, "failed": f"timed out after {timeout_s:.0f} s"}
    wall_s = time.time() - start
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"network": network, "config": config, "failed": f"exit {proc.returncode}",
                "stderr_tail": proc.stderr[-2000:], "wall_s": wall_s}
    result.update(config=config, exit_status=proc.returncode, wall_s=wall_s, seed=seed,
                  description=CONFIGS[config][3])
    return result


def torch_eager(network: str, seed: int, repeat: int = 20) -> dict:
    """Median latency of the network's PyTorch twin, eager, on this CPU (needs torch)."""
    import numpy as np

    from tvm_latmodel.networks import get_network
    from tvm_latmodel.networks.torch_twins import run_torch, torch_twin

    net = get_network(network, seed=seed)
    twin = torch_twin(net)
    inputs = net.make_inputs(seed=0)
    run_torch(twin, net, inputs)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run_torch(twin, net, inputs)
        times.append(time.perf_counter() - start)
    import torch

    return {"network": network, "config": "torch-eager", "latency_us": float(np.median(times)) * 1e6,
            "torch": torch.__version__, "threads": torch.get_num_threads()}


def collect(out: str) -> list[dict]:
    """Every result under OUT, from this run and earlier ones (other budgets, seeds, networks), so the
    summary is the whole benchmark rather than the last invocation."""
    results = []
    for network in sorted(os.listdir(out)):
        folder = os.path.join(out, network)
        if not os.path.isdir(folder) or network in ("work_dirs", "smoke"):
            continue
        for name in sorted(os.listdir(folder)):
            if name.endswith(".json"):
                with open(os.path.join(folder, name)) as f:
                    results.append(json.load(f))
    results.sort(key=lambda r: (r["network"], r.get("trials", 0), r["config"], r.get("seed", 0)))
    return results


def goals_table(results: list[dict]) -> str:
    """Issue 11's goals, per network, seed and budget T where both (a)
    settings ran: how many times faster than the stronger (a) at T each of
    (b) and (c) is at T and at T/2 (the goals: (c) >= 1.3x at T on the
    multi-modal networks; (b) and (c) >= 1.0x at T/2), and (b) with TVM's
    gradient scheduler at T."""
    lat = {(r["network"], r.get("seed", 0), r["config"], r["trials"]): r["latency_us"]
           for r in results if "failed" not in r and r["config"] != "torch-eager"}
    rows = ["| network | seed | T | stronger (a) @T, us | (b) @T | (c) @T | (b) @T/2 | (c) @T/2 | (b-gradient) @T |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for network, seed, config, trials in sorted(lat):
        a = [lat.get((network, seed, c, trials)) for c in ("a", "a-nowarmup")]
        if config != "a" or None in a:
            continue
        ref = min(a)

        def speedup(c, t):
            x = lat.get((network, seed, c, t))
            return "–" if x is None else f"{ref / x:.2f}x"

        half = trials // 2
        rows.append(f"| {network} | {seed} | {trials} | {ref:.1f} | {speedup('b', trials)} | {speedup('c', trials)} "
                    f"| {speedup('b', half)} | {speedup('c', half)} | {speedup('b-gradient', trials)} |")
    return ("Speed-up over the stronger of (a) and (a) without warm-up at T trials (higher is faster):\n\n"
            + "\n".join(rows))


def summarize(results: list[dict], out: str) -> None:
    """``summary.json``, ``summary.md`` and (with matplotlib) ``stages.png``."""
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(results, f, indent=1)
    rows = ["| network | config | latency us | untuned us | trials | tuning s | encoder us | fusion us "
            "| head us | kernels | tuned kernels | output |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        if "failed" in r:
            rows.append(f"| {r['network']} | {r['config']} | failed: {r['failed']} |||||||||||")
            continue
        if r["config"] == "torch-eager":
            rows.append(f"| {r['network']} | torch eager | {r['latency_us']:.1f} |||||||||"
                        f" torch {r['torch']}, {r['threads']} threads |")
            continue
        st = r["stages"]
        rows.append(f"| {r['network']} | {r['config']} s{r.get('seed', 0)} | {r['latency_us']:.1f} | {r['untuned_latency_us']:.1f} "
                    f"| {r['trials_measured']}/{r['trials']} | {r['tuning_seconds']:.0f} | {st['encoder']:.1f} "
                    f"| {st['fusion']:.1f} | {st['head']:.1f} | {r['kernels']} | {r['tuned_kernels']} "
                    f"| {'ok' if r['output_matches'] else 'DIFFERS'} ({r['max_abs_error']:.1e}) |")
    rows += ["", goals_table(results)]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print("\n".join(rows))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    tuned = [r for r in results if "stages" in r]
    if not tuned:
        return
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(tuned)), 4))
    bottom = [0.0] * len(tuned)
    for stage in ("encoder", "fusion", "head"):
        values = [r["stages"][stage] / 1e3 for r in tuned]
        ax.bar(range(len(tuned)), values, bottom=bottom, label=stage)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(range(len(tuned)), [f"{r['network']}\n{r['config']}" for r in tuned], rotation=60, fontsize=7)
    ax.set_ylabel("sum of measured kernel latencies (ms)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "stages.png"), dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/networks")
    ap.add_argument("--networks", nargs="*", default=DEFAULT_NETWORKS)
    ap.add_argument("--configs", nargs="*", default=DEFAULT_CONFIGS, choices=sorted(CONFIGS))
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--timeout", type=float, default=6 * 3600, help="seconds per run")
    ap.add_argument("--force", action="store_true", help="rerun configurations that have a result")
    ap.add_argument("--smoke", action="store_true",
                    help="a quick check of the script: avmnist, config b, 2 trials, into OUT/smoke")
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[],
                    help="more tune-network arguments for every run (e.g. --trials-per-iter 8)")
    args = ap.parse_args()
    if args.smoke:
        args.networks, args.configs, args.trials, args.seeds = ["avmnist"], ["b"], 2, [0]
        args.out = os.path.join(args.out, "smoke")
    os.makedirs(args.out, exist_ok=True)
    results = []
    for network in args.networks:
        os.makedirs(os.path.join(args.out, network), exist_ok=True)
        for seed in args.seeds:
            for config in args.configs:
                path = os.path.join(args.out, network, f"{config}-t{args.trials}-s{seed}.json")
                if os.path.exists(path) and not args.force:
                    with open(path) as f:
                        results.append(json.load(f))
                    continue
                result = run_config(network, config, args.trials, seed, args.out, args.timeout, args.extra)
                if "failed" not in result:  # failures are retried on the next run
                    with open(path, "w") as f:
                        json.dump(result, f, indent=1)
                results.append(result)
        path = os.path.join(args.out, network, "torch-eager.json")
        if os.path.exists(path) and not args.force:
            with open(path) as f:
                results.append(json.load(f))
            continue
        try:
            result = torch_eager(network, args.seeds[0])
        except ImportError:
            print(f"[bench] {network}: torch is not installed; no PyTorch eager reference", file=sys.stderr)
            continue
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        results.append(result)
    summarize(collect(args.out), args.out)
    return 1 if any("failed" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
