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
workload IRModule (``tvm.ir.save_json``, with the SHA-256 of that text, checked
before TVM parses it) and, when the workload comes from a
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

from ..traces import check_trace_json
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
        mod_json = tvm.ir.save_json(mod)
        entries.append(
            {
                "name": name,
                "workload_hash": structural_hash_hex(mod),
                "mod_json": mod_json,
                "mod_json_sha256": _sha256_text(mod_json),
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
        Naming the file: not UTF-8 JSON (or a broken gzip stream), not a
        bundle, of another format version, or a field missing or malformed
        (see :func:`validate_bundle`).
    """
    from ..fileformat import load_json

    path = str(path)
    bundle = load_json(path, "GPU bundle")
    validate_bundle(bundle, path)
    return bundle


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def bundle_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a bundle file, to tie results to the bundle they came from."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _Check:
    """``need(cond, where, message)`` raising ValueError; the checks of one bundle."""

    def __init__(self, origin: str):
        self.origin = origin

    def __call__(self, cond: bool, where: str, message: str) -> None:
        if not cond:
            raise ValueError(f"{self.origin}: {where}{': ' if where else ''}{message}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_count(x: Any, low: int = 0) -> bool:
    return _is_int(x) and low <= x < 2**63


def _is_dims(x: Any) -> bool:
    # Positive; grid x below 2^31 as CUDA requires (the device checks the rest at launch).
    return isinstance(x, list) and len(x) == 3 and all(_is_count(v, 1) for v in x) and x[0] < 2**31


def _shown(x: Any) -> str:
    try:
        text = json.dumps(x)
    except ValueError:
        text = f"<{type(x).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _check_buffer(need: _Check, info: Any, where: str, roles: bool) -> None:
    need(isinstance(info, dict), where, f"must be an object, got {_shown(info)}")
    keys = ("name", "shape", "dtype", "role") if roles else ("name", "shape", "dtype")
    for key in keys:
        need(key in info, where, f"missing key {key!r}")
    need(isinstance(info["name"], str), where, f"name {_shown(info['name'])} is not a string")
    need(isinstance(info["dtype"], str) and info["dtype"], where, f"dtype {_shown(info['dtype'])} is not a dtype")
    need(isinstance(info["shape"], list) and all(_is_count(d) for d in info["shape"]), where,
         f"shape {_shown(info['shape'])} is not a list of non-negative integers")
    if roles:
        need(info["role"] in ("input", "output"), where, f"role {_shown(info['role'])} is not 'input' or 'output'")


def _check_launch(need: _Check, launch: Any, where: str, n_params: int, n_workspace: int) -> None:
    need(isinstance(launch, dict), where, f"must be an object, got {_shown(launch)}")
    for key in ("kernel", "grid", "block", "args"):
        need(key in launch, where, f"missing key {key!r}")
    need(isinstance(launch["kernel"], str) and launch["kernel"], where,
         f"kernel {_shown(launch['kernel'])} is not a name")
    need(_is_dims(launch["grid"]), where, f"grid {_shown(launch['grid'])} is not 3 positive ints")
    need(_is_dims(launch["block"]), where, f"block {_shown(launch['block'])} is not 3 positive ints")
    dyn = launch.get("dynamic_shared_memory_bytes", 0)
    need(_is_count(dyn), where, f"dynamic_shared_memory_bytes {_shown(dyn)} is not a non-negative integer")
    need(isinstance(launch.get("flags", []), list), where, "flags is not a list")
    need(isinstance(launch["args"], list), where, f"args {_shown(launch['args'])} is not a list")
    for ai, arg in enumerate(launch["args"]):
        kind = arg.get("kind") if isinstance(arg, dict) else None
        need(kind in ("param", "workspace", "scalar"), where, f"args[{ai}] has kind {_shown(kind)}")
        if kind == "param":
            index = arg.get("index")
            need(_is_int(index) and 0 <= index < n_params, where, f"args[{ai}] bad param index {_shown(index)}")
        elif kind == "workspace":
            index = arg.get("index")
            need(_is_int(index) and 0 <= index < n_workspace, where,
                 f"args[{ai}] bad workspace index {_shown(index)}")
        else:
            need("dtype" in arg and "value" in arg, where, f"args[{ai}] scalar lacks dtype/value")
            need(isinstance(arg["dtype"], str), where, f"args[{ai}] dtype {_shown(arg['dtype'])} is not a dtype")
            value = arg["value"]
            need((_is_int(value) and abs(value) < 2**63)
                 or (isinstance(value, float) and value == value and abs(value) != float("inf")),
                 where, f"args[{ai}] value {_shown(value)} is not a finite number")


def validate_bundle(bundle: Any, where: str = "bundle") -> None:
    """Raise ValueError naming ``where`` and the first problem if ``bundle`` is malformed.

    Checks every field that ``scripts/gpu_timer.py`` and :func:`import_results
    <tvm_latmodel.gpu.importer.import_results>` use, and its type, so that a
    bundle that passes cannot fail later with a ``KeyError`` or ``TypeError``.
    (The TVM objects inside, ``mod_json``, ``trace`` and ``target``, are
    checked by the importer when it rebuilds them.)
    """
    need = _Check(str(where))
    need(isinstance(bundle, dict), "", f"a bundle is a JSON object, got {type(bundle).__name__}")
    need(bundle.get("format") == BUNDLE_FORMAT, "", f"not a GPU bundle (format {_shown(bundle.get('format'))})")
    version = bundle.get("version")
    need(_is_int(version) and version == BUNDLE_VERSION, "",
         f"bundle format version {_shown(version)}, this code reads version {BUNDLE_VERSION}")
    for key in ("target", "workloads", "tvm_version"):
        need(key in bundle, "", f"missing key {key!r}")
    need(isinstance(bundle["tvm_version"], str), "", f"tvm_version {_shown(bundle['tvm_version'])} is not a string")
    need(isinstance(bundle["target"], dict) and isinstance(bundle["target"].get("kind"), str), "",
         f"target {_shown(bundle['target'])} is not a target JSON object")
    for key in ("seed", "per_workload"):
        if key in bundle:
            need(_is_count(bundle[key]), "", f"{key} {_shown(bundle[key])} is not a non-negative integer")
    need(isinstance(bundle["workloads"], list), "", f"'workloads' must be a list, got {_shown(bundle['workloads'])}")
    names = set()
    for wi, wl in enumerate(bundle["workloads"]):
        w = f"workloads[{wi}]"
        need(isinstance(wl, dict), w, f"must be an object, got {_shown(wl)}")
        for key in ("name", "params", "candidates", "mod_json"):
            need(key in wl, w, f"lacks key {key!r}")
        need(isinstance(wl["name"], str) and wl["name"], w, f"name {_shown(wl['name'])} is not a workload name")
        need(wl["name"] not in names, w, f"workload {wl['name']!r} appears twice")
        names.add(wl["name"])
        w = f"workloads[{wi}] ({wl['name']})"
        need(isinstance(wl["mod_json"], str) and wl["mod_json"], w, "mod_json is not an IRModule JSON string")
        for key in ("workload_hash", "mod_json_sha256"):
            if key in wl:
                need(isinstance(wl[key], str), w, f"{key} {_shown(wl[key])} is not a string")
        # TVM's JSON loader trusts the node graph (a damaged one can crash the
        # process), so a bundle that carries the text's SHA-256 is checked first.
        if "mod_json_sha256" in wl:
            need(_sha256_text(wl["mod_json"]) == wl["mod_json_sha256"], w,
                 "mod_json does not match its mod_json_sha256 (the file is damaged)")
        need(isinstance(wl["params"], list), w, f"params {_shown(wl['params'])} is not a list")
        for pi, param in enumerate(wl["params"]):
            _check_buffer(need, param, f"{w} params[{pi}]", roles=True)
        ref = wl.get("reference")
        need(ref is None or (isinstance(ref, dict) and isinstance(ref.get("op"), str)
                             and isinstance(ref.get("params", {}), dict)),
             w, f"reference {_shown(ref)} is not null or {{op, params}}")
        errors = wl.get("lowering_errors", [])
        need(isinstance(errors, list) and all(isinstance(e, str) for e in errors), w,
             "lowering_errors is not a list of strings")
        need(isinstance(wl["candidates"], list), w, f"candidates {_shown(wl['candidates'])} is not a list")
        indices = set()
        for ci, cand in enumerate(wl["candidates"]):
            c = f"{w} candidates[{ci}]"
            need(isinstance(cand, dict), c, f"must be an object, got {_shown(cand)}")
            for key in ("index", "trace", "source", "launches", "workspace"):
                need(key in cand, c, f"lacks key {key!r}")
            need(_is_count(cand["index"]), c, f"index {_shown(cand['index'])} is not a non-negative integer")
            need(cand["index"] not in indices, c, f"index {cand['index']} appears twice")
            indices.add(cand["index"])
            why = check_trace_json(cand["trace"])
            need(why is None, c, f"trace is not one TVM can apply ({why})")
            for key in ("mod_hash", "origin"):
                if key in cand:
                    need(isinstance(cand[key], str), c, f"{key} {_shown(cand[key])} is not a string")
            need(isinstance(cand["source"], str) and cand["source"], c, "empty source")
            need(isinstance(cand["workspace"], list), c, f"workspace {_shown(cand['workspace'])} is not a list")
            for bi, buf in enumerate(cand["workspace"]):
                _check_buffer(need, buf, f"{c} workspace[{bi}]", roles=False)
            need(isinstance(cand["launches"], list) and cand["launches"], c, "no launches")
            for li, launch in enumerate(cand["launches"]):
                _check_launch(need, launch, f"{c} launches[{li}]", len(wl["params"]), len(cand["workspace"]))


def workload_of(entry: dict, where: str = "bundle") -> tvm.IRModule:
    """The workload IRModule stored in a bundle entry.

    Raises
    ------
    ValueError
        Naming ``where`` and the workload: ``mod_json`` is not an IRModule
        with a ``main`` PrimFunc, or does not match ``workload_hash``.
    """
    try:
        mod = tvm.ir.load_json(entry["mod_json"])
    except Exception as err:  # TVM raises its own error types
        raise ValueError(f"{where}: workload {entry['name']}: mod_json is not a TVM IRModule "
                         f"({_first_line(err)})") from None
    funcs = {g.name_hint: f for g, f in mod.functions.items()} if isinstance(mod, tvm.IRModule) else {}
    if not isinstance(funcs.get("main"), tvm.tirx.PrimFunc):
        raise ValueError(f"{where}: workload {entry['name']}: mod_json is not an IRModule with a main PrimFunc")
    if structural_hash_hex(mod) != entry.get("workload_hash", structural_hash_hex(mod)):
        raise ValueError(f"{where}: workload {entry['name']}: stored module does not match its hash")
    return mod


def _first_line(err: BaseException) -> str:
    lines = [t for t in str(err).strip().splitlines() if t.strip()]
    text = lines[0] if lines else type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


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
