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
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass

import tvm
from tvm.s_tir import meta_schedule as ms



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

    @property
    def trials_saved(self) -> int:
        return self.trials_budget - self.trials_measured

    def to_dict(self) -> dict:
        d = asdict(self)
        d["trials_saved"] = self.trials_saved
        return d


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
    pretrained: str | None = None,
    hardware=None,
    stop_within: float | None = None,
    patience: int | None = None,
    round_trials: int = 16,
    workload_name: str = "",
    progress: bool = True,
    model=None,
) -> TuneReport:
    """Tune ``mod`` on this machine for at most ``trials`` measurements.

    Parameters
    ----------
    model : CostModel, optional
        A ready cost model instance (overrides ``cost_model``/``pretrained``).
    Other parameters: see the module docstring and ``tvm-latmodel tune --help``.
    """
    from .hardware import load_hardware
    from .measure import local_builder, local_runner
    from .model.modes import estimate
    from .model.program import summarize
    from .sampling import sample_schedules

    if target.kind.name != "llvm":
        raise ValueError(f"tuning measures on this machine's CPU; a {target.kind.name!r} target needs its own "
                         "hardware (for CUDA use `tvm-latmodel gpu-bundle` and the device-side timer)")
    if trials < 1:
        raise ValueError(f"--trials must be >= 1, got {trials}")
    if stop_within is not None and stop_within < 0:
        raise ValueError(f"--stop-within must be >= 0, got {stop_within}")
    hw = hardware if hardware is not None and not isinstance(hardware, str) else load_hardware(target, hardware)
    if model is None:
        from .model.registry import make_model

        model = make_model(cost_model, seed=seed, pretrained=pretrained, target=target)
        if hasattr(model, "hardware"):
            model.hardware = hw
    # The roofline bound needs FLOPs and unique bytes: any schedule has them.
    probe = sample_schedules(mod, target, 1, seed=seed)
    bound = estimate(summarize(probe[0].mod, hw.kind), hw).roofline_bound_s if probe else 0.0
    flops = tvm.s_tir.analysis.estimate_tir_flops(mod)
    os.makedirs(work_dir, exist_ok=True)
    before = len(read_records(work_dir))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=trials, desc=f"tune {workload_name or 'workload'} [{cost_model}]", unit="trial",
                   file=sys.stderr)
    t0 = time.time()
    stopped = None
    best_prev = math.inf
    stale = 0
    round_index = 0
    measured = 0
    while measured < trials:
        n = min(round_trials, trials - measured)
        ms.tune_tir(
            mod=mod, target=target, work_dir=work_dir, max_trials_global=n, num_trials_per_iter=n,
            cost_model=model,
            builder=local_builder(),
            runner=local_runner(),
            seed=seed * 1000 + round_index + 1,
        )
        round_index += 1
        recs = read_records(work_dir)[before:]
        got = len(recs) - measured
        measured = len(recs)
        valid = [r for r in recs if r is not None]
        best = min(valid) if valid else math.inf
        if bar is not None:
            bar.update(max(0, got))
            bar.set_postfix(best_us=f"{best * 1e6:.1f}" if valid else "-")
        if got <= 0:
            stopped = "search space exhausted (no new candidates)"
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
        work_dir=os.path.abspath(work_dir), curve=curve, wall_s=time.time() - t0)
