"""Predictive fusion: larger fusion groups than TVM's default, kept only where predicted to pay.

>>> from tvm_latmodel.networks import get_network
>>> from tvm_latmodel.fusion import FusionPlanner
>>> plan = FusionPlanner(samples=8).plan(get_network("mobilenetv2", image_size=64))
>>> [(g.name, g.decision, g.predicted_gain) for g in plan.decisions]

:mod:`~tvm_latmodel.fusion.patterns` finds the groups (chains of TVM's
default kernels) and writes them as ``tvm.relax.dpl`` patterns;
:mod:`~tvm_latmodel.fusion.planner` fuses each with ``FuseOpsByPattern`` +
``FuseTIR``, predicts both forms with the hybrid model and decides.
"""

from .patterns import (
    PATTERNS,
    ChainPattern,
    FusionError,
    GroupMatch,
    KernelInfo,
    chain_check,
    chain_dfpattern,
    chain_fusion_pattern,
    find_groups,
    kernel_infos,
    op_names,
)
from .planner import (
    FusionFallbackWarning,
    FusionGroup,
    FusionPlan,
    FusionPlanner,
    apply_plan,
    build_check,
    fuse_group,
    print_plan,
)

__all__ = [
    "PATTERNS",
    "ChainPattern",
    "FusionError",
    "FusionFallbackWarning",
    "FusionGroup",
    "FusionPlan",
    "FusionPlanner",
    "GroupMatch",
    "KernelInfo",
    "apply_plan",
    "build_check",
    "chain_check",
    "chain_dfpattern",
    "chain_fusion_pattern",
    "find_groups",
    "fuse_group",
    "kernel_infos",
    "op_names",
    "print_plan",
]
