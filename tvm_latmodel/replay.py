"""Offline evaluation of cost models on MetaSchedule tuning logs.

A MetaSchedule tuning database (``database_workload.json`` plus
``database_tuning_record.json``, one JSON line per entry) keeps, for every
measured candidate, the schedule's trace, its measured ``run_secs`` and the
target it ran on. Re-applying a trace to its workload gives back the exact
schedule, so a log can be replayed without any hardware:

* :func:`load_tasks` reads databases (or folders holding several, found
  recursively) line by line, so trial order and line numbers are kept, and
  rebuilds every schedule once;
* :class:`ReplayEvaluator` drives any MetaSchedule cost model *only* through
  its interface -- ``model.update(context, candidates, results)`` and
  ``model.predict(context, candidates)`` (higher = predicted faster) -- and
  scores its ranking of the logged candidates (rank correlations, pairwise
  accuracy, top-k, MAPE when the model predicts absolute latency) and a
  simulated search over the logged pool (:func:`simulate_search`);
* :func:`make_model` builds the models by short name: ``xgb`` (TVM's own
  ``XGBModel``), ``random``, ``hybrid`` and ``analytical``
  (:class:`tvm_latmodel.cost_model.HybridCostModel`).

Bad lines of a log (truncated or non-JSON, a missing workload, failed or
non-finite ``run_secs``, a trace that no longer applies) are skipped with a
:class:`ReplayWarning` naming the file and line; the good records still count.

Tie-breaking is *worst case* everywhere: among candidates whose scores tie,
the model is assumed to pick the slowest first (see :func:`rank_order`), so a
model cannot look good by scoring everything alike.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import warnings
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"

#: MetaSchedule writes ``run_secs = [1e10]`` for a candidate whose build or run failed.
FAILURE_SENTINEL_S = 1e10

#: Model names :func:`make_model` knows.
MODEL_NAMES = ("analytical", "hybrid", "xgb", "random")

#: The numeric per-task keys of :meth:`ReplayReport.to_dict` (and of its ``mean``).
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

# Per database file, at most this many bad-line warnings are shown one by one;
# the rest are summed up in one more warning.
_MAX_LINE_WARNINGS = 20


class ReplayWarning(UserWarning):
    """A bad line in a tuning database, skipped; the message names file and line."""


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


@dataclass(eq=False)
class Record:
    """One measured candidate of a tuning log.

    Parameters
    ----------
    index : int
        Line number in ``database_tuning_record.json``, counting from 0.
    schedule : tvm.s_tir.Schedule
        The schedule rebuilt from the record's trace.
    run_secs : tuple of float
        The logged measurements, in seconds (all finite and positive).
    args_info : list of ms.arg_info.ArgInfo
        The kernel's arguments, as logged.
    """

    index: int
    schedule: Any
    run_secs: tuple[float, ...]
    args_info: list

    @property
    def trace(self):
        """The schedule's trace (``tvm.s_tir.Trace``)."""
        return self.schedule.trace

    @property
    def latency_s(self) -> float:
        """Measured latency in seconds: the mean of ``run_secs``."""
        return float(np.mean(self.run_secs))


@dataclass(eq=False)
class Task:
    """The valid records of one workload of one tuning database.

    Parameters
    ----------
    name : str
        The database's directory name (with ``[i]`` appended for workload
        ``i`` when one database holds several workloads).
    path : pathlib.Path
        The database directory.
    mod : tvm.IRModule
        The workload.
    target : tvm.target.Target
        The target the records were measured on (from the records, not from
        the machine replaying them).
    records : list of Record
        Valid records in file order.
    failed_indices : list of int
        Lines of this workload that were skipped (failed runs, bad values).
    """

    name: str
    path: Path
    mod: Any
    target: Any
    records: list[Record]
    failed_indices: list[int] = field(default_factory=list)
    _candidates: list | None = field(default=None, repr=False)
    _results: list | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def latencies_s(self) -> np.ndarray:
        """Measured latency of every record, seconds."""
        return np.array([r.latency_s for r in self.records], dtype=np.float64)

    def candidates(self) -> list:
        """``ms.MeasureCandidate`` of every record, built once and cached."""
        if self._candidates is None:
            from tvm.s_tir import meta_schedule as ms

            self._candidates = [ms.MeasureCandidate(r.schedule, r.args_info) for r in self.records]
        return self._candidates

    def results(self) -> list:
        """``ms.runner.RunnerResult`` of every record (its logged ``run_secs``), cached."""
        if self._results is None:
            self._results = [_runner_result(r.run_secs) for r in self.records]
        return self._results


