"""A MetaSchedule task scheduler that gives trials where the model predicts the most gain.

TVM's ``gradient`` scheduler (``ms.task_scheduler.GradientBased``) ranks
tasks by how fast their best latency *has been* falling; ``round-robin``
ignores latency altogether. :class:`GainScheduler` asks instead how much is
*left* to gain: each task carries a lower bound on its latency, and the next
trials go to the task with the largest

    predicted remaining gain = task weight x (best measured latency - lower bound)

where the lower bound is the hybrid model's best predicted latency over a
sample of the task's schedules (what tuning can be expected to reach) or,
when there is no prediction, the roofline bound (what no schedule can beat).
A prediction is not a bound: once a task's best measurement beats its
prediction its predicted gain is 0, and ties among such tasks are broken by
the weighted gap to the roofline bound (:func:`remaining_gain`).

Order of play (:meth:`GainScheduler.next_task_id`):

1. warm-up: every task without a measurement, once each (round-robin), the
   largest ``weight x lower bound`` first, so a budget too small to reach
   every task spends itself on the kernels that cost most;
2. then, after joining every pending measurement (so the choice depends on
   results only, not on timing), the live task of largest remaining gain;
3. finished tasks (terminated by MetaSchedule: trials exhausted or search
   space empty, or ``max_trials_per_task`` reached) are skipped; ``-1`` ends
   tuning.

How it plugs into TVM 0.27 (checked against ``task_scheduler.cc``): a
``PyTaskScheduler`` subclass decorated with ``@derived_object`` that
overrides ``next_task_id`` only. ``tune`` and ``join_running_task`` stay
TVM's: overriding either in Python makes the C++ side call back into Python,
and calling the base method from there dispatches virtually back to Python
(infinite recursion); TVM's own ``PyTaskScheduler.tune`` also lacks the
``num_trials_per_iter`` argument the C++ passes. ``TaskRecord`` exposes no
``latency_ms``, so measured latencies are read from the results
``join_running_task`` returns (and from the database for a resumed run).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from .latency import mean_latency_s, valid_latency

#: Scheduler names ``tune-network --scheduler`` accepts.
SCHEDULER_NAMES = ("gain", "gradient", "round-robin")


# --------------------------------------------------------- the pure choice


def remaining_gain(weight: float, best_s: float | None, lower_s: float | None,
                   roofline_s: float | None = None) -> tuple[float, float]:
    """A task's predicted remaining gain, and the tie-breaker, in weighted seconds.

    ``gain = weight * max(best - lower, 0)``; ``tie = weight * max(best - roofline, 0)``.

    Parameters
    ----------
    weight : float
        Calls of the task per network run.
    best_s : float or None
        Best measured latency so far; ``None`` (nothing valid measured) gives
        ``(-inf, -inf)``: such a task comes last.
    lower_s : float or None
        Lower bound (best predicted latency); ``None`` or not finite: the roofline bound.
    roofline_s : float or None
        Roofline bound; ``None`` counts as 0.

    Returns
    -------
    gain : float
    tie : float

    Examples
    --------
    >>> remaining_gain(2, 10e-6, 4e-6, 1e-6)
    (1.2e-05, 1.8e-05)
    >>> remaining_gain(1, 3e-6, 4e-6, 1e-6)   # beat its prediction: only the roofline gap is left
    (0.0, 2e-06)
    """
    if best_s is None or not math.isfinite(best_s):
        return -math.inf, -math.inf
    roofline = roofline_s if roofline_s is not None and math.isfinite(roofline_s) else 0.0
    lower = lower_s if lower_s is not None and math.isfinite(lower_s) else roofline
    return weight * max(best_s - lower, 0.0), weight * max(best_s - roofline, 0.0)


def warmup_order(weights: Sequence[float], lower_s: Sequence[float | None]) -> list[int]:
    """Task indices for the warm-up round: largest ``weight * lower bound`` first (stable).

    Examples
    --------
    >>> warmup_order([1, 4, 1], [5e-6, 2e-6, 1e-6])
    [1, 0, 2]
    """
    def expected(i: int) -> float:
        lower = lower_s[i]
        return weights[i] * (lower if lower is not None and math.isfinite(lower) else 0.0)

    return sorted(range(len(weights)), key=lambda i: -expected(i))


def pick_task(weights: Sequence[float], best_s: Sequence[float | None], lower_s: Sequence[float | None],
              roofline_s: Sequence[float | None], alive: Sequence[bool],
              trials: Sequence[int] | None = None) -> int:
    """The live task with the largest :func:`remaining_gain` (then tie, then fewest trials).

    Parameters
    ----------
    weights, best_s, lower_s, roofline_s : sequences, one entry per task
        See :func:`remaining_gain`.
    alive : sequence of bool
        ``False`` for finished tasks, which are never picked.
    trials : sequence of int, optional
        Trials each task has had (the last tie-breaker: fewer first).

    Returns
    -------
    int
        A task index, or ``-1`` when no task is alive.

    Examples
    --------
    >>> pick_task([1, 3], [10e-6, 5e-6], [2e-6, 2e-6], [1e-6, 1e-6], [True, True])
    1
    """
    trials = trials if trials is not None else [0] * len(weights)
    best_key, best_index = None, -1
    for i in range(len(weights)):
        if not alive[i]:
            continue
        gain, tie = remaining_gain(weights[i], best_s[i], lower_s[i], roofline_s[i])
        key = (gain, tie, -trials[i], -i)
        if best_key is None or key > best_key:
            best_key, best_index = key, i
    return best_index


# ------------------------------------------------------------ lower bounds


def analytical_bounds(mod, target, *, samples: int = 4, seed: int = 0, model=None) -> tuple[float, float]:
    """``(best predicted latency, roofline bound)`` of a task, in seconds.

    Samples ``samples`` schedules of ``mod`` from MetaSchedule's design space,
    predicts each with ``model`` (default the analytical model alone,
    ``HybridCostModel(residual=False)``) and takes the best; the roofline
    bound is the task's (:func:`tvm_latmodel.model.modes.task_bound_s`).

    Raises
    ------
    RuntimeError
        If no schedule could be sampled.
    """
    from .hardware import HardwareSpec
    from .model.modes import task_bound_s
    from .sampling import sampled_candidates

    context, candidates = sampled_candidates(mod, target, samples, seed=seed)
    if not candidates:
        raise RuntimeError("no valid schedule could be sampled")
    hw = HardwareSpec.from_target(target)
    roofline = float(task_bound_s(mod, hw))
    if model is None:
        from .model.cost_model import HybridCostModel

        model = HybridCostModel(target=target, residual=False, pretrained=None)
    predicted = np.asarray(model.predict_latency_s(context, candidates), dtype=float)
    predicted = predicted[np.isfinite(predicted) & (predicted > 0)]
    best = float(predicted.min()) if predicted.size else math.nan
    return best, roofline


# ------------------------------------------------------------ the scheduler


def _say_nothing(_text: str) -> None:
    return None


@derived_object
class GainScheduler(ms.task_scheduler.PyTaskScheduler):
    """Trials to the task with the largest predicted remaining gain.

    Parameters
    ----------
    bound_fn : callable, optional
        ``bound_fn(task_name, mod, target) -> (lower_s, roofline_s)`` for a
        task (its ``TuneContext``'s name, module and target); called once per
        task at the first :meth:`next_task_id`. Default
        :func:`analytical_bounds`. An exception or a non-finite value gives
        that task no lower bound (it then counts its gap to 0).
    max_trials_per_task : int, optional
        Tasks with this many trials are skipped (MetaSchedule also
        terminates them).
    progress : callable, optional
        Called with one line of text per decision (e.g. print to stderr).

    Attributes
    ----------
    lower_s_, roofline_s_ : list of float or None
        Each task's bounds, once known.
    best_s_ : list of float or None
        Best valid measured latency of each task (``None``: none yet).
    trials_ : list of int
        Measured trials of each task (failures included).
    history_ : list of (int, str)
        Every pick: task index and why (``warm-up`` or ``gain``).
    """

    def __init__(self, *, bound_fn: Callable | None = None, max_trials_per_task: int | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.bound_fn = bound_fn
        self.max_trials_per_task = max_trials_per_task
        self.progress = progress or _say_nothing
        self.lower_s_: list[float | None] = []
        self.roofline_s_: list[float | None] = []
        self.best_s_: list[float | None] = []
        self.trials_: list[int] = []
        self.measured_: list[bool] = []
        self.weights_: list[float] = []
        self.names_: list[str] = []
        self.warmup_: list[int] = []
        self.history_: list[tuple[int, str]] = []
        self._initialized = False
        self._first_ctx = None

    # ------------------------------------------------------------ helpers
    def _tasks(self):
        return self._outer().tasks_

    def _initialize(self, tasks) -> None:
        n = len(tasks)
        self.weights_ = [float(t.task_weight) for t in tasks]
        self.names_ = [str(t.ctx.task_name) for t in tasks]
        self.best_s_, self.trials_, self.measured_ = [None] * n, [0] * n, [False] * n
        self.lower_s_, self.roofline_s_ = [None] * n, [None] * n
        database = self._outer().database_
        for i, task in enumerate(tasks):
            self.lower_s_[i], self.roofline_s_[i] = self._bounds(task.ctx)
            self._seed_from_database(i, task.ctx, database)
        self.warmup_ = [i for i in warmup_order(self.weights_, self.lower_s_) if not self.measured_[i]]
        self._initialized, self._first_ctx = True, tasks[0].ctx
        known = [i for i in range(n) if self.lower_s_[i] is not None]
        total = sum(self.weights_[i] * self.lower_s_[i] for i in known)
        self.progress(f"[scheduler] gain: predicted lower bounds for {len(known)} of {n} tasks "
                      f"(weighted sum {_us(total)}); {n - len(self.warmup_)} already measured")

    def _bounds(self, ctx) -> tuple[float | None, float | None]:
        fn = self.bound_fn or (lambda name, mod, target: analytical_bounds(mod, target))
        try:
            lower, roofline = fn(str(ctx.task_name), ctx.mod, ctx.target)
        except Exception as err:  # noqa: BLE001 - a failed bound must not stop tuning
            self.progress(f"[scheduler] no lower bound for {ctx.task_name}: {type(err).__name__}: {err}")
            return None, None
        lower = float(lower) if lower is not None and math.isfinite(lower) and lower > 0 else None
        roofline = float(roofline) if roofline is not None and math.isfinite(roofline) and roofline > 0 else None
        return lower, roofline

    def _seed_from_database(self, i: int, ctx, database) -> None:
        """A resumed work directory: the task's best record counts as measured."""
        if database is None:
            return
        try:
            record = database.query_tuning_record(ctx.mod, ctx.target, str(ctx.task_name))
        except Exception:  # noqa: BLE001 - an unreadable database is just no history
            return
        if record is None:
            return
        latency = mean_latency_s(record.run_secs)
        if latency is not None:
            self.best_s_[i] = latency
            self.measured_[i] = True

    def _join(self, i: int) -> None:
        results = self.join_running_task(i)
        self.trials_[i] += len(results)
        self.measured_[i] = True
        for result in results:
            latency = valid_latency(result)
            if latency is not None and (self.best_s_[i] is None or latency < self.best_s_[i]):
                self.best_s_[i] = latency

    def _alive(self, tasks) -> list[bool]:
        cap = self.max_trials_per_task
        return [not t.is_terminated and (cap is None or self.trials_[i] < cap) for i, t in enumerate(tasks)]

    # -------------------------------------------------------- the choice
    def next_task_id(self) -> int:
        """The next task to give ``num_trials_per_iter`` trials to, or ``-1`` when done."""
        tasks = self._tasks()
        if not self._initialized or not tasks[0].ctx.same_as(self._first_ctx):  # a new tune() call
            self._initialize(tasks)
        alive = self._alive(tasks)
        while self.warmup_:
            i = self.warmup_.pop(0)
            if alive[i] and tasks[i].runner_futures is None:
                self.history_.append((i, "warm-up"))
                self.progress(f"[scheduler] task #{i} {self.names_[i]}: warm-up "
                              f"(weight {self.weights_[i]:g}, lower bound {_us(self.lower_s_[i])})")
                return i
        for i, task in enumerate(tasks):
            if task.runner_futures is not None:
                self._join(i)
        alive = self._alive(tasks)
        i = pick_task(self.weights_, self.best_s_, self.lower_s_, self.roofline_s_, alive, self.trials_)
        if i < 0:
            return -1
        gain, _ = remaining_gain(self.weights_[i], self.best_s_[i], self.lower_s_[i], self.roofline_s_[i])
        self.history_.append((i, "gain"))
        self.progress(f"[scheduler] task #{i} {self.names_[i]}: best {_us(self.best_s_[i])}, lower bound "
                      f"{_us(self.lower_s_[i])}, weight {self.weights_[i]:g}, predicted gain {_us(gain)}")
        return i


def _us(seconds: float | None) -> str:
    return "-" if seconds is None or not math.isfinite(seconds) else f"{seconds * 1e6:.1f} us"


def make_scheduler(name: str, *, seed: int = 0, bound_fn: Callable | None = None,
                   progress: Callable[[str], None] | None = None):
    """A task scheduler by name: ``gain`` (ours), ``gradient`` or ``round-robin`` (TVM's).

    Raises
    ------
    ValueError
        For an unknown name.
    """
    if name == "gain":
        return GainScheduler(bound_fn=bound_fn, progress=progress)
    if name == "gradient":
        return ms.task_scheduler.GradientBased(seed=int(seed))
    if name == "round-robin":
        return ms.task_scheduler.RoundRobin()
    raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(SCHEDULER_NAMES)}")
