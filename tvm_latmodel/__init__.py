"""tvm-latmodel: a hybrid latency model for TVM MetaSchedule.

An analytical model whose terms name the non-linear modes of kernel latency
(parallel-wave quantization, tile and vector quantization, compute-versus-
memory regime, cache-capacity cliffs), times a learned XGBoost residual.
"""

__version__ = "0.1.0"


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
