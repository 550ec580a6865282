"""PyTorch twins of the networks, and their import through ``torch.export``.

Each network has an equivalent ``torch.nn.Module`` with the same structure,
attribute names and ops, so its ``state_dict`` keys are exactly
``Network.params``' names and the two compute the same numbers. ``torch`` is
optional: it is imported only when a function here is called.

>>> twin = torch_twin(net)                      # weights copied from net.params
>>> reference = run_torch(twin, net.make_inputs())
>>> imported = import_torch_twin(net, twin)    # Relax IRModule via torch.export
"""

from __future__ import annotations

import numpy as np
import tvm

from .network import Network


def _torch():
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "PyTorch twins need torch: pip install 'tvm-latmodel[torch]' (torch==2.13.0)"
        ) from err
    return torch


def torch_twin(network: Network):
    """The PyTorch model equivalent to ``network``, with its weights, in eval mode.

    Parameters
    ----------
    network : Network
        From :func:`tvm_latmodel.networks.get_network`.

    Returns
    -------
    torch.nn.Module
    """
    _torch()
    from ._torch_modules import TWINS  # pylint: disable=import-outside-toplevel

    twin = TWINS[network.name](**network.config)
    copy_weights(network, twin)
    return twin.eval()


def copy_weights(network: Network, twin) -> None:
    """Load ``network.params`` into a twin (strict: every name and shape must match).

    Raises
    ------
    ValueError
        If names or shapes differ.
    """
    torch = _torch()
    state = twin.state_dict()
    missing = sorted(set(state) - set(network.params))
    unexpected = sorted(set(network.params) - set(state))
    if missing or unexpected:
        raise ValueError(f"twin and network differ: missing {missing}, unexpected {unexpected}")
    for name, value in network.params.items():
        if tuple(state[name].shape) != value.shape:
            raise ValueError(f"{name}: twin shape {tuple(state[name].shape)} != {value.shape}")
    twin.load_state_dict(
        {name: torch.from_numpy(value.copy()) for name, value in network.params.items()}
    )


def params_from_torch(twin) -> dict[str, np.ndarray]:
    """A twin's weights as ``Network.params`` (e.g. to use trained PyTorch weights).

    Use with ``dataclasses.replace(network, params=params_from_torch(twin))``.
    """
    return {
        name: tensor.detach().cpu().numpy().astype("float32")
        for name, tensor in twin.state_dict().items()
    }


def _torch_inputs(network: Network, inputs: dict[str, np.ndarray]) -> tuple:
    torch = _torch()
    return tuple(
        torch.from_numpy(np.ascontiguousarray(inputs[spec.name])) for spec in network.inputs
    )


def run_torch(twin, network: Network, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Run a twin eagerly on ``inputs`` (by name) and return its output as numpy."""
    torch = _torch()
    with torch.no_grad():
        return twin(*_torch_inputs(network, inputs)).numpy()


def import_torch_twin(network: Network, twin=None) -> tvm.IRModule:
    """The twin as a Relax module, through ``torch.export`` and TVM's Relax frontend.

    Parameters
    ----------
    network : Network
        The network whose twin to import.
    twin : torch.nn.Module, optional
        An existing twin; built with :func:`torch_twin` if not given.

    Returns
    -------
    tvm.IRModule
        ``main(inputs...)`` with the weights bound as constants (the
        frontend's default), returning the output tensor.
    """
    torch = _torch()
    from tvm.relax.frontend.torch import from_exported_program  # pylint: disable=import-outside-toplevel

    twin = torch_twin(network) if twin is None else twin
    example = _torch_inputs(network, network.make_inputs(seed=0))
    with torch.no_grad():
        exported = torch.export.export(twin, example)
    return from_exported_program(exported, unwrap_unit_return_tuple=True)
