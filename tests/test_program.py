"""Program summaries on real TVM schedules, CPU and CUDA (no GPU needed)."""

import dataclasses

import pytest
import tvm
from tvm import te

from tvm_latmodel.hardware import HardwareSpec
from tvm_latmodel.model.modes import _cpu_efficiency, _slp_extent, estimate
from tvm_latmodel.model.program import SummaryError, parameter_bytes, summarize
from tvm_latmodel.sampling import sample_schedules
from tvm_latmodel.targets import cuda_target
from tvm_latmodel.workloads import RECORDED_WORKLOADS, get_workload

CPU = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 4})
GPU = cuda_target("h200")


def _matmul(n=64, m=64, k=64):
    a = te.placeholder((n, k), name="A")
    b = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def test_hand_schedule_numbers():
    """Split, parallel and vectorize a 64x64x64 matmul by hand and check every number."""
    sch = tvm.s_tir.Schedule(_matmul())
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [8, 8])
    j0, j1 = sch.split(j, [4, 16])
    sch.reorder(i0, j0, i1, k, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    ps = summarize(sch.mod, "cpu")
    assert len(ps.regions) == 1
    region = ps.regions[0]
    assert region.units == 8
    (b,) = region.blocks
    assert b.vector_extent == 16
    assert b.useful_points == 64 * 64 * 64 and b.work_points == 64 * 64 * 64
    assert ps.flops == 2 * 64**3
    assert [lp.kind for lp in b.loops] == ["parallel", "serial", "serial", "serial", "vectorized"]
    fp = {a.buffer: a.footprint_bytes for a in b.accesses if not a.is_write}
    # one point: 4 bytes of A and of B; one vectorized j1 loop: 16 floats of B, 1 of A
    assert fp["A"][-1] == 4 and fp["B"][-1] == 4
    assert fp["B"][4] == 16 * 4 and fp["A"][4] == 4
    # one k loop (all of k, one i1, 16 j): A row 64 floats, B 64x16 panel
    assert fp["A"][3] == 64 * 4 and fp["B"][3] == 64 * 16 * 4
    # whole program: the buffers
    assert fp["A"][0] == 64 * 64 * 4 and fp["B"][0] == 64 * 64 * 4
    assert ps.held_bytes() == 3 * 64 * 64 * 4


def test_two_buffers_with_one_name_are_both_counted():
    """A depthwise conv's input and weight are both ``placeholder`` (te's
    default name). ``C[i, j] = A[i, j] * W[j]`` on 64x64 float32 with both
    inputs so named holds A 16,384 + W 256 + C 16,384 = 33,024 bytes."""
    a = te.placeholder((64, 64), name="placeholder")
    w = te.placeholder((64,), name="placeholder")
    c = te.compute((64, 64), lambda i, j: a[i, j] * w[j], name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([a, w, c])})
    s = summarize(mod, "cpu")
    assert parameter_bytes(mod) == 33024
    assert s.held_bytes() == 33024
    assert sorted(s.buffer_bytes) == ["C", "placeholder", "placeholder#2"]


def test_a_parameter_of_dynamic_shape_is_refused_by_name():
    n = te.var("n", "int64")
    a = te.placeholder((n, 4), name="A")
    b = te.compute((n, 4), lambda i, j: a[i, j] * 2.0, name="B")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b])})
    with pytest.raises(SummaryError, match="parameter A has a dynamic shape"):
        parameter_bytes(mod)


def test_intermediates_are_held_at_the_size_tvm_compacts_them_to():
    """A cache-write buffer written back under the parallel loop is
    allocated there, one 8x64 tile per parallel iteration (as TVM's
    PlanAndUpdateBufferAllocationLocation + CompactBufferAllocation do),
    not at its declared 64x64."""
    from tvm import s_tir

    sch = tvm.s_tir.Schedule(_matmul())
    blk = sch.get_sblock("C")
    cw = sch.cache_write(blk, 0, "global")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [8, 8])
    sch.parallel(i0)
    sch.reverse_compute_at(cw, i0)
    ps = summarize(sch.mod, "cpu")
    inter = next(n for n in ps.buffer_bytes if n not in ("A", "B", "C"))
    assert ps.buffer_bytes[inter] == 8 * 64 * 4
    assert ps.buffer_copies == {inter: 8}
    params = 3 * 64 * 64 * 4
    assert ps.held_bytes(1) == params + 8 * 64 * 4
    assert ps.held_bytes(4) == params + 4 * 8 * 64 * 4  # four cores: four tiles alive
    assert ps.held_bytes(16) == params + 8 * 8 * 64 * 4  # never more than the 8 iterations
    # TVM's own passes agree on the tile
    lowered = tvm.ir.transform.Sequential([
        s_tir.transform.LowerInitBlock(), s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(), s_tir.transform.CompactBufferAllocation()])(sch.mod)
    assert f"{inter} = T.sblock_alloc_buffer((8, 64))" in lowered.script()


def test_a_compacted_intermediate_touches_no_more_than_its_allocation():
    """B = 2X computed at the 8-column tile of C = B + 1 (64x64 floats): TVM
    compacts B to one 8-float tile inside C's (i, j0) loops, reused by every
    tile. Its footprint at every loop level is at most those 32 bytes (not
    the 64x64 or 64-float span its indices cover); X and C are parameters
    and keep theirs."""
    x = te.placeholder((64, 64), name="X")
    b = te.compute((64, 64), lambda i, j: x[i, j] * 2.0, name="B")
    c = te.compute((64, 64), lambda i, j: b[i, j] + 1.0, name="C")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([x, c])}))
    i, j = sch.get_loops(sch.get_sblock("C"))
    j0, j1 = sch.split(j, [8, 8])
    sch.compute_at(sch.get_sblock("B"), j0)
    ps = summarize(sch.mod, "cpu")
    assert ps.buffer_bytes["B"] == 8 * 4
    fps = {(blk.name, a.buffer): a.footprint_bytes for blk in ps.blocks for a in blk.accesses}
    # loops i (64), j0 (8), then the block's own 8-wide loop, then one point
    assert fps[("B", "B")] == (32, 32, 32, 4)  # uncapped: 64*64*4, 64*4, 8*4, 4
    assert fps[("C", "B")] == (32, 32, 32, 4)
    assert fps[("B", "X")] == (64 * 64 * 4, 64 * 4, 8 * 4, 4)
    assert fps[("C", "C")] == (64 * 64 * 4, 64 * 4, 8 * 4, 4)
    # TVM's own passes allocate B as that one tile
    from tvm import s_tir

    lowered = tvm.ir.transform.Sequential([
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(), s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.CompactBufferAllocation()])(sch.mod)
    assert "B = T.sblock_alloc_buffer((1, 8))" in lowered.script()


