"""Turn GPU timer results into MetaSchedule tuning databases.

``scripts/gpu_timer.py`` times a bundle's candidates on a machine without
TVM; this module brings its results back: one MetaSchedule JSON database per
workload (``database_workload.json`` and ``database_tuning_record.json``,
written by TVM's own ``ms.database.JSONDatabase``), whose records hold the
candidate's trace (re-applied to the workload, so it is checked to rebuild
the very module whose CUDA was timed), the measured ``run_secs`` (the
per-repeat times, seconds), the bundle's target and the workload's
``args_info``.

Failed candidates (``compile_error``, ``launch_error``, ``unsupported``,
``mismatch`` with the PyTorch reference) get **no** record by default: they
are counted and reported. With ``failed="max"`` they get
``run_secs=[1e10]``, as MetaSchedule records failed builds and runs.
Candidates the timer skipped (time budget) never get a record.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

import tvm
from tvm.s_tir import meta_schedule as ms

from ..latency import FAILURE_SENTINEL_S
from .bundle import load_bundle, structural_hash_hex, workload_of

RESULTS_FORMAT = "tvm-latmodel-gpu-results"
RESULTS_VERSION = 1
FAILED_STATUSES = ("compile_error", "launch_error", "unsupported", "mismatch")


@dataclass
class ImportSummary:
    """What :func:`import_results` wrote, per workload.

    Attributes
    ----------
    work_dirs : dict
        Workload name -> database directory.
    records : dict
        Workload name -> tuning records written.
    failed : dict
        Workload name -> {status: count} of candidates without a timing.
    skipped : dict
        Workload name -> candidates the timer skipped or never reached.
    """

    work_dirs: dict = field(default_factory=dict)
    records: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "work_dirs": self.work_dirs,
            "records": self.records,
            "failed": self.failed,
            "skipped": self.skipped,
        }


def load_results(path: str | os.PathLike) -> dict:
    """Read a results file; ValueError naming the file and problem if malformed."""
    path = str(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such results file")
    with open(path, encoding="utf-8") as fh:
        try:
            res = json.load(fh)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: line {err.lineno}: not valid JSON: {err.msg}") from None
    if not isinstance(res, dict) or res.get("format") != RESULTS_FORMAT:
        raise ValueError(f"{path}: not GPU timer results (format {res.get('format') if isinstance(res, dict) else None!r})")
    if res.get("version") != RESULTS_VERSION:
        raise ValueError(f"{path}: results version {res.get('version')!r}, this code reads {RESULTS_VERSION}")
    if not isinstance(res.get("workloads"), list):
        raise ValueError(f"{path}: missing 'workloads' list")
    return res


def _safe_dir_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def rebuild_schedule(mod: tvm.IRModule, trace_json) -> tvm.s_tir.Schedule:
    """Re-apply a JSON trace (``Trace.as_json``) to a fresh schedule of ``mod``."""
    sch = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(trace_json, sch)
    return sch


def import_results(
    bundle_path: str | os.PathLike,
    results_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    failed: str = "skip",
    verify_hash: bool = True,
) -> ImportSummary:
    """Write one MetaSchedule JSON database per workload from timer results.

    Parameters
    ----------
    bundle_path : path
        The bundle the timer ran.
    results_path : path
        The timer's results JSON.
    out_dir : path
        Databases go to ``out_dir/<workload name>/`` (``:`` becomes ``_``).
        Existing databases there are appended to.
    failed : {"skip", "max"}
        ``"skip"`` (default): failed candidates get no record. ``"max"``:
        they get ``run_secs=[1e10]`` like MetaSchedule's failed runs.
    verify_hash : bool
        Check that each re-applied trace rebuilds the module the bundle timed.

    Returns
    -------
    ImportSummary
    """
    if failed not in ("skip", "max"):
        raise ValueError(f"failed must be 'skip' or 'max', got {failed!r}")
    bundle = load_bundle(bundle_path)
    results = load_results(results_path)
    target = tvm.target.Target(bundle["target"])
    by_name = {wl["name"]: wl for wl in bundle["workloads"]}
    summary = ImportSummary()
    os.makedirs(out_dir, exist_ok=True)
    for wres in results["workloads"]:
        name = wres.get("name")
        if name not in by_name:
            raise ValueError(f"{results_path}: workload {name!r} is not in bundle {bundle_path}")
        entry = by_name[name]
        mod = workload_of(entry)
        cands = {c["index"]: c for c in entry["candidates"]}
        work_dir = os.path.join(str(out_dir), _safe_dir_name(name))
        os.makedirs(work_dir, exist_ok=True)
        db = ms.database.JSONDatabase(work_dir=work_dir)
        workload = db.commit_workload(mod)
        args_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
        n_rec, fails, skipped = 0, {}, 0
        seen = set()
        for rec in wres.get("candidates", []):
            idx = rec.get("index")
            if idx not in cands:
                raise ValueError(f"{results_path}: {name} candidate {idx} is not in the bundle")
            seen.add(idx)
            status = rec.get("status")
            if status == "ok" and rec.get("times_s"):
                run_secs = [float(t) for t in rec["times_s"]]
            elif status in FAILED_STATUSES:
                fails[status] = fails.get(status, 0) + 1
                if failed == "skip":
                    continue
                run_secs = [FAILURE_SENTINEL_S]
            else:  # skipped, or ok without times (should not happen)
                skipped += 1
                continue
            sch = rebuild_schedule(mod, cands[idx]["trace"])
            if verify_hash and "mod_hash" in cands[idx]:
                got = structural_hash_hex(sch.mod)
                if got != cands[idx]["mod_hash"]:
                    raise ValueError(
                        f"{bundle_path}: {name} candidate {idx}: re-applied trace gives module "
                        f"{got}, the bundle timed {cands[idx]['mod_hash']}"
                    )
            db.commit_tuning_record(
                ms.database.TuningRecord(sch.trace, workload, run_secs, target, args_info)
            )
            n_rec += 1
        skipped += len(set(cands) - seen)
        summary.work_dirs[name] = work_dir
        summary.records[name] = n_rec
        summary.failed[name] = fails
        summary.skipped[name] = skipped
        print(
            f"gpu-import: {name}: {n_rec} records, failed {fails or 0}, skipped {skipped} -> {work_dir}",
            file=sys.stderr,
        )
    return summary
