"""Tests for tvm_latmodel.hardware.calibrate, the ``calibrate`` subcommand and HardwareSpec.load errors."""

from __future__ import annotations

import argparse
import json
import math
import time

import pytest

from tvm_latmodel.cli import calibrate as calibrate_commands, main as cli
from tvm_latmodel.hardware.calibrate import (
    CalibrationWarning,
    calibrate_host,
    check_host_target,
    enforce_monotonic_bandwidth,
)
from tvm_latmodel.hardware import HardwareSpec
from tvm_latmodel.targets import cuda_target, host_target


@pytest.fixture(scope="module")
def quick_spec():
    """One quick calibration shared by the tests (a few seconds)."""
    start = time.perf_counter()
    spec = calibrate_host(quick=True, progress=False)
    spec.extra["test_elapsed_s"] = time.perf_counter() - start
    return spec


@pytest.mark.slow
def test_quick_calibration_is_plausible(quick_spec):
    spec = quick_spec
    default = HardwareSpec.from_target(host_target())
    assert spec.extra["test_elapsed_s"] < 20.0
    assert spec.source == "calibrated"
    assert spec.kind == "cpu"
    # Sizes, cores and vector width are kept from the defaults.
    assert spec.parallel_units == default.parallel_units
    assert spec.vector_bits == default.vector_bits
    assert [m.name for m in spec.memory] == [m.name for m in default.memory]
    assert [m.size_bytes for m in spec.memory] == [m.size_bytes for m in default.memory]
    for level in spec.memory:
        assert math.isfinite(level.bandwidth_gbps)
        assert 1.0 <= level.bandwidth_gbps <= 2000.0, level
    assert math.isfinite(spec.peak_gflops) and 1.0 <= spec.peak_gflops <= 5000.0
    assert 0.0 < spec.launch_overhead_s < 1e-3
    # Bandwidth never grows towards DRAM, and L1 is clearly faster than DRAM.
    bws = [m.bandwidth_gbps for m in spec.memory]
    assert bws == sorted(bws, reverse=True)
    assert spec.memory[0].bandwidth_gbps >= spec.memory[-1].bandwidth_gbps
    # Raw measurements are recorded, one per level, and are the uncorrected values.
    raw = spec.extra["calibration"]
    assert raw["quick"] is True
    assert set(raw["levels"]) == {m.name for m in spec.memory}
    for level in spec.memory:
        entry = raw["levels"][level.name]
        assert entry["bandwidth_gbps"] > 0 and len(entry["times_s"]) >= 1
        assert level.bandwidth_gbps >= entry["bandwidth_gbps"]  # only ever raised by the correction
        # One core alone: measured, and between its share and the whole level.
        assert entry["single_core"]["bandwidth_gbps"] > 0
        assert level.bandwidth_gbps / spec.parallel_units <= level.single_core_bandwidth_gbps <= level.bandwidth_gbps
    assert spec.peak_gflops / spec.parallel_units <= spec.single_core_peak_gflops <= spec.peak_gflops
    assert raw["fma"]["single_core"]["peak_gflops"] > 0
    assert raw["fma"]["peak_gflops"] == spec.peak_gflops
    assert raw["launch"]["launch_overhead_s"] == spec.launch_overhead_s
    # A scalar expf call per element: measured, and never as cheap as a vector FMA lane.
    assert raw["libm"]["libm_call_cycles"] == spec.libm_call_cycles
    assert spec.libm_call_cycles > 2.0
    # The DRAM working set is far beyond the last cache.
    llc = max(m.size_bytes for m in spec.memory[:-1])
    assert raw["levels"]["DRAM"]["working_set_bytes"] >= 2 * llc


@pytest.mark.slow
def test_calibrated_spec_round_trips(quick_spec, tmp_path):
    path = tmp_path / "hw.json"
    quick_spec.save(str(path))
    loaded = HardwareSpec.load(str(path))
    assert loaded == quick_spec
    assert loaded.source == "calibrated"
    assert loaded.extra["calibration"]["levels"] == quick_spec.extra["calibration"]["levels"]


def test_monotonic_correction_takes_max_of_lower_levels():
    names = ["L1", "L2", "L3", "DRAM"]
    corrected, messages = enforce_monotonic_bandwidth(names, [100.0, 40.0, 50.0, 10.0])
    assert corrected == [100.0, 50.0, 50.0, 10.0]
    assert len(messages) == 1 and "L3" in messages[0] and "L2" in messages[0]
    corrected, messages = enforce_monotonic_bandwidth(names, [10.0, 20.0, 30.0, 5.0])
    assert corrected == [30.0, 30.0, 30.0, 5.0]
    assert len(messages) == 2
    corrected, messages = enforce_monotonic_bandwidth(names, [100.0, 50.0, 20.0, 10.0])
    assert corrected == [100.0, 50.0, 20.0, 10.0] and messages == []