def _tiled_matmul(vector_axis="j"):
    """64^3 matmul: i0 (parallel) j0 i1 k j1, with j1 or i1 vectorized (or none)."""
    sch = tvm.s_tir.Schedule(_matmul())
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [8, 8])
    j0, j1 = sch.split(j, [4, 16])
    if vector_axis == "i":
        sch.reorder(i0, j0, j1, k, i1)
        sch.vectorize(i1)
    else:
        sch.reorder(i0, j0, i1, k, j1)
        if vector_axis == "j":
            sch.vectorize(j1)
    sch.parallel(i0)
    sch.decompose_reduction(blk, k)
    return summarize(sch.mod, "cpu")


def test_reduction_level_chain_and_accumulators():
    ps = _tiled_matmul("j")
    upd = [b for b in ps.blocks if b.name == "C_update"][0]
    # loops i0 j0 i1 k j1: k (level 4) is the innermost reduction loop; its
    # chain is 64 updates (i1 outside it is spatial); 16 accumulators inside
    assert upd.reduce_level == 4
    assert upd.chain_length == 64
    assert upd.accumulator_points == 16
    # A is invariant along j1, B and C contiguous: no gather; the vector
    # loads/stores are C's read and write and B's read
    assert upd.vector_gathers == 0 and upd.vector_accesses == 3
    init = [b for b in ps.blocks if b.name == "C_init"][0]
    assert init.reduce_level == 0 and init.accumulator_points == 0


def test_vectorizing_along_rows_gathers():
    upd = [b for b in _tiled_matmul("i").blocks if b.name == "C_update"][0]
    # along i1: A[i, k] and C[i, j] move by 64 elements per lane
    assert upd.vector_gathers >= 2


def test_llvm_auto_vectorizes_a_contiguous_innermost_loop():
    upd = [b for b in _tiled_matmul(None).blocks if b.name == "C_update"][0]
    assert upd.vector_extent == 0 and upd.auto_vector_extent == 16
    # with the reduction innermost, LLVM keeps the sum in order: no vector code
    sch = tvm.s_tir.Schedule(_matmul())
    ps = summarize(sch.mod, "cpu")  # loops i j k: k innermost
    assert ps.blocks[0].auto_vector_extent == 0


def test_padded_work_from_non_divisible_split():
    sch = tvm.s_tir.Schedule(_matmul(60, 64, 64))
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    sch.split(i, [None, 16])  # 4 x 16 = 64 iterations over 60 rows
    ps = summarize(sch.mod, "cpu")
    b = ps.blocks[0]
    assert b.work_points / b.useful_points == pytest.approx(64 / 60)


def test_no_loops_is_a_serial_region():
    a = te.placeholder((), name="a")
    b = te.compute((), lambda: a[()] + 1.0, name="b")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b])})
    ps = summarize(mod, "cpu")
    assert ps.regions[0].index == -1 and ps.flops == 1
    est = estimate(ps, HardwareSpec.from_target(CPU))
    assert 0 < est.latency_s < 1e-5


def test_cuda_schedule_without_thread_binding_is_refused():
    sch = tvm.s_tir.Schedule(_matmul())
    with pytest.raises(SummaryError, match="without thread bindings"):
        summarize(sch.mod, "gpu")


def test_bad_target_kind():
    with pytest.raises(ValueError, match="target_kind"):
        summarize(_matmul(), "tpu")
    with pytest.raises(ValueError, match="no hardware model for target kind 'c'"):
        HardwareSpec.from_target(tvm.target.Target({"kind": "c"}))


@pytest.mark.parametrize("name", RECORDED_WORKLOADS + ["R18:1"])
def test_every_workload_family_cpu_and_cuda(name):
    """One sampled schedule of each te_workload family (its smallest shape), for llvm and for cuda."""
    mod = get_workload(name)
    flops = tvm.s_tir.analysis.estimate_tir_flops(mod)
    for target, kind in ((CPU, "cpu"), (GPU, "gpu")):
        # some CUDA spaces (DEP) pass VerifyGPUCode in ~1% of draws
        (sch,) = sample_schedules(mod, target, 1, seed=3, max_failures=3000)
        ps = summarize(sch.mod, kind)
        hw = HardwareSpec.from_target(target)
        est = estimate(ps, hw)
        # finite and below a minute: SFM:3's draw recomputes each row's exp
        # for every output element (8.6e9 scalar expf calls, about 15 s on 4 cores)
        assert est.latency_s > 0 and est.latency_s < 60
        assert all(r.units >= 1 for r in ps.regions)
        if kind == "gpu":
            assert all(r.threads_per_unit >= 1 for r in ps.regions)
        # our FLOP count follows TVM's own estimate of the unscheduled
        # workload; it weighs a transcendental (exp in softmax) as 8
        # operations where TVM counts 1, and a GPU softmax that inlines exp
        # into two blocks computes it twice
        if flops > 0:
            assert 0.5 < ps.flops / flops < 8, (name, kind, ps.flops, flops)


# ------------------------------------------- unrolling, as the compiler does it

def _depthwise(c=64):
    """NHWC-style 3x3 depthwise conv on an 8x8 map: loops h, w, c, kh, kw."""
    x = te.placeholder((10, 10, c), name="X")
    w = te.placeholder((3, 3, c), name="W")
    kh = te.reduce_axis((0, 3), name="kh")
    kw = te.reduce_axis((0, 3), name="kw")
    y = te.compute((8, 8, c), lambda h, ww, cc: te.sum(x[h + kh, ww + kw, cc] * w[kh, kw, cc], axis=[kh, kw]),
                   name="Y")
    return tvm.IRModule({"main": te.create_prim_func([x, w, y])})


def _lower_through_unroll(mod):
    """TVM's own default TIR passes up to and including UnrollLoop."""
    from tvm import s_tir, tirx

    passes = [s_tir.transform.CanonicalizeLoop(), s_tir.transform.LowerInitBlock(),
              s_tir.transform.PlanAndUpdateBufferAllocationLocation(), s_tir.transform.ConvertBlocksToOpaque(),
              s_tir.transform.CompactBufferAllocation(), s_tir.transform.LowerMatchBuffer(),
              s_tir.transform.StmtSimplify(), s_tir.transform.LowerOpaqueBlock(), tirx.transform.FlattenBuffer(),
              tirx.transform.VectorizeLoop(True), tirx.transform.UnrollLoop()]
    return tvm.ir.transform.Sequential(passes)(mod)


def _rolled_loop_names(mod) -> set:
    import re

    text = str(mod["main"])
    names = set(re.findall(r"for (\w+) in T\.\w+\(", text)) | set(re.findall(r"for (\w+) in range\(", text))
    for grid in re.findall(r"for ([\w, ]+) in T\.grid\(", text):
        names |= {n.strip() for n in grid.split(",")}
    return names


