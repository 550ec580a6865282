"""The kernels of a partition: one task per distinct workload, and what runs for each.

:func:`distinct_workloads` groups a partition's stage tasks into one
:class:`Workload` per task MetaSchedule tunes (weight: its calls). After tuning,
:func:`choose_kernels` times, per workload, the database's best schedule and
TVM's untuned loop nest here, in the same conditions
(:func:`time_kernel_s`), and keeps the faster one (:class:`KernelChoice`).
Reshape-only workloads become views when compiled: nothing runs for them.
"""

from __future__ import annotations

import math
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


def time_kernel_s(mod: tvm.IRModule, target, *, number: int = 3, repeat: int = 1,
                  min_repeat_ms: int = 50) -> float:
    """Latency of a ``{"main": PrimFunc}`` module (scheduled or not), built and timed here.

    Timed with the runner's settings (:func:`tvm_latmodel.measure.local_runner`)
    on random float inputs (zeros for other dtypes).

    Parameters
    ----------
    mod : tvm.IRModule
    target : tvm.target.Target
        An ``llvm`` target (runs on this CPU).
    number, repeat, min_repeat_ms : int
        ``time_evaluator``'s settings.

    Returns
    -------
    float
        Mean seconds per call.
    """
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
        """The fields as a dict (``NaN`` kept; ``NetworkTuneResult.to_json`` makes it ``null``)."""
        return asdict(self)


def choose_kernels(workloads: list[Workload], database, target, *, progress=None) -> list[KernelChoice]:
    """Per workload: the database's best schedule, unless TVM's untuned loop nest is faster.

    MetaSchedule's CPU design space always parallelizes; for a tiny kernel
    the thread pool's wake-up costs more than the work, and a short search
    may find nothing faster than the default serial loop nest. Both are timed
    here, in the same conditions, and the faster one runs.

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
