"""The ``gpu-bundle`` and ``gpu-import`` subcommands.

``gpu-bundle`` writes the candidates a TVM-less GPU machine times with
``scripts/gpu_timer.py``; ``gpu-import`` turns the timer's results into
MetaSchedule databases.
"""

from __future__ import annotations

import json
import os
import sys

# CUDA's limit on statically declared __shared__ memory per block (48 KiB).
STATIC_SHARED_MEMORY_LIMIT_BYTES = 49152


def add_parser(subparsers) -> None:
    """Add ``gpu-bundle`` and ``gpu-import`` to the ``tvm-latmodel`` command."""
    p = subparsers.add_parser(
        "gpu-bundle",
        help="sample CUDA candidates and write a JSON bundle for scripts/gpu_timer.py",
        description="Sample MetaSchedule candidates of each workload for a CUDA target and write "
        "their CUDA source, kernel launches and traces as one JSON bundle.",
    )
    p.add_argument("--workloads", required=True,
                   help="comma-separated workload names, e.g. GMM:1,C2D:1,DEP:0")
    p.add_argument("--target", default="h200", help="GPU preset or CUDA target JSON (default h200)")
    p.add_argument("--per-workload", type=int, default=60, help="candidates sampled per workload (default 60)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-shared-memory-bytes", type=int, default=STATIC_SHARED_MEMORY_LIMIT_BYTES,
                   help="cap the target's max_shared_memory_per_block (default 49152: TVM declares "
                   "shared memory statically, and CUDA allows 48 KiB of static shared memory per "
                   "block; above it ptxas rejects the kernel); 0 keeps the target's value")
    p.add_argument("--model-picks", type=int, default=0,
                   help="also add the K candidates the analytical model ranks best out of 4K more "
                   "samples per workload (default 0)")
    p.add_argument("-o", "--output", required=True,
                   help="bundle to write; end it in .json.gz (a pool of 300 is ~50 MB as plain JSON)")
    p.set_defaults(func=_run_bundle)

    q = subparsers.add_parser(
        "gpu-import",
        help="turn gpu_timer.py results into MetaSchedule databases",
        description="Write one MetaSchedule JSON database per workload from a bundle and the "
        "results scripts/gpu_timer.py wrote for it.",
    )
    q.add_argument("bundle", help="bundle JSON")
    q.add_argument("results", help="results JSON from gpu_timer.py")
    q.add_argument("-o", "--output", required=True, help="directory for the databases")
    q.add_argument("--failed", choices=("skip", "max"), default="skip",
                   help="failed candidates: no record (skip, default) or run_secs 1e10 (max)")
    q.set_defaults(func=_run_import)


def model_picks(k: int, seed: int):
    """An ``extra_schedules`` hook: the ``k`` best of ``4k`` fresh samples by the analytical model."""

    def pick(mod, target, sampled):
        from ..hardware import HardwareSpec
        from ..model.modes import estimate
        from ..model.program import summarize
        from ..sampling import sample_schedules

        hw = HardwareSpec.from_target(target)
        pool = sample_schedules(mod, target, 4 * k, seed=seed + 7919)
        pool.sort(key=lambda s: estimate(summarize(s.mod, "gpu"), hw).latency_s)
        return pool[:k]

    return pick


def cap_shared_memory(target, limit_bytes: int):
    """``target`` with ``max_shared_memory_per_block`` at most ``limit_bytes`` (0: unchanged).

    MetaSchedule's ``VerifyGPUCode`` admits schedules up to the target's
    value, but TVM emits static ``__shared__`` arrays, which CUDA caps at
    48 KiB per block: with the H200 preset's 227 KiB about 45% of sampled
    candidates fail to compile (``ptxas: uses too much shared data``).
    """
    import tvm

    from ..gpu.bundle import json_of_tvm

    cfg = json_of_tvm(target.export())
    if limit_bytes and int(cfg.get("max_shared_memory_per_block", 0)) > limit_bytes:
        print(
            f"gpu-bundle: capping max_shared_memory_per_block {cfg['max_shared_memory_per_block']} "
            f"-> {limit_bytes} (static shared memory limit)",
            file=sys.stderr,
        )
        cfg["max_shared_memory_per_block"] = int(limit_bytes)
        return tvm.target.Target(cfg)
    return target


def _run_bundle(args) -> int:
    from ..gpu.bundle import make_bundle, save_bundle
    from ..targets import parse_target
    from ..workloads import get_workload

    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if not names:
        raise ValueError("--workloads is empty")
    for name in names:
        get_workload(name)  # fail early, with the list of known names
    target = parse_target(args.target)
    if target.kind.name != "cuda":
        raise ValueError(f"--target {args.target!r} is not a CUDA target")
    target = cap_shared_memory(target, args.max_shared_memory_bytes)
    extra = model_picks(args.model_picks, args.seed) if args.model_picks > 0 else None
    bundle = make_bundle(names, target, per_workload=args.per_workload, seed=args.seed, extra_schedules=extra,
                         progress=True)
    size = save_bundle(bundle, args.output)
    counts = {w["name"]: len(w["candidates"]) for w in bundle["workloads"]}
    print(json.dumps({"bundle": os.path.abspath(args.output), "bytes": size, "candidates": counts}))
    if size > 48 * 2**20:
        print(f"gpu-bundle: warning: {size / 2**20:.1f} MiB is close to the 64 MiB a device call carries",
              file=sys.stderr)
    return 0


def _run_import(args) -> int:
    from ..gpu.importer import import_results

    summary = import_results(args.bundle, args.results, args.output, failed=args.failed)
    print(json.dumps(summary.as_dict()))
    return 0
