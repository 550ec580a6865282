"""HardwareSpec: what the analytical model needs to know about a machine.

A spec is plain, frozen data. It is built three ways:

* :meth:`HardwareSpec.from_target` for an LLVM CPU target (vector lanes from
  the target's ``mcpu`` features, cores from ``num-cores``, cache sizes read
  from the host when the target is the host) or a CUDA target (a GPU preset,
  chosen by ``arch`` or by name);
* :meth:`HardwareSpec.load` from a JSON file (what ``tvm-latmodel calibrate``
  writes);
* :func:`tvm_latmodel.calibrate.calibrate_host`, which times small TVM-built
  kernels on this machine.

Units ride in the names: ``*_bytes``, ``*_gbps`` (10^9 bytes per second),
``*_gflops`` (10^9 FLOP per second), ``*_s`` (seconds).
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
from dataclasses import dataclass, field
from importlib import resources

from .. import __version__
from ..fileformat import check_header, read_versioned_json

SPEC_FORMAT = "tvm-latmodel-hardware"
SPEC_FORMAT_VERSION = 1


def _load_presets() -> dict[str, dict]:
    out = {}
    folder = resources.files("tvm_latmodel.hardware") / "presets"
    for entry in folder.iterdir():
        if entry.name.endswith(".json"):
            data = json.loads(entry.read_text())
            out[data["key"]] = data
    return out


#: GPU presets by short name (``h200``, ``h100``, ``a100``, ``v100``, ``t4``,
#: ``rtx4090``, ``orin``): versioned JSON data with a source for each number.
GPU_PRESETS: dict[str, dict] = _load_presets()


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory hierarchy.

    Parameters
    ----------
    name : str
        ``L1``, ``L2``, ``L3``, ``DRAM`` (CPU) or ``shared``, ``L2``, ``DRAM`` (GPU).
    size_bytes : float
        Capacity. For a private level (``shared=False``) this is the capacity
        of one parallel unit's slot (one core's L1, one SM's shared memory);
        for a shared level it is the whole cache, split among the concurrent
        units when a footprint is compared with it.
    bandwidth_gbps : float
        Aggregate bandwidth of the whole machine streaming from this level
        with every parallel unit busy, in GB/s.
    shared : bool
        Whether all parallel units share the level.
    single_core_bandwidth_gbps : float
        What one parallel unit streams from this level when it runs alone,
        in GB/s (measured by ``calibrate``). ``0`` means
        ``bandwidth_gbps / parallel_units`` (no gain from running alone,
        which is exact for a private level).
    """

    name: str
    size_bytes: float
    bandwidth_gbps: float
    shared: bool = False
    single_core_bandwidth_gbps: float = 0.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"MemoryLevel.name must be a non-empty string, got {self.name!r}")
        where = f"memory level {self.name}"
        _check_real(f"{where}: size_bytes", self.size_bytes, *_SIZE_BYTES_RANGE)
        _check_real(f"{where}: bandwidth_gbps", self.bandwidth_gbps, *_RATE_RANGE)
        if not isinstance(self.shared, bool):
            raise ValueError(f"{where}: shared must be true or false, got {self.shared!r}")
        if self.single_core_bandwidth_gbps != 0:
            _check_real(f"{where}: single_core_bandwidth_gbps", self.single_core_bandwidth_gbps, *_RATE_RANGE)


# Ranges a value of a real machine falls in; anything outside is a typo or a
# corrupt file (and would make latencies overflow or vanish), so it is refused.
_SIZE_BYTES_RANGE = (1.0, 1e18)        # a byte .. an exabyte
_RATE_RANGE = (1e-3, 1e9)              # GB/s or GFLOP/s: a MB/s .. an exa-unit per second
_LAUNCH_OVERHEAD_RANGE_S = (0.0, 1.0)
#: Cycles per scalar libm call a spec may hold (``calibrate`` clamps its measurement to it).
LIBM_CALL_CYCLES_RANGE = (1.0, 1000.0)
_PARALLEL_UNITS_RANGE = (1, 10**7)
_VECTOR_BITS_RANGE = (8, 65536)
_GPU_LIMIT_RANGE = (0, 2**31 - 1)


