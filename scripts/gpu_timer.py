#!/usr/bin/env python3
"""Time TVM-generated CUDA candidates on a GPU machine that has no TVM.

Reads a bundle written by ``tvm-latmodel gpu-bundle`` (plain JSON: per
workload, per candidate the CUDA source, its kernel launches and argument
buffers), compiles each candidate with NVRTC through CuPy, runs it on inputs
allocated with PyTorch, checks a few candidates per workload against a
PyTorch reference, times every candidate with CUDA events, and writes a
results JSON that ``tvm-latmodel gpu-import`` turns into MetaSchedule
databases.

Needs only the Python standard library, CuPy and PyTorch (imported lazily,
so validating a bundle works without them)::

    python scripts/gpu_timer.py BUNDLE.json[.gz] -o RESULTS.json \\
        [--repeats 20] [--warmup 5] [--time-budget-s 450] [--check 3] [--resume]

Timing follows TVM's ``time_evaluator``: after ``--warmup`` runs, each of
``--repeats`` repeats times ``number`` back-to-back runs between two CUDA
events, with ``number`` chosen so a repeat lasts at least
``--min-repeat-ms``; a candidate's time is the median over repeats (min and
mean are recorded too). One "run" is all the candidate's kernel launches in
call order, as TVM's host function would issue them. No cache is flushed
between runs (neither does MetaSchedule's default CUDA runner).

Exit status: 0 results written (candidates may have failed; see each
record's ``status``); 1 no CuPy/PyTorch/GPU; 2 bad bundle or arguments;
3 the CUDA context was lost (e.g. an illegal memory access): the results so
far are written, rerun with ``--resume`` to go on after the culprit.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as _dt
import glob
import gzip
import hashlib
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

BUNDLE_FORMAT = "tvm-latmodel-gpu-bundle"
BUNDLE_VERSION = 1
RESULTS_FORMAT = "tvm-latmodel-gpu-results"
RESULTS_VERSION = 1

EXIT_OK, EXIT_NO_GPU, EXIT_BAD_INPUT, EXIT_CONTEXT_LOST = 0, 1, 2, 3

# Launch tags (tirx.kernel_launch_params) other than thread dims and dynamic
# shared memory are launch flags we cannot honour with a plain launch.
SUPPORTED_FLAGS: frozenset = frozenset()
MAX_THREADS_PER_BLOCK = 1024
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-3

# What TVM prepends and passes when it compiles its CUDA source with NVRTC
# (tvm/support/nvcc.py, _compile_cuda_nvrtc), so kernels build the same way.
NVRTC_PREAMBLE = """#include <cuda/std/cstdint>
using cuda::std::uint8_t;
using cuda::std::uint16_t;
using cuda::std::uint32_t;
using cuda::std::uint64_t;
using cuda::std::int8_t;
using cuda::std::int16_t;
using cuda::std::int32_t;
using cuda::std::int64_t;
#ifndef __asm__
#define __asm__ asm
#endif
#ifndef __volatile__
#define __volatile__ volatile
#endif
#include <cuda/std/limits>
#ifndef INFINITY
#define INFINITY (::cuda::std::numeric_limits<float>::infinity())
#endif