def _runner_result(run_secs: Sequence[float]):
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.RunnerResult(run_secs=[float(s) for s in run_secs], error_msg=None)


class _LineWarner:
    """Warn about bad lines of one file, the first few one by one, then a count."""

    def __init__(self, path: Path):
        self.path = path
        self.count = 0

    def __call__(self, line_no: int, message: str) -> None:
        self.count += 1
        if self.count <= _MAX_LINE_WARNINGS:
            warnings.warn(f"{self.path}, line {line_no + 1}: {message}", ReplayWarning, stacklevel=3)

    def finish(self) -> None:
        if self.count > _MAX_LINE_WARNINGS:
            warnings.warn(
                f"{self.path}: {self.count - _MAX_LINE_WARNINGS} more bad lines not shown "
                f"({self.count} in all)",
                ReplayWarning,
                stacklevel=3,
            )


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    first = next((t for t in text if t.strip()), type(err).__name__)
    return first if len(first) <= 300 else first[:297] + "..."


def _check_run_secs(raw: Any) -> tuple[tuple[float, ...] | None, str | None]:
    """``(run_secs, None)`` if usable, else ``(None, why)``."""
    if raw is None or (isinstance(raw, list) and not raw):
        return None, "empty run_secs (the candidate was never measured): counted as failed"
    if not isinstance(raw, list) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in raw
    ):
        return None, f"run_secs must be a list of numbers, got {json.dumps(raw)[:80]}"
    values = tuple(float(x) for x in raw)
    if any(math.isnan(x) or math.isinf(x) for x in values):
        return None, f"run_secs {list(values)} is not finite: counted as failed"
    if any(x >= FAILURE_SENTINEL_S * (1 - 1e-6) for x in values):
        return None, "run_secs holds MetaSchedule's 1e10 failure sentinel (build or run failed): counted as failed"
    if any(x <= 0 for x in values):
        return None, f"run_secs {list(values)} is not positive: counted as failed"
    return values, None


