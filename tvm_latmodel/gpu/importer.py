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

from ..traces import check_trace_json
from ..latency import FAILURE_SENTINEL_S, check_run_secs
from .bundle import bundle_sha256, load_bundle, structural_hash_hex, workload_of

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


_KNOWN_STATUSES = ("ok", "skipped", *FAILED_STATUSES)


def _shown(x) -> str:
    try:
        text = json.dumps(x)
    except ValueError:
        text = f"<{type(x).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def load_results(path: str | os.PathLike) -> dict:
    """Read and check a results file written by ``scripts/gpu_timer.py``.

    Every field the importer uses is checked: each workload has a unique
    ``name`` and a list of ``candidates``; each candidate a unique
    non-negative ``index`` and a known ``status``; an ``ok`` candidate's
    ``times_s`` are finite positive seconds. (Other fields, such as a
    mismatch's error statistics, may hold NaN, which the timer writes.)

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        Naming the file (and the workload and candidate) and the problem.
    """
    from ..fileformat import load_json

    path = str(path)
    res = load_json(path, "GPU timer results", strict=False)
    if not isinstance(res, dict) or res.get("format") != RESULTS_FORMAT:
        got = res.get("format") if isinstance(res, dict) else f"a JSON {type(res).__name__}"
        raise ValueError(f"{path}: not GPU timer results (format {_shown(got)})")
    version = res.get("version")
    if not (isinstance(version, int) and not isinstance(version, bool)) or version != RESULTS_VERSION:
        raise ValueError(f"{path}: results version {_shown(version)}, this code reads {RESULTS_VERSION}")
    if "bundle_sha256" in res and not isinstance(res["bundle_sha256"], str):
        raise ValueError(f"{path}: bundle_sha256 {_shown(res['bundle_sha256'])} is not a string")
    if not isinstance(res.get("workloads"), list):
        raise ValueError(f"{path}: missing 'workloads' list")
    names = set()
    for wi, wres in enumerate(res["workloads"]):
        w = f"{path}: workloads[{wi}]"
        if not isinstance(wres, dict):
            raise ValueError(f"{w} must be an object, got {_shown(wres)}")
        name = wres.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{w}: name {_shown(name)} is not a workload name")
        if name in names:
            raise ValueError(f"{w}: workload {name!r} appears twice")
        names.add(name)
        w = f"{path}: workload {name}"
        cands = wres.get("candidates", [])
        if not isinstance(cands, list):
            raise ValueError(f"{w}: candidates {_shown(cands)} is not a list")
        indices = set()
        for ci, rec in enumerate(cands):
            c = f"{w} candidates[{ci}]"
            if not isinstance(rec, dict):
                raise ValueError(f"{c} must be an object, got {_shown(rec)}")
            idx = rec.get("index")
            if not (isinstance(idx, int) and not isinstance(idx, bool)) or idx < 0:
                raise ValueError(f"{c}: index {_shown(idx)} is not a non-negative integer")
            if idx in indices:
                raise ValueError(f"{c}: candidate {idx} appears twice")
            indices.add(idx)
            status = rec.get("status")
            if status not in _KNOWN_STATUSES:
                raise ValueError(f"{c} (candidate {idx}): status {_shown(status)} is not one of "
                                 f"{', '.join(_KNOWN_STATUSES)}")
            times = rec.get("times_s", [])
            if not isinstance(times, list):
                raise ValueError(f"{c} (candidate {idx}): times_s {_shown(times)} is not a list")
            if status == "ok" and times:
                _, why = check_run_secs(times)
                if why is not None:
                    raise ValueError(f"{c} (candidate {idx}): status ok but bad times_s: {why}")
    return res


def _first_line(err: BaseException) -> str:
    lines = [t for t in str(err).strip().splitlines() if t.strip()]
    text = lines[0] if lines else type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _safe_dir_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def rebuild_schedule(mod: tvm.IRModule, trace_json) -> tvm.s_tir.Schedule:
    """Re-apply a JSON trace (``Trace.as_json``) to a fresh schedule of ``mod``.

    Raises
    ------
    ValueError
        For a trace that would crash TVM (:func:`~tvm_latmodel.traces.check_trace_json`).
    """
    why = check_trace_json(trace_json)
    if why is not None:
        raise ValueError(f"not a trace TVM can apply ({why})")
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
    sha = results.get("bundle_sha256")
    if sha is not None and sha != bundle_sha256(bundle_path):
        raise ValueError(f"{results_path}: these results are for another bundle (bundle_sha256 {sha[:16]}..., "
                         f"{bundle_path} is {bundle_sha256(bundle_path)[:16]}...)")
    try:
        target = tvm.target.Target(bundle["target"])
    except Exception as err:  # TVM raises its own error types
        raise ValueError(f"{bundle_path}: target {_shown(bundle['target'])} is not a TVM target "
                         f"({_first_line(err)})") from None
    if target.kind.name != "cuda":
        raise ValueError(f"{bundle_path}: target kind {target.kind.name!r} is not cuda")
    by_name = {wl["name"]: wl for wl in bundle["workloads"]}
    for wres in results["workloads"]:  # check every name before writing anything
        if wres["name"] not in by_name:
            raise ValueError(f"{results_path}: workload {wres['name']!r} is not in bundle {bundle_path}")
        known = {c["index"] for c in by_name[wres["name"]]["candidates"]}
        for rec in wres.get("candidates", []):
            if rec["index"] not in known:
                raise ValueError(f"{results_path}: {wres['name']} candidate {rec['index']} is not in the bundle")
    summary = ImportSummary()
    os.makedirs(out_dir, exist_ok=True)
    for wres in results["workloads"]:
        name = wres["name"]
        entry = by_name[name]
        mod = workload_of(entry, str(bundle_path))
        cands = {c["index"]: c for c in entry["candidates"]}
        work_dir = os.path.join(str(out_dir), _safe_dir_name(name))
        os.makedirs(work_dir, exist_ok=True)
        db = ms.database.JSONDatabase(work_dir=work_dir)
        workload = db.commit_workload(mod)
        args_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
        n_rec, fails, skipped = 0, {}, 0
        seen = set()
        for rec in wres.get("candidates", []):
            idx = rec["index"]
            seen.add(idx)
            status = rec["status"]
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
            try:
                sch = rebuild_schedule(mod, cands[idx]["trace"])
            except Exception as err:  # TVM raises its own error types
                raise ValueError(f"{bundle_path}: {name} candidate {idx}: its trace does not apply to the "
                                 f"workload ({_first_line(err)})") from None
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
