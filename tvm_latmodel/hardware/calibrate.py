"""Calibrate a CPU :class:`~tvm_latmodel.hardware.HardwareSpec` by timing TVM-built kernels.

:meth:`HardwareSpec.from_target` guesses bandwidths and peak FLOP/s from the
host's cache sizes and a nominal frequency. :func:`calibrate_host` replaces
the guesses with measurements on this machine, using three small kernels
that TVM builds for the host target and times with ``time_evaluator``:

``stream``
    A parallel, vectorized sum over a per-core block of floats, repeated
    ``repeats`` times so that one run lasts a few milliseconds. Each core
    keeps ``unroll`` independent vector accumulators in registers, so the
    loads (not the add latency) bound it. Run once per memory level with a
    working set well inside that level (far beyond the last cache for DRAM)::

        bandwidth_gbps = cores * block_bytes * repeats / time_s / 1e9

``fma``
    A register-blocked matmul micro-kernel per core (``rows`` x ``2 * lanes``
    accumulators, operands in L1) repeated many times::

        peak_gflops = 2 * cores * repeats * depth * rows * cols / time_s / 1e9

    Both also run on one core alone (the same per-core work), which gives
    ``single_core_bandwidth_gbps`` per level and ``single_core_peak_gflops``:
    how the machine scales from one core to all of them.

``launch``
    An (almost) empty parallel kernel, one element per core; its time is the
    fixed cost of a packed call plus a parallel region, ``launch_overhead_s``.

``libm``
    ``B[i] = exp(A[i])`` on one core, vectorized as TVM would: LLVM emits one
    scalar ``expf`` call per element. Its time per element, in cycles of the
    clock the single-core peak implies (``peak / (2 * fma_pipes * lanes)``,
    the clock the model converts with), is ``libm_call_cycles``.

The cache sizes and vector width stay those of :meth:`HardwareSpec.from_target`;
the raw timings go into ``spec.extra["calibration"]``. :func:`calibrate_host`
only calibrates an LLVM target whose ``mcpu`` is this machine's CPU;
:func:`calibrate_remote` times the same kernels on a board through an RPC
session (``tvm-latmodel calibrate --rpc HOST:PORT:KEY``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
import warnings

import numpy as np

from .spec import LIBM_CALL_CYCLES_RANGE, HardwareSpec, MemoryLevel

__all__ = ["calibrate_host", "calibrate_remote", "check_host_target", "enforce_monotonic_bandwidth", "CalibrationWarning"]

#: Independent vector accumulators per core in the stream kernel.
_STREAM_UNROLL = 8
#: Rows of the FMA micro-kernel (its columns are two vectors): 12 accumulators
#: hide a 4-cycle FMA latency on two pipes and fit 16 vector registers.
_FMA_ROWS = 6
_FMA_COL_VECTORS = 2
#: Depth of the FMA micro-kernel's operands: (rows + cols) * depth floats stay in L1.
_FMA_DEPTH = 64
#: Smallest working set for the DRAM measurement, and its multiple of the last cache.
_DRAM_MIN_BYTES = {False: 256 * 1024**2, True: 64 * 1024**2}
_DRAM_LLC_MULTIPLE = {False: 8, True: 4}
#: Seconds one kernel run should last (so the launch overhead is negligible),
#: milliseconds of runs per timed repeat, and timed repeats (the best is kept).
_RUN_S = {False: 4e-3, True: 2e-3}
# Elements of the libm kernel: about 40 us a run at 2.4 ns each (expf, Zen 3).
_LIBM_POINTS = 16384
_MIN_REPEAT_MS = {False: 100, True: 25}
_REPEATS = {False: 5, True: 3}


class CalibrationWarning(UserWarning):
    """A measurement that contradicts the memory hierarchy (and was corrected)."""


def check_host_target(target=None):
    """Return ``target`` as a Target if it is an LLVM target for this machine's CPU.

    Parameters
    ----------
    target : tvm.target.Target, dict, str or None
        ``None`` means :func:`tvm_latmodel.targets.host_target`. A string is
        parsed by :func:`tvm_latmodel.targets.parse_target`.

    Raises
    ------
    ValueError
        If the target is not ``llvm``, or its ``mcpu`` is missing or is not
        the host CPU (the kernels would be timed on the wrong machine).
    """
    import tvm

    from ..targets import host_target, parse_target

    if target is None:
        return host_target()
    if isinstance(target, str):
        target = parse_target(target)
    elif isinstance(target, dict):
        target = tvm.target.Target(target)
    kind = target.kind.name
    host_cpu = tvm.target.codegen.llvm_get_system_cpu()
    if kind != "llvm":
        raise ValueError(
            f"cannot calibrate a {kind!r} target: calibration times kernels on this "
            f"machine's CPU, so only an LLVM target with mcpu={host_cpu!r} can be "
            "calibrated (for a GPU use a preset or write a spec JSON)"
        )
    mcpu = target.attrs.get("mcpu")
    mcpu = str(mcpu) if mcpu is not None else ""
    if mcpu != host_cpu:
        raise ValueError(
            f"cannot calibrate LLVM target with mcpu={mcpu or '<none>'!r}: this machine's "
            f"CPU is {host_cpu!r}; give --target host (or mcpu={host_cpu!r})"
        )
    return target


# --------------------------------------------------------------------- kernels
def _stream_func(cores: int, chunks: int, unroll: int, lanes: int, repeats: int, used: int | None = None):
    """``B[p, u, v] = sum_{r, c} A[p, c, u, v]``: per-core streaming reads,
    on the first ``used`` cores' blocks of ``A`` (default all; the one-core
    run reads the first block of the same array)."""
    import tvm
    from tvm import te

    used = cores if used is None else used
    a = te.placeholder((cores, chunks, unroll, lanes), "float32", name="A")
    r = te.reduce_axis((0, repeats), "r")
    c = te.reduce_axis((0, chunks), "c")
    b = te.compute((used, unroll, lanes), lambda p, u, v: te.sum(a[p, c, u, v], axis=[r, c]), name="B")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b])}))
    block = sch.get_sblock("B")
    p, u, v, rr, cc = sch.get_loops(block)
    sch.reorder(p, rr, cc, u, v)
    _accumulate_in_registers(sch, block, p, rr, unroll=[u], vector=v)
    return sch.mod["main"]


def _fill_func(cores: int, chunks: int, unroll: int, lanes: int):
    """``A[p, c, u, v] = 1``, each core writing its own block: the stream
    kernels' input, touched in place (copying a host array in doubled the
    memory and took most of a quick calibration with a large last cache)."""
    import tvm
    from tvm import te

    a = te.compute((cores, chunks, unroll, lanes), lambda p, c, u, v: te.const(1.0, "float32"), name="A")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a])}))
    p, _, _, v = sch.get_loops(sch.get_sblock("A"))
    sch.parallel(p)
    sch.vectorize(v)
    return sch.mod["main"]


def _fma_func(cores: int, depth: int, rows: int, lanes: int, repeats: int):
    """``C[p, i, j] = sum_{r, k} A[p, k, i] * B[p, k, j]``: a register-blocked micro-kernel."""
    import tvm
    from tvm import te

    cols = _FMA_COL_VECTORS * lanes
    a = te.placeholder((cores, depth, rows), "float32", name="A")
    b = te.placeholder((cores, depth, cols), "float32", name="B")
    r = te.reduce_axis((0, repeats), "r")
    k = te.reduce_axis((0, depth), "k")
    c = te.compute((cores, rows, cols), lambda p, i, j: te.sum(a[p, k, i] * b[p, k, j], axis=[r, k]), name="C")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b, c])}))
    block = sch.get_sblock("C")
    p, i, j, rr, kk = sch.get_loops(block)
    jo, ji = sch.split(j, [None, lanes])
    sch.reorder(p, rr, kk, i, jo, ji)
    _accumulate_in_registers(sch, block, p, rr, unroll=[i, jo], vector=ji)
    return sch.mod["main"]


def _accumulate_in_registers(sch, block, parallel_loop, reduce_loop, *, unroll, vector) -> None:
    """Parallel outer loop; accumulate in a local buffer indexed only by
    unrolled and vectorized loops (so LLVM keeps it in vector registers),
    initialized before ``reduce_loop`` and written back once per core."""
    write_back = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(write_back, parallel_loop)
    sch.parallel(parallel_loop)
    for loop in unroll:
        sch.unroll(loop)
    sch.vectorize(vector)
    wb_loops = sch.get_loops(write_back)
    sch.vectorize(wb_loops[-1])
    sch.decompose_reduction(block, reduce_loop)


def _launch_func(cores: int):
    """``B[p] = A[p] + 1`` for one element per core: a nearly empty parallel region."""
    import tvm
    from tvm import te

    a = te.placeholder((cores,), "float32", name="A")
    b = te.compute((cores,), lambda p: a[p] + 1.0, name="B")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b])}))
    (p,) = sch.get_loops(sch.get_sblock("B"))
    sch.parallel(p)
    return sch.mod["main"]


def elementwise_func(points: int, lanes: int, fn=None):
    """``B[i] = fn(A[i])`` (default ``exp``: one scalar libm call per element),
    vectorized by ``lanes`` as TVM would. ``scripts/check_libm_calls.py``
    builds its kernels with it too."""
    import tvm
    from tvm import te

    fn = fn or te.exp
    a = te.placeholder((points,), "float32", name="A")
    b = te.compute((points,), lambda i: fn(a[i]), name="B")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b])}))
    (i,) = sch.get_loops(sch.get_sblock("B"))
    _, inner = sch.split(i, [None, lanes])
    sch.vectorize(inner)
    return sch.mod["main"]


def enforce_monotonic_bandwidth(names, bandwidths_gbps) -> tuple[list[float], list[str]]:
    """Make bandwidths non-increasing from the fastest level to DRAM.

    A larger (slower) level cannot really stream faster than a smaller one;
    when one measures faster, the smaller level takes the larger one's value
    (the running maximum of the levels below it).

    Parameters
    ----------
    names : sequence of str
        Level names, fastest first.
    bandwidths_gbps : sequence of float
        Measured bandwidths in the same order.

    Returns
    -------
    corrected : list of float
    messages : list of str
        One line per corrected level.
    """
    corrected = [float(x) for x in bandwidths_gbps]
    messages = []
    for i in range(len(corrected) - 2, -1, -1):
        if corrected[i + 1] > corrected[i]:
            messages.append(
                f"{names[i + 1]} measured faster than {names[i]} "
                f"({corrected[i + 1]:.1f} > {corrected[i]:.1f} GB/s); "
                f"using {corrected[i + 1]:.1f} GB/s for {names[i]}"
            )
            corrected[i] = corrected[i + 1]
    return corrected, messages


# ---------------------------------------------------------------------- timing
def _best_time_s(rt_mod, name: str, dev, args, *, quick: bool) -> tuple[float, list[float]]:
    """Best (minimum) mean time of one run over the timed repeats, and all of them."""
    evaluator = rt_mod.time_evaluator(
        name, dev, number=1, repeat=_REPEATS[quick], min_repeat_ms=_MIN_REPEAT_MS[quick]
    )
    times = [float(t) for t in evaluator(*args).results]
    return min(times), times


def _working_sets(default: HardwareSpec, quick: bool) -> list[tuple[MemoryLevel, int]]:
    """Per-core working set (bytes) for each memory level of ``default``.

    Private caches: half of one core's share. Shared caches: a quarter of
    each core's share (other tenants and the smaller levels also use it).
    DRAM: the whole set is a multiple of the last cache and at least 64-256 MiB.
    """
    cores = default.parallel_units
    out = []
    caches = [m for m in default.memory[:-1]]
    for level in caches:
        per_core = level.size_bytes / cores if level.shared else level.size_bytes
        out.append((level, int(per_core / (4 if level.shared else 2))))
    dram = default.memory[-1]
    llc_total = max((m.size_bytes if m.shared else m.size_bytes * cores) for m in caches) if caches else 0
    total = max(_DRAM_MIN_BYTES[quick], _DRAM_LLC_MULTIPLE[quick] * llc_total)
    out.append((dram, int(total / cores)))
    return out


def _load_average() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):  # not on every platform
        return None


def _progress(enabled: bool, message: str) -> None:
    if enabled:
        print(f"[calibrate] {message}", file=sys.stderr, flush=True)


def calibrate_host(target=None, *, quick: bool = False, progress: bool = True) -> HardwareSpec:
    """Measure this machine's CPU and return a calibrated :class:`HardwareSpec`.

    Parameters
    ----------
    target : tvm.target.Target, dict, str or None
        An LLVM target whose ``mcpu`` is this machine's CPU (``None``: the host
        target). Its ``num-cores`` sets how many cores the kernels use.
    quick : bool
        Shorter timings and a smaller DRAM working set (a few seconds in all);
        noisier numbers.
    progress : bool
        Print one line per measurement on stderr.

    Returns
    -------
    HardwareSpec
        The spec of :meth:`HardwareSpec.from_target` with every memory level's
        ``bandwidth_gbps``, ``peak_gflops`` and ``launch_overhead_s`` measured,
        ``source="calibrated"``, and the raw measurements (working sets,
        repeats, per-repeat times, uncorrected bandwidths, warnings) in
        ``extra["calibration"]``.

    Raises
    ------
    ValueError
        If the target is not an LLVM target for this machine's CPU.

    Warns
    -----
    CalibrationWarning
        When a larger memory level measures faster than a smaller one; the
        smaller level then takes the larger one's bandwidth.
    """
    target = check_host_target(target)

    def load(lib):
        import tvm

        return lib.jit(), tvm.cpu(0)

    return _calibrate(target, load, quick=quick, progress=progress, local=True, extra_raw={})


def calibrate_remote(session, target=None, *, quick: bool = False, progress: bool = True,
                     board: str = "") -> HardwareSpec:
    """Measure the board at the other end of an RPC session; return its calibrated :class:`HardwareSpec`.

    The same kernels as :func:`calibrate_host` are built here for ``target``,
    exported as a ``.tar`` of object files (the board links it, as it does
    MetaSchedule's candidates, so it needs a C compiler), uploaded, loaded with
    ``session.load_module`` and timed with ``time_evaluator`` on
    ``session.cpu(0)``. The stream inputs are filled on the board by a kernel
    (the DRAM working set is at least 64 MiB with ``quick``, else 256 MiB);
    only the small FMA and libm inputs travel, and only the timings come back.

    Parameters
    ----------
    session : tvm.rpc.RPCSession
        A session on the board, e.g. from :func:`tvm_latmodel.rpc.request_session`
        (or ``tvm.rpc.connect_tracker(host, port).request(key)``). It must
        last the whole calibration (well under a minute with ``quick``).
    target : tvm.target.Target, dict, str or None
        An LLVM target for the board's CPU (``None``: this machine's host
        target, right when the boards are machines like this one). Its
        ``num-cores`` sets how many cores the kernels use; cache sizes come
        from the host when ``mcpu`` is this machine's CPU, else from
        :meth:`HardwareSpec.from_target`'s common defaults.
    quick, progress
        As for :func:`calibrate_host`.
    board : str
        A name for the board, kept in ``extra["calibration"]["board"]``.

    Raises
    ------
    ValueError
        The target is not an LLVM CPU target.
    """
    import tempfile

    import tvm

    from ..targets import host_target, parse_target

    if target is None:
        target = host_target()
    elif isinstance(target, str):
        target = parse_target(target)
    elif isinstance(target, dict):
        target = tvm.target.Target(target)
    if target.kind.name != "llvm":
        raise ValueError(f"cannot calibrate a {target.kind.name!r} board: calibration times CPU kernels, "
                         "so give an LLVM target JSON for the board's CPU")

    with tempfile.TemporaryDirectory(prefix="tvm-latmodel-calibrate-") as tmp:

        def load(lib):
            from tvm.support.tar import tar

            path = os.path.join(tmp, "calibrate.tar")
            lib.export_library(path, fcompile=tar)
            _progress(progress, f"uploading {os.path.getsize(path) / 1024:.0f} KiB of kernels; the board links them")
            session.upload(path, "calibrate.tar")
            return session.load_module("calibrate.tar"), session.cpu(0)

        return _calibrate(target, load, quick=quick, progress=progress, local=False,
                          extra_raw={"board": board, "target": str(target)})


def _calibrate(target, load, *, quick: bool, progress: bool, local: bool, extra_raw: dict) -> HardwareSpec:
    """Build the kernels for ``target``, ``load(lib) -> (module, device)`` them, time them."""
    import tvm

    start = time.perf_counter()
    default = HardwareSpec.from_target(target)
    cores = default.parallel_units
    lanes = default.lanes(32)

    # ---- build every kernel in one module (one compile)
    funcs = {}
    stream_plan = []
    for level, per_core_bytes in _working_sets(default, quick):
        step = _STREAM_UNROLL * lanes
        chunks = max(1, per_core_bytes // (4 * step))
        block_bytes = chunks * step * 4
        # Size the repeats for a run of _RUN_S even if the level is 2x faster than guessed.
        guess_bytes_per_s = 2.0 * level.bandwidth_gbps * 1e9
        repeats = max(1, math.ceil(_RUN_S[quick] * guess_bytes_per_s / (cores * block_bytes)))
        name = f"stream_{level.name.lower()}"
        funcs[name] = _stream_func(cores, chunks, _STREAM_UNROLL, lanes, repeats)
        funcs["fill_" + name] = _fill_func(cores, chunks, _STREAM_UNROLL, lanes)
        # The same per-core working set on one core alone: parallel scaling.
        single_repeats = max(1, math.ceil(_RUN_S[quick] * guess_bytes_per_s / cores / block_bytes))
        funcs[name + "_1core"] = _stream_func(cores, chunks, _STREAM_UNROLL, lanes, single_repeats, used=1)
        stream_plan.append((level, name, chunks, block_bytes, repeats, single_repeats))
    cols = _FMA_COL_VECTORS * lanes
    flops_per_repeat = 2.0 * cores * _FMA_DEPTH * _FMA_ROWS * cols
    fma_repeats = max(1, math.ceil(_RUN_S[quick] * 2.0 * default.peak_gflops * 1e9 / flops_per_repeat))
    funcs["fma"] = _fma_func(cores, _FMA_DEPTH, _FMA_ROWS, lanes, fma_repeats)
    funcs["fma_1core"] = _fma_func(1, _FMA_DEPTH, _FMA_ROWS, lanes, fma_repeats)
    funcs["launch"] = _launch_func(cores)
    funcs["libm"] = elementwise_func(_LIBM_POINTS, lanes)
    mod = tvm.IRModule({name: f.with_attr("global_symbol", name) for name, f in funcs.items()})
    _progress(progress, f"building {len(funcs)} kernels for {target.attrs.get('mcpu')} x{cores}")
    rt_mod, dev = load(tvm.compile(mod, target=target))

    raw: dict = {"quick": bool(quick), "cores": cores, "lanes": lanes, "levels": {}}
    raw.update(extra_raw)
    warn_messages: list[str] = []
    load_1min = _load_average() if local else None
    raw["load_average_1min"] = load_1min
    if load_1min is not None and load_1min > 0.5 * cores:
        _progress(progress, f"note: load average {load_1min:.1f} on {cores} cores; "
                            "other work will make the numbers low (calibrate on an idle machine)")

    # ---- launch overhead first (the thread pool is started by the first call)
    a = tvm.runtime.tensor(np.ones(cores, dtype="float32"), dev)
    b = tvm.runtime.empty((cores,), "float32", dev)
    launch_s, launch_times = _best_time_s(rt_mod, "launch", dev, (a, b), quick=quick)
    raw["launch"] = {"times_s": launch_times, "launch_overhead_s": launch_s}
    _progress(progress, f"launch overhead: {launch_s * 1e6:.2f} us")

    # ---- streaming bandwidth per level
    measured_gbps, single_gbps = [], []
    for level, name, chunks, block_bytes, repeats, single_repeats in stream_plan:
        a = tvm.runtime.empty((cores, chunks, _STREAM_UNROLL, lanes), "float32", dev)
        rt_mod["fill_" + name](a)  # in place, on the device (no host copy, nothing sent through RPC)
        b = tvm.runtime.empty((cores, _STREAM_UNROLL, lanes), "float32", dev)
        b1 = tvm.runtime.empty((1, _STREAM_UNROLL, lanes), "float32", dev)
        best_s, times = _best_time_s(rt_mod, name, dev, (a, b), quick=quick)
        best1_s, times1 = _best_time_s(rt_mod, name + "_1core", dev, (a, b1), quick=quick)
        del a
        gbps = cores * block_bytes * repeats / best_s / 1e9
        gbps1 = block_bytes * single_repeats / best1_s / 1e9
        measured_gbps.append(gbps)
        single_gbps.append(gbps1)
        raw["levels"][level.name] = {
            "working_set_bytes_per_core": block_bytes,
            "working_set_bytes": cores * block_bytes,
            "repeats": repeats,
            "times_s": times,
            "bandwidth_gbps": gbps,
            "single_core": {"repeats": single_repeats, "times_s": times1, "bandwidth_gbps": gbps1},
        }
        _progress(
            progress,
            f"{level.name:>4} bandwidth: {gbps:8.1f} GB/s, one core alone {gbps1:7.1f} GB/s "
            f"(working set {cores * block_bytes / 1024:.0f} KiB, run {best_s * 1e3:.2f} ms)",
        )

    # ---- peak FLOP/s
    a = tvm.runtime.tensor(np.full((cores, _FMA_DEPTH, _FMA_ROWS), 0.5, dtype="float32"), dev)
    b = tvm.runtime.tensor(np.full((cores, _FMA_DEPTH, cols), 0.5, dtype="float32"), dev)
    c = tvm.runtime.empty((cores, _FMA_ROWS, cols), "float32", dev)
    fma_s, fma_times = _best_time_s(rt_mod, "fma", dev, (a, b, c), quick=quick)
    peak_gflops = flops_per_repeat * fma_repeats / fma_s / 1e9
    a1 = tvm.runtime.tensor(np.full((1, _FMA_DEPTH, _FMA_ROWS), 0.5, dtype="float32"), dev)
    b1 = tvm.runtime.tensor(np.full((1, _FMA_DEPTH, cols), 0.5, dtype="float32"), dev)
    c1 = tvm.runtime.empty((1, _FMA_ROWS, cols), "float32", dev)
    fma1_s, fma1_times = _best_time_s(rt_mod, "fma_1core", dev, (a1, b1, c1), quick=quick)
    single_peak = flops_per_repeat / cores * fma_repeats / fma1_s / 1e9
    raw["fma"] = {"repeats": fma_repeats, "flops_per_repeat": flops_per_repeat,
                  "times_s": fma_times, "peak_gflops": peak_gflops,
                  "single_core": {"times_s": fma1_times, "peak_gflops": single_peak}}
    _progress(progress, f"peak: {peak_gflops:.1f} GFLOP/s, one core alone {single_peak:.1f} GFLOP/s")

    # ---- a larger level cannot be faster than a smaller one
    names = [level.name for level, *_ in stream_plan]
    corrected, messages = enforce_monotonic_bandwidth(names, measured_gbps)
    corrected_single, messages_single = enforce_monotonic_bandwidth(names, single_gbps)
    for msg in messages + [f"one core alone: {m}" for m in messages_single]:
        warn_messages.append(msg)
        warnings.warn(msg, CalibrationWarning, stacklevel=2)
    # Alone, a core gets at least its share and at most the whole level.
    corrected_single = [min(max(s1, bw / cores), bw) for s1, bw in zip(corrected_single, corrected)]
    single_peak = min(max(single_peak, peak_gflops / cores), peak_gflops)

    # ---- a scalar libm call per element (exp, log, erf, pow, tanh, sigmoid)
    x = tvm.runtime.tensor(np.full(_LIBM_POINTS, 0.5, dtype="float32"), dev)
    y = tvm.runtime.empty((_LIBM_POINTS,), "float32", dev)
    libm_s, libm_times = _best_time_s(rt_mod, "libm", dev, (x, y), quick=quick)
    core_hz = dataclasses.replace(default, peak_gflops=float(peak_gflops),
                                  single_core_peak_gflops=float(single_peak)).core_clock_hz(1)
    low, high = LIBM_CALL_CYCLES_RANGE
    libm_cycles = min(max(libm_s / _LIBM_POINTS * core_hz, low), high)
    raw["libm"] = {"points": _LIBM_POINTS, "times_s": libm_times, "core_hz": core_hz,
                   "libm_call_cycles": libm_cycles}
    _progress(progress, f"libm call (expf): {libm_s / _LIBM_POINTS * 1e9:.2f} ns per element, "
                        f"{libm_cycles:.1f} cycles")
    raw["warnings"] = warn_messages
    raw["duration_s"] = time.perf_counter() - start
    raw["defaults"] = {
        "peak_gflops": default.peak_gflops,
        "launch_overhead_s": default.launch_overhead_s,
        "bandwidth_gbps": {m.name: m.bandwidth_gbps for m in default.memory},
    }
    _progress(progress, f"done in {raw['duration_s']:.1f} s")

    memory = tuple(dataclasses.replace(level, bandwidth_gbps=float(gbps), single_core_bandwidth_gbps=float(gbps1))
                   for level, gbps, gbps1 in zip(default.memory, corrected, corrected_single))
    return dataclasses.replace(
        default,
        peak_gflops=float(peak_gflops),
        single_core_peak_gflops=float(single_peak),
        memory=memory,
        launch_overhead_s=float(launch_s),
        libm_call_cycles=float(libm_cycles),
        source="calibrated",
        extra={**default.extra, "calibration": raw},
    )