def _parse_json_line(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except json.JSONDecodeError as err:
        return None, f"not valid JSON ({err.msg} at column {err.colno}; truncated line?)"


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text ({err})") from None


def load_database(directory: str | os.PathLike, *, name: str | None = None, progress: bool = False) -> list[Task]:
    """Load one tuning database directory.

    Parameters
    ----------
    directory : path
        Holds ``database_workload.json`` and ``database_tuning_record.json``.
    name : str, optional
        Task name (default: the directory's name).
    progress : bool
        Show a tqdm bar on stderr while schedules are rebuilt.

    Returns
    -------
    list of Task
        One per workload that has valid records, in workload order; empty if
        the database holds no valid record.

    Raises
    ------
    ValueError
        If one of the two files is missing.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms

    directory = Path(directory)
    name = name or directory.resolve().name
    wl_path, rec_path = directory / WORKLOAD_FILE, directory / RECORD_FILE
    for p in (wl_path, rec_path):
        if not p.is_file():
            raise ValueError(f"{directory}: not a MetaSchedule tuning database ({p.name} is missing)")

    workloads: dict[int, Any] = {}
    warn_wl = _LineWarner(wl_path)
    for i, text in enumerate(_read_lines(wl_path)):
        if not text.strip():
            continue
        obj, why = _parse_json_line(text)
        if why is None:
            try:
                workloads[i] = ms.database.Workload.from_json(obj)
            except Exception as err:  # TVM raises its own error types
                why = f"not a MetaSchedule workload ({_short(err)})"
        if why is not None:
            warn_wl(i, why)
    warn_wl.finish()

    warn = _LineWarner(rec_path)
    lines = _read_lines(rec_path)
    by_workload: dict[int, Task] = {}
    failed: dict[int, list[int]] = {}
    target_text: dict[int, str] = {}

    rows: Iterable = enumerate(lines)
    if progress:
        from tqdm import tqdm

        rows = tqdm(rows, total=len(lines), desc=f"load {name}", unit="rec", file=sys.stderr, leave=False)
    for i, text in rows:
        if not text.strip():
            continue
        obj, why = _parse_json_line(text)
        if why is not None:
            warn(i, why)
            continue
        if not (
            isinstance(obj, list)
            and len(obj) == 2
            and isinstance(obj[0], int)
            and isinstance(obj[1], list)
            and len(obj[1]) == 4
        ):
            warn(i, "not a tuning record: expected [workload_index, [trace, run_secs, target, args_info]]")
            continue
        wl_index, (trace_json, raw_secs, target_json, args_json) = obj
        if wl_index not in workloads:
            warn(i, f"workload index {wl_index} is not in {wl_path.name} (valid: {sorted(workloads)})")
            continue
        run_secs, why = _check_run_secs(raw_secs)
        if why is not None:
            warn(i, why)
            failed.setdefault(wl_index, []).append(i)
            continue
        try:
            target = tvm.target.Target(target_json)
        except Exception as err:
            warn(i, f"bad target {json.dumps(target_json)[:120]} ({_short(err)})")
            continue
        try:
            args_info = [ms.arg_info.ArgInfo.from_json(a) for a in args_json]
        except Exception as err:
            warn(i, f"bad args_info ({_short(err)})")
            continue
        mod = workloads[wl_index].mod
        try:
            # Equivalent to TuningRecord.from_json(...).trace.apply_to_schedule(
            # Schedule(mod), remove_postproc=False), with one rebuild instead of two.
            sch = tvm.s_tir.Schedule(mod)
            tvm.s_tir.schedule.Trace.apply_json_to_schedule(trace_json, sch)
        except Exception as err:
            warn(i, f"the trace no longer applies to the workload ({_short(err)})")
            continue
        text_t = str(target)
        if wl_index in target_text and text_t != target_text[wl_index]:
            warn(i, f"target {text_t} differs from this workload's earlier records ({target_text[wl_index]})")
            continue
        if wl_index not in by_workload:
            target_text[wl_index] = text_t
            by_workload[wl_index] = Task(name=name, path=directory, mod=mod, target=target, records=[])
        by_workload[wl_index].records.append(Record(i, sch, run_secs, args_info))
    warn.finish()

    tasks = [by_workload[k] for k in sorted(by_workload)]
    for k, task in zip(sorted(by_workload), tasks):
        task.failed_indices = failed.get(k, [])
        if len(tasks) > 1:
            task.name = f"{name}[{k}]"
    return tasks


def find_databases(path: str | os.PathLike) -> list[Path]:
    """Database directories at or under ``path`` (sorted).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If no database is found.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_file():
        if path.name in (WORKLOAD_FILE, RECORD_FILE):
            path = path.parent
        else:
            raise ValueError(f"{path}: not a MetaSchedule tuning database (give its directory)")
    if (path / RECORD_FILE).exists() or (path / WORKLOAD_FILE).exists():
        return [path]
    found = sorted({p.parent for p in path.rglob(RECORD_FILE)} | {p.parent for p in path.rglob(WORKLOAD_FILE)})
    if not found:
        raise ValueError(
            f"{path}: no MetaSchedule tuning database found (no {RECORD_FILE} and {WORKLOAD_FILE} in it or below)"
        )
    return found


def load_tasks(paths: str | os.PathLike | Sequence[str | os.PathLike], *, progress: bool = False) -> list[Task]:
    """Load tuning databases into tasks, rebuilding every schedule once.

    Parameters
    ----------
    paths : path or sequence of paths
        Database directories, or folders searched recursively for them.
    progress : bool
        Show tqdm bars on stderr.

    Returns
    -------
    list of Task
        In the order given (folders: sorted by path). Task names are made
        unique by prefixing parent folders where directory names collide.

    Raises
    ------
    ValueError
        A path with no database; a database given directly that holds no
        valid record; folders whose databases hold no valid record at all.
        (An empty database found inside a folder is skipped with a
        :class:`ReplayWarning`.)
    FileNotFoundError
        A path that does not exist.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise ValueError("no tuning database given")
    tasks: list[Task] = []
    seen: set[Path] = set()
    for given in paths:
        dirs = find_databases(given)
        # A database named directly (not found inside a folder) must hold records.
        direct = Path(given).is_file() or (len(dirs) == 1 and dirs[0] == Path(given))
        found = []
        for d in dirs:
            key = d.resolve()
            if key in seen:
                continue
            seen.add(key)
            loaded = load_database(d, progress=progress)
            if not loaded:
                msg = f"{d}: empty tuning database (no valid record in {RECORD_FILE})"
                if direct:
                    raise ValueError(msg)
                warnings.warn(msg + "; skipped", ReplayWarning, stacklevel=2)
            found.extend(loaded)
        if not found and not direct:
            raise ValueError(f"{given}: no tuning database under it holds a valid record")
        tasks.extend(found)
    _unique_names(tasks)
    return tasks


def _unique_names(tasks: list[Task]) -> None:
    names = [t.name for t in tasks]
    if len(set(names)) == len(names):
        return
    depth = 1
    while len(set(names)) < len(names) and depth < 64:
        depth += 1
        names = []
        for t in tasks:
            parts = t.path.resolve().parts[-depth:]
            suffix = t.name[len(t.path.resolve().name):]  # keep "[i]" of multi-workload databases
            names.append("/".join(parts) + suffix)
    for t, n in zip(tasks, names):
        t.name = n


# ---------------------------------------------------------------------------
# Metrics: pure functions of (scores, measured latencies); higher score = faster
# ---------------------------------------------------------------------------


def _as_pair(scores, latency_s) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    t = np.asarray(latency_s, dtype=np.float64).reshape(-1)
    if s.shape != t.shape:
        raise ValueError(f"{s.size} scores for {t.size} latencies")
    return s, t


def rank_order(scores, latency_s) -> np.ndarray:
    """Indices from the model's best pick to its worst, ties broken worst case.

    Sorted by score, highest first; among equal scores the *slowest*
    candidate comes first, so ties always count against the model.
    """
    s, t = _as_pair(scores, latency_s)
    return np.lexsort((-t, -s))


def spearman(scores, latency_s) -> float:
    """Spearman rank correlation of score with ``-latency`` (1 = perfect order).

    0.0 when either side is constant (no ranking information).
    """
    from scipy import stats

    s, t = _as_pair(scores, latency_s)
    if s.size < 2 or np.ptp(s) == 0 or np.ptp(t) == 0:
        return 0.0
    return float(stats.spearmanr(s, -t).statistic)


def kendall(scores, latency_s) -> float:
    """Kendall's tau-b of score with ``-latency``; 0.0 when either side is constant."""
    from scipy import stats

    s, t = _as_pair(scores, latency_s)
    if s.size < 2 or np.ptp(s) == 0 or np.ptp(t) == 0:
        return 0.0
    return float(stats.kendalltau(s, -t).statistic)


def pairwise_accuracy(scores, latency_s) -> float:
    """Fraction of pairs with different latency that the scores order correctly.

    A pair whose scores tie counts as half correct. 0.5 when no pair has
    different latencies.
    """
    s, t = _as_pair(scores, latency_s)
    correct = 0.0
    pairs = 0
    for start in range(0, s.size, 1024):  # rows in chunks: O(n^2) work, O(1024 n) memory
        ds = s[start : start + 1024, None] - s[None, :]
        dt = t[start : start + 1024, None] - t[None, :]
        faster = dt < 0  # row candidate measured faster than column candidate
        pairs += int(faster.sum())
        correct += float((faster & (ds > 0)).sum()) + 0.5 * float((faster & (ds == 0)).sum())
    return correct / pairs if pairs else 0.5


def top_k_score(scores, latency_s, k: int) -> float:
    """Best latency of all candidates / best latency among the model's top ``k``.

    1.0 is perfect. Ties with the ``k``-th pick are broken worst case
    (:func:`rank_order`).
    """
    s, t = _as_pair(scores, latency_s)
    if s.size == 0:
        raise ValueError("top_k_score of no candidates")
    picks = rank_order(s, t)[: max(1, int(k))]
    return float(t.min() / t[picks].min())


def mape_percent(predicted_s, latency_s) -> float:
    """Mean absolute percentage error of predicted latencies, in percent."""
    p, t = _as_pair(predicted_s, latency_s)
    return float(np.mean(np.abs(p - t) / t) * 100.0)


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


def _random_model_class():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.cost_model import PyCostModel

    @derived_object
    class SeededRandomModel(PyCostModel):
        """Uniform random scores from a seeded ``np.random.Generator`` (a baseline).

        Unlike ``ms.cost_model.RandomModel`` it never touches NumPy's global
        random state. ``update`` learns nothing.
        """

        def __init__(self, *, seed: int = 0):
            super().__init__()
            self.seed = seed
            self.rng_ = np.random.default_rng(seed)

        def load(self, path: str) -> None:
            raise ValueError("the random model has nothing to load")

        def save(self, path: str) -> None:
            raise ValueError("the random model has nothing to save")

        def update(self, context, candidates, results) -> None:
            return None

        def predict(self, context, candidates) -> np.ndarray:
            return self.rng_.random(len(candidates))

    return SeededRandomModel


_RANDOM_MODEL = None


def make_model(name: str, seed: int = 0, pretrained: str | os.PathLike | None = None, *, target=None):
    """A fresh MetaSchedule cost model by short name.

    Parameters
    ----------
    name : {"analytical", "hybrid", "xgb", "random"}
        ``xgb`` is TVM's own ``ms.cost_model.XGBModel`` with TVM's defaults
        (seeded through ``XGBConfig.seed``). Note that it returns *random*
        scores until it holds ``num_warmup_samples`` = 100 samples: that is
        its real behaviour in a search, kept on purpose. ``random`` is a
        seeded random scorer. ``hybrid`` and ``analytical`` are
        :class:`tvm_latmodel.cost_model.HybridCostModel` with and without its
        learned residual.
    seed : int
        Seed of the model's own random state.
    pretrained : path, optional
        A saved HybridCostModel (``hybrid``/``analytical`` only; TVM's
        XGBModel files are pickles, which we never load from users).
    target : tvm.target.Target, optional
        The target the model predicts for (HybridCostModel).

    Raises
    ------
    ValueError
        Unknown name, or ``pretrained`` given for a model that cannot load one.
    """
    global _RANDOM_MODEL
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")
    if pretrained is not None and name in ("xgb", "random"):
        raise ValueError(
            f"--pretrained is for the hybrid and analytical models; the {name} model cannot load "
            "one (TVM's XGBModel files are pickles, which are never loaded from user input)"
        )
    if name == "xgb":
        from tvm.s_tir.meta_schedule.cost_model.xgb_model import XGBConfig, XGBModel

        return XGBModel(config=XGBConfig(seed=int(seed)))
    if name == "random":
        if _RANDOM_MODEL is None:
            _RANDOM_MODEL = _random_model_class()
        return _RANDOM_MODEL(seed=int(seed))
    from .cost_model import HybridCostModel  # lazily: optional for xgb/random users

    return HybridCostModel(
        target=target,
        pretrained=None if pretrained is None else str(pretrained),
        residual=(name == "hybrid"),
        seed=int(seed),
    )


class _SeededCalls:
    """Drive a model through update/predict with NumPy's global random state
    seeded from our Generator for the call, and restored afterwards.

    TVM's XGBModel (during warm-up) and RandomModel draw from the global
    state; this makes their scores reproducible without leaking any change
    to the caller's global state.
    """

    def __init__(self, model, rng: np.random.Generator):
        self.model = model
        self.rng = rng
        self.predicts_latency = callable(getattr(model, "predict_latency_s", None))

    @contextlib.contextmanager
    def _seeded(self):
        state = np.random.get_state()
        np.random.seed(int(self.rng.integers(2**32 - 1)))
        try:
            yield
        finally:
            np.random.set_state(state)

    def update(self, context, candidates, results) -> None:
        if len(candidates):
            with self._seeded():
                self.model.update(context, list(candidates), list(results))

    def predict(self, context, candidates) -> np.ndarray:
        with self._seeded():
            out = self.model.predict(context, list(candidates))
        return _check_output(out, len(candidates), "predict")

    def predict_latency_s(self, context, candidates) -> np.ndarray:
        with self._seeded():
            out = self.model.predict_latency_s(context, list(candidates))
        return _check_output(out, len(candidates), "predict_latency_s")


def _check_output(out, n: int, what: str) -> np.ndarray:
    arr = np.asarray(out, dtype=np.float64).reshape(-1)
    if arr.size != n:
        raise ValueError(f"the model's {what} returned {arr.size} values for {n} candidates")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"the model's {what} returned non-finite values")
    return arr


