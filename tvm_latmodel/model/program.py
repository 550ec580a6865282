"""Summarize a scheduled PrimFunc into plain numbers.

The analytical model (:mod:`tvm_latmodel.modes`) never sees a TVM object: it
reads a :class:`ProgramSummary`. This module is the edge that walks TVM's IR.

What is summarized, per block (``T.sblock``) of the scheduled function:

* ``work_points``: iterations the hardware executes (product of the
  enclosing loop extents, threads included), and ``useful_points``: the
  block's iteration domain. Their ratio is the padded / redundant work of
  non-divisible tiles and of compute-at halos. On CPU a block recomputed
  inside a rolled loop it does not depend on counts once for that loop
  when LLVM hoists it (straight-line code writing stack intermediates,
  which SROA makes registers; :func:`_hoist_invariant_blocks`).
* ``flops``: arithmetic operations of the block's store times its points.
* the loop nest from the outside in (extent and kind of each loop), and for
  every loop level the **footprint**: bytes of each buffer the block touches
  in one whole execution of that loop, from interval arithmetic on the
  block's read/write regions. The cache model of :mod:`modes` picks, for
  each memory level, the outermost loop whose footprint fits.
* parallelism: a *region* is one parallel loop nest on CPU (one TVM
  parallel launch) or one kernel on GPU (its ``blockIdx`` loops). A region's
  ``units`` are CPU parallel iterations or GPU thread blocks;
  ``threads_per_unit`` is the product of ``threadIdx`` extents on GPU.
* vectorized extent of the innermost vectorized loop, and how each buffer
  access moves along it (``vector_gathers``: accesses that are neither
  contiguous nor loop-invariant in it, so the vector load becomes a gather;
  ``vector_accesses``: those that move contiguously, vector loads/stores;
  ``gathered_per_point``: the gathered accesses, each divided by the
  unrolled copies that share its vector);
  without an explicit vectorized loop, ``auto_vector_extent``: the innermost
  non-reduction loop when every access is contiguous or invariant in it (what
  LLVM's loop vectorizer turns into vector code by itself); ``slp_extent``:
  unrolled channel copies outside the reductions LLVM's SLP vectorizer packs
  unless its loop vectorizer took the rolled loop around them with gathers
  (``gathered_loop``: it does where gathers are legal, AVX-512).
* ``reduce_level``: the depth of the innermost loop that iterates a
  reduction axis; the loops inside it hold independent accumulators, and
  ``chain_length`` (the product of the innermost run of reduction loops) is
  how many dependent updates each accumulator takes before the nest moves to
  independent ones.
* the auto-unroll step.
* the bytes of each global buffer: a parameter at its size, an
  intermediate at the tile TVM's buffer compaction allocates it as, and
  how many parallel iterations each hold a copy (``buffer_copies``). On
  CPU an intermediate's footprints are capped at that tile: the tile is
  one allocation that every iteration of its loop reuses.

The walk is plain Python over node attributes (TVM 0.27 has no Python
statement visitor); expressions are compiled once into tuples and then
evaluated in pure Python, so a 3x3 conv schedule summarizes in about 2 ms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import tvm

from .indexing import (_bits, _compile, _compile_cond, _count_fma, _count_libm, _count_ops, _guard_of, _interval,
                       _cond_vars, _linear, _stride_along, _strides, _vars_of, _widened, live_copy_fraction)

# TVM's UnrollLoop default auto_max_depth: at most this many unrolled loops
# nested below a loop that is itself auto-unrolled.
_UNROLL_MAX_DEPTH = 8
# LLVM's full-unroll threshold at -O3 (TVM's LLVM backend optimizes at O3):
# a rolled loop whose trip count times its body's cost is at most this many
# instructions is unrolled by LLVM itself
# (llvm/lib/Transforms/Scalar/LoopUnrollPass.cpp: UnrollThresholdAggressive).
_LLVM_FULL_UNROLL_THRESHOLD = 300
# Trip counts up to this are also simulated unrolled (``analyzeLoopUnrollCost``,
# ``unroll-max-iteration-count-to-analyze``): the loop is unrolled when the
# simulated cost, without the loop's own increment, compare and branch, is
# below the threshold (times a boost for folded work, not counted here).
_LLVM_UNROLL_ANALYZE_TRIPS = 10


# TVM keeps a CPU allocation of constant size below this many bytes on the
# stack (``runtime::kMaxStackAlloca``, tvm/runtime/device_api.h, used by
# tirx/transforms/lower_tvm_builtin.cc); larger ones are heap workspaces.
_STACK_ALLOCA_BYTES = 1024

# ----------------------------------------------------------------- data types


@dataclass(frozen=True)
class Access:
    """One buffer a block reads or writes.

    ``footprint_bytes[k]`` is what one whole execution of loop ``k``
    (0 = outermost; all its iterations, outer loops fixed) touches;
    ``footprint_bytes[depth]`` is one point.
    """

    buffer: str
    scope: str
    dtype_bits: int
    is_write: bool
    buffer_bytes: float
    footprint_bytes: tuple[float, ...]


@dataclass(frozen=True)
class Loop:
    """One loop of a block's nest. ``unrolled_by``: ``"tvm"`` when TVM's
    ``UnrollLoop`` pass unrolls it (an ``unroll`` loop, or a serial loop
    that ``pragma_auto_unroll_max_step`` covers), ``"llvm"`` when LLVM's
    full unroller will (a small rolled loop), else ``""``."""

    extent: int
    kind: str  # serial, parallel, vectorized, unrolled, blockIdx, threadIdx, vthread
    unrolled_by: str = ""

    @property
    def unrolled(self) -> bool:
        """Straight-line code once compiled (unrolled by TVM or by LLVM)."""
        return bool(self.unrolled_by)


@dataclass(frozen=True)
class BlockSummary:
    """Numbers of one block (one ``T.sblock`` statement) of the program."""

    name: str
    region: int
    loops: tuple[Loop, ...]
    work_points: float
    useful_points: float
    ops_per_point: float
    vector_extent: int
    dtype_bits: int
    accesses: tuple[Access, ...]
    reduce_level: int = 0
    vector_gathers: int = 0
    vector_accesses: int = 0
    gathered_per_point: float = 0.0
    auto_vector_extent: int = 0
    slp_extent: int = 0
    gathered_loop: bool = False
    chain_length: float = 0.0
    fma_per_point: float = 0.0
    libm_calls_per_point: float = 0.0
    libm_cost_per_point: float = 0.0

    @property
    def innermost_loop(self) -> int:
        """Index of the innermost loop left after unrolling (extent > 1 and
        not unrolled): the loop LLVM's loop vectorizer sees; -1 if none."""
        for j in range(len(self.loops) - 1, -1, -1):
            if self.loops[j].extent > 1 and not self.loops[j].unrolled:
                return j
        return -1

    @property
    def accumulators_in_registers(self) -> bool:
        """Whether a reduction's accumulators can live in registers: every
        loop inside its innermost reduction loop is unrolled or vectorized
        (a rolled loop there walks the accumulators through memory)."""
        return all(lp.extent == 1 or lp.unrolled or lp.kind == "vectorized"
                   for lp in self.loops[self.reduce_level:])

    @property
    def flops(self) -> float:
        """Useful floating-point operations (padded work excluded)."""
        return self.useful_points * self.ops_per_point

    @property
    def depth(self) -> int:
        return len(self.loops)

    @property
    def accumulator_points(self) -> float:
        """Independent accumulators of a reduction: the points of the loops
        inside the innermost reduction loop (0 when the block reduces nothing)."""
        if self.reduce_level <= 0:
            return 0.0
        t = 1.0
        for loop in self.loops[self.reduce_level:]:
            t *= loop.extent
        return t

    def trips(self, level: int) -> float:
        """How many times loop ``level`` is executed (product of the outer extents)."""
        t = 1.0
        for loop in self.loops[:level]:
            t *= loop.extent
        return t


