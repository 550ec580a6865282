"""Each analytical mode against a hand-computed case (pure math, no TVM)."""

import dataclasses
import math

import pytest

from tvm_latmodel.hardware import HardwareSpec, MemoryLevel
from tvm_latmodel.model.modes import (
    auto_vector_efficiency,
    cache_traffic_bytes,
    chain_efficiency,
    estimate,
    gather_efficiency,
    gpu_blocks_per_sm,
    instruction_mix_factor,
    lane_efficiency,
    memory_accumulator_efficiency,
    overlapped_time,
    padded_work_ratio,
    roofline_bound_s,
    task_bound_s,
    register_spill_efficiency,
    roofline_time,
    warm_in_last_cache,
    wave_quantization,
)
from tvm_latmodel.model.program import Access, BlockSummary, Loop, ProgramSummary, Region
from toys import square_matmul, tiled_matmul_schedule


def cpu(cores=4, vector_bits=512, peak=400.0):
    return HardwareSpec(
        name="test-cpu", kind="cpu", parallel_units=cores, vector_bits=vector_bits, peak_gflops=peak,
        memory=(MemoryLevel("L1", 32 * 1024, 400.0), MemoryLevel("L2", 1024 * 1024, 200.0),
                MemoryLevel("L3", 16 * 1024 * 1024, 100.0, shared=True), MemoryLevel("DRAM", 1e12, 20.0, shared=True)),
        launch_overhead_s=5e-6)


# ----------------------------------------------------------- wave staircase

def test_waves_staircase_at_multiples_of_concurrent_units():
    # 8 concurrent units: 1..8 units are one wave, 9..16 two, 17 three.
    assert [wave_quantization(u, 8)[0] for u in (1, 8, 9, 16, 17)] == [1, 1, 2, 2, 3]
    assert wave_quantization(9, 8)[1] == pytest.approx(9 / 16)
    assert wave_quantization(16, 8)[1] == 1.0
    assert wave_quantization(0, 8) == (0, 1.0)
    with pytest.raises(ValueError):
        wave_quantization(4, 0)


def test_gpu_wave_staircase_over_132_sms():
    assert wave_quantization(132, 132)[0] == 1
    assert wave_quantization(133, 132)[0] == 2
    assert wave_quantization(264, 132)[0] == 2


# -------------------------------------------------------------- lane usage

@pytest.mark.parametrize("extent,expected", [(4, 4 / 16), (16, 1.0), (24, 24 / 32), (1, 1 / 16), (0, 1 / 16)])
def test_lane_efficiency_avx512_fp32(extent, expected):
    lanes = cpu(vector_bits=512).lanes(32)
    assert lanes == 16
    assert lane_efficiency(extent, lanes) == pytest.approx(expected)


def test_lanes_per_dtype():
    hw = cpu(vector_bits=256)
    assert hw.lanes(32) == 8 and hw.lanes(16) == 16 and hw.lanes(64) == 4


def test_padded_work_ratio():
    # a tile of 8 over a loop of 30: 4 tiles execute 32 iterations
    assert padded_work_ratio(32, 30) == pytest.approx(32 / 30)
    assert padded_work_ratio(30, 30) == 1.0
    assert padded_work_ratio(10, 0) == 1.0


# ---------------------------------------------------------- cache cliffs

def test_cache_traffic_steps_when_footprint_crosses_capacity():
    # footprints[k]: one whole execution of loop k; trips[k]: how often loop k runs.
    # Outer loop of 64 iterations, each sweeping f_inner bytes with 100 points of 64 B.
    def traffic(f_inner, capacity):
        footprints = [64 * f_inner, f_inner, 64.0]
        trips = [1, 64, 64 * 100]
        return cache_traffic_bytes([footprints], trips, capacity)

    cap = 32 * 1024
    below = traffic(30 * 1024, cap)   # inner body fits: fetched once per outer trip
    above = traffic(34 * 1024, cap)   # no longer fits: fetched at the innermost level
    assert below == pytest.approx(64 * 30 * 1024)
    assert above == pytest.approx(64 * 100 * 64.0 if 64 * 100 * 64.0 > 64 * 34 * 1024 else 64 * 34 * 1024)
    # everything fits: compulsory traffic only
    assert traffic(1024, 1e9) == pytest.approx(64 * 1024)


