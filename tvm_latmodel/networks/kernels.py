"""The kernels of a partition: one task per distinct workload, and what runs for each.

:func:`distinct_workloads` groups a partition's stage tasks into one
:class:`Workload` per task MetaSchedule tunes (weight: its calls). After tuning,
:func:`choose_kernels` times, per workload, the database's best schedule and
TVM's untuned loop nest here, in the same conditions and on the same inputs
(:func:`run_kernel`), and keeps the faster one whose output matches
(:class:`KernelChoice`).
Reshape-only workloads become views when compiled: nothing runs for them.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from .pipeline import StageTask


def _say_nothing(_text: str) -> None:
    """The default ``progress``: print nothing."""
    return None


def _first_line(err: Exception) -> str:
    """``TypeName: first line of the message``."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


@dataclass
class Workload:
    """One distinct workload of a partition: what MetaSchedule tunes as one task.

    Attributes
    ----------
    name : str
        Task name (its first stage task's).
    mod : tvm.IRModule
        The ``{"main": PrimFunc}`` module tuned.
    weight : int
        Calls per network run, all stages together.
    reshape_only : bool
        A reshape pattern: a view when compiled, not tuned.
    stage_tasks : list of StageTask
        The stage tasks with this workload.
    """

    name: str
    mod: tvm.IRModule
    weight: int
    reshape_only: bool
    stage_tasks: list[StageTask]


def distinct_workloads(tasks: list[StageTask]) -> list[Workload]:
    """Stage tasks grouped by workload (structural equality), weights summed over stages.

    Parameters
    ----------
    tasks : list of StageTask
        ``extract_stage_tasks`` of a partition.

    Returns
    -------
    list of Workload
        In order of first appearance.
    """
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


#: Output check, of each kernel and of the whole network:
#: ``|tuned - untuned| <= ATOL * max(1, max|untuned|) + RTOL * |untuned|``.
RTOL, ATOL = 1e-3, 1e-4


