"""Tune one workload with MetaSchedule and a chosen cost model.

MetaSchedule's ``tune_tir`` is called in rounds of ``round_trials`` on one
JSON database: the evolutionary search of each round starts from what the
database holds and never re-measures a schedule, and the cost model object
(ours or TVM's XGBModel) lives across rounds, so the rounds together are one
tuning run. Between rounds we report progress and may stop early:

* ``stop_within=f``: stop when the best measured latency is within a factor
  ``1 + f`` of the analytical roofline bound of the workload on this hardware
  (no schedule can beat the bound, so nothing much is left to gain);
* ``patience=k``: stop after ``k`` rounds that improve the best latency by
  less than 1%.

Candidates are built here and run here (``LocalRunner``) or on the boards of
an RPC tracker (``rpc="HOST:PORT:KEY"``, see :mod:`tvm_latmodel.rpc`).

One tuner at a time per work directory: :func:`work_dir_lock` holds an
advisory lock (``fcntl.flock`` on ``WORK_DIR/.tvm-latmodel.lock``) for the
whole run, and a second tuner on the same directory fails at once with
:class:`WorkDirLockedError` instead of interleaving lines in its database.

Output: MetaSchedule configures its loggers anew in every ``tune_tir`` call
(``ms.logging.get_loggers_from_work_dir``), with a console handler on
``sys.stdout`` whose level is the ``tvm.s_tir.meta_schedule`` logger's level
at that moment — DEBUG from the second call on, because the call itself sets
it. :func:`metaschedule_output` sets that level before each call and binds
the console handler to stderr: MetaSchedule's logs go to ``WORK_DIR/logs``
always, and to stderr at INFO only when ``verbose``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass

import tvm
from tvm.s_tir import meta_schedule as ms

from .schedule_checks import design_space



@dataclass
class TuneReport:
    """What a tuning run found (all times in seconds)."""

    workload: str
    cost_model: str
    trials_budget: int
    trials_measured: int
    trials_failed: int
    best_latency_s: float | None
    gflops: float | None
    roofline_bound_s: float
    roofline_fraction: float | None
    stopped_early: str | None
    work_dir: str
    curve: list  # best latency after each measured trial (None while nothing valid)
    wall_s: float
    measured_on: str = "local"  # "local", or "rpc HOST:PORT:KEY (N boards)"
    fleet_error: str | None = None  # why tuning on the fleet stopped before its budget

    @property
    def trials_saved(self) -> int:
        return self.trials_budget - self.trials_measured

    def to_dict(self) -> dict:
        d = asdict(self)
        d["trials_saved"] = self.trials_saved
        return d


#: The advisory lock file a tuner holds in its work directory.
LOCK_FILE = ".tvm-latmodel.lock"


class WorkDirLockedError(RuntimeError):
    """Another tuner holds the work directory's lock."""


