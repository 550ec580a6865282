"""The partition to tune: TVM's default fusion, or a :class:`FusionPlan` applied.

:func:`prepare_network` is the **plan** step of ``tvm-latmodel tune-network``
(:func:`tvm_latmodel.networks.tune.tune_network`): it fuses a network with
TVM's default groups and, for the ``predicted`` plan, applies the
:class:`~tvm_latmodel.fusion.FusionPlanner`'s decisions with
:func:`~tvm_latmodel.fusion.apply_plan`. A fused group that does not build
(or apply) falls back to its split form with a
:class:`~tvm_latmodel.fusion.FusionFallbackWarning`; a plan that cannot be
applied at all leaves TVM's default partition. The kernels of a planned
module keep their stage labels (a fused group spans its members' stages).

The package's names (``apply_plan``, ``build_check``, ...) are looked up on
:mod:`tvm_latmodel.fusion` when called, so patching them there reaches this
module too.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import tvm

from ..networks.network import Network
from ..networks.pipeline import FusedNetwork, Kernel, StageTask, extract_stage_tasks, fuse_network
from ..networks.stages import STAGES

#: ``--plan`` values.
PLANS = ("default", "predicted")


def _say_nothing(_text: str) -> None:
    """The default ``progress``: print nothing."""
    return None


@dataclass
class PreparedNetwork:
    """A network's partition, ready to tune.

    Attributes
    ----------
    default : FusedNetwork
        TVM's default fusion (the untuned reference).
    chosen : FusedNetwork
        The partition to tune: ``default``, or the plan applied.
    plan : str
        ``default`` or ``predicted``.
    tasks : list of StageTask
        ``extract_stage_tasks(chosen)``.
    fused_groups : list of str
        Names of the planner's groups fused into one kernel.
    fusion_plan : FusionPlan or None
        The planner's plan (``predicted`` only).
    notes : list of str
        Fallbacks and other remarks.
    """

    default: FusedNetwork
    chosen: FusedNetwork
    plan: str
    tasks: list[StageTask]
    fused_groups: list[str] = field(default_factory=list)
    fusion_plan: object = None
    notes: list[str] = field(default_factory=list)


def _label_kernels(default: FusedNetwork, groups, module: tvm.IRModule) -> tuple[Kernel, ...]:
    """Stage labels of the kernels of a planned module.

    Default kernels keep theirs; a fused group takes its anchor's
    (``group.stage``) and spans its members' stages. Walks the new kernels in
    order against the default kernels outside every fused group (same
    PrimFunc names, same order); the others are the fused groups, recognised
    by FuseTIR's name (``fused_`` + members) or, failing that, by the order
    of their last members.

    Parameters
    ----------
    default : FusedNetwork
        TVM's default partition, the plan was made on.
    groups : list of FusionGroup
        The groups fused in ``module``.
    module : tvm.IRModule
        The planned module.

    Returns
    -------
    tuple of Kernel

    Raises
    ------
    FusionError
        The module's kernels do not match the plan.
    """
    from . import kernel_infos  # pylint: disable=import-outside-toplevel
    from .patterns import FusionError  # pylint: disable=import-outside-toplevel

    grouped = {k.index for g in groups for k in g.match.kernels}
    remaining = [k for k in default.kernels if k.index not in grouped]
    pending = sorted(groups, key=lambda g: max(k.index for k in g.match.kernels))
    by_index = {k.index: k for k in default.kernels}
    out, r = [], 0
    for info in kernel_infos(module):
        if r < len(remaining) and info.prim_func == remaining[r].prim_func:
            old = remaining[r]
            out.append(Kernel(len(out), info.binding, info.prim_func, old.stage, old.stages))
            r += 1
            continue
        if not pending:
            raise FusionError(f"applying the plan left an unexpected kernel {info.prim_func}")
        named = [g for g in pending
                 if info.prim_func == "fused_" + "_".join(k.prim_func for k in g.match.kernels)]
        group = named[0] if named else pending[0]
        pending.remove(group)
        spanned = {s for k in group.match.kernels for s in by_index[k.index].stages}
        stage = group.stage or by_index[group.match.kernels[-1].index].stage
        out.append(Kernel(len(out), info.binding, info.prim_func, stage,
                          tuple(s for s in STAGES if s in spanned | {stage})))
    if r != len(remaining) or pending:
        raise FusionError("the planned module's kernels do not match the plan")
    return tuple(out)


def _fall_back(note: str, notes: list[str]) -> None:
    """Warn ``note`` as a ``FusionFallbackWarning`` (at the caller's caller) and keep it in ``notes``."""
    from . import FusionFallbackWarning  # pylint: disable=import-outside-toplevel

    warnings.warn(note, FusionFallbackWarning, stacklevel=3)
    notes.append(note)


def _first_line(err: Exception) -> str:
    """``TypeName: first line of the message``."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def _apply_buildable(plan, names: list[str], target, notes: list[str]) -> tuple[tvm.IRModule, list[str]]:
    """Apply the ``names`` groups of ``plan``; one that does not build or apply stays split.

    Parameters
    ----------
    plan : FusionPlan
    names : list of str
        The groups to fuse.
    target : tvm.target.Target
    notes : list of str
        Receives a note per group that fell back (also warned).

    Returns
    -------
    module : tvm.IRModule
        The plan applied with the groups kept.
    kept : list of str
        The groups fused in ``module``.
    """
    from . import apply_plan, build_check, fuse_group  # pylint: disable=import-outside-toplevel

    def apply(fused: list[str]) -> tvm.IRModule:
        return apply_plan(plan, {g.name: "fuse" if g.name in fused else "split" for g in plan.decisions})

    kept = []
    for group in plan.decisions:
        if group.name in names:
            try:
                build_check(fuse_group(plan.module, group.match), target)
                kept.append(group.name)
            except Exception as err:  # noqa: BLE001 - a group that fails falls back, never crashes
                _fall_back(f"{group.name} fell back to its split form: {_first_line(err)}", notes)
    try:
        return apply(kept), kept
    except Exception:  # noqa: BLE001 - find the groups that do not apply, one by one
        names, kept = kept, []
    for name in names:
        try:
            apply([*kept, name])
            kept.append(name)
        except Exception as err:  # noqa: BLE001
            _fall_back(f"{name} fell back to its split form: it does not apply ({_first_line(err)})", notes)
    return apply(kept), kept


def prepare_network(network: Network, *, plan: str = "default", target=None, samples: int = 4,
                    seed: int = 0, decisions: dict[str, str] | None = None, planner=None,
                    progress=None) -> PreparedNetwork:
    """Fuse a network and choose the partition to tune.

    Parameters
    ----------
    network : Network
    plan : {"default", "predicted"}
        TVM's default groups, or the planner's decisions.
    target : tvm.target.Target, optional
        Defaults to the host.
    samples, seed : int
        The planner's schedules per PrimFunc, and seed.
    decisions : dict of str to str, optional
        Override the planner's decision of a group by name (``predicted`` only).
    planner : FusionPlanner, optional
        A planner to reuse (its prediction cache too).
    progress : callable, optional
        One line of progress text at a time.

    Returns
    -------
    PreparedNetwork

    Raises
    ------
    ValueError
        Unknown ``plan`` or group name; :class:`~tvm_latmodel.fusion.FusionError`
        (a ``ValueError``) when the planner cannot partition the network.
    """
    from . import FusionError, FusionPlanner  # pylint: disable=import-outside-toplevel
    from ..targets import host_target  # pylint: disable=import-outside-toplevel

    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; known: {', '.join(PLANS)}")
    say = progress or _say_nothing
    target = target or host_target()
    default = fuse_network(network, target)
    if plan == "default":
        return PreparedNetwork(default=default, chosen=default, plan=plan, tasks=extract_stage_tasks(default))
    planner = planner or FusionPlanner(target, samples=samples, seed=seed, progress=say)
    try:
        fusion_plan = planner.plan(default)
    except Exception as err:  # a plan that fails is the user's clear error, not a traceback
        raise FusionError(f"the fusion planner failed on {network.name}: {_first_line(err)}") from err
    notes = list(fusion_plan.notes)
    decisions = decisions or {}
    unknown = sorted(set(decisions) - {g.name for g in fusion_plan.decisions})
    if unknown:
        raise ValueError(f"no pattern group named {unknown}; groups: {[g.name for g in fusion_plan.decisions]}")
    wanted = [g.name for g in fusion_plan.decisions if decisions.get(g.name, g.decision) == "fuse"]
    chosen, names = default, []
    try:
        module, names = _apply_buildable(fusion_plan, wanted, target, notes)
        groups = [g for g in fusion_plan.decisions if g.name in names]
        if groups:
            chosen = FusedNetwork(network=network, target=target, module=module,
                                  kernels=_label_kernels(default, groups, module))
    except Exception as err:  # noqa: BLE001 - the default partition is always there
        _fall_back(f"the plan could not be applied ({_first_line(err)}); tuning TVM's default partition", notes)
        chosen, names = default, []
    say(f"[tune-network] predicted plan: {len(names)} of {len(fusion_plan.decisions)} pattern groups fused, "
        f"{len(chosen.kernels)} kernels (default: {len(default.kernels)})")
    return PreparedNetwork(default=default, chosen=chosen, plan=plan, tasks=extract_stage_tasks(chosen),
                           fused_groups=names, fusion_plan=fusion_plan, notes=notes)
