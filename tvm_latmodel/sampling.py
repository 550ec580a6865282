"""Sample candidate schedules from MetaSchedule's default design space.

This is what MetaSchedule's evolutionary search does for its initial
population: take each design-space trace, drop its sampling decisions,
replay it with a seeded random state (so every ``sample_*`` instruction draws
anew), then apply the target's postprocessors. A candidate whose
postprocessors fail (an invalid schedule for the target, or on CPUs one TVM
0.27 gets wrong: :mod:`tvm_latmodel.schedule_checks`) is dropped and another
is drawn.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms

from .schedule_checks import design_space


def make_context(mod: tvm.IRModule, target: tvm.target.Target, seed: int = 1) -> ms.TuneContext:
    """A TuneContext with MetaSchedule's default space for ``target``, less the schedules TVM 0.27
    gets wrong (:func:`tvm_latmodel.schedule_checks.design_space`)."""
    return ms.TuneContext(
        mod,
        target=target,
        space_generator=design_space(target),
        search_strategy="evolutionary",
        task_name="main",
        rand_state=max(1, int(seed) % (2**31 - 1)),
        num_threads=1,
    )


def sample_schedules(
    mod: tvm.IRModule,
    target: tvm.target.Target,
    n: int,
    *,
    seed: int = 0,
    context: ms.TuneContext | None = None,
    max_failures: int | None = None,
) -> list[tvm.s_tir.Schedule]:
    """Draw ``n`` valid schedules of ``mod`` for ``target``.

    Parameters
    ----------
    mod : IRModule
        The workload.
    target : Target
        LLVM or CUDA target; decides the design space and postprocessors.
    n : int
        Number of schedules wanted.
    seed : int
        Seed of the numpy Generator that seeds each replay.
    context : TuneContext, optional
        Reuse a context (its design space and postprocessors).
    max_failures : int, optional
        Give up after this many invalid draws (default ``100 * n + 100``).

    Returns
    -------
    list of tvm.s_tir.Schedule
        Fewer than ``n`` only if too many draws were invalid.
    """
    ctx = context or make_context(mod, target, seed + 1)
    spaces = ctx.generate_design_space()
    postprocs = list(ctx.space_generator.postprocs)
    traces = [s.trace.simplified(remove_postproc=True) for s in spaces]
    rng = np.random.default_rng(seed)
    out: list[tvm.s_tir.Schedule] = []
    failures = 0
    limit = 100 * n + 100 if max_failures is None else max_failures
    while len(out) < n and failures <= limit:
        trace = traces[int(rng.integers(len(traces)))]
        sch = tvm.s_tir.Schedule(ctx.mod, seed=int(rng.integers(1, 2**31 - 1)))
        try:
            tvm.s_tir.schedule.Trace(trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
            # Mark where the postprocessors start, as MetaSchedule's search does,
            # so the trace can seed a later search (which strips them again).
            sch.enter_postproc()
            ok = all(p.apply(sch) for p in postprocs)
        except (RuntimeError, ValueError):  # TVM raises RuntimeError subclasses
            ok = False
        if ok:
            out.append(sch)
        else:
            failures += 1
    return out


def sampled_candidates(mod: tvm.IRModule, target: tvm.target.Target, n: int, *,
                       seed: int = 0) -> tuple[ms.TuneContext, list[ms.MeasureCandidate]]:
    """:func:`sample_schedules` as measure candidates, with the context they were sampled in.

    What a cost model's ``predict`` takes: the context (:func:`make_context`
    with ``seed + 1``) and one candidate per schedule (``candidate.sch``), in
    sampling order; fewer than ``n`` only if too many draws were invalid.
    """
    context = make_context(mod, target, seed + 1)
    schedules = sample_schedules(mod, target, n, seed=seed, context=context)
    return context, [ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(s.mod["main"])) for s in schedules]
