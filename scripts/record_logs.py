#!/usr/bin/env python3
"""Record MetaSchedule tuning logs on this machine's CPU (resumable).

For each workload in ``RECORDED_WORKLOADS`` it writes a MetaSchedule JSON
database under ``tuning_logs/<machine>/<workload>/``: the first half of the
trials are searched with TVM's random cost model (a pool that spans bad and
good schedules), the second half with TVM's XGBModel, seeded by what the
database already holds (model-guided, so the pool also has good schedules).

With ``--pool space`` (used for ``MORE_RECORDED_WORKLOADS``) no model shapes
the pool: the first half are random samples of MetaSchedule's design space
(``sampling.sample_schedules``, measured with the same LocalBuilder/
LocalRunner), the second half MetaSchedule's evolutionary search driven by
TVM's random cost model.

The machine's spec (``HardwareSpec.from_target`` of this host) goes to
``OUT/hardware.json``, which ``tvm-latmodel train --hardware`` takes to fit
the logs on another machine; a folder recorded on another kind of CPU is
refused.

Re-running continues where it stopped: a workload whose record file already
has the requested count is skipped.

A workload may also be a kernel of a network, as ``DIR=NETWORK/TASK``: the
task named ``TASK`` of the network's default fusion plan (what
``tvm-latmodel tune-network`` tunes; ``tvm_latmodel.networks.list_networks``),
recorded under ``OUT/DIR`` (name ``DIR`` as ``FAMILY_IDX`` so the offline
studies group it by family), e.g. ``FCV_0=mmimdb/fused_conv2d1_add1_relu1``;
or a te_workload function at a shape of its own, as ``DIR=FUNC(ARGS)``, e.g.
``DEP_4=depthwise_conv2d_nhwc(1,28,28,192,3,1,1)``. A new ``DIR`` that
already names another workload, the registry's ``FAMILY:IDX`` of that name
or a log folder of that name beside ``OUT``, is refused: the offline
studies, caches and reports key tasks by name (stop 35 renamed three set-15
logs for this).

    nice -n 19 python scripts/record_logs.py --trials 128
    nice -n 5 python scripts/record_logs.py --pool space --trials 64 --more
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def count_records(work_dir: str) -> int:
    path = os.path.join(work_dir, "database_tuning_record.json")
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for line in f if line.strip())


def network_kernel(spec: str):
    """The module of ``NETWORK/TASK``: the tunable task named ``TASK`` of
    the network's default fusion plan (weights of seed 0)."""
    from tvm_latmodel.fusion.prepare import prepare_network
    from tvm_latmodel.networks import get_network
    from tvm_latmodel.networks.kernels import distinct_workloads

    network, _, task = spec.partition("/")
    prepared = prepare_network(get_network(network, seed=0), plan="default")
    names = []
    for w in distinct_workloads(prepared.tasks):
        if w.name == task and not w.reshape_only:
            return w.mod
        names.append(w.name)
    raise ValueError(f"{network} has no tunable task {task!r}; its tasks: {', '.join(names)}")


