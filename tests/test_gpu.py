"""GPU bundles, the TVM-less timer script and the results importer (no GPU needed)."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.testing import te_workload

from tvm_latmodel.gpu import bundle as gpu_bundle
from tvm_latmodel.gpu.bundle import (
    launch_plan,
    load_bundle,
    make_bundle,
    reference_spec,
    reference_spec_for,
    save_bundle,
    structural_hash_hex,
)
from tvm_latmodel.gpu.importer import import_results, rebuild_schedule
from tvm_latmodel.targets import cuda_target
from tvm_latmodel.workloads import RECORDED_WORKLOADS, get_workload
from toys import gpu_softmax_schedule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMER = os.path.join(ROOT, "scripts", "gpu_timer.py")


def _load_timer():
    spec = importlib.util.spec_from_file_location("gpu_timer", TIMER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gt = _load_timer()




@pytest.fixture(scope="module")
def target():
    return cuda_target("h200")


@pytest.fixture(scope="module")
def bundle(target):
    """GMM:0 with 2 sampled candidates; SFM:0 with one hand-made 4-kernel schedule."""
    sampled = make_bundle(["GMM:0"], target, per_workload=2, seed=0)
    extra = make_bundle(
        ["SFM:0"], target, per_workload=0, extra_schedules={"SFM:0": [gpu_softmax_schedule(get_workload("SFM:0"))]}
    )
    sampled["workloads"] += extra["workloads"]
    return sampled


@pytest.fixture(scope="module")
def bundle_path(bundle, tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "bundle.json.gz"
    save_bundle(bundle, path)
    return str(path)


def _launch_bounds(source: str) -> dict:
    return {
        m.group(2): int(m.group(1))
        for m in re.finditer(r"__launch_bounds__\((\d+)\)\s+(\w+)\s*\(", source)
    }


# ---------------------------------------------------------------- bundles


def test_bundle_round_trips(bundle, tmp_path):
    for name in ("b.json", "b.json.gz"):
        size = save_bundle(bundle, tmp_path / name)
        assert size == os.path.getsize(tmp_path / name)
        assert load_bundle(tmp_path / name) == bundle
    assert bundle["format"] == gt.BUNDLE_FORMAT and bundle["version"] == gt.BUNDLE_VERSION
    assert bundle["tvm_version"] == tvm.__version__
    assert tvm.target.Target(bundle["target"]).kind.name == "cuda"
    gmm, sfm = bundle["workloads"]
    assert [c["origin"] for c in gmm["candidates"]] == ["sampled", "sampled"]
    assert [c["origin"] for c in sfm["candidates"]] == ["extra"]
    gt.validate_bundle(json.loads(json.dumps(bundle)))  # the timer accepts it too
    # Compressed, a candidate costs a few kB; far below the 64 MiB a device call carries.
    assert os.path.getsize(tmp_path / "b.json.gz") < 200_000


def test_every_launch_is_described(bundle):
    for wl in bundle["workloads"]:
        func = get_workload(wl["name"])["main"]
        infos = ms.arg_info.ArgInfo.from_prim_func(func)
        assert [tuple(p["shape"]) for p in wl["params"]] == [tuple(int(x) for x in a.shape) for a in infos]
        assert [p["dtype"] for p in wl["params"]] == [str(a.dtype) for a in infos]
        assert [p["role"] for p in wl["params"]][-1] == "output"
        for cand in wl["candidates"]:
            bounds = _launch_bounds(cand["source"])
            assert set(bounds) == set(cand["kernels"])
            for launch in cand["launches"]:
                kernel = launch["kernel"]
                assert gt.kernel_declared(cand["source"], kernel)
                assert len(launch["grid"]) == 3 and len(launch["block"]) == 3
                assert all(isinstance(v, int) and v >= 1 for v in launch["grid"] + launch["block"])
                assert np.prod(launch["block"]) == bounds[kernel]
                params = cand["kernels"][kernel]
                assert len(launch["args"]) == len(params)
                for arg, kparam in zip(launch["args"], params):
                    if arg["kind"] == "param":
                        assert kparam["dtype"] == wl["params"][arg["index"]]["dtype"]
                    elif arg["kind"] == "workspace":
                        assert kparam["dtype"] == cand["workspace"][arg["index"]]["dtype"]
            written = {a["index"] for l in cand["launches"] for a in l["args"] if a["kind"] == "param"}
            assert written == set(range(len(wl["params"])))  # every buffer reaches a kernel


def test_multi_kernel_plan(bundle):
    (cand,) = bundle["workloads"][1]["candidates"]
    assert [l["kernel"] for l in cand["launches"]] == [
        "main_kernel", "main_kernel_1", "main_kernel_2", "main_kernel_3"
    ]
    assert [l["grid"][0] for l in cand["launches"]] == [4, 512, 4, 512]
    assert [l["block"][0] for l in cand["launches"]] == [64, 128, 64, 128]
    assert [w["shape"] for w in cand["workspace"]] == [[256], [65536]]
    kinds = [[(a["kind"], a["index"]) for a in l["args"]] for l in cand["launches"]]
    assert kinds[0] == [("param", 0), ("workspace", 0)]
    assert kinds[-1][-1] == ("param", 1)
    assert all(("workspace", 1) in k for k in kinds[1:])


def test_source_is_what_tvm_compile_generates(bundle, target):
    wl = bundle["workloads"][0]
    cand = wl["candidates"][0]
    sch = rebuild_schedule(get_workload(wl["name"]), cand["trace"])
    assert structural_hash_hex(sch.mod) == cand["mod_hash"]
    lib = tvm.compile(sch.mod, target=target)
    assert lib.mod.imports[0].inspect_source() == cand["source"]
    assert launch_plan(sch.mod, target)["launches"] == cand["launches"]


def test_extra_schedules_hook_dedupes_and_records_lowering_errors(monkeypatch, target):
    real = gpu_bundle.candidate_entry
    calls = []

    def flaky(sch, tgt):
        calls.append(1)
        if len(calls) == 1:
            raise tvm.error.InternalError("lowering failed")
        return real(sch, tgt)

    monkeypatch.setattr(gpu_bundle, "candidate_entry", flaky)

    def pick_best(mod, tgt, sampled):
        assert sampled == [] and tgt.kind.name == "cuda"
        return [gpu_softmax_schedule(mod, 32), gpu_softmax_schedule(mod, 64), gpu_softmax_schedule(mod, 64)]

    b = make_bundle(["SFM:0"], target, per_workload=0, extra_schedules=pick_best)
    (wl,) = b["workloads"]
    assert len(calls) == 2  # the duplicate is dropped before lowering
    assert [c["index"] for c in wl["candidates"]] == [0]
    assert [l["block"][0] for l in wl["candidates"][0]["launches"]] == [64, 64, 64, 64]
    assert len(wl["lowering_errors"]) == 1 and "lowering failed" in wl["lowering_errors"][0]


def test_reference_specs_cover_recorded_workloads():
    for name in RECORDED_WORKLOADS + ["R18:1"]:
        spec = reference_spec(name)
        assert spec is not None and spec["op"] in gt.REFERENCES, name
    assert reference_spec("C2D:1")["params"]["padding"] == 0
    assert reference_spec("GRP:0")["params"]["groups"] == 4


# ------------------------------------------------------- timer references

_SMALL = [
    ("conv1d_nlc", te_workload.conv1d_nlc, (1, 9, 4, 6, 3, 2, 1, 1, 2)),
    ("conv2d_nhwc", te_workload.conv2d_nhwc, (1, 7, 6, 4, 6, 3, 2, 1, 2, 2)),
    ("conv2d_nhwc", te_workload.conv2d_nhwc, (2, 5, 5, 3, 4, 1, 1, 0)),
    ("conv3d_ndhwc", te_workload.conv3d_ndhwc, (1, 4, 5, 5, 2, 3, 3, 1, 1)),
    ("depthwise_conv2d_nhwc", te_workload.depthwise_conv2d_nhwc, (1, 6, 6, 3, 3, 2, 1)),
    ("conv2d_transpose_nhwc", te_workload.conv2d_transpose_nhwc, (1, 3, 4, 3, 2, 4, 2, 1)),
    ("conv2d_capsule_nhwijc", te_workload.conv2d_capsule_nhwijc, (1, 5, 5, 2, 3, 3, 2, 1, 2)),
    ("norm_bmn", te_workload.norm_bmn, (2, 3, 4)),
    ("softmax", te_workload.softmax_mn, (3, 5)),
    ("conv2d_nhwc_bn_relu", te_workload.conv2d_nhwc_bn_relu, (1, 5, 5, 3, 4, 3, 1, 1)),
    ("batch_matmul", te_workload.batch_matmul_nkkm, (2, 3, 5, 4)),
    ("transpose_batch_matmul", te_workload.transpose_batch_matmul, (1, 4, 2, 3)),
]


@pytest.mark.parametrize("op,fn,args", _SMALL, ids=[f"{o}-{i}" for i, (o, _, _) in enumerate(_SMALL)])
def test_reference_matches_tvm_on_cpu(op, fn, args):
    """Each reference (numpy backend) agrees with TVM's own build of the workload."""
    func = te.create_prim_func(fn(*args)).with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func})
    params = gpu_bundle.param_specs(func)
    rng = np.random.default_rng(0)
    arrays = [
        rng.uniform(-1, 1, p["shape"]).astype(p["dtype"]) if p["role"] == "input" else np.zeros(p["shape"], p["dtype"])
        for p in params
    ]
    lib = tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"}))
    dev = tvm.cpu()
    tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
    lib["main"](*tensors)
    spec = reference_spec_for(op, fn, args)
    inputs = [a.astype("float64") for a, p in zip(arrays, params) if p["role"] == "input"]
    expected = gt.reference_outputs(gt.NumpyOps(), spec, inputs)
    outs = [t.numpy() for t, p in zip(tensors, params) if p["role"] == "output"]
    assert len(expected) == len(outs)
    for got, want in zip(outs, expected):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------ timer pure helpers


