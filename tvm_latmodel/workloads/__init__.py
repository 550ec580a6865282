"""Benchmark workloads, named ``FAMILY:IDX``.

Every entry of MetaSchedule's ``te_workload.CONFIGS`` is available as
``C2D:0`` ... ``TBG:3``; the four 3x3 convolutions of ResNet-18 are
``R18:0`` (56x56x64) ... ``R18:3`` (7x7x512).
"""

from __future__ import annotations

import tvm
from tvm import te

# The 3x3 convolutions of ResNet-18 (batch 1, NHWC), as
# (N, H, W, CI, CO, kernel, stride, padding).
RESNET18_CONV3X3 = [
    (1, 56, 56, 64, 64, 3, 1, 1),
    (1, 28, 28, 128, 128, 3, 1, 1),
    (1, 14, 14, 256, 256, 3, 1, 1),
    (1, 7, 7, 512, 512, 3, 1, 1),
]

DEFAULT_WORKLOAD = "R18:1"

# te_workload.CONFIGS families that cannot be built in apache-tvm 0.27.
UNSUPPORTED_FAMILIES = ("C2D_WIN_NHWC",)

# One shape per te_workload family, small enough (4-411 MFLOP) that a
# measurement takes milliseconds on a 2-core CPU: the recorded tuning logs.
RECORDED_WORKLOADS = [
    "C1D:0", "C2D:1", "C3D:1", "GMM:1", "GRP:0", "DIL:1", "DEP:0",
    "T2D:3", "CAP:2", "NRM:3", "SFM:3", "CBR:2", "TBG:0",
]


def _configs():
    from tvm.s_tir.meta_schedule.testing import te_workload

    configs = {
        name: (fn, list(shapes))
        for name, (fn, shapes) in te_workload.CONFIGS.items()
        # TVM 0.27's winograd TOPI path raises "LEGACY-FLOW triggered".
        if name not in UNSUPPORTED_FAMILIES
    }
    configs["R18"] = (te_workload.conv2d_nhwc, RESNET18_CONV3X3)
    return configs


def list_workloads() -> list[str]:
    """All workload names this package knows, ``FAMILY:IDX``."""
    return [f"{fam}:{i}" for fam, (_, shapes) in _configs().items() for i in range(len(shapes))]


def get_workload(name: str) -> tvm.IRModule:
    """Return the workload ``name`` (``FAMILY:IDX``, or ``FAMILY`` for index 0)
    as an IRModule with one PrimFunc ``main``.

    Raises
    ------
    ValueError
        If the family or index is unknown; the message lists what is known.
    """
    configs = _configs()
    fam, _, idx = name.partition(":")
    if fam not in configs:
        raise ValueError(
            f"unknown workload family {fam!r} in {name!r}; known: {', '.join(sorted(configs))}"
        )
    fn, shapes = configs[fam]
    try:
        i = int(idx) if idx else 0
        shape = shapes[i]
    except (ValueError, IndexError):
        raise ValueError(
            f"bad workload index {idx!r} in {name!r}: {fam} has indices 0..{len(shapes) - 1}"
        ) from None
    func = te.create_prim_func(fn(*shape)).with_attr("global_symbol", "main")
    return tvm.IRModule({"main": func})