@dataclass(frozen=True)
class Region:
    """One parallel launch (CPU parallel loop nest) or kernel (GPU).

    ``units`` is the number of parallel work items (CPU parallel iterations,
    GPU thread blocks); 1 for a serial region.
    """

    index: int
    units: int
    threads_per_unit: int
    shared_bytes_per_unit: float
    local_bytes_per_thread: float
    blocks: tuple[BlockSummary, ...]


@dataclass(frozen=True)
class ProgramSummary:
    """A scheduled PrimFunc, as plain numbers."""

    target_kind: str  # "cpu" or "gpu"
    regions: tuple[Region, ...]
    unroll_max_step: int
    buffer_bytes: dict = field(default_factory=dict)
    buffer_copies: dict = field(default_factory=dict)

    @property
    def flops(self) -> float:
        return sum(b.flops for r in self.regions for b in r.blocks)

    @property
    def blocks(self) -> list[BlockSummary]:
        return [b for r in self.regions for b in r.blocks]

    def held_bytes(self, concurrent: int = 1) -> float:
        """Bytes of global memory the program holds at once.

        ``buffer_bytes``: each parameter's size, and each global
        intermediate's allocation as TVM compiles it (see
        :func:`_compacted_intermediates`). An intermediate allocated inside
        a parallel loop exists once per running iteration:
        ``min(buffer_copies, concurrent)`` copies.
        """
        c = max(1, int(concurrent))
        return float(sum(b * min(self.buffer_copies.get(n, 1), c) for n, b in self.buffer_bytes.items()))


class SummaryError(ValueError):
    """The schedule cannot be summarized for this target (message says why)."""


# ------------------------------------------------------------------- walking
# TVM arrays are read with a slice (``arr[:]``): one FFI call per element,
# where iterating costs two (the length is asked again for every element).

_KIND = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled", 4: "thread"}


