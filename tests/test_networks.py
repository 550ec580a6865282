"""Whole networks: untuned build and run, stage labels, tasks, PyTorch twins.

Each network's default configuration is built and run once (module cache);
the tests below share those builds. About 60 s of CPU on the 2-core machine
(65-100 s of wall time there, depending on what else runs); TransFuser's
build (77 distinct kernels) is the largest part. The PyTorch tests skip
without torch.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op
from tvm.s_tir import meta_schedule as ms

from tvm_latmodel.networks import (
    MULTI_MODAL,
    STAGES,
    StageError,
    StageModule,
    build_and_run,
    extract_stage_tasks,
    fuse_network,
    fusion_passes,
    get_network,
    list_networks,
    make_network,
)
from tvm_latmodel.networks.inputs import InputSpec
from tvm_latmodel.targets import host_target
from toys import ToyEncoder, ToyFusion, ToyHead

NETWORKS = ["resnet18", "mobilenetv2", "avmnist", "mmimdb", "transfuser"]

_BUILT: dict[str, dict] = {}


def built(name: str) -> dict:
    """The default network, fused, built and run once per test session."""
    if name not in _BUILT:
        network = get_network(name)
        fused = fuse_network(network, host_target())
        inputs = network.make_inputs(seed=0)
        output, latency_s = build_and_run(fused, inputs=inputs, repeat=0)
        _BUILT[name] = {
            "network": network,
            "fused": fused,
            "inputs": inputs,
            "output": output,
            "latency_s": latency_s,
        }
    return _BUILT[name]


def test_list_networks():
    assert list_networks() == NETWORKS


def test_unknown_network_lists_the_known_ones():
    with pytest.raises(ValueError) as err:
        get_network("vgg16")
    message = str(err.value)
    assert "vgg16" in message
    for name in NETWORKS:
        assert name in message


def test_weights_and_inputs_are_seeded():
    first, second = get_network("avmnist", seed=3), get_network("avmnist", seed=3)
    assert all(np.array_equal(first.params[k], second.params[k]) for k in first.params)
    assert not np.array_equal(
        first.params["head.mlp.layers.0.weight"],
        get_network("avmnist", seed=4).params["head.mlp.layers.0.weight"],
    )
    a, b = first.make_inputs(seed=1), first.make_inputs(seed=1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    tokens = get_network("mmimdb").make_inputs()["tokens"]
    assert tokens.dtype == np.int64 and 0 <= tokens.min() and tokens.max() < 2000


def test_unknown_option_is_rejected():
    with pytest.raises(ValueError, match="image_size"):
        get_network("avmnist", image_sise=28)
    with pytest.raises(ValueError, match="concat"):
        get_network("mmimdb", fusion="sum")


@pytest.mark.parametrize("name", NETWORKS)
def test_default_network_builds_and_runs(name):
    result = built(name)
    network, output = result["network"], result["output"]
    assert output.shape == network.output_shape
    assert np.isfinite(output).all()
    assert np.abs(output).max() > 0
    assert result["latency_s"] > 0


@pytest.mark.parametrize("name", NETWORKS)
def test_every_kernel_and_task_has_a_stage(name):
    result = built(name)
    network, fused = result["network"], result["fused"]
    expected = set(STAGES) if name in MULTI_MODAL else {"encoder", "head"}
    assert set(network.binding_stages.values()) == expected
    assert {kernel.stage for kernel in fused.kernels} == expected
    for kernel in fused.kernels:
        assert kernel.stage in kernel.stages
        assert set(kernel.stages) <= set(STAGES)
    tasks = extract_stage_tasks(fused)
    assert {task.stage for task in tasks} == expected
    assert sum(task.weight for task in tasks) == len(fused.kernels)


@pytest.mark.parametrize("name", NETWORKS)
def test_stage_tasks_split_metaschedules_tasks(name):
    """Summed over stages, our tasks are exactly MetaSchedule's (same modules, same weights)."""
    fused = built(name)["fused"]
    ours: dict[int, int] = {}
    modules: dict[int, tvm.IRModule] = {}
    for task in extract_stage_tasks(fused):
        ours[task.workload_hash] = ours.get(task.workload_hash, 0) + task.weight
        modules[task.workload_hash] = task.mod
    theirs = ms.relax_integration.extract_tasks(fused.module, fused.target)
    assert len(theirs) == len(ours)
    for task in theirs:
        key = int(tvm_ffi.structural_hash(task.mod))
        assert ours[key] == task.weight, task.task_name
        assert tvm_ffi.structural_equal(modules[key], task.mod)


def test_weight_layout_folding_keeps_tvms_tasks():
    """fuse_network pre-folds weight transposes in NumPy; the tasks equal TVM's own pipeline's."""
    network = get_network("avmnist")
    target = host_target()
    with target:
        plain = tvm.transform.Sequential(fusion_passes(target))(network.bound_module())

    def weights(module):
        result = {}
        for task in ms.relax_integration.extract_tasks(module, target):
            key = int(tvm_ffi.structural_hash(task.mod))
            result[key] = result.get(key, 0) + task.weight
        return result

    assert weights(plain) == weights(built("avmnist")["fused"].module)