@contextlib.contextmanager
def work_dir_lock(work_dir: str):
    """Hold ``WORK_DIR/.tvm-latmodel.lock`` (``fcntl.flock``, non-blocking) for the block.

    The lock file records the holder's pid, host and start time; the lock
    itself is the kernel's, so a tuner that crashed or was killed leaves no
    stale lock behind (the file stays, unlocked). ``flock`` is advisory and
    may not work across machines on network file systems.

    Raises
    ------
    WorkDirLockedError
        At once, naming the directory and (when readable) the holder's pid.
    """
    os.makedirs(work_dir, exist_ok=True)
    path = os.path.join(work_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        holder = ""
        try:
            info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
            if info.get("pid"):
                holder = f" (held by pid {info['pid']} on {info.get('host', '?')} since {info.get('started', '?')})"
        except (OSError, ValueError, AttributeError):
            pass
        os.close(fd)
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        raise WorkDirLockedError(
            f"work directory {os.path.abspath(work_dir)} is in use by another tuner{holder}; one tuner at a time "
            "writes a MetaSchedule database: wait for it to finish or give another --work-dir") from None
    try:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        yield path
    finally:
        try:
            os.ftruncate(fd, 0)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


@contextlib.contextmanager
def metaschedule_output(verbose: bool = False):
    """Route MetaSchedule's console logging for one ``tune_tir`` call.

    Enter it around each call: it sets the ``tvm.s_tir.meta_schedule`` logger's
    level, which MetaSchedule copies into the level of the console handler it
    creates in that call, and points ``sys.stdout`` at ``sys.stderr`` while
    the handler is created (``"ext://sys.stdout"`` is resolved then). With
    ``verbose`` INFO and above reach stderr; otherwise only CRITICAL does. The
    work directory's ``logs/`` files get everything either way.
    """
    logger = logging.getLogger("tvm.s_tir.meta_schedule")
    saved = logger.level
    logger.setLevel(logging.INFO if verbose else logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        logger.setLevel(saved)  # tune_tir set it to DEBUG; the caller's level again


def read_records(work_dir: str) -> list[float | None]:
    """Mean run_secs of each record line in trial order (None: failed)."""
    from .latency import mean_latency_s

    path = os.path.join(work_dir, "database_tuning_record.json")
    out: list[float | None] = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            try:
                secs = json.loads(line)[1][1]
            except (ValueError, TypeError, IndexError):
                secs = None
            out.append(mean_latency_s(secs))
    return out


def tune_workload(
    mod: tvm.IRModule,
    target: tvm.target.Target,
    *,
    work_dir: str,
    trials: int,
    cost_model: str = "hybrid",
    seed: int = 0,
    pretrained: str | None = "shipped",
    hardware=None,
    stop_within: float | None = None,
    patience: int | None = None,
    round_trials: int = 16,
    workload_name: str = "",
    progress: bool = True,
    model=None,
    rpc=None,
    rpc_timeout_s: float = 60.0,
    runner=None,
    verbose: bool = False,
    strategy="evolutionary",
) -> TuneReport:
    """Tune ``mod`` for at most ``trials`` measurements, here or on a fleet of boards.

    Parameters
    ----------
    model : CostModel, optional
        A ready cost model instance (overrides ``cost_model``/``pretrained``).
    pretrained : "shipped", path or None
        The hybrid model's starting residual (see :func:`tvm_latmodel.make_model`).
    rpc : str or tvm_latmodel.rpc.TrackerAddress, optional
        ``HOST:PORT:KEY``: build here, run each candidate on a free board of
        that tracker's key (as many at once as boards were idle at the start).
        Checked before anything else (:func:`tvm_latmodel.rpc.check_fleet`).
    rpc_timeout_s : float
        With ``rpc``: longest wait for the tracker and for a free board, and
        the longest a board keeps one candidate's session.
    runner : ms.runner.Runner, optional
        Any MetaSchedule runner (overrides ``rpc`` and the local runner).
    verbose : bool
        MetaSchedule's own INFO logs (a table per round) on stderr; they always
        go to ``WORK_DIR/logs``. See :func:`metaschedule_output`.
    strategy : str or ms.search_strategy.SearchStrategy
        MetaSchedule's search strategy (default its evolutionary search).
    Other parameters: see the module docstring and ``tvm-latmodel tune --help``.

    Raises
    ------
    WorkDirLockedError
        Another tuner is using ``work_dir``.
    tvm_latmodel.rpc.FleetError
        With ``rpc``: the tracker is unreachable or no board became free in time.
    """
    from .measure import fleet_runner, local_builder, local_runner

    if target.kind.name != "llvm":
        where = "on the boards of an RPC tracker" if rpc is not None else "on this machine's CPU"
        raise ValueError(f"tuning measures {where}; a {target.kind.name!r} target needs its own "
                         "hardware (for CUDA use `tvm-latmodel gpu-bundle` and the device-side timer)")
    if trials < 1:
        raise ValueError(f"--trials must be >= 1, got {trials}")
    if stop_within is not None and stop_within < 0:
        raise ValueError(f"--stop-within must be >= 0, got {stop_within}")
    tracker = None
    if rpc is not None and runner is None:
        from .rpc import parse_tracker

        tracker = rpc if not isinstance(rpc, str) else parse_tracker(rpc)
    with work_dir_lock(work_dir):
        measured_on = "local"
        if tracker is not None:
            from .rpc import check_fleet

            status = check_fleet(tracker, timeout_s=rpc_timeout_s)
            boards = max(1, status.servers_free)
            runner = fleet_runner(tracker, workers=boards, session_timeout_s=rpc_timeout_s)
            measured_on = f"rpc {tracker} ({boards} board{'s' if boards > 1 else ''})"
        elif runner is not None:
            measured_on = type(runner).__name__
        else:
            runner = local_runner()
        return _tune_locked(mod, target, work_dir=work_dir, trials=trials, cost_model=cost_model, seed=seed,
                            pretrained=pretrained, hardware=hardware, stop_within=stop_within, patience=patience,
                            round_trials=round_trials, workload_name=workload_name, progress=progress,
                            model=model, runner=runner, builder=local_builder(), tracker=tracker,
                            rpc_timeout_s=rpc_timeout_s, verbose=verbose, measured_on=measured_on,
                            strategy=strategy)


def _tune_locked(mod, target, *, work_dir, trials, cost_model, seed, pretrained, hardware, stop_within, patience,
                 round_trials, workload_name, progress, model, runner, builder, tracker, rpc_timeout_s, verbose,
                 measured_on, strategy) -> TuneReport:
    """:func:`tune_workload` once the work directory is locked and the runner chosen."""
    from .hardware import load_hardware
    from .model.modes import task_bound_s

    hw = hardware if hardware is not None and not isinstance(hardware, str) else load_hardware(target, hardware)
    if model is None:
        from .model.registry import make_model

        model = make_model(cost_model, seed=seed, pretrained=pretrained, target=target)
        if hasattr(model, "hardware"):
            model.hardware = hw
    bound = task_bound_s(mod, hw)
    flops = tvm.s_tir.analysis.estimate_tir_flops(mod)
    before = len(read_records(work_dir))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=trials, desc=f"tune {workload_name or 'workload'} [{cost_model}]", unit="trial",
                   file=sys.stderr)
    t0 = time.time()
    stopped = None
    fleet_error = None
    best_prev = math.inf
    stale = 0
    round_index = 0
    measured = 0
    while measured < trials:
        n = min(round_trials, trials - measured)
        with metaschedule_output(verbose):
            ms.tune_tir(  # design_space: MetaSchedule's, less schedules TVM 0.27 gets wrong
                mod=mod, target=target, work_dir=work_dir, max_trials_global=n, num_trials_per_iter=n,
                cost_model=model,
                space=design_space(target),
                builder=builder,
                runner=runner,
                strategy=strategy,
                seed=seed * 1000 + round_index + 1,
            )
        round_index += 1
        recs = read_records(work_dir)[before:]
        got = len(recs) - measured
        new = recs[measured:]
        measured = len(recs)
        valid = [r for r in recs if r is not None]
        best = min(valid) if valid else math.inf
        if bar is not None:
            bar.update(max(0, got))
            bar.set_postfix(best_us=f"{best * 1e6:.1f}" if valid else "-")
        if got <= 0:
            stopped = "search space exhausted (no new candidates)"
            break
        if tracker is not None and all(r is None for r in new):
            # A whole round failed: is the fleet still there?
            from .rpc import FleetError, check_fleet

            try:
                check_fleet(tracker, timeout_s=rpc_timeout_s)
            except FleetError as err:
                fleet_error = str(err)
                stopped = "the fleet stopped answering (see fleet_error)"
                break
        if stop_within is not None and valid and best <= (1 + stop_within) * bound:
            stopped = f"best is within {stop_within:.0%} of the roofline bound"
            break
        if patience is not None:
            stale = stale + 1 if best > best_prev * 0.99 else 0
            best_prev = min(best_prev, best)
            if stale >= patience:
                stopped = f"{patience} rounds without a 1% gain"
                break
    if bar is not None:
        bar.close()
    recs = read_records(work_dir)[before:]
    curve, best = [], math.inf
    for r in recs:
        if r is not None:
            best = min(best, r)
        curve.append(best if math.isfinite(best) else None)
    valid = [r for r in recs if r is not None]
    best_s = min(valid) if valid else None
    return TuneReport(
        workload=workload_name, cost_model=cost_model, trials_budget=trials, trials_measured=len(recs),
        trials_failed=len(recs) - len(valid), best_latency_s=best_s,
        gflops=(flops / best_s / 1e9) if best_s else None, roofline_bound_s=bound,
        roofline_fraction=(bound / best_s) if best_s else None, stopped_early=stopped,
        work_dir=os.path.abspath(work_dir), curve=curve, wall_s=time.time() - t0,
        measured_on=measured_on, fleet_error=fleet_error)