# ---------------------------------------------------------------------------
# Simulated search
# ---------------------------------------------------------------------------


@dataclass
class SearchResult:
    """Outcome of :func:`simulate_search`.

    Parameters
    ----------
    trials_to_target : int
        Schedules measured until one within the tolerance of the pool's best
        was measured (the shots count as measured).
    measured_order : list of int
        Pool indices in the order they were measured (shots first).
    best_so_far_s : numpy.ndarray
        Best latency found after each measurement, seconds.
    """

    trials_to_target: int
    measured_order: list[int]
    best_so_far_s: np.ndarray


def simulate_search(
    model,
    context,
    candidates: Sequence,
    run_secs: Sequence[Sequence[float]],
    *,
    measured: Sequence[int] = (),
    batch_size: int = 16,
    tolerance: float = 0.05,
) -> SearchResult:
    """Re-run a search over a logged pool of candidates.

    Each round the model scores every unmeasured candidate, the best
    ``batch_size`` by its ranking (ties broken worst case, :func:`rank_order`)
    are "measured" -- their logged ``run_secs`` given through
    ``model.update`` -- and the search stops once a candidate within
    ``tolerance`` of the pool's best latency is measured.

    Parameters
    ----------
    model
        Anything with ``update(context, candidates, results)`` and
        ``predict(context, candidates)``.
    context : ms.TuneContext
        Passed through to the model.
    candidates : sequence
        The pool (``ms.MeasureCandidate``).
    run_secs : sequence of sequences of float
        Logged measurements of each candidate; latency = their mean.
    measured : sequence of int
        Pool indices already measured *and already given to the model*
        (the shots); they count towards the trials, as one batch.
    batch_size : int
        Candidates measured per round.
    tolerance : float
        Target: latency <= (1 + tolerance) * the pool's best.

    Returns
    -------
    SearchResult
        Within a batch the candidates count in the model's rank order, so
        ``trials_to_target`` is the position of the first good candidate; if
        the shots already hold one, it is ``len(measured)``.
    """
    n = len(candidates)
    if n == 0:
        raise ValueError("simulate_search over an empty pool")
    latency = np.array([float(np.mean(r)) for r in run_secs], dtype=np.float64)
    goal_s = latency.min() * (1.0 + tolerance)
    order = [int(i) for i in measured]
    is_measured = np.zeros(n, dtype=bool)
    is_measured[order] = True
    hit = len(order) if (order and latency[order].min() <= goal_s) else None
    while hit is None and not is_measured.all():
        pool = np.flatnonzero(~is_measured)
        scores = np.asarray(model.predict(context, [candidates[i] for i in pool]), dtype=np.float64)
        picks = pool[rank_order(scores, latency[pool])[:batch_size]]
        for j, i in enumerate(picks):
            if hit is None and latency[i] <= goal_s:
                hit = len(order) + j + 1
        order.extend(int(i) for i in picks)
        is_measured[picks] = True
        if hit is None:
            model.update(
                context, [candidates[i] for i in picks], [_runner_result(run_secs[i]) for i in picks]
            )
    best = np.minimum.accumulate(latency[order]) if order else np.zeros(0)
    return SearchResult(trials_to_target=int(hit if hit is not None else n), measured_order=order, best_so_far_s=best)


