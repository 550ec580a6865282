"""Bundles of CUDA candidates that a TVM-less GPU machine can time.

A bundle is one JSON file (gzip-compressed when its name ends in ``.gz``:
unrolled kernels make sources of up to ~200 kB that compress ~15x; 5
workloads x 60 candidates are ~20-45 MB as plain JSON, a few MB as
``.json.gz``). For each workload it holds a pool of
MetaSchedule candidates for a CUDA target and, for each candidate, all that
``scripts/gpu_timer.py`` needs to run it with NVRTC (through CuPy) and
PyTorch alone:

* ``trace``: the schedule's MetaSchedule trace (``Trace.as_json``, postprocs
  kept), which ``gpu_import.py`` re-applies to the workload to rebuild a
  ``TuningRecord``;
* ``source``: the CUDA C that ``tvm.compile`` generates (the device module's
  ``inspect_source()``);
* ``launches``: every kernel launch of the host function, in call order, with
  its kernel name, grid and block dims, dynamic shared memory bytes and its
  arguments: a workload parameter (by index), a workspace buffer the host
  allocates (by index into ``workspace``), or a scalar constant;
* ``workspace``: the temporary global buffers the host function allocates.

The launch information is read from TVM itself: we run the same passes that
``tvm.compile`` runs (``tirx.build``), walk the host function for its
``tirx.call_ffi_kernel`` calls (kernel symbol, operands, then one launch value
per ``tirx.kernel_launch_params`` tag) and generate the device code from the
same lowered module.

Each workload also carries its parameters (name, shape, dtype, role), the
workload IRModule (``tvm.ir.save_json``) and, when the workload comes from a
known ``te_workload`` family, a ``reference`` spec (operator kind and
parameters) from which the timer computes the expected output with PyTorch.
"""

from __future__ import annotations

import gzip
import hashlib
import inspect
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tvm
import tvm_ffi

from .launch import _buffer_info, launch_plan

BUNDLE_FORMAT = "tvm-latmodel-gpu-bundle"
BUNDLE_VERSION = 1

# Which te_workload function each workload family uses, and the reference
# operator that computes the same thing (see scripts/gpu_timer.py).
_FAMILY_REFERENCE_OPS = {
    "C1D": "conv1d_nlc",
    "C2D": "conv2d_nhwc",
    "GRP": "conv2d_nhwc",
    "DIL": "conv2d_nhwc",
    "R18": "conv2d_nhwc",
    "C3D": "conv3d_ndhwc",
    "GMM": "batch_matmul",
    "DEP": "depthwise_conv2d_nhwc",
    "T2D": "conv2d_transpose_nhwc",
    "CAP": "conv2d_capsule_nhwijc",
    "NRM": "norm_bmn",
    "SFM": "softmax",
    "CBR": "conv2d_nhwc_bn_relu",
    "TBG": "transpose_batch_matmul",
}

ExtraSchedules = (
    Callable[[tvm.IRModule, tvm.target.Target, list], Sequence]
    | Mapping[str, Sequence]
    | None
)


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------


