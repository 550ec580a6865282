"""tvm-latmodel: a hybrid latency model for TVM MetaSchedule.

An analytical model whose terms name the non-linear modes of kernel latency
(parallel-wave quantization, tile and vector quantization, compute-versus-
memory regime, cache-capacity cliffs), times a learned XGBoost residual.
"""

__version__ = "0.1.0"

# The public API, imported on first use so that ``import tvm_latmodel`` stays
# cheap (MetaSchedule's builder and runner workers import it).
_PUBLIC = {
    "HybridCostModel": "tvm_latmodel.model.cost_model",
    "ResidualModel": "tvm_latmodel.model.residual",
    "make_model": "tvm_latmodel.model.registry",
    "MODEL_NAMES": "tvm_latmodel.model.registry",
    "summarize": "tvm_latmodel.model.program",
    "estimate": "tvm_latmodel.model.modes",
    "HardwareSpec": "tvm_latmodel.hardware",
    "load_hardware": "tvm_latmodel.hardware",
    "load_tasks": "tvm_latmodel.replay",
    "ReplayEvaluator": "tvm_latmodel.replay",
    "simulate_search": "tvm_latmodel.replay",
    "tune_workload": "tvm_latmodel.tuning",
    "get_workload": "tvm_latmodel.workloads",
    "list_workloads": "tvm_latmodel.workloads",
    "sample_schedules": "tvm_latmodel.sampling",
    "host_target": "tvm_latmodel.targets",
    "valid_latency": "tvm_latmodel.latency",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    if name in _PUBLIC:
        import importlib

        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tvm_latmodel' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))


def _speed_up_tvm_script_parsing() -> None:
    """Make the first ``ms.TuneContext`` of a process ~4x cheaper to build.

    It imports ``tvm.s_tir.tensor_intrin``, whose ~500 ``T.prim_func``
    decorators each call ``inspect.getmodule`` on every frame of the stack.
    For importlib's frozen frames (``<frozen importlib._bootstrap>``)
    ``inspect`` finds no module in its file cache and rescans all of
    ``sys.modules`` each time: 56 s of CPU here, 15 s once the cache names
    them (measured on this project's 2-core machine). The entries we add are
    the true modules of those frames, so nothing else changes.
    """
    import inspect

    for name in ("importlib._bootstrap", "importlib._bootstrap_external"):
        inspect.modulesbyfile.setdefault(f"<frozen {name}>", name)


_speed_up_tvm_script_parsing()