def _depthwise_rolled(step: int, vectorize_channels: bool) -> tuple[set, set]:
    """The depthwise conv's loops left rolled at an auto-unroll ``step``, by
    the model's replay and by TVM's own passes; with ``vectorize_channels``
    the channel loop is moved innermost and vectorized (and not counted)."""
    sch = tvm.s_tir.Schedule(_depthwise())
    h, ww, cc, kh, kw = sch.get_loops(sch.get_sblock("Y"))
    names = ("h", "ww", "cc", "kh", "kw")
    if vectorize_channels:
        sch.reorder(h, ww, kh, kw, cc)
        sch.vectorize(cc)
        names = ("h", "ww", "kh", "kw", "cc")
    sch.parallel(h)
    sch.annotate(h, "pragma_auto_unroll_max_step", step)
    sch.annotate(h, "pragma_unroll_explicit", 1)
    b = summarize(sch.mod, "cpu").blocks[0]
    ours = {name for name, lp in zip(names, b.loops) if lp.unrolled_by != "tvm" and lp.kind != "vectorized"}
    return ours, _rolled_loop_names(_lower_through_unroll(sch.mod))


@pytest.mark.parametrize("step", [0, 3, 6, 18, 1024])
def test_unroll_verdicts_match_tvms_unroll_pass(step):
    """Which loops TVM's UnrollLoop unrolls, for auto-unroll steps around the
    thresholds: kw (3 copies of init-if + update = 6 statements) and kh
    (3 x 6 = 18) — compared with TVM lowering the same schedule."""
    ours, tvms = _depthwise_rolled(step, vectorize_channels=False)
    assert ours == tvms
    expected_rolled = {0: {"h", "ww", "cc", "kh", "kw"}, 3: {"h", "ww", "cc", "kh", "kw"},
                       6: {"h", "ww", "cc", "kh"}, 18: {"h", "ww", "cc"}, 1024: {"h", "ww", "cc"}}[step]
    assert ours == expected_rolled


_KNOWN_DIVERGENCE = pytest.mark.xfail(
    strict=True, reason="known: the unroll replay counts a vectorized loop as a rolled loop; TVM vectorizes first. "
    "Replaying TVM's order lowered held-out ranking (benchmarks/modes/PROTOCOL_stop22.md), so it is not fixed")


@pytest.mark.parametrize("step", [0, 2, pytest.param(6, marks=_KNOWN_DIVERGENCE),
                                  pytest.param(18, marks=_KNOWN_DIVERGENCE), pytest.param(1024, marks=_KNOWN_DIVERGENCE)])
def test_a_vectorized_loop_does_not_stop_the_unroller(step):
    """TVM vectorizes before it unrolls: with the channel loop innermost and
    vectorized, kw and kh are unrolled as if it were one statement (the
    update and the init's if: 2 statements; kw 3 x 2 = 6; kh 3 x 6 = 18),
    as TVM's own passes do it (at 1024, ww too: 8 x 18 statements).
    The model's replay does not (strict xfail: this test fails the day it
    does, and the marks must then go)."""
    ours, tvms = _depthwise_rolled(step, vectorize_channels=True)
    assert ours == tvms
    expected_rolled = {0: {"h", "ww", "kh", "kw"}, 2: {"h", "ww", "kh", "kw"}, 6: {"h", "ww", "kh"},
                       18: {"h", "ww"}, 1024: {"h"}}[step]
    assert ours == expected_rolled


def test_llvm_vectorizes_the_channel_loop_outside_unrolled_taps():
    """The depthwise case of issue 10: with kh and kw unrolled, the 64-wide
    channel loop is innermost, contiguous in X, W and Y: LLVM's loop
    vectorizer turns it into vector code (it used to be scored as scalar)."""
    sch = tvm.s_tir.Schedule(_depthwise())
    h, ww, cc, kh, kw = sch.get_loops(sch.get_sblock("Y"))
    sch.parallel(h)
    sch.annotate(h, "pragma_auto_unroll_max_step", 64)
    b = summarize(sch.mod, "cpu").blocks[0]
    assert b.innermost_loop == 2 and b.auto_vector_extent == 64
    # the same nest with the channel loop outermost: kw innermost is a
    # reduction, nothing to vectorize
    sch2 = tvm.s_tir.Schedule(_depthwise())
    h, ww, cc, kh, kw = sch2.get_loops(sch2.get_sblock("Y"))
    sch2.reorder(cc, h, ww, kh, kw)
    assert summarize(sch2.mod, "cpu").blocks[0].auto_vector_extent == 0


