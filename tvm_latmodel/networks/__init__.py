"""Whole networks for TVM, written in ``tvm.relax.frontend.nn``, with stage labels.

Single-modality baselines (``resnet18``, ``mobilenetv2``) and the
multi-modal networks whose encoder / fusion / head stages the predictive
fusion work studies (``avmnist``, ``mmimdb``, ``transfuser``). All are
batch 1, float32, sized so an untuned build and run takes seconds on a
2-core CPU (each network's docstring says what was reduced).

>>> from tvm_latmodel.networks import get_network, build_and_run, extract_stage_tasks
>>> net = get_network("avmnist")
>>> output, latency_s = build_and_run(net)          # untuned, on this CPU
>>> tasks = extract_stage_tasks(net)                # TIR tasks with stage and weight

How stages reach kernels is explained in :mod:`tvm_latmodel.networks.stages`.
Equivalent PyTorch models (same weights) are in
:mod:`tvm_latmodel.networks.torch_twins` (needs ``torch``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from .avmnist import AVMNIST
from .inputs import InputSpec
from .mmimdb import MMIMDb
from .mobilenet import MobileNetV2
from .network import Network, make_network
from .pipeline import (
    FusedNetwork,
    Kernel,
    StageTask,
    build_and_run,
    compile_network,
    extract_stage_tasks,
    fuse_network,
    fusion_passes,
)
from .resnet import ResNet18
from .stages import STAGES, StageError, StageModule
from .transfuser import TransFuser

#: Network name -> the ``nn.Module`` class that builds it (its keyword
#: arguments are the network's options).
NETWORKS: dict[str, Callable] = {
    "resnet18": ResNet18,
    "mobilenetv2": MobileNetV2,
    "avmnist": AVMNIST,
    "mmimdb": MMIMDb,
    "transfuser": TransFuser,
}

#: Networks with several modalities, hence all three stages.
MULTI_MODAL = ("avmnist", "mmimdb", "transfuser")


def list_networks() -> list[str]:
    """Names accepted by :func:`get_network`, in registry order."""
    return list(NETWORKS)


def network_options(name: str) -> dict[str, object]:
    """The keyword options of a network and their defaults."""
    builder = _builder(name)
    return {
        param.name: param.default
        for param in inspect.signature(builder.__init__).parameters.values()
        if param.name != "self"
    }


def _builder(name: str) -> Callable:
    try:
        return NETWORKS[name]
    except KeyError:
        raise ValueError(f"unknown network {name!r}; known: {', '.join(NETWORKS)}") from None


def get_network(name: str, *, seed: int = 0, **options) -> Network:
    """Build, export and label a network.

    Parameters
    ----------
    name : str
        One of :func:`list_networks`.
    seed : int
        Seed of the random weights.
    **options
        The network's options (see :func:`network_options`), e.g.
        ``image_size=112`` for ``resnet18`` or ``fusion="tensor"`` for ``mmimdb``.

    Returns
    -------
    Network

    Raises
    ------
    ValueError
        For an unknown name (listing the known ones) or an unknown option.
    """
    builder = _builder(name)
    known = network_options(name)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"unknown options {unknown} for {name}; options: {', '.join(known)}")
    config = {**known, **options}
    return make_network(name, builder(**config), config, seed=seed)


__all__ = [
    "AVMNIST",
    "MMIMDb",
    "MULTI_MODAL",
    "MobileNetV2",
    "NETWORKS",
    "STAGES",
    "FusedNetwork",
    "InputSpec",
    "Kernel",
    "Network",
    "ResNet18",
    "StageError",
    "StageModule",
    "StageTask",
    "TransFuser",
    "build_and_run",
    "compile_network",
    "extract_stage_tasks",
    "fuse_network",
    "fusion_passes",
    "get_network",
    "list_networks",
    "make_network",
    "network_options",
]