def json_of_tvm(obj: Any) -> Any:
    """Turn a TVM container (Array/Map/IntImm/FloatImm/String) into plain JSON."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, tvm.tirx.IntImm | tvm.tirx.FloatImm):
        return obj.value
    if isinstance(obj, Mapping) or hasattr(obj, "items"):
        return {str(json_of_tvm(k)): json_of_tvm(v) for k, v in obj.items()}
    if isinstance(obj, Sequence) or hasattr(obj, "__len__"):
        return [json_of_tvm(x) for x in obj]
    raise TypeError(f"cannot turn {type(obj).__name__} into JSON")


def structural_hash_hex(mod: tvm.IRModule) -> str:
    """The structural hash of ``mod`` as MetaSchedule writes it (hex)."""
    from tvm.s_tir.meta_schedule.utils import shash2hex

    return shash2hex(mod)


def _target_json(target: tvm.target.Target) -> dict:
    return json_of_tvm(target.export())


def _written_buffer_names(func: tvm.tirx.PrimFunc) -> set[str]:
    """Names of the buffers some block of ``func`` writes."""
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    names: set[str] = set()
    todo = list(sch.get_child_blocks(sch.get_sblock("root")))
    while todo:
        blk = todo.pop()
        for region in sch.get(blk).writes:
            names.add(str(region.source.name))
        todo.extend(sch.get_child_blocks(blk))
    return names


def param_specs(func: tvm.tirx.PrimFunc) -> list[dict]:
    """Name, shape, dtype and role (``input``/``output``) of each parameter, in order."""
    written = _written_buffer_names(func)
    out = []
    for i, var in enumerate(func.params):
        if getattr(var, "shape", None) is None:
            raise ValueError(f"parameter {i} ({var}) of the workload is not a buffer")
        info = _buffer_info(var)
        info["role"] = "output" if info["name"] in written else "input"
        out.append(info)
    return out


# --------------------------------------------------------------------------
# reference specs
# --------------------------------------------------------------------------


def reference_spec(name: str) -> dict | None:
    """The PyTorch reference for workload ``name`` (``FAMILY:IDX``), or None.

    The spec is ``{"op": ..., "params": {...}}`` where ``params`` are the
    arguments of the ``te_workload`` function that built the workload (with
    defaults filled in). The timer calls the reference on the workload's input
    parameters in their PrimFunc order and compares with the output.
    """
    fam, _, idx = name.partition(":")
    op = _FAMILY_REFERENCE_OPS.get(fam)
    if op is None:
        return None
    from ..workloads import _configs

    configs = _configs()
    if fam not in configs:
        return None
    fn, args = configs[fam][int(idx) if idx else 0]
    return reference_spec_for(op, fn, args)


def reference_spec_for(op: str, fn: Callable, args: Sequence) -> dict:
    """A reference spec for te_workload function ``fn`` called with ``args``."""
    sig = inspect.signature(fn)
    bound = sig.bind(*args)
    bound.apply_defaults()
    params = {}
    for key, val in bound.arguments.items():
        if isinstance(val, bool | int | float | str):
            params[key] = val
    return {"op": op, "params": params}


# --------------------------------------------------------------------------
# bundles
# --------------------------------------------------------------------------


def candidate_entry(sch: tvm.s_tir.Schedule, target: tvm.target.Target) -> dict:
    """Everything the timer and the importer need about one scheduled candidate."""
    plan = launch_plan(sch.mod, target)
    return {
        "trace": json_of_tvm(sch.trace.as_json(remove_postproc=False)),
        "mod_hash": structural_hash_hex(sch.mod),
        **plan,
    }


def _extra_for(extra_schedules: ExtraSchedules, name: str, mod, target, sampled) -> list:
    if extra_schedules is None:
        return []
    if callable(extra_schedules):
        return list(extra_schedules(mod, target, list(sampled)) or [])
    return list(extra_schedules.get(name, []))


def make_bundle(
    workloads: Sequence[str],
    target: tvm.target.Target | None = None,
    *,
    per_workload: int = 60,
    seed: int = 0,
    extra_schedules: ExtraSchedules = None,
    progress: bool = False,
) -> dict:
    """Sample candidates of each workload for a CUDA target and describe them.

    Parameters
    ----------
    workloads : sequence of str
        Workload names (``FAMILY:IDX``, see ``tvm_latmodel.workloads``).
    target : Target, optional
        A CUDA target; default ``cuda_target("h200")``.
    per_workload : int
        Candidates sampled per workload (``sampling.sample_schedules``);
        duplicates (same scheduled IRModule) are dropped, so a pool can be
        smaller.
    seed : int
        Seed of the sampling; workload ``i`` uses ``seed + i``.
    extra_schedules : callable or mapping, optional
        More candidates per workload, e.g. the ones a model ranks best: a
        callable ``f(mod, target, sampled_schedules) -> schedules`` or a
        mapping from workload name to schedules. They are tagged
        ``origin: "extra"``.
    progress : bool
        Show a progress bar on stderr.

    Returns
    -------
    dict
        The bundle (plain JSON; see the module docstring).
    """
    from ..sampling import sample_schedules
    from ..targets import cuda_target
    from ..workloads import get_workload

    target = cuda_target("h200") if target is None else target
    if target.kind.name != "cuda":
        raise ValueError(f"a GPU bundle needs a CUDA target, got {target.kind.name!r}")
    if per_workload < 0:
        raise ValueError(f"per_workload must be >= 0, got {per_workload}")
    entries = []
    for wi, name in enumerate(workloads):
        mod = get_workload(name)
        sampled = sample_schedules(mod, target, per_workload, seed=seed + wi) if per_workload else []
        extra = _extra_for(extra_schedules, name, mod, target, sampled)
        pool = [("sampled", s) for s in sampled] + [("extra", s) for s in extra]
        candidates, seen, errors = [], {}, []
        for origin, sch in _progress(pool, name, progress):
            key = structural_hash_hex(sch.mod)
            if key in seen and tvm_ffi.structural_equal(sch.mod, seen[key]):
                continue  # the same schedule drawn twice
            seen[key] = sch.mod
            try:
                entry = candidate_entry(sch, target)
            except (ValueError, RuntimeError) as err:  # TVM errors are RuntimeErrors
                errors.append(f"{origin} candidate: {err}")
                continue
            candidates.append({"index": len(candidates), "origin": origin, **entry})
        func = mod["main"]
        entries.append(
            {
                "name": name,
                "workload_hash": structural_hash_hex(mod),
                "mod_json": tvm.ir.save_json(mod),
                "params": param_specs(func),
                "reference": reference_spec(name),
                "lowering_errors": errors,
                "candidates": candidates,
            }
        )
    return {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "tvm_version": tvm.__version__,
        "target": _target_json(target),
        "seed": int(seed),
        "per_workload": int(per_workload),
        "workloads": entries,
    }


def _progress(items, desc: str, enabled: bool):
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, file=sys.stderr, leave=False)


def _open_text(path: str, mode: str):
    """Open ``path`` as UTF-8 text, through gzip when it ends in ``.gz``."""
    if path.endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def save_bundle(bundle: dict, path: str | os.PathLike) -> int:
    """Write ``bundle`` as JSON to ``path`` (gzip-compressed if it ends in ``.gz``).

    Returns
    -------
    int
        The file's size in bytes. Sources of unrolled kernels are large
        (up to ~200 kB each) but repetitive; ``.json.gz`` is ~10x smaller.
    """
    path = str(path)
    validate_bundle(bundle, path)
    tmp = f"{path}.tmp"
    with _open_text(tmp if not path.endswith(".gz") else tmp + ".gz", "w") as fh:
        json.dump(bundle, fh, separators=(",", ":"))
    os.replace(tmp if not path.endswith(".gz") else tmp + ".gz", path)
    return os.path.getsize(path)


def load_bundle(path: str | os.PathLike) -> dict:
    """Read and validate a bundle written by :func:`save_bundle`.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If it is not JSON, not a bundle, or of another format version.
    """
    path = str(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such bundle file")
    with _open_text(path, "r") as fh:
        try:
            bundle = json.load(fh)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: line {err.lineno}: not valid JSON: {err.msg}") from None
        except (OSError, EOFError) as err:  # a bad gzip stream
            raise ValueError(f"{path}: cannot read: {err}") from None
    validate_bundle(bundle, path)
    return bundle


def bundle_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a bundle file, to tie results to the bundle they came from."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def validate_bundle(bundle: Any, where: str = "bundle") -> None:
    """Raise ValueError naming ``where`` and the problem if ``bundle`` is malformed."""
    if not isinstance(bundle, dict):
        raise ValueError(f"{where}: a bundle is a JSON object, got {type(bundle).__name__}")
    if bundle.get("format") != BUNDLE_FORMAT:
        raise ValueError(f"{where}: not a GPU bundle (format {bundle.get('format')!r})")
    if bundle.get("version") != BUNDLE_VERSION:
        raise ValueError(
            f"{where}: bundle format version {bundle.get('version')!r}, "
            f"this code reads version {BUNDLE_VERSION}"
        )
    for key in ("target", "workloads", "tvm_version"):
        if key not in bundle:
            raise ValueError(f"{where}: missing key {key!r}")
    for wi, wl in enumerate(bundle["workloads"]):
        for key in ("name", "params", "candidates", "mod_json"):
            if key not in wl:
                raise ValueError(f"{where}: workloads[{wi}] lacks key {key!r}")
        for ci, cand in enumerate(wl["candidates"]):
            for key in ("index", "trace", "source", "launches", "workspace"):
                if key not in cand:
                    raise ValueError(
                        f"{where}: workloads[{wi}] ({wl['name']}) candidates[{ci}] lacks key {key!r}"
                    )


def workload_of(entry: dict) -> tvm.IRModule:
    """The workload IRModule stored in a bundle entry."""
    mod = tvm.ir.load_json(entry["mod_json"])
    if structural_hash_hex(mod) != entry.get("workload_hash", structural_hash_hex(mod)):
        raise ValueError(f"workload {entry['name']}: stored module does not match its hash")
    return mod


__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "bundle_sha256",
    "candidate_entry",
    "launch_plan",
    "load_bundle",
    "make_bundle",
    "param_specs",
    "reference_spec",
    "reference_spec_for",
    "save_bundle",
    "validate_bundle",
    "workload_of",
]