def test_timer_plans_launches(bundle):
    cand = bundle["workloads"][1]["candidates"][0]
    plans = gt.plan_launches(cand)
    assert [p["kernel"] for p in plans] == [l["kernel"] for l in cand["launches"]]
    assert plans[0]["grid"] == (4, 1, 1) and plans[0]["block"] == (64, 1, 1)
    assert plans[0]["args"] == [("param", 0), ("workspace", 0)]
    assert plans[0]["shared_mem"] == 0

    bad = copy.deepcopy(cand)
    bad["launches"][0]["flags"] = ["tirx.use_cooperative_launch"]
    with pytest.raises(gt.CandidateError, match="unsupported launch flags"):
        gt.plan_launches(bad)
    bad = copy.deepcopy(cand)
    bad["launches"][0]["block"] = [64, 32, 1]
    with pytest.raises(gt.CandidateError, match="2048 threads"):
        gt.plan_launches(bad)
    bad = copy.deepcopy(cand)
    bad["launches"][0]["kernel"] = "no_such_kernel"
    with pytest.raises(gt.CandidateError, match="not declared"):
        gt.plan_launches(bad)


def test_timer_helpers():
    assert gt.choose_number(1e-6, 1.0) == 1000
    assert gt.choose_number(5e-3, 1.0) == 1
    assert gt.choose_number(0.0, 1.0) == 100000
    s = gt.summarize_times([3.0, 1.0, 2.0])
    assert s == {"median_s": 2.0, "min_s": 1.0, "mean_s": 2.0, "max_s": 3.0}
    rec = gt.failure_record(7, "compile_error", "ptxas error: too much shared data", origin="sampled")
    assert rec == {
        "index": 7,
        "status": "compile_error",
        "error": "ptxas error: too much shared data",
        "times_s": [],
        "origin": "sampled",
    }
    assert gt.check_passed(1e-4, 10.0, 1e-3, 1e-3)
    assert not gt.check_passed(0.5, 10.0, 1e-3, 1e-3)
    assert not gt.check_passed(float("nan"), 10.0, 1e-3, 1e-3)
    src = gt.prepare_source('#include <cuda.h>\nextern "C" __global__ void k(float* x) {}\n')
    assert "#include <cuda.h>" not in src and src.startswith(gt.NVRTC_PREAMBLE)
    assert gt.kernel_declared(src, "k") and not gt.kernel_declared(src, "kk")