"""
NVRTC_BASE_OPTIONS = (
    "-std=c++17",
    "-default-device",
    "--device-int128",
    "-D__NV_SILENCE_DEPRECATION_BEGIN=",
    "-D__NV_SILENCE_DEPRECATION_END=",
    "-D__NV_SILENCE_HOST_DEPRECATION_BEGIN=",
    "-D__NV_SILENCE_HOST_DEPRECATION_END=",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    "--use_fast_math",
)
# Option sets tried in order until one compiles a probe kernel: TVM's full
# set first; older NVRTCs lack --register-usage-level; a CuPy that adds its
# own -std may clash with ours.
_PTXAS_OPTIONS = ("--ptxas-options=--register-usage-level=10",)
NVRTC_OPTION_SETS = (
    NVRTC_BASE_OPTIONS + _PTXAS_OPTIONS,
    NVRTC_BASE_OPTIONS,
    tuple(o for o in NVRTC_BASE_OPTIONS if not o.startswith("-std")),
)


class BundleError(ValueError):
    """The bundle file is missing, not JSON, or not a bundle this script reads."""


class GpuUnavailable(RuntimeError):
    """CuPy, PyTorch or a CUDA GPU is missing."""


class CandidateError(RuntimeError):
    """A candidate cannot be run as described (unsupported launch, bad plan)."""


# --------------------------------------------------------------------------
# bundle validation and planning (pure Python)
# --------------------------------------------------------------------------


def _require(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise BundleError(f"{where}: {msg}")


def _is_dims(x) -> bool:
    return isinstance(x, list) and len(x) == 3 and all(isinstance(v, int) and v >= 1 for v in x)


def validate_bundle(bundle, where: str = "bundle") -> None:
    """Raise :class:`BundleError` naming ``where`` and the first problem found."""
    _require(isinstance(bundle, dict), where, f"a bundle is a JSON object, got {type(bundle).__name__}")
    _require(
        bundle.get("format") == BUNDLE_FORMAT,
        where,
        f"not a GPU bundle: format is {bundle.get('format')!r}, expected {BUNDLE_FORMAT!r}",
    )
    _require(
        bundle.get("version") == BUNDLE_VERSION,
        where,
        f"bundle format version {bundle.get('version')!r}; this script reads version {BUNDLE_VERSION}",
    )
    for key in ("workloads", "target"):
        _require(key in bundle, where, f"missing key {key!r}")
    _require(isinstance(bundle["workloads"], list), where, "'workloads' must be a list")
    for wi, wl in enumerate(bundle["workloads"]):
        w = f"{where}: workloads[{wi}]"
        _require(isinstance(wl, dict), w, "must be an object")
        for key in ("name", "params", "candidates"):
            _require(key in wl, w, f"missing key {key!r}")
        w = f"{where}: workload {wl['name']!r}"
        for pi, p in enumerate(wl["params"]):
            for key in ("name", "shape", "dtype", "role"):
                _require(isinstance(p, dict) and key in p, w, f"params[{pi}] lacks {key!r}")
            _require(p["role"] in ("input", "output"), w, f"params[{pi}] has role {p['role']!r}")
        for ci, cand in enumerate(wl["candidates"]):
            c = f"{w} candidates[{ci}]"
            _require(isinstance(cand, dict), c, "must be an object")
            for key in ("index", "source", "launches", "workspace"):
                _require(key in cand, c, f"missing key {key!r}")
            _require(isinstance(cand["source"], str) and cand["source"], c, "empty source")
            _require(isinstance(cand["launches"], list) and cand["launches"], c, "no launches")
            for li, launch in enumerate(cand["launches"]):
                lw = f"{c} launches[{li}]"
                for key in ("kernel", "grid", "block", "args"):
                    _require(isinstance(launch, dict) and key in launch, lw, f"missing key {key!r}")
                _require(_is_dims(launch["grid"]), lw, f"grid {launch['grid']!r} is not 3 positive ints")
                _require(_is_dims(launch["block"]), lw, f"block {launch['block']!r} is not 3 positive ints")
                for ai, arg in enumerate(launch["args"]):
                    kind = arg.get("kind") if isinstance(arg, dict) else None
                    _require(kind in ("param", "workspace", "scalar"), lw, f"args[{ai}] has kind {kind!r}")
                    if kind == "param":
                        _require(0 <= arg.get("index", -1) < len(wl["params"]), lw, f"args[{ai}] bad param index")
                    elif kind == "workspace":
                        _require(
                            0 <= arg.get("index", -1) < len(cand["workspace"]), lw, f"args[{ai}] bad workspace index"
                        )
                    else:
                        _require("dtype" in arg and "value" in arg, lw, f"args[{ai}] scalar lacks dtype/value")


def load_bundle(path: str) -> dict:
    """Read and validate a bundle; :class:`BundleError` with the file and line on failure."""
    if not os.path.exists(path):
        raise BundleError(f"{path}: no such file")
    opener = gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")
    with opener as fh:
        try:
            bundle = json.load(fh)
        except json.JSONDecodeError as err:
            raise BundleError(f"{path}: line {err.lineno} column {err.colno}: not valid JSON: {err.msg}") from None
        except (OSError, EOFError, UnicodeDecodeError) as err:
            raise BundleError(f"{path}: cannot read: {err}") from None
    validate_bundle(bundle, path)
    return bundle


def kernel_declared(source: str, kernel: str) -> bool:
    """Whether ``source`` declares ``extern "C" __global__ ... kernel(``."""
    import re

    pattern = (
        r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?'
        + re.escape(kernel)
        + r"\s*\("
    )
    return re.search(pattern, source) is not None


def plan_launches(candidate: dict) -> list[dict]:
    """Check a candidate's launches and return them in call order.

    Each planned launch has ``kernel``, ``grid`` and ``block`` (tuples),
    ``shared_mem`` (dynamic shared memory bytes) and ``args``: a list of
    ``("param", i)``, ``("workspace", j)`` or ``("scalar", dtype, value)``.

    Raises
    ------
    CandidateError
        On launch flags we cannot honour, too many threads, or a kernel that
        the source does not declare.
    """
    plans = []
    for launch in candidate["launches"]:
        kernel = launch["kernel"]
        flags = [f for f in launch.get("flags", []) if f not in SUPPORTED_FLAGS]
        if flags:
            raise CandidateError(f"kernel {kernel} needs unsupported launch flags {flags}")
        threads = math.prod(launch["block"])
        if threads > MAX_THREADS_PER_BLOCK:
            raise CandidateError(f"kernel {kernel} has {threads} threads per block")
        if not kernel_declared(candidate["source"], kernel):
            raise CandidateError(f"kernel {kernel} is not declared in the source")
        args = []
        for arg in launch["args"]:
            if arg["kind"] == "scalar":
                args.append(("scalar", arg["dtype"], arg["value"]))
            else:
                args.append((arg["kind"], int(arg["index"])))
        plans.append(
            {
                "kernel": kernel,
                "grid": tuple(launch["grid"]),
                "block": tuple(launch["block"]),
                "shared_mem": int(launch.get("dynamic_shared_memory_bytes", 0)),
                "args": args,
            }
        )
    return plans


def prepare_source(source: str) -> str:
    """The source as TVM hands it to NVRTC: host-only headers dropped, preamble added."""
    kept = "\n".join(line for line in source.splitlines() if line.strip() != "#include <cuda.h>")
    return NVRTC_PREAMBLE + kept


def choose_number(run_s: float, min_repeat_ms: float, max_number: int = 100000) -> int:
    """Back-to-back runs per repeat so that a repeat lasts ``min_repeat_ms``."""
    if run_s <= 0:
        return max_number
    wanted = math.ceil(min_repeat_ms * 1e-3 / run_s - 1e-9)  # no float round-up to n + 1
    return int(max(1, min(max_number, wanted)))


def summarize_times(times_s: list[float]) -> dict:
    """Median, min, mean and max of per-run times (seconds)."""
    return {
        "median_s": statistics.median(times_s),
        "min_s": min(times_s),
        "mean_s": statistics.fmean(times_s),
        "max_s": max(times_s),
    }


def failure_record(index: int, status: str, error: str, **extra) -> dict:
    """A result record for a candidate that could not be timed."""
    rec = {"index": int(index), "status": status, "error": str(error)[-4000:], "times_s": []}
    rec.update(extra)
    return rec


def check_passed(max_abs_err: float, max_abs_ref: float, rtol: float, atol: float) -> bool:
    """``allclose`` in one number: error within ``atol + rtol * max|reference|``."""
    return math.isfinite(max_abs_err) and max_abs_err <= atol + rtol * max_abs_ref


# --------------------------------------------------------------------------
# references: generic over an array library (numpy here, torch on the GPU)
# --------------------------------------------------------------------------


class NumpyOps:
    """Array operations the references use, for numpy (tests, CPU)."""

    def __init__(self):
        import numpy

        self.np = numpy

    def pad(self, x, widths):
        return self.np.pad(x, widths)

    def zeros(self, shape, like):
        return self.np.zeros(shape, dtype=like.dtype)

    def einsum(self, spec, *xs):
        return self.np.einsum(spec, *xs)

    def flip(self, x, axes):
        return self.np.flip(x, axis=axes)

    def exp(self, x):
        return self.np.exp(x)

    def sqrt(self, x):
        return self.np.sqrt(x)

    def relu(self, x):
        return self.np.maximum(x, 0)

    def amax(self, x, axis):
        return self.np.max(x, axis=axis, keepdims=True)

    def sum(self, x, axis, keepdims=False):
        return self.np.sum(x, axis=axis, keepdims=keepdims)


class TorchOps:
    """The same operations for torch tensors."""

    def __init__(self, torch=None):
        if torch is None:
            import torch
        self.torch = torch

    def pad(self, x, widths):
        flat = []
        for before, after in reversed(list(widths)):
            flat += [int(before), int(after)]
        return self.torch.nn.functional.pad(x, flat)

    def zeros(self, shape, like):
        return self.torch.zeros(shape, dtype=like.dtype, device=like.device)

    def einsum(self, spec, *xs):
        return self.torch.einsum(spec, *xs)

    def flip(self, x, axes):
        return self.torch.flip(x, dims=tuple(axes))

    def exp(self, x):
        return self.torch.exp(x)

    def sqrt(self, x):
        return self.torch.sqrt(x)

    def relu(self, x):
        return self.torch.clamp(x, min=0)

    def amax(self, x, axis):
        return self.torch.amax(x, dim=axis, keepdim=True)

    def sum(self, x, axis, keepdims=False):
        return self.torch.sum(x, dim=axis, keepdim=keepdims)


def _conv_nd(ops, x, w, stride, padding, dilation, groups):
    """Channels-last convolution: ``x`` (N, *spatial, CI), ``w`` (*kernel, CI/groups, CO)."""
    nd = len(x.shape) - 2
    ks = list(w.shape[:nd])
    cig, co = int(w.shape[nd]), int(w.shape[nd + 1])
    g = int(groups)
    cog = co // g
    xp = ops.pad(x, [(0, 0)] + [(padding, padding)] * nd + [(0, 0)])
    outs = [
        (int(x.shape[1 + i]) + 2 * padding - dilation * (ks[i] - 1) - 1) // stride + 1 for i in range(nd)
    ]
    sp = "hwz"[:nd]
    spec = f"n{sp}gc,cgd->n{sp}gd"
    acc = None
    for offs in itertools.product(*[range(k) for k in ks]):
        index = [slice(None)]
        for i, o in enumerate(offs):
            start = o * dilation
            index.append(slice(start, start + stride * (outs[i] - 1) + 1, stride))
        index.append(slice(None))
        xs = xp[tuple(index)]
        xs = xs.reshape(tuple(xs.shape[:-1]) + (g, cig))
        wk = w[offs].reshape(cig, g, cog)
        term = ops.einsum(spec, xs, wk)
        acc = term if acc is None else acc + term
    return acc.reshape(tuple(acc.shape[: 1 + nd]) + (co,))


def _ref_conv(nd):
    def ref(ops, p, x, w):
        return [_conv_nd(ops, x, w, p["stride"], p["padding"], p["dilation"], p["groups"])]

    return ref


def _ref_depthwise(ops, p, x, w):
    if p.get("factor", 1) != 1:
        raise CandidateError("depthwise reference supports factor 1 only")
    c = int(x.shape[3])
    k = int(w.shape[1])
    w2 = w[0].reshape(k, k, 1, c)
    return [_conv_nd(ops, x, w2, p["stride"], p["padding"], p["dilation"], c)]


def _ref_conv2d_transpose(ops, p, x, w):
    s, pad = p["stride"], p["padding"]
    n, h, wd, ci = (int(v) for v in x.shape)
    k = int(w.shape[0])
    dil = ops.zeros((n, (h - 1) * s + 1, (wd - 1) * s + 1, ci), like=x)
    dil[:, ::s, ::s, :] = x
    return [_conv_nd(ops, dil, ops.flip(w, (0, 1)), 1, k - 1 - pad, 1, 1)]


def _ref_capsule(ops, p, x, w):
    s, pad, k = p["stride"], p["padding"], p["kernel_size"]
    xp = ops.pad(x, [(0, 0), (pad, pad), (pad, pad), (0, 0), (0, 0), (0, 0)])
    oh = (int(x.shape[1]) + 2 * pad - k) // s + 1
    ow = (int(x.shape[2]) + 2 * pad - k) // s + 1
    acc = None
    for rh in range(k):
        for rw in range(k):
            xs = xp[:, rh : rh + s * (oh - 1) + 1 : s, rw : rw + s * (ow - 1) + 1 : s]
            term = ops.einsum("nhwikc,kjcd->nhwijd", xs, w[rh, rw])
            acc = term if acc is None else acc + term
    return [acc]


def _ref_cbr(ops, p, data, kernel, bias, bn_offset, bn_scale):
    conv = _conv_nd(ops, data, kernel, p["strides"], p["padding"], p["dilation"], 1)
    return [ops.relu((conv + bias) * bn_scale + bn_offset)]


def _ref_softmax(ops, p, a):
    e = ops.exp(a - ops.amax(a, 1))
    return [e / ops.sum(e, 1, keepdims=True)]


REFERENCES = {
    "conv1d_nlc": _ref_conv(1),
    "conv2d_nhwc": _ref_conv(2),
    "conv3d_ndhwc": _ref_conv(3),
    "depthwise_conv2d_nhwc": _ref_depthwise,
    "conv2d_transpose_nhwc": _ref_conv2d_transpose,
    "conv2d_capsule_nhwijc": _ref_capsule,
    "conv2d_nhwc_bn_relu": _ref_cbr,
    "batch_matmul": lambda ops, p, x, y: [ops.einsum("bnk,bkm->bnm", x, y)],
    "matmul": lambda ops, p, a, b: [ops.einsum("nk,km->nm", a, b)],
    "transpose_batch_matmul": lambda ops, p, q, v: [ops.einsum("bihk,bjhk->bhij", q, v)],
    "norm_bmn": lambda ops, p, a: [ops.sqrt(ops.sum(a * a, (1, 2)))],
    "softmax": _ref_softmax,
}
# Parameter defaults of the te_workload functions, for specs that omit them.
_REFERENCE_DEFAULTS = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, "factor": 1}


def reference_outputs(ops, spec: dict, inputs: list) -> list:
    """Expected outputs of the workload ``spec`` describes, on ``inputs`` (PrimFunc order)."""
    op = spec.get("op")
    if op not in REFERENCES:
        raise CandidateError(f"no reference for op {op!r}")
    params = dict(_REFERENCE_DEFAULTS)
    params.update(spec.get("params", {}))
    return REFERENCES[op](ops, params, *inputs)


# --------------------------------------------------------------------------
# the GPU side (CuPy + PyTorch, imported lazily)
# --------------------------------------------------------------------------


def import_gpu_libraries():
    """Import CuPy and PyTorch and check there is a CUDA GPU; GpuUnavailable otherwise."""
    try:
        import cupy
    except Exception as err:  # ImportError, or a broken CUDA install
        raise GpuUnavailable(f"CuPy is not usable ({type(err).__name__}: {err}); install cupy-cuda13x") from None
    try:
        import torch
    except Exception as err:
        raise GpuUnavailable(f"PyTorch is not usable ({type(err).__name__}: {err})") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:
        raise GpuUnavailable(f"CuPy finds no CUDA GPU ({type(err).__name__}: {err})") from None
    if count < 1:
        raise GpuUnavailable("CuPy finds no CUDA GPU (device count 0)")
    if not torch.cuda.is_available():
        raise GpuUnavailable("PyTorch finds no CUDA GPU (torch.cuda.is_available() is False)")
    return cupy, torch


def _as_text(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def gpu_environment(cupy, torch) -> dict:
    """GPU name, compute capability, driver/CUDA/NVRTC and library versions."""
    props = cupy.cuda.runtime.getDeviceProperties(0)
    env = {
        "gpu_name": _as_text(props.get("name", b"")),
        "compute_capability": list(torch.cuda.get_device_capability(0)),
        "sm_count": int(props.get("multiProcessorCount", 0)),
        "total_memory_bytes": int(props.get("totalGlobalMem", 0)),
        "cuda_driver_api_version": int(cupy.cuda.runtime.driverGetVersion()),
        "cuda_runtime_version": int(cupy.cuda.runtime.runtimeGetVersion()),
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "cupy_version": cupy.__version__,
        "python_version": platform.python_version(),
        "hostname": platform.node(),
    }
    try:
        env["nvrtc_version"] = list(cupy.cuda.nvrtc.getVersion())
    except Exception as err:  # noqa: BLE001 - informative only
        env["nvrtc_version"] = f"unknown ({err})"
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        env["nvidia_smi"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None
        env["driver_version"] = env["nvidia_smi"].split(",")[0].strip() if env["nvidia_smi"] else None
    except (OSError, subprocess.SubprocessError):
        env["nvidia_smi"] = env["driver_version"] = None
    return env


def cuda_include_dirs(cupy=None) -> list[str]:
    """Directories that hold ``cuda/std/cstdint`` (libcu++), best first."""
    roots = []
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if os.environ.get(var):
            roots.append(os.environ[var])
    roots += ["/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    candidates = []
    for root in roots:
        candidates += [os.path.join(root, "include"), os.path.join(root, "include", "cccl")]
        candidates += sorted(glob.glob(os.path.join(root, "targets", "*", "include")))
        candidates += sorted(glob.glob(os.path.join(root, "targets", "*", "include", "cccl")))
    site_dirs = {os.path.dirname(os.path.dirname(p)) for p in sys.path if p.endswith("site-packages")}
    site_dirs |= {p for p in sys.path if p.endswith("site-packages")}
    for sp in sorted(site_dirs):
        candidates += sorted(glob.glob(os.path.join(sp, "nvidia", "*", "include")))
        candidates += sorted(glob.glob(os.path.join(sp, "nvidia", "*", "include", "cccl")))
        candidates += sorted(glob.glob(os.path.join(sp, "nvidia", "cu*", "include", "cccl")))
    if cupy is not None:
        base = os.path.join(os.path.dirname(cupy.__file__), "_core", "include")
        for depth in range(0, 5):
            candidates += sorted(glob.glob(os.path.join(base, *(["*"] * depth), "include")))
        candidates.append(base)
    found, seen = [], set()
    for d in candidates:
        real = os.path.realpath(d)
        if real in seen:
            continue
        seen.add(real)
        if os.path.isfile(os.path.join(d, "cuda", "std", "cstdint")):
            found.append(d)
    return found


_PROBE_SOURCE = 'extern "C" __global__ void probe(float* x) { x[threadIdx.x] += INFINITY * 0.0f + (int64_t)1; }\n'


class Compiler:
    """NVRTC through CuPy, with the options TVM uses (probed once)."""

    def __init__(self, cupy):
        self.cupy = cupy
        self.include_dirs = cuda_include_dirs(cupy)
        self.options = None
        self.probe_errors: list[str] = []

    def _build(self, source: str, options: tuple, kernels: list[str]) -> dict:
        module = self.cupy.RawModule(code=prepare_source(source), options=options, backend="nvrtc")
        return {k: module.get_function(k) for k in kernels}

    def probe(self) -> tuple:
        """Find the richest option set NVRTC accepts; raise if none compiles."""
        includes = tuple(f"-I{d}" for d in self.include_dirs)
        for option_set in NVRTC_OPTION_SETS:
            opts = option_set + includes
            try:
                self._build(_PROBE_SOURCE, opts, ["probe"])
            except Exception as err:  # noqa: BLE001 - try the next option set
                self.probe_errors.append(f"{' '.join(opts)}: {str(err)[-600:]}")
                continue
            self.options = opts
            return opts
        raise GpuUnavailable(
            "NVRTC compiles no probe kernel with TVM's options; include dirs "
            f"{self.include_dirs}; errors: {self.probe_errors}"
        )

    def compile(self, source: str, kernels: list[str]):
        """Compile ``source``; return ({kernel: cupy function}, seconds)."""
        t0 = time.perf_counter()
        funcs = self._build(source, self.options, kernels)
        return funcs, time.perf_counter() - t0


_TORCH_DTYPES = {
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float64": "float64",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "bool": "bool",
}


def torch_dtype(torch, name: str):
    if name not in _TORCH_DTYPES:
        raise CandidateError(f"unsupported dtype {name!r}")
    return getattr(torch, _TORCH_DTYPES[name])


def make_inputs(torch, params: list[dict], seed: int) -> list:
    """Seeded random inputs, NaN-filled outputs (so unwritten elements show up)."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(int(seed))
    tensors = []
    for p in params:
        dt = torch_dtype(torch, p["dtype"])
        shape = tuple(int(s) for s in p["shape"])
        if p["role"] == "output":
            t = torch.empty(shape, dtype=dt, device="cuda")
            if dt.is_floating_point:
                t.fill_(float("nan"))
        elif dt.is_floating_point:
            t = (torch.rand(shape, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1).to(dt)
        elif dt == torch.bool:
            t = torch.randint(0, 2, shape, generator=gen, device="cuda").to(dt)
        else:
            t = torch.randint(-4, 5, shape, generator=gen, device="cuda").to(dt)
        tensors.append(t)
    return tensors


def build_arguments(numpy, plans: list[dict], tensors: list, workspace: list) -> list[tuple]:
    """Kernel argument tuples: pointers as uint64 values, scalars as numpy scalars."""
    out = []
    for plan in plans:
        args = []
        for arg in plan["args"]:
            if arg[0] == "param":
                args.append(numpy.uint64(tensors[arg[1]].data_ptr()))
            elif arg[0] == "workspace":
                args.append(numpy.uint64(workspace[arg[1]].data_ptr()))
            else:
                args.append(numpy.dtype(arg[1]).type(arg[2]))
        out.append(tuple(args))
    return out


def context_alive(cupy, torch) -> bool:
    """Whether the CUDA context still works after an error."""
    try:
        cupy.cuda.runtime.deviceSynchronize()
        x = torch.ones(4, device="cuda")
        return float((x + 1).sum().item()) == 8.0
    except Exception:  # noqa: BLE001 - any failure means the context is gone
        return False


class ContextLost(RuntimeError):
    """The CUDA context is unusable; the process must stop."""


def run_once(funcs: dict, plans: list[dict], argsets: list[tuple]) -> None:
    for plan, args in zip(plans, argsets):
        funcs[plan["kernel"]](plan["grid"], plan["block"], args, shared_mem=plan["shared_mem"])


def time_candidate(cupy, funcs, plans, argsets, *, warmup, repeats, min_repeat_ms, slow_run_s):
    """Warm up, choose ``number``, then time ``repeats`` repeats with CUDA events."""
    for _ in range(max(1, warmup)):
        run_once(funcs, plans, argsets)
    cupy.cuda.runtime.deviceSynchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    run_once(funcs, plans, argsets)
    end.record()
    end.synchronize()
    one_s = cupy.cuda.get_elapsed_time(start, end) * 1e-3
    number = choose_number(one_s, min_repeat_ms)
    reps = repeats if one_s < slow_run_s else min(repeats, 3)
    times = []
    for _ in range(reps):
        start.record()
        for _ in range(number):
            run_once(funcs, plans, argsets)
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) * 1e-3 / number)
    return times, number


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_results(results: dict, path: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=1)
    os.replace(tmp, path)