def run_kernel(mod: tvm.IRModule, target, *, number: int = 3, repeat: int = 1,
               min_repeat_ms: int = 50) -> tuple[float, list[np.ndarray]]:
    """Build a ``{"main": PrimFunc}`` module (scheduled or not), run it once and time it.

    The inputs are seeded random floats (zeros for other dtypes), the same for
    every module with the same arguments, so the outputs of a tuned schedule
    and of its untuned loop nest can be compared. Timed with the runner's
    settings (:func:`tvm_latmodel.measure.local_runner`).

    Parameters
    ----------
    mod : tvm.IRModule
    target : tvm.target.Target
        An ``llvm`` target (runs on this CPU).
    number, repeat, min_repeat_ms : int
        ``time_evaluator``'s settings.

    Returns
    -------
    (float, list of numpy.ndarray)
        Mean seconds per call, and every argument after one call.
    """
    lib = tvm.compile(mod, target=target)
    device = tvm.cpu()
    rng = np.random.default_rng(0)
    args = [tvm.runtime.tensor(rng.standard_normal([int(s) for s in info.shape]).astype(info.dtype)
                               if "float" in info.dtype else np.zeros([int(s) for s in info.shape], info.dtype),
                               device)
            for info in ms.arg_info.ArgInfo.from_prim_func(mod["main"])]
    lib.mod["main"](*args)
    outputs = [a.numpy() for a in args]
    timer = lib.mod.time_evaluator("main", device, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return float(timer(*args).mean), outputs


def outputs_match(tuned: list[np.ndarray], untuned: list[np.ndarray]) -> tuple[bool, float]:
    """Whether a tuned kernel's arguments after a call match the untuned one's; the max |error|."""
    error, ok = 0.0, True
    for t, u in zip(tuned, untuned):
        t, u = np.asarray(t, dtype=float), np.asarray(u, dtype=float)
        if t.size:
            error = max(error, float(np.nanmax(np.abs(t - u))))
        scale = max(1.0, float(np.nanmax(np.abs(u)))) if u.size else 1.0
        ok = ok and bool(np.allclose(t, u, rtol=RTOL, atol=ATOL * scale, equal_nan=True))
    return ok, error


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
    mismatch_error : float or None
        When the best schedule's outputs differ from the untuned loop nest's
        on the same inputs: the max |error| (the untuned loop nest runs).
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
    mismatch_error: float | None = None

    @property
    def retimed_us(self) -> float:
        """What runs, timed here after tuning (``latency_us`` when that failed)."""
        value = {"tuned": self.tuned_retimed_us, "untuned": self.untuned_us, "view": 0.0}[self.source]
        return self.latency_us if value is None else value

    def to_json(self) -> dict:
        """The fields as a dict (``NaN`` kept; ``NetworkTuneResult.to_json`` makes it ``null``)."""
        return asdict(self)


def choose_kernels(workloads: list[Workload], database, target, *, progress=None) -> list[KernelChoice]:
    """Per workload: the database's best schedule, unless TVM's untuned loop nest is faster
    or the schedule computes something else.

    MetaSchedule's CPU design space always parallelizes; for a tiny kernel
    the thread pool's wake-up costs more than the work, and a short search
    may find nothing faster than the default serial loop nest. Both are timed
    here, in the same conditions, and the faster one runs. Both are also run
    on the same random inputs: a tuned schedule whose outputs differ from the
    untuned loop nest's (:func:`outputs_match`) is never used, with a warning
    (``source`` is then ``untuned`` and ``mismatch_error`` the max |error|).

    Parameters
    ----------
    workloads : list of Workload
        :func:`distinct_workloads` of the partition tuned.
    database : ms.database.Database
        The tuning database.
    target : tvm.target.Target
    progress : callable, optional
        One line of progress text at a time (a kernel that could not be timed).

    Returns
    -------
    list of KernelChoice
        One per workload, in order.
    """
    from ..latency import mean_latency_s  # pylint: disable=import-outside-toplevel

    say = progress or _say_nothing

    def timed_us(mod, what):
        try:
            seconds, outputs = run_kernel(mod, target)
            return seconds * 1e6, outputs
        except Exception as err:  # noqa: BLE001 - the other measurement still stands
            say(f"[tune-network] could not time {what}: {_first_line(err)}")
            return None, None

    out = []
    for workload in workloads:
        calls: dict[str, int] = {}
        for task in workload.stage_tasks:
            calls[task.stage] = calls.get(task.stage, 0) + task.weight
        prim_funcs = tuple(dict.fromkeys(p for t in workload.stage_tasks for p in t.prim_funcs))
        tuned_us = tuned_retimed_us = untuned_us = mismatch = None
        if workload.reshape_only:
            source, latency_us = "view", 0.0
        else:
            record = database.query_tuning_record(workload.mod, target, workload.name)
            tuned_s = mean_latency_s(record.run_secs) if record is not None else None
            if tuned_s is not None:
                tuned_us = tuned_s * 1e6
                schedule = database.query_schedule(workload.mod, target, workload.name)
                tuned_retimed_us, tuned_out = timed_us(schedule.mod, f"{workload.name} tuned")
            untuned_us, untuned_out = timed_us(workload.mod, f"{workload.name} untuned")
            tuned_here = tuned_retimed_us if tuned_retimed_us is not None else tuned_us
            if tuned_retimed_us is not None and untuned_out is not None:
                ok, error = outputs_match(tuned_out, untuned_out)
                if not ok:
                    mismatch = error
                    warnings.warn(f"{workload.name}: the tuned schedule's output differs from the untuned loop "
                                  f"nest's (max |error| {error:.3g}); using the untuned loop nest", stacklevel=2)
                    say(f"[tune-network] {workload.name}: tuned schedule's output differs (max |error| "
                        f"{error:.3g}); the untuned loop nest runs instead")
            if mismatch is None and tuned_here is not None and (untuned_us is None or tuned_here <= untuned_us):
                source, latency_us = "tuned", tuned_us
            else:
                source, latency_us = "untuned", untuned_us if untuned_us is not None else math.nan
        out.append(KernelChoice(name=workload.name, weight=workload.weight, calls=calls, prim_funcs=prim_funcs,
                                source=source, latency_us=latency_us, tuned_us=tuned_us, tuned_retimed_us=tuned_retimed_us,
                                untuned_us=untuned_us, mismatch_error=mismatch))
    return out