def _check_real(name: str, value, low: float, high: float) -> None:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        try:
            ok = math.isfinite(float(value)) and low <= float(value) <= high
        except OverflowError:
            ok = False
    if not ok:
        raise ValueError(f"{name} must be a number in [{low:g}, {high:g}], got {value!r}")


def _check_int(name: str, value, low: int, high: int) -> None:
    if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and low <= value <= high):
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")


@dataclass(frozen=True)
class HardwareSpec:
    """A frozen description of one machine.

    Parameters
    ----------
    name : str
        Human-readable name.
    kind : {"cpu", "gpu"}
    parallel_units : int
        CPU cores, or GPU streaming multiprocessors.
    vector_bits : int
        CPU SIMD register width (128 SSE/NEON, 256 AVX2, 512 AVX-512); 32 x 32
        on a GPU (a warp of 32 FP32 lanes).
    peak_gflops : float
        Peak FP32 FLOP/s of the whole machine, in GFLOP/s.
    memory : tuple of MemoryLevel
        Fastest first; the last level is DRAM/HBM and must be large.
    launch_overhead_s : float
        Fixed cost of one kernel launch / parallel region.
    max_threads_per_sm, max_blocks_per_sm, registers_per_sm,
    shared_memory_per_sm_bytes, max_shared_memory_per_block_bytes : int
        GPU occupancy limits (zero on a CPU).
    source : str
        Where the numbers came from (``preset:h200``, ``host``, ``calibrated``, a file).
    vector_registers : int
        Architectural vector registers (CPU): 16 with SSE/AVX2, 32 with
        AVX-512 or on AArch64 (Intel SDM vol. 1 §15.1; Arm ARM). A register
        tile of accumulators beyond them spills.
    fma_latency_cycles, fma_pipes : int
        Vector FMA latency in cycles and FMA pipes per core (Agner Fog's
        instruction tables, by ``mcpu``): a reduction needs
        ``latency * pipes`` independent accumulators to keep the pipes full.
    add_pipes : int
        Pipes per core for a vector add, max or min. An add/max kernel's
        peak is ``add_pipes * lanes`` operations per cycle, against
        ``2 * fma_pipes * lanes`` FLOP for FMAs.
    vector_stores_per_cycle : int
        Vector stores per cycle per core: an accumulator kept in memory
        instead of a register costs a store per FMA.
    single_core_peak_gflops : float
        FP32 GFLOP/s of one core running alone (turbo), measured by
        ``calibrate``; ``0`` means ``peak_gflops / parallel_units``.
    libm_call_cycles : float
        Core cycles per element of a loop that calls ``expf``, which is how
        TVM's LLVM CPU codegen emits ``exp`` (one scalar libm call per
        element; ``log``, ``erf``, ``pow``, ``tanh`` and ``sigmoid`` cost their
        measured multiple of it, :data:`tvm_latmodel.model.indexing.LIBM_CALLS`).
        The default, 6, was measured on this project's Zen 3 with glibc 2.36,
        idle: 2.3–2.5 ns per element at 2.45 GHz (``scripts/check_libm_calls.py``);
        ``calibrate`` measures it on the machine at hand.
    """

    name: str
    kind: str
    parallel_units: int
    vector_bits: int
    peak_gflops: float
    memory: tuple[MemoryLevel, ...]
    launch_overhead_s: float
    max_threads_per_sm: int = 0
    max_blocks_per_sm: int = 0
    registers_per_sm: int = 0
    shared_memory_per_sm_bytes: int = 0
    max_shared_memory_per_block_bytes: int = 0
    source: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    vector_registers: int = 16
    fma_latency_cycles: int = 4
    fma_pipes: int = 2
    add_pipes: int = 2
    vector_stores_per_cycle: int = 1
    single_core_peak_gflops: float = 0.0
    libm_call_cycles: float = 6.0

    def __post_init__(self):
        # Every field is checked here, so a spec from code, a preset or a file
        # is either usable (finite numbers in a machine's range) or refused.
        if not isinstance(self.name, str):
            raise ValueError(f"HardwareSpec.name must be a string, got {self.name!r}")
        if self.kind not in ("cpu", "gpu"):
            raise ValueError(f"HardwareSpec.kind must be 'cpu' or 'gpu', got {self.kind!r}")
        _check_int("HardwareSpec.parallel_units", self.parallel_units, *_PARALLEL_UNITS_RANGE)
        _check_int("HardwareSpec.vector_bits", self.vector_bits, *_VECTOR_BITS_RANGE)
        _check_real("HardwareSpec.peak_gflops", self.peak_gflops, *_RATE_RANGE)
        if not isinstance(self.memory, tuple) or not self.memory:
            raise ValueError("HardwareSpec.memory needs at least one level (DRAM), as a tuple of MemoryLevel")
        for level in self.memory:
            if not isinstance(level, MemoryLevel):
                raise ValueError(f"HardwareSpec.memory holds {level!r}, not a MemoryLevel")
        _check_real("HardwareSpec.launch_overhead_s", self.launch_overhead_s, *_LAUNCH_OVERHEAD_RANGE_S)
        for name in ("max_threads_per_sm", "max_blocks_per_sm", "registers_per_sm",
                     "shared_memory_per_sm_bytes", "max_shared_memory_per_block_bytes"):
            _check_int(f"HardwareSpec.{name}", getattr(self, name), *_GPU_LIMIT_RANGE)
        if not isinstance(self.source, str):
            raise ValueError(f"HardwareSpec.source must be a string, got {self.source!r}")
        if not isinstance(self.extra, dict):
            raise ValueError(f"HardwareSpec.extra must be a dict, got {self.extra!r}")
        try:  # saved with the spec: it must be JSON data, finite numbers only
            json.dumps(self.extra, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ValueError(f"HardwareSpec.extra must be JSON data with finite numbers ({err})") from None
        for name in ("vector_registers", "fma_latency_cycles", "fma_pipes", "add_pipes",
                     "vector_stores_per_cycle"):
            _check_int(f"HardwareSpec.{name}", getattr(self, name), 1, 1024)
        _check_real("HardwareSpec.libm_call_cycles", self.libm_call_cycles, *LIBM_CALL_CYCLES_RANGE)
        if self.single_core_peak_gflops != 0:
            _check_real("HardwareSpec.single_core_peak_gflops", self.single_core_peak_gflops, *_RATE_RANGE)

    # ------------------------------------------------------- parallel scaling
    def core_peak_gflops(self, active: int) -> float:
        """GFLOP/s one core reaches while ``active`` cores compute.

        ``min(single_core_peak, peak / active)``: alone a core may run
        faster (turbo) than its share of the all-core peak, but together the
        cores never exceed the machine's peak.
        """
        share = self.peak_gflops / max(1, min(active, self.parallel_units))
        single = self.single_core_peak_gflops or self.peak_gflops / self.parallel_units
        return min(single, share)

    def core_clock_hz(self, active: int) -> float:
        """The clock :meth:`core_peak_gflops` implies: that peak over the FLOP
        one cycle issues (``2 * fma_pipes * lanes``). What converts the cycles
        of ``libm_call_cycles`` to seconds, in the model and in ``calibrate``."""
        return self.core_peak_gflops(active) * 1e9 / (2 * self.fma_pipes * self.lanes(32))

    def core_bandwidth_gbps(self, level: "MemoryLevel", active: int) -> float:
        """GB/s one core streams from ``level`` while ``active`` cores do.

        ``min(single_core_bandwidth, bandwidth / active)``: alone, a core
        may stream more than its share of a shared level (or of its private
        one, at turbo clock), but the cores together never exceed the
        level's bandwidth. Uncalibrated, ``single_core_bandwidth`` is
        ``bandwidth / parallel_units``, exact for a private level.
        """
        single = level.single_core_bandwidth_gbps or level.bandwidth_gbps / self.parallel_units
        return min(single, level.bandwidth_gbps / max(1, min(active, self.parallel_units)))

    # ------------------------------------------------------------------ lanes
    def lanes(self, dtype_bits: int = 32) -> int:
        """Vector lanes for elements of ``dtype_bits`` bits (a warp on GPU)."""
        if self.kind == "gpu":
            return 32
        return max(1, self.vector_bits // max(8, dtype_bits))

    # ----------------------------------------------------------- constructors
    @staticmethod
    def from_target(target) -> "HardwareSpec":
        """Build a spec for a TVM target.

        LLVM: the vector width comes from the target's CPU features
        (``avx512f`` → 512 bits, ``avx``/``avx2`` → 256, else 128); cores
        from ``num-cores`` (else the host's physical cores); cache sizes and
        frequency from the host when ``mcpu`` is the host CPU, otherwise
        common defaults (32 KiB L1, 1 MiB L2, 32 MiB L3). CUDA: the preset
        named by the target's ``arch`` (sm_90 → H200, sm_80 → A100,
        sm_70 → V100, sm_75 → T4, sm_89 → RTX 4090, sm_87 → Orin).

        Raises
        ------
        ValueError
            For a target kind the model does not know (only ``llvm`` and ``cuda``).
        """
        import tvm

        if isinstance(target, (str, dict)):
            target = tvm.target.Target(target)
        kind = target.kind.name
        if kind == "llvm":
            return _cpu_spec_from_target(target)
        if kind == "cuda":
            arch = str(target.attrs.get("arch", "sm_90"))
            key = _ARCH_TO_PRESET.get(arch)
            if key is None:
                raise ValueError(
                    f"no GPU preset for CUDA arch {arch!r}; known arches: "
                    f"{', '.join(sorted(_ARCH_TO_PRESET))}. Write a spec JSON "
                    "(see HardwareSpec.save) and pass it instead."
                )
            return HardwareSpec.from_preset(key)
        raise ValueError(
            f"tvm-latmodel has no hardware model for target kind {kind!r} "
            "(supported: 'llvm' CPUs and 'cuda' GPUs)"
        )

    @staticmethod
    def from_preset(key: str) -> "HardwareSpec":
        """A GPU spec from the presets (``h200``, ``a100``, ...)."""
        if key not in GPU_PRESETS:
            raise ValueError(f"unknown GPU preset {key!r}; known: {', '.join(sorted(GPU_PRESETS))}")
        p = GPU_PRESETS[key]
        sms = int(p["sms"])
        return HardwareSpec(
            name=p["name"],
            kind="gpu",
            parallel_units=sms,
            vector_bits=32 * 32,
            peak_gflops=float(p["peak_fp32_gflops"]),
            memory=(
                MemoryLevel("shared", float(p["shared_memory_per_sm_bytes"]), float(p["smem_bandwidth_gbps"])),
                MemoryLevel("L2", float(p["l2_bytes"]), float(p["l2_bandwidth_gbps"]), shared=True),
                MemoryLevel("DRAM", float(p["dram_bytes"]), float(p["dram_bandwidth_gbps"]), shared=True),
            ),
            launch_overhead_s=float(p["launch_overhead_s"]),
            max_threads_per_sm=int(p["max_threads_per_sm"]),
            max_blocks_per_sm=int(p["max_blocks_per_sm"]),
            registers_per_sm=int(p["registers_per_sm"]),
            shared_memory_per_sm_bytes=int(p["shared_memory_per_sm_bytes"]),
            max_shared_memory_per_block_bytes=int(p["max_shared_memory_per_block_bytes"]),
            source=f"preset:{key}",
            extra={"arch": p["arch"]},
        )

    # ----------------------------------------------------------- persistence
    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["memory"] = [dataclasses.asdict(m) for m in self.memory]
        return {"format": SPEC_FORMAT, "format_version": SPEC_FORMAT_VERSION,
                "package_version": __version__, "spec": d}

    @staticmethod
    def from_dict(data: dict, origin: str = "<dict>") -> "HardwareSpec":
        """The spec :meth:`to_dict` wrote.

        Parameters
        ----------
        data : dict
            ``{"format", "format_version", "package_version", "spec"}``.
        origin : str
            Where ``data`` came from (a file), for messages.

        Raises
        ------
        ValueError
            Starting with ``origin``: another format or version
            (:func:`tvm_latmodel.fileformat.check_header`), a missing or
            unknown field, a value of the wrong type or out of a machine's range.
        """
        check_header(data, origin, SPEC_FORMAT, SPEC_FORMAT_VERSION, "hardware spec")
        if "spec" not in data:
            raise ValueError(f"{origin}: bad hardware spec: missing field 'spec'")
        d = _fields_of(HardwareSpec, data["spec"], origin, "spec")
        levels = d.get("memory")
        if not isinstance(levels, list):
            raise ValueError(f"{origin}: bad hardware spec: 'spec.memory' must be a list of levels, got "
                             f"{type(levels).__name__}")
        try:
            d["memory"] = tuple(MemoryLevel(**_fields_of(MemoryLevel, m, origin, f"spec.memory[{i}]"))
                                for i, m in enumerate(levels))
            return HardwareSpec(**d)
        except (TypeError, ValueError) as err:
            if str(err).startswith(f"{origin}: "):
                raise
            raise ValueError(f"{origin}: bad hardware spec: {err}") from None

    def save(self, path: str) -> None:
        """Write the spec as versioned JSON (what :meth:`load` reads)."""
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1, allow_nan=False)

    @staticmethod
    def load(path: str) -> "HardwareSpec":
        """Read a spec file written by :meth:`save` (or ``tvm-latmodel calibrate``).

        Raises
        ------
        FileNotFoundError
            If ``path`` does not exist.
        ValueError
            Naming the file: not UTF-8 JSON, not a hardware spec, another
            format version, a missing or bad field.
        """
        return HardwareSpec.from_dict(
            read_versioned_json(path, SPEC_FORMAT, SPEC_FORMAT_VERSION, "hardware spec"), origin=str(path)
        )


def _fields_of(cls, obj, origin: str, where: str) -> dict:
    """``obj`` as keyword arguments of dataclass ``cls``: an object with its
    required fields and no unknown ones (ValueError naming ``origin`` otherwise)."""
    if not isinstance(obj, dict):
        raise ValueError(f"{origin}: bad hardware spec: {where!r} must be an object, got {type(obj).__name__}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(obj) - set(known))
    if unknown:
        raise ValueError(f"{origin}: bad hardware spec: unknown field {where}.{unknown[0]}")
    for name, f in known.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and name not in obj:
            raise ValueError(f"{origin}: bad hardware spec: missing field {where}.{name}")
    return dict(obj)


_ARCH_TO_PRESET = {"sm_90": "h200", "sm_90a": "h200", "sm_80": "a100", "sm_70": "v100",
                   "sm_75": "t4", "sm_89": "rtx4090", "sm_87": "orin"}

# Bytes per cycle per core each level can deliver to a core, typical of
# current x86 cores (two 32-byte loads per cycle from L1 with AVX2, half that
# from L2, a quarter from L3). Calibration replaces these with measurements.
_CPU_BYTES_PER_CYCLE = {"L1": 64.0, "L2": 32.0, "L3": 16.0}
_DEFAULT_DRAM_GBPS_PER_CORE = 10.0
_DEFAULT_FREQ_GHZ = 3.0
# (vector FMA latency in cycles, FMA pipes, vector add/max pipes, vector
# stores per cycle) of the x86 cores LLVM knows, from Agner Fog's
# instruction tables (2022) and microarchitecture guide: Zen 3/4 and Intel
# Skylake and later have a 4-cycle FMA; all have 2 FMA pipes and 2 pipes
# that add (Zen: FADD pipes 2 and 3; Intel: the two FMA ports) and retire one
# 256/512-bit store per cycle. Unknown CPUs get these values too.
_CPU_MICROARCH_DEFAULT = (4, 2, 2, 1)
# The mcpus whose FMA takes 5 cycles: Zen 1/2, Haswell and Broadwell
# (Broadwell's FMUL is 3 but its FMA is 5).
_CPU_FMA_LATENCY_5 = ("znver1", "znver2", "haswell", "broadwell")
# A TVM parallel region (thread-pool wake-up and join) plus the packed call.
_CPU_LAUNCH_OVERHEAD_S = 4e-6


def _host_caches() -> dict[str, tuple[float, bool]]:
    """{"L1": (bytes, shared)} from Linux sysfs, data/unified caches only."""
    out = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            if not entry.startswith("index"):
                continue
            p = os.path.join(base, entry)
            ctype = open(os.path.join(p, "type")).read().strip()
            if ctype == "Instruction":
                continue
            level = int(open(os.path.join(p, "level")).read().strip())
            size = open(os.path.join(p, "size")).read().strip()
            mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1], 1)
            nbytes = float(size.rstrip("KMG")) * mult
            shared_list = open(os.path.join(p, "shared_cpu_list")).read().strip()
            shared = ("-" in shared_list) or ("," in shared_list)
            out[f"L{level}"] = (nbytes, shared)
    except OSError:
        return {}
    return out


