"""Benchmark workloads, named ``FAMILY:IDX``.

Every entry of MetaSchedule's ``te_workload.CONFIGS`` is available as
``C2D:0`` ... ``TBG:3``; the four 3x3 convolutions of ResNet-18 are
``R18:0`` (56x56x64) ... ``R18:3`` (7x7x512). Layers of MobileNetV2 are
``MBV2:0`` ... and of a small transformer block ``XFM:0`` ....
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

# Layers of MobileNetV2 (batch 1, NHWC, 224x224 input): an inverted-residual
# block is a 1x1 expansion, a 3x3 depthwise conv and a 1x1 projection.
# Each entry is (te_workload function name, arguments).
MOBILENETV2_LAYERS = [
    ("conv2d_nhwc", (1, 56, 56, 24, 144, 1, 1, 0)),      # expand 1x1, block 3
    ("depthwise_conv2d_nhwc", (1, 56, 56, 144, 3, 1, 1)),  # depthwise 3x3, stride 1
    ("depthwise_conv2d_nhwc", (1, 28, 28, 192, 3, 2, 1)),  # depthwise 3x3, stride 2
    ("conv2d_nhwc", (1, 14, 14, 384, 64, 1, 1, 0)),      # project 1x1
    ("conv2d_nhwc", (1, 7, 7, 320, 1280, 1, 1, 0)),      # last 1x1
]

# A small transformer encoder block: sequence 128, model width 256, 4 heads
# of 64, MLP width 1024.
TRANSFORMER_LAYERS = [
    ("matmul", (128, 768, 256)),                  # fused QKV projection
    ("batch_matmul_nkkm", (4, 128, 128, 64)),     # attention scores Q K^T
    ("softmax_mn", (512, 128)),                   # softmax over keys, 4 heads x 128 rows
    ("matmul", (128, 1024, 256)),                 # MLP up
    ("matmul", (128, 256, 1024)),                 # MLP down
    ("norm_bmn", (1, 128, 256)),                  # a norm over the block output
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

# More shapes of the same families plus network layers, recorded with pools
# that no model shaped (random design-space samples, then evolutionary search
# with the random model): see scripts/record_logs.py --pool space. R18:1 is
# kept out of every log (the validation workload that no log has seen).
MORE_RECORDED_WORKLOADS = [
    "C1D:1", "C1D:2", "C2D:0", "C2D:2", "GMM:0", "GMM:2", "GRP:1", "GRP:2",
    "DIL:2", "DEP:1", "DEP:2", "DEP:3", "T2D:1", "T2D:2", "CAP:1", "CAP:3",
    "NRM:0", "NRM:1", "SFM:0", "SFM:1", "CBR:1", "CBR:3", "TBG:1", "TBG:2",
    "MBV2:0", "MBV2:1", "MBV2:2", "MBV2:3", "MBV2:4",
    "XFM:0", "XFM:1", "XFM:2", "XFM:3", "XFM:4", "XFM:5",
]


def _configs() -> dict[str, list[tuple]]:
    """Family name -> list of (te_workload function, arguments)."""
    from tvm.s_tir.meta_schedule.testing import te_workload

    configs = {
        name: [(fn, shape) for shape in shapes]
        for name, (fn, shapes) in te_workload.CONFIGS.items()
        # TVM 0.27's winograd TOPI path raises "LEGACY-FLOW triggered".
        if name not in UNSUPPORTED_FAMILIES
    }
    configs["R18"] = [(te_workload.conv2d_nhwc, shape) for shape in RESNET18_CONV3X3]
    configs["MBV2"] = [(getattr(te_workload, fn), args) for fn, args in MOBILENETV2_LAYERS]
    configs["XFM"] = [(getattr(te_workload, fn), args) for fn, args in TRANSFORMER_LAYERS]
    return configs


def list_workloads() -> list[str]:
    """All workload names this package knows, ``FAMILY:IDX``."""
    return [f"{fam}:{i}" for fam, entries in _configs().items() for i in range(len(entries))]


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
    entries = configs[fam]
    try:
        i = int(idx) if idx else 0
        if i < 0:
            raise IndexError(i)
        fn, shape = entries[i]
    except (ValueError, IndexError):
        raise ValueError(
            f"bad workload index {idx!r} in {name!r}: {fam} has indices 0..{len(entries) - 1}"
        ) from None
    return te_module(fn, shape)


def te_module(fn, shape) -> tvm.IRModule:
    """The IRModule (one PrimFunc ``main``) of te_workload function ``fn`` at ``shape``."""
    func = te.create_prim_func(fn(*shape)).with_attr("global_symbol", "main")
    return tvm.IRModule({"main": func})