def _max_pool(k=2, w=64, rows=16):
    x = te.placeholder((4, rows, w), name="X")
    rh = te.reduce_axis((0, k), name="rh")
    rw = te.reduce_axis((0, k), name="rw")
    y = te.compute((4, (rows - k) // 2 + 1, (w - k) // 2 + 1),
                   lambda n, i, j: te.max(x[n, 2 * i + rh, 2 * j + rw], axis=[rh, rw]), name="Y")
    return tvm.IRModule({"main": te.create_prim_func([x, y])})


def _pool_taps_unrolled(k=2, w=64, unroll_body=False):
    sch = tvm.s_tir.Schedule(_max_pool(k, w))
    n, i, j, rh, rw = sch.get_loops(sch.get_sblock("Y"))
    if unroll_body:
        sch.parallel(sch.fuse(n, i))
        sch.unroll(j)
    sch.unroll(rh)
    sch.unroll(rw)
    (b,) = summarize(sch.mod, "cpu").blocks
    return b


def test_llvm_loads_complete_stride_2_groups_interleaved():
    """Max pooling 2x2/2, taps unrolled: along the rolled output-column loop
    (32 columns: 32 x 4 copies x (1 op + 2 accesses + 1) = 512 > 300, so
    LLVM keeps it rolled) X moves by 2 elements, and the unrolled taps of
    each window row read offsets {0, 1} and {W, W+1}: complete interleave
    groups of factor 2, which LLVM's loop vectorizer loads with wide loads
    and shuffles (``strided_vectorizer_check.md``: 0 gathers, 64 packed
    max on znver4, 128 on znver3). The block counts as vectorized 32 wide."""
    b = _pool_taps_unrolled(k=2, w=64)
    assert not b.loops[2].unrolled and b.loops[2].extent == 32
    assert b.vector_extent == 0 and b.auto_vector_extent == 32 and b.vector_gathers == 0


def test_incomplete_or_far_strided_groups_stay_scalar():
    """3x3/2 pooling: the taps read offsets {0, 1, 2} at stride 2, a group
    with an extra member (a gap in the next): not counted as vectorized.
    With the body unrolled inside the parallel loop, X moves by two rows
    (64 elements) along the only rolled loop: gathered, lane by lane, and
    left scalar by the model."""
    b = _pool_taps_unrolled(k=3, w=65)
    assert not b.loops[2].unrolled and b.loops[2].extent == 32 and b.auto_vector_extent == 0
    assert _pool_taps_unrolled(k=2, w=16, unroll_body=True).auto_vector_extent == 0


def test_llvm_fully_unrolls_small_rolled_loops():
    """A rolled 3-tap loop (cost 3 x (2 ops + 4 accesses + 1) = 21 <= 300)
    is unrolled by LLVM; the 64-wide channel loop (64 x 9 x 7) is not."""
    sch = tvm.s_tir.Schedule(_depthwise())
    b = summarize(sch.mod, "cpu").blocks[0]  # no auto-unroll at all
    assert [lp.unrolled_by for lp in b.loops] == ["", "", "", "llvm", "llvm"]


def test_register_tile_needs_unrolled_accumulator_loops():
    """64^3 matmul, loops i0 j0 i1 k j1 (j1 vectorized): the 8-row tile i1
    sits outside k, so the accumulators are the 16-wide vector (in
    registers). With i1 moved inside k and left rolled (extent 64, too big
    for LLVM to unroll), the accumulators go through memory."""
    ps = _tiled_matmul("j")
    upd = [b for b in ps.blocks if b.name == "C_update"][0]
    assert upd.accumulators_in_registers
    sch = tvm.s_tir.Schedule(_matmul())
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    j0, j1 = sch.split(j, [4, 16])
    sch.reorder(j0, k, i, j1)
    sch.vectorize(j1)
    b = summarize(sch.mod, "cpu").blocks[0]
    assert b.loops[2].extent == 64 and not b.loops[2].unrolled and not b.accumulators_in_registers


def test_fma_count_for_multiply_add_and_max():
    ps = _tiled_matmul("j")
    upd = [b for b in ps.blocks if b.name == "C_update"][0]
    assert upd.ops_per_point == 2 and upd.fma_per_point == 1
    x = te.placeholder((64, 64), name="X")
    r = te.reduce_axis((0, 64), name="r")
    m = te.compute((64,), lambda i: te.max(x[i, r], axis=r), name="M")
    b = summarize(tvm.IRModule({"main": te.create_prim_func([x, m])}), "cpu").blocks[0]
    assert b.ops_per_point == 1 and b.fma_per_point == 0


def test_avx512_target_has_32_vector_registers():
    assert HardwareSpec.from_target(CPU).vector_registers == 32
    avx2 = tvm.target.Target({"kind": "llvm", "mcpu": "znver3", "num-cores": 2})
    spec = HardwareSpec.from_target(avx2)
    assert spec.vector_registers == 16 and spec.fma_latency_cycles == 4
    assert HardwareSpec.from_target(tvm.target.Target({"kind": "llvm", "mcpu": "znver2"})).fma_latency_cycles == 5


def test_tensorized_block_counts_its_work():
    """An int8 dense tensorized with TVM's AVX-512 VNNI dot product (16x4):
    each point of the tensorized block runs 16 x 4 = 64 multiply-adds
    (sqrt(4 * 64 * 16) from its regions), so the program's work equals the
    untensorized one's, 2 * 4 * 32 * 16 = 4096 operations, not zero."""
    from tvm.s_tir.tensor_intrin.x86 import VNNI_DOT_16x4_INTRIN

    def dense_u8i8(m=4, n=32, k=16):
        a = te.placeholder((m, k), "uint8", name="A")
        b = te.placeholder((n, k), "int8", name="B")
        r = te.reduce_axis((0, k), name="k")
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r].astype("int32") * b[j, r].astype("int32"), axis=r),
                       name="C")
        return tvm.IRModule({"main": te.create_prim_func([a, b, c])})

    sch = tvm.s_tir.Schedule(dense_u8i8())
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i, j0, k0, j1, k1)
    sch.decompose_reduction(blk, k0)
    sch.tensorize(j1, VNNI_DOT_16x4_INTRIN)
    ps = summarize(sch.mod, "cpu")
    (upd,) = [b for b in ps.blocks if b.name == "C_update_o"]
    assert upd.useful_points == 4 * 2 * 4
    assert upd.ops_per_point == 128 and upd.fma_per_point == 64 and upd.vector_extent == 16
    assert ps.flops == summarize(dense_u8i8(), "cpu").flops == 2 * 4 * 32 * 16


@pytest.mark.parametrize("fn,calls,cost", [
    (lambda x, y: te.exp(x - y), 1, 1.0),            # softmax's exp
    (lambda x, y: te.exp(x) + te.exp(y), 2, 2.0),    # recomputed twice per point
    (lambda x, y: te.tanh(x) * y, 1, 2.4),           # GELU's tanh: one expf and the formula around it
    (lambda x, y: te.erf(x) + te.log(y), 2, 4.6),    # erff 3.5 + logf 1.1 expf-equivalents
    (lambda x, y: te.sqrt(x) + y, 0, 0.0),           # vsqrtps: no libm call
    (lambda x, y: x * y + 1.0, 0, 0.0),
])
def test_libm_calls_per_point(fn, calls, cost):
    """The intrinsics TVM's LLVM codegen emits as scalar libm calls
    (scripts/check_libm_calls.py reads them off the assembly) are counted per point."""
    x = te.placeholder((64,), name="X")
    y = te.placeholder((64,), name="Y")
    out = te.compute((64,), lambda i: fn(x[i], y[i]), name="O")
    b = summarize(tvm.IRModule({"main": te.create_prim_func([x, y, out])}), "cpu").blocks[0]
    assert b.libm_calls_per_point == calls
    assert b.libm_cost_per_point == pytest.approx(cost)


