"""Drive any MetaSchedule cost model through update/predict, and re-run a
search over a logged pool of candidates."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .logs import _runner_result
from .metrics import rank_order

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