def _host_freq_ghz() -> float:
    try:
        import psutil

        freq = psutil.cpu_freq()
        if freq is not None and freq.max and freq.max > 100:
            return freq.max / 1000.0
        if freq is not None and freq.current and freq.current > 100:
            return freq.current / 1000.0
    except Exception:  # psutil may not know the frequency in a VM
        pass
    return _DEFAULT_FREQ_GHZ


def _cpu_spec_from_target(target) -> "HardwareSpec":
    import psutil
    import tvm

    mcpu = target.attrs.get("mcpu")
    mcpu = str(mcpu) if mcpu is not None else ""
    has = tvm.target.codegen.target_has_features
    if has("avx512f", target):
        vector_bits = 512
    elif has("avx2", target) or has("avx", target):
        vector_bits = 256
    else:
        vector_bits = 128  # SSE2 (x86-64 baseline) or NEON
    mtriple = str(target.attrs.get("mtriple", "") or "")
    # 32 vector registers with AVX-512 (zmm0-31) and on AArch64 (v0-v31), else 16.
    vector_registers = 32 if (vector_bits == 512 or mtriple.startswith("aarch64")) else 16
    fma_latency, fma_pipes, add_pipes, stores = _CPU_MICROARCH_DEFAULT
    if mcpu in _CPU_FMA_LATENCY_5:
        fma_latency = 5
    cores = target.attrs.get("num-cores")
    cores = int(cores) if cores is not None else int(psutil.cpu_count(logical=False) or 1)
    is_host = bool(mcpu) and mcpu == tvm.target.codegen.llvm_get_system_cpu()
    caches = _host_caches() if is_host else {}
    if not caches:
        caches = {"L1": (32 * 1024.0, False), "L2": (1024 * 1024.0, False), "L3": (32 * 1024**2, True)}
    freq = _host_freq_ghz() if is_host else _DEFAULT_FREQ_GHZ
    levels = []
    for name in ("L1", "L2", "L3"):
        if name in caches:
            size, shared = caches[name]
            levels.append(MemoryLevel(name, size, _CPU_BYTES_PER_CYCLE[name] * freq * cores, shared))
    levels.append(MemoryLevel("DRAM", 1e12, _DEFAULT_DRAM_GBPS_PER_CORE * cores, shared=True))
    # Two FMA pipes per core, each (vector_bits / 32) FP32 lanes, 2 FLOP per FMA.
    # Zen 4 runs 512-bit FMAs on 256-bit units (scripts/check_vector_width.py:
    # 1.03x the 256-bit rate), so this is 2x its real peak per cycle; modelling
    # that did not rank its fresh logs better (BENCHMARKS.md, stop 15), and
    # calibrate measures the peak itself.
    peak = cores * freq * 2 * (vector_bits // 32) * 2
    return HardwareSpec(
        name=f"{mcpu or 'generic'} x{cores}",
        kind="cpu",
        parallel_units=cores,
        vector_bits=vector_bits,
        peak_gflops=peak,
        memory=tuple(levels),
        launch_overhead_s=_CPU_LAUNCH_OVERHEAD_S,
        source="host" if is_host else "defaults",
        extra={"mcpu": mcpu, "freq_ghz": freq},
        vector_registers=vector_registers,
        fma_latency_cycles=fma_latency,
        fma_pipes=fma_pipes,
        add_pipes=add_pipes,
        vector_stores_per_cycle=stores,
    )


def load_hardware(target, path: str | None) -> HardwareSpec:
    """The spec saved at ``path`` (checked against ``target``'s kind), or
    :meth:`HardwareSpec.from_target` when ``path`` is None."""
    if path is None:
        return HardwareSpec.from_target(target)
    hw = HardwareSpec.load(path)
    kind = "gpu" if target.kind.name == "cuda" else "cpu"
    if hw.kind != kind:
        raise ValueError(f"{path}: a {hw.kind} spec cannot describe the {target.kind.name} target")
    return hw