def test_timer_validation_names_the_problem(bundle):
    good = json.loads(json.dumps(bundle))
    gt.validate_bundle(good)
    cases = [
        (lambda b: b.update(version=99), "version 99"),
        (lambda b: b.update(format="other"), "not a GPU bundle"),
        (lambda b: b.pop("workloads"), "missing key 'workloads'"),
        (lambda b: b["workloads"][0]["candidates"][0].pop("source"), "candidates\\[0\\]: missing key 'source'"),
        (lambda b: b["workloads"][1]["candidates"][0]["launches"][0].update(grid=[0, 1, 1]), "grid"),
        (lambda b: b["workloads"][1]["candidates"][0]["launches"][0]["args"][1].update(index=9), "workspace index"),
    ]
    for mutate, pattern in cases:
        b = copy.deepcopy(good)
        mutate(b)
        with pytest.raises(gt.BundleError, match=pattern):
            gt.validate_bundle(b, "x.json")


# ---------------------------------------------------- timer as a program


def _run_timer(*args):
    return subprocess.run([sys.executable, TIMER, *args], capture_output=True, text=True, timeout=120)


def test_timer_rejects_malformed_bundles(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "tvm-latmodel-gpu-bundle",\n "version": 1,,}\n')
    res = _run_timer(str(bad), "-o", str(tmp_path / "r.json"))
    assert res.returncode == gt.EXIT_BAD_INPUT
    assert "bad.json: line 2" in res.stderr
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": "tvm-latmodel-gpu-bundle", "version": 0, "workloads": []}))
    res = _run_timer(str(old), "-o", str(tmp_path / "r.json"))
    assert res.returncode == gt.EXIT_BAD_INPUT and "version 0" in res.stderr
    res = _run_timer(str(tmp_path / "missing.json"), "-o", str(tmp_path / "r.json"))
    assert res.returncode == gt.EXIT_BAD_INPUT and "no such file" in res.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_timer_without_cupy_exits_clearly(bundle_path, tmp_path):
    res = _run_timer(bundle_path, "-o", str(tmp_path / "r.json"))
    assert res.returncode == gt.EXIT_NO_GPU
    assert "cannot run on a GPU here" in res.stderr and "CuPy" in res.stderr
    assert "2 workloads, 3 candidates" in res.stderr


