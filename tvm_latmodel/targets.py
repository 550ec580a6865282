"""Parse the targets users give on the command line.

TVM 0.27 only accepts targets in JSON-dict form; we accept that form as a
JSON string, a short name (``host``, ``llvm``, or a GPU preset name such as
``h200``), and give a clear error for anything else.
"""

from __future__ import annotations

import json

import psutil
import tvm

from .hardware import GPU_PRESETS


def host_target() -> tvm.target.Target:
    """The machine we run on, with its CPU named so LLVM uses its vector units."""
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    cores = psutil.cpu_count(logical=False) or 1
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": int(cores)})


def cuda_target(preset: str = "h200") -> tvm.target.Target:
    """A CUDA target for a GPU preset (``h200``, ``a100``, ...)."""
    key = preset.lower()
    if key not in GPU_PRESETS:
        raise ValueError(f"unknown GPU preset {preset!r}; known: {', '.join(sorted(GPU_PRESETS))}")
    spec = GPU_PRESETS[key]
    return tvm.target.Target(
        {
            "kind": "cuda",
            "arch": spec["arch"],
            "max_threads_per_block": 1024,
            # TVM declares shared memory statically, and CUDA allows 48 KiB of
            # static shared memory per block whatever the GPU (TVM's own tags say so).
            "max_shared_memory_per_block": 49152,
            "thread_warp_size": 32,
        }
    )


def parse_target(text: str | None) -> tvm.target.Target:
    """Turn a user's ``--target`` into a Target.

    Accepts ``None``/``host``/``llvm`` (this machine), a GPU preset name
    (``h200``, ``h100``, ``a100``, ``v100``, ``t4``, ``rtx4090``, ``orin``,
    or ``cuda`` for the H200), or a JSON dict as TVM 0.27 wants it.
    """
    if text is None or text in ("host", "llvm"):
        return host_target()
    key = text.strip().lower()
    if key == "cuda":
        return cuda_target("h200")
    if key in GPU_PRESETS:
        return cuda_target(key)
    if text.strip().startswith("{"):
        try:
            cfg = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"--target is not valid JSON: {err}") from None
        try:
            return tvm.target.Target(cfg)
        except Exception as err:  # TVM raises its own error types
            raise ValueError(f"TVM rejected target {text}: {err}") from None
    raise ValueError(
        f"unknown target {text!r}: give 'host', a GPU preset "
        f"({', '.join(sorted(GPU_PRESETS))}), or a JSON dict such as "
        '\'{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}\''
    )