class _Walker:
    def __init__(self, gpu: bool):
        self.gpu = gpu
        self.loop_stack: list = []  # (Loop, var_index)
        self.var_env: dict = {}  # tvm Var handle -> ("v", idx)
        self.n_vars = 0
        self.region_stack: list[int] = []
        self.region_units: dict[int, int] = {}
        self.region_threads: dict[int, int] = {}
        self.region_shared: dict[int, float] = {}
        self.region_local: dict[int, float] = {}
        self.region_tags: dict[int, dict[str, int]] = {}
        self.shared_accesses: list = []
        self.next_region = 0
        self.blocks: list = []  # each block's BlockSummary fields (dicts until finish)
        self.unroll = 0
        self.cur_unroll = 0  # auto-unroll step in effect at the current loop
        # TVM's UnrollLoop pass, replayed (tirx/transforms/unroll_loop.cc):
        # statements counted so far, rolled ("normal") and unrolled loop
        # depths below the current point, and the verdict per loop variable.
        self.step_count = 0
        self.normal_depth = 0
        self.unroll_depth = 0
        self.unrolled: dict[int, bool] = {}
        self.pending: list = []  # leaf blocks waiting for the unroll verdicts
        self.pending_gathers: list = []  # vector blocks with gathered accesses, waiting likewise
        self.pending_slp: list = []  # blocks with SLP candidates outside the reductions: (index, accesses, vector-view loops)
        self.guards: dict = {}  # block index -> compiled guard: see indexing.live_copy_fraction
        self.block_vars: list = []  # loop variables of each block's nest
        self.block_access_vars: list = []
        self.block_mentions: list = []  # loop variables each block's indices (and guard) mention
        self.buffer_info: dict = {}  # buffer handle -> (name, scope, bits, bytes, shape, strides)
        self.allocated: set = set()  # names of the buffers blocks allocate (intermediates)
        self.names: dict = {}  # buffer handle -> its name here, unique (see buffer_name)

    def buffer_name(self, buf) -> str:
        """``buf``'s name, made unique: two buffers may share one (a
        depthwise conv's input and weight are both ``placeholder``), and
        every sum over buffers must count each. The second to be met is
        ``name#2``, and so on."""
        h = buf.__chandle__()  # (the module being walked owns the buffer: its handle stays unique meanwhile)
        name = self.names.get(h)
        if name is None:
            base = name = str(buf.name)
            taken = set(self.names.values())
            k = 1
            while name in taken:
                k += 1
                name = f"{base}#{k}"
            self.names[h] = name
        return name

    # -- statements
    def stmt(self, s):
        name = type(s).__name__
        if name == "For":
            self.loop(s)
        elif name == "SeqStmt":
            # Each statement of a sequence is counted from zero; steps add up,
            # depths take the maximum (as UnrollLoop's SeqStmt visitor).
            steps, normal, unroll = self.step_count, self.normal_depth, self.unroll_depth
            for x in s.seq[:]:
                self.step_count = self.normal_depth = self.unroll_depth = 0
                self.stmt(x)
                steps += self.step_count
                normal = max(normal, self.normal_depth)
                unroll = max(unroll, self.unroll_depth)
            self.step_count, self.normal_depth, self.unroll_depth = steps, normal, unroll
        elif name in ("BufferStore", "Evaluate"):
            self.step_count += 1
        elif name == "SBlockRealize":
            self.block_realize(s)
        elif name == "IfThenElse":
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif hasattr(s, "body"):
            self.stmt(s.body)

    def loop(self, f):
        try:
            extent = int(f.extent)
        except (TypeError, ValueError):
            raise SummaryError("loop with a dynamic extent; only static shapes are supported") from None
        kind = _KIND.get(int(f.kind), "serial")
        tag = ""
        if kind == "thread":
            tag = str(f.thread_binding.thread_tag)
            kind = tag.split(".")[0]  # blockIdx / threadIdx / vthread
        ann = f.annotations
        outer_unroll = self.cur_unroll
        if "pragma_auto_unroll_max_step" in ann:
            self.cur_unroll = int(ann["pragma_auto_unroll_max_step"])
            self.unroll = max(self.unroll, self.cur_unroll)
        opened = False
        unit_kind = "blockIdx" if self.gpu else "parallel"
        if kind == unit_kind:
            # A unit loop nested inside an open region (a fused-then-split
            # parallel loop) multiplies that region's units.
            if not self.region_stack:
                self.region_stack.append(self.next_region)
                self.region_units[self.next_region] = 1
                self.region_threads[self.next_region] = 1
                self.next_region += 1
                opened = True
            self.region_units[self.region_stack[-1]] *= extent
        idx = self.n_vars
        self.n_vars += 1
        self.var_env[f.loop_var.__chandle__()] = ("v", idx)
        self.loop_stack.append((Loop(extent, kind), idx))
        if kind == "threadIdx" and self.region_stack:
            # Loops bound to the same tag (threadIdx.x nested in threadIdx.x,
            # as MetaSchedule writes cooperative copies) are the same
            # threads: the block size is the product over tags of each tag's
            # largest extent.
            r = self.region_stack[-1]
            tags = self.region_tags.setdefault(r, {})
            tags[tag] = max(tags.get(tag, 1), extent)
            threads = 1
            for e in tags.values():
                threads *= e
            self.region_threads[r] = threads
        self.stmt(f.body)
        # UnrollLoop's verdict: an unroll loop always; a serial loop when no
        # rolled loop is inside it, at most auto_max_depth (8) unrolled loops
        # are, and extent * statements inside <= the auto-unroll step.
        auto = (kind == "serial" and self.normal_depth == 0 and self.unroll_depth <= _UNROLL_MAX_DEPTH
                and extent * self.step_count <= self.cur_unroll)
        if kind == "unrolled" or auto:
            self.step_count *= extent
            self.unroll_depth += 1
            self.unrolled[idx] = True
        else:
            self.normal_depth += 1
        self.loop_stack.pop()
        self.cur_unroll = outer_unroll
        if opened:
            self.region_stack.pop()

    def block_realize(self, br):
        blk = br.block
        body = blk.body
        if type(body).__name__ == "BufferStore":
            # A leaf block; a reduction's init (one store per output) is
            # small next to its update and is not counted as work (but it is
            # a statement for the unroller).
            self.step_count += 1 + (blk.init is not None)
            self.leaf_block(br, blk, body)
        elif blk.writes and not _has_block(body):
            # An opaque leaf: a tensorized block whose body is the
            # intrinsic's implementation (calls, several stores).
            self.step_count += 1
            self.leaf_block(br, blk, None)
        else:
            # (MetaSchedule's leaf blocks allocate nothing: intermediates
            # are allocated by the root block)
            for buf in blk.alloc_buffers[:]:
                self.allocated.add(self.buffer_name(buf))
            if blk.init is not None:
                self.stmt(blk.init)
            self.stmt(body)

    def leaf_block(self, br, blk, store):
        loops = [lp for lp, _ in self.loop_stack]
        var_ids = [i for _, i in self.loop_stack]
        # block var -> compiled binding over loop vars
        benv = {}
        useful = 1.0
        reduce_vars: set = set()
        for iv, val in zip(blk.iter_vars[:], br.iter_values[:]):
            node = benv[iv.var.__chandle__()] = _compile(val, self.var_env)
            if int(iv.iter_type) == 2:  # CommReduce: a reduction axis
                _vars_of(node, reduce_vars)
            try:
                useful *= int(iv.dom.extent)
            except (TypeError, ValueError):
                raise SummaryError(f"block {blk.name_hint} has a dynamic iteration domain") from None
        work = 1.0
        for lp in loops:
            work *= lp.extent
        ops = _count_ops(store.value) if store is not None else 0.0
        guarded = False
        if store is not None and not self.gpu:
            guard = _guard_of(store.value, store.buffer)
            guarded = guard is not None
            cond = _compile_cond(guard, benv) if guard is not None else None
            if cond is not None:
                self.guards[len(self.blocks)] = cond
        fmas = _count_fma(store.value) if store is not None else 0.0
        libm, libm_cost = _count_libm(store.value) if store is not None else (0.0, 0.0)
        vec, vec_level = 0, -1
        for j in range(len(loops) - 1, -1, -1):
            if loops[j].kind == "vectorized":
                vec, vec_level = loops[j].extent, j
                break
        depth = len(loops)
        reduce_level = 0
        for j, vid in enumerate(var_ids):
            if vid in reduce_vars and loops[j].extent > 1:
                reduce_level = j + 1
        # Footprint at level k: loops k.. vary over their range, outer loops
        # are fixed at 0 (one execution of loop k's body).
        accesses = []
        regions = [(r, False) for r in blk.reads[:]] + [(w, True) for w in blk.writes[:]]
        compiled = []
        for reg, is_write in regions:
            buf = reg.source
            info = self.buffer_info.get(buf.__chandle__())
            if info is None:
                bits = _bits(buf.dtype)
                shape = [int(d) for d in buf.shape[:]]
                info = self.buffer_info[buf.__chandle__()] = (
                    self.buffer_name(buf), str(buf.scope()), bits, _buffer_bytes(bits, shape), shape, _strides(shape))
            name, scope, bits, nbytes, shape, strides = info
            dims = []
            for rng in reg.region[:]:
                try:
                    ext = int(rng.extent)
                except (TypeError, ValueError):
                    ext = None
                dims.append((_compile(rng.min, benv), ext))
            mentions = [_vars_of(node, set()) for node, _ in dims]
            compiled.append((name, scope, bits, is_write, nbytes, dims, shape, strides, mentions))
        per_point = _tensorized_work(compiled)
        if per_point is not None:
            # A tensorized block: one point runs a whole intrinsic.
            ops, fmas, lanes_filled = per_point
            vec = max(vec, lanes_filled)
        n_vars = self.n_vars
        gathered, moving = [], 0
        if vec_level >= 0:
            # Accesses that do not move contiguously (or stay put) along the
            # vector loop become gathers; those that move contiguously are
            # vector loads and stores.
            for _, _, _, _, _, dims, _, strides, mentions in compiled:
                step = _stride_along(dims, strides, mentions, n_vars, var_ids[vec_level], vec)
                if step is None or abs(step) > 1:
                    gathered.append((dims, strides, mentions))
                elif step:
                    moving += 1
            if gathered and not self.gpu:
                # How many unrolled copies share each gathered vector is
                # known once the unroll verdicts are in.
                self.pending_gathers.append((len(self.blocks), tuple(var_ids), vec_level, gathered, n_vars))
        elif not self.gpu:
            # What LLVM vectorizes depends on what is unrolled, known only
            # once the loops around this block are closed.
            self.pending.append((len(self.blocks), tuple(var_ids), frozenset(reduce_vars),
                                 [(c[3], c[5], c[7], c[8]) for c in compiled], n_vars, [c[0] for c in compiled],
                                 guarded))
        chain = 1
        for j in range(reduce_level - 1, -1, -1):
            if loops[j].extent == 1:
                continue
            if var_ids[j] not in reduce_vars:
                break
            chain *= loops[j].extent
        mentioned: set = set()  # loop variables the block's indices (and guard) mention
        for name, scope, bits, is_write, nbytes, dims, shape, _, mentions in compiled:
            # Levels from innermost (all loops fixed) outwards: level k frees
            # loop k's variable, so only the dimensions that mention it change.
            width = max(1, bits // 8)
            mentioned_in: dict[int, list[int]] = {}  # loop var -> dimensions whose index mentions it
            for d, vs in enumerate(mentions):
                for v in vs:
                    mentioned_in.setdefault(v, []).append(d)
            mentioned.update(mentioned_in)
            ranges = [(0, 0)] * n_vars
            # An affine index widens by coef * (extent - 1) when its loop is
            # freed (the integers _interval gives); others are re-evaluated.
            lins = [_linear(node) for node, _ in dims]
            ivs = [(lin[0], lin[0]) if lin is not None else _interval(node, ranges)
                   for lin, (node, _) in zip(lins, dims)]
            fps = [0.0] * (depth + 1)
            changed = True
            for k in range(depth, -1, -1):
                if k < depth:
                    v, e = var_ids[k], loops[k].extent
                    changed = False
                    if e != 1:
                        ranges[v] = (0, e - 1)
                        for d in mentioned_in.get(v, ()):
                            lin = lins[d]
                            ivs[d] = _interval(dims[d][0], ranges) if lin is None else _widened(ivs[d], lin[1], v, e)
                            changed = True
                if not changed:
                    fps[k] = fps[k + 1]
                    continue
                elems = 1.0
                for iv, (_, ext), size in zip(ivs, dims, shape):
                    span = size if iv is None else min(size, iv[1] - iv[0] + (ext or 1))
                    elems *= max(1, span)
                fps[k] = elems * width
            accesses.append(Access(name, scope, bits, is_write, nbytes, tuple(fps)))
        region = self.region_stack[-1] if self.region_stack else -1
        if region >= 0 and self.gpu:
            for a in accesses:
                if a.scope.startswith("shared"):
                    self.shared_accesses.append((region, a.buffer, a.is_write, tuple(var_ids), a.footprint_bytes))
        if region >= 0:
            for a in accesses:
                if a.scope == "local":
                    # per-thread register tile: footprint inside the innermost thread loop
                    inner = 0
                    for j, lp in enumerate(loops):
                        if lp.kind == "threadIdx":
                            inner = j + 1
                    self.region_local[region] = max(self.region_local.get(region, 0.0), a.footprint_bytes[inner])
        store_bits = _bits(store.buffer.dtype) if store is not None else _bits(blk.writes[0].source.dtype)
        # The block's fields, made a BlockSummary once the unroll verdicts are in (finish).
        self.blocks.append(dict(
            name=str(blk.name_hint), region=region, loops=loops, work_points=work,
            useful_points=useful, ops_per_point=ops, vector_extent=vec, dtype_bits=store_bits,
            accesses=tuple(accesses), reduce_level=reduce_level, vector_gathers=len(gathered), vector_accesses=moving,
            chain_length=float(chain if reduce_level else 0), fma_per_point=fmas, libm_calls_per_point=libm,
            libm_cost_per_point=libm_cost))
        self.block_vars.append(tuple(var_ids))
        self.block_access_vars.append((tuple(frozenset().union(*c[8]) for c in compiled), blk.init is not None))
        guard = self.guards.get(len(self.blocks) - 1)
        if guard is not None:
            _cond_vars(guard, mentioned)
        self.block_mentions.append(mentioned)

    def finish(self) -> None:
        """Apply the unroll verdicts to every block's loops, then decide what
        LLVM vectorizes in the blocks that have no vectorized loop.

        Two views of LLVM's own unrolling (the same budget,
        :func:`_llvm_full_unroll`): what LLVM's vectorizers see, where LLVM
        has fully unrolled only the innermost loop of the nest TVM emitted,
        and the loops left in the code, after the LoopUnrollPass that runs
        after both vectorizers in LLVM's O3 pipeline (``addVectorPasses``)
        has unrolled the loops that became innermost. The block's loops
        carry the second; the vectorization verdict uses the first."""
        vector_view = {}
        for i, (b, var_ids) in enumerate(zip(self.blocks, self.block_vars)):
            flags = ["tvm" if self.unrolled.get(v, False) else "" for v in var_ids]
            if not self.gpu:
                instructions = max(0.0, b["ops_per_point"] - b["fma_per_point"])
                _llvm_full_unroll(b["loops"], var_ids, instructions, self.block_access_vars[i], flags)
            # The loops as LLVM's vectorizers see them: of LLVM's own unrolling
            # only its first loop, the innermost it marks (it works outward).
            by_llvm = [j for j, u in enumerate(flags) if u == "llvm"]
            seen = [("" if u == "llvm" and j != by_llvm[-1] else u) for j, u in enumerate(flags)]
            vector_view[i] = tuple(Loop(lp.extent, lp.kind, u) for lp, u in zip(b["loops"], seen))
            loops = b["loops"] = tuple(Loop(lp.extent, lp.kind, u) for lp, u in zip(b["loops"], flags))
            guard = self.guards.get(i)
            if guard is not None:
                # Copies whose guard unrolling makes constant-false are gone.
                live = live_copy_fraction(guard, var_ids, loops, self.n_vars)
                if live < 1.0:
                    b["work_points"] *= live
        for i, var_ids, reduce_vars, compiled, n_vars, names, guarded in self.pending:
            b = self.blocks[i]
            b["auto_vector_extent"] = _auto_vector(vector_view[i], var_ids, reduce_vars, b["reduce_level"],
                                                   compiled, n_vars)
            if not self.gpu and not guarded:
                # (a read under the padding's if_then_else keeps SLP from packing the copies:
                # benchmarks/modes/guarded_slp_check_stop42.py)
                slp = _slp_outside_reductions(vector_view[i], var_ids, reduce_vars, b["reduce_level"], compiled, n_vars)
                if slp > b["auto_vector_extent"]:
                    b["slp_extent"] = slp
                    self.pending_slp.append((i, var_ids, reduce_vars, list(zip(names, compiled)), n_vars,
                                             vector_view[i]))
        for i, var_ids, vec_level, gathered, n_vars in self.pending_gathers:
            b = self.blocks[i]
            b["gathered_per_point"] = sum(1.0 / _shared_copies(b["loops"], var_ids, vec_level, g, n_vars)
                                          for g in gathered)
        self.blocks = [BlockSummary(**b) for b in self.blocks]


def _shared_copies(loops, var_ids, vec_level: int, access, n_vars: int) -> float:
    """Unrolled copies of a block that gather the same vector: the product
    of the extents of the unrolled loops directly outside the vector loop
    (by TVM or by LLVM, extent-1 loops skipped) along which the gathered
    access does not move. LLVM builds that vector once for them."""
    dims, strides, mentions = access
    copies = 1.0
    for j in range(vec_level - 1, -1, -1):
        lp = loops[j]
        if lp.extent == 1:
            continue
        if not lp.unrolled:
            break
        if _stride_along(dims, strides, mentions, n_vars, var_ids[j], lp.extent) == 0:
            copies *= lp.extent
    return copies


def _has_block(stmt) -> bool:
    """Whether ``stmt`` holds a nested block (so it is not an opaque leaf)."""
    name = type(stmt).__name__
    if name in ("SBlockRealize", "SBlock"):
        return True
    if name == "SeqStmt":
        return any(_has_block(x) for x in stmt.seq)
    if name == "IfThenElse":
        return _has_block(stmt.then_case) or (stmt.else_case is not None and _has_block(stmt.else_case))
    body = getattr(stmt, "body", None)
    return body is not None and _has_block(body)


def _tensorized_work(compiled) -> tuple[float, float, int] | None:
    """``(ops, fmas, elements written)`` of one point of a tensorized block, or None.

    A block of plain scalar code writes one element per point; a tensorized
    block (its body an intrinsic) writes a whole tile. Its work is counted
    from its regions: a GEMM-shaped intrinsic reading two operands of
    ``M*K`` and ``K*N`` elements into ``M*N`` does
    ``M*N*K = sqrt(MK * KN * MN)`` multiply-adds (2 operations each); any
    other intrinsic one operation per element of its largest region.
    """
    def volume(dims) -> float:
        v = 1.0
        for _, ext in dims:
            v *= ext if ext else 1
        return v

    writes = [(c[0], volume(c[5])) for c in compiled if c[3]]
    written = max((v for _, v in writes), default=1.0)
    if written <= 1:
        return None
    out_names = {n for n, _ in writes}
    operands = [volume(c[5]) for c in compiled if not c[3] and c[0] not in out_names]
    if len(operands) == 2:
        macs = (operands[0] * operands[1] * written) ** 0.5
        return 2.0 * macs, macs, int(written)
    return max([written] + operands), 0.0, int(written)


def _llvm_full_unroll(loops, var_ids, instructions: float, access_vars, flags: list) -> None:
    """Mark the loops LLVM has fully unrolled in the code it emits (in place).

    From the innermost loop TVM left rolled outward (TVM's innermost vector
    loop is not a loop once compiled: its body is one group of vector
    instructions), each serial loop is sized as LLVM's LoopUnrollPass sizes
    it, on the body LLVM's earlier passes leave. Per iteration, unrolled:
    the block's ``instructions`` (operations, a multiply-add counted once:
    TVM emits ``llvm.fmuladd``) for every unrolled copy inside, and one load
    or store per distinct element the copies touch of each access that
    moves with the loop (an access whose indices do not mention the loop is
    hoisted or, an accumulator, kept in a register by LICM; copies that
    touch one element share its load). Rolled, also one address computation
    per moving access and the loop's increment, compare and branch. A block
    whose reduction init is still inside (not decomposed) keeps its
    accumulator in memory behind a branch: every access moves, and each copy
    adds the compare, branch and store of the init. ``access_vars`` is
    ``(the loop variables each access mentions, has an init)``.

    The loop is unrolled when its unrolled size ``(rolled - 2) * trips + 2``
    is below ``_LLVM_FULL_UNROLL_THRESHOLD``, or, for at most
    ``_LLVM_UNROLL_ANALYZE_TRIPS`` trips, when ``unrolled * trips`` is below
    the threshold times LLVM's boost ``min(4, rolled / unrolled)``; its
    copies then join the body. The first loop that does not fit (or is not
    serial) stops it. Checked against LLVM's IR on two kernel families
    (``benchmarks/modes/unroll_budget_check_stop40.md``).

    LLVM's vectorizers see only the first loop it unrolls, the innermost
    marked here (every loop inside it unrolled by TVM or of extent 1;
    ``_Walker.finish`` keeps that view). When LLVM's loop and SLP vectorizers run, a loop
    whose inner loop LLVM had to unroll itself is still a loop; LLVM's
    LoopUnrollPass after them unrolls it (kernels built by TVM,
    ``benchmarks/modes/unroll_before_vectorizers_check_stop41.md``: a
    128-wide matmul column loop around ``k`` (8) and ``i`` (16) is vectorized
    when TVM unrolls ``i`` and left scalar, every loop inside unrolled, when
    LLVM does; a depthwise conv's channel loop the same).
    """
    mentions, has_init = access_vars
    inner: list[int] = []  # loops inside the current one, unrolled (or of extent 1)
    for j in range(len(loops) - 1, -1, -1):
        lp = loops[j]
        if lp.kind == "vectorized" and j == len(loops) - 1:
            continue  # TVM's innermost vector loop: one group of vector instructions once compiled
        if flags[j] or lp.extent == 1:
            inner.append(j)
            continue
        if lp.kind != "serial":
            return
        copies = 1.0
        for k in inner:
            copies *= loops[k].extent
        unrolled = (instructions + (3.0 if has_init else 0.0)) * copies
        moving = 0
        for mentioned in mentions:
            if has_init or var_ids[j] in mentioned:
                distinct = 1.0
                for k in inner:
                    if var_ids[k] in mentioned:
                        distinct *= loops[k].extent
                unrolled += distinct
                moving += 1
        rolled = unrolled + moving + 3.0
        trips = lp.extent
        size_ok = (rolled - 2) * trips + 2 < _LLVM_FULL_UNROLL_THRESHOLD
        boost = min(4.0, rolled / unrolled) if unrolled > 0 else 4.0
        if not (size_ok or (trips <= _LLVM_UNROLL_ANALYZE_TRIPS
                            and unrolled * trips < _LLVM_FULL_UNROLL_THRESHOLD * boost)):
            return
        flags[j] = "llvm"
        inner.append(j)


def _auto_vector(loops, var_ids, reduce_vars, reduce_level, compiled, n_vars) -> int:
    """Extent LLVM vectorizes by itself in a block with no vectorized loop.

    Candidates, in the loops as LLVM's vectorizers see them (``finish``):

    * the innermost loop of extent > 1 (unrolled or not);
    * the unrolled loops inside the innermost reduction loop: LLVM's SLP
      vectorizer packs their copies, which are independent accumulators
      (copies outside the reduction loop are separated by its dependent
      updates, and in a large unrolled body SLP then only builds vectors
      lane by lane);
    * the innermost loop left rolled (e.g. a channel loop outside fully
      unrolled filter taps): LLVM's loop vectorizer sees it as the
      innermost loop. Whatever is unrolled inside it, reductions or not:
      asking for reductions only agreed with LLVM's assembly less often
      (``benchmarks/modes/vectorizer_check.md``), although it also credits
      some loops LLVM leaves scalar (spatial copies unrolled inside).

    A candidate must be a serial or unrolled loop over a non-reduction axis
    (a float reduction is not reassociated without fast-math) along which
    every read is contiguous or invariant and every write contiguous.
    Returns the largest such extent (0 if none).
    """
    depth = len(loops)
    cands = []
    for j in range(depth - 1, -1, -1):
        if loops[j].extent > 1:
            cands.append(j)
            break
    cands += [j for j in range(reduce_level, depth) if loops[j].unrolled and loops[j].extent > 1]
    for j in range(depth - 1, -1, -1):
        if loops[j].extent > 1 and not loops[j].unrolled:
            cands.append(j)  # the innermost rolled loop
            break
    best = 0
    for j in cands:
        if loops[j].kind not in ("serial", "unrolled") or var_ids[j] in reduce_vars or loops[j].extent <= best:
            continue
        ok = True
        for is_write, dims, strides, mentions in compiled:
            step = _stride_along(dims, strides, mentions, n_vars, var_ids[j], loops[j].extent)
            if step is None or abs(step) > 1 or (is_write and step == 0):
                ok = False
                break
        if ok:
            best = loops[j].extent
    return best or _interleaved_auto_vector(loops, var_ids, reduce_vars, compiled, n_vars)


def _slp_outside_reductions(loops, var_ids, reduce_vars, reduce_level, compiled, n_vars) -> int:
    """Extent LLVM's SLP vectorizer packs from unrolled copies outside the
    reductions: an unrolled loop of extent >= 4 between the innermost
    rolled loop and the innermost reduction loop (e.g. a depthwise conv's 8
    channel copies outside its unrolled filter taps, inside a rolled spatial
    loop), along which every read is contiguous or invariant and every write
    contiguous. DEP_17's fastest record is 70 packed 8-wide FMAs of such
    copies (the assembly on four CPUs, stop 41). LLVM's loop vectorizer runs
    first: where it takes the rolled loop around them (with gathers,
    :func:`_gathered_rolled_loop`), they are not packed. Returns the largest
    such extent (0 if none)."""
    depth = len(loops)
    rolled = next((k for k in range(depth - 1, -1, -1) if loops[k].extent > 1 and not loops[k].unrolled), -1)
    best = 0
    for j in range(rolled + 1, reduce_level):
        lp = loops[j]
        if not lp.unrolled or lp.extent < 4 or lp.extent <= best or var_ids[j] in reduce_vars:
            continue
        ok = True
        for is_write, dims, strides, mentions in compiled:
            step = _stride_along(dims, strides, mentions, n_vars, var_ids[j], lp.extent)
            if step is None or abs(step) > 1 or (is_write and step == 0):
                ok = False
                break
        if ok:
            best = lp.extent
    return best


# LLVM's AliasSetTracker merges every alias set into one once it holds more
# pointers than this (``alias-set-saturation-threshold``, default 250,
# llvm/lib/Analysis/AliasSetTracker.cpp); the loop vectorizer then cannot
# prove the loop's accesses independent. Checked through TVM's ``cl-opt``:
# raised to 1000, a 256-pointer depthwise loop is vectorized with gathers;
# lowered to 200, a 224-pointer one is not
# (benchmarks/modes/gathers_or_slp_check_stop42.md).
_ALIAS_SET_SATURATION = 250


def _gathered_rolled_loop(loops, var_ids, reduce_vars, accesses, n_vars, local: set) -> bool:
    """Whether LLVM's loop vectorizer, where gathers are legal, takes the
    innermost rolled loop of a block with gathers (before the SLP vectorizer
    could pack the copies inside it).

    The loop must be serial, iterate a non-reduction axis, and move some
    access by a stride (a loop along which everything is contiguous is an
    ordinary :func:`_auto_vector` candidate). Accesses invariant along it
    are hoisted or kept in registers (LICM). Its memory accesses must be
    provably independent:

    * inside a parallel loop TVM outlines the body into a function that
      reaches the buffers allocated outside it through a closure, without
      ``noalias``: a moving read of such a buffer (other than the written
      buffer's own loads) keeps the loop from being vectorized, whether the
      written buffer is allocated inside the body (``local``) or not; loads
      of a local buffer are not merged across the stores to a buffer
      reached through the closure, so each unrolled copy's load is its own
      pointer (kernels, ``gathers_or_slp_check_stop42.md``: the four cases);
    * otherwise copies that read one element share its load;
    * the pointers in the loop (each distinct element a moving access
      touches; a written buffer's loads and stores share theirs) must not
      exceed ``_ALIAS_SET_SATURATION``.
    """
    depth = len(loops)
    j = next((k for k in range(depth - 1, -1, -1) if loops[k].extent > 1 and not loops[k].unrolled), -1)
    if j < 0 or loops[j].kind != "serial" or var_ids[j] in reduce_vars:
        return False
    var, extent = var_ids[j], loops[j].extent
    inner = [k for k in range(j + 1, depth) if loops[k].extent > 1]
    moving, strided = [], False
    for name, (is_write, dims, strides, mentions) in accesses:
        step = _stride_along(dims, strides, mentions, n_vars, var, extent)
        if step == 0:
            continue
        strided = strided or step is None or abs(step) > 1
        moving.append((name, is_write, dims, strides, mentions))
    if not strided:
        return False
    written = {m[0] for m in moving if m[1]}
    merged = True
    if any(loops[k].kind == "parallel" for k in range(j)):
        if any(n not in local for n in {m[0] for m in moving if not m[1]} - written):
            return False
        merged = all(n in local for n in written)
    pointers = 0.0
    per_buffer: dict = {}
    for name, is_write, dims, strides, mentions in moving:
        if name in written or merged:
            count = _distinct_elements(dims, strides, mentions, inner, loops, var_ids, n_vars)
        else:
            count = 1.0
            vs = frozenset().union(*mentions)
            for k in inner:
                if var_ids[k] in vs:
                    count *= loops[k].extent
        if name in written:
            per_buffer[name] = max(per_buffer.get(name, 0.0), count)
        else:
            pointers += count
    pointers += sum(per_buffer.values())
    return pointers <= _ALIAS_SET_SATURATION


def _distinct_elements(dims, strides, mentions, inner, loops, var_ids, n_vars) -> float:
    """Distinct elements one access touches across the unrolled copies (the
    loops ``inner``): offsets enumerated along each loop's stride; where a
    stride is not constant, every copy counts as distinct."""
    offsets = {0}
    extra = 1.0
    for k in inner:
        st = _stride_along(dims, strides, mentions, n_vars, var_ids[k], loops[k].extent)
        if st is None or len(offsets) * loops[k].extent > _MAX_COPIES:
            extra *= loops[k].extent
        elif st:
            offsets = {o + i * st for o in offsets for i in range(loops[k].extent)}
    return len(offsets) * extra


# LLVM's loop vectorizer loads (and stores) an interleaved group, the
# accesses of one buffer at offsets 0..s-1 of a stride s, with wide loads
# and shuffles (LoopVectorize's InterleavedAccessInfo). The limit of 8 is
# stop 28's reading of X86's AVX-512 interleave costs; only factor 2 was
# checked in the assembly (strided_vectorizer_check.md, both CPUs).
_MAX_INTERLEAVE = 8
_MAX_COPIES = 4096  # unrolled copies enumerated for an interleave check


def _interleaved_auto_vector(loops, var_ids, reduce_vars, compiled, n_vars) -> int:
    """Extent LLVM's loop vectorizer takes when the innermost loop left
    rolled has strided accesses that form complete interleaved groups.

    The loop must be serial (not the parallel loop: TVM emits its body as a
    loop over the thread's chunk, and where everything inside it was
    unrolled, LLVM's SLP vectorizer packed the copies instead, e.g. 256
    two-wide FMAs in FDN_11's record 40), iterate a non-reduction axis, and
    every access must be invariant, contiguous, or of stride ``s`` (``1 <
    |s| <= 8``) with the unrolled copies inside the loop covering its
    offsets in complete runs ``o, o+1, ..., o+|s|-1`` (e.g. the taps ``2x,
    2x+1`` of each row of a 2x2/2 pooling window; not the three taps of a
    3x3/2 window, whose third offset starts a group with a gap). Any other
    strided access is gathered or scattered, or the loop left scalar; the
    model counts that loop as scalar (it does not score gathers: on the
    Zen 4 LLVM gathers such loops, and they can run slower than scalar).
    Returns 0 when the loop does not qualify.
    """
    depth = len(loops)
    j = next((k for k in range(depth - 1, -1, -1) if loops[k].extent > 1 and not loops[k].unrolled), -1)
    if j < 0 or loops[j].kind != "serial" or var_ids[j] in reduce_vars:
        return 0
    extent, var = loops[j].extent, var_ids[j]
    inner = [k for k in range(j + 1, depth) if loops[k].extent > 1]
    strided = False
    for is_write, dims, strides, mentions in compiled:
        step = _stride_along(dims, strides, mentions, n_vars, var, extent)
        if step is None or (is_write and step == 0):
            return 0
        if abs(step) <= 1:
            continue
        if abs(step) > _MAX_INTERLEAVE or not _interleaved(abs(step), inner, loops, var_ids, dims, strides,
                                                            mentions, n_vars):
            return 0
        strided = True
    return extent if strided else 0


def _interleaved(stride: int, inner, loops, var_ids, dims, strides, mentions, n_vars) -> bool:
    """Whether the unrolled copies of an access (the loops ``inner``) cover
    its offsets in complete runs of ``stride`` consecutive elements:
    complete interleave groups (copies that read the same offset count
    once, as LLVM loads it once)."""
    offsets = {0}
    for k in inner:
        st = _stride_along(dims, strides, mentions, n_vars, var_ids[k], loops[k].extent)
        if st is None or len(offsets) * loops[k].extent > _MAX_COPIES:
            return False
        if st:
            offsets = {o + i * st for o in offsets for i in range(loops[k].extent)}
    left = sorted(offsets)
    while left:
        run = range(left[0], left[0] + stride)
        if left[:stride] != list(run):
            return False
        left = left[stride:]
    return True


def _shared_allocations(w: _Walker) -> None:
    """Shared memory each thread block holds.

    A staged buffer lives inside the innermost loop enclosing both the block
    that writes it and the blocks that read it (where TVM's buffer
    compaction puts it): its size is the writer's footprint at that loop.
    """
    for region, name, is_write, loops, fps in w.shared_accesses:
        if not is_write:
            continue
        depth = len(loops)
        for r2, n2, w2, loops2, _ in w.shared_accesses:
            if r2 == region and n2 == name and not w2:
                depth = min(depth, _common_depth(loops, loops2))
        w.region_shared[region] = w.region_shared.get(region, 0.0) + fps[depth]


def _common_depth(var_ids, other) -> int:
    """How many outer loops two blocks' nests share (their loop variables
    from the outside in): the depth of the innermost loop enclosing both."""
    depth = 0
    for x, y in zip(var_ids, other):
        if x != y:
            break
        depth += 1
    return depth


def _compacted_intermediates(w: _Walker) -> tuple[dict, dict]:
    """Bytes and enclosing parallel iterations of each global buffer (CPU).

    TVM's lowering (``PlanAndUpdateBufferAllocationLocation`` then
    ``CompactBufferAllocation``) allocates an intermediate inside the
    innermost loop enclosing every block that touches it, shrunk to the
    region one iteration of that loop touches: its size is the largest
    footprint of those blocks there, and a parallel loop around it gives
    each running iteration its own copy. Parameters (buffers no block
    allocates) keep their size.
    """
    # buffer -> [loop variables enclosing all its blocks so far, a block's
    # loops (the first one's), largest footprint at each of those levels]
    sites: dict = {}
    nbytes: dict = {}
    for b, var_ids in zip(w.blocks, w.block_vars):
        for a in b.accesses:
            if a.scope not in ("global", ""):
                continue
            nbytes[a.buffer] = a.buffer_bytes
            if a.buffer not in w.allocated:
                continue
            site = sites.get(a.buffer)
            if site is None:
                sites[a.buffer] = [var_ids, b.loops, list(a.footprint_bytes)]
                continue
            common = _common_depth(site[0], var_ids)
            site[0] = site[0][:common]
            site[2] = [max(x, y) for x, y in zip(site[2][:common + 1], a.footprint_bytes)]
    copies: dict = {}
    for name, (prefix, loops, fps) in sites.items():
        nbytes[name] = min(nbytes[name], fps[len(prefix)])
        par = 1
        for lp in loops[:len(prefix)]:
            if lp.kind == "parallel":
                par *= lp.extent
        if par > 1:
            copies[name] = par
    return nbytes, copies


def _hoist_invariant_blocks(w: _Walker, nbytes: dict, copies: dict) -> None:
    """Count once the recomputation LLVM hoists out of a loop (CPU, in place).

    A block placed inside a rolled loop whose variable none of its indices
    mention computes the same values at every iteration. TVM keeps an
    allocation below ``kMaxStackAlloca`` (1024 bytes, ``LowerTVMBuiltin``)
    on the stack; with the loops around its accesses unrolled, their
    indices are constants, LLVM's SROA makes it registers, and LICM hoists
    the block's now straight-line code out of the loop. So, from the block
    outward: a rolled serial loop of extent > 1 not mentioned by the block is left
    (``work_points`` divided by its extent) when everything between it and
    the block is straight-line (unrolled, extent 1, or the innermost vector
    loop), every buffer the block writes is such a stack intermediate
    (allocated inside the parallel loop around the block, if any), and no
    buffer it reads is written inside that loop by another block that stays
    in it. A loop of any other kind, or one it depends on, stops the walk
    (LICM hoists instructions, not loops). A loop any block's view leaves
    rolled is rolled for all of them. Which blocks stay decides which reads
    are invariant: decided from "none hoisted" until nothing changes.
    """
    blocks, var_ids, mentioned = w.blocks, w.block_vars, w.block_mentions
    eligible = []
    for i, b in enumerate(blocks):
        writes = [a for a in b.accesses if a.is_write]
        parallel = any(lp.kind == "parallel" for lp in b.loops)
        if writes and all(a.buffer in w.allocated and a.scope in ("global", "")
                          and nbytes.get(a.buffer, float("inf")) < _STACK_ALLOCA_BYTES
                          and (not parallel or a.buffer in copies) for a in writes):
            eligible.append(i)
    if not eligible:
        return
    # A loop is one loop for every block in it: rolled if any block's view
    # leaves it rolled (LLVM's unroll verdict is taken per block).
    rolled = {v for b, vs in zip(blocks, var_ids) for lp, v in zip(b.loops, vs) if lp.extent > 1 and not lp.unrolled}
    left: dict[int, dict[int, int]] = {i: {} for i in eligible}  # block -> {loop var: extent} it leaves
    for _ in range(len(eligible) + 1):
        # loop variable -> buffer -> blocks writing it inside that loop and staying there
        inside: dict[int, dict[str, set]] = {}
        for i, b in enumerate(blocks):
            gone = left.get(i, {})
            for v in var_ids[i]:
                if v not in gone:
                    per = inside.setdefault(v, {})
                    for a in b.accesses:
                        if a.is_write:
                            per.setdefault(a.buffer, set()).add(i)
        new = {}
        for i in eligible:
            b = blocks[i]
            reads = [a.buffer for a in b.accesses if not a.is_write]
            out: dict[int, int] = {}
            depth = len(b.loops)
            for j in range(depth - 1, -1, -1):
                lp, v = b.loops[j], var_ids[i][j]
                if lp.extent == 1 or (lp.unrolled and v not in rolled) or (lp.kind == "vectorized" and j == depth - 1):
                    continue  # straight-line code, whether the block depends on it or not
                if v in mentioned[i] or lp.kind not in ("serial", "unrolled"):
                    break
                per = inside.get(v, {})
                if any(per.get(buf, set()) - {i} for buf in reads):
                    break
                out[v] = lp.extent
            new[i] = out
        if new == left:
            break
        left = new
    for i, out in left.items():
        if out:
            blocks[i] = replace(blocks[i], work_points=blocks[i].work_points / math.prod(out.values()))


def _within_allocations(b: BlockSummary, nbytes: dict) -> BlockSummary:
    """``b`` with the footprint of each global buffer it touches capped at the
    buffer's bytes as compiled (``nbytes``, from :func:`_compacted_intermediates`).

    Only a compacted intermediate changes: a parameter's bytes are its whole
    size, which no footprint exceeds. The compacted buffer is one tile,
    allocated inside the loop that encloses every block touching it and
    reused by each iteration of that loop: over any number of iterations it
    occupies its allocation's bytes, not the span its indices cover in the
    uncompacted buffer (a padding tile recomputed per output tile reads and
    writes the same few bytes).
    """
    accesses, changed = [], False
    for a in b.accesses:
        cap = nbytes.get(a.buffer)  # global buffers only
        if cap is not None and a.footprint_bytes and a.footprint_bytes[0] > cap:
            a = replace(a, footprint_bytes=tuple(min(f, cap) for f in a.footprint_bytes))
            changed = True
        accesses.append(a)
    return replace(b, accesses=tuple(accesses)) if changed else b


def _prim_func(mod):
    """The PrimFunc ``main`` (or the only PrimFunc) of ``mod`` (an IRModule,
    a PrimFunc or a ``tvm.s_tir.Schedule``)."""
    if isinstance(mod, tvm.s_tir.Schedule):
        mod = mod.mod
    if isinstance(mod, tvm.IRModule):
        funcs = [f for _, f in mod.functions.items() if type(f).__name__ == "PrimFunc"]
        if not funcs:
            raise SummaryError("the module has no PrimFunc to summarize")
        return mod["main"] if any(gv.name_hint == "main" for gv in mod.get_global_vars()) else funcs[0]
    return mod


def parameter_bytes(mod) -> float:
    """Bytes of the function's parameters (its inputs and outputs): what
    every schedule of it reads or writes at least once. Scheduling never
    changes them."""
    total = 0.0
    for buf in _prim_func(mod).params[:]:
        if not hasattr(buf, "shape"):
            continue  # a scalar parameter
        try:
            shape = [int(d) for d in buf.shape[:]]
        except (TypeError, ValueError):
            raise SummaryError(f"parameter {buf.name} has a dynamic shape; only static shapes are supported") from None
        total += _buffer_bytes(_bits(buf.dtype), shape)
    return total


def _buffer_bytes(bits: int, shape) -> float:
    """Bytes of a buffer of ``shape`` with ``bits``-bit elements (a byte at least each)."""
    n = float(max(1, bits // 8))
    for d in shape:
        n *= d
    return n


def summarize(mod, target_kind: str = "cpu") -> ProgramSummary:
    """Summarize the PrimFunc ``main`` (or the only PrimFunc) of ``mod``.

    Parameters
    ----------
    mod : IRModule or PrimFunc or tvm.s_tir.Schedule
        A scheduled program (``sch.mod`` of a MetaSchedule candidate).
    target_kind : {"cpu", "gpu"}
        ``gpu`` reads ``blockIdx``/``threadIdx`` bindings as the parallel units.

    Raises
    ------
    SummaryError
        A GPU schedule with no ``blockIdx`` binding (it would not be a valid
        kernel), a dynamic loop extent, or a module with no PrimFunc.

    Notes
    -----
    A function with no loops is summarized as one serial region whose
    blocks have one point each: the model then predicts the fixed overhead
    plus a few operations, which is what such a function costs.
    """
    if target_kind not in ("cpu", "gpu"):
        raise ValueError(f"target_kind must be 'cpu' or 'gpu', got {target_kind!r}")
    func = _prim_func(mod)
    gpu = target_kind == "gpu"
    w = _Walker(gpu)
    w.stmt(func.body)
    w.finish()
    if gpu and w.blocks and w.next_region == 0:
        raise SummaryError(
            "CUDA schedule without thread bindings: no loop is bound to blockIdx, so it is not a "
            "GPU kernel (apply a GPU schedule, e.g. MetaSchedule's CUDA design space)")
    _shared_allocations(w)
    if gpu:
        buffer_bytes = {a.buffer: a.buffer_bytes for b in w.blocks for a in b.accesses
                        if a.scope in ("global", "")}
        copies: dict = {}
    else:
        buffer_bytes, copies = _compacted_intermediates(w)
        for i, var_ids, reduce_vars, accesses, n_vars, loops in w.pending_slp:
            if _gathered_rolled_loop(loops, var_ids, reduce_vars, accesses, n_vars, set(copies)):
                w.blocks[i] = replace(w.blocks[i], gathered_loop=True)
        _hoist_invariant_blocks(w, buffer_bytes, copies)
        w.blocks = [_within_allocations(b, buffer_bytes) for b in w.blocks]
    by_region: dict[int, list[BlockSummary]] = {}
    for b in w.blocks:
        by_region.setdefault(b.region, []).append(b)
    regions = []
    for r, blocks in sorted(by_region.items()):
        if r < 0:
            if gpu:
                raise SummaryError(
                    f"block {blocks[0].name} is outside any blockIdx-bound loop: a CUDA schedule "
                    "must bind every block to blockIdx/threadIdx")
            regions.append(Region(r, 1, 1, 0.0, 0.0, tuple(blocks)))
        else:
            regions.append(Region(r, w.region_units[r], w.region_threads[r],
                                  w.region_shared.get(r, 0.0), w.region_local.get(r, 0.0), tuple(blocks)))
    return ProgramSummary(target_kind=target_kind, regions=tuple(regions), unroll_max_step=w.unroll,
                          buffer_bytes=buffer_bytes, buffer_copies=copies)