def load_previous(path: str, sha: str) -> dict:
    """Records of an earlier run on the same bundle, keyed by (workload, index)."""
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as fh:
        old = json.load(fh)
    if old.get("bundle_sha256") != sha:
        raise BundleError(f"{path}: --resume given, but these results are for another bundle")
    done = {}
    for wl in old.get("workloads", []):
        for rec in wl.get("candidates", []):
            if rec.get("status") != "skipped":
                done[(wl["name"], rec["index"])] = rec
    return done


def measure(args, bundle: dict, cupy, torch) -> int:
    """Compile, check and time every candidate; write results; return an exit status."""
    import numpy

    t_start = time.monotonic()
    sha = file_sha256(args.bundle)
    previous = load_previous(args.output, sha) if args.resume else {}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    compiler = Compiler(cupy)
    compiler.probe()
    results = {
        "format": RESULTS_FORMAT,
        "version": RESULTS_VERSION,
        "bundle": os.path.basename(args.bundle),
        "bundle_sha256": sha,
        "bundle_tvm_version": bundle.get("tvm_version"),
        "target": bundle.get("target"),
        "device": gpu_environment(cupy, torch),
        "nvrtc": {"options": list(compiler.options), "include_dirs": compiler.include_dirs,
                  "probe_errors": compiler.probe_errors},
        "settings": {
            "repeats": args.repeats,
            "warmup": args.warmup,
            "min_repeat_ms": args.min_repeat_ms,
            "check": args.check,
            "rtol": args.rtol,
            "atol": args.atol,
            "seed": args.seed,
            "time_budget_s": args.time_budget_s,
        },
        "started_at": _now(),
        "complete": False,
        "stop_reason": None,
        "workloads": [],
    }
    ops = TorchOps(torch)
    last_write = time.monotonic()
    slowest_s = 1.0
    out_of_time = False
    status = EXIT_OK
    for wi, wl in enumerate(bundle["workloads"]):
        wres = {"name": wl["name"], "reference": (wl.get("reference") or {}).get("op"),
                "reference_error": None, "candidates": []}
        results["workloads"].append(wres)
        todo = [c for c in wl["candidates"] if (wl["name"], c["index"]) not in previous]
        for c in wl["candidates"]:
            if (wl["name"], c["index"]) in previous:
                wres["candidates"].append(previous[(wl["name"], c["index"])])
        if not todo:
            continue
        elapsed = time.monotonic() - t_start
        if out_of_time or elapsed > args.time_budget_s - 2 * slowest_s:
            out_of_time = True
            for c in todo:
                wres["candidates"].append(failure_record(c["index"], "skipped", "time budget", origin=c.get("origin")))
            continue
        tensors = make_inputs(torch, wl["params"], args.seed + wi)
        inputs = [t for t, p in zip(tensors, wl["params"]) if p["role"] == "input"]
        outputs = [(i, t) for i, (t, p) in enumerate(zip(tensors, wl["params"])) if p["role"] == "output"]
        expected = None
        if wl.get("reference") and args.check > 0:
            try:
                with torch.no_grad():
                    expected = reference_outputs(ops, wl["reference"], [x.double() for x in inputs])
                if len(expected) != len(outputs):
                    raise CandidateError(f"reference gives {len(expected)} outputs, workload has {len(outputs)}")
            except Exception as err:  # noqa: BLE001 - record and time without checks
                expected = None
                wres["reference_error"] = f"{type(err).__name__}: {err}"
        # Compile the whole pool in parallel before timing anything.
        plans, compiled = {}, {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.compile_workers) as pool:
            futures = {}
            for c in todo:
                try:
                    plans[c["index"]] = plan_launches(c)
                except CandidateError as err:
                    plans[c["index"]] = err
                    continue
                kernels = sorted({p["kernel"] for p in plans[c["index"]]})
                futures[c["index"]] = pool.submit(compiler.compile, c["source"], kernels)
            for idx, fut in futures.items():
                try:
                    compiled[idx] = fut.result()
                except Exception as err:  # noqa: BLE001 - NVRTC/driver errors vary
                    compiled[idx] = err
        checked = 0
        bar = _bar(todo, wl["name"], args.progress)
        for c in bar:
            idx = c["index"]
            elapsed = time.monotonic() - t_start
            if out_of_time or elapsed > args.time_budget_s - 2 * slowest_s:
                out_of_time = True
                wres["candidates"].append(failure_record(idx, "skipped", "time budget", origin=c.get("origin")))
                continue
            t_cand = time.monotonic()
            plan = plans[idx]
            if isinstance(plan, CandidateError):
                wres["candidates"].append(failure_record(idx, "unsupported", plan, origin=c.get("origin")))
                continue
            if isinstance(compiled[idx], Exception):
                err = compiled[idx]
                wres["candidates"].append(
                    failure_record(idx, "compile_error", f"{type(err).__name__}: {err}", origin=c.get("origin"))
                )
                continue
            funcs, compile_s = compiled[idx]
            rec = {"index": idx, "origin": c.get("origin"), "status": "ok", "error": None,
                   "compile_s": compile_s, "check": None}
            try:
                workspace = [
                    torch.empty(tuple(w["shape"]), dtype=torch_dtype(torch, w["dtype"]), device="cuda")
                    for w in c["workspace"]
                ]
                for pl in plan:
                    if pl["shared_mem"] > 48 * 1024:
                        funcs[pl["kernel"]].max_dynamic_shared_size_bytes = pl["shared_mem"]
                argsets = build_arguments(numpy, plan, tensors, workspace)
                if expected is not None and checked < args.check:
                    checked += 1
                    for _, t in outputs:
                        if t.dtype.is_floating_point:
                            t.fill_(float("nan"))
                    run_once(funcs, plan, argsets)
                    cupy.cuda.runtime.deviceSynchronize()
                    errs, refs = [], []
                    for (_, t), ref in zip(outputs, expected):
                        diff = (t.double() - ref).abs()
                        errs.append(float(diff.max().item()) if not bool(diff.isnan().any()) else float("inf"))
                        refs.append(float(ref.abs().max().item()))
                    passed = all(check_passed(e, r, args.rtol, args.atol) for e, r in zip(errs, refs))
                    rec["check"] = {"max_abs_err": max(errs), "max_abs_ref": max(refs), "passed": passed,
                                    "rtol": args.rtol, "atol": args.atol}
                    if not passed:
                        rec["status"] = "mismatch"
                        rec["error"] = f"output differs from the reference by {max(errs):.3g}"
                times, number = time_candidate(
                    cupy, funcs, plan, argsets, warmup=args.warmup, repeats=args.repeats,
                    min_repeat_ms=args.min_repeat_ms, slow_run_s=args.slow_run_s,
                )
                rec.update({"times_s": times, "number": number, **summarize_times(times)})
            except Exception as err:  # noqa: BLE001 - launch errors come in many types
                rec.update({"status": "launch_error", "error": f"{type(err).__name__}: {err}", "times_s": []})
                if not context_alive(cupy, torch):
                    rec["context_lost"] = True
                    wres["candidates"].append(rec)
                    results["stop_reason"] = (
                        f"CUDA context lost at {wl['name']} candidate {idx}; rerun with --resume"
                    )
                    status = EXIT_CONTEXT_LOST
                    break
            wres["candidates"].append(rec)
            slowest_s = max(slowest_s, time.monotonic() - t_cand)
            if time.monotonic() - last_write > 15:
                write_results(results, args.output)
                last_write = time.monotonic()
        if status == EXIT_CONTEXT_LOST:
            break
        del tensors, inputs, outputs, expected
        torch.cuda.empty_cache()
    if out_of_time and results["stop_reason"] is None:
        results["stop_reason"] = "time budget reached; rerun with --resume to time the skipped candidates"
    results["complete"] = status == EXIT_OK and not out_of_time
    results["finished_at"] = _now()
    results["wall_s"] = time.monotonic() - t_start
    results["counts"] = count_statuses(results)
    write_results(results, args.output)
    print(f"gpu_timer: wrote {args.output}: {json.dumps(results['counts'])}", file=sys.stderr)
    return status


