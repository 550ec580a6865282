"""Offline evaluation of a cost model on logged tasks (:class:`ReplayEvaluator`).

The evaluator drives any MetaSchedule cost model *only* through its
interface -- ``model.update(context, candidates, results)`` and
``model.predict(context, candidates)`` (higher = predicted faster) -- and
scores its ranking of the logged candidates (rank correlations, pairwise
accuracy, top-k, MAPE when the model predicts absolute latency) and a
simulated search over the logged pool (:func:`~.search.simulate_search`).
"""

from __future__ import annotations

import os
import sys
import warnings
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.registry import MODEL_NAMES, make_model
from .logs import ReplayWarning, Task, load_tasks
from .metrics import kendall, mape_percent, pairwise_accuracy, spearman, top_k_score
from .search import SearchResult, _SeededCalls, simulate_search

METRIC_KEYS = (
    "records",
    "spearman",
    "kendall",
    "pairwise_accuracy",
    "top1_score",
    "top5_score",
    "mape",
    "trials_to_5pct",
)


@dataclass
class TaskMetrics:
    """Metrics of one task; ``records`` is the number of held-out records scored."""

    task: str
    records: int
    spearman: float
    kendall: float
    pairwise_accuracy: float
    top1_score: float
    top5_score: float
    mape: float | None
    trials_to_5pct: int
    #: The task's workload is in the model's pretraining data: scored, but
    #: reported apart and left out of the mean.
    in_pretraining: bool = False

    def to_dict(self) -> dict:
        out = {"task": self.task, **{k: getattr(self, k) for k in METRIC_KEYS}}
        if self.in_pretraining:
            out["in_pretraining"] = True
        return out


@dataclass
class ReplayReport:
    """What :meth:`ReplayEvaluator.evaluate` returns.

    Parameters
    ----------
    model : str
        The model's name.
    shots : int
        Records per task given to the model before scoring.
    transfer : bool
        Whether all other tasks' records were given too.
    tasks : list of TaskMetrics
    predictions : list of dict
        One per held-out record: ``task``, ``index``, ``measured_s``, ``score``.
    searches : dict of str to SearchResult
        The simulated search of each task.
    """

    model: str
    shots: int
    transfer: bool
    tasks: list[TaskMetrics]
    predictions: list[dict]
    searches: dict[str, SearchResult]

    def mean(self, in_pretraining: bool = False) -> dict:
        """Every numeric metric averaged over the tasks the model was not
        pretrained on (``in_pretraining=True``: over those it was), ``mape``
        over tasks that have one; None where no task qualifies."""
        out: dict[str, float | None] = {}
        tasks = [t for t in self.tasks if t.in_pretraining == in_pretraining]
        for key in METRIC_KEYS:
            values = [getattr(t, key) for t in tasks if getattr(t, key) is not None]
            out[key] = float(np.mean(values)) if values else None
        return out

    def to_dict(self) -> dict:
        """The ``--json`` document: ``{"model", "shots", "tasks": [...], "mean": {...}}``,
        plus ``"mean_in_pretraining"`` when some tasks were in the model's pretraining data."""
        out = {
            "model": self.model,
            "shots": self.shots,
            "tasks": [t.to_dict() for t in self.tasks],
            "mean": self.mean(),
        }
        if any(t.in_pretraining for t in self.tasks):
            out["mean_in_pretraining"] = self.mean(in_pretraining=True)
        return out


def _task_seed(seed: int, name: str) -> np.random.SeedSequence:
    # Stable across runs and across which other tasks are loaded.
    return np.random.SeedSequence([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())])


def task_in_pretraining(model, task: Task) -> bool:
    """Whether ``task``'s workload is among those ``model`` was pretrained on
    (``model.pretrained_workloads_``, structural hashes; models without one: no)."""
    workloads = getattr(model, "pretrained_workloads_", None)
    if not workloads:
        return False
    from tvm.s_tir import meta_schedule as ms

    return ms.utils.shash2hex(task.mod) in workloads