# --------------------------------------------------------------- import


def _fake_results(bundle, path, sha):
    gmm, sfm = bundle["workloads"]
    res = {
        "format": gt.RESULTS_FORMAT,
        "version": gt.RESULTS_VERSION,
        "bundle_sha256": sha,
        "workloads": [
            {
                "name": gmm["name"],
                "candidates": [
                    {"index": 0, "status": "ok", "times_s": [2e-5, 3e-5, 2.5e-5], "median_s": 2.5e-5},
                    gt.failure_record(1, "compile_error", "ptxas error"),
                ],
            },
            {"name": sfm["name"], "candidates": [gt.failure_record(0, "skipped", "time budget")]},
        ],
    }
    with open(path, "w") as fh:
        json.dump(res, fh)


def test_import_writes_databases_json_database_reads(bundle, bundle_path, tmp_path):
    results = tmp_path / "results.json"
    _fake_results(bundle, results, gt.file_sha256(bundle_path))
    summary = import_results(bundle_path, results, tmp_path / "db")
    assert summary.records == {"GMM:0": 1, "SFM:0": 0}
    assert summary.failed == {"GMM:0": {"compile_error": 1}, "SFM:0": {}}
    assert summary.skipped == {"GMM:0": 0, "SFM:0": 1}

    work_dir = summary.work_dirs["GMM:0"]
    assert os.path.basename(work_dir) == "GMM_0"
    assert os.path.exists(os.path.join(work_dir, "database_workload.json"))
    db = ms.database.JSONDatabase(work_dir=work_dir)
    (rec,) = db.get_all_tuning_records()
    assert [float(x) for x in rec.run_secs] == pytest.approx([2e-5, 3e-5, 2.5e-5])
    assert rec.target.kind.name == "cuda"
    mod = get_workload("GMM:0")
    sch = tvm.s_tir.Schedule(mod)
    rec.trace.apply_to_schedule(sch, remove_postproc=False)
    assert structural_hash_hex(sch.mod) == bundle["workloads"][0]["candidates"][0]["mod_hash"]
    assert db.has_workload(mod)

    summary = import_results(bundle_path, results, tmp_path / "db_max", failed="max")
    db = ms.database.JSONDatabase(work_dir=summary.work_dirs["GMM:0"])
    secs = sorted(float(r.run_secs[0]) for r in db.get_all_tuning_records())
    assert secs == pytest.approx([2e-5, 1e10])


