"""Fusion patterns over a network's default kernels, and the ``tvm.relax.dpl`` patterns that fuse them.

A pattern here is a *chain* of kernels of TVM's default fusion (``FuseOps``
then ``FuseTIR``, as :func:`tvm_latmodel.networks.fuse_network` runs it),
each consuming the previous one's output, e.g. MobileNetV2's bottleneck
``1x1 conv -> depthwise conv -> 1x1 conv`` (each with its bias and clip
epilogue, which TVM already fused). A larger group therefore always covers
whole default kernels, so its unfused alternative is exactly the sum of those
kernels.

How a group becomes one PrimFunc
--------------------------------
1. :func:`find_groups` walks the fused network's ``main`` and finds each
   instance of each :class:`ChainPattern` (an intermediate output must feed
   the next kernel only, and a kernel joins at most one group: patterns are
   tried in priority order).
2. :func:`chain_dfpattern` writes an instance as a ``tvm.relax.dpl`` pattern:
   ``call_tir`` of each member's PrimFunc (``GlobalVarPattern``) with a
   ``TuplePattern`` of its arguments, the producer's pattern in the position
   where it feeds the consumer, wildcards elsewhere.
3. ``relax.transform.FuseOpsByPattern`` groups the matched calls into one
   Relax function marked ``Composite`` and ``Primitive`` (checked on 0.27),
   and ``relax.transform.FuseTIR`` turns it into one PrimFunc; see
   :func:`tvm_latmodel.fusion.planner.fuse_group`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import tvm
from tvm import relax
from tvm.relax.dpl import is_call_tir, wildcard

_CALL_TIR = tvm.ir.Op.get("relax.call_tir")

# Name pieces FuseOps joins with ``_`` that belong to one op name.
_PREFIXES = {"max", "avg", "adaptive", "layer", "group", "batch", "tir", "global", "strided",
             "expand", "broadcast", "rms", "instance"}


class FusionError(ValueError):
    """A module the fusion planner cannot partition into kernels, or a bad request."""


def op_names(prim_func_name: str) -> list[str]:
    """The op names a default kernel fuses, read from its PrimFunc name.

    ``FuseOps`` names a group ``fused_`` plus its members' PrimFunc names, and
    ``LegalizeOps`` names those after the op with a numeric suffix.

    >>> op_names("fused_conv2d3_add2_tir_clip1")
    ['conv2d', 'add', 'clip']
    >>> op_names("max_pool2d1")
    ['max_pool2d']
    """
    name = prim_func_name[len("fused_"):] if prim_func_name.startswith("fused_") else prim_func_name
    pieces = [p for p in name.split("_") if p]
    ops: list[str] = []
    carry = ""
    for piece in pieces:
        if piece in _PREFIXES:
            carry = f"{carry}{piece}_"
            continue
        op = re.sub(r"(?<=[a-z])\d+$", "", f"{carry}{piece}")
        carry = ""
        ops.append(op[len("tir_"):] if op.startswith("tir_") else op)
    if carry:
        ops.append(carry.rstrip("_"))
    return ops


def _shape(expr) -> tuple[int, ...] | None:
    try:
        return tuple(int(d) for d in expr.ty.shape)
    except (AttributeError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class KernelInfo:
    """One kernel call of a fused network, as the patterns see it.

    Attributes
    ----------
    index : int
        Position among the network's kernel calls.
    binding : str
        Name of the Relax variable the call binds.
    prim_func : str
        The called PrimFunc.
    ops : tuple of str
        Op names it fuses (:func:`op_names`).
    stage : str or None
        Its stage (``None`` for a module without stage labels).
    args : tuple
        The ``call_tir`` argument expressions.
    output_shape : tuple of int
        Shape of its output.
    output_bytes : int
        Size of its output in bytes.
    conv_kernel : tuple of int or None
        ``(out_channels, in_channels_per_group, kh, kw, in_channels)`` for a
        convolution kernel, else ``None``.
    escapes : bool
        Its output is used by something other than a kernel call (an output
        of ``main``, a tuple), so it cannot become a fused intermediate.
    """

    index: int
    binding: str
    prim_func: str
    ops: tuple[str, ...]
    stage: str | None
    args: tuple
    output_shape: tuple[int, ...]
    output_bytes: int
    conv_kernel: tuple[int, ...] | None
    escapes: bool = False
    output_ty: object = field(default=None, compare=False, repr=False)

    @property
    def is_conv(self) -> bool:
        return "conv2d" in self.ops and self.conv_kernel is not None

    @property
    def is_pointwise_conv(self) -> bool:
        return self.is_conv and self.conv_kernel[2] == 1 and self.conv_kernel[3] == 1

    @property
    def is_depthwise_conv(self) -> bool:
        if not self.is_conv:
            return False
        out_channels, per_group, _, _, in_channels = self.conv_kernel
        return per_group == 1 and out_channels == in_channels and in_channels > 1

    @property
    def is_matmul(self) -> bool:
        return "matmul" in self.ops

    @property
    def anchor_rank(self) -> int:
        """TVM-like op-pattern rank: conv/matmul > reduction > the rest (for the group's stage)."""
        if self.is_conv or self.is_matmul:
            return 3
        if any(op in self.ops for op in ("softmax", "mean", "sum", "layer_norm", "max_pool2d",
                                         "adaptive_avg_pool2d")):
            return 2
        return 1


def _conv_kernel(value) -> tuple[int, ...] | None:
    fields = list(value.args[1].fields)
    if len(fields) < 2:
        return None
    data, weight = _shape(fields[0]), _shape(fields[1])
    if data is None or weight is None or len(data) != 4 or len(weight) != 4:
        return None
    return (*weight, data[1])


def _escaping_vars(main: relax.Function) -> set[str]:
    """Names of variables used anywhere but as a ``call_tir`` argument."""
    names: set[str] = set()
    for block in main.body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Call) and value.op.same_as(_CALL_TIR):
                continue
            names.update(v.name for v in relax.analysis.free_vars(value))
    names.update(v.name for v in relax.analysis.free_vars(main.body.body))
    return names


