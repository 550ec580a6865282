"""The kernels of a partition: one task per distinct workload, and what runs for each.

:func:`distinct_workloads` groups a partition's stage tasks into one
:class:`Workload` per task MetaSchedule tunes (weight: its calls). After tuning,
:func:`choose_kernels` takes, per workload, the fastest record whose schedule
computes what TVM's untuned loop nest computes (:func:`check_kernel`: same
inputs, intermediate buffers poisoned so that a read of memory the kernel
never wrote shows), times it and the loop nest here in the same conditions
(:func:`run_kernel`), and keeps the faster (:class:`KernelChoice`). A workload
that tuning never reached (a budget smaller than the tasks) or left without a
correct record gets the tuning cost model's pick instead: the best predicted
correct one of :data:`PICK_SAMPLES` schedules sampled from its design space
(:func:`predicted_schedules`), timed against the loop nest the same way.
Reshape-only workloads become views when compiled: nothing runs for them.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, fields

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from ..schedule_checks import repeated_reductions
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


#: What a checked kernel's intermediate buffers hold before it runs (:func:`check_kernel`).
#: NaN spreads through arithmetic; a huge finite value also survives ReLU's
#: ``max(x, 0)``, which drops a NaN (LLVM lowers it to a compare and select).
POISONS = (float("nan"), 1e30)

#: Records of one workload checked, fastest first, before its untuned loop nest runs instead
#: (and, for a workload without a correct record, predicted picks checked, best predicted first).
MAX_RECORDS_CHECKED = 8

#: Schedules sampled from the design space of a workload without a correct record, for the
#: tuning cost model to pick from (:func:`predicted_schedules`).
PICK_SAMPLES = 32


def _arguments(infos) -> list:
    """Seeded random floats (zeros for other dtypes) for ``infos``: the same for every module
    with the same arguments."""
    rng = np.random.default_rng(0)
    return [tvm.runtime.tensor(rng.standard_normal([int(s) for s in info.shape]).astype(info.dtype)
                               if "float" in info.dtype else np.zeros([int(s) for s in info.shape], info.dtype),
                               tvm.cpu())
            for info in infos]


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
    args = _arguments(ms.arg_info.ArgInfo.from_prim_func(mod["main"]))
    lib.mod["main"](*args)
    outputs = [a.numpy() for a in args]
    timer = lib.mod.time_evaluator("main", tvm.cpu(), number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return float(timer(*args).mean), outputs


def expose_intermediates(mod: tvm.IRModule) -> tuple[tvm.IRModule, int]:
    """``mod`` with the buffers its root block allocates made trailing parameters.

    Those are the intermediates of a fused kernel (a padded copy, the first
    convolution's output). As parameters, the caller chooses what they hold
    before the kernel runs. Buffers allocated deeper (cache reads and writes
    inside a tile) stay allocations.

    Returns
    -------
    (tvm.IRModule, int)
        The module, and how many parameters ``mod`` had (the exposed ones follow).
    """
    func = mod["main"]
    realize = func.body
    block = getattr(realize, "block", None)
    if block is None or not len(block.alloc_buffers):
        return mod, len(func.params)
    from tvm import s_tir  # pylint: disable=import-outside-toplevel

    root = s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, block.body, block.init,
                        [], block.match_buffers, block.annotations)
    body = s_tir.SBlockRealize(realize.iter_values, realize.predicate, root)
    exposed = tvm.tirx.PrimFunc(list(func.params) + list(block.alloc_buffers), body, func.ret_type, func.attrs)
    return tvm.IRModule({"main": exposed}), len(func.params)


def check_kernel(mod: tvm.IRModule, target, reference: list[np.ndarray]) -> tuple[bool, float]:
    """Whether a scheduled kernel computes ``reference``, even where it reads memory it never wrote.

    MetaSchedule measures a schedule without checking what it computes, and
    TVM 0.27 produces wrong schedules of fused conv -> conv kernels: the
    second convolution's padding, moved under the first one's tiles by
    ``reverse_compute_at``, leaves its border unwritten, and the convolution
    reads it. What such a kernel outputs depends on what the memory held, and
    is right when it held zeros. Here the intermediates
    (:func:`expose_intermediates`) hold each of :data:`POISONS` in turn, on
    :func:`run_kernel`'s inputs, and every run must match ``reference``.

    Parameters
    ----------
    mod : tvm.IRModule
        The scheduled ``{"main": PrimFunc}``.
    target : tvm.target.Target
        An ``llvm`` target.
    reference : list of numpy.ndarray
        The untuned loop nest's arguments after one call (:func:`run_kernel`).

    Returns
    -------
    (bool, float)
        Whether every run matched (:func:`outputs_match`), and the largest
        max |error| over the runs (``inf`` where a NaN came out).
    """
    exposed, count = expose_intermediates(mod)
    lib = tvm.compile(exposed, target=target)
    infos = ms.arg_info.ArgInfo.from_prim_func(exposed["main"])
    ok, error = True, 0.0
    for poison in POISONS:
        args = _arguments(infos[:count])
        for info in infos[count:]:
            shape = [int(s) for s in info.shape]
            fill = np.full(shape, poison, info.dtype) if "float" in info.dtype else np.full(shape, -1).astype(info.dtype)
            args.append(tvm.runtime.tensor(fill, tvm.cpu()))
        lib.mod["main"](*args)
        matched, err = outputs_match([a.numpy() for a in args[:count]], reference)
        ok, error = ok and matched, max(error, err)
    return ok, error


def outputs_match(tuned: list[np.ndarray], untuned: list[np.ndarray]) -> tuple[bool, float]:
    """Whether a tuned kernel's arguments after a call match the untuned one's; the max |error|
    (``inf`` where the tuned one holds a NaN and the untuned one does not)."""
    error, ok = 0.0, True
    for t, u in zip(tuned, untuned):
        t, u = np.asarray(t, dtype=float), np.asarray(u, dtype=float)
        if t.size:
            diff = np.abs(t - u)
            diff[np.isnan(diff) & ~np.isnan(u)] = np.inf
            error = max(error, float(np.nanmax(diff)) if not np.isnan(diff).all() else 0.0)
        scale = max(1.0, float(np.nanmax(np.abs(u)))) if u.size else 1.0
        ok = ok and bool(np.allclose(t, u, rtol=RTOL, atol=ATOL * scale, equal_nan=True))
    return ok, error


def ranked_records(database, mod: tvm.IRModule, limit: int = MAX_RECORDS_CHECKED) -> list:
    """The database's measured records of ``mod``, fastest first (at most ``limit``)."""
    from ..latency import mean_latency_s  # pylint: disable=import-outside-toplevel

    if not database.has_workload(mod):
        return []
    records = database.get_top_k(database.commit_workload(mod), limit)
    return [r for r in records if mean_latency_s(r.run_secs) is not None]


def record_schedule(record) -> "tvm.s_tir.Schedule":
    """The schedule a tuning record holds (as ``Database.query_schedule`` rebuilds the best one)."""
    sch = tvm.s_tir.Schedule(record.workload.mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return sch


def predicted_schedules(mod: tvm.IRModule, target, model, *, samples: int = PICK_SAMPLES,
                        seed: int = 0) -> list:
    """Schedules sampled from ``mod``'s design space, the one ``model`` predicts fastest first.

    This is the pick for a workload tuning never measured: MetaSchedule's own
    design space (:func:`tvm_latmodel.sampling.sample_schedules`, what its
    search starts from), ranked by a MetaSchedule cost model's ``predict``
    (higher score: faster) without any measurement.

    Parameters
    ----------
    mod : tvm.IRModule
        The ``{"main": PrimFunc}`` workload.
    target : tvm.target.Target
    model : ms.cost_model.CostModel
        Any MetaSchedule cost model (the one tuning used, in ``tune-network``).
    samples : int
        Schedules sampled.
    seed : int

    Returns
    -------
    list of tvm.s_tir.Schedule
        Best predicted first (ties in sampling order); empty when the design
        space yields no valid schedule.
    """
    from ..sampling import sampled_candidates  # pylint: disable=import-outside-toplevel

    context, candidates = sampled_candidates(mod, target, samples, seed=seed)
    if not candidates:
        return []
    scores = np.asarray(model.predict(context, candidates), dtype="float64").reshape(-1)
    if scores.shape != (len(candidates),):
        raise ValueError(f"the cost model gave {scores.shape[0]} scores for {len(candidates)} candidates")
    scores[~np.isfinite(scores)] = -np.inf
    return [candidates[i].sch for i in np.argsort(-scores, kind="stable")]


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
        ``tuned`` (the fastest correct record), ``predicted`` (no correct
        record: the cost model's best predicted correct pick among sampled
        schedules, never measured during tuning), ``untuned`` (TVM's default
        loop nest: it was faster, or there was nothing else) or ``view``
        (reshape only: no kernel runs).
    latency_us : float
        What runs: that record's measurement when tuned, else the time taken
        here (the pick's or the untuned loop nest's).
    tuned_us : float or None
        The fastest correct record's measurement (taken during tuning, while
        the search of the next task shares the CPU).
    tuned_retimed_us, untuned_us : float or None
        That record's schedule and the untuned loop nest, both timed here
        after tuning, on an idle search: the fair pair that decides ``source``.
    mismatch_error : float or None
        When the fastest record computes something else (:func:`check_kernel`):
        its max |error|.
    record_rank : int or None
        Which record is the fastest correct one: 0 is the fastest measured
        (``None``: no record, or none of the first :data:`MAX_RECORDS_CHECKED`
        is correct).
    wrong_records : int
        Faster records skipped because they compute something else.
    picked_us : float or None
        Without a correct record: the predicted pick, timed here like the
        untuned loop nest.
    pick_rank : int or None
        The pick's place in the model's order (0: its best predicted).
    wrong_picks : int
        Picks checked and found to compute something else (better predicted
        than the one that runs, or all those checked when none passed).
    picked_trace : tvm.s_tir.schedule.Trace or None
        The pick's schedule (for :func:`chosen_database`; not in ``to_json``).
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
    record_rank: int | None = None
    wrong_records: int = 0
    picked_us: float | None = None
    pick_rank: int | None = None
    wrong_picks: int = 0
    picked_trace: object = field(default=None, repr=False, compare=False)

    @property
    def retimed_us(self) -> float:
        """What runs, timed here after tuning (``latency_us`` when that failed)."""
        value = {"tuned": self.tuned_retimed_us, "predicted": self.picked_us, "untuned": self.untuned_us,
                 "view": 0.0}[self.source]
        return self.latency_us if value is None else value

    def to_json(self) -> dict:
        """The fields as a dict, but the trace (``NaN`` kept; ``NetworkTuneResult.to_json`` makes it ``null``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "picked_trace"}


def choose_kernels(workloads: list[Workload], database, target, *, pick=None,
                   progress=None) -> list[KernelChoice]:
    """Per workload: the fastest record that computes the right thing (or, without one, the
    model's pick), unless TVM's untuned loop nest is faster.

    The records are checked fastest first (:func:`check_kernel`, against the
    untuned loop nest's outputs on the same inputs) until one matches, at most
    :data:`MAX_RECORDS_CHECKED` of them; each wrong one is skipped with a
    warning. MetaSchedule's CPU design space always parallelizes; for a tiny
    kernel the thread pool's wake-up costs more than the work, and a short
    search may find nothing faster than the default serial loop nest. So the
    correct record and the loop nest are both timed here, in the same
    conditions, and the faster one runs. Without a reference (the loop nest
    failed to run) the fastest record runs unchecked; the whole network's
    output is still checked.

    A workload with no correct record (tuning never reached it, or every
    record checked was wrong) gets ``pick``'s schedules instead, best
    predicted first: the first that passes the same check (at most
    :data:`MAX_RECORDS_CHECKED` tried) is timed here and runs if it beats the
    loop nest. These picks are not tuning trials; like the loop nest, each
    costs one check and one timing here.

    Parameters
    ----------
    workloads : list of Workload
        :func:`distinct_workloads` of the partition tuned.
    database : ms.database.Database
        The tuning database.
    target : tvm.target.Target
    pick : callable, optional
        ``pick(workload) -> list of Schedule``, best predicted first (e.g.
        :func:`predicted_schedules` with the tuning cost model). ``None``: no
        picks, the loop nest runs where no record does. A pick that raises is
        reported and skipped.
    progress : callable, optional
        One line of progress text at a time (a wrong record, a kernel that
        could not be timed).

    Returns
    -------
    list of KernelChoice
        One per workload, in order. :func:`chosen_database` holds the records chosen.
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
        tuned_us = tuned_retimed_us = untuned_us = mismatch = rank = None
        picked_us = pick_rank = picked_trace = None
        wrong = wrong_picks = 0
        if workload.reshape_only:
            source, latency_us = "view", 0.0
        else:
            untuned_us, untuned_out = timed_us(workload.mod, f"{workload.name} untuned")
            for i, record in enumerate(ranked_records(database, workload.mod)):
                schedule = record_schedule(record)
                if untuned_out is not None:
                    try:
                        ok, error = check_kernel(schedule.mod, target, untuned_out)
                    except Exception as err:  # noqa: BLE001 - a record that cannot be checked is not used
                        ok, error = False, math.nan
                        say(f"[tune-network] could not check {workload.name} record {i}: {_first_line(err)}")
                    if not ok:
                        wrong += 1
                        mismatch = error if i == 0 else mismatch
                        what = "fastest record" if i == 0 else f"record {i} (by measured time)"
                        why = _known_cause(schedule.mod)
                        warnings.warn(f"{workload.name}: the {what} computes something else than the untuned "
                                      f"loop nest (max |error| {error:.3g}){why}; trying the next", stacklevel=2)
                        say(f"[tune-network] {workload.name}: {what} computes something else (max |error| "
                            f"{error:.3g}){why}; trying the next")
                        continue
                rank, tuned_us = i, mean_latency_s(record.run_secs) * 1e6
                tuned_retimed_us, _ = timed_us(schedule.mod, f"{workload.name} tuned")
                break
            if rank is None and pick is not None and untuned_out is not None:
                pick_rank, wrong_picks, sch = _first_correct_pick(workload, pick, target, untuned_out, say)
                if sch is not None:
                    picked_us, _ = timed_us(sch.mod, f"{workload.name} predicted pick")
                    picked_trace = sch.trace if picked_us is not None else None
            tuned_here = tuned_retimed_us if tuned_retimed_us is not None else tuned_us
            if tuned_here is not None and (untuned_us is None or tuned_here <= untuned_us):
                source, latency_us = "tuned", tuned_us
            elif picked_us is not None and (untuned_us is None or picked_us <= untuned_us):
                source, latency_us = "predicted", picked_us
            else:
                source, latency_us = "untuned", untuned_us if untuned_us is not None else math.nan
        out.append(KernelChoice(name=workload.name, weight=workload.weight, calls=calls, prim_funcs=prim_funcs,
                                source=source, latency_us=latency_us, tuned_us=tuned_us, tuned_retimed_us=tuned_retimed_us,
                                untuned_us=untuned_us, mismatch_error=mismatch, record_rank=rank,
                                wrong_records=wrong, picked_us=picked_us, pick_rank=pick_rank,
                                wrong_picks=wrong_picks, picked_trace=picked_trace))
    return out


def _known_cause(mod: tvm.IRModule) -> str:
    """`` (cause)`` when a wrong schedule shows a known TVM 0.27 bug (:func:`repeated_reductions`), else ``""``."""
    try:
        found = repeated_reductions(mod["main"])
    except Exception:  # noqa: BLE001 - only a diagnosis
        return ""
    if not found:
        return ""
    name, loop, extent = found[0]
    return (f" (its reduction {name} is repeated {extent}x by loop {loop} with its init outside: "
            "TVM 0.27's decompose_reduction)")


def first_correct(schedules, target, reference, on_wrong=None) -> int | None:
    """Index of the first of ``schedules`` that passes :func:`check_kernel`
    against ``reference``, or None. A schedule that computes something else
    or cannot be checked is skipped after ``on_wrong(index, schedule, error)``
    (the max |error|, or the exception)."""
    for j, sch in enumerate(schedules):
        try:
            ok, error = check_kernel(sch.mod, target, reference)
        except Exception as err:  # noqa: BLE001 - a schedule that cannot be checked is not used
            ok, error = False, err
        if ok:
            return j
        if on_wrong is not None:
            on_wrong(j, sch, error)
    return None


def _first_correct_pick(workload: Workload, pick, target, reference, say):
    """``(rank, picks found wrong, schedule)`` of the first of ``pick(workload)`` that passes
    :func:`check_kernel` (at most :data:`MAX_RECORDS_CHECKED` tried); ``(None, wrong, None)``
    when none does."""
    try:
        schedules = list(pick(workload))
    except Exception as err:  # noqa: BLE001 - the loop nest still runs
        say(f"[tune-network] {workload.name}: no predicted pick ({_first_line(err)})")
        return None, 0, None
    say(f"[tune-network] {workload.name}: no correct tuning record; checking the cost model's picks "
        f"among {len(schedules)} sampled schedules, best predicted first")

    def wrong(j, sch, error):
        if isinstance(error, Exception):
            say(f"[tune-network] could not check {workload.name} pick {j}: {_first_line(error)}")
        else:
            say(f"[tune-network] {workload.name}: pick {j} computes something else (max |error| {error:.3g})"
                f"{_known_cause(sch.mod)}")

    checked = schedules[:MAX_RECORDS_CHECKED]
    j = first_correct(checked, target, reference, wrong)
    if j is None:
        return None, len(checked), None
    return j, j, checked[j]


def chosen_database(workloads: list[Workload], choices: list[KernelChoice], database, target=None):
    """A database holding, per workload that runs tuned or a predicted pick, only the schedule
    :func:`choose_kernels` chose.

    Compiling with it (``MetaScheduleApplyDatabase``) applies exactly those
    schedules; the other PrimFuncs keep their untuned loop nests. A pick's
    record carries the time taken here and ``target``.
    """
    chosen = ms.database.MemoryDatabase()
    for workload, choice in zip(workloads, choices):
        if choice.source == "tuned":
            record = ranked_records(database, workload.mod, choice.record_rank + 1)[choice.record_rank]
            trace, run_secs, record_target, args_info = record.trace, record.run_secs, record.target, record.args_info
        elif choice.source == "predicted":
            trace, run_secs, record_target = choice.picked_trace, [choice.picked_us * 1e-6], target
            args_info = ms.arg_info.ArgInfo.from_prim_func(workload.mod["main"])
        else:
            continue
        entry = chosen.commit_workload(workload.mod)
        chosen.commit_tuning_record(ms.database.TuningRecord(trace, entry, run_secs, record_target, args_info))
    return chosen
