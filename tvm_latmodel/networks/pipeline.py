"""Fuse, compile and run a network; its TIR tasks, each with a stage and a weight.

Two facts of TVM 0.27 shape this module:

- ``tvm.compile(mod, target)`` on a CPU target runs
  ``relax.pipeline.default_build_pipeline``, which legalizes but does **not**
  fuse (only GPU targets get ``get_default_pipeline``, with ``FuseOps``;
  ``tvm/relax/vm_build.py`` explains why). MetaSchedule's own
  ``compile_relax`` does fuse. We fuse first, with the passes
  ``compile_relax`` uses (library dispatch, ``LegalizeOps``,
  ``AnnotateTIROpPattern``, ``FoldConstant``, ``FuseOps``, ``FuseTIR``), and
  compile that module, so the kernels that run are exactly the tasks.
- ``ms.relax_integration.extract_tasks`` neither legalizes nor fuses: it only
  collects existing ``call_tir`` sites, and returns no task for a module
  straight from a frontend. It must be given the fused module, which is what
  :func:`extract_stage_tasks` builds its tasks from.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from .network import Network
from .stages import (
    STAGES,
    KernelStage,
    StageError,
    kernel_stages_after_fusion,
    propagate_labels,
    rebuild_bindings,
    tag_callees,
)

_CALL_TIR = tvm.ir.Op.get("relax.call_tir")
_PERMUTE_DIMS = tvm.ir.Op.get("relax.permute_dims")
_RESHAPE = tvm.ir.Op.get("relax.reshape")


def _default_target() -> tvm.target.Target:
    from tvm_latmodel.targets import host_target  # pylint: disable=import-outside-toplevel

    return host_target()


def fusion_passes(target: tvm.target.Target) -> list:
    """The passes that turn a Relax module into fused TIR kernels.

    The same list as MetaSchedule's ``compile_relax`` runs before applying a
    tuning database, so task workloads match database keys.

    Parameters
    ----------
    target : tvm.target.Target
        Chooses the library-dispatch passes (none for plain ``llvm`` ops).

    Returns
    -------
    list of tvm.transform.Pass
        Dispatch passes, ``LegalizeOps``, ``AnnotateTIROpPattern``,
        ``FoldConstant``, ``FuseOps``, ``FuseTIR`` (the last five in this order).
    """
    try:
        dispatch = list(relax.pipeline.library_dispatch_passes(target))
    except ValueError:
        dispatch = []
    return [
        *dispatch,
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ]


def fold_weight_layouts(module: tvm.IRModule) -> tvm.IRModule:
    """Fold ``permute_dims`` and ``reshape`` of bound weights into new constants, in NumPy.

    ``nn.Linear`` transposes its weight and ``nn.Conv2D`` reshapes its bias
    at run time; with the weights bound, TVM's ``FoldConstant`` folds these
    too, to the same constants, but compiles and runs one kernel per shape to
    do it (about 6 of TransFuser's 7.5 s of fusion on this machine). Folding
    them here first leaves ``FoldConstant`` nothing to compile; the fused
    module has the same kernels and task weights (only PrimFunc numbering
    differs; the tests check it).

    Parameters
    ----------
    module : tvm.IRModule
        ``main`` with its weights bound as constants.

    Returns
    -------
    tvm.IRModule
        The normalized module with those bindings replaced by constants.
    """
    main = module["main"]

    def fold(binding):
        value = binding.value
        if not isinstance(value, relax.Call) or not value.args:
            return value
        if not isinstance(value.args[0], tvm.ir.GenericConst):  # relax.Constant in 0.27
            return value
        data = value.args[0].value.numpy()
        if value.op.same_as(_PERMUTE_DIMS):
            axes = value.attrs.axes
            return relax.const(np.transpose(data, None if axes is None else [int(a) for a in axes]))
        if value.op.same_as(_RESHAPE) and isinstance(value.args[1], relax.ShapeExpr):
            return relax.const(data.reshape([int(v) for v in value.args[1].values]))
        return value

    folded = tvm.IRModule(dict(module.functions), attrs=module.attrs)
    folded.update_func(folded.get_global_var("main"), rebuild_bindings(main, fold))
    return relax.transform.Normalize()(folded)


@dataclass(frozen=True)
class Kernel:
    """One kernel call of a fused network, in execution order.

    Attributes
    ----------
    index : int
        Position among the network's kernel calls.
    binding : str
        Name of the Relax binding that calls it.
    prim_func : str
        Name of the PrimFunc in :attr:`FusedNetwork.module`.
    stage : str
        The stage the kernel is charged to (its anchor op's stage).
    stages : tuple of str
        Every stage its fused ops come from (more than one when TVM fused
        across a stage boundary).

    Notes
    -----
    A kernel that only reshapes becomes a view when compiled
    (``RewriteDataflowReshape``) and costs nothing at run time, but it stays a
    MetaSchedule task, so it is listed.
    """

    index: int
    binding: str
    prim_func: str
    stage: str
    stages: tuple[str, ...]


@dataclass(frozen=True)
class FusedNetwork:
    """A network after TVM's default fusion, with the stage of every kernel call.

    Attributes
    ----------
    network : Network
        The source network.
    target : tvm.target.Target
        The target it was fused for.
    module : tvm.IRModule
        ``main(inputs...)`` calling fused PrimFuncs through ``call_tir``,
        weights bound as constants.
    kernels : tuple of Kernel
        Every kernel call of ``main``, in execution order.
    """

    network: Network
    target: tvm.target.Target
    module: tvm.IRModule
    kernels: tuple[Kernel, ...]

    def stage_of(self, prim_func: str) -> str:
        """The stage of a PrimFunc whose calls all belong to one stage.

        Parameters
        ----------
        prim_func : str
            A PrimFunc name of :attr:`module`.

        Returns
        -------
        str

        Raises
        ------
        KeyError
            If no kernel calls ``prim_func``.
        StageError
            If its calls belong to several stages (see :meth:`stage_weights`).
        """
        weights = self.stage_weights(prim_func)
        if len(weights) > 1:
            raise StageError(f"{prim_func} is called from several stages: {weights}")
        return next(iter(weights))

    def stage_weights(self, prim_func: str) -> dict[str, int]:
        """How many calls of ``prim_func`` each stage makes.

        Parameters
        ----------
        prim_func : str
            A PrimFunc name of :attr:`module`.

        Returns
        -------
        dict of str to int
            Stage to number of calls; only stages that call it.

        Raises
        ------
        KeyError
            If no kernel calls ``prim_func``.
        """
        weights: dict[str, int] = {}
        for kernel in self.kernels:
            if kernel.prim_func == prim_func:
                weights[kernel.stage] = weights.get(kernel.stage, 0) + 1
        if not weights:
            raise KeyError(f"no kernel of {self.network.name} calls {prim_func!r}")
        return weights


def _call_bindings(function: relax.Function) -> list:
    return [
        binding
        for block in function.body.blocks
        for binding in block.bindings
        if isinstance(binding.value, relax.Call)
        and (binding.value.op.same_as(_CALL_TIR) or isinstance(binding.value.op, tvm.ir.GlobalVar))
    ]


def fuse_network(network: Network, target: tvm.target.Target | None = None) -> FusedNetwork:
    """Bind the weights, legalize and fuse a network as TVM does, labelling each kernel.

    Parameters
    ----------
    network : Network
        From :func:`get_network`.
    target : tvm.target.Target, optional
        Defaults to :func:`tvm_latmodel.targets.host_target`.

    Returns
    -------
    FusedNetwork
        The fused module and the stage of each kernel call.
    """
    target = target or _default_target()
    passes = fusion_passes(target)
    *before_fold, annotate, fold, fuse_ops, fuse_tir = passes
    with target:
        bound = fold_weight_layouts(network.bound_module())
        legalized = tvm.transform.Sequential([*before_fold, annotate, fold])(bound)
        labels = propagate_labels(legalized["main"], network.binding_stages)
        labelled = fuse_ops(tag_callees(legalized, labels))
        grouped = fuse_ops(legalized)
        kernel_stages = kernel_stages_after_fusion(labelled, grouped)
        fused = fuse_tir(grouped)
    calls = _call_bindings(fused["main"])
    if len(calls) != len(kernel_stages):
        raise StageError(f"FuseTIR changed the number of kernel calls of {network.name}")
    kernels = []
    # FuseTIR keeps the order of the calls (it renames the last one ``gv``).
    for index, (binding, (output_type, stage)) in enumerate(zip(calls, kernel_stages)):
        same_output = tvm_ffi.structural_equal(binding.var.ty, output_type)
        if not same_output or not binding.value.op.same_as(_CALL_TIR):
            raise StageError(
                f"FuseTIR reordered or kept a Relax call at binding {binding.var.name!r}"
            )
        kernels.append(_kernel(index, binding, stage))
    return FusedNetwork(network=network, target=target, module=fused, kernels=tuple(kernels))


def _kernel(index: int, binding, stage: KernelStage) -> Kernel:
    return Kernel(
        index=index,
        binding=binding.var.name,
        prim_func=binding.value.args[0].name_hint,
        stage=stage.stage,
        stages=stage.stages,
    )


@dataclass(frozen=True)
class StageTask:
    """A MetaSchedule tuning task of one stage of a network.

    A workload called from several stages gives one task per stage (same
    ``mod``, same ``workload_hash``), so per-stage latency is
    ``sum(task.weight * latency(task.mod))`` over that stage's tasks;
    deduplicate by ``workload_hash`` before tuning.

    Attributes
    ----------
    name : str
        Name of the first PrimFunc of this workload (MetaSchedule's task name).
    stage : str
        The stage the calls are charged to.
    weight : int
        Number of calls in this stage.
    mod : tvm.IRModule
        ``{"main": prim_func}`` exactly as ``ms.relax_integration.extract_tasks``
        builds it, so tuning records match.
    prim_funcs : tuple of str
        The fused module's PrimFuncs with this workload.
    stages_spanned : tuple of str
        Stages whose ops the kernel fuses (more than ``(stage,)`` when TVM
        fused across a stage boundary).
    workload_hash : int
        ``tvm_ffi.structural_hash`` of ``mod``.
    """

    name: str
    stage: str
    weight: int
    mod: tvm.IRModule
    prim_funcs: tuple[str, ...]
    stages_spanned: tuple[str, ...]
    workload_hash: int

    def to_extracted_task(self, target: tvm.target.Target) -> ms.ExtractedTask:
        """This task as MetaSchedule's ``ExtractedTask`` (for ``ms.tune_tasks``)."""
        return ms.ExtractedTask(self.name, self.mod, target, [self.mod], self.weight)


def _task_mod(func) -> tvm.IRModule:
    """The module MetaSchedule's task extraction makes for a PrimFunc."""
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def extract_stage_tasks(
    network: Network | FusedNetwork, target: tvm.target.Target | None = None
) -> list[StageTask]:
    """The TIR tasks of a network after TVM's default fusion, each with its stage and weight.

    Parameters
    ----------
    network : Network or FusedNetwork
        A network (fused here) or an already fused one.
    target : tvm.target.Target, optional
        Used when ``network`` still needs fusing; defaults to the host.

    Returns
    -------
    list of StageTask
        In order of first call. Summed over stages, the weights of a workload
        equal the weight ``ms.relax_integration.extract_tasks`` gives it.
    """
    fused = network if isinstance(network, FusedNetwork) else fuse_network(network, target)
    workloads: list[tuple[int, tvm.IRModule]] = []
    by_key: dict[tuple[int, str], dict] = {}
    for kernel in fused.kernels:
        mod = _task_mod(fused.module[kernel.prim_func])
        workload_hash = int(tvm_ffi.structural_hash(mod))
        for known_hash, known_mod in workloads:
            if known_hash == workload_hash and tvm_ffi.structural_equal(known_mod, mod):
                mod = known_mod
                break
        else:
            workloads.append((workload_hash, mod))
        key = (workload_hash, kernel.stage)
        entry = by_key.setdefault(
            key,
            {"name": kernel.prim_func, "mod": mod, "weight": 0, "prim_funcs": [], "stages": set()},
        )
        entry["weight"] += 1
        if kernel.prim_func not in entry["prim_funcs"]:
            entry["prim_funcs"].append(kernel.prim_func)
        entry["stages"].update(kernel.stages)
    return [
        StageTask(
            name=entry["name"],
            stage=stage,
            weight=entry["weight"],
            mod=entry["mod"],
            prim_funcs=tuple(entry["prim_funcs"]),
            stages_spanned=tuple(s for s in STAGES if s in entry["stages"]),
            workload_hash=workload_hash,
        )
        for (workload_hash, stage), entry in by_key.items()
    ]


def compile_network(
    network: Network | FusedNetwork, target: tvm.target.Target | None = None
) -> tuple[FusedNetwork, relax.VMExecutable]:
    """Fuse (unless already fused) and compile a network, untuned.

    The fused module goes through ``tvm.compile``'s default Relax pipeline,
    whose ``LegalizeOps`` has nothing left to do; the PrimFuncs keep TVM's
    default (unscheduled) loop nests.

    Returns
    -------
    fused : FusedNetwork
        What was compiled.
    executable : relax.VMExecutable
        The compiled network.
    """
    fused = network if isinstance(network, FusedNetwork) else fuse_network(network, target)
    executable = tvm.compile(fused.module, target=fused.target)
    return fused, executable


def _run_timed(executable, arrays: list[np.ndarray], repeat: int) -> tuple[np.ndarray, float]:
    """Run ``main`` once, then ``repeat`` timed runs; (output, median seconds).

    With ``repeat=0`` the first (cold) run is the one timed.
    """
    device = tvm.cpu()
    vm = relax.VirtualMachine(executable, device)
    args = [tvm.runtime.tensor(np.ascontiguousarray(a), device) for a in arrays]
    start = time.perf_counter()
    output = vm["main"](*args)
    times_s = [time.perf_counter() - start]
    if repeat > 0:
        times_s = []
        for _ in range(repeat):
            start = time.perf_counter()
            vm["main"](*args)
            times_s.append(time.perf_counter() - start)
    if isinstance(output, tvm.runtime.Tensor):
        output = output.numpy()
    else:  # a tuple output (e.g. from a frontend that returns tuples)
        output = output[0].numpy() if len(output) == 1 else [o.numpy() for o in output]
    return output, float(np.median(times_s))


def build_and_run(
    network: Network | FusedNetwork,
    target: tvm.target.Target | None = None,
    inputs: dict[str, np.ndarray] | None = None,
    *,
    repeat: int = 3,
) -> tuple[np.ndarray, float]:
    """Compile a network untuned, run it on the CPU and time it.

    Parameters
    ----------
    network : Network or FusedNetwork
        The network (fused here if it is not yet).
    target : tvm.target.Target, optional
        An ``llvm`` target; defaults to :func:`tvm_latmodel.targets.host_target`.
        Ignored when ``network`` is already fused (its target is used).
    inputs : dict of str to numpy.ndarray, optional
        Input values by name; default ``network.make_inputs(seed=0)``.
    repeat : int
        Timed runs after one warm-up run; the median is reported. ``0``
        times the first (cold) run itself, for a single run.

    Returns
    -------
    output : numpy.ndarray
        The network's output.
    latency_s : float
        Median wall-clock latency of one run of ``main``, in seconds.
    """
    if target is not None and target.kind.name != "llvm":
        raise ValueError(f"build_and_run runs on the CPU; got a {target.kind.name} target")
    fused, executable = compile_network(network, target)
    source = fused.network
    inputs = source.make_inputs(seed=0) if inputs is None else inputs
    missing = [spec.name for spec in source.inputs if spec.name not in inputs]
    if missing:
        raise ValueError(f"missing inputs {missing} for {source.name}")
    return _run_timed(executable, [inputs[spec.name] for spec in source.inputs], repeat)


def build_and_run_module(
    module: tvm.IRModule,
    arrays: list[np.ndarray],
    target: tvm.target.Target | None = None,
    *,
    repeat: int = 3,
) -> tuple[np.ndarray, float]:
    """Fuse, compile and run any Relax module whose ``main`` takes ``arrays`` (e.g. an import).

    Uses the same :func:`fusion_passes` and ``tvm.compile`` as
    :func:`build_and_run`, without stage labels.

    Parameters
    ----------
    module : tvm.IRModule
        ``main(inputs...)`` with its weights bound.
    arrays : list of numpy.ndarray
        The inputs of ``main``, in order.
    target : tvm.target.Target, optional
        An ``llvm`` target; defaults to the host.
    repeat : int
        As for :func:`build_and_run`.

    Returns
    -------
    output : numpy.ndarray
    latency_s : float
    """
    target = target or _default_target()
    if target.kind.name != "llvm":
        raise ValueError(f"build_and_run_module runs on the CPU; got a {target.kind.name} target")
    with target:
        fused = tvm.transform.Sequential(fusion_passes(target))(module)
    executable = tvm.compile(fused, target=target)
    return _run_timed(executable, arrays, repeat)
