"""Predictive fusion: fuse or split each larger group by the hybrid model's predicted latency.

For a network after TVM's default fusion, :class:`FusionPlanner`

1. finds the larger groups the :mod:`~tvm_latmodel.fusion.patterns` allow
   (MobileNetV2 bottlenecks, attention, concat -> linear, conv -> conv);
2. fuses each into one PrimFunc with ``FuseOpsByPattern`` + ``FuseTIR``
   (:func:`fuse_group`; padding between fused operators is inlined, see
   :mod:`~tvm_latmodel.fusion.padding`) and checks that it lowers
   (``tvm.compile``); a group
   that fails falls back to its split form with a
   :class:`FusionFallbackWarning`, never an exception;
3. predicts each PrimFunc's latency as the *best* prediction of the hybrid
   model over ``samples`` schedules drawn from MetaSchedule's design space
   (what tuning could reach, not one arbitrary schedule); the split form
   costs the sum of its default kernels' best predictions. On a CPU a fused
   group's schedules are also run: only those that compute what its loop
   nest does count, and a group with none falls back to its split form
   (TVM 0.27 schedules some fused conv -> conv kernels into wrong code);
4. fuses a group when its predicted latency beats the split form's, and
   reports the predicted gain and the DRAM traffic fusion removes.

Predictions are cached by workload (structural hash), so a kernel that
repeats (ResNet blocks, transformer layers) is sampled once.
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import tvm
import tvm_ffi
from tvm import relax

from .padding import inline_intermediate_padding
from .patterns import (
    FusionError,
    GroupMatch,
    KernelInfo,
    chain_fusion_pattern,
    find_groups,
    kernel_infos,
    resolve_patterns,
)


_CALL_TIR = tvm.ir.Op.get("relax.call_tir")


class FusionFallbackWarning(UserWarning):
    """A fused group could not be built or scheduled; the plan keeps it split."""


@dataclass
class FusionGroup:
    """One group of the plan: a default kernel, or a pattern group with its decision.

    Attributes
    ----------
    name : str
        ``<binding>:<prim_func>`` for a default kernel, ``<pattern><n>:<first>..<last>``
        for a pattern group.
    stage : str or None
        Stage of its anchor kernel (the last convolution/matmul, else the last
        reduction, else the last kernel), as :mod:`tvm_latmodel.networks.stages`
        charges fused kernels.
    ops : list of str
        Op names of its kernels, in order.
    source : str
        ``default`` (TVM's ``FuseOps`` group) or ``pattern:<name>``.
    predicted_us : float
        Predicted latency of the fused form (best over the sampled schedules).
        For a default group, or a pattern group that fell back, the split form's.
    unfused_predicted_us : float
        Sum of its default kernels' best predicted latencies.
    predicted_gain : float
        ``unfused_predicted_us - predicted_us`` in microseconds: positive when
        fusing is predicted faster; 0 for default groups (never re-split).
    decision : str
        ``fuse`` or ``split``; default groups are ``fuse`` (TVM's fusion is kept).
    dram_bytes_saved : int
        DRAM bytes fusing the group removes: every intermediate tensor written
        once and read once. 0 for default groups; for a ``split`` decision it is
        what fusing *would* have saved.
    kernels : list of str
        The default kernels' PrimFunc names.
    note : str
        Why a group fell back, or empty.
    """

    name: str
    stage: str | None
    ops: list[str]
    source: str
    predicted_us: float
    unfused_predicted_us: float
    predicted_gain: float
    decision: str
    dram_bytes_saved: int
    kernels: list[str] = field(default_factory=list)
    note: str = ""
    match: GroupMatch | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        """The JSON fields of ``fusion-plan --json``."""
        data = {key: value for key, value in asdict(self).items()
                if key not in ("kernels", "note", "match")}
        data["predicted_us"] = float(data["predicted_us"])
        data["unfused_predicted_us"] = float(data["unfused_predicted_us"])
        data["predicted_gain"] = float(data["predicted_gain"])
        data["dram_bytes_saved"] = int(data["dram_bytes_saved"])
        return data


@dataclass
class FusionPlan:
    """The planner's result for one network.

    Attributes
    ----------
    network : str
        Network name.
    target : tvm.target.Target
    groups : list of FusionGroup
        Every kernel of the network in exactly one group, in execution order.
    notes : list of str
        Patterns that matched nothing, fallbacks, other remarks.
    samples : int
        Schedules sampled per PrimFunc.
    module : tvm.IRModule
        The network after TVM's default fusion (what :func:`apply_plan` rewrites).
    """

    network: str
    target: tvm.target.Target
    groups: list[FusionGroup]
    notes: list[str]
    samples: int
    module: tvm.IRModule | None = field(default=None, repr=False, compare=False)

    @property
    def predicted_total_us(self) -> float:
        """Predicted network latency: each group in its chosen form."""
        return float(sum(g.predicted_us if g.decision == "fuse" else g.unfused_predicted_us
                         for g in self.groups))

    @property
    def decisions(self) -> list[FusionGroup]:
        """The pattern groups (the groups a decision was made for)."""
        return [g for g in self.groups if g.source != "default"]

    def to_json(self) -> dict:
        """One JSON-ready dict: network, target, predicted_total_us, groups, notes."""
        return {
            "network": self.network,
            "target": str(self.target),
            "predicted_total_us": self.predicted_total_us,
            "groups": [g.to_json() for g in self.groups],
            "notes": list(self.notes),
        }


def _task_mod(func: tvm.tirx.PrimFunc) -> tvm.IRModule:
    """``{"main": func}`` as MetaSchedule's task extraction makes it."""
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def _chain_module(fused_module: tvm.IRModule, group: GroupMatch) -> tvm.IRModule:
    """A small Relax module whose ``main`` is just the group's kernel calls.

    Arguments from outside the chain become parameters, so constants and the
    rest of the network stay out of the way.
    """
    members = {k.binding for k in group.kernels}
    params: list[relax.Var] = []
    mapping: dict = {}

    def external(arg):
        key = arg.name if isinstance(arg, relax.Var) else id(arg)
        if key not in mapping:
            mapping[key] = relax.Var(f"p{len(params)}", arg.ty)
            params.append(mapping[key])
        return mapping[key]

    for kernel in group.kernels:
        for arg in kernel.args:
            if not (isinstance(arg, relax.Var) and arg.name in members):
                external(arg)
    builder = relax.BlockBuilder()
    with builder.function("main", params):
        with builder.dataflow():
            for kernel in group.kernels:
                gvar = builder.add_func(fused_module[kernel.prim_func], kernel.prim_func)
                args = [mapping[a.name if isinstance(a, relax.Var) else id(a)] for a in kernel.args]
                var = builder.emit(relax.call_tir(gvar, args, kernel.output_ty),
                                   name_hint=kernel.binding)
                mapping[kernel.binding] = var
            output = builder.emit_output(var)
        builder.emit_func_output(output)
    return builder.get()


def fuse_group(fused_module: tvm.IRModule, group: GroupMatch) -> tvm.IRModule:
    """Fuse one group into a single PrimFunc with ``FuseOpsByPattern`` and ``FuseTIR``.

    Padding between two fused operators is inlined into its consumer
    (:func:`~tvm_latmodel.fusion.padding.inline_intermediate_padding`), so no
    schedule can leave its border unwritten.

    Parameters
    ----------
    fused_module : tvm.IRModule
        The network after TVM's default fusion (holds the members' PrimFuncs).
    group : GroupMatch
        The chain to fuse.

    Returns
    -------
    tvm.IRModule
        ``{"main": fused PrimFunc}``, ready for MetaSchedule and ``tvm.compile``.

    Raises
    ------
    FusionError
        If the pattern did not match or ``FuseTIR`` did not leave exactly one kernel.
    """
    chain = _chain_module(fused_module, group)
    grouped = relax.transform.FuseOpsByPattern([chain_fusion_pattern(group)],
                                               bind_constants=False)(chain)
    composite = [gv for gv, fn in grouped.functions.items()
                 if isinstance(fn, relax.Function) and fn.attrs is not None
                 and "Composite" in fn.attrs]
    if len(composite) != 1:
        raise FusionError(f"FuseOpsByPattern made {len(composite)} groups of {group.pattern}, not 1")
    calls = [b for block in grouped[composite[0]].body.blocks for b in block.bindings
             if isinstance(b.value, relax.Call) and b.value.op.same_as(_CALL_TIR)]
    if len(calls) != len(group.kernels):
        raise FusionError(f"the {group.pattern} pattern grouped {len(calls)} of its "
                          f"{len(group.kernels)} kernels (they do not form a chain)")
    merged = relax.transform.FuseTIR()(grouped)
    prim_funcs = [fn for fn in merged.functions.values() if isinstance(fn, tvm.tirx.PrimFunc)]
    if len(prim_funcs) != 1:
        raise FusionError(f"FuseTIR left {len(prim_funcs)} PrimFuncs for {group.pattern}, not 1")
    mod, _ = inline_intermediate_padding(_task_mod(prim_funcs[0]))
    return mod


def build_check(mod: tvm.IRModule, target: tvm.target.Target) -> None:
    """Lower and build a PrimFunc module (unscheduled) for ``target``; raises on failure."""
    tvm.compile(mod, target=target)


class FusionPlanner:
    """Decide, per larger fusion group, whether fusing it is predicted to pay.

    Parameters
    ----------
    target : tvm.target.Target, optional
        Defaults to :func:`tvm_latmodel.targets.host_target`.
    samples : int
        Schedules sampled per PrimFunc; its predicted latency is the best of them.
    seed : int
        Seed of the schedule sampling.
    patterns : list of str, optional
        Pattern names (default: all of :data:`tvm_latmodel.fusion.PATTERNS`).
    check_build : bool
        Lower every fused group with ``tvm.compile`` before predicting it, and
        (CPU targets) count only sampled schedules that compute what its loop
        nest does (:meth:`predict_best_s`).
    model : HybridCostModel, optional
        The predictor (default ``HybridCostModel(target=target)``).
    progress : callable, optional
        Called with one line of progress text at a time (e.g. print to stderr).
    """

    def __init__(self, target=None, *, samples: int = 8, seed: int = 0, patterns=None,
                 check_build: bool = True, model=None, progress=None) -> None:
        self.target = target
        self.samples = samples
        self.seed = seed
        self.patterns = patterns
        self.check_build = check_build
        self.model = model
        self.progress = progress
        self.cache_: dict[int, list[tuple[tvm.IRModule, bool, float]]] = {}

    # ------------------------------------------------------------ helpers
    def _target(self) -> tvm.target.Target:
        if self.target is None:
            from tvm_latmodel.targets import host_target  # pylint: disable=import-outside-toplevel

            self.target = host_target()
        return self.target

    def _model(self):
        if self.model is None:
            from tvm_latmodel.model.cost_model import HybridCostModel  # pylint: disable=import-outside-toplevel

            self.model = HybridCostModel(target=self._target())
        return self.model

    def _say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(text)

    def predict_best_s(self, mod: tvm.IRModule, *, check: bool = False) -> float:
        """Best predicted latency (seconds) of a ``{"main": PrimFunc}`` module over sampled schedules.

        With ``check`` (CPU targets), the schedules are run, best predicted
        first, against the untuned loop nest with their intermediates
        poisoned (:func:`~tvm_latmodel.networks.kernels.check_kernel`), and the
        best predicted one that computes the same thing counts: TVM 0.27
        produces wrong schedules of some fused kernels, and a fusion is only
        worth what its correct schedules reach.

        Raises
        ------
        FusionError
            If MetaSchedule yields no valid schedule, or (``check``) none of
            them computes what the loop nest does.
        """
        from tvm_latmodel.sampling import sampled_candidates  # pylint: disable=import-outside-toplevel

        target = self._target()
        check = check and target.kind.name == "llvm"
        key = int(tvm_ffi.structural_hash(mod))
        for known, checked, value in self.cache_.get(key, []):
            if checked >= check and tvm_ffi.structural_equal(known, mod):
                return value
        context, candidates = sampled_candidates(mod, target, self.samples, seed=self.seed)
        if not candidates:
            raise FusionError("MetaSchedule produced no valid schedule")
        latencies = np.asarray(self._model().predict_latency_s(context, candidates), dtype=float)
        usable = [i for i in np.argsort(latencies) if np.isfinite(latencies[i]) and latencies[i] > 0]
        if not usable:
            raise FusionError("the model predicted no finite latency")
        best = float(latencies[usable[0]])
        if check:
            best = self._best_correct_s(mod, [candidates[i].sch for i in usable], latencies[usable])
        self.cache_.setdefault(key, []).append((mod, check, best))
        return best

    def _best_correct_s(self, mod: tvm.IRModule, schedules: list, latencies) -> float:
        """The first of ``schedules`` (best predicted first) that computes what ``mod`` does."""
        from tvm_latmodel.networks.kernels import first_correct, run_kernel  # pylint: disable=import-outside-toplevel

        target = self._target()
        _, reference = run_kernel(mod, target, number=1, min_repeat_ms=0)
        n = first_correct(schedules, target, reference)
        if n is None:
            raise FusionError(f"none of the {len(schedules)} sampled schedules computes what the fused loop nest "
                              "does (checked with poisoned intermediates); TVM would tune it into wrong code")
        if n:
            self._say(f"[fusion] {n} better-predicted sampled schedule(s) compute something else "
                      "than the fused loop nest; the next correct one counts")
        return float(latencies[n])

    def _kernel_us(self, fused_module, kernel: KernelInfo, notes: list[str]) -> float:
        mod = _task_mod(fused_module[kernel.prim_func])
        try:
            return self.predict_best_s(mod) * 1e6
        except Exception as err:  # noqa: BLE001 - one kernel must not stop the plan
            from tvm_latmodel.hardware import HardwareSpec  # pylint: disable=import-outside-toplevel
            from tvm_latmodel.model.modes import estimate  # pylint: disable=import-outside-toplevel
            from tvm_latmodel.model.program import summarize  # pylint: disable=import-outside-toplevel

            kind = "gpu" if self._target().kind.name == "cuda" else "cpu"
            notes.append(f"{kernel.prim_func}: no schedule could be predicted ({err}); "
                         "using the analytical estimate of its unscheduled loop nest")
            hw = HardwareSpec.from_target(self._target())
            return estimate(summarize(mod, kind), hw).latency_s * 1e6

    # --------------------------------------------------------------- plan
    def partition(self, network):
        """The fused module, its kernels, the pattern groups and notes.

        Parameters
        ----------
        network : Network, FusedNetwork or tvm.IRModule
            A network of :mod:`tvm_latmodel.networks` (fused here), an already
            fused one, or a Relax module (fused here with
            :func:`tvm_latmodel.networks.fusion_passes`; no stage labels).

        Returns
        -------
        name : str
        fused_module : tvm.IRModule
        kernels : list of KernelInfo
        groups : list of GroupMatch
        notes : list of str

        Raises
        ------
        FusionError
            If the module cannot be partitioned into kernels.
        """
        from tvm_latmodel.networks import FusedNetwork, Network, fuse_network, fusion_passes  # pylint: disable=import-outside-toplevel

        resolve_patterns(self.patterns)  # unknown names fail before any work
        target = self._target()
        if isinstance(network, Network):
            self._say(f"[fusion] fusing {network.name} as TVM does (FuseOps, FuseTIR)")
            network = fuse_network(network, target)
        if isinstance(network, FusedNetwork):
            name = network.network.name
            module = network.module
            stages = {k.binding: k.stage for k in network.kernels}
        elif isinstance(network, tvm.IRModule):
            name = "module"
            try:
                with target:
                    module = tvm.transform.Sequential(fusion_passes(target))(network)
            except Exception as err:  # noqa: BLE001
                raise FusionError(f"cannot partition the module: TVM's default fusion failed "
                                  f"({type(err).__name__}: {err})") from err
            stages = None
        else:
            raise FusionError(f"cannot partition a {type(network).__name__}; pass a Network, "
                              "a FusedNetwork or a Relax IRModule")
        kernels = kernel_infos(module, stages)
        groups, notes = find_groups(kernels, self.patterns)
        return name, module, kernels, groups, notes

    def plan(self, network) -> FusionPlan:
        """Predict every alternative and decide fuse or split per pattern group.

        Parameters
        ----------
        network : Network, FusedNetwork or tvm.IRModule
            See :meth:`partition`.

        Returns
        -------
        FusionPlan
        """
        name, module, kernels, matches, notes = self.partition(network)
        self._say(f"[fusion] {name}: {len(kernels)} default kernels, {len(matches)} pattern groups")
        kernel_us: dict[int, float] = {}
        for n, kernel in enumerate(kernels):
            kernel_us[kernel.index] = self._kernel_us(module, kernel, notes)
            if (n + 1) % 10 == 0 or n + 1 == len(kernels):
                self._say(f"[fusion] predicted {n + 1}/{len(kernels)} default kernels")
        in_group = {k.index: g for g in matches for k in g.kernels}
        groups: list[FusionGroup] = []
        counters: dict[str, int] = {}
        emitted: set[int] = set()
        for kernel in kernels:
            match = in_group.get(kernel.index)
            if match is None:
                groups.append(FusionGroup(
                    name=f"{kernel.binding}:{kernel.prim_func}", stage=kernel.stage,
                    ops=list(kernel.ops), source="default", predicted_us=kernel_us[kernel.index],
                    unfused_predicted_us=kernel_us[kernel.index], predicted_gain=0.0,
                    decision="fuse", dram_bytes_saved=0, kernels=[kernel.prim_func]))
                continue
            if id(match) in emitted:
                continue
            emitted.add(id(match))
            number = counters.get(match.pattern, 0)
            counters[match.pattern] = number + 1
            groups.append(self._decide(module, match, number, kernel_us, notes))
        return FusionPlan(network=name, target=self._target(), groups=groups, notes=notes,
                          samples=self.samples, module=module)

    def _decide(self, module, match: GroupMatch, number: int, kernel_us, notes) -> FusionGroup:
        unfused_us = float(sum(kernel_us[k.index] for k in match.kernels))
        anchor = max(match.kernels, key=lambda k: (k.anchor_rank, k.index))
        group = FusionGroup(
            name=f"{match.pattern}{number}:{match.kernels[0].binding}..{match.kernels[-1].binding}",
            stage=anchor.stage, ops=[op for k in match.kernels for op in k.ops],
            source=f"pattern:{match.pattern}", predicted_us=unfused_us,
            unfused_predicted_us=unfused_us, predicted_gain=0.0, decision="split",
            dram_bytes_saved=match.dram_bytes_saved,
            kernels=[k.prim_func for k in match.kernels], match=match)
        try:
            fused_mod = fuse_group(module, match)
            if self.check_build:
                build_check(fused_mod, self._target())
            fused_us = self.predict_best_s(fused_mod, check=self.check_build) * 1e6
        except Exception as err:  # noqa: BLE001 - a failed group falls back, never crashes
            group.note = (f"{group.name} fell back to its split form: "
                          f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}")
            warnings.warn(group.note, FusionFallbackWarning, stacklevel=3)
            notes.append(group.note)
            return group
        if not math.isfinite(fused_us):
            return group
        group.predicted_us = fused_us
        group.predicted_gain = unfused_us - fused_us
        group.decision = "fuse" if fused_us < unfused_us else "split"
        self._say(f"[fusion] {group.name}: fused {fused_us:.1f} us vs split {unfused_us:.1f} us "
                  f"-> {group.decision}")
        return group


def apply_plan(plan: FusionPlan, decisions: dict[str, str] | None = None) -> tvm.IRModule:
    """The network's module with every ``fuse`` group fused into one PrimFunc.

    Runs ``FuseOpsByPattern`` (one exact ``tvm.relax.dpl`` pattern per fused
    group, see :func:`~tvm_latmodel.fusion.patterns.chain_fusion_pattern`) and
    ``FuseTIR`` over the whole default-fused module, so the result compiles
    with ``tvm.compile`` and its kernels are the plan's. As in
    :func:`fuse_group`, padding between fused operators is inlined.

    Parameters
    ----------
    plan : FusionPlan
        From :meth:`FusionPlanner.plan`.
    decisions : dict of str to str, optional
        Override decisions by group name (``{"attention0:...": "fuse"}``).

    Returns
    -------
    tvm.IRModule

    Raises
    ------
    FusionError
        If the plan has no module, or the fused module does not have the
        expected number of kernel calls.
    """
    if plan.module is None:
        raise FusionError("the plan carries no module to rewrite")
    decisions = decisions or {}
    chosen = [g for g in plan.groups
              if g.match is not None and decisions.get(g.name, g.decision) == "fuse"]
    if not chosen:
        return plan.module
    old_names = {gvar.name_hint for gvar in plan.module.functions}
    patterns, seen = [], set()
    for group in chosen:
        key = tuple(k.prim_func for k in group.match.kernels)
        if key in seen:
            continue
        seen.add(key)
        patterns.append(chain_fusion_pattern(group.match, f"{group.match.pattern}_{len(patterns)}"))
    grouped = relax.transform.FuseOpsByPattern(patterns, bind_constants=False)(plan.module)
    fused = relax.transform.FuseTIR()(grouped)
    for gvar, func in list(fused.functions.items()):
        if isinstance(func, tvm.tirx.PrimFunc) and gvar.name_hint not in old_names:
            inlined, count = inline_intermediate_padding(tvm.IRModule({"main": func}))
            if count:
                fused[gvar] = inlined["main"]
    before = len(kernel_infos(plan.module))
    expected = before - sum(len(g.match.kernels) - 1 for g in chosen)
    after = len(kernel_infos(fused))
    if after != expected:
        raise FusionError(f"applying the plan left {after} kernel calls, expected {expected}")
    return fused


def print_plan(plan: FusionPlan, file=sys.stdout) -> None:
    """A readable table of a plan: the decisions first, then totals per stage."""
    decisions = plan.decisions
    print(f"fusion plan for {plan.network} on {plan.target} "
          f"({plan.samples} schedules sampled per PrimFunc, best predicted)", file=file)
    print(f"predicted total: {plan.predicted_total_us:.1f} us over {len(plan.groups)} groups", file=file)
    if decisions:
        print(f"\n{'group':<34} {'stage':<8} {'fused us':>10} {'split us':>10} {'gain us':>9} "
              f"{'DRAM saved':>11}  decision", file=file)
        for g in decisions:
            print(f"{g.name[:34]:<34} {str(g.stage):<8} {g.predicted_us:>10.1f} "
                  f"{g.unfused_predicted_us:>10.1f} {g.predicted_gain:>+9.1f} "
                  f"{g.dram_bytes_saved / 1024:>9.1f}KB  {g.decision}"
                  + (" (fallback)" if g.note else ""), file=file)
    stages: dict[str, float] = {}
    for g in plan.groups:
        us = g.predicted_us if g.decision == "fuse" else g.unfused_predicted_us
        stages[str(g.stage)] = stages.get(str(g.stage), 0.0) + us
    print("\npredicted per stage: " + ", ".join(f"{s} {us:.1f} us" for s, us in stages.items()),
          file=file)
    fused = [g for g in decisions if g.decision == "fuse"]
    print(f"fuse {len(fused)} of {len(decisions)} pattern groups, predicted gain "
          f"{sum(g.predicted_gain for g in fused):.1f} us", file=file)
    for note in plan.notes:
        print(f"note: {note}", file=file)