def kernel_infos(module: tvm.IRModule, stages: dict[str, str] | None = None) -> list[KernelInfo]:
    """The ``call_tir`` kernel calls of ``module["main"]``, in order.

    Parameters
    ----------
    module : tvm.IRModule
        A fused Relax module (every op a ``call_tir``).
    stages : dict of str to str, optional
        Stage by binding name (from :class:`tvm_latmodel.networks.FusedNetwork`).

    Raises
    ------
    FusionError
        If the module has no Relax ``main`` or ``main`` calls no kernel.
    """
    if "main" not in [gv.name_hint for gv in module.get_global_vars()]:
        raise FusionError("cannot partition the module: it has no 'main' function")
    main = module["main"]
    if not isinstance(main, relax.Function):
        raise FusionError(f"cannot partition the module: its 'main' is a {type(main).__name__}, "
                          "not a Relax function")
    escaping = _escaping_vars(main)
    kernels = []
    for block in main.body.blocks:
        for binding in block.bindings:
            value = binding.value
            if not (isinstance(value, relax.Call) and value.op.same_as(_CALL_TIR)):
                continue
            name = value.args[0].name_hint
            ops = tuple(op_names(name))
            shape = _shape(binding.var) or ()
            dtype = getattr(binding.var.ty, "dtype", "float32")
            bits = tvm.runtime.DataType(str(dtype)).bits
            size = 1
            for dim in shape:
                size *= dim
            kernels.append(KernelInfo(
                index=len(kernels), binding=binding.var.name, prim_func=name, ops=ops,
                stage=(stages or {}).get(binding.var.name), args=tuple(value.args[1].fields),
                output_shape=shape, output_bytes=size * bits // 8,
                conv_kernel=_conv_kernel(value) if "conv2d" in ops else None,
                escapes=binding.var.name in escaping, output_ty=binding.var.ty,
            ))
    if not kernels:
        raise FusionError("cannot partition the module: its 'main' calls no TIR kernel "
                          "(run LegalizeOps and FuseOps first, or pass a Network)")
    return kernels