def test_import_rejects_foreign_results(bundle_path, tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="not GPU timer results"):
        import_results(bundle_path, bad, tmp_path / "db")
    bad.write_text(json.dumps({"format": gt.RESULTS_FORMAT, "version": 1,
                               "workloads": [{"name": "C2D:1", "candidates": []}]}))
    with pytest.raises(ValueError, match="not in bundle"):
        import_results(bundle_path, bad, tmp_path / "db")


def test_cli_parsers_are_registered():
    from tvm_latmodel.cli.main import build_parser

    parser = build_parser()
    args = parser.parse_args(["gpu-bundle", "--workloads", "GMM:0", "-o", "b.json.gz"])
    assert args.target == "h200" and args.per_workload == 60 and callable(args.func)
    assert args.max_shared_memory_bytes == 49152
    args = parser.parse_args(["gpu-import", "b.json.gz", "r.json", "-o", "db"])
    assert args.failed == "skip" and callable(args.func)


def test_bundle_target_caps_static_shared_memory():
    import tvm

    from tvm_latmodel.cli.gpu import cap_shared_memory

    # a user's JSON target with the H200's dynamic limit (227 KiB)
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90", "max_shared_memory_per_block": 232448})
    capped = cap_shared_memory(target, 49152)
    assert int(capped.attrs["max_shared_memory_per_block"]) == 49152
    assert capped.kind.name == "cuda" and str(capped.attrs["arch"]) == "sm_90"
    assert cap_shared_memory(target, 0) is target


def test_model_picks_are_the_analytical_best_of_their_pool(target):
    from tvm_latmodel.cli.gpu import model_picks
    from tvm_latmodel.hardware import HardwareSpec
    from tvm_latmodel.model.modes import estimate
    from tvm_latmodel.model.program import summarize
    from tvm_latmodel.sampling import sample_schedules
    from tvm_latmodel.workloads import get_workload

    mod = get_workload("GMM:0")
    picks = model_picks(2, seed=0)(mod, target, [])
    assert len(picks) == 2
    hw = HardwareSpec.from_target(target)
    pool = sample_schedules(mod, target, 8, seed=7919)  # the same draws the hook made
    est = sorted(estimate(summarize(s.mod, "gpu"), hw).latency_s for s in pool)
    got = [estimate(summarize(s.mod, "gpu"), hw).latency_s for s in picks]
    assert got == pytest.approx(est[:2])