def test_calibration_warning_is_a_user_warning():
    assert issubclass(CalibrationWarning, UserWarning)


def test_cuda_target_is_refused():
    with pytest.raises(ValueError, match="cannot calibrate a 'cuda' target"):
        calibrate_host(cuda_target("h200"), quick=True, progress=False)
    with pytest.raises(ValueError, match="only an LLVM target"):
        check_host_target("h200")


def test_other_cpu_is_refused():
    host_cpu = host_target().attrs["mcpu"]
    other = "skylake-avx512" if host_cpu != "skylake-avx512" else "znver3"
    with pytest.raises(ValueError, match=f"mcpu='{other}'.*{host_cpu}"):
        check_host_target({"kind": "llvm", "mcpu": other, "num-cores": 2})
    with pytest.raises(ValueError, match="mcpu='<none>'"):
        check_host_target({"kind": "llvm"})
    assert check_host_target(None).kind.name == "llvm"


def _calibrate_parser():
    parser = argparse.ArgumentParser(prog="tvm-latmodel")
    calibrate_commands.add_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_cli_registers_calibrate():
    assert "tvm_latmodel.cli.calibrate" in cli._SUBCOMMAND_MODULES


@pytest.mark.slow
def test_cli_writes_loadable_spec(tmp_path, capsys):
    out = tmp_path / "hardware.json"
    args = _calibrate_parser().parse_args(["calibrate", "-o", str(out), "--quick"])
    assert args.func(args) == 0
    captured = capsys.readouterr()
    assert "peak GFLOP/s" in captured.out and "DRAM bandwidth GB/s" in captured.out
    assert "[calibrate]" in captured.err  # progress goes to stderr
    spec = HardwareSpec.load(str(out))
    assert spec.source == "calibrated"
    assert json.loads(out.read_text())["format"] == "tvm-latmodel-hardware"


def test_cli_refuses_cuda_target(tmp_path):
    out = tmp_path / "hardware.json"
    args = _calibrate_parser().parse_args(["calibrate", "-o", str(out), "--target", "h200"])
    with pytest.raises(ValueError, match="cannot calibrate a 'cuda' target"):
        args.func(args)
    assert not out.exists()


def test_cli_refuses_missing_output_folder(tmp_path):
    out = tmp_path / "no_such_dir" / "hardware.json"
    args = _calibrate_parser().parse_args(["calibrate", "-o", str(out), "--quick"])
    with pytest.raises(FileNotFoundError, match="no_such_dir"):
        args.func(args)


# --------------------------------------------------------- HardwareSpec.load errors
_GOOD = HardwareSpec.from_target(host_target()).to_dict()


@pytest.mark.parametrize(
    "content, message",
    [
        ("this is not json {", "not JSON"),
        (b"\xff\xfe\x00", "not JSON"),
        (json.dumps([1, 2, 3]), "not a tvm-latmodel hardware spec"),
        (json.dumps({"format": "something-else", "spec": {}}), "not a tvm-latmodel hardware spec"),
        (json.dumps({**_GOOD, "format_version": 99}), "format version 99"),
        (json.dumps({k: v for k, v in _GOOD.items() if k != "spec"}), "missing field 'spec'"),
        (json.dumps({**_GOOD, "spec": 3}), "bad hardware spec"),
        (json.dumps({**_GOOD, "spec": {**_GOOD["spec"], "kind": "tpu"}}), "bad hardware spec"),
        (json.dumps({**_GOOD, "spec": {**_GOOD["spec"], "memory": [{"name": "L1"}]}}), "bad hardware spec"),
        (json.dumps({**_GOOD, "spec": {**_GOOD["spec"], "unknown_field": 1}}), "bad hardware spec"),
        (json.dumps({**_GOOD, "spec": {**_GOOD["spec"], "libm_call_cycles": 0.0}}), "libm_call_cycles"),
        (json.dumps({**_GOOD, "spec": {**_GOOD["spec"], "libm_call_cycles": "fast"}}), "libm_call_cycles"),
    ],
)
def test_load_bad_file_names_the_file(tmp_path, content, message):
    path = tmp_path / "broken_spec.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ValueError, match=message) as info:
        HardwareSpec.load(str(path))
    assert str(path) in str(info.value)