def _tree_interval(expr, ranges):
    """Reference: interval arithmetic over the TVM expression tree itself,
    one operator at a time (what the compiled form must reproduce)."""
    name = type(expr).__name__
    if name == "IntImm":
        return (int(expr.value), int(expr.value))
    if name == "Var":
        return ranges[expr.name]
    a, b = _tree_interval(expr.a, ranges), _tree_interval(expr.b, ranges)
    if name == "Add":
        return (a[0] + b[0], a[1] + b[1])
    if name == "Sub":
        return (a[0] - b[1], a[1] - b[0])
    if name == "Mul":
        c = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
        return (min(c), max(c))
    if name == "FloorDiv":
        return (a[0] // b[0], a[1] // b[0])
    if name == "FloorMod":
        return (a[0] % b[0], a[1] % b[0]) if a[0] // b[0] == a[1] // b[0] else (0, b[0] - 1)
    raise AssertionError(name)


def test_compiled_sums_give_the_trees_interval():
    """Sums compile to one flat node; its interval must be the tree's,
    including a variable that cancels (v - v keeps the tree's [-2, 2]),
    negative scaling and floordiv/floormod terms inside a sum."""
    from tvm_latmodel.model.indexing import _compile, _interval, _vars_of

    i, j, k = (tvm.tirx.Var(n, "int32") for n in "ijk")
    env = {i.__chandle__(): ("v", 0), j.__chandle__(): ("v", 1), k.__chandle__(): ("v", 2)}
    fd, fm = tvm.tirx.floordiv, tvm.tirx.floormod
    exprs = {
        "i*4 + j - 3": (i * 4 + j - 3, (-3, 8)),
        "i - i": (i - i, (-2, 2)),
        "-2*(i + j) + 7": ((i + j) * -2 + 7, (-3, 7)),
        "(i*4 + j)//3*3 + k%2": (fd(i * 4 + j, 3) * 3 + fm(k, 2), (0, 10)),
        "i*j + k": (i * j + k, (0, 10)),
        "(i*4 + j)%8 - j": (fm(i * 4 + j, 8) - j, (-3, 7)),
    }
    ranges = [(0, 2), (0, 3), (0, 4)]
    by_name = {"i": (0, 2), "j": (0, 3), "k": (0, 4)}
    for text, (expr, want) in exprs.items():
        node = _compile(expr, env)
        assert _interval(node, ranges) == want == _tree_interval(expr, by_name), text
    # flat: the whole linear sum is one node
    assert _compile(i * 4 + j - 3, env) == ("aff", -3, ((0, 4), (1, 1)), ())
    # a variable with coefficient 0 is still mentioned
    assert _vars_of(_compile(tvm.tirx.Mul(i, tvm.tirx.IntImm("int32", 0)) + j, env), set()) == {0, 1}
    # an unknown variable makes the whole interval unknown
    assert _interval(_compile(i + tvm.tirx.Var("u", "int32"), env), ranges) is None


def test_compiled_sums_agree_with_the_tree_on_random_expressions():
    import random

    from tvm_latmodel.model.indexing import _compile, _interval

    vs = [tvm.tirx.Var(n, "int32") for n in "abcd"]
    env = {v.__chandle__(): ("v", n) for n, v in enumerate(vs)}
    rng = random.Random(0)

    def gen(depth):
        if depth == 0 or rng.random() < 0.25:
            return rng.choice(vs) if rng.random() < 0.7 else tvm.tirx.IntImm("int32", rng.randint(-5, 9))
        op = rng.choice(["add", "sub", "mul", "mulc", "div", "mod"])
        a = gen(depth - 1)
        if op == "add":
            return a + gen(depth - 1)
        if op == "sub":
            return a - gen(depth - 1)
        if op == "mul":
            return a * gen(depth - 1)
        c = rng.randint(1, 7)
        if op == "mulc":
            return a * (c if rng.random() < 0.5 else -c)
        return tvm.tirx.floordiv(a, c) if op == "div" else tvm.tirx.floormod(a, c)

    checked = 0
    for _ in range(400):
        expr = gen(4)
        if type(expr).__name__ == "Var":
            continue
        exts = [rng.randint(1, 9) for _ in vs]
        ranges = [(0, e - 1) if rng.random() < 0.6 else (x := rng.randint(0, e - 1), x) for e in exts]
        by_name = {v.name: r for v, r in zip(vs, ranges)}
        assert _interval(_compile(expr, env), ranges) == _tree_interval(expr, by_name), str(expr)
        checked += 1
    assert checked > 300


def test_affine_fast_paths_give_the_probed_stride_and_the_interval():
    """Affine indices (the common case) take shortcuts in the footprint walk
    and in the stride along a loop: both must give exactly what probing with
    _interval gives (random affine indices over 4 loop variables)."""
    import random

    from tvm_latmodel.model.indexing import (_compile, _interval, _linear, _probed_stride, _stride_along,
                                             _vars_of, _widened)

    vs = [tvm.tirx.Var(n, "int32") for n in "abcd"]
    env = {v.__chandle__(): ("v", n) for n, v in enumerate(vs)}
    rng = random.Random(1)
    for _ in range(300):
        dims = []
        for _ in range(rng.randint(1, 3)):
            expr = tvm.tirx.IntImm("int32", rng.randint(-3, 5))
            for v in rng.sample(vs, rng.randint(0, 3)):
                expr = expr + v * rng.choice([-4, -1, 1, 2, 3, 8])
            dims.append((_compile(expr, env), 1))
        lins = [_linear(node) for node, _ in dims]
        assert None not in lins
        strides = [rng.choice([1, 7, 64]) for _ in dims]
        mentions = [_vars_of(node, set()) for node, _ in dims]
        var, extent = rng.randrange(4), rng.randint(2, 9)
        assert _stride_along(dims, strides, mentions, 4, var, extent) == \
            _probed_stride(dims, strides, mentions, 4, var, extent)
        # freeing the loops one by one, outermost last, as the footprint walk does
        ranges = [(0, 0)] * 4
        ivs = [(lin[0], lin[0]) for lin in lins]
        for v in rng.sample(range(4), 4):
            e = rng.randint(1, 9)
            ranges[v] = (0, e - 1)
            ivs = [_widened(iv, lin[1], v, e) for iv, lin in zip(ivs, lins)]
            assert ivs == [_interval(node, ranges) for node, _ in dims]


def _strided_taps(unroll_taps: bool):
    """A 1-D transposed convolution's shape of update (stop 23, T2D):
    C[i] += if_then_else((i + r) % 2 == 0, A[(i + r) // 2], 0) * W[r] over
    i < 64, r < 4, with i = 2 i0 + i1 and r = 2 r0 + r1, loops i0 r0 i1 r1;
    i1 is unrolled, and r1 too when ``unroll_taps``."""
    a = te.placeholder((34,), name="A")
    w = te.placeholder((4,), name="W")
    r = te.reduce_axis((0, 4), name="r")
    c = te.compute((64,), lambda i: te.sum(
        tvm.tirx.if_then_else((i + r) % 2 == 0, a[(i + r) // 2], tvm.tirx.const(0.0, "float32")) * w[r], axis=r),
        name="C")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, w, c])}))
    i, k = sch.get_loops(sch.get_sblock("C"))
    i0, i1 = sch.split(i, [32, 2])
    r0, r1 = sch.split(k, [2, 2])
    sch.reorder(i0, r0, i1, r1)
    sch.unroll(i1)
    if unroll_taps:
        sch.unroll(r1)
    (b,) = summarize(sch.mod, "cpu").blocks
    return b


def test_guarded_copies_that_unrolling_makes_false_are_removed():
    """With i1 and r1 unrolled, each of the 4 copies has a constant guard:
    (2 i0 + i1 + 2 r0 + r1) % 2 = (i1 + r1) % 2, true for 2 of the 4, so
    half of the 256 points run (TVM's StmtSimplify after UnrollLoop drops
    the others). With r1 rolled the guard changes along r1: all 256 run."""
    assert _strided_taps(unroll_taps=True).work_points == 128
    assert _strided_taps(unroll_taps=False).work_points == 256


def test_a_guarded_store_alone_keeps_its_copies():
    """A padding block stores a zero where its guard is false: not removed."""
    a = te.placeholder((16,), name="A")
    p = te.compute((18,), lambda i: tvm.tirx.if_then_else(
        tvm.tirx.all(i >= 1, i < 17), a[i - 1], tvm.tirx.const(0.0, "float32")), name="P")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, p])}))
    (i,) = sch.get_loops(sch.get_sblock("P"))
    sch.unroll(i)
    (b,) = summarize(sch.mod, "cpu").blocks
    assert b.work_points == 18


@pytest.mark.xfail(strict=True, reason="known divergence, kept: the replay counts extent-1 loops toward "
                   "UnrollLoop's depth; the fix was refused by PROTOCOL_stop23 part 6 (held-out residual top-5 -0.013)")
