"""Stage labels: which ops of a network belong to its encoders, fusion and head.

Multi-modal networks run in stages (Hou et al., IEEE CAL 2022): one
**encoder** per modality, a **fusion** stage that merges them, and a **head**.
Every network in this package is built from :class:`StageModule` submodules,
and every op it emits must be emitted inside one of them.

How a label reaches a kernel
----------------------------
1. *Export.* While ``export_tvm`` traces the network, each
   :class:`StageModule` call records its input and output Relax variables.
   A stage call owns the bindings that its outputs depend on and that do not
   lie behind its inputs (its *region* of the dataflow graph); calls that
   finish first (inner ones) claim first, so stage modules may nest. A binding
   no stage call owns is an error, so no op goes unlabelled. Labels are kept
   by binding *name*, which the exporter makes unique.
2. *Legalization.* ``LegalizeOps`` keeps the binding names; a binding it adds
   (a helper of a composite op) takes the label of the next labelled binding,
   the op it was emitted for.
3. *Fusion.* On a side copy of the legalized module, each ``call_tir`` is
   pointed at a copy of its PrimFunc that carries the stage as an attribute,
   and ``FuseOps`` runs on both copies. Fusion depends only on the dataflow
   graph and op patterns, so the two copies fuse identically (checked
   binding by binding); each fused group of the side copy names the stages of
   its members, and the real module gets those labels by position.

A fused kernel can span stages (TVM fuses an encoder's flatten into the
fusion stage's concat). Such a kernel keeps every stage it spans
(``stages``) and is charged to the stage of its *anchor*: the member with the
highest TVM op pattern (a convolution or matmul before a reduction, before an
injective op, before an elementwise one), the last such member on ties.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import relax
from tvm.relax.frontend import nn

#: The stages of a network, in the order data flows through them.
STAGES = ("encoder", "fusion", "head")

#: PrimFunc attribute that carries a stage on the labelling copy of a module.
STAGE_ATTR = "tvm_latmodel.stage"

_CALL_TIR = tvm.ir.Op.get("relax.call_tir")

_recording = threading.local()


class StageError(ValueError):
    """An op of a network could not be attributed to exactly one stage."""


class StageModule(nn.Module):
    """An ``nn.Module`` whose ops all belong to one stage of a network.

    Subclasses call ``super().__init__(stage)`` and implement ``forward`` as
    usual. Stage modules may contain plain modules and other stage modules;
    an inner stage module's ops keep the inner stage.

    Parameters
    ----------
    stage : str
        One of :data:`STAGES`.
    """

    def __init__(self, stage: str) -> None:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        self.stage = stage

    def __call__(self, *args, **kwargs):
        outputs = super().__call__(*args, **kwargs)
        calls = getattr(_recording, "calls", None)
        if calls is not None:
            calls.append(
                StageCall(
                    stage=self.stage,
                    module_type=type(self).__name__,
                    inputs=tuple(_relax_vars((args, kwargs))),
                    outputs=tuple(_relax_vars(outputs)),
                )
            )
        return outputs


@dataclass(frozen=True)
class StageCall:
    """One call of a :class:`StageModule` seen while exporting.

    Attributes
    ----------
    stage : str
        The module's stage.
    module_type : str
        The module's class name (for error messages).
    inputs, outputs : tuple of relax.Var
        The Relax variables the call read and produced.
    """

    stage: str
    module_type: str
    inputs: tuple
    outputs: tuple


def _relax_vars(value) -> list:
    """The Relax variables held by nn Tensors inside nested tuples, lists and dicts."""
    if isinstance(value, nn.Tensor):
        expr = value._expr  # pylint: disable=protected-access
        return [expr] if isinstance(expr, relax.Var) else []
    if isinstance(value, list | tuple):
        return [v for item in value for v in _relax_vars(item)]
    if isinstance(value, dict):
        return [v for item in value.values() for v in _relax_vars(item)]
    return []


def export_with_stages(model: nn.Module, input_specs: dict[str, nn.spec.Tensor]):
    """Export ``model.forward`` as a Relax ``main`` function and label its bindings.

    Parameters
    ----------
    model : nn.Module
        The network; every op it emits must be emitted inside a
        :class:`StageModule`.
    input_specs : dict of str to nn.spec.Tensor
        The inputs of ``forward``, in order.

    Returns
    -------
    module : tvm.IRModule
        ``main(inputs..., params...)`` with the ``num_input`` attribute.
    param_names : list of str
        The parameter names (``image_encoder.conv1.weight`` ...), in the
        order of ``main``'s trailing parameters.
    binding_stages : dict of str to str
        The stage of every binding of ``main``, by binding name.

    Raises
    ------
    StageError
        If an op was emitted outside every stage module, or names repeat.
    """
    if getattr(_recording, "calls", None) is not None:
        raise RuntimeError("export_with_stages is not re-entrant")
    _recording.calls = []
    try:
        exported, named_params = model.export_tvm(spec={"forward": dict(input_specs)})
        calls = list(_recording.calls)
    finally:
        _recording.calls = None
    # The exporter names the function after the method and sets its
    # global_symbol; BindParams and MetaSchedule look functions up by it.
    function = exported["forward"].with_attr("global_symbol", "main")
    module = tvm.IRModule({"main": function})
    binding_stages = label_bindings(function, calls)
    return module, [name for name, _ in named_params], binding_stages


def _bindings(function: relax.Function) -> list:
    return [binding for block in function.body.blocks for binding in block.bindings]


def label_bindings(function: relax.Function, calls: list[StageCall]) -> dict[str, str]:
    """The stage of each binding of an exported function, from its stage calls.

    Parameters
    ----------
    function : relax.Function
        The exported function.
    calls : list of StageCall
        Stage-module calls in the order they finished.

    Returns
    -------
    dict of str to str
        Binding name to stage.
    """
    bindings = _bindings(function)
    names = [binding.var.name for binding in bindings]
    if len(set(names)) != len(names):
        repeated = sorted({name for name in names if names.count(name) > 1})
        raise StageError(f"binding names repeat in the exported function: {repeated}")
    producer = {binding.var: binding for binding in bindings}
    operands = {
        binding.var: [v for v in relax.analysis.free_vars(binding.value) if v in producer]
        for binding in bindings
    }
    stage_of: dict = {}
    for call in calls:
        boundary = set(call.inputs)
        seen: set = set()
        stack = [v for v in call.outputs if v in producer]
        while stack:
            var = stack.pop()
            if var in seen or var in boundary:
                continue
            seen.add(var)
            stage_of.setdefault(var, call.stage)
            stack.extend(operands[var])
    labels: dict[str, str] = {}
    for binding in bindings:
        var = binding.var
        if var in stage_of:
            labels[var.name] = stage_of[var]
        elif isinstance(binding.value, relax.Var) and binding.value.name in labels:
            # The exporter's final ``gv = result`` alias.
            labels[var.name] = labels[binding.value.name]
        else:
            raise StageError(
                f"binding {var.name!r} ({_describe(binding.value)}) was emitted outside "
                "every StageModule; wrap that code in a stage module"
            )
    return labels


def _describe(value) -> str:
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return value.op.name
    return type(value).__name__


def propagate_labels(function: relax.Function, labels: dict[str, str]) -> dict[str, str]:
    """Carry binding labels over a pass that keeps names but may add bindings.

    A binding whose name is unknown takes the label of the next known
    binding (the op it was emitted for); bindings a pass removed are simply
    absent.

    Parameters
    ----------
    function : relax.Function
        The function after the pass.
    labels : dict of str to str
        Stage by binding name before the pass.

    Returns
    -------
    dict of str to str
        Stage of every binding of ``function``, by name.

    Raises
    ------
    StageError
        If a name repeats, or unknown bindings trail the last known one.
    """
    result: dict[str, str] = {}
    pending: list[str] = []
    for binding in _bindings(function):
        name = binding.var.name
        if name in result:
            raise StageError(f"binding name {name!r} repeats after a pass; cannot keep labels")
        if name in labels:
            for other in pending:
                result[other] = labels[name]
            pending.clear()
            result[name] = labels[name]
        else:
            pending.append(name)
    if pending:
        raise StageError(f"bindings {pending} follow every labelled binding")
    return result


def rebuild_bindings(function: relax.Function, rewrite) -> relax.Function:
    """A copy of ``function`` whose binding values are replaced, variables kept.

    Parameters
    ----------
    function : relax.Function
        A function whose body is a sequence of binding blocks.
    rewrite : callable
        ``rewrite(binding) -> relax.Expr``, the new value of each ``VarBinding``
        (``MatchCast`` bindings are kept as they are). The new value must
        have the old one's type.

    Returns
    -------
    relax.Function
        Not normalized: run ``relax.transform.Normalize`` on its module.
    """
    blocks = []
    for block in function.body.blocks:
        new_bindings = [
            relax.VarBinding(b.var, rewrite(b)) if isinstance(b, relax.VarBinding) else b
            for b in block.bindings
        ]
        block_type = (
            relax.DataflowBlock if isinstance(block, relax.DataflowBlock) else relax.BindingBlock
        )
        blocks.append(block_type(new_bindings))
    body = relax.SeqExpr(blocks, function.body.body)
    return relax.Function(function.params, body, function.ret_ty, function.is_pure, function.attrs)


def tag_callees(module: tvm.IRModule, labels: dict[str, str]) -> tvm.IRModule:
    """Point each ``call_tir`` of ``main`` at a PrimFunc copy tagged with its stage.

    Only for the labelling side copy: the tags (attribute :data:`STAGE_ATTR`)
    make otherwise identical PrimFuncs of different stages distinct, and
    ride along into the fused functions ``FuseOps`` makes.

    Parameters
    ----------
    module : tvm.IRModule
        A legalized module (``main`` calls PrimFuncs with ``call_tir``).
    labels : dict of str to str
        Stage of each binding of ``main``, by name (:func:`propagate_labels`).

    Returns
    -------
    tvm.IRModule
        The tagged, normalized copy.
    """
    builder = relax.BlockBuilder(module)
    tagged: dict[tuple[str, str], tvm.ir.GlobalVar] = {}

    def rewrite(binding):
        value = binding.value
        if not (isinstance(value, relax.Call) and value.op.same_as(_CALL_TIR)):
            return value
        stage = labels[binding.var.name]
        callee = value.args[0]
        key = (callee.name_hint, stage)
        if key not in tagged:
            copy = module[callee].with_attr(STAGE_ATTR, stage)
            tagged[key] = builder.add_func(copy, f"{callee.name_hint}__{stage}")
        return relax.Call(value.op, [tagged[key], *value.args[1:]], value.attrs, value.ty_args)

    main = rebuild_bindings(module["main"], rewrite)
    # The BlockBuilder types the new GlobalVars. The rebuilt main must be
    # normalized (types filled in) before FuseOps: otherwise FuseOps fills
    # them in while it runs, main's structural hash changes under it, and it
    # fails with "UpdateFunction ... does not appear in the de-duplication map".
    functions = dict(builder.get().functions)
    functions[next(gv for gv in functions if gv.name_hint == "main")] = main
    return relax.transform.Normalize()(tvm.IRModule(functions, attrs=module.attrs))


def _op_pattern(func) -> int:
    pattern = func.attrs.get("op_pattern") if func.attrs is not None else None
    return int(pattern) if pattern is not None else 0


def _group_members(module: tvm.IRModule, callee: tvm.ir.GlobalVar) -> list[tuple[str, int]]:
    """(stage, op pattern) of each member op of a (fused or single) callee, in order."""
    func = module[callee]
    if isinstance(func, tvm.tirx.PrimFunc):
        return [(str(func.attrs[STAGE_ATTR]), _op_pattern(func))]
    members = []
    for binding in _bindings(func):
        value = binding.value
        if isinstance(value, relax.Call) and value.op.same_as(_CALL_TIR):
            members.append(_group_members(module, value.args[0])[0])
    return members


@dataclass(frozen=True)
class KernelStage:
    """The stage of one kernel call of a fused network.

    Attributes
    ----------
    stage : str
        The stage the kernel is charged to (its anchor op's stage).
    stages : tuple of str
        Every stage its member ops come from, in data-flow order of
        :data:`STAGES`; longer than one for a kernel fused across stages.
    """

    stage: str
    stages: tuple[str, ...]


def anchor_stage(members: list[tuple[str, int]]) -> KernelStage:
    """The stage of a fused group from its members' (stage, op pattern) pairs.

    The anchor is the member with the highest TVM op pattern (elementwise 0
    < broadcast 1 < injective 2 < reduction 3 < out-elementwise-fusable 4,
    such as convolution and matmul; opaque ops are never fused), the last
    one on ties.

    Parameters
    ----------
    members : list of (str, int)
        Stage and op pattern of each member op, in binding order.

    Returns
    -------
    KernelStage
    """
    if not members:
        raise StageError("a fused kernel without member ops")
    best = max(range(len(members)), key=lambda i: (members[i][1], i))
    spanned = tuple(s for s in STAGES if any(m[0] == s for m in members))
    return KernelStage(stage=members[best][0], stages=spanned)


def kernel_stages_after_fusion(
    labelled: tvm.IRModule, fused: tvm.IRModule
) -> list[tuple[object, KernelStage]]:
    """The stage of each call binding of ``fused["main"]``, via the labelled copy.

    Parameters
    ----------
    labelled : tvm.IRModule
        The tagged side copy after ``FuseOps``.
    fused : tvm.IRModule
        The real module after the same passes (before ``FuseTIR``).

    Returns
    -------
    list of (relax.Type, KernelStage)
        Output type and stage of each binding of ``fused["main"]`` that
        calls a PrimFunc or fused function, in binding order.

    Raises
    ------
    StageError
        If the two copies were not fused the same way.
    """
    real = _bindings(fused["main"])
    side = _bindings(labelled["main"])
    if len(real) != len(side):
        raise StageError(f"labelling copy fused differently: {len(side)} vs {len(real)} bindings")
    result = []
    for real_binding, side_binding in zip(real, side):
        if not tvm_ffi.structural_equal(real_binding.var.ty, side_binding.var.ty):
            raise StageError(f"labelling copy diverged at binding {real_binding.var.name!r}")
        real_callee = _callee(real_binding.value)
        side_callee = _callee(side_binding.value)
        if (real_callee is None) != (side_callee is None):
            raise StageError(f"labelling copy diverged at binding {real_binding.var.name!r}")
        if real_callee is None:
            continue
        real_members = _count_members(fused, real_callee)
        side_members = _group_members(labelled, side_callee)
        if real_members != len(side_members):
            raise StageError(
                f"labelling copy fused {len(side_members)} ops where the real one fused "
                f"{real_members} at binding {real_binding.var.name!r}"
            )
        result.append((real_binding.var.ty, anchor_stage(side_members)))
    return result


def _callee(value):
    """The PrimFunc or fused-function GlobalVar a binding calls, else None."""
    if not isinstance(value, relax.Call):
        return None
    if value.op.same_as(_CALL_TIR):
        return value.args[0]
    if isinstance(value.op, tvm.ir.GlobalVar):
        return value.op
    return None


def _count_members(module: tvm.IRModule, callee) -> int:
    func = module[callee]
    if isinstance(func, tvm.tirx.PrimFunc):
        return 1
    return sum(
        1
        for binding in _bindings(func)
        if isinstance(binding.value, relax.Call) and binding.value.op.same_as(_CALL_TIR)
    )