def test_an_accumulator_the_inner_loops_do_not_move_is_fetched_once():
    """A 2,048-trip rolled loop streams 128 B of A per trip into a 128 B
    vector accumulator (read and written, 256 B) that every trip touches
    again: one execution of the loop body (384 B) fits a 32 KiB cache, so
    A costs 2,048 x 128 B and the accumulator its 256 B once, not 2,048
    times (the rfactor'd sum of squares of NRM_0, stop 23)."""
    trips = [1, 1, 2048]
    a = [256 * 1024.0, 256 * 1024.0, 128.0]
    acc = [256.0, 256.0, 256.0]
    assert cache_traffic_bytes([a, acc], trips, 32 * 1024) == pytest.approx(256 * 1024 + 256)
    # the summed footprint charged on every trip would be 2,048 x 384 B
    assert cache_traffic_bytes([[x + y for x, y in zip(a, acc)]], trips, 32 * 1024) == pytest.approx(2048 * 384)
    # an operand that moves at every trip (B, 64 B per trip, 128 KiB in all) is fetched at every trip
    b = [128 * 1024.0, 128 * 1024.0, 64.0]
    assert cache_traffic_bytes([a, acc, b], trips, 32 * 1024) == pytest.approx(2048 * (128 + 64) + 256)


def test_an_updated_accumulator_tile_occupies_the_cache_once():
    """A reduction loop of 32 trips updates a 1,024 B accumulator tile (read
    and written, 256 B a point, 4 points a trip) and streams a 64 B vector
    of B per trip: the tile and B's vector (1,088 B) fit a 2,048 B register
    file, so the tile is fetched and written back once (1,024 B each) and B
    costs 32 x 64 B. Counting the tile's read and write both against the
    capacity (2,112 B) would push it to the points: 128 x 256 B each way
    (stop 38, CBR_7's fastest schedule on the Intel CPU)."""
    trips = [1, 32, 128]
    acc = [1024.0, 1024.0, 256.0]
    b = [2048.0, 64.0, 64.0]
    assert cache_traffic_bytes([acc, acc, b], trips, 2048, held=[acc, b]) == pytest.approx(2 * 1024 + 32 * 64)
    assert cache_traffic_bytes([acc, acc, b], trips, 2048) == pytest.approx(2 * 128 * 256 + 32 * 64)


def test_a_register_tile_under_llvm_unrolled_loops_is_not_l1_traffic():
    """CBR_7's fastest record on the Intel CPU (index 53, 171 us measured):
    a 4 x 7 x 16 accumulator tile inside its reduction loop, the tile loops
    unrolled by LLVM. With the tile held once in the 32 zmm registers the
    estimate is compute-bound, as the measurement (FMA peak) says; counted
    twice it was memory-bound at 2.1x the measured time."""
    import os
    import warnings

    from tvm_latmodel.model.modes import estimate
    from tvm_latmodel.model.program import summarize
    from tvm_latmodel.replay import load_tasks

    log = os.path.join(os.path.dirname(__file__), "..", "tuning_logs", "cpu-rocketlake-te", "CBR_7")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (task,) = load_tasks(log)
    i = [r.index for r in task.records].index(53)
    est = estimate(summarize(task.candidates()[i].sch.mod, "cpu"), task.hardware)
    terms = est.terms()
    assert terms["memory_bound_fraction"] == 0.0
    assert terms["memory_s"] < terms["compute_s"]
    assert est.latency_s < task.records[i].latency_s