def test_fusion_stage_is_the_concat_kernel():
    """AV-MNIST: TVM fuses each encoder's flatten into the concat, charged to fusion."""
    fused = built("avmnist")["fused"]
    (fusion_kernel,) = [k for k in fused.kernels if k.stage == "fusion"]
    assert "concatenate" in fusion_kernel.prim_func
    assert fusion_kernel.stages == ("encoder", "fusion")
    assert all("conv2d" not in k.prim_func for k in fused.kernels if k.stage != "encoder")
    assert all("matmul" in k.prim_func for k in fused.kernels if k.stage == "head")
    assert fused.stage_of(fusion_kernel.prim_func) == "fusion"


def test_transfuser_interleaves_encoder_and_fusion_kernels():
    fused = built("transfuser")["fused"]
    stages = [kernel.stage for kernel in fused.kernels]
    switches = sum(1 for a, b in zip(stages, stages[1:]) if a != b)
    assert switches >= 8  # four fusion transformers between encoder layers, then the head
    assert stages[-1] == "head"
    assert any("softmax" in k.prim_func for k in fused.kernels if k.stage == "fusion")
    assert not any("softmax" in k.prim_func for k in fused.kernels if k.stage != "fusion")


def test_tensor_fusion_is_labelled():
    network = get_network("mmimdb", fusion="tensor")
    fused = fuse_network(network, host_target())
    fusion_kernels = [k for k in fused.kernels if k.stage == "fusion"]
    assert fusion_kernels and all("multiply" in k.prim_func for k in fusion_kernels)
    assert network.output_shape == (1, 23)
    assert network.params["head.mlp.layers.0.weight"].shape == (128, 129 * 129)


# --- the labelling machinery on a toy network ------------------------------------------


class _Toy(nn.Module):
    def __init__(self, leak=False):
        self.left, self.right = ToyEncoder(), ToyEncoder()
        self.fusion, self.head = ToyFusion(), ToyHead()
        self.leak = leak
        self.inputs = [InputSpec("a", (1, 1, 8, 8)), InputSpec("b", (1, 1, 8, 8))]

    def forward(self, a, b):
        fused = self.fusion(self.left(a), self.right(b))
        if self.leak:
            fused = op.relu(fused)  # an op outside every stage module
        return self.head(fused)


def test_toy_bindings_get_their_modules_stage():
    network = make_network("toy", _Toy(), {})
    stages = network.binding_stages
    by_op = {}
    for binding in network.module["main"].body.blocks[0].bindings:
        value = binding.value
        name = value.op.name if isinstance(value, tvm.relax.Call) else "alias"
        by_op.setdefault(name, set()).add(stages[binding.var.name])
    assert by_op["relax.nn.conv2d"] == {"encoder"}
    assert by_op["relax.nn.adaptive_avg_pool2d"] == {"encoder"}
    assert by_op["relax.concat"] == {"fusion"}
    assert by_op["relax.matmul"] == {"head"}
    fused = fuse_network(network, host_target())
    assert [k.stage for k in fused.kernels][-1] == "head"
    assert {k.stage for k in fused.kernels} == set(STAGES)


class _Outer(StageModule):
    """An encoder whose middle is an inner fusion stage module."""

    def __init__(self):
        super().__init__("encoder")
        self.inner = ToyFusion()

    def forward(self, a, b):
        return op.relu(self.inner(op.relu(a), op.relu(b)))


class _Nested(nn.Module):
    def __init__(self):
        self.outer = _Outer()
        self.inputs = [InputSpec("a", (1, 4)), InputSpec("b", (1, 4))]

    def forward(self, a, b):
        return self.outer(a, b)


def test_nested_stage_module_keeps_its_own_stage():
    network = make_network("nested", _Nested(), {})
    ops = [
        (binding.value.op.name, network.binding_stages[binding.var.name])
        for binding in network.module["main"].body.blocks[0].bindings
        if isinstance(binding.value, tvm.relax.Call)
    ]
    assert ops == [
        ("relax.nn.relu", "encoder"),
        ("relax.nn.relu", "encoder"),
        ("relax.concat", "fusion"),
        ("relax.nn.relu", "encoder"),
    ]


def test_op_outside_every_stage_is_an_error():
    with pytest.raises(StageError, match="outside every StageModule"):
        make_network("toy", _Toy(leak=True), {})


def test_unknown_stage_is_an_error():
    with pytest.raises(ValueError, match="unknown stage"):
        StageModule("backbone")


# --- PyTorch twins ------------------------------------------------------------------------


