"""Inline the zero padding between two fused operators, so no schedule can leave its border unwritten.

A fused conv -> conv kernel pads the first convolution's output before the
second reads it: a block ``pad_temp1[...] = if_then_else(inside, x[...], 0)``
that has a producer (the first conv and its epilogue) and a consumer (the
second conv) in the same PrimFunc. MetaSchedule's CPU rules do not inline it
(``AutoInline`` refuses ``if_then_else`` on CPU) and, when tiling the first
convolution, may move it under that convolution's tiles with
``reverse_compute_at``. TVM 0.27 then computes it only where it depends on
the tile, the interior: the border is never written and the second
convolution reads whatever memory held (see
``benchmarks/fusion_decisions/wrong_schedule_example.md``). In 16 trials
every fused schedule of transfuser's and MobileNetV2's first conv -> conv
pairs was of that kind.

Inlined into its consumer, the padding is a condition on the second
convolution's read (``if_then_else(inside, x[...], 0)``) and there is no
block left to misplace. Only padding that reads another block's output is
inlined; a kernel's padding of its own inputs stays as TVM's split kernels
have it, so fused and split forms differ only where they are fused.
"""

from __future__ import annotations

import tvm


def _is_padding(block) -> bool:
    """A block that stores ``if_then_else(...)`` (how TOPI writes ``pad``)."""
    store = block.body
    value = getattr(store, "value", None)
    op = getattr(value, "op", None)
    return getattr(op, "name", "").endswith("if_then_else") and hasattr(store, "indices")


def padding_blocks(sch: "tvm.s_tir.Schedule") -> list[tuple["tvm.s_tir.SBlockRV", bool]]:
    """The padding blocks under ``sch``'s root, each with whether it pads an intermediate
    (reads a buffer the kernel allocates) rather than one of the kernel's inputs."""
    root = sch.get_sblock("root")
    allocated = list(sch.get(root).alloc_buffers)
    found = []
    for block_rv in sch.get_child_blocks(root):
        block = sch.get(block_rv)
        if _is_padding(block):
            found.append((block_rv, any(read.source.same_as(buf) for read in block.reads for buf in allocated)))
    return found


def inline_intermediate_padding(mod: tvm.IRModule) -> tuple[tvm.IRModule, int]:
    """``mod``'s ``main`` with each padding of an intermediate tensor inlined into its consumer.

    Parameters
    ----------
    mod : tvm.IRModule
        ``{"main": PrimFunc}``, unscheduled (as :func:`~tvm_latmodel.fusion.planner.fuse_group`
        makes it).

    Returns
    -------
    (tvm.IRModule, int)
        The module (``mod`` itself when nothing was inlined) and how many
        padding blocks were inlined. A padding block TVM refuses to inline
        stays (the schedule check of ``tune-network`` and the planner still
        catches a wrong schedule of it).
    """
    sch = tvm.s_tir.Schedule(mod)
    inlined = 0
    for block_rv, intermediate in padding_blocks(sch):
        if not intermediate:
            continue  # pads an input of the kernel: as in the split kernels
        try:
            sch.compute_inline(block_rv)
        except tvm.TVMError:
            continue
        inlined += 1
    return (sch.mod if inlined else mod), inlined