def test_block_estimate_steps_at_l1_and_l2_size():
    """A streaming block whose per-unit tile crosses L1 then L2: traffic moves to the slower level."""
    hw = cpu(cores=1, vector_bits=512, peak=1e6)  # huge peak: memory-bound

    def est(tile_bytes):
        inner_reuse = 64  # the tile is swept 64 times
        # one execution of each loop: the parallel loop, one reuse loop
        # and one sweep all touch the whole tile; a point touches 64 bytes
        fps = (tile_bytes * 1.0, tile_bytes * 1.0, tile_bytes * 1.0, 64.0)
        blk = BlockSummary(name="b", region=0,
                           loops=(Loop(1, "parallel"), Loop(inner_reuse, "serial"), Loop(int(tile_bytes // 64), "serial")),
                           work_points=inner_reuse * tile_bytes / 4, useful_points=inner_reuse * tile_bytes / 4,
                           ops_per_point=0.0, vector_extent=16, dtype_bits=32,
                           accesses=(Access("A", "global", 32, False, tile_bytes, fps),))
        prog = ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (blk,)),), 0, {"A": tile_bytes})
        return estimate(prog, hw)

    fits_l1 = est(16 * 1024).regions[0]
    over_l1 = est(64 * 1024).regions[0]
    over_l2 = est(2 * 1024 * 1024).regions[0]
    # fits in L1: 64 sweeps are served by L1, only the first pass comes from L2
    assert fits_l1.bound == "memory:L1"
    assert over_l1.bound == "memory:L2"
    assert over_l2.bound == "memory:L3"
    # time per byte swept rises at each cliff: 1/400 -> 1/200 -> 1/100 GB/s
    # (unit time, overhead excluded, over the 64 sweeps' bytes)
    per_byte = [r.unit_s / (64 * 16 * 1024 * m) for r, m in ((fits_l1, 1), (over_l1, 4), (over_l2, 128))]
    assert per_byte[0] == pytest.approx(1 / 400e9)
    assert per_byte[1] == pytest.approx(1 / 200e9)
    assert per_byte[2] == pytest.approx(1 / 100e9)


# -------------------------------------------------------------- roofline

def test_roofline_kink_between_compute_and_memory_bound():
    bw = {"DRAM": 10e9}
    # 1 GFLOP at 100 GFLOP/s = 10 ms; 50 MB at 10 GB/s = 5 ms -> compute-bound
    c, m, bound = roofline_time(1e9, 100e9, {"DRAM": 50e6}, bw)
    assert (c, m, bound) == (pytest.approx(0.01), pytest.approx(0.005), "compute")
    # 200 MB -> 20 ms: memory-bound; time is the max, not the sum
    c, m, bound = roofline_time(1e9, 100e9, {"DRAM": 200e6}, bw)
    assert bound == "memory:DRAM" and max(c, m) == pytest.approx(0.02)
    # the kink: arithmetic intensity = peak / bandwidth = 10 FLOP/byte
    c, m, _ = roofline_time(1e9, 100e9, {"DRAM": 100e6}, bw)
    assert c == pytest.approx(m)


def test_overlapped_time_by_hand():
    # 10 ms of compute, 4 ms of memory traffic
    assert overlapped_time(0.010, 0.004, 0.0) == 0.010  # the roofline: all hidden
    assert overlapped_time(0.010, 0.004, 1.0) == pytest.approx(0.014)  # nothing hidden
    assert overlapped_time(0.004, 0.010, 0.25) == pytest.approx(0.011)  # symmetric in c and m


def test_compute_tied_schedules_are_ordered_by_their_memory_traffic():
    """Two schedules with the same compute time, one moving 4x the bytes but
    still compute-bound: the CPU model ranks the lighter one first, and
    by no more than a tie-break (CPU_UNHIDDEN_FRACTION, stop 23)."""
    from tvm_latmodel.model.modes import CPU_UNHIDDEN_FRACTION

    hw = cpu(cores=1, vector_bits=512, peak=100.0)

    def est(nbytes):
        fps = (nbytes, nbytes, 4.0)
        blk = BlockSummary(name="mm", region=0, loops=(Loop(1, "parallel"), Loop(1_000_000, "serial")),
                           work_points=1e6, useful_points=1e6, ops_per_point=32.0, vector_extent=16,
                           dtype_bits=32, accesses=(Access("A", "global", 32, False, nbytes, fps),), fma_per_point=16.0)
        return estimate(ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (blk,)),), 0, {"A": nbytes}), hw)

    light, heavy = est(1e6), est(4e6)
    assert light.regions[0].bound == heavy.regions[0].bound == "compute"
    assert light.regions[0].compute_s == heavy.regions[0].compute_s
    assert light.latency_s < heavy.latency_s
    assert heavy.latency_s / light.latency_s - 1 < 1e-5
    assert 0 < CPU_UNHIDDEN_FRACTION <= 1e-6


