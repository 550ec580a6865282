"""Build and run schedules on this machine with MetaSchedule's own builder
and runner (the same path ``ms.tune_tir`` measures with), or run them on the
boards of an RPC tracker (:func:`fleet_runner`)."""

from __future__ import annotations

import sys

import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import PyBuilder
from tvm.s_tir.meta_schedule.builder.local_builder import _serialize_params
from tvm.s_tir.meta_schedule.builder.local_builder import _worker_func as _build_worker
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.utils import cpu_count
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

from .latency import valid_latency


def _worker_init() -> None:
    """Run in each builder/runner worker process: importing the package
    applies its TVMScript parsing speed-up there too (3x faster builds here)."""
    import tvm_latmodel  # noqa: F401  (pyflakes: imported for its side effect)


@derived_object
class PooledBuilder(PyBuilder):
    """MetaSchedule's ``LocalBuilder``, keeping its worker processes between rounds.

    TVM's ``LocalBuilder.build`` starts a fresh ``PopenPoolExecutor`` on
    every call (every search round) to contain a memory leak of long-lived
    workers, so each round pays one TVM import per worker: 25-90 s per round
    on a loaded 2-core machine, against well under a second to compile a
    candidate. This builder keeps one pool and lets each worker process
    build ``maximum_process_uses`` candidates before it is replaced (the
    pool's own remedy for the leak). Builds run in the same worker function
    (``local_builder._worker_func``: TVM's default build and export) with the
    same timeout and error messages as ``LocalBuilder``.

    Parameters
    ----------
    max_workers : int, optional
        Worker processes (default: the logical CPU count).
    timeout_sec : float
        Per-candidate build timeout; a worker that exceeds it is killed.
    initializer : callable, optional
        Run once in each worker process.
    maximum_process_uses : int
        Builds per worker process before it is replaced.
    """

    def __init__(self, max_workers: int | None = None, timeout_sec: float = 300.0, initializer=None,
                 maximum_process_uses: int = 64):
        super().__init__()
        self.max_workers = max_workers or cpu_count(logical=True)
        self.timeout_sec = timeout_sec
        self.initializer = initializer
        self.maximum_process_uses = maximum_process_uses
        self._pool = None

    def _get_pool(self):
        if self._pool is None:
            self._pool = PopenPoolExecutor(max_workers=self.max_workers, timeout=self.timeout_sec,
                                           initializer=self.initializer,
                                           maximum_process_uses=self.maximum_process_uses)
        return self._pool

    def build(self, build_inputs):
        results = []
        args = [(None, None, b.mod, b.target, _serialize_params(b.params)) for b in build_inputs]
        for res in self._get_pool().map_with_error_catching(lambda x: _build_worker(*x), args):
            if res.status == StatusKind.COMPLETE:
                results.append(ms.builder.BuilderResult(res.value, None))
            elif res.status == StatusKind.TIMEOUT:
                results.append(ms.builder.BuilderResult(
                    None, f"LocalBuilder: Timeout, killed after {self.timeout_sec} seconds"))
            else:
                results.append(ms.builder.BuilderResult(None, "LocalBuilder: An exception occurred\n" + str(res.value)))
        return results

    def close(self) -> None:
        """Stop the worker processes (also done when the builder is collected)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def local_builder() -> PooledBuilder:
    """A builder for this machine: :class:`PooledBuilder` (MetaSchedule's
    LocalBuilder with a persistent worker pool) with a timeout a loaded
    2-core machine can meet."""
    return PooledBuilder(timeout_sec=300, initializer=_worker_init)


def evaluator_config(number: int = 3, repeat: int = 1, min_repeat_ms: int = 50) -> ms.runner.EvaluatorConfig:
    """How a candidate is timed, here or on a board: mean of ``number`` runs lasting at least ``min_repeat_ms``."""
    return ms.runner.EvaluatorConfig(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)


def local_runner(number: int = 3, repeat: int = 1, min_repeat_ms: int = 50) -> ms.runner.LocalRunner:
    """MetaSchedule's LocalRunner: mean of ``number`` runs lasting at least ``min_repeat_ms``."""
    return ms.runner.LocalRunner(
        evaluator_config=evaluator_config(number, repeat, min_repeat_ms),
        timeout_sec=120,
        initializer=_worker_init,
    )


def fleet_runner(tracker, *, workers: int = 1, session_timeout_s: float = 60.0, retries: int = 1,
                 number: int = 3, repeat: int = 1, min_repeat_ms: int = 50):
    """A :class:`tvm_latmodel.rpc.FleetRunner` timing candidates on the boards of an RPC tracker
    exactly as :func:`local_runner` times them here (same evaluator settings)."""
    from .rpc import FleetRunner

    return FleetRunner(tracker, workers=workers, session_timeout_s=session_timeout_s, retries=retries,
                       evaluator_config=evaluator_config(number, repeat, min_repeat_ms),
                       initializer=_worker_init)


def measure_schedules(
    schedules: list,
    target: tvm.target.Target,
    *,
    number: int = 3,
    repeat: int = 1,
    min_repeat_ms: int = 50,
    batch: int = 16,
    progress: bool = True,
) -> list[float | None]:
    """Measured mean latency in seconds of each schedule (``None`` if it failed).

    Uses ``ms.builder.LocalBuilder`` and ``ms.runner.LocalRunner``; a build or
    run error, an empty result, or a non-finite time gives ``None``.
    """
    if target.kind.name != "llvm":
        raise ValueError(f"can only measure on this machine's CPU (llvm target), not {target.kind.name!r}")
    builder = local_builder()
    runner = local_runner(number, repeat, min_repeat_ms)
    out: list[float | None] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(schedules), desc="measure", unit="sch", file=sys.stderr, leave=False)
    for start in range(0, len(schedules), batch):
        chunk = schedules[start:start + batch]
        built = builder.build([ms.builder.BuilderInput(s.mod, target) for s in chunk])
        inputs, slots = [], []
        for i, (s, b) in enumerate(zip(chunk, built)):
            if b.error_msg is None and b.artifact_path is not None:
                inputs.append(ms.runner.RunnerInput(b.artifact_path, "cpu", ms.arg_info.ArgInfo.from_prim_func(s.mod["main"])))
                slots.append(i)
        results: list[float | None] = [None] * len(chunk)
        for i, fut in zip(slots, runner.run(inputs)):
            r = fut.result()
            results[i] = valid_latency(r)
        out.extend(results)
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()
    return out
