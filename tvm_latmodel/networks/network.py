"""A network ready for TVM: its Relax module, seeded weights, inputs and stage labels."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend import nn

from .inputs import InputSpec
from .stages import export_with_stages


@dataclass(frozen=True)
class Network:
    """One network, exported from ``tvm.relax.frontend.nn``.

    Attributes
    ----------
    name : str
        Registry name (``resnet18``, ``avmnist`` ...).
    config : dict
        The keyword arguments the network was built with, defaults filled in.
    module : tvm.IRModule
        ``main(inputs..., params...)``, the weights as trailing parameters
        (attribute ``num_input`` counts the inputs). :meth:`bound_module`
        binds the weights as constants, which is what gets compiled.
    params : dict of str to numpy.ndarray
        Seeded weights by parameter name (``image_encoder.conv.conv.weight``),
        in ``main``'s parameter order; the same names as the PyTorch twin's
        ``state_dict``.
    inputs : tuple of InputSpec
        The inputs, in ``main``'s order.
    output_shape : tuple of int
        Shape of the single output.
    binding_stages : dict of str to str
        Stage of every binding of ``module["main"]``, by binding name.
    model : nn.Module
        The ``nn`` model the module was exported from.
    """

    name: str
    config: dict[str, Any]
    module: tvm.IRModule
    params: dict[str, np.ndarray]
    inputs: tuple[InputSpec, ...]
    output_shape: tuple[int, ...]
    binding_stages: dict[str, str]
    model: nn.Module = field(repr=False, compare=False)

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages this network has, in data-flow order."""
        from .stages import STAGES  # pylint: disable=import-outside-toplevel

        present = set(self.binding_stages.values())
        return tuple(stage for stage in STAGES if stage in present)

    def make_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Seeded random inputs by name (standard normal floats, uniform token ids)."""
        rng = np.random.default_rng(seed)
        return {spec.name: spec.random(rng) for spec in self.inputs}

    def bound_module(self) -> tvm.IRModule:
        """``main(inputs...)`` with the weights bound as constants (deployment form)."""
        bound = relax.transform.BindParams("main", self.params)(self.module)
        if len(bound["main"].params) != len(self.inputs):
            raise RuntimeError("BindParams left weights unbound; is main's global_symbol 'main'?")
        return bound

    def stage_of_binding(self, binding_name: str) -> str:
        """Stage of a binding of ``module["main"]`` (before any pass)."""
        try:
            return self.binding_stages[binding_name]
        except KeyError:
            raise KeyError(f"{self.name} has no binding {binding_name!r}") from None


def init_params(
    names_shapes: list[tuple[str, tuple[int, ...]]], seed: int
) -> dict[str, np.ndarray]:
    """Seeded weights that keep activations near unit scale.

    Rules, by parameter name and rank:

    - 4-D ``*.weight`` (convolutions): He normal, std ``sqrt(2 / fan_in)``
      with ``fan_in = in_channels/groups * kh * kw``;
    - 2-D ``*embed*`` tables and ``*pos*`` embeddings: normal, std 0.5;
    - other 2-D ``*.weight`` (linear, ``(out, in)``): normal, std ``1/sqrt(in)``;
    - 1-D ``*norm*.weight``: ``1 + 0.1 * normal``;
    - everything else (biases, norm shifts, 3-D position tables): ``0.1 * normal``.
    """
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in names_shapes:
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "weight" and len(shape) == 4:
            fan_in = int(np.prod(shape[1:]))
            value = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        elif len(shape) >= 2 and ("embed" in name or "pos" in leaf):
            value = rng.standard_normal(shape) * 0.5
        elif leaf == "weight" and len(shape) == 2:
            value = rng.standard_normal(shape) / np.sqrt(shape[1])
        elif leaf == "weight" and len(shape) == 1 and "norm" in name:
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            value = 0.1 * rng.standard_normal(shape)
        params[name] = value.astype("float32")
    return params


def make_network(name: str, model: nn.Module, config: dict[str, Any], seed: int = 0) -> Network:
    """Export an ``nn`` model (with an ``inputs`` list of :class:`InputSpec`) as a :class:`Network`.

    Parameters
    ----------
    name : str
        Registry name.
    model : nn.Module
        The model; ``model.inputs`` lists its inputs in ``forward``'s order.
    config : dict
        The keyword arguments it was built with.
    seed : int
        Seed of the weights.
    """
    inputs = tuple(model.inputs)
    specs = {spec.name: nn.spec.Tensor(list(spec.shape), spec.dtype) for spec in inputs}
    module, param_names, binding_stages = export_with_stages(model, specs)
    main = module["main"]
    weight_vars = main.params[len(inputs) :]
    names_shapes = [
        (name, tuple(int(d) for d in var.ty.shape)) for name, var in zip(param_names, weight_vars)
    ]
    output_shape = tuple(int(d) for d in main.ret_ty.shape)
    return Network(
        name=name,
        config=dict(config),
        module=module,
        params=init_params(names_shapes, seed),
        inputs=inputs,
        output_shape=output_shape,
        binding_stages=binding_stages,
        model=model,
    )
