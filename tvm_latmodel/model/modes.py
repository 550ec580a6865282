"""The analytical latency model: pure functions of (summary, hardware).

Each non-linear "mode" of kernel latency is one small function with its
formula beside it, so that each can be tested on a hand-computed case and
named in ``tvm-latmodel explain``:

* **wave quantization** (:func:`wave_quantization`): ``units`` parallel work
  items run ``concurrent`` at a time, so time grows as
  ``waves = ceil(units / concurrent)`` — a staircase.
* **vector / lane quantization** (:func:`lane_efficiency`): a vector of
  ``extent`` elements on ``lanes``-wide hardware uses
  ``extent / (ceil(extent / lanes) * lanes)`` of it; a vector loop whose
  accesses are not contiguous builds those operands lane by lane, its
  arithmetic still vector (:func:`gather_efficiency`),
  and an innermost loop that LLVM vectorizes by itself gets the vector
  factor LLVM would pick (:func:`auto_vector_efficiency`).
  Which loop LLVM sees as innermost is decided after unrolling: the
  summary replays TVM's ``UnrollLoop`` (``pragma_auto_unroll_max_step``)
  and LLVM's full unroller, so a channel loop left outside fully unrolled
  filter taps is vectorized (:mod:`~tvm_latmodel.model.program`).
* **accumulator chains** (:func:`chain_efficiency`, CPU): a reduction adds
  into each accumulator in order, so the FMA pipes only stay full with
  ``fma_latency * fma_pipes`` independent accumulator vectors in the loops
  inside the innermost reduction loop; a tile larger than the register
  file is a cliff: the whole body spills to L1, at the in-memory rate times
  the share that fits (:func:`register_spill_efficiency`).
* **register tile** (:func:`memory_accumulator_efficiency`, CPU): the
  accumulators stay in registers only when every loop inside the innermost
  reduction loop is unrolled or vectorized; a rolled loop there walks them
  through memory, a store per FMA.
* **instruction mix** (:func:`instruction_mix_factor`, CPU): add, max and
  min kernels against their own peak (one operation per instruction on the
  add pipes), not the FMA peak that counts two.
* **scalar libm calls** (CPU): TVM's LLVM codegen emits ``exp``, ``log``,
  ``erf``, ``pow``, ``tanh`` and ``sigmoid`` as one scalar libm call per
  element (:data:`~tvm_latmodel.model.indexing.LIBM_CALLS`); such a block
  runs scalar and pays ``HardwareSpec.libm_call_cycles`` per ``exp``
  (measured by ``calibrate``; other functions by their measured ratio to
  ``exp``) instead of FLOP-equivalents. A softmax that recomputes its ``exp``
  in two blocks pays it twice.
* **parallel scaling** (CPU, :meth:`HardwareSpec.core_peak_gflops`,
  :meth:`HardwareSpec.core_bandwidth_gbps`): a region whose units fill
  fewer cores than the machine has gives each core what one core gets
  alone (turbo clock, more of a shared level's bandwidth), as measured by
  ``calibrate``.
* **tile quantization** (:func:`padded_work_ratio`): a tile that does not
  divide its loop, or a compute-at halo, executes
  ``work_points / useful_points`` times the useful iterations.
* **regime** (:func:`roofline_time`): a unit is compute-bound or
  memory-bound, ``time = max(flops / flop_rate, max_level bytes / bandwidth)``;
  on a CPU the non-binding resource adds ``CPU_UNHIDDEN_FRACTION`` of its
  time (:func:`overlapped_time`), a tie-break: of two schedules at the
  same compute time, the one moving fewer bytes ranks first;
* **cache-capacity cliffs** (:func:`cache_traffic_bytes`): the bytes a
  level must fetch from the next one jump when a loop body's footprint stops
  fitting in it; a buffer the loops inside the kept one do not move (an
  accumulator under a rolled loop) is fetched once, not on every trip; an
  update's read and write of the same elements occupy the level once. An
  intermediate that TVM's buffer compaction allocates as a tile (a padding
  or cache tile computed at an outer loop) never spans more than that tile:
  the summary caps its footprints there (``program._within_allocations``).
* **occupancy** (GPU, :func:`gpu_blocks_per_sm`): resident blocks per SM from
  threads, registers and shared memory, deciding the concurrent units.
* **warm last-level cache** (:func:`warm_in_last_cache`): tuners time a
  kernel by running it repeatedly without flushing caches, so a program
  whose buffers all fit in the last-level cache never goes to DRAM. The
  buffers are counted as compiled: an intermediate at the tile TVM's
  buffer compaction allocates, once per running parallel iteration
  (:meth:`~tvm_latmodel.model.program.ProgramSummary.held_bytes`).
* **overhead**: a fixed cost per parallel region / kernel launch.

No TVM object enters this module: inputs are a
:class:`~tvm_latmodel.program.ProgramSummary` (plain numbers) and a
:class:`~tvm_latmodel.hardware.HardwareSpec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..hardware import HardwareSpec
from .indexing import CALL_OPS
from .program import BlockSummary, ProgramSummary, Region, parameter_bytes, summarize

# The CPU's microarchitecture (vector registers, FMA latency and pipes, add
# pipes, stores per cycle, single-core peak and bandwidth) lives in
# HardwareSpec; what stays here is about the shape of the generated code.
# Registers an FMA loop needs besides its accumulators (the two operands).
CPU_OPERAND_REGISTERS = 2
# Vector FMAs the out-of-order core looks ahead over: a 224-256 entry
# reorder buffer (Skylake, Zen 3) at about 4 micro-ops per FMA of a tiled
# loop (the FMA, its operand loads, address and loop arithmetic).
CPU_OOO_WINDOW_FMAS = 64
# A serial (non-parallel) region still pays a call, but no thread-pool wake-up.
SERIAL_OVERHEAD_FRACTION = 0.25
# Warps per SM needed to hide arithmetic and memory latency (4 schedulers x 4).
GPU_WARPS_TO_HIDE_LATENCY = 16
# Registers per thread a kernel needs besides its local (register) tile.
GPU_BASE_REGISTERS = 32
GPU_MAX_REGISTERS_PER_THREAD = 255
# A schedule that cannot launch (too many threads, registers or shared memory).
INFEASIBLE_LATENCY_S = 1.0e3
# CPU: the share of the non-binding resource's time (memory time in a
# compute-bound unit, compute in a memory-bound one) that is not hidden
# behind the binding one (:func:`overlapped_time`). Not a measured overlap:
# one part in a million only breaks ties, ordering schedules at the compute
# cap by their traffic (stop 23, benchmarks/modes/PROTOCOL_stop23.md: the
# fitted values 0.25-1 gave the development families a worse rank_5pct).
CPU_UNHIDDEN_FRACTION = 1e-6


# --------------------------------------------------------------- the modes


def wave_quantization(units: int, concurrent: int) -> tuple[int, float]:
    """Parallel-wave quantization.

    ``waves = ceil(units / concurrent)``;
    ``wave_efficiency = units / (waves * concurrent)`` (1.0 when units fill
    every wave). Zero units is zero waves with efficiency 1.0.
    """
    if concurrent < 1:
        raise ValueError(f"concurrent units must be >= 1, got {concurrent}")
    if units <= 0:
        return 0, 1.0
    waves = -(-units // concurrent)
    return waves, units / (waves * concurrent)


def lane_efficiency(vector_extent: int, lanes: int) -> float:
    """Fraction of the vector lanes doing useful work.

    ``vector_extent / (ceil(vector_extent / lanes) * lanes)``; a loop that is
    not vectorized (extent 0 or 1) runs scalar code: ``1 / lanes``.
    Examples on AVX-512 FP32 (16 lanes): 4 → 0.25, 16 → 1.0, 24 → 0.75.
    """
    if lanes < 1:
        raise ValueError(f"lanes must be >= 1, got {lanes}")
    if vector_extent <= 1:
        return 1.0 / lanes
    return vector_extent / (-(-vector_extent // lanes) * lanes)


def gather_efficiency(vector_extent: int, lanes: int, arith_ops: float, moving_accesses: int,
                      gathered_accesses: float) -> float:
    """A vector loop with non-contiguous accesses: TVM and LLVM build each
    gathered operand lane by lane (one insert or extract per lane), while
    the arithmetic and the contiguous accesses stay vector instructions.

    Per point, ``g`` gathered accesses cost one instruction each (``g``
    counts each gathered access divided by the unrolled copies that share
    its vector, ``BlockSummary.gathered_per_point``), ``a``
    arithmetic operations and ``m`` contiguous accesses ``ceil(n / lanes) /
    n`` each; the efficiency is a full vector loop's instructions over
    these: ``((a + m + g) / lanes) / ((a + m) * ceil(n / lanes) / n + g)``
    (``1 / lanes``, scalar, when nothing is vector). Example: 16 lanes,
    ``n = 16``, an FMA (2 ops), 2 contiguous and 1 gathered access:
    ``(5 / 16) / (4 / 16 + 1) = 0.25``.
    """
    if lanes < 1:
        raise ValueError(f"lanes must be >= 1, got {lanes}")
    n = max(1, int(vector_extent))
    vector = max(0.0, float(arith_ops)) + max(0, int(moving_accesses))
    g = max(0.0, float(gathered_accesses))
    if vector + g == 0:
        return 1.0 / lanes
    return ((vector + g) / lanes) / (vector * -(-n // lanes) / n + g)


def auto_vector_efficiency(extent: int, lanes: int) -> float:
    """Lanes LLVM's loop vectorizer fills on an innermost loop of ``extent``.

    It picks the largest power-of-two factor ``vf <= min(extent, lanes)``
    and runs the remainder scalar: ``extent / ((extent // vf + extent % vf)
    * lanes)``. Examples with 8 lanes: 8 → 1.0, 16 → 1.0, 12 → 0.3, 1 → 1/8.
    """
    if extent <= 1:
        return 1.0 / lanes
    vf = 1
    while vf * 2 <= min(extent, lanes):
        vf *= 2
    steps = extent // vf + extent % vf
    return extent / (steps * lanes)


def chain_efficiency(chains: float, latency_cycles: int, pipes: int) -> float:
    """Fraction of FMA throughput a reduction with ``chains`` independent
    accumulators reaches: ``min(1, chains / (latency_cycles * pipes))``.

    Each accumulator is one dependency chain: it can take a new FMA only
    every ``latency_cycles``. Example (4 cycles, 2 pipes): 1 chain → 1/8,
    8 chains → 1.0.
    """
    if chains <= 0:
        return 1.0
    return min(1.0, chains / (latency_cycles * pipes))


def memory_accumulator_efficiency(stores_per_cycle: int, fma_pipes: int) -> float:
    """Throughput of an FMA whose accumulator lives in memory (L1), not in
    a register: each FMA then also stores its accumulator, so the stores
    bound it: ``min(1, stores_per_cycle / fma_pipes)``. Example (1 store per
    cycle, 2 FMA pipes): 0.5.
    """
    return min(1.0, stores_per_cycle / fma_pipes)


def register_spill_efficiency(accumulators: float, registers: int, spilled_efficiency: float,
                              operands: int = CPU_OPERAND_REGISTERS) -> float:
    """Throughput left when the accumulator tile outgrows the registers.

    ``1`` while ``accumulators <= keep = registers - operands``; beyond, a
    cliff: LLVM's register allocator spills and reloads inside the unrolled
    body (operands too, not only the excess accumulators), so the whole
    tile runs at ``spilled_efficiency`` (:func:`memory_accumulator_efficiency`)
    times the share of it that fits: ``spilled_efficiency * keep /
    accumulators``. Example (16 registers, 0.5): 14 → 1.0, 30 → 0.5 * 14 / 30.

    The form is a choice made on development data (stop 31,
    ``benchmarks/modes/PROTOCOL_stop31.md`` part 3), not a fitted constant:
    FCV_36 record 10 of ``cpu-znver3-net`` (a 6 x 49-wide tile, 42 vector
    registers on AVX2's 16) compiles for znver3 to 705 stack references
    for 42 FMAs per loop iteration and runs 13.5x slower than the task's
    best; the former form (only the excess spilled at half speed) scored
    it 0.6 of its unspilled rate, this one 0.17.
    """
    keep = registers - operands
    if accumulators <= keep:
        return 1.0
    # An FMA holds its accumulator in a register while it runs: at least one
    # fits even when the operands take the whole file (a spec with 1-2 vector
    # registers passes HardwareSpec's checks; 0 here divided by zero).
    return spilled_efficiency * max(1, keep) / accumulators


def instruction_mix_factor(ops: float, fmas: float, fma_pipes: int, add_pipes: int) -> float:
    """Time of a point's arithmetic against the FMA peak, which counts 2 FLOP
    per FMA instruction on ``fma_pipes`` pipes.

    The ``fmas`` multiply-adds take ``fmas / fma_pipes`` cycles (per vector),
    the other ``ops - 2 * fmas`` operations (adds, max, min, lone multiplies)
    one instruction each on ``add_pipes``; the peak would take
    ``ops / (2 * fma_pipes)``. A pure FMA kernel gives 1, a pure add or max
    kernel ``2 * fma_pipes / add_pipes`` (2 on Zen 3 and Skylake).
    """
    if ops <= 0:
        return 1.0
    fmas = min(fmas, ops / 2.0)
    cycles = fmas / fma_pipes + (ops - 2.0 * fmas) / add_pipes
    return cycles / (ops / (2.0 * fma_pipes))


def padded_work_ratio(work_points: float, useful_points: float) -> float:
    """Tile quantization: executed over useful iterations (>= 1).

    ``work_points / useful_points``; loops that over-cover a dimension
    (non-divisible tiles, predicated tails) or recompute a halo at each
    compute-at point make it exceed 1.
    """
    if useful_points <= 0:
        return 1.0
    return max(1.0, work_points / useful_points)


def cache_traffic_bytes(footprints: list[tuple[float, ...]], trips: list[float], capacity_bytes: float,
                        first_level: int = 0, held: list[tuple[float, ...]] | None = None) -> float:
    """Bytes a cache of ``capacity_bytes`` fetches from the next level.

    ``footprints[a][k]`` is the bytes access ``a`` touches in one whole
    execution of loop ``k`` (all its iterations), ``footprints[a][depth]``
    at one point, and ``trips[k]`` how often loop ``k`` is executed. The
    cache keeps the outermost loop (``k >= first_level``) whose summed
    footprint fits:
    ``k* = min{k >= first_level : sum_a footprints[a][k] <= capacity}`` (the
    innermost level if nothing fits). Crossing the capacity moves ``k*``
    inward: the cache-capacity cliff. Each access is then fetched at the
    outermost level from which the loops down to ``k*`` do not move it
    (its bytes, touched in every execution of ``k*``, stay in an LRU cache):
    ``traffic = sum_a trips[j_a] * footprints[a][j_a]`` with
    ``j_a = min{first_level <= j <= k* : footprints[a][j] == footprints[a][k*]}``
    (stop 23: an accumulator reused under a rolled loop is fetched once, not
    once per trip). Never less than the compulsory ``sum_a footprints[a][0]``
    (every byte at least once).

    ``held``: the footprints that occupy the cache, when not all of them do
    (default ``footprints``): an update's read and write of the same
    elements hold them once (stop 38: a 1,792 B accumulator tile read and
    written inside its reduction loop counted 3,584 B against 32 zmm
    registers, 2,048 B, and was charged 115 MB of L1 traffic).
    """
    if not footprints:
        return 0.0
    depth = len(footprints[0])
    total = [sum(f[k] for f in footprints) for k in range(depth)]
    resident = total if held is None else [sum(f[k] for f in held) for k in range(depth)]
    chosen = depth - 1
    for k in range(first_level, depth):
        if resident[k] <= capacity_bytes:
            chosen = k
            break
    traffic = 0.0
    for f in footprints:
        j = chosen
        while j > first_level and f[j - 1] <= f[chosen]:
            j -= 1
        traffic += trips[j] * f[j]
    return max(total[0], traffic)


def overlapped_time(compute_s: float, memory_s: float, unhidden: float) -> float:
    """Time of a unit that computes for ``compute_s`` and moves data for
    ``memory_s``: ``max(c, m) + unhidden * min(c, m)``. ``unhidden = 0`` is
    the roofline (perfect overlap), 1 no overlap at all.
    """
    return max(compute_s, memory_s) + unhidden * min(compute_s, memory_s)


def roofline_time(flops: float, flop_rate: float, bytes_by_level: dict, bandwidth_by_level: dict) -> tuple[float, float, str]:
    """Compute-versus-memory regime of one unit.

    ``compute_s = flops / flop_rate``; ``memory_s = max_l bytes_l / bandwidth_l``;
    the unit takes ``max(compute_s, memory_s)``. Returns
    ``(compute_s, memory_s, bound)`` where ``bound`` names the limiting
    resource (``compute`` or the memory level).
    """
    compute_s = flops / flop_rate if flops > 0 else 0.0
    memory_s, level = 0.0, None
    for name, nbytes in bytes_by_level.items():
        t = nbytes / bandwidth_by_level[name] if nbytes > 0 else 0.0
        if t > memory_s:
            memory_s, level = t, name
    if compute_s >= memory_s:
        return compute_s, memory_s, "compute"
    return compute_s, memory_s, f"memory:{level}"


def gpu_blocks_per_sm(threads_per_block: int, shared_bytes_per_block: float, registers_per_thread: int,
                      hw: HardwareSpec) -> tuple[int, str]:
    """Occupancy: resident thread blocks per SM and the limiting resource.

    ``min(max_blocks_per_sm, floor(max_threads_per_sm / warp_threads),
    floor(smem_per_sm / smem_per_block), floor(regs_per_sm / (regs_per_thread
    * warp_threads)))`` with ``warp_threads`` the threads rounded up to 32;
    the register limit is at least 1 (the compiler spills instead). Zero
    means the block cannot launch at all (over 1024 threads, or more shared
    memory than one block may have).
    """
    warp_threads = max(32, -(-threads_per_block // 32) * 32)
    limits = {"blocks": hw.max_blocks_per_sm, "threads": hw.max_threads_per_sm // warp_threads}
    if threads_per_block > 1024:
        limits["threads"] = 0
    if shared_bytes_per_block > 0:
        if shared_bytes_per_block > hw.max_shared_memory_per_block_bytes:
            limits["shared_memory"] = 0
        else:
            limits["shared_memory"] = int(hw.shared_memory_per_sm_bytes // shared_bytes_per_block)
    # Registers never stop a launch: the compiler caps them per thread
    # (spilling to local memory) so that one block fits.
    limits["registers"] = max(1, hw.registers_per_sm // (registers_per_thread * warp_threads))
    name = min(limits, key=lambda k: limits[k])
    return int(limits[name]), name


def roofline_bound_s(flops: float, held_bytes: float, hw: HardwareSpec, level=None) -> float:
    """``max(flops / peak, bytes / bandwidth)``, the bandwidth of memory
    ``level`` (default DRAM): with one schedule's held bytes
    (:meth:`ProgramSummary.held_bytes`), the ``roofline_fraction`` term;
    with the parameters' bytes, :func:`task_bound_s`."""
    bandwidth = (level if level is not None else hw.memory[-1]).bandwidth_gbps * 1e9
    return max(flops / (hw.peak_gflops * 1e9), held_bytes / bandwidth)


def task_bound_s(mod, hw: HardwareSpec) -> float:
    """The task's roofline bound, the same for every schedule of it: its
    useful FLOPs at peak, or its parameters' bytes (inputs and outputs)
    moved once, whichever is longer. The bytes move at DRAM bandwidth, or
    at the last cache level's when the parameters fit in it
    (:func:`warm_in_last_cache`: timed runs repeat without flushing), so
    that no schedule beats the bound.

    ``mod``: the task's module, best unscheduled (the ``TuneContext``'s);
    a scheduled one has the same parameters and, but for how elementwise
    work is inlined, the same useful FLOPs.
    The scores and the residual's first feature are relative to it, so it
    must not depend on which schedule is seen first.
    """
    # Useful FLOPs do not depend on the target kind; the CPU walk also
    # reads an unscheduled module (a GPU one needs thread bindings).
    nbytes = parameter_bytes(mod)
    level = hw.memory[-2] if warm_in_last_cache(nbytes, hw) else hw.memory[-1]
    return roofline_bound_s(summarize(mod, "cpu").flops, nbytes, hw, level)


# ----------------------------------------------------------- the estimate


@dataclass
class RegionTerms:
    """Every term of one region's estimate (what ``explain`` prints)."""

    index: int
    units: int
    concurrent_units: int
    waves: int
    wave_efficiency: float
    lane_efficiency: float
    padded_work_ratio: float
    flops_per_unit: float
    bytes_per_unit: dict
    compute_s: float
    memory_s: float
    bound: str
    unit_s: float
    overhead_s: float
    latency_s: float
    occupancy: dict = field(default_factory=dict)


@dataclass
class Estimate:
    """The analytical estimate of one program and its named terms."""

    latency_s: float
    regions: list[RegionTerms]
    flops: float
    roofline_bound_s: float

    def terms(self) -> dict:
        """Flat numeric terms (summed or flop-weighted over regions): the
        residual model's analytical features and ``explain``'s summary."""
        rs = self.regions
        total = sum(r.latency_s for r in rs) or 1.0
        w = [r.latency_s / total for r in rs]
        return {
            "latency_s": self.latency_s,
            "waves": float(sum(r.waves for r in rs)),
            "wave_efficiency": sum(wi * r.wave_efficiency for wi, r in zip(w, rs)),
            "lane_efficiency": sum(wi * r.lane_efficiency for wi, r in zip(w, rs)),
            "padded_work_ratio": sum(wi * r.padded_work_ratio for wi, r in zip(w, rs)),
            "compute_s": sum(r.waves * r.compute_s for r in rs),
            "memory_s": sum(r.waves * r.memory_s for r in rs),
            "overhead_s": sum(r.overhead_s for r in rs),
            "memory_bound_fraction": sum(wi for wi, r in zip(w, rs) if r.bound != "compute"),
            "regions": float(len(rs)),
            "units": float(max((r.units for r in rs), default=0)),
            "roofline_fraction": self.roofline_bound_s / self.latency_s if self.latency_s > 0 else 0.0,
        }


def warm_in_last_cache(held_bytes: float, hw: HardwareSpec) -> bool:
    """Whether every buffer stays in the last-level cache between timed runs.

    ``held_bytes <= size of the last cache level`` (L3 on CPU, L2 on GPU),
    with ``held_bytes`` from :meth:`ProgramSummary.held_bytes` (parameters,
    and intermediates as TVM's buffer compaction allocates them).
    MetaSchedule's runner and ``scripts/gpu_timer.py`` repeat a kernel
    without flushing caches, so such a program's DRAM traffic is zero.
    """
    caches = hw.memory[:-1]
    return bool(caches) and held_bytes <= caches[-1].size_bytes


def _levels(hw: HardwareSpec, concurrent: int, gpu: bool, warm: bool = False):
    """(capacity_per_unit_bytes, server_name, server_bandwidth_per_unit) of each cache.

    ``warm``: the whole program sits in the last-level cache, so nothing is
    served by DRAM (the last entry is dropped).
    """
    out = _cache_levels(hw, concurrent, gpu)
    return out[:-1] if warm else out


def _cache_levels(hw: HardwareSpec, concurrent: int, gpu: bool):
    out = []
    mem = hw.memory
    if gpu:
        # Global accesses: a block's tile is held in L1/shared per block, then
        # in its share of L2; L2 serves the first, DRAM the second.
        shared, l2, dram = mem[0], mem[1], mem[2]
        per_sm_blocks = max(1, concurrent // hw.parallel_units)
        out.append((shared.size_bytes / per_sm_blocks, l2.name, l2.bandwidth_gbps * 1e9 / concurrent))
        out.append((l2.size_bytes / concurrent, dram.name, dram.bandwidth_gbps * 1e9 / concurrent))
        return out
    # CPU: ``concurrent`` is the number of cores at work; each core gets
    # its share of a shared cache and what it can stream while the others
    # stream too (HardwareSpec.core_bandwidth_gbps: alone, a core may get
    # more than 1/cores of a shared level).
    regs = hw.vector_registers * hw.vector_bits / 8
    caps = [regs] + [(m.size_bytes / concurrent if m.shared else m.size_bytes) for m in mem[:-1]]
    for cap, server in zip(caps, mem):
        out.append((cap, server.name, hw.core_bandwidth_gbps(server, concurrent) * 1e9))
    return out


def _unit_level(block: BlockSummary, gpu: bool) -> int:
    unit_kind = "blockIdx" if gpu else "parallel"
    level = 0
    for j, lp in enumerate(block.loops):
        if lp.kind == unit_kind:
            level = j + 1
    return level


def _slp_extent(b: BlockSummary, hw: HardwareSpec) -> int:
    """The SLP packing outside the reductions a block gets on ``hw``: none
    where LLVM's loop vectorizer takes the rolled loop around the copies
    with gathers, which it does where gathers are legal (X86's
    ``supportsGather``: AVX-512; AVX2 CPUs with LLVM's fast-gather tuning,
    Intel client cores from Skylake, are not told apart here)."""
    if b.gathered_loop and hw.vector_bits >= 512:
        return 0
    return b.slp_extent


def _cpu_efficiency(b: BlockSummary, lanes: int, hw: HardwareSpec) -> float:
    """Fraction of a core's peak one CPU block reaches: lanes x chains x
    register tile x instruction mix."""
    if b.libm_calls_per_point > 0:
        vec, eff = 1, 1.0 / lanes  # a scalar libm call per element keeps the loop scalar
    elif b.vector_extent > 1 and b.vector_gathers:
        # gathered operands built lane by lane, the arithmetic vector
        vec = b.vector_extent
        # (a summary built by hand, without the sharing, counts each gather once)
        eff = gather_efficiency(b.vector_extent, lanes, b.ops_per_point, b.vector_accesses,
                                b.gathered_per_point or b.vector_gathers)
    elif b.vector_extent > 1:
        vec, eff = b.vector_extent, lane_efficiency(b.vector_extent, lanes)
    elif (vec := max(b.auto_vector_extent, _slp_extent(b, hw))) > 1:
        eff = auto_vector_efficiency(vec, lanes)
    else:
        vec, eff = 1, 1.0 / lanes
    in_memory = memory_accumulator_efficiency(hw.vector_stores_per_cycle, hw.fma_pipes)
    if b.reduce_level > 0 and b.ops_per_point > 0:
        if b.accumulators_in_registers:
            # Accumulator vectors in registers; the out-of-order window also
            # overlaps the chains of the next accumulators when each takes
            # only chain_length dependent updates before the nest moves on.
            regs = b.accumulator_points / vec * -(-vec // lanes)
            chains = max(regs, CPU_OOO_WINDOW_FMAS / max(1.0, b.chain_length))
            eff *= (chain_efficiency(chains, hw.fma_latency_cycles, hw.fma_pipes)
                    * register_spill_efficiency(regs, hw.vector_registers, in_memory))
        else:
            # A rolled loop inside the reduction walks the accumulators
            # through memory: a load and a store around every FMA.
            eff *= in_memory
    return eff / instruction_mix_factor(b.ops_per_point, b.fma_per_point, hw.fma_pipes, hw.add_pipes)


def _region_terms(region: Region, hw: HardwareSpec, warm: bool = False) -> RegionTerms:
    gpu = hw.kind == "gpu"
    occupancy = {}
    serial = region.index < 0
    if gpu:
        regs = min(GPU_MAX_REGISTERS_PER_THREAD, GPU_BASE_REGISTERS + int(region.local_bytes_per_thread // 4))
        per_sm, limiter = gpu_blocks_per_sm(region.threads_per_unit, region.shared_bytes_per_unit, regs, hw)
        warps = per_sm * max(1, -(-region.threads_per_unit // 32))
        hiding = min(1.0, warps / GPU_WARPS_TO_HIDE_LATENCY)
        occupancy = {"blocks_per_sm": per_sm, "limiter": limiter, "registers_per_thread": regs,
                     "resident_warps": warps, "latency_hiding": hiding}
        concurrent = max(1, per_sm * hw.parallel_units)
        if per_sm == 0:
            return _infeasible(region, occupancy, hw)
    else:
        concurrent = 1 if serial else hw.parallel_units
    units = max(1, region.units)
    waves, wave_eff = wave_quantization(units, concurrent)
    if gpu:
        levels = _levels(hw, concurrent, gpu, warm)
        peak_per_slot = hw.peak_gflops * 1e9 / concurrent
    else:
        # Parallel scaling: the cores at work (fewer than all when the units
        # do not fill them) each get a core's peak and bandwidth share.
        active = min(units, concurrent)
        levels = _levels(hw, active, gpu, warm)
        peak_per_slot = hw.core_peak_gflops(active) * 1e9

    flops_time_weighted = 0.0
    compute_s = 0.0
    useful = work = 0.0
    bytes_by_server: dict[str, float] = {}
    bw_by_server: dict[str, float] = {}
    lane_w = lane_sum = 0.0
    for b in region.blocks:
        lanes = hw.lanes(b.dtype_bits)
        if gpu:
            eff = lane_efficiency(region.threads_per_unit, 32) * occupancy["latency_hiding"]
            if region.threads_per_unit <= 1:
                eff = occupancy["latency_hiding"] / 32
        else:
            eff = _cpu_efficiency(b, lanes, hw)
        executed = b.work_points * b.ops_per_point
        if not gpu and b.libm_calls_per_point > 0:
            # The calls' own cost (measured cycles per element, at the
            # core's clock) in place of their FLOP-equivalents.
            executed = b.work_points * max(0.0, b.ops_per_point - CALL_OPS * b.libm_calls_per_point)
            compute_s += (b.work_points * b.libm_cost_per_point * hw.libm_call_cycles
                          / hw.core_clock_hz(active) / units)
        if executed > 0:
            compute_s += executed / units / (peak_per_slot * eff)
            lane_w += executed
            lane_sum += executed * eff
        useful += b.useful_points
        work += b.work_points
        flops_time_weighted += executed
        first = _unit_level(b, gpu)
        trips = [b.trips(k) for k in range(b.depth + 1)]
        glob = [a for a in b.accesses if a.scope in ("global", "")]
        if glob:
            fps = [a.footprint_bytes for a in glob]
            # a read-modify-write (an update's read and write of the same elements) occupies a cache once
            reads = {(a.buffer, a.footprint_bytes) for a in glob if not a.is_write}
            held = [a.footprint_bytes for a in glob if not (a.is_write and (a.buffer, a.footprint_bytes) in reads)]
            for cap, server, bw in levels:
                bytes_by_server[server] = (bytes_by_server.get(server, 0.0)
                                           + cache_traffic_bytes(fps, trips, cap, first, held) / units)
                bw_by_server[server] = bw
        if gpu:
            sh = [a for a in b.accesses if a.scope.startswith("shared")]
            if sh:
                nbytes = sum(a.footprint_bytes[-1] for a in sh) * b.work_points / units
                smem = hw.memory[0]
                bytes_by_server[smem.name] = bytes_by_server.get(smem.name, 0.0) + nbytes
                bw_by_server[smem.name] = smem.bandwidth_gbps * 1e9 / concurrent
    # compute_s already divides each block's flops by its own effective
    # rate, so it enters the roofline as flops with a unit rate.
    compute_s, memory_s, bound = roofline_time(compute_s, 1.0, bytes_by_server, bw_by_server)
    unit_s = overlapped_time(compute_s, memory_s, 0.0 if gpu else CPU_UNHIDDEN_FRACTION)
    overhead = hw.launch_overhead_s * (SERIAL_OVERHEAD_FRACTION if serial and not gpu else 1.0)
    latency = overhead + waves * unit_s
    return RegionTerms(
        index=region.index, units=units, concurrent_units=concurrent, waves=waves,
        wave_efficiency=wave_eff, lane_efficiency=(lane_sum / lane_w) if lane_w else 1.0,
        padded_work_ratio=padded_work_ratio(work, useful), flops_per_unit=flops_time_weighted / units,
        bytes_per_unit=bytes_by_server, compute_s=compute_s, memory_s=memory_s, bound=bound,
        unit_s=unit_s, overhead_s=overhead, latency_s=latency, occupancy=occupancy)


def _infeasible(region: Region, occupancy: dict, hw: HardwareSpec) -> RegionTerms:
    """A kernel whose blocks cannot launch: ranked last, never crashes."""
    return RegionTerms(
        index=region.index, units=region.units, concurrent_units=0, waves=0, wave_efficiency=0.0,
        lane_efficiency=0.0, padded_work_ratio=1.0, flops_per_unit=0.0, bytes_per_unit={}, compute_s=0.0,
        memory_s=0.0, bound=f"infeasible:{occupancy['limiter']}", unit_s=0.0, overhead_s=hw.launch_overhead_s,
        latency_s=INFEASIBLE_LATENCY_S, occupancy=occupancy)


def estimate(summary: ProgramSummary, hw: HardwareSpec) -> Estimate:
    """Analytical latency of a summarized program on ``hw``.

    ``latency_s = sum over regions of (overhead_s + waves * unit_s)`` with
    ``unit_s = max(compute_s, memory_s)`` of one unit (see the module doc).
    """
    if summary.target_kind != hw.kind:
        raise ValueError(f"a {summary.target_kind} program cannot be estimated on {hw.kind} hardware ({hw.name})")
    held = summary.held_bytes(hw.parallel_units)
    warm = warm_in_last_cache(held, hw)
    regions = [_region_terms(r, hw, warm) for r in summary.regions]
    latency = sum(r.latency_s for r in regions)
    if not regions:
        latency = hw.launch_overhead_s * SERIAL_OVERHEAD_FRACTION
    flops = summary.flops
    bound = roofline_bound_s(flops, held, hw)
    return Estimate(latency_s=latency, regions=regions, flops=flops, roofline_bound_s=bound)
