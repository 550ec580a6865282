"""Tune a whole network: plan, tune, compile, run, check, and latency per stage.

:func:`tune_network` is ``tvm-latmodel tune-network``:

1. **plan** (:func:`~tvm_latmodel.fusion.prepare.prepare_network`): TVM's
   default groups, or the :class:`~tvm_latmodel.fusion.FusionPlanner`'s
   decisions applied with :func:`~tvm_latmodel.fusion.apply_plan`. A fused
   group that does not build (or apply) falls back to its split form with a
   ``FusionFallbackWarning``.
2. **tune** one task per distinct workload (weight: its calls;
   :func:`~tvm_latmodel.networks.kernels.distinct_workloads`) with
   ``ms.tune_tasks``, the cost model wrapped in :class:`GuardedCostModel` (a
   failing model degrades to random scores, never stops the search) and a
   task scheduler (:mod:`tvm_latmodel.scheduler`). Reshape-only kernels
   become views when compiled and are not tuned.
3. **compile** the module that was tuned, with the database
   (``MetaScheduleApplyDatabase``, then ``tvm.compile``). MetaSchedule's
   ``compile_relax`` re-runs ``FuseOps`` on what it is given, which can
   regroup kernels (a planned partition is not TVM's), so the kernels that
   ran would not be the tasks tuned. Per workload the faster of its fastest
   correct record and TVM's untuned loop nest runs
   (:func:`~tvm_latmodel.networks.kernels.choose_kernels`). A workload
   without a correct record (a budget smaller than the tasks leaves some
   unmeasured) gets the tuning cost model's best predicted correct pick among
   sampled schedules instead, if it beats the loop nest
   (:func:`~tvm_latmodel.networks.kernels.predicted_schedules`); only those
   schedules are applied (:func:`~tvm_latmodel.networks.kernels.chosen_database`).
4. **run** and **check** the output against the untuned build of TVM's
   default partition.
5. **per stage**: each workload's measured latency (what runs) times its
   calls in each stage, summed by stage.

``prepare_network``, ``PreparedNetwork``, ``PLANS`` (from
:mod:`tvm_latmodel.fusion.prepare`) and ``Workload``, ``distinct_workloads``,
``run_kernel``, ``KernelChoice``, ``choose_kernels``, ``RTOL``, ``ATOL`` (from
:mod:`tvm_latmodel.networks.kernels`) stay importable from here.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass

import numpy as np
import tvm
from tvm import relax
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from ..fusion.prepare import PLANS, PreparedNetwork, prepare_network
from ..schedule_checks import design_space
from .kernels import (ATOL, RTOL, KernelChoice, Workload, choose_kernels, chosen_database, distinct_workloads,
                      predicted_schedules, run_kernel)
from .network import Network
from .pipeline import FusedNetwork, build_and_run
from .stages import STAGES

__all__ = [
    "ATOL",
    "PLANS",
    "RTOL",
    "GuardedCostModel",
    "KernelChoice",
    "NetworkTuneResult",
    "PreparedNetwork",
    "Workload",
    "choose_kernels",
    "default_work_dir",
    "distinct_workloads",
    "prepare_network",
    "run_kernel",
    "tune_network",
]


def _say_nothing(_text: str) -> None:
    """The default ``progress``: print nothing."""
    return None


def _first_line(err: Exception) -> str:
    """``TypeName: first line of the message``."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


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


# ------------------------------------------------------------ the database


def _scheduled_names(module: tvm.IRModule) -> set[str]:
    """PrimFuncs of ``module`` that MetaScheduleApplyDatabase replaced with a tuned schedule."""
    return {gvar.name_hint for gvar, func in module.functions.items()
            if isinstance(func, tvm.tirx.PrimFunc) and func.attrs is not None
            and bool(func.attrs.get("tirx.is_scheduled", False))}


def _count_records(work_dir: str) -> int:
    """Tuning records in ``work_dir``'s database."""
    from ..tuning import read_records  # pylint: disable=import-outside-toplevel

    return len(read_records(work_dir))


# ------------------------------------------------------------ the result


@dataclass
class NetworkTuneResult:
    """What ``tune-network`` reports; latencies in microseconds.

    The fields of the issue (``network`` ... ``max_abs_error``), plus:
    ``trials_measured`` (records this run added), ``output_matches`` (the
    tolerance check), ``database_hits`` (PrimFuncs with a record),
    ``tuned_kernels`` (kernels running a tuned record or a predicted pick), ``stages_retimed``
    (per stage again, every kernel that runs timed here after tuning), ``tasks``
    (:class:`~tvm_latmodel.networks.kernels.KernelChoice` per workload), ``fused_groups``, ``notes``, ``target``.
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
    from ..model.modes import task_bound_s  # pylint: disable=import-outside-toplevel

    hw = HardwareSpec.from_target(target)

    def bounds(name, mod, _target):
        lower = roofline = None
        try:
            roofline = task_bound_s(mod, hw)
            lower = planner.predict_best_s(mod)
        except Exception as err:  # noqa: BLE001 - the scheduler copes with a missing bound
            say(f"[tune-network] no predicted bound for {name} ({_first_line(err)})")
        return lower, roofline

    return bounds


def _tune(tunable: list[Workload], *, target, work_dir, trials, per_iter, cost_model, scheduler, seed,
          pretrained, bound_fn, population, verbose, say):
    """``ms.tune_tasks`` on the workloads; (JSON database, tuning seconds, records added, the guarded
    cost model after tuning)."""
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
                space=design_space(target), seed=seed)
            if len(contexts) != len(tunable):
                raise RuntimeError("MetaSchedule dropped a task (already scheduled?)")
            start = time.time()
            with metaschedule_output(verbose):
                ms.tune_tasks(tasks=contexts, task_weights=[float(w.weight) for w in tunable], work_dir=work_dir,
                              max_trials_global=trials, num_trials_per_iter=per_iter, builder=local_builder(),
                              runner=local_runner(), database=database, cost_model=guarded,
                              task_scheduler=task_scheduler)
            tuning_s = time.time() - start
        return database, tuning_s, _count_records(work_dir) - before, guarded


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
        Planner decisions to override (see
        :func:`~tvm_latmodel.fusion.prepare.prepare_network`).
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
    database, tuning_s, measured, model = _tune(
        tunable, target=target, work_dir=work_dir, trials=trials, per_iter=per_iter, cost_model=cost_model,
        scheduler=scheduler, seed=seed, pretrained=pretrained, bound_fn=_bound_fn(planner, target, say),
        population=population, verbose=verbose, say=say)

    say("[tune-network] timing each kernel untuned; compiling with the tuning database")
    choices = choose_kernels(workloads, database, target, progress=say,
                             pick=lambda w: predicted_schedules(w.mod, target, model, seed=seed))
    with target, database, tvm.transform.PassContext(opt_level=3):
        hits = len(_scheduled_names(relax.transform.MetaScheduleApplyDatabase(enable_warning=False)(
            prepared.chosen.module)))
    # Only the chosen records: a wrong fastest record is not applied, and a loop nest that was faster stays.
    with target, chosen_database(workloads, choices, database, target), tvm.transform.PassContext(opt_level=3):
        scheduled = relax.transform.MetaScheduleApplyDatabase(enable_warning=False)(prepared.chosen.module)
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