def test_roofline_bound():
    hw = cpu(peak=100.0)
    assert roofline_bound_s(1e9, 1e6, hw) == pytest.approx(0.01)
    assert roofline_bound_s(1e3, 2e9, hw) == pytest.approx(0.1)


def test_task_bound_counts_the_parameters_once_at_the_bandwidth_that_serves_them():
    """64x64x64 float32 matmul: 2 * 64**3 = 524,288 FLOPs; parameters
    A, B, C 3 * 64 * 64 * 4 = 49,152 bytes. They fit the 16 MiB L3, so they
    move at its 100 GB/s; with a 32 KiB L3 they come from DRAM at 20 GB/s."""
    mod = square_matmul(64)
    assert task_bound_s(mod, cpu(peak=400.0)) == pytest.approx(524288 / 400e9)  # compute: 1.31 us > 0.49 us
    fast = cpu(peak=1e6)
    assert task_bound_s(mod, fast) == pytest.approx(49152 / 100e9)
    small_l3 = dataclasses.replace(fast, memory=fast.memory[:2] + (MemoryLevel("L3", 32 * 1024, 100.0, shared=True),
                                                                  fast.memory[3]))
    assert task_bound_s(mod, small_l3) == pytest.approx(49152 / 20e9)
    # a schedule of the task has the same bound
    assert task_bound_s(tiled_matmul_schedule(mod, 8, 16).mod, fast) == pytest.approx(49152 / 100e9)


# -------------------------------------------------------------- occupancy

def test_gpu_occupancy_limits():
    hw = HardwareSpec.from_preset("h200")
    # 256 threads, no smem, 32 regs: 2048/256 = 8 blocks by threads
    assert gpu_blocks_per_sm(256, 0, 32, hw) == (8, "threads")
    # 100 KiB shared memory per block: 228/100 = 2 blocks
    assert gpu_blocks_per_sm(128, 100 * 1024, 32, hw) == (2, "shared_memory")
    # 128 regs x 256 threads = 32768 -> 2 blocks by registers
    assert gpu_blocks_per_sm(256, 0, 128, hw) == (2, "registers")
    # registers alone never prevent a launch (the compiler spills)
    assert gpu_blocks_per_sm(1024, 0, 255, hw) == (1, "registers")
    # too much shared memory for one block: cannot launch
    assert gpu_blocks_per_sm(128, 300 * 1024, 32, hw)[0] == 0
    assert gpu_blocks_per_sm(2048, 0, 32, hw)[0] == 0


def test_compute_bound_block_time_by_hand():
    """One parallel region, 8 units on 4 cores, vectorized 8 of 16 lanes."""
    hw = cpu(cores=4, vector_bits=512, peak=400.0)
    blk = BlockSummary(name="mm", region=0, loops=(Loop(8, "parallel"), Loop(1000, "serial"), Loop(8, "vectorized")),
                       work_points=64000, useful_points=64000, ops_per_point=2.0, vector_extent=8, dtype_bits=32,
                       accesses=(), fma_per_point=1.0)
    prog = ProgramSummary("cpu", (Region(0, 8, 1, 0.0, 0.0, (blk,)),), 0, {})
    e = estimate(prog, hw)
    r = e.regions[0]
    # per unit 16000 FLOP at (100 GFLOP/s per core x 0.5 lanes) = 0.32 us; 2 waves
    assert r.waves == 2 and r.lane_efficiency == 0.5
    assert r.compute_s == pytest.approx(16000 / 50e9)
    assert e.latency_s == pytest.approx(5e-6 + 2 * 16000 / 50e9)
    assert math.isclose(e.flops, 128000)