# ---------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------


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

    def to_dict(self) -> dict:
        return {"task": self.task, **{k: getattr(self, k) for k in METRIC_KEYS}}


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

    def mean(self) -> dict:
        """Every numeric metric averaged over tasks (``mape``: over tasks that have one, else None)."""
        out: dict[str, float | None] = {}
        for key in METRIC_KEYS:
            values = [getattr(t, key) for t in self.tasks if getattr(t, key) is not None]
            out[key] = float(np.mean(values)) if values else None
        return out

    def to_dict(self) -> dict:
        """The ``--json`` document: ``{"model", "shots", "tasks": [...], "mean": {...}}``."""
        return {
            "model": self.model,
            "shots": self.shots,
            "tasks": [t.to_dict() for t in self.tasks],
            "mean": self.mean(),
        }


def _task_seed(seed: int, name: str) -> np.random.SeedSequence:
    # Stable across runs and across which other tasks are loaded.
    return np.random.SeedSequence([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())])


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
        records of every *other* task (each with its own TuneContext).
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
        from .sampling import make_context

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
            if held.size < 2:
                warnings.warn(
                    f"{task.path}: task {task.name} has {len(task.records)} valid records, "
                    f"too few to hold out two after {len(shots)} shots; skipped",
                    ReplayWarning,
                    stacklevel=2,
                )
                continue
            rng = np.random.default_rng(_task_seed(self.seed + 1, task.name))
            model = _SeededCalls(model_factory(task), rng)
            if self.transfer:
                for oi, other in enumerate(tasks):
                    if oi != ti:
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
    pretrained: str | os.PathLike | None = None,
    progress: bool = False,
) -> tuple[list[Task], ReplayReport]:
    """Load ``paths`` and evaluate the model named ``model`` on them (the ``replay`` command)."""
    tasks = load_tasks(paths, progress=progress)
    if model not in MODEL_NAMES:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(MODEL_NAMES)}")
    evaluator = ReplayEvaluator(shots=shots, transfer=transfer, seed=seed, progress=progress)
    report = evaluator.evaluate(
        tasks,
        lambda task: make_model(model, seed=seed, pretrained=pretrained, target=task.target),
        model_name=model,
    )
    return tasks, report


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def format_table(report: ReplayReport) -> str:
    """A readable table of the report's per-task metrics and their mean."""
    head = ["task", "records", "spearman", "kendall", "pair_acc", "top1", "top5", "mape_%", "trials_5%"]

    def fmt(v, key):
        if v is None:
            return "-"
        if key in ("records", "trials_to_5pct"):
            return str(int(v))
        return f"{v:.1f}" if key == "mape" else f"{v:.3f}"

    rows = [[t.task] + [fmt(getattr(t, k), k) for k in METRIC_KEYS] for t in report.tasks]
    mean = report.mean()
    rows.append(["mean"] + ["-" if mean[k] is None else f"{mean[k]:.1f}" if k in ("records", "trials_to_5pct", "mape")
                            else f"{mean[k]:.3f}" for k in METRIC_KEYS])
    widths = [max(len(r[c]) for r in [head] + rows) for c in range(len(head))]
    lines = [
        f"model {report.model}, shots {report.shots}" + (", leave-one-task-out transfer" if report.transfer else ""),
        "  ".join(h.ljust(w) if c == 0 else h.rjust(w) for c, (h, w) in enumerate(zip(head, widths))),
    ]
    for i, r in enumerate(rows):
        if i == len(rows) - 1:
            lines.append("-" * len(lines[1]))
        lines.append("  ".join(x.ljust(w) if c == 0 else x.rjust(w) for c, (x, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


def write_dump(report: ReplayReport, path: str | os.PathLike) -> None:
    """One JSON line per held-out record: ``{"task", "index", "measured_s", "score"}``."""
    with open(path, "w", encoding="utf-8") as f:
        for row in report.predictions:
            f.write(json.dumps(row) + "\n")


def plot_report(report: ReplayReport, path: str | os.PathLike) -> None:
    """PNG: per task, predicted score vs measured latency (log x), and the
    simulated search's best latency found vs trials."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = [t.task for t in report.tasks]
    fig = Figure(figsize=(10, 3.0 * len(names) + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(names), 2, squeeze=False)
    by_task: dict[str, list[dict]] = {}
    for row in report.predictions:
        by_task.setdefault(row["task"], []).append(row)
    for (ax_s, ax_c), metrics in zip(axes, report.tasks):
        rows = by_task.get(metrics.task, [])
        ax_s.scatter([r["measured_s"] * 1e3 for r in rows], [r["score"] for r in rows], s=10, alpha=0.7)
        ax_s.set_xscale("log")
        ax_s.set_xlabel("measured latency (ms)")
        ax_s.set_ylabel("predicted score")
        ax_s.set_title(f"{metrics.task}: Spearman {metrics.spearman:.2f}, top-1 {metrics.top1_score:.2f}")
        search = report.searches[metrics.task]
        trials = np.arange(1, len(search.best_so_far_s) + 1)
        ax_c.step(trials, search.best_so_far_s * 1e3, where="post")
        ax_c.axvline(search.trials_to_target, color="gray", linestyle=":", label="within 5% of best")
        ax_c.set_yscale("log")
        ax_c.set_xlabel("schedules measured")
        ax_c.set_ylabel("best latency found (ms)")
        ax_c.set_title(f"simulated search: {search.trials_to_target} trials to 5%")
        ax_c.legend(loc="upper right", fontsize="small")
    fig.suptitle(f"replay: model {report.model}, shots {report.shots}" + (", transfer" if report.transfer else ""))
    fig.savefig(path, format="png", dpi=90)