def te_kernel(spec: str):
    """The module of ``FUNC(ARGS)``: MetaSchedule's ``te_workload.FUNC`` at
    the given integer arguments (a shape that no ``FAMILY:IDX`` names), e.g.
    ``depthwise_conv2d_nhwc(1,28,28,192,3,1,1)``."""
    from tvm.s_tir.meta_schedule.testing import te_workload

    from tvm_latmodel.workloads import te_module

    fn, _, rest = spec.partition("(")
    fn = fn.strip()
    if not rest.endswith(")") or not hasattr(te_workload, fn):
        raise ValueError(f"{spec!r}: not FUNC(INT,...) with FUNC a te_workload function")
    try:
        shape = [int(x) for x in rest[:-1].split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{spec!r}: the arguments must be integers") from None
    return te_module(getattr(te_workload, fn), shape)


def workload_module(name: str, kernel: str):
    """The module an entry ``NAME[=KERNEL]`` records: a te_workload function
    at a shape (``FUNC(ARGS)``), a network's kernel (``NETWORK/TASK``), or
    the registry's ``NAME``."""
    from tvm_latmodel.workloads import get_workload

    if not kernel:
        return get_workload(name)
    return te_kernel(kernel) if "(" in kernel else network_kernel(kernel)


def name_taken(name: str, mod, out: str) -> str | None:
    """Where ``name`` already stands for a workload other than ``mod``: the
    registry's ``FAMILY:IDX`` spelled ``FAMILY_IDX``, or a log folder
    ``<parent of OUT>/*/name`` (its first workload); None if it is free or
    names the same module."""
    import json

    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    from tvm_latmodel.workloads import get_workload, list_workloads

    fam, _, idx = name.rpartition("_")
    if f"{fam}:{idx}" in list_workloads() and not tvm_ffi.structural_equal(get_workload(f"{fam}:{idx}"), mod):
        return f"the registry's {fam}:{idx}"
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    for folder in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        other = os.path.join(parent, folder, name, "database_workload.json")
        if os.path.join(parent, folder) == out or not os.path.exists(other):
            continue
        with open(other) as f:
            line = f.readline()
        if line.strip() and not tvm_ffi.structural_equal(ms.database.Workload.from_json(json.loads(line)).mod, mod):
            return os.path.join(parent, folder, name)
    return None


def _keep_spec(out: str, target) -> None:
    """Write the recording machine's spec to ``OUT/hardware.json`` (what
    ``tvm-latmodel train --hardware`` takes to fit these logs on any machine);
    refuse to add records to a folder another kind of CPU recorded."""
    from tvm_latmodel.hardware import HardwareSpec

    path = os.path.join(out, "hardware.json")
    here = HardwareSpec.from_target(target)
    if os.path.exists(path):
        there = HardwareSpec.load(path)
        if there.name != here.name:
            sys.exit(f"[record] {path}: these logs were recorded on {there.name}, this machine is {here.name}; "
                     "record into another folder")
        return
    os.makedirs(out, exist_ok=True)
    here.save(path)
    print(f"[record] wrote {path} ({here.name}, {here.source})", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tuning_logs/cpu")
    ap.add_argument("--trials", type=int, default=128)
    ap.add_argument("--workloads", nargs="*", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pool", choices=("random-xgb", "space"), default="random-xgb",
                    help="random-xgb: random-model search then XGBModel search (the first 13 logs); "
                         "space: design-space samples then random-model search (no model shapes the pool)")
    ap.add_argument("--more", action="store_true", help="record MORE_RECORDED_WORKLOADS")
    args = ap.parse_args()

    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tvm_latmodel.measure import local_builder, local_runner, measure_schedules
    from tvm_latmodel.sampling import sample_schedules
    from tvm_latmodel.targets import host_target
    from tvm_latmodel.workloads import MORE_RECORDED_WORKLOADS, RECORDED_WORKLOADS

    target = host_target()
    # Name the CPU up front: sessions have been handed different machines.
    print(f"[record] this machine's target: {target}", file=sys.stderr, flush=True)
    _keep_spec(args.out, target)
    names = args.workloads or (MORE_RECORDED_WORKLOADS if args.more else RECORDED_WORKLOADS)
    half = args.trials // 2
    phases = (("random", "random", half), ("xgb", "xgb", args.trials))
    if args.pool == "space":
        phases = (("space", None, half), ("random", "random", args.trials))
    built = {}  # a new DIR=... is checked before anything is recorded
    for entry in names:
        name, _, kernel = entry.partition("=")
        folder = name.replace(":", "_")
        if kernel and count_records(os.path.join(args.out, folder)) == 0:
            built[name] = workload_module(name, kernel)
            taken = name_taken(folder, built[name], args.out)
            if taken:
                sys.exit(f"[record] {entry}: the name {folder} is taken by {taken}, another workload "
                         "(tasks are keyed by name); choose another")
    for name in names:
        name, _, kernel = name.partition("=")
        mod = built.get(name)  # else built only for a workload with records still to take
        work_dir = os.path.join(args.out, name.replace(":", "_"))
        os.makedirs(work_dir, exist_ok=True)
        for phase, cost_model, upto in phases:
            have = count_records(work_dir)
            if have >= upto:
                continue
            todo = upto - have
            if mod is None:
                mod = workload_module(name, kernel)
            t0 = time.time()
            print(f"[record] {name}: {have} records, {phase} phase for {todo} more", file=sys.stderr, flush=True)
            if phase == "space":
                schedules = sample_schedules(mod, target, todo, seed=args.seed + have + 1)
                secs = measure_schedules(schedules, target, progress=False)
                db = ms.database.JSONDatabase(work_dir=work_dir)
                workload = db.commit_workload(mod)
                args_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
                for sch, s in zip(schedules, secs):
                    # A failed build or run is kept as MetaSchedule keeps it (1e10 s).
                    db.commit_tuning_record(ms.database.TuningRecord(
                        sch.trace, workload, [s if s is not None else 1e10], target, args_info))
                print(f"[record] {name}: now {count_records(work_dir)} records ({time.time() - t0:.0f}s)",
                      file=sys.stderr, flush=True)
                continue
            ms.tune_tir(
                mod=mod,
                target=target,
                work_dir=work_dir,
                max_trials_global=todo,
                num_trials_per_iter=16,
                cost_model=cost_model,
                builder=local_builder(),
                runner=local_runner(),
                seed=args.seed + have + 1,
            )
            print(f"[record] {name}: now {count_records(work_dir)} records ({time.time() - t0:.0f}s)", file=sys.stderr, flush=True)
    print(tvm.__version__, target, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