def test_estimate_refuses_mismatched_hardware():
    prog = ProgramSummary("gpu", (), 0, {})
    with pytest.raises(ValueError, match="cannot be estimated"):
        estimate(prog, cpu())


# ------------------------------------------- vector code and accumulator chains

def test_gathered_operands_lane_by_lane_arithmetic_vector():
    # 16 lanes, n = 16, an FMA (2 ops), 2 contiguous and 1 gathered access:
    # per point 4 / 16 vector instructions + 1 insert, against 5 / 16 for a full vector
    assert gather_efficiency(16, 16, 2, 2, 1) == pytest.approx((5 / 16) / (4 / 16 + 1))
    assert gather_efficiency(16, 16, 2, 2, 1) == pytest.approx(0.25)
    # n = 8 on 16 lanes: the vector instructions cover 8 points each
    assert gather_efficiency(8, 16, 2, 2, 1) == pytest.approx((5 / 16) / (4 / 8 + 1))
    # no gather: the lane efficiency of a vector loop
    assert gather_efficiency(8, 16, 2, 2, 0) == pytest.approx(lane_efficiency(8, 16))
    # nothing vector: scalar speed
    assert gather_efficiency(16, 16, 0, 0, 3) == pytest.approx(1 / 16)
    # more gathered operands, slower; above scalar speed while some arithmetic is vector
    assert 1 / 16 < gather_efficiency(16, 16, 2, 0, 3) < gather_efficiency(16, 16, 2, 0, 1)


@pytest.mark.parametrize("extent,expected", [(1, 1 / 8), (8, 1.0), (16, 1.0), (12, 12 / (5 * 8)), (3, 3 / 16)])
def test_auto_vector_factor_is_a_power_of_two_with_scalar_remainder(extent, expected):
    assert auto_vector_efficiency(extent, 8) == pytest.approx(expected)


def test_chain_efficiency_needs_latency_times_pipes_accumulators():
    assert chain_efficiency(1, 4, 2) == pytest.approx(1 / 8)
    assert chain_efficiency(4, 4, 2) == pytest.approx(0.5)
    assert chain_efficiency(8, 4, 2) == 1.0 and chain_efficiency(40, 4, 2) == 1.0
    assert chain_efficiency(2, latency_cycles=3, pipes=1) == pytest.approx(2 / 3)
    # Zen 2's 5-cycle FMA needs 10 chains
    assert chain_efficiency(8, 5, 2) == pytest.approx(0.8)


def test_register_spill_beyond_the_register_file():
    assert register_spill_efficiency(14, 16, 0.5) == 1.0  # 16 registers - 2 operands
    # 30 accumulators on 14 free registers: the whole tile at the in-memory
    # rate (0.5), times the share that fits (14 / 30)
    assert register_spill_efficiency(30, 16, 0.5) == pytest.approx(0.5 * 14 / 30)
    # one accumulator too many is already the cliff
    assert register_spill_efficiency(15, 16, 0.5) == pytest.approx(0.5 * 14 / 15)
    # AVX-512's 32 registers keep all 30
    assert register_spill_efficiency(30, 32, 0.5) == 1.0
    # a file the operands fill (a valid spec of 2 vector registers) still
    # keeps the accumulator an FMA is using: finite, not zero
    assert register_spill_efficiency(4, 2, 0.5) == pytest.approx(0.5 * 1 / 4)


def test_memory_accumulators_are_bound_by_stores():
    assert memory_accumulator_efficiency(1, 2) == 0.5
    assert memory_accumulator_efficiency(2, 2) == 1.0


