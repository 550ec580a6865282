"""Tune a whole network: plan, tune, compile, run, check, and latency per stage.

:func:`tune_network` is ``tvm-latmodel tune-network``:

1. **plan** (:func:`prepare_network`): TVM's default groups, or the
   :class:`~tvm_latmodel.fusion.FusionPlanner`'s decisions applied with
   :func:`~tvm_latmodel.fusion.apply_plan`. A fused group that does not build
   (or apply) falls back to its split form with a ``FusionFallbackWarning``.
2. **tune** one task per distinct workload (weight: its calls) with
   ``ms.tune_tasks``, the cost model wrapped in :class:`GuardedCostModel` (a
   failing model degrades to random scores, never stops the search) and a
   task scheduler (:mod:`tvm_latmodel.scheduler`). Reshape-only kernels
   become views when compiled and are not tuned.
3. **compile** the module that was tuned, with the database
   (``MetaScheduleApplyDatabase``, then ``tvm.compile``). MetaSchedule's
   ``compile_relax`` re-runs ``FuseOps`` on what it is given, which can
   regroup kernels (a planned partition is not TVM's), so the kernels that
   ran would not be the tasks tuned. Per workload the faster of its best
   record and TVM's untuned loop nest runs (:func:`choose_kernels`).
4. **run** and **check** the output against the untuned build of TVM's
   default partition.
5. **per stage**: each workload's measured latency (what runs) times its
   calls in each stage, summed by stage.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from .network import Network
from .pipeline import FusedNetwork, Kernel, StageTask, build_and_run, extract_stage_tasks, fuse_network
from .stages import STAGES

#: ``--plan`` values.
PLANS = ("default", "predicted")

#: Output check: ``|tuned - untuned| <= ATOL * max(1, max|untuned|) + RTOL * |untuned|``.
RTOL, ATOL = 1e-3, 1e-4


def _say_nothing(_text: str) -> None:
    return None


# ------------------------------------------------------------ the cost model guard


@derived_object
class GuardedCostModel(ms.cost_model.PyCostModel):
    """A cost model that never stops tuning: failures degrade to random scores.

    Parameters
    ----------
    model : ms.cost_model.CostModel
        The model to guard (ours or TVM's).
    seed : int
        Seed of the fallback random scores.
    warn : callable, optional
        Called once per kind of failure with a message.

    Attributes
    ----------
    failures_ : dict of str to int
        Failed ``predict`` / ``update`` calls.
    """

    def __init__(self, model, *, seed: int = 0, warn=None) -> None:
        super().__init__()
        self.model = model
        self.warn = warn or _say_nothing
        self.rng_ = np.random.default_rng(seed)
        self.failures_: dict[str, int] = {}

    def _failed(self, what: str, err: Exception) -> None:
        if what not in self.failures_:
            self.warn(f"the cost model's {what} failed ({type(err).__name__}: {err}); "
                      + ("scoring candidates at random" if what == "predict" else "it learns nothing from this round"))
        self.failures_[what] = self.failures_.get(what, 0) + 1

    def load(self, path: str) -> None:
        self.model.load(path)

    def save(self, path: str) -> None:
        self.model.save(path)

    def update(self, context, candidates, results) -> None:
        try:
            self.model.update(context, candidates, results)
        except Exception as err:  # noqa: BLE001 - tuning goes on without the update
            self._failed("update", err)

    def predict(self, context, candidates) -> np.ndarray:
        n = len(candidates)
        try:
            scores = np.asarray(self.model.predict(context, candidates), dtype="float64").reshape(-1)
            if scores.shape != (n,):
                raise ValueError(f"{scores.shape[0]} scores for {n} candidates")
            scores[~np.isfinite(scores)] = 0.0
            return scores
        except Exception as err:  # noqa: BLE001
            self._failed("predict", err)
            return self.rng_.uniform(0.0, 1.0, size=n)


# ------------------------------------------------------------ the partition


@dataclass
class PreparedNetwork:
    """A network's partition, ready to tune.

    Attributes
    ----------
    default : FusedNetwork
        TVM's default fusion (the untuned reference).
    chosen : FusedNetwork
        The partition to tune: ``default``, or the plan applied.
    plan : str
        ``default`` or ``predicted``.
    tasks : list of StageTask
        ``extract_stage_tasks(chosen)``.
    fused_groups : list of str
        Names of the planner's groups fused into one kernel.
    fusion_plan : FusionPlan or None
        The planner's plan (``predicted`` only).
    notes : list of str
        Fallbacks and other remarks.
    """

    default: FusedNetwork
    chosen: FusedNetwork
    plan: str
    tasks: list[StageTask]
    fused_groups: list[str] = field(default_factory=list)
    fusion_plan: object = None
    notes: list[str] = field(default_factory=list)


def _label_kernels(default: FusedNetwork, groups, module: tvm.IRModule) -> tuple[Kernel, ...]:
    """Stages of the kernels of a planned module: default kernels keep theirs, a fused
    group takes its anchor's (``group.stage``) and spans its members' stages.

    Walks the new kernels in order against the default kernels outside every
    fused group (same PrimFunc names, same order); the others are the fused
    groups, recognised by FuseTIR's name (``fused_`` + members) or, failing
    that, by the order of their last members.
    """
    from ..fusion import kernel_infos  # pylint: disable=import-outside-toplevel
    from ..fusion.patterns import FusionError  # pylint: disable=import-outside-toplevel

    grouped = {k.index for g in groups for k in g.match.kernels}
    remaining = [k for k in default.kernels if k.index not in grouped]
    pending = sorted(groups, key=lambda g: max(k.index for k in g.match.kernels))
    by_index = {k.index: k for k in default.kernels}
    out, r = [], 0
    for info in kernel_infos(module):
        if r < len(remaining) and info.prim_func == remaining[r].prim_func:
            old = remaining[r]
            out.append(Kernel(len(out), info.binding, info.prim_func, old.stage, old.stages))
            r += 1
            continue
        if not pending:
            raise FusionError(f"applying the plan left an unexpected kernel {info.prim_func}")
        named = [g for g in pending
                 if info.prim_func == "fused_" + "_".join(k.prim_func for k in g.match.kernels)]
        group = named[0] if named else pending[0]
        pending.remove(group)
        spanned = {s for k in group.match.kernels for s in by_index[k.index].stages}
        stage = group.stage or by_index[group.match.kernels[-1].index].stage
        out.append(Kernel(len(out), info.binding, info.prim_func, stage,
                          tuple(s for s in STAGES if s in spanned | {stage})))
    if r != len(remaining) or pending:
        raise FusionError("the planned module's kernels do not match the plan")
    return tuple(out)


def _fall_back(note: str, notes: list[str]) -> None:
    from ..fusion import FusionFallbackWarning  # pylint: disable=import-outside-toplevel

    warnings.warn(note, FusionFallbackWarning, stacklevel=3)
    notes.append(note)


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def _apply_buildable(plan, names: list[str], target, notes: list[str]) -> tuple[tvm.IRModule, list[str]]:
    """Apply the ``names`` groups of ``plan``; one that does not build or apply stays split."""
    from ..fusion import apply_plan, build_check, fuse_group  # pylint: disable=import-outside-toplevel

    def apply(fused: list[str]) -> tvm.IRModule:
        return apply_plan(plan, {g.name: "fuse" if g.name in fused else "split" for g in plan.decisions})

    kept = []
    for group in plan.decisions:
        if group.name in names:
            try:
                build_check(fuse_group(plan.module, group.match), target)
                kept.append(group.name)
            except Exception as err:  # noqa: BLE001 - a group that fails falls back, never crashes
                _fall_back(f"{group.name} fell back to its split form: {_first_line(err)}", notes)
    try:
        return apply(kept), kept
    except Exception:  # noqa: BLE001 - find the groups that do not apply, one by one
        names, kept = kept, []
    for name in names:
        try:
            apply([*kept, name])
            kept.append(name)
        except Exception as err:  # noqa: BLE001
            _fall_back(f"{name} fell back to its split form: it does not apply ({_first_line(err)})", notes)
    return apply(kept), kept


def prepare_network(network: Network, *, plan: str = "default", target=None, samples: int = 4,
                    seed: int = 0, decisions: dict[str, str] | None = None, planner=None,
                    progress=None) -> PreparedNetwork:
    """Fuse a network and choose the partition to tune.

    Parameters
    ----------
    network : Network
    plan : {"default", "predicted"}
        TVM's default groups, or the planner's decisions.
    target : tvm.target.Target, optional
        Defaults to the host.
    samples, seed : int
        The planner's schedules per PrimFunc, and seed.
    decisions : dict of str to str, optional
        Override the planner's decision of a group by name (``predicted`` only).
    planner : FusionPlanner, optional
        A planner to reuse (its prediction cache too).
    progress : callable, optional
        One line of progress text at a time.

    Returns
    -------
    PreparedNetwork

    Raises
    ------
    ValueError
        Unknown ``plan`` or group name; :class:`~tvm_latmodel.fusion.FusionError`
        (a ``ValueError``) when the planner cannot partition the network.
    """
    from ..fusion import FusionError, FusionPlanner  # pylint: disable=import-outside-toplevel
    from ..targets import host_target  # pylint: disable=import-outside-toplevel

    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; known: {', '.join(PLANS)}")
    say = progress or _say_nothing
    target = target or host_target()
    default = fuse_network(network, target)
    if plan == "default":
        return PreparedNetwork(default=default, chosen=default, plan=plan, tasks=extract_stage_tasks(default))
    planner = planner or FusionPlanner(target, samples=samples, seed=seed, progress=say)
    try:
        fusion_plan = planner.plan(default)
    except Exception as err:  # a plan that fails is the user's clear error, not a traceback
        raise FusionError(f"the fusion planner failed on {network.name}: {_first_line(err)}") from err
    notes = list(fusion_plan.notes)
    decisions = decisions or {}
    unknown = sorted(set(decisions) - {g.name for g in fusion_plan.decisions})
    if unknown:
        raise ValueError(f"no pattern group named {unknown}; groups: {[g.name for g in fusion_plan.decisions]}")
    wanted = [g.name for g in fusion_plan.decisions if decisions.get(g.name, g.decision) == "fuse"]
    chosen, names = default, []
    try:
        module, names = _apply_buildable(fusion_plan, wanted, target, notes)
        groups = [g for g in fusion_plan.decisions if g.name in names]
        if groups:
            chosen = FusedNetwork(network=network, target=target, module=module,
                                  kernels=_label_kernels(default, groups, module))
    except Exception as err:  # noqa: BLE001 - the default partition is always there
        _fall_back(f"the plan could not be applied ({_first_line(err)}); tuning TVM's default partition", notes)
        chosen, names = default, []
    say(f"[tune-network] predicted plan: {len(names)} of {len(fusion_plan.decisions)} pattern groups fused, "
        f"{len(chosen.kernels)} kernels (default: {len(default.kernels)})")
    return PreparedNetwork(default=default, chosen=chosen, plan=plan, tasks=extract_stage_tasks(chosen),
                           fused_groups=names, fusion_plan=fusion_plan, notes=notes)


# ------------------------------------------------------------ tasks and times


@dataclass
class Workload:
    """One distinct workload of a partition: what MetaSchedule tunes as one task."""

    name: str
    mod: tvm.IRModule
    weight: int
    reshape_only: bool
    stage_tasks: list[StageTask]


def distinct_workloads(tasks: list[StageTask]) -> list[Workload]:
    """Stage tasks grouped by workload (structural equality), weights summed over stages."""
    out: list[Workload] = []
    for task in tasks:
        for known in out:
            if (task.workload_hash == int(tvm_ffi.structural_hash(known.mod))
                    and tvm_ffi.structural_equal(known.mod, task.mod)):
                known.weight += task.weight
                known.stage_tasks.append(task)
                break
        else:
            reshape = bool(relax.analysis.has_reshape_pattern(task.mod["main"]))
            out.append(Workload(task.name, task.mod, task.weight, reshape, [task]))
    return out


def time_kernel_s(mod: tvm.IRModule, target, *, number: int = 3, repeat: int = 1,
                  min_repeat_ms: int = 50) -> float:
    """Latency of a ``{"main": PrimFunc}`` module (scheduled or not), built and timed here
    with the runner's settings (:func:`tvm_latmodel.measure.local_runner`)."""
    lib = tvm.compile(mod, target=target)
    device = tvm.cpu()
    rng = np.random.default_rng(0)
    args = [tvm.runtime.tensor(rng.standard_normal([int(s) for s in info.shape]).astype(info.dtype)
                               if "float" in info.dtype else np.zeros([int(s) for s in info.shape], info.dtype),
                               device)
            for info in ms.arg_info.ArgInfo.from_prim_func(mod["main"])]
    timer = lib.mod.time_evaluator("main", device, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return float(timer(*args).mean)


@dataclass
class KernelChoice:
    """What runs for one workload, and its measured latencies (microseconds, one call).

    Attributes
    ----------
    name : str
        Task name.
    weight : int
        Calls per network run.
    calls : dict of str to int
        Calls per stage.
    prim_funcs : tuple of str
        The partition's PrimFuncs with this workload.
    source : str
        ``tuned`` (the database's best schedule), ``untuned`` (TVM's default
        loop nest: nothing valid was measured, or it was faster) or ``view``
        (reshape only: no kernel runs).
    latency_us : float
        What runs: the database's measurement when tuned, else the untuned time.
    tuned_us : float or None
        The database's best measurement (taken during tuning, while the
        search of the next task shares the CPU).
    tuned_retimed_us, untuned_us : float or None
        The best schedule and the untuned loop nest, both timed here after
        tuning, on an idle search: the fair pair that decides ``source``.
    """

    name: str
    weight: int
    calls: dict[str, int]
    prim_funcs: tuple[str, ...]
    source: str
    latency_us: float
    tuned_us: float | None
    tuned_retimed_us: float | None
    untuned_us: float | None

    @property
    def retimed_us(self) -> float:
        """What runs, timed here after tuning (``latency_us`` when that failed)."""
        value = {"tuned": self.tuned_retimed_us, "untuned": self.untuned_us, "view": 0.0}[self.source]
        return self.latency_us if value is None else value

    def to_json(self) -> dict:
        return asdict(self)


def choose_kernels(workloads: list[Workload], database, target, *, progress=None) -> list[KernelChoice]:
    """Per workload: the database's best schedule, unless TVM's untuned loop nest is faster.

    MetaSchedule's CPU design space always parallelizes; for a tiny kernel
    the thread pool's wake-up costs more than the work, and a short search
    may find nothing faster than the default serial loop nest. Both are timed
    here, in the same conditions, and the faster one runs.
    """
    from ..latency import mean_latency_s  # pylint: disable=import-outside-toplevel

    say = progress or _say_nothing

    def timed_us(mod, what):
        try:
            return time_kernel_s(mod, target) * 1e6
        except Exception as err:  # noqa: BLE001 - the other measurement still stands
            say(f"[tune-network] could not time {what}: {_first_line(err)}")
            return None

    out = []
    for workload in workloads:
        calls: dict[str, int] = {}
        for task in workload.stage_tasks:
            calls[task.stage] = calls.get(task.stage, 0) + task.weight
        prim_funcs = tuple(dict.fromkeys(p for t in workload.stage_tasks for p in t.prim_funcs))
        tuned_us = tuned_retimed_us = untuned_us = None
        if workload.reshape_only:
            source, latency_us = "view", 0.0
        else:
            record = database.query_tuning_record(workload.mod, target, workload.name)
            tuned_s = mean_latency_s(record.run_secs) if record is not None else None
            if tuned_s is not None:
                tuned_us = tuned_s * 1e6
                schedule = database.query_schedule(workload.mod, target, workload.name)
                tuned_retimed_us = timed_us(schedule.mod, f"{workload.name} tuned")
            untuned_us = timed_us(workload.mod, f"{workload.name} untuned")
            tuned_here = tuned_retimed_us if tuned_retimed_us is not None else tuned_us
            if tuned_here is not None and (untuned_us is None or tuned_here <= untuned_us):
                source, latency_us = "tuned", tuned_us
            else:
                source, latency_us = "untuned", untuned_us if untuned_us is not None else math.nan
        out.append(KernelChoice(name=workload.name, weight=workload.weight, calls=calls, prim_funcs=prim_funcs,
                                source=source, latency_us=latency_us, tuned_us=tuned_us, tuned_retimed_us=tuned_retimed_us,
                                untuned_us=untuned_us))
    return out


def _scheduled_names(module: tvm.IRModule) -> set[str]:
    """PrimFuncs of ``module`` that MetaScheduleApplyDatabase replaced with a tuned schedule."""
    return {gvar.name_hint for gvar, func in module.functions.items()
            if isinstance(func, tvm.tirx.PrimFunc) and func.attrs is not None
            and bool(func.attrs.get("tirx.is_scheduled", False))}


def _count_records(work_dir: str) -> int:
    from ..tuning import read_records  # pylint: disable=import-outside-toplevel

    return len(read_records(work_dir))


# ------------------------------------------------------------ the result


@dataclass
class NetworkTuneResult:
    """What ``tune-network`` reports; latencies in microseconds.

    The fields of the issue (``network`` ... ``max_abs_error``), plus:
    ``trials_measured`` (records this run added), ``output_matches`` (the
    tolerance check), ``database_hits`` (PrimFuncs with a record),
    ``tuned_kernels`` (kernel calls running a tuned schedule), ``stages_retimed``
    (per stage again, every kernel that runs timed here after tuning), ``tasks``
    (:class:`KernelChoice` per workload), ``fused_groups``, ``notes``, ``target``.
    """

    network: str
    plan: str
    cost_model: str
    scheduler: str
    trials: int
    trials_measured: int
    tuning_seconds: float
    latency_us: float
    untuned_latency_us: float
    stages: dict[str, float]
    stages_retimed: dict[str, float]
    kernels: int
    database: str
    max_abs_error: float
    output_matches: bool
    database_hits: int
    tuned_kernels: int
    tasks: list[dict]
    fused_groups: list[str]
    notes: list[str]
    target: str

    def to_json(self) -> dict:
        """One JSON-ready dict (a latency that could not be measured is ``null``)."""
        def clean(value):
            if isinstance(value, float) and not math.isfinite(value):
                return None
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [clean(v) for v in value]
            return value

        return clean(asdict(self))


def default_work_dir(network: str, plan: str, cost_model: str, scheduler: str, seed: int) -> str:
    """``work_dirs/network-NAME-PLAN-MODEL-SCHEDULER-sSEED``."""
    return os.path.join("work_dirs", f"network-{network}-{plan}-{cost_model}-{scheduler}-s{seed}")


def _check_arguments(trials, plan, cost_model, scheduler, num_trials_per_iter, population, target) -> None:
    from ..model.registry import MODEL_NAMES  # pylint: disable=import-outside-toplevel
    from ..scheduler import SCHEDULER_NAMES  # pylint: disable=import-outside-toplevel

    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"--trials must be an integer >= 1, got {trials!r}")
    for what, value, known in (("plan", plan, PLANS), ("cost model", cost_model, MODEL_NAMES),
                               ("scheduler", scheduler, SCHEDULER_NAMES)):
        if value not in known:
            raise ValueError(f"unknown {what} {value!r}; known: {', '.join(known)}")
    if num_trials_per_iter is not None and num_trials_per_iter < 1:
        raise ValueError(f"trials per iteration must be >= 1, got {num_trials_per_iter}")
    if population is not None and population < 2:
        raise ValueError(f"the search population must be >= 2, got {population}")
    if target.kind.name != "llvm":
        raise ValueError(f"tune-network measures on this CPU; a {target.kind.name!r} target needs its own hardware")


def _bound_fn(planner, target, say):
    """``(name, mod, target) -> (best predicted latency, roofline bound)`` for the gain scheduler."""
    from ..hardware import HardwareSpec  # pylint: disable=import-outside-toplevel
    from ..model.modes import estimate  # pylint: disable=import-outside-toplevel
    from ..model.program import summarize  # pylint: disable=import-outside-toplevel

    hw = HardwareSpec.from_target(target)

    def bounds(name, mod, _target):
        lower = roofline = None
        try:
            roofline = estimate(summarize(mod, hw.kind), hw).roofline_bound_s
            lower = planner.predict_best_s(mod)
        except Exception as err:  # noqa: BLE001 - the scheduler copes with a missing bound
            say(f"[tune-network] no predicted bound for {name} ({_first_line(err)})")
        return lower, roofline

    return bounds


def _tune(tunable: list[Workload], *, target, work_dir, trials, per_iter, cost_model, scheduler, seed,
          pretrained, bound_fn, population, verbose, say):
    """``ms.tune_tasks`` on the workloads; (JSON database, tuning seconds, records added)."""
    from ..measure import local_builder, local_runner  # pylint: disable=import-outside-toplevel
    from ..model.registry import make_model  # pylint: disable=import-outside-toplevel
    from ..scheduler import make_scheduler  # pylint: disable=import-outside-toplevel
    from ..tuning import metaschedule_output, work_dir_lock  # pylint: disable=import-outside-toplevel

    try:
        model = make_model(cost_model, seed=seed, pretrained=pretrained, target=target)
    except ValueError:
        raise
    except Exception as err:  # noqa: BLE001 - tuning must not die with its model
        say(f"[tune-network] warning: the {cost_model} model could not be built ({_first_line(err)}); "
            "scoring at random")
        model = make_model("random", seed=seed)
    guarded = GuardedCostModel(model, seed=seed, warn=lambda m: say(f"[tune-network] warning: {m}"))
    task_scheduler = make_scheduler(scheduler, seed=seed, bound_fn=bound_fn, progress=say)
    tuning_s = 0.0
    with work_dir_lock(work_dir):
        before = _count_records(work_dir)
        database = ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")
        if tunable:
            strategy = ("evolutionary" if population is None else ms.search_strategy.EvolutionarySearch(
                population_size=population, init_min_unmeasured=min(50, population)))
            contexts, _ = ms.relax_integration.extracted_tasks_to_tune_contexts(
                [w.stage_tasks[0].to_extracted_task(target) for w in tunable], work_dir, strategy=strategy,
                seed=seed)
            if len(contexts) != len(tunable):
                raise RuntimeError("MetaSchedule dropped a task (already scheduled?)")
            start = time.time()
            with metaschedule_output(verbose):
                ms.tune_tasks(tasks=contexts, task_weights=[float(w.weight) for w in tunable], work_dir=work_dir,
                              max_trials_global=trials, num_trials_per_iter=per_iter, builder=local_builder(),
                              runner=local_runner(), database=database, cost_model=guarded,
                              task_scheduler=task_scheduler)
            tuning_s = time.time() - start
        return database, tuning_s, _count_records(work_dir) - before


def tune_network(network: Network | str, *, trials: int, plan: str = "default", cost_model: str = "hybrid",
                 scheduler: str = "gain", seed: int = 0, work_dir: str | None = None, target=None,
                 num_trials_per_iter: int | None = None, samples: int = 4, pretrained="shipped",
                 decisions: dict[str, str] | None = None, repeat: int = 10, population: int | None = None,
                 verbose: bool = False, progress=None, options: dict | None = None) -> NetworkTuneResult:
    """Plan, tune, compile, run and check a network; its latency per stage.

    Parameters
    ----------
    network : Network or str
        A network, or a name of :func:`tvm_latmodel.networks.list_networks`
        (built with ``seed`` and ``options``).
    trials : int
        Global measurement budget (MetaSchedule may pass it by less than one
        pick of ``num_trials_per_iter``).
    plan : {"default", "predicted"}
    cost_model : str
        A name of :func:`tvm_latmodel.make_model`.
    scheduler : {"gain", "gradient", "round-robin"}
    seed : int
    work_dir : str, optional
        Database directory (default :func:`default_work_dir`); locked while tuning.
    target : tvm.target.Target, optional
        An ``llvm`` target (default the host).
    num_trials_per_iter : int, optional
        Trials per scheduler pick; default ``trials // tasks`` clamped to 2..16.
    samples : int
        Schedules sampled per PrimFunc for the planner and the lower bounds.
    pretrained : "shipped", path or None
        The hybrid model's starting residual.
    decisions : dict, optional
        Planner decisions to override (see :func:`prepare_network`).
    repeat : int
        Timed runs of the whole network (median).
    population : int, optional
        Population of MetaSchedule's evolutionary search (default TVM's, 512);
        its search time per pick grows with it.
    verbose : bool
        MetaSchedule's own logs on stderr.
    progress : callable, optional
        One line of progress text at a time.
    options : dict, optional
        Network options when ``network`` is a name.

    Returns
    -------
    NetworkTuneResult

    Raises
    ------
    ValueError
        Unknown network, plan, model or scheduler, ``trials < 1``, a non-CPU
        target, or a plan that fails.
    tvm_latmodel.tuning.WorkDirLockedError
        Another tuner holds ``work_dir``.
    """
    from ..fusion import FusionPlanner  # pylint: disable=import-outside-toplevel
    from ..targets import host_target  # pylint: disable=import-outside-toplevel

    say = progress or _say_nothing
    target = target or host_target()
    _check_arguments(trials, plan, cost_model, scheduler, num_trials_per_iter, population, target)
    if isinstance(network, str):
        from . import get_network  # pylint: disable=import-outside-toplevel

        network = get_network(network, seed=seed, **(options or {}))
    work_dir = work_dir or default_work_dir(network.name, plan, cost_model, scheduler, seed)

    planner = FusionPlanner(target, samples=samples, seed=seed, progress=say)
    say(f"[tune-network] {network.name}: fusing ({plan} plan)")
    prepared = prepare_network(network, plan=plan, target=target, samples=samples, seed=seed,
                               decisions=decisions, planner=planner, progress=say)
    inputs = network.make_inputs(seed=0)
    say("[tune-network] building and running the untuned network (the reference)")
    reference, untuned_s = build_and_run(prepared.default, inputs=inputs, repeat=repeat)

    workloads = distinct_workloads(prepared.tasks)
    tunable = [w for w in workloads if not w.reshape_only]
    per_iter = num_trials_per_iter or max(2, min(16, trials // max(1, len(tunable))))
    say(f"[tune-network] tuning {len(tunable)} tasks ({len(workloads) - len(tunable)} reshape-only skipped), "
        f"{trials} trials, {per_iter} per pick, {cost_model} model, {scheduler} scheduler")
    database, tuning_s, measured = _tune(
        tunable, target=target, work_dir=work_dir, trials=trials, per_iter=per_iter, cost_model=cost_model,
        scheduler=scheduler, seed=seed, pretrained=pretrained, bound_fn=_bound_fn(planner, target, say),
        population=population, verbose=verbose, say=say)

    say("[tune-network] timing each kernel untuned; compiling with the tuning database")
    choices = choose_kernels(workloads, database, target, progress=say)
    with target, database, tvm.transform.PassContext(opt_level=3):
        scheduled = relax.transform.MetaScheduleApplyDatabase(enable_warning=False)(prepared.chosen.module)
    hits = len(_scheduled_names(scheduled))
    keep = {name for choice in choices if choice.source != "tuned" for name in choice.prim_funcs}
    for gvar in list(scheduled.get_global_vars()):
        if gvar.name_hint in keep:  # the untuned loop nest was faster (or nothing was measured)
            scheduled.update_func(gvar, prepared.chosen.module[gvar.name_hint])
    tuned_names = _scheduled_names(scheduled)
    tuned = FusedNetwork(network=network, target=target, module=scheduled, kernels=prepared.chosen.kernels)
    output, latency_s = build_and_run(tuned, inputs=inputs, repeat=repeat)
    error = float(np.max(np.abs(np.asarray(output, dtype=float) - np.asarray(reference, dtype=float))))
    scale = max(1.0, float(np.max(np.abs(reference))))
    matches = bool(np.allclose(output, reference, rtol=RTOL, atol=ATOL * scale))

    stages = {stage: 0.0 for stage in STAGES}
    retimed = {stage: 0.0 for stage in STAGES}
    for choice in choices:
        for stage, calls in choice.calls.items():
            stages[stage] = stages.get(stage, 0.0) + calls * choice.latency_us
            retimed[stage] = retimed.get(stage, 0.0) + calls * choice.retimed_us
    result = NetworkTuneResult(
        network=network.name, plan=plan, cost_model=cost_model, scheduler=scheduler, trials=trials,
        trials_measured=measured, tuning_seconds=tuning_s, latency_us=latency_s * 1e6,
        untuned_latency_us=untuned_s * 1e6, stages=stages, stages_retimed=retimed, kernels=len(prepared.chosen.kernels),
        database=os.path.abspath(work_dir), max_abs_error=error, output_matches=matches, database_hits=hits,
        tuned_kernels=sum(1 for k in prepared.chosen.kernels if k.prim_func in tuned_names),
        tasks=[c.to_json() for c in choices], fused_groups=list(prepared.fused_groups),
        notes=list(prepared.notes), target=str(target))
    say(f"[tune-network] {network.name}: {result.latency_us:.1f} us tuned vs {result.untuned_latency_us:.1f} us "
        f"untuned; {result.tuned_kernels} of {result.kernels} kernels tuned; max |error| {error:.2e}")
    return result