def test_unit_loops_do_not_count_toward_the_unroll_depth():
    """TVM drops extent-1 loops before UnrollLoop, so they add nothing to its
    depth limit (8): here five 2-wide loops and six unit loops sit inside
    k0; counting the units, the outermost 2-wide loop would see a depth of
    10 and stay rolled (stop 23, T2D_3 record 107). Compared with TVM's own
    passes: every loop of extent > 1 inside k0 is unrolled, k0 and out not."""
    sch = tvm.s_tir.Schedule(_matmul())
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    i0, iu, i1, iu2, i2 = sch.split(i, [16, 1, 2, 1, 2])
    j0, ju, j1, ju2, j2 = sch.split(j, [16, 1, 2, 1, 2])
    k0, ku, k1 = sch.split(k, [32, 1, 2])
    order = [i0, j0, k0, i1, iu, j1, ju, k1, ku, iu2, ju2, i2, j2]
    sch.reorder(*order)
    sch.parallel(i0)
    sch.annotate(i0, "pragma_auto_unroll_max_step", 64)
    sch.annotate(i0, "pragma_unroll_explicit", 1)
    names = [sch.get(lp).loop_var.name for lp in order]
    b = summarize(sch.mod, "cpu").blocks[0]
    ours = {n for n, lp in zip(names, b.loops) if lp.extent > 1 and lp.unrolled_by != "tvm"}
    tvms = _rolled_loop_names(_lower_through_unroll(sch.mod))
    assert ours == tvms == {names[0], names[1], names[2]}


def _stride_2_conv_1x1():
    """Y[k, i, j] = sum_c X[c, 2i, 2j] * W[k, c]: a 1x1 stride-2 NCHW conv."""
    x = te.placeholder((8, 16, 32), name="X")
    w = te.placeholder((4, 8), name="W")
    c = te.reduce_axis((0, 8), name="c")
    y = te.compute((4, 8, 16), lambda k, i, j: te.sum(x[c, 2 * i, 2 * j] * w[k, c], axis=c), name="Y")
    return tvm.IRModule({"main": te.create_prim_func([x, w, y])})


def test_stride_2_conv_vectorized_along_the_output_width():
    """A 1x1 stride-2 NCHW conv vectorized along the output width (FCV_6,
    stop 28): X moves by 2 elements per lane (gathered, built lane by lane),
    W stays put, Y moves contiguously (a vector store); the FMA is vector."""
    sch = tvm.s_tir.Schedule(_stride_2_conv_1x1())
    k, i, j, cc = sch.get_loops(sch.get_sblock("Y"))
    sch.reorder(k, i, cc, j)
    sch.vectorize(j)
    (b,) = summarize(sch.mod, "cpu").blocks
    assert b.vector_extent == 16 and b.vector_gathers == 1 and b.vector_accesses == 1
    assert b.ops_per_point == 2
    # Against the same block with X contiguous (a full 16-lane vector loop,
    # same accumulator chains and instruction mix): (2 + 1 + 1) / 16 over
    # (2 + 1) / 16 + 1 instructions per point.
    hw = HardwareSpec.from_target(CPU)  # AVX-512: 16 float lanes
    contiguous = dataclasses.replace(b, vector_gathers=0, vector_accesses=2)
    ratio = _cpu_efficiency(b, 16, hw) / _cpu_efficiency(contiguous, 16, hw)
    assert ratio == pytest.approx((4 / 16) / (3 / 16 + 1))


def test_unrolled_output_channels_share_one_gathered_vector():
    """The stride-2 conv with a register tile of 4 output channels unrolled
    outside the vector loop: X does not depend on the channel, so the 4
    copies share one built vector (1/4 gather per point); Y and W do."""
    sch = tvm.s_tir.Schedule(_stride_2_conv_1x1())
    k, i, j, cc = sch.get_loops(sch.get_sblock("Y"))
    sch.reorder(i, cc, k, j)
    sch.unroll(k)
    sch.vectorize(j)
    (b,) = summarize(sch.mod, "cpu").blocks
    assert b.vector_gathers == 1 and b.gathered_per_point == pytest.approx(1 / 4)


def test_llvm_unrolls_a_small_loop_around_a_vector_loop():
    """TVM's innermost vector loop is one group of vector instructions once
    compiled: LLVM fully unrolls a 4-trip loop around it, not a 64-trip one.
    Per iteration: one multiply-add, three moving accesses (A, B, C), their
    three address computations and the loop's increment, compare and branch:
    10; unrolled size (10 - 2) * 4 + 2 = 34 < 300, (10 - 2) * 64 + 2 = 514."""
    def loops(rows):
        a = te.placeholder((rows, 16), name="A")
        b = te.placeholder((rows, 16), name="B")
        cmp = te.compute((rows, 16), lambda r, j: a[r, j] * b[r, j] + 1.0, name="C")
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b, cmp])}))
        r, j = sch.get_loops(sch.get_sblock("C"))
        sch.vectorize(j)
        return summarize(sch.mod, "cpu").blocks[0].loops

    assert loops(4)[0].unrolled_by == "llvm"
    assert loops(64)[0].unrolled_by == ""


def _row_max_then_exp(k: int, unroll_k: bool):
    """``M[r] = max_k A[r, k]``, ``E[r, c] = exp(A[r, c] - M[r])``, with M
    computed inside E's column loop ``c``, which it does not depend on."""
    a = te.placeholder((8, k), name="A")
    rk = te.reduce_axis((0, k), name="k")
    m = te.compute((8,), lambda r: te.max(a[r, rk], axis=rk), name="M")
    e = te.compute((8, 32), lambda r, c: te.exp(a[r, c] - m[r]), name="E")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, e])}))
    r, c = sch.get_loops(sch.get_sblock("E"))
    sch.parallel(r)
    sch.compute_at(sch.get_sblock("M"), c)
    if unroll_k:
        sch.unroll(sch.get_loops(sch.get_sblock("M"))[-1])
    return {b.name: b for b in summarize(sch.mod, "cpu").blocks}


def test_recomputation_llvm_hoists_is_counted_once():
    """M is recomputed at every one of E's 32 columns. Compacted to one
    float (4 B < 1024, a stack allocation) with its reduction loop unrolled,
    its code is straight-line on a register and LICM hoists it out of the
    column loop: 8 rows x 128 taps = 1024 points, not 8 x 32 x 128. With
    the reduction loop rolled (128 taps x 5 instructions > LLVM's 300) the
    loop stays inside the column loop: all 32768 points run. E itself
    depends on the column loop: unchanged."""
    hoisted = _row_max_then_exp(128, unroll_k=True)
    assert hoisted["M"].work_points == 8 * 128
    assert hoisted["E"].work_points == 8 * 32
    rolled = _row_max_then_exp(128, unroll_k=False)
    assert rolled["M"].work_points == 8 * 32 * 128
    assert rolled["E"].work_points == 8 * 32