@dataclass(frozen=True)
class ChainPattern:
    """A chain of default kernels to fuse into one, each step a predicate on :class:`KernelInfo`.

    Attributes
    ----------
    name : str
        Short name (``bottleneck``); groups report ``pattern:<name>``.
    steps : tuple of callable
        One predicate per kernel, producer first.
    description : str
        What it matches, for messages.
    """

    name: str
    steps: tuple[Callable[[KernelInfo], bool], ...]
    description: str


#: The patterns, in priority order (a kernel joins the first group that claims it).
PATTERNS: dict[str, ChainPattern] = {
    p.name: p
    for p in (
        ChainPattern("bottleneck",
                     (lambda k: k.is_pointwise_conv, lambda k: k.is_depthwise_conv,
                      lambda k: k.is_pointwise_conv),
                     "1x1 conv -> depthwise conv -> 1x1 conv (MobileNetV2 inverted residual)"),
        ChainPattern("attention",
                     (lambda k: k.is_matmul, lambda k: "softmax" in k.ops, lambda k: k.is_matmul),
                     "matmul -> softmax -> matmul (scaled dot-product attention)"),
        ChainPattern("concat_linear",
                     (lambda k: "concatenate" in k.ops, lambda k: k.is_matmul),
                     "concat -> linear (the fusion stage's concatenation into the first dense layer)"),
        ChainPattern("conv_conv",
                     (lambda k: k.is_conv, lambda k: k.is_conv),
                     "conv -> conv (two convolutions in a row, epilogues included)"),
    )
}


@dataclass(frozen=True)
class GroupMatch:
    """One instance of a pattern: the kernels it would fuse.

    Attributes
    ----------
    pattern : str
        The pattern's name.
    kernels : tuple of KernelInfo
        Members, producer first.
    """

    pattern: str
    kernels: tuple[KernelInfo, ...]

    @property
    def intermediate_bytes(self) -> int:
        """Bytes of the tensors passed between members (all outputs but the last)."""
        return sum(k.output_bytes for k in self.kernels[:-1])

    @property
    def dram_bytes_saved(self) -> int:
        """DRAM traffic fusion removes: each intermediate written once and read once."""
        return 2 * self.intermediate_bytes


def _uses(kernels: list[KernelInfo]) -> dict[str, list[tuple[int, int]]]:
    """Binding name -> (consumer kernel index, argument position) for every kernel argument."""
    uses: dict[str, list[tuple[int, int]]] = {}
    for kernel in kernels:
        for position, arg in enumerate(kernel.args):
            if isinstance(arg, relax.Var):
                uses.setdefault(arg.name, []).append((kernel.index, position))
    return uses


def resolve_patterns(names) -> list[ChainPattern]:
    """The :class:`ChainPattern` objects for ``names`` (``None``: all), in priority order."""
    if names is None:
        return list(PATTERNS.values())
    names = list(names)
    unknown = [n for n in names if n not in PATTERNS]
    if unknown:
        raise FusionError(f"unknown fusion patterns {unknown}; known: {', '.join(PATTERNS)}")
    return [p for p in PATTERNS.values() if p.name in names]