def count_statuses(results: dict) -> dict:
    counts: dict = {}
    for wl in results["workloads"]:
        for rec in wl["candidates"]:
            counts[rec["status"]] = counts.get(rec["status"], 0) + 1
    return counts


def _bar(items, desc, enabled):
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=desc, file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bundle", help="bundle JSON from `tvm-latmodel gpu-bundle`")
    p.add_argument("-o", "--output", required=True, help="results JSON to write")
    p.add_argument("--repeats", type=int, default=20, help="timed repeats per candidate (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    p.add_argument("--min-repeat-ms", type=float, default=1.0, help="shortest repeat, ms (default 1)")
    p.add_argument("--slow-run-s", type=float, default=0.25,
                   help="a run slower than this gets 3 repeats only (default 0.25 s)")
    p.add_argument("--time-budget-s", type=float, default=450.0,
                   help="stop starting candidates after this many seconds (default 450)")
    p.add_argument("--check", type=int, default=3,
                   help="check up to K candidates per workload against the reference (default 3)")
    p.add_argument("--rtol", type=float, default=DEFAULT_RTOL)
    p.add_argument("--atol", type=float, default=DEFAULT_ATOL)
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--compile-workers", type=int, default=min(16, os.cpu_count() or 1))
    p.add_argument("--resume", action="store_true",
                   help="keep the records in -o from an earlier run of this bundle; time the rest")
    p.add_argument("--progress", action="store_true", help="progress bars on stderr (needs tqdm)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("repeats", "warmup", "check", "compile_workers"):
        if getattr(args, name) < 0 or (name in ("repeats", "compile_workers") and getattr(args, name) < 1):
            print(f"gpu_timer: error: --{name.replace('_', '-')} must be positive", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        bundle = load_bundle(args.bundle)
    except BundleError as err:
        print(f"gpu_timer: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    n_cand = sum(len(w["candidates"]) for w in bundle["workloads"])
    print(f"gpu_timer: {args.bundle}: {len(bundle['workloads'])} workloads, {n_cand} candidates",
          file=sys.stderr)
    try:
        cupy, torch = import_gpu_libraries()
        return measure(args, bundle, cupy, torch)
    except GpuUnavailable as err:
        print(f"gpu_timer: error: cannot run on a GPU here: {err}", file=sys.stderr)
        return EXIT_NO_GPU
    except BundleError as err:
        print(f"gpu_timer: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