def _row_vector_sum(j: int):
    """``M[r, j] = max_k A[r, k] * j``, ``S[r] = sum_j M[r, j]``, ``E[r, c] =
    exp(A[r, c] - S[r])``: M and S recomputed at each of E's 32 columns,
    all their loops unrolled; M's row is ``j`` floats."""
    a = te.placeholder((4, 36), name="A")
    rk = te.reduce_axis((0, 4), name="k")
    rj = te.reduce_axis((0, j), name="j")
    m = te.compute((4, j), lambda r, jj: te.max(a[r, rk] * jj.astype("float32"), axis=rk), name="M")
    s = te.compute((4,), lambda r: te.sum(m[r, rj], axis=rj), name="S")
    e = te.compute((4, 32), lambda r, c: te.exp(a[r, c] - s[r]), name="E")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, e])}))
    r, c = sch.get_loops(sch.get_sblock("E"))
    sch.parallel(r)
    sch.compute_at(sch.get_sblock("S"), c)
    sch.compute_at(sch.get_sblock("M"), c)
    for lp in sch.get_loops(sch.get_sblock("M"))[-2:]:
        sch.unroll(lp)
    sch.unroll(sch.get_loops(sch.get_sblock("S"))[-1])
    return {b.name: b for b in summarize(sch.mod, "cpu").blocks}


def test_only_a_stack_allocation_is_hoisted():
    """TVM keeps an allocation below 1024 bytes on the stack (kMaxStackAlloca):
    M's row of 255 floats (1020 B) becomes registers and M and S leave the
    column loop (4 rows x 255 x 4 taps; S 4 x 255); at 256 floats (1024 B)
    M is a heap workspace and both run at every column (x 32). Measured on
    the Intel guest (benchmarks/modes/hoist_licm_check_stop39.md): 1020 B
    costs the same at the column loop as at the row loop, 1024 B 12x more."""
    small = _row_vector_sum(255)
    assert small["M"].work_points == 4 * 255 * 4
    assert small["S"].work_points == 4 * 255
    big = _row_vector_sum(256)
    assert big["M"].work_points == 4 * 32 * 256 * 4
    assert big["S"].work_points == 4 * 32 * 256


def _taps_around_copies(trips: int, copies: int):
    """``O[y, x] += P[y + r, x] * W[r]``, loops ``x`` (16), ``r`` (``trips``,
    rolled), ``y`` (``copies``, unrolled by TVM), the init decomposed: the
    shape of a conv's filter-tap loop around a register tile."""
    p = te.placeholder((copies + trips, 16), name="P")
    w = te.placeholder((trips,), name="W")
    r = te.reduce_axis((0, trips), name="r")
    o = te.compute((copies, 16), lambda y, x: te.sum(p[y + r, x] * w[r], axis=r), name="O")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([p, w, o])}))
    blk = sch.get_sblock("O")
    y, x, rr = sch.get_loops(blk)
    sch.reorder(x, rr, y)
    sch.decompose_reduction(blk, x)
    sch.unroll(y)
    return {b.name: b for b in summarize(sch.mod, "cpu").blocks}["O_update"]


def test_llvm_full_unroll_budget_of_a_tap_loop():
    """LLVM's LoopUnrollPass on the tap loop ``r``, per iteration: ``c``
    multiply-adds, ``c`` distinct loads of P and one of W (O stays in
    registers: LICM), i.e. ``2c + 1`` unrolled, plus 2 address computations
    and 3 for the loop rolled. Full unroll when ``(rolled - 2) * trips + 2 <
    300``, or, for at most 10 trips, ``unrolled * trips < 300 * rolled /
    unrolled``. Each verdict below is what LLVM did with this kernel on the
    Intel guest (no ``for_body_r`` loop left in the IR;
    benchmarks/modes/unroll_budget_check_stop40.md):
    3 x 42: rolled 90, (88 * 3 + 2) = 266 < 300: unrolled, so ``x`` is the
    innermost loop and LLVM vectorizes it (16 wide);
    4 x 42: 354 and 85 * 4 = 340 >= 300 * 90 / 85 = 317.6: rolled;
    10 x 15: 342, but 31 * 10 = 310 < 300 * 36 / 31 = 348.4: unrolled;
    12 x 11: 26 * 12 + 2 = 314, 12 trips are not simulated: rolled;
    12 x 8: 20 * 12 + 2 = 242: unrolled."""
    for trips, copies, unrolled in ((3, 42, True), (4, 42, False), (10, 15, True), (12, 11, False), (12, 8, True)):
        b = _taps_around_copies(trips, copies)
        assert b.loops[1].extent == trips
        assert (b.loops[1].unrolled_by == "llvm") is unrolled, (trips, copies)
        assert b.auto_vector_extent == (16 if unrolled else 0), (trips, copies)


def test_a_reduction_with_its_init_inside_keeps_its_loop():
    """The init of an undecomposed reduction (``if k == 0: C = 0``) stays in
    the loop: C is loaded and stored every iteration behind a branch. A
    64 x 64 x 64 matmul's ``k`` loop: 1 multiply-add, 4 moving accesses (A,
    B, C read, C write), 3 for the init, 4 address computations and 3 for the
    loop: 15, (15 - 2) * 64 + 2 = 834 > 300: rolled (LLVM's IR keeps it,
    unrolled by 10 only; benchmarks/modes/unroll_budget_check_stop40.md)."""
    b = summarize(_matmul(), "cpu").blocks[0]
    assert [lp.unrolled_by for lp in b.loops] == ["", "", ""]


def _matmul_column_loop(tvm_unrolls_i: bool):
    """C[i, j] += A[i, k] * B[k, j] (128 x 256 x 1024): the 128-wide column
    loop ``j`` rolled around ``k_1`` (8) and ``i_3`` (16), ``i_3`` unrolled by
    TVM or left to LLVM (XFM_4's record 59 on the Zen 4 is the second)."""
    a = te.placeholder((128, 1024), name="A")
    b = te.placeholder((1024, 256), name="B")
    k = te.reduce_axis((0, 1024), name="k")
    c = te.compute((128, 256), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b, c])}))
    blk = sch.get_sblock("C")
    i, j, kk = sch.get_loops(blk)
    i0, i2, i3 = sch.split(i, [None, 2, 16])
    j0, j2 = sch.split(j, [None, 128])
    k0, k1 = sch.split(kk, [None, 8])
    sch.reorder(i0, j0, k0, i2, j2, k1, i3)
    sch.parallel(sch.fuse(i0, j0))
    sch.decompose_reduction(blk, k0)
    if tvm_unrolls_i:
        sch.unroll(i3)
    return {x.name: x for x in summarize(sch.mod, "cpu").blocks}["C_update"]