def test_instruction_mix_add_and_max_against_their_own_peak():
    # C += A * B: one FMA for 2 FLOP -> the FMA peak
    assert instruction_mix_factor(2.0, 1.0, 2, 2) == pytest.approx(1.0)
    # max(C, A) or C + A: 1 op per instruction -> twice the time of the FLOP peak
    assert instruction_mix_factor(1.0, 0.0, 2, 2) == pytest.approx(2.0)
    # 1 FMA + 1 add per point, 2 FMA pipes, 1 add pipe:
    # cycles 1/2 + 1/1 = 1.5 against 3 / 4 at peak -> 2.0
    assert instruction_mix_factor(3.0, 1.0, 2, 1) == pytest.approx(2.0)
    assert instruction_mix_factor(0.0, 0.0, 2, 2) == 1.0


def test_parallel_scaling_single_core_against_all_cores():
    hw = dataclasses.replace(
        cpu(cores=4, peak=400.0), single_core_peak_gflops=130.0,
        memory=(MemoryLevel("L1", 32 * 1024, 1000.0), MemoryLevel("DRAM", 1e12, 40.0, shared=True,
                                                                 single_core_bandwidth_gbps=25.0)))
    # alone: turbo 130 GFLOP/s and 25 GB/s; all four: 100 each and 10 each
    assert hw.core_peak_gflops(1) == 130.0 and hw.core_peak_gflops(4) == 100.0
    assert hw.core_bandwidth_gbps(hw.memory[1], 1) == 25.0
    assert hw.core_bandwidth_gbps(hw.memory[1], 2) == 20.0
    assert hw.core_bandwidth_gbps(hw.memory[1], 4) == 10.0
    # a private level: always the core's own share
    assert hw.core_bandwidth_gbps(hw.memory[0], 1) == 250.0
    # uncalibrated: alone is no faster than a share
    plain = cpu(cores=4, peak=400.0)
    assert plain.core_peak_gflops(1) == 100.0


def test_one_unit_streams_at_single_core_bandwidth():
    """A memory-bound region with one unit on 4 cores reads DRAM at the single-core rate."""
    hw = dataclasses.replace(
        cpu(cores=4, peak=400.0),
        memory=(MemoryLevel("L1", 32 * 1024, 1000.0), MemoryLevel("DRAM", 1e12, 40.0, shared=True,
                                                                 single_core_bandwidth_gbps=25.0)))
    n = 1 << 24  # 64 MiB streamed once
    acc = Access("A", "global", 32, False, 4.0 * n, (4.0 * n, 4.0))
    blk = BlockSummary(name="copy", region=0, loops=(Loop(n, "serial"),), work_points=n, useful_points=n,
                       ops_per_point=0.0, vector_extent=0, dtype_bits=32, accesses=(acc,))
    one = estimate(ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (blk,)),), 0, {"A": 4.0 * n}), hw)
    assert one.regions[0].memory_s == pytest.approx(4.0 * n / 25e9)


def _reduction_block(accumulators, chain, lanes=16, unrolled=True):
    """A vectorized reduction: ``accumulators`` vectors of ``lanes`` inside a reduction of ``chain``
    (the accumulator loop unrolled into a register tile, or left rolled)."""
    loops = (Loop(1, "parallel"), Loop(chain, "serial"), Loop(accumulators, "serial", "tvm" if unrolled else ""),
             Loop(lanes, "vectorized"))
    pts = chain * accumulators * lanes
    return BlockSummary(name="r", region=0, loops=loops, work_points=pts, useful_points=pts, ops_per_point=2.0,
                        fma_per_point=1.0, vector_extent=lanes, dtype_bits=32, accesses=(), reduce_level=2,
                        chain_length=float(chain))


def test_one_long_accumulator_chain_is_eight_times_slower():
    hw = cpu(cores=1, vector_bits=512, peak=100.0)
    t = {}
    for acc in (1, 8):
        blk = _reduction_block(acc, chain=4096)
        prog = ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (blk,)),), 0, {})
        t[acc] = estimate(prog, hw).regions[0].compute_s / acc  # per accumulator vector
    assert t[1] / t[8] == pytest.approx(8.0)