def test_a_spec_saved_before_libm_call_cycles_loads_with_the_default(tmp_path):
    """Specs written before the field existed (calibrated files, model files) still load."""
    old = {**_GOOD, "spec": {k: v for k, v in _GOOD["spec"].items() if k != "libm_call_cycles"}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    assert HardwareSpec.load(str(path)).libm_call_cycles == 6.0


def test_load_good_file_round_trips(tmp_path):
    path = tmp_path / "good.json"
    path.write_text(json.dumps(_GOOD))
    assert HardwareSpec.load(str(path)) == HardwareSpec.from_target(host_target())


def test_kernels_compute_what_they_time():
    """The timed kernels really do the work (nothing is optimized away)."""
    import numpy as np
    import tvm

    from tvm_latmodel.hardware.calibrate import _fill_func, _fma_func, _launch_func, _stream_func

    rng = np.random.default_rng(0)
    cores, chunks, unroll, lanes, repeats, depth, rows = 2, 3, 4, 8, 5, 7, 3
    mod = tvm.IRModule({
        "stream": _stream_func(cores, chunks, unroll, lanes, repeats).with_attr("global_symbol", "stream"),
        "fma": _fma_func(cores, depth, rows, lanes, repeats).with_attr("global_symbol", "fma"),
        "launch": _launch_func(cores).with_attr("global_symbol", "launch"),
        "stream_1core": _stream_func(cores, chunks, unroll, lanes, repeats, used=1).with_attr(
            "global_symbol", "stream_1core"),
        "fill": _fill_func(cores, chunks, unroll, lanes).with_attr("global_symbol", "fill"),
    })
    rt = tvm.compile(mod, target=host_target()).jit()
    dev = tvm.cpu(0)

    a = rng.standard_normal((cores, chunks, unroll, lanes)).astype("float32")
    b = tvm.runtime.empty((cores, unroll, lanes), "float32", dev)
    rt["stream"](tvm.runtime.tensor(a, dev), b)
    np.testing.assert_allclose(b.numpy(), repeats * a.sum(axis=1), rtol=1e-5, atol=1e-5)
    # the one-core run reads the first core's block of the same array
    b1 = tvm.runtime.empty((1, unroll, lanes), "float32", dev)
    rt["stream_1core"](tvm.runtime.tensor(a, dev), b1)
    np.testing.assert_allclose(b1.numpy(), repeats * a[:1].sum(axis=1), rtol=1e-5, atol=1e-5)
    # the stream input is filled in place with ones
    filled = tvm.runtime.tensor(a, dev)
    rt["fill"](filled)
    np.testing.assert_array_equal(filled.numpy(), np.ones_like(a))

    x = rng.standard_normal((cores, depth, rows)).astype("float32")
    y = rng.standard_normal((cores, depth, 2 * lanes)).astype("float32")
    c = tvm.runtime.empty((cores, rows, 2 * lanes), "float32", dev)
    rt["fma"](tvm.runtime.tensor(x, dev), tvm.runtime.tensor(y, dev), c)
    np.testing.assert_allclose(c.numpy(), repeats * np.einsum("pki,pkj->pij", x, y), rtol=1e-4, atol=1e-4)

    z = tvm.runtime.empty((cores,), "float32", dev)
    rt["launch"](tvm.runtime.tensor(np.arange(cores, dtype="float32"), dev), z)
    np.testing.assert_allclose(z.numpy(), np.arange(cores) + 1.0)


# ------------------------------------------------------------ calibrate --rpc
def test_remote_calibration_refuses_a_gpu_target_before_using_the_session():
    from tvm_latmodel.hardware.calibrate import calibrate_remote

    with pytest.raises(ValueError, match="cannot calibrate a 'cuda' board"):
        calibrate_remote(None, "h200", quick=True, progress=False)


def test_cli_rpc_is_parsed_before_anything_slow(tmp_path):
    out = tmp_path / "hardware.json"
    args = _calibrate_parser().parse_args(["calibrate", "-o", str(out), "--rpc", "127.0.0.1:9190"])
    assert args.rpc_timeout == 60.0
    with pytest.raises(ValueError, match="missing a key"):
        args.func(args)
    assert not out.exists()


def test_cli_rpc_refuses_missing_output_folder(tmp_path):
    out = tmp_path / "no_such_dir" / "hardware.json"
    args = _calibrate_parser().parse_args(["calibrate", "-o", str(out), "--rpc", "127.0.0.1:9190:k"])
    with pytest.raises(FileNotFoundError, match="no_such_dir"):
        args.func(args)