def _assert_close(actual, reference, rtol=1e-4):
    scale = float(np.abs(reference).max())
    np.testing.assert_allclose(actual, reference, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("name", NETWORKS)
def test_nn_network_matches_its_torch_twin(name):
    pytest.importorskip("torch")
    from tvm_latmodel.networks.torch_twins import run_torch, torch_twin

    result = built(name)
    twin = torch_twin(result["network"])
    reference = run_torch(twin, result["network"], result["inputs"])
    _assert_close(result["output"], reference)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch.export's own deprecation notice
def test_torch_import_matches_the_nn_network():
    """The twin through torch.export and Relax's frontend computes what the nn network does.

    One network (convolutions, pooling, embedding, attention, layer norm,
    concat): each import costs a torch.export and a second TVM build.
    """
    pytest.importorskip("torch")
    from tvm_latmodel.networks.pipeline import build_and_run_module
    from tvm_latmodel.networks.torch_twins import import_torch_twin

    result = built("mmimdb")
    network = result["network"]
    module = import_torch_twin(network)
    arrays = [result["inputs"][spec.name] for spec in network.inputs]
    imported, _ = build_and_run_module(module, arrays, host_target(), repeat=0)
    _assert_close(imported, result["output"])


def test_twin_weights_must_match():
    pytest.importorskip("torch")
    from tvm_latmodel.networks.torch_twins import copy_weights, torch_twin

    small = get_network("avmnist")
    twin = torch_twin(small)
    other = get_network("avmnist", hidden=50)
    with pytest.raises(ValueError, match="shape"):
        copy_weights(other, twin)


def test_record_logs_takes_a_networks_kernel():
    """``scripts/record_logs.py`` records ``DIR=NETWORK/TASK`` (stop 27's
    fresh logs): the task of that name in the network's default plan, the
    module tune-network tunes; an unknown task name is refused with the
    network's task names."""
    import importlib.util
    import os

    from tvm_latmodel.fusion.prepare import prepare_network
    from tvm_latmodel.networks.kernels import distinct_workloads

    path = os.path.join(os.path.dirname(__file__), "..", "scripts", "record_logs.py")
    spec = importlib.util.spec_from_file_location("record_logs_networks", path)
    record_logs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record_logs)

    mod = record_logs.network_kernel("avmnist/max_pool2d4")
    tasks = distinct_workloads(prepare_network(get_network("avmnist", seed=0), plan="default").tasks)
    (same,) = [w for w in tasks if w.name == "max_pool2d4"]
    assert tvm_ffi.structural_equal(mod, same.mod)
    assert not any(tvm_ffi.structural_equal(mod, w.mod) for w in tasks if w.name != "max_pool2d4")
    with pytest.raises(ValueError, match=r"avmnist has no tunable task 'nope'; its tasks: .*max_pool2d4"):
        record_logs.network_kernel("avmnist/nope")


def test_record_logs_takes_a_te_workload_function_at_a_shape():
    """``DIR=FUNC(ARGS)`` (stop 34's set 14): te_workload's FUNC at those
    integer arguments, the module ``get_workload`` builds for the same entry
    (DEP:0 here); an unknown function, a missing parenthesis or a
    non-integer argument is refused with the spec named."""
    import importlib.util
    import os

    from tvm_latmodel.workloads import get_workload

    path = os.path.join(os.path.dirname(__file__), "..", "scripts", "record_logs.py")
    spec = importlib.util.spec_from_file_location("record_logs_te", path)
    record_logs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record_logs)

    mod = record_logs.te_kernel("depthwise_conv2d_nhwc(1, 112, 112, 32, 3, 1, 1)")
    assert tvm_ffi.structural_equal(mod, get_workload("DEP:0"))
    assert not tvm_ffi.structural_equal(mod, get_workload("DEP:1"))
    for bad, needle in [("no_such_fn(1,2)", "not FUNC"), ("conv2d_nhwc(1,2", "not FUNC"),
                        ("conv2d_nhwc(1,x,3)", "must be integers")]:
        with pytest.raises(ValueError, match=needle) as err:
            record_logs.te_kernel(bad)
        assert bad in str(err.value)


def test_record_logs_refuses_a_name_another_workload_has(tmp_path):
    """Stop 35 named a set-15 log GRP_3, the name of the registry's GRP:3
    logs (another shape): ``name_taken`` says so; a free name, the
    registry's own module under its name, and a folder beside OUT holding
    the same module pass; a folder beside OUT holding another module is
    named."""
    import importlib.util
    import os

    from tvm.s_tir import meta_schedule as ms

    from tvm_latmodel.workloads import get_workload

    path = os.path.join(os.path.dirname(__file__), "..", "scripts", "record_logs.py")
    spec = importlib.util.spec_from_file_location("record_logs_names", path)
    record_logs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record_logs)

    grp = record_logs.te_kernel("conv2d_nhwc(1,28,28,128,128,3,1,1,1,8)")
    out = str(tmp_path / "logs" / "mine")
    assert record_logs.name_taken("GRP_3", grp, out) == "the registry's GRP:3"
    assert record_logs.name_taken("GRP_9", grp, out) is None
    assert record_logs.name_taken("DEP_0", get_workload("DEP:0"), out) is None
    other = tmp_path / "logs" / "theirs" / "XYZ_1"
    other.mkdir(parents=True)
    ms.database.JSONDatabase(work_dir=str(other)).commit_workload(get_workload("DEP:1"))
    assert record_logs.name_taken("XYZ_1", get_workload("DEP:1"), out) is None
    assert record_logs.name_taken("XYZ_1", grp, out) == str(other)