class ReplayEvaluator:
    """Evaluate a cost model on logged tasks, through update/predict only.

    Parameters
    ----------
    shots : int
        Records of each task (a seeded sample) given to the model through
        ``update`` before it scores the rest; they also count as measured in
        the simulated search.
    transfer : bool
        Leave-one-task-out: before a task is scored, the model is given all
        records of every *other* task (each with its own TuneContext; a
        model with ``absorb``, the hybrid, gets them featurised by a model
        of that task's own spec, ``model_factory(other)``).
    batch_size : int
        Candidates measured per round of the simulated search.
    tolerance : float
        The search target: within this fraction of the pool's best latency.
    seed : int
        Seeds the shots and the models' global-NumPy draws.
    progress : bool
        A tqdm bar on stderr.
    """

    def __init__(
        self,
        *,
        shots: int = 0,
        transfer: bool = False,
        batch_size: int = 16,
        tolerance: float = 0.05,
        seed: int = 0,
        progress: bool = False,
    ):
        self.shots = shots
        self.transfer = transfer
        self.batch_size = batch_size
        self.tolerance = tolerance
        self.seed = seed
        self.progress = progress

    def shot_indices(self, task: Task) -> np.ndarray:
        """Positions in ``task.records`` of the shots (seeded by task name), sorted."""
        k = min(int(self.shots), len(task.records))
        rng = np.random.default_rng(_task_seed(self.seed, task.name))
        return np.sort(rng.choice(len(task.records), size=k, replace=False))

    def scorable(self, task: Task) -> bool:
        """Whether ``task`` keeps the two held-out records a score needs after its shots."""
        return len(task.records) - min(int(self.shots), len(task.records)) >= 2

    def evaluate(
        self,
        tasks: Sequence[Task],
        model_factory: Callable[[Task], Any],
        *,
        model_name: str = "model",
        only: Sequence[str] | None = None,
    ) -> ReplayReport:
        """Score a fresh model (``model_factory(task)``) on every task.

        ``only``: names of the tasks to score (default all); the others still
        serve as the training pool of ``transfer``.

        Returns
        -------
        ReplayReport

        Raises
        ------
        ValueError
            Negative shots, or no task with at least two held-out records.
        """
        from ..sampling import make_context

        if self.shots < 0:
            raise ValueError(f"--shots must be >= 0, got {self.shots}")
        if self.batch_size < 1:
            raise ValueError(f"batch size must be >= 1, got {self.batch_size}")
        contexts: dict[int, Any] = {}

        def context(i: int):
            if i not in contexts:
                contexts[i] = make_context(tasks[i].mod, tasks[i].target, self.seed + 1)
            return contexts[i]

        metrics: list[TaskMetrics] = []
        predictions: list[dict] = []
        searches: dict[str, SearchResult] = {}
        rows: Iterable = [i for i, t in enumerate(tasks) if only is None or t.name in only]
        if self.progress:
            from tqdm import tqdm

            rows = tqdm(rows, desc="replay", unit="task", file=sys.stderr)
        for ti in rows:
            task = tasks[ti]
            shots = self.shot_indices(task)
            held = np.setdiff1d(np.arange(len(task.records)), shots)
            if not self.scorable(task):
                warnings.warn(
                    f"{task.path}: task {task.name} has {len(task.records)} valid records, "
                    f"too few to hold out two after {len(shots)} shots; skipped",
                    ReplayWarning,
                    stacklevel=2,
                )
                continue
            rng = np.random.default_rng(_task_seed(self.seed + 1, task.name))
            raw_model = model_factory(task)
            seen = task_in_pretraining(raw_model, task)
            if seen:
                warnings.warn(
                    f"{task.path}: task {task.name} is in the pretrained model's training data; "
                    "its metrics are reported apart and left out of the mean",
                    ReplayWarning,
                    stacklevel=2,
                )
            model = _SeededCalls(raw_model, rng)
            if self.transfer:
                for oi, other in enumerate(tasks):
                    if oi == ti:
                        continue
                    if hasattr(raw_model, "absorb"):
                        # featurised with the spec of the machine that measured it, not the scored task's
                        part = model_factory(other)
                        part.update(context(oi), other.candidates(), other.results())
                        raw_model.absorb(part)
                    else:
                        model.update(context(oi), other.candidates(), other.results())
            ctx = context(ti)
            cands, results = task.candidates(), task.results()
            model.update(ctx, [cands[i] for i in shots], [results[i] for i in shots])
            held_cands = [cands[i] for i in held]
            latency = task.latencies_s[held]
            scores = model.predict(ctx, held_cands)
            mape = None
            if model.predicts_latency:
                mape = mape_percent(model.predict_latency_s(ctx, held_cands), latency)
            search = simulate_search(
                model,
                ctx,
                cands,
                [r.run_secs for r in task.records],
                measured=shots,
                batch_size=self.batch_size,
                tolerance=self.tolerance,
            )
            searches[task.name] = search
            metrics.append(
                TaskMetrics(
                    task=task.name,
                    records=int(held.size),
                    spearman=spearman(scores, latency),
                    kendall=kendall(scores, latency),
                    pairwise_accuracy=pairwise_accuracy(scores, latency),
                    top1_score=top_k_score(scores, latency, 1),
                    top5_score=top_k_score(scores, latency, 5),
                    mape=mape,
                    trials_to_5pct=search.trials_to_target,
                    in_pretraining=seen,
                )
            )
            predictions.extend(
                {"task": task.name, "index": task.records[i].index, "measured_s": float(t), "score": float(s)}
                for i, t, s in zip(held, latency, scores)
            )
        if not metrics:
            raise ValueError(f"no task has at least two records left to score after {self.shots} shots")
        return ReplayReport(
            model=model_name,
            shots=int(self.shots),
            transfer=bool(self.transfer),
            tasks=metrics,
            predictions=predictions,
            searches=searches,
        )


def replay(
    paths,
    model: str = "xgb",
    *,
    shots: int = 0,
    transfer: bool = False,
    seed: int = 0,
    pretrained: str | os.PathLike | None = "shipped",
    progress: bool = False,
) -> tuple[list[Task], ReplayReport]:
    """Load ``paths`` and evaluate the model named ``model`` on them (the ``replay`` command)."""
    tasks = load_tasks(paths, progress=progress)
    if model not in MODEL_NAMES:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(MODEL_NAMES)}")
    evaluator = ReplayEvaluator(shots=shots, transfer=transfer, seed=seed, progress=progress)
    report = evaluator.evaluate(
        tasks,
        lambda task: make_model(model, seed=seed, pretrained=pretrained, target=task.target, hardware=task.hardware),
        model_name=model,
    )
    return tasks, report