def test_a_rolled_accumulator_loop_keeps_the_tile_in_memory():
    """8 accumulator vectors: unrolled they fill the pipes; left rolled, every
    FMA loads and stores its accumulator (1 store per cycle, 2 FMA pipes: half speed)."""
    hw = cpu(cores=1, vector_bits=512, peak=100.0)
    eff = {}
    for unrolled in (True, False):
        blk = _reduction_block(8, chain=4096, unrolled=unrolled)
        prog = ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (blk,)),), 0, {})
        eff[unrolled] = estimate(prog, hw).regions[0].lane_efficiency
    assert eff[True] == 1.0 and eff[False] == pytest.approx(0.5)


def test_short_chains_overlap_in_the_out_of_order_window():
    hw = cpu(cores=1, vector_bits=512, peak=100.0)
    # one accumulator, but only 4 dependent updates before the next one:
    # 64 / 4 = 16 chains in flight, the pipes stay full
    blk = _reduction_block(1, chain=4)
    prog = ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (blk,)),), 0, {})
    r = estimate(prog, hw).regions[0]
    assert r.lane_efficiency == 1.0


def test_warm_last_level_cache_serves_programs_that_fit():
    hw = cpu()  # 16 MiB L3
    assert warm_in_last_cache(8 * 2**20, hw)
    assert not warm_in_last_cache(32 * 2**20, hw)

    def bound(nbytes):
        fps = (nbytes, nbytes, 64.0)
        blk = BlockSummary(name="copy", region=0, loops=(Loop(1, "parallel"), Loop(int(nbytes // 64), "serial")),
                           work_points=nbytes / 4, useful_points=nbytes / 4, ops_per_point=0.0, vector_extent=16,
                           dtype_bits=32, accesses=(Access("A", "global", 32, False, nbytes, fps),))
        prog = ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (blk,)),), 0, {"A": nbytes})
        return estimate(prog, hw).regions[0].bound

    assert bound(8 * 2**20) == "memory:L3"
    assert bound(64 * 2**20) == "memory:DRAM"


def test_libm_calls_keep_the_block_scalar_and_cost_measured_cycles():
    """exp(x - y) over 4096 points on one core of 100 GFLOP/s, AVX-512 (16 lanes), 2 FMA pipes:
    the core's clock is 100e9 / (2 * 2 * 16) = 1.5625 GHz; the call costs 6 cycles per
    point (the default: one expf); the subtract is 1 op, scalar (1/16 of the lanes) and
    an add (half the FMA peak): 4096 * 6 / 1.5625e9 + 4096 * 1 * 16 * 2 / 100e9 seconds."""
    hw = cpu(cores=4, vector_bits=512, peak=400.0)
    assert hw.libm_call_cycles == 6.0
    n = 4096
    blk = BlockSummary(name="exp", region=0, loops=(Loop(n, "serial"),), work_points=n, useful_points=n,
                       ops_per_point=9.0, vector_extent=16, dtype_bits=32, accesses=(),
                       libm_calls_per_point=1.0, libm_cost_per_point=1.0)
    est = estimate(ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (blk,)),), 0, {}), hw)
    expected = n * 6 / 1.5625e9 + n * 1 * 16 * 2 / 100e9
    assert est.regions[0].compute_s == pytest.approx(expected)
    # the same block without the call (9 vectorizable ops) is far faster
    plain = dataclasses.replace(blk, libm_calls_per_point=0.0, libm_cost_per_point=0.0)
    est_plain = estimate(ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (plain,)),), 0, {}), hw)
    assert est_plain.regions[0].compute_s < expected / 10
    # a machine whose libm is twice as slow per call
    slow = dataclasses.replace(hw, libm_call_cycles=12.0)
    est_slow = estimate(ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (blk,)),), 0, {}), slow)
    assert est_slow.regions[0].compute_s == pytest.approx(expected + n * 6 / 1.5625e9)
    # erf instead of exp: one call costing 3.5 exp calls
    erf = dataclasses.replace(blk, libm_cost_per_point=3.5)
    est_erf = estimate(ProgramSummary("cpu", (Region(0, 1, 1, 0.0, 0.0, (erf,)),), 0, {}), hw)
    assert est_erf.regions[0].compute_s == pytest.approx(expected + n * 2.5 * 6 / 1.5625e9)