def find_groups(kernels: list[KernelInfo], patterns=None) -> tuple[list[GroupMatch], list[str]]:
    """Every instance of every pattern, without overlap, and a note per pattern that matched nothing.

    Parameters
    ----------
    kernels : list of KernelInfo
        From :func:`kernel_infos`.
    patterns : iterable of str, optional
        Pattern names (default: all of :data:`PATTERNS`), tried in
        :data:`PATTERNS` order.

    Returns
    -------
    groups : list of GroupMatch
        In order of their first kernel.
    notes : list of str
        Human-readable notes (patterns that matched nothing, instances
        skipped because an intermediate has other users).
    """
    uses = _uses(kernels)
    claimed: set[int] = set()
    groups: list[GroupMatch] = []
    notes: list[str] = []
    for pattern in resolve_patterns(patterns):
        found = shared = 0
        for start in kernels:
            chain = _match_from(start, pattern, kernels, uses, claimed)
            if chain is None:
                continue
            if chain == "shared":
                shared += 1
                continue
            claimed.update(k.index for k in chain)
            groups.append(GroupMatch(pattern.name, tuple(chain)))
            found += 1
        if not found:
            notes.append(f"pattern {pattern.name!r} ({pattern.description}) matched nothing"
                         + (f"; {shared} candidate chains skipped because an intermediate "
                            "tensor has other users" if shared else ""))
        elif shared:
            notes.append(f"pattern {pattern.name!r}: {shared} chains skipped because an "
                         "intermediate tensor has other users")
    groups.sort(key=lambda g: g.kernels[0].index)
    return groups, notes


def _match_from(start, pattern, kernels, uses, claimed):
    if start.index in claimed or not pattern.steps[0](start):
        return None
    chain = [start]
    for step in pattern.steps[1:]:
        users = uses.get(chain[-1].binding, [])
        consumers = {index for index, _ in users}
        if len(consumers) != 1 or len(users) != 1 or chain[-1].escapes:
            # Zero users: an output of ``main``; several: the intermediate must stay in memory.
            if any(step(kernels[i]) and i not in claimed for i in consumers):
                return "shared"
            return None
        (index,) = consumers
        nxt = kernels[index]
        if index in claimed or not step(nxt):
            return None
        chain.append(nxt)
    return chain  # the last output may have any number of users


def chain_check(group: GroupMatch):
    """A ``FusionPattern`` check that accepts a match only if it calls exactly the chain's PrimFuncs.

    Needed because ``GlobalVarPattern(name)`` matches by *substring* on 0.27
    (``GlobalVarPattern("fused_conv2d1")`` matches ``fused_conv2d10_add``).
    """
    wanted = sorted(k.prim_func for k in group.kernels)

    def check(context) -> bool:
        names = [value.args[0].name_hint for value in context.matched_bindings.values()
                 if isinstance(value, relax.Call) and value.op.same_as(_CALL_TIR)]
        return sorted(names) == wanted

    return check


def chain_fusion_pattern(group: GroupMatch, name: str | None = None):
    """The group as a ``relax.transform.FusionPattern``: :func:`chain_dfpattern` plus :func:`chain_check`."""
    return relax.transform.FusionPattern(name or group.pattern, chain_dfpattern(group),
                                         check=chain_check(group))


def chain_dfpattern(group: GroupMatch):
    """A ``tvm.relax.dpl`` pattern that matches exactly this chain of ``call_tir`` kernels.

    Each member is ``call_tir(GlobalVarPattern(prim_func), TuplePattern(args))``
    with the producer's pattern where the producer's output is passed,
    wildcards for the other arguments. ``GlobalVarPattern`` matches names by
    substring, so pair it with :func:`chain_check` (:func:`chain_fusion_pattern`).
    """
    pattern = None
    producer = None
    for kernel in group.kernels:
        fields = []
        for arg in kernel.args:
            feeds = producer is not None and isinstance(arg, relax.Var) and arg.name == producer
            fields.append(pattern if feeds else wildcard())
        # is_call_tir(name, fields): GlobalVarPattern(name) and TuplePattern(fields).
        pattern = is_call_tir(kernel.prim_func, fields)
        producer = kernel.binding
    return pattern