def test_llvm_unrolls_only_the_innermost_loop_before_it_vectorizes():
    """``k_1`` (8 trips) around 16 copies of ``i_3``: per iteration 16
    multiply-adds, 16 distinct A loads and one B load (C stays in registers),
    33 unrolled, 38 rolled: (38 - 2) * 8 + 2 = 290 < 300, unrolled. When TVM
    unrolled ``i_3``, ``k_1`` is the innermost loop TVM emitted: LLVM unrolls
    it before vectorizing, ``j`` (C and B contiguous, A invariant) becomes the
    innermost loop and is vectorized, 128 wide. When LLVM unrolls ``i_3``
    itself (10 rolled: (10 - 2) * 16 + 2 = 130 < 300), ``k_1`` is still a
    loop when the vectorizers run (a float reduction: not vectorized) and is
    unrolled after them: every loop inside ``j`` ends unrolled, no vector
    code. LLVM on the Zen 4: 2048 packed multiply-add lanes, then 0 packed
    and 256 scalar (benchmarks/modes/unroll_before_vectorizers_check_stop41.md)."""
    by_tvm = _matmul_column_loop(True)
    assert [lp.unrolled_by for lp in by_tvm.loops] == ["", "", "", "", "llvm", "tvm"]
    assert by_tvm.auto_vector_extent == 128
    by_llvm = _matmul_column_loop(False)
    assert [lp.unrolled_by for lp in by_llvm.loops] == ["", "", "", "", "llvm", "llvm"]
    assert by_llvm.auto_vector_extent == 0


def _depthwise_channel_copies(taps: int, rows: int, parallel: bool = False, staged: bool = False):
    """``O[h, w, c] += P[h + rh, w + rw, c] * F[rh, rw, c]`` (NHWC): the 8
    channel copies ``c_1`` unrolled by TVM, with the taps ``rw`` and the rows
    ``h_1``, inside the rolled 8-wide spatial loop ``w_1``, along which P and
    O move by 32 elements (gathered where they are vectorized)."""
    p = te.placeholder((8 + taps - 1, 16 + taps - 1, 32), name="P")
    f = te.placeholder((taps, taps, 32), name="F")
    rh = te.reduce_axis((0, taps), name="rh")
    rw = te.reduce_axis((0, taps), name="rw")
    o = te.compute((8, 16, 32), lambda h, w, c: te.sum(p[h + rh, w + rw, c] * f[rh, rw, c], axis=[rh, rw]),
                   name="O")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([p, f, o])}))
    blk = sch.get_sblock("O")
    cache = sch.cache_write(blk, 0, "global") if staged else None
    h, w, c, rrh, rrw = sch.get_loops(blk)
    h0, h1 = sch.split(h, [None, rows])
    w0, w1 = sch.split(w, [None, 8])
    c0, c1 = sch.split(c, [None, 8])
    sch.reorder(h0, w0, c0, rrh, w1, c1, rrw, h1)
    if cache is not None:
        sch.reverse_compute_at(cache, c0)
    if parallel:
        sch.parallel(h0)
    sch.decompose_reduction(blk, rrh)
    for lp in (c1, rrw, h1):
        sch.unroll(lp)
    return {b.name: b for b in summarize(sch.mod, "cpu").blocks}["O_update"]


def test_slp_packs_channel_copies_unless_the_rolled_loop_is_gathered():
    """The 8 contiguous channel copies outside the reduction ``rw`` are
    packed by LLVM's SLP vectorizer (``slp_extent`` 8) unless its loop
    vectorizer takes the rolled loop ``w_1`` with gathers first. Pointers
    in ``w_1``'s body: P's copies 8 x taps x rows (none share an element)
    and O's 8 x rows (load and store share one): 3 taps x 2 rows: 48 + 16 =
    64 <= 250, gathered; 15 x 2: 240 + 16 = 256 > 250, LLVM's alias sets
    saturate and SLP packs the copies (both verdicts LLVM's, the IR on the
    Intel guest: benchmarks/modes/gathers_or_slp_check_stop42.md). Inside a
    parallel loop P, reached through TVM's closure, keeps ``w_1`` from
    being vectorized, whether O is too or is staged in a buffer allocated
    inside it. The gathered verdict counts only where gathers are legal
    (AVX-512)."""
    small, large = _depthwise_channel_copies(3, 2), _depthwise_channel_copies(15, 2)
    assert (small.slp_extent, small.gathered_loop) == (8, True)
    assert (large.slp_extent, large.gathered_loop) == (8, False)
    assert not _depthwise_channel_copies(3, 2, parallel=True).gathered_loop
    assert not _depthwise_channel_copies(3, 2, parallel=True, staged=True).gathered_loop
    avx512 = HardwareSpec.from_target(tvm.target.Target({"kind": "llvm", "mcpu": "rocketlake", "num-cores": 2}))
    avx2 = HardwareSpec.from_target(tvm.target.Target({"kind": "llvm", "mcpu": "znver3", "num-cores": 2}))
    assert _slp_extent(small, avx512) == 0 and _slp_extent(small, avx2) == 8
    assert _slp_extent(large, avx512) == 8
    # the packing is what the block is scored with: 8 lanes against scalar
    assert _cpu_efficiency(large, 16, avx512) > 4 * _cpu_efficiency(small, 16, avx512)


def _conv1d_channel_copies(guard: bool):
    """conv1d ``O[l, co] += X[l + rl - 2, rc] * W[rl, rc, co]`` (24 x 32, 5
    taps): ``co_1`` (16) outside the unrolled taps and rows ``l_1`` (6),
    inside the rolled ``rc``; the input pre-padded, or read under the
    padding's ``if_then_else``."""
    L, CI, CO, K = 24, 32, 32, 5
    w = te.placeholder((K, CI, CO), name="W")
    rl = te.reduce_axis((0, K), name="rl")
    rc = te.reduce_axis((0, CI), name="rc")
    if guard:
        x = te.placeholder((L, CI), name="X")

        def val(l):
            return tvm.tirx.if_then_else(tvm.tirx.all(l + rl >= 2, l + rl < L + 2),
                                         x[tvm.tirx.max(l + rl - 2, 0), rc], 0.0)
    else:
        x = te.placeholder((L + K - 1, CI), name="XP")

        def val(l):
            return x[l + rl, rc]
    o = te.compute((L, CO), lambda l, co: te.sum(val(l) * w[rl, rc, co], axis=[rl, rc]), name="O")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([x, w, o])}))
    blk = sch.get_sblock("O")
    l, co, rrl, rrc = sch.get_loops(blk)
    l0, l1 = sch.split(l, [None, 6])
    co0, co1 = sch.split(co, [None, 16])
    sch.reorder(l0, co0, rrc, co1, rrl, l1)
    sch.decompose_reduction(blk, rrc)
    for lp in (co1, rrl, l1):
        sch.unroll(lp)
    return {b.name: b for b in summarize(sch.mod, "cpu").blocks}["O_update"]


def test_slp_does_not_pack_copies_whose_read_is_guarded():
    """The 16 contiguous output-channel copies: packed by SLP when the input
    is pre-padded (960 packed FMA lanes), left scalar when its read sits
    under the padding's ``if_then_else`` (527 scalar FMAs; both LLVM's, on
    the Intel guest and the Zen 3 target:
    ``python benchmarks/modes/guarded_slp_check_stop42.py``)."""
    assert _conv1d_channel_copies(False).slp_extent == 16
    assert _conv1d_channel_copies(True).slp_extent == 0
