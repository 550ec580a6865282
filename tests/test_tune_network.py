"""``tune-network``: the gain scheduler's choice, plan application, the cost-model guard, end to end.

Kept small for a loaded 2-core machine: the scheduler is checked on hand-made
numbers and inside a real MetaSchedule loop with a dummy builder and runner
(no compilation); one end-to-end run tunes a 6-kernel toy network (two
encoders, concat fusion, a linear head) for 2 trials in one builder round.
"""

from __future__ import annotations

import io
import json
import math
import os
import warnings

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.relax.frontend import nn
from tvm.s_tir import meta_schedule as ms

import tvm_latmodel.fusion as fusion_module
import tvm_latmodel.networks as networks_module
from tvm_latmodel.cli.main import main
from tvm_latmodel.cli.tune_network import SUMMARY_LABELS, print_summary
from tvm_latmodel.fusion import FusionFallbackWarning
from tvm_latmodel.networks import build_and_run, make_network
from tvm_latmodel.networks.inputs import InputSpec
from tvm_latmodel.networks.tune import GuardedCostModel, NetworkTuneResult, distinct_workloads, prepare_network
from tvm_latmodel.scheduler import GainScheduler, make_scheduler, pick_task, remaining_gain, warmup_order
from tvm_latmodel.targets import host_target
from toys import ToyEncoder, ToyFusion, ToyHead, square_matmul


# --- a toy network: 6 kernels, 4 workloads, all three stages ---------------------------


class ToyNet(nn.Module):
    """Two conv encoders (same workload: one task of weight 2), concat fusion, a linear head."""

    def __init__(self):
        self.left, self.right = ToyEncoder(), ToyEncoder()
        self.fusion, self.head = ToyFusion(), ToyHead()
        self.inputs = [InputSpec("a", (1, 1, 8, 8)), InputSpec("b", (1, 1, 8, 8))]

    def forward(self, a, b):
        return self.head(self.fusion(self.left(a), self.right(b)))


@pytest.fixture
def toy_registered(monkeypatch):
    monkeypatch.setitem(networks_module.NETWORKS, "toy", ToyNet)
    return "toy"


# --- the choice function, on hand-made numbers -------------------------------------------


US = 1e-6


def test_trials_go_to_the_largest_weight_times_gap():
    # gaps 80, 30, 5 us; weights 1, 4, 2 -> weighted 80, 120, 10: task 1, not the largest gap
    weights = [1, 4, 2]
    best = [100 * US, 50 * US, 50 * US]
    lower = [20 * US, 20 * US, 45 * US]
    roofline = [1 * US] * 3
    assert pick_task(weights, best, lower, roofline, [True] * 3) == 1
    assert remaining_gain(4, 50 * US, 20 * US, 1 * US)[0] == pytest.approx(120 * US)
    # the same numbers with weights 1: the largest gap wins
    assert pick_task([1, 1, 1], best, lower, roofline, [True] * 3) == 0
    # finished tasks are skipped; nothing alive ends tuning
    assert pick_task(weights, best, lower, roofline, [True, False, True]) == 0
    assert pick_task(weights, best, lower, roofline, [False] * 3) == -1


def test_a_task_that_beat_its_prediction_falls_back_to_the_roofline_gap():
    # both measured below their predicted bound: gain 0, ties broken by weight x (best - roofline)
    gain, tie = remaining_gain(2, 3 * US, 4 * US, 1 * US)
    assert gain == 0.0 and tie == pytest.approx(4 * US)
    assert pick_task([2, 1], [3 * US, 9 * US], [4 * US, 10 * US], [1 * US, 1 * US], [True, True]) == 1
    # no prediction: the roofline bound is the lower bound
    assert remaining_gain(1, 10 * US, None, 2 * US) == pytest.approx((8 * US, 8 * US))
    # a task with no valid measurement comes last
    assert remaining_gain(5, None, 1 * US, 1 * US) == (-math.inf, -math.inf)
    assert pick_task([5, 1], [None, 2 * US], [1 * US, 1 * US], [1 * US, 1 * US], [True, True]) == 1


def test_warm_up_goes_largest_expected_cost_first():
    assert warmup_order([1, 4, 1, 2], [5 * US, 2 * US, 1 * US, None]) == [1, 0, 2, 3]


def test_make_scheduler_names():
    assert isinstance(make_scheduler("gradient"), ms.task_scheduler.GradientBased)
    assert isinstance(make_scheduler("round-robin"), ms.task_scheduler.RoundRobin)
    with pytest.raises(ValueError, match="known: gain, gradient, round-robin"):
        make_scheduler("fastest")


# --- the scheduler inside MetaSchedule's loop (dummy builder and runner) -----------------




#: matrix size -> (measured latency, predicted lower bound, weight)
_FAKE = {8: (10 * US, 2 * US, 1.0), 16: (30 * US, 25 * US, 4.0), 24: (50 * US, 10 * US, 1.0)}


@derived_object
class _ShapeBuilder(ms.builder.PyBuilder):
    """Builds nothing: the artifact path names the matrix size."""

    def build(self, build_inputs):
        out = []
        for build_input in build_inputs:
            size = int(ms.arg_info.ArgInfo.from_prim_func(build_input.mod["main"])[0].shape[0])
            out.append(ms.builder.BuilderResult(str(size), None))
        return out


@derived_object
class _ShapeRunner(ms.runner.PyRunner):
    """Returns the fake latency of the matrix size at once."""

    def run(self, runner_inputs):
        out = []
        for runner_input in runner_inputs:
            latency = _FAKE[int(runner_input.artifact_path)][0]
            result = ms.runner.RunnerResult([latency], None)
            out.append(ms.runner.RunnerFuture(f_done=lambda: True, f_result=lambda r=result: r))
        return out


def test_gain_scheduler_in_a_metaschedule_loop(tmp_path):
    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    sizes = [8, 16, 24]
    contexts = [ms.TuneContext(square_matmul(n), target=target, space_generator="post-order-apply",
                               search_strategy=ms.search_strategy.ReplayTrace(), task_name=f"mm{n}",
                               rand_state=1, num_threads=1).clone() for n in sizes]
    by_name = {f"mm{n}": n for n in sizes}

    def bounds(name, _mod, _target):
        return _FAKE[by_name[name]][1], 1 * US

    lines = []
    scheduler = GainScheduler(bound_fn=bounds, max_trials_per_task=2, progress=lines.append)
    ms.tune_tasks(tasks=contexts, task_weights=[_FAKE[n][2] for n in sizes], work_dir=str(tmp_path),
                  max_trials_global=7, max_trials_per_task=2, num_trials_per_iter=1,
                  builder=_ShapeBuilder(), runner=_ShapeRunner(), database=ms.database.MemoryDatabase(),
                  cost_model=ms.cost_model.RandomModel(), measure_callbacks=[], task_scheduler=scheduler)
    picks = [i for i, _ in scheduler.history_]
    reasons = [why for _, why in scheduler.history_]
    # warm-up by weight x lower bound: mm16 (4 x 25), mm24 (10), mm8 (2); then by weight x gap:
    # mm24 1 x 40 us, mm16 4 x 5 = 20 us, mm8 1 x 8 us -> mm24 until its 2 trials are spent, then mm16
    assert reasons[:3] == ["warm-up"] * 3
    assert picks[:3] == [1, 2, 0]
    assert picks[3] == 2
    assert 2 not in picks[4:] and picks[4] == 1
    assert scheduler.best_s_[2] == pytest.approx(50 * US)
    assert any("predicted gain 40.0 us" in line for line in lines)


# --- the cost-model guard ---------------------------------------------------------------


class _Broken:
    def predict(self, context, candidates):
        raise RuntimeError("no prediction today")

    def update(self, context, candidates, results):
        raise RuntimeError("no learning today")


def test_a_failing_cost_model_degrades_to_random_scores():
    from tvm_latmodel.sampling import make_context, sample_schedules

    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    mod = square_matmul(8)
    context = make_context(mod, target)
    candidates = [ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(s.mod["main"]))
                  for s in sample_schedules(mod, target, 3, context=context)]
    messages = []
    guarded = GuardedCostModel(_Broken(), seed=3, warn=messages.append)
    scores = guarded.predict(context, candidates)  # through MetaSchedule's C++ entry point
    assert scores.shape == (3,) and np.all((scores >= 0) & (scores <= 1))
    guarded.predict(context, candidates[:2])
    results = [ms.runner.RunnerResult([1e-6], None) for _ in candidates]
    guarded.update(context, candidates, results)
    assert guarded.failures_ == {"predict": 2, "update": 1}
    assert len(messages) == 2 and "scoring candidates at random" in messages[0]


# --- plan application -------------------------------------------------------------------


def _toy():
    return make_network("toy", ToyNet(), {})


def test_predicted_plan_fuses_concat_linear_and_keeps_stages_and_numbers():
    target = host_target()
    network = _toy()
    prepared = prepare_network(network, plan="predicted", target=target, samples=1,
                               decisions={"concat_linear0:lv2..gv": "fuse"})
    assert prepared.fused_groups == ["concat_linear0:lv2..gv"]
    assert len(prepared.default.kernels) == 6 and len(prepared.chosen.kernels) == 5
    fused = prepared.chosen.kernels[-1]
    members = prepared.default.kernels[-2:]  # concat (its reshapes fused in: encoder, fusion), linear
    assert fused.stage == "head"
    assert set(fused.stages) == {s for k in members for s in k.stages} >= {"fusion", "head"}
    stages = {t.stage for t in prepared.tasks}
    assert stages == {"encoder", "head"}
    assert sum(t.weight for t in prepared.tasks) == 5
    workloads = distinct_workloads(prepared.tasks)
    assert sorted(w.weight for w in workloads) == [1, 2, 2]
    inputs = network.make_inputs(seed=0)
    reference, _ = build_and_run(prepared.default, inputs=inputs, repeat=0)
    output, _ = build_and_run(prepared.chosen, inputs=inputs, repeat=0)
    np.testing.assert_allclose(output, reference, rtol=1e-5, atol=1e-5)


def test_a_fused_group_that_fails_to_build_falls_back_with_a_warning(monkeypatch):
    def broken(mod, target):
        raise RuntimeError("LLVM says no")

    monkeypatch.setattr(fusion_module, "build_check", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FusionFallbackWarning)
        prepared = prepare_network(_toy(), plan="predicted", samples=1,
                                   decisions={"concat_linear0:lv2..gv": "fuse"})
    assert prepared.fused_groups == [] and prepared.chosen is prepared.default
    messages = [str(w.message) for w in caught if issubclass(w.category, FusionFallbackWarning)]
    assert any("concat_linear0:lv2..gv fell back to its split form" in m and "LLVM says no" in m
               for m in messages)


def test_unknown_group_in_decisions_is_a_clear_error():
    with pytest.raises(ValueError, match="no pattern group named"):
        prepare_network(_toy(), plan="predicted", samples=1, decisions={"nothing": "fuse"})


# --- the command ------------------------------------------------------------------------


def test_unknown_network_exits_2_listing_known(capsys):
    assert main(["tune-network", "lenet", "--trials", "4"]) == 2
    err = capsys.readouterr().err
    assert "unknown network 'lenet'" in err and "avmnist" in err and "resnet18" in err


def test_trials_below_one_exits_2(capsys):
    assert main(["tune-network", "avmnist", "--trials", "0"]) == 2
    assert "--trials must be >= 1" in capsys.readouterr().err


def test_a_plan_that_fails_exits_2_with_a_message(toy_registered, monkeypatch, tmp_path, capsys):
    def broken(self, network):
        raise RuntimeError("the planner fell over")

    monkeypatch.setattr(fusion_module.FusionPlanner, "plan", broken)
    code = main(["tune-network", toy_registered, "--trials", "2", "--plan", "predicted",
                 "--work-dir", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "the fusion planner failed on toy: RuntimeError: the planner fell over" in err


JSON_FIELDS = {
    "network": str, "plan": str, "cost_model": str, "scheduler": str, "trials": int,
    "tuning_seconds": float, "latency_us": float, "untuned_latency_us": float, "stages": dict,
    "kernels": int, "database": str, "max_abs_error": float,
}


def test_tune_network_end_to_end_json(toy_registered, tmp_path, capsys):
    work_dir = str(tmp_path / "db")
    code = main(["tune-network", toy_registered, "--trials", "2", "--trials-per-iter", "2", "--samples", "1",
                 "--repeat", "3", "--population", "32", "--work-dir", work_dir, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err[-3000:]
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out  # exactly one JSON object on stdout
    result = json.loads(lines[0])
    for name, kind in JSON_FIELDS.items():
        assert isinstance(result[name], kind), (name, result[name])
    assert (result["network"], result["plan"], result["cost_model"], result["scheduler"]) == \
        ("toy", "default", "hybrid", "gain")
    assert result["trials"] == 2 and result["trials_measured"] >= 1
    assert result["kernels"] == 6
    assert result["latency_us"] > 0 and result["untuned_latency_us"] > 0 and result["tuning_seconds"] > 0
    assert set(result["stages"]) == {"encoder", "fusion", "head"}
    assert all(us > 0 for us in result["stages"].values())
    assert result["output_matches"] is True and result["max_abs_error"] < 1e-3
    # stage latency = sum over tasks of calls x the latency of what runs
    by_stage = {}
    for task in result["tasks"]:
        for stage, calls in task["calls"].items():
            by_stage[stage] = by_stage.get(stage, 0.0) + calls * task["latency_us"]
    assert by_stage == pytest.approx(result["stages"])
    # the tuned build's kernels were found in the database under the keys tuning wrote
    assert result["database_hits"] >= 1
    assert os.path.samefile(result["database"], work_dir)
    assert os.path.getsize(os.path.join(work_dir, "database_tuning_record.json")) > 0
    # per workload the faster of its best schedule and the untuned loop nest runs (timed here, alike)
    assert any(t["tuned_us"] is not None for t in result["tasks"])
    # and a workload without a record gets the model's best predicted correct pick, timed the same way
    for task in result["tasks"]:
        if task["source"] == "tuned":
            assert task["latency_us"] == task["tuned_us"] and task["tuned_retimed_us"] <= task["untuned_us"]
            assert task["picked_us"] is None
        elif task["source"] == "predicted":
            assert task["tuned_us"] is None and task["latency_us"] == task["picked_us"] <= task["untuned_us"]
        else:
            assert task["source"] == "untuned" and task["latency_us"] == task["untuned_us"] > 0
            assert task["tuned_retimed_us"] is None or task["untuned_us"] < task["tuned_retimed_us"]
            assert task["picked_us"] is None or task["untuned_us"] < task["picked_us"]
        if task["source"] != "view" and task["tuned_us"] is None:  # 2 trials leave tasks unmeasured: each was offered a pick
            assert task["picked_us"] > 0 and task["pick_rank"] == task["wrong_picks"] == 0
    assert set(result["stages_retimed"]) == set(result["stages"])
    assert "[scheduler] task #" in err and "warm-up" in err
    # the human summary: short, every line labelled
    text = io.StringIO()
    print_summary(NetworkTuneResult(**result), file=text)
    summary = text.getvalue().splitlines()
    assert len(summary) == len(SUMMARY_LABELS)
    assert all(line.startswith(label) for line, label in zip(summary, SUMMARY_LABELS))


# --- a tuned schedule that computes something else never runs -------------------------------


def test_check_kernel_catches_a_read_of_memory_the_kernel_never_wrote():
    """A kernel that reads an unwritten border of its intermediate can match by chance (the
    memory held zeros); with the intermediate poisoned it fails every time, and the correct
    kernel passes."""
    from toys import padded_sum

    import tvm_latmodel.networks.kernels as kernels

    target = host_target()
    _, reference = kernels.run_kernel(padded_sum(True), target, number=1, min_repeat_ms=0)
    assert kernels.check_kernel(padded_sum(True), target, reference) == (True, 0.0)
    for _ in range(3):
        ok, error = kernels.check_kernel(padded_sum(False), target, reference)
        assert not ok and error == math.inf  # the NaN poison reached B's ends
    exposed, count = kernels.expose_intermediates(padded_sum(False))
    assert count == 2 and [p.name for p in exposed["main"].params] == ["A", "B", "P"]


def _normalise_by_sum():
    """``C[i] = A[i] / sum(A)`` on 8 floats, and the schedule that computes the sum per ``i``."""
    from tvm import te

    a = te.placeholder((8,), name="A")
    k = te.reduce_axis((0, 8), name="k")
    total = te.compute((1,), lambda _: te.sum(a[k], axis=k), name="S")
    c = te.compute((8,), lambda i: a[i] / total[0], name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([a, c]).with_attr("global_symbol", "main")})
    sch = tvm.s_tir.Schedule(mod)
    (i,) = sch.get_loops(sch.get_sblock("C"))
    sch.compute_at(sch.get_sblock("S"), i)  # the whole sum again for every i: redundant, still right
    return mod, sch, i


def test_a_reduction_init_hoisted_above_a_loop_that_repeats_it_is_found_and_is_wrong():
    """TVM 0.27: decompose_reduction accepts a loop above one that repeats the reduction and
    hoists the init out of it, so the sum grows with every repeat (the Zen 4 wrong attention
    schedules: their softmax sums). repeated_reductions finds it; check_kernel catches it."""
    import tvm_latmodel.networks.kernels as kernels

    target = host_target()
    mod, sch, i = _normalise_by_sum()
    _, reference = kernels.run_kernel(mod, target, number=1, min_repeat_ms=0)
    assert kernels.check_kernel(sch.mod, target, reference) == (True, 0.0)
    assert kernels.repeated_reductions(sch.mod["main"]) == []  # T.init still inside the repeat
    sch.decompose_reduction(sch.get_sblock("S"), i)
    assert kernels.repeated_reductions(sch.mod["main"]) == [("S", "i", 8)]
    ok, error = kernels.check_kernel(sch.mod, target, reference)
    assert not ok and error > 0.01
    _, (a, c) = kernels.run_kernel(sch.mod, target, number=1, min_repeat_ms=0)
    # C[i] = A[i] / ((i + 1) * sum(A)): the i-th repeat has added the sum i + 1 times
    np.testing.assert_allclose(c, a / (np.arange(1, 9) * a.sum()), rtol=1e-5)
    # decomposed where it belongs, under the repeat, it is right and not flagged
    _, right, i = _normalise_by_sum()
    right.decompose_reduction(right.get_sblock("S"), right.get_loops(right.get_sblock("S"))[1])
    assert kernels.repeated_reductions(right.mod["main"]) == []
    assert kernels.check_kernel(right.mod, target, reference)[0]


def _memory_database(workloads, seconds):
    """A real MemoryDatabase holding, per workload, one record per entry of ``seconds``, each the
    workload's untuned loop nest (a trace of one lookup: MetaSchedule ignores empty traces)."""
    database = ms.database.MemoryDatabase()
    target = host_target()
    for workload in workloads:
        entry = database.commit_workload(workload.mod)
        sch = tvm.s_tir.Schedule(workload.mod)
        sch.get_sblock("root")
        for s in seconds:
            database.commit_tuning_record(ms.database.TuningRecord(
                sch.trace, entry, [s], target,
                ms.arg_info.ArgInfo.from_prim_func(workload.mod["main"])))
    return database


def test_a_wrong_fastest_record_is_skipped_for_the_next_correct_one(monkeypatch):
    """choose_kernels checks records fastest first: one that computes something else is skipped
    with a warning, and the next correct one is what runs (if it beats the loop nest) and is
    what chosen_database applies."""
    import tvm_latmodel.networks.kernels as kernels

    target = host_target()
    network = make_network("toy", ToyNet(), {})
    workloads = [w for w in distinct_workloads(prepare_network(network, plan="default", target=target).tasks)
                 if not w.reshape_only]
    database = _memory_database(workloads, [3e-9, 1e-9, 2e-9])  # fastest: 1e-9, then 2e-9, then 3e-9
    real, checked = kernels.check_kernel, []

    def fastest_of_first_is_wrong(mod, target, reference):
        checked.append(mod)
        if len(checked) == 1:  # the first workload's fastest record
            return False, 5.0
        return real(mod, target, reference)

    monkeypatch.setattr(kernels, "check_kernel", fastest_of_first_is_wrong)
    with pytest.warns(UserWarning, match="fastest record computes something else"):
        choices = kernels.choose_kernels(workloads, database, target)
    first, rest = choices[0], choices[1:]
    assert (first.record_rank, first.wrong_records, first.mismatch_error) == (1, 1, 5.0)
    assert first.tuned_us == pytest.approx(2e-3) and first.tuned_retimed_us > 0
    assert first.source == ("tuned" if first.tuned_retimed_us <= first.untuned_us else "untuned")
    # the others' fastest records compute what their loop nests do: no false alarm, one check each
    assert rest and all((c.record_rank, c.wrong_records, c.mismatch_error) == (0, 0, None) for c in rest)
    assert len(checked) == len(workloads) + 1
    # chosen_database holds exactly the chosen record of each workload that runs tuned
    first.source = "tuned"
    for choice in rest:
        choice.source = "untuned"
    chosen = kernels.chosen_database(workloads, choices, database)
    assert len(chosen) == 1
    record = chosen.query_tuning_record(workloads[0].mod, target, workloads[0].name)
    assert [float(s) for s in record.run_secs] == [2e-9]
    assert all(not chosen.has_workload(w.mod) for w in workloads[1:])


def test_without_a_correct_record_the_untuned_loop_nest_runs(monkeypatch):
    import tvm_latmodel.networks.kernels as kernels

    target = host_target()
    network = make_network("toy", ToyNet(), {})
    workloads = [w for w in distinct_workloads(prepare_network(network, plan="default", target=target).tasks)
                 if not w.reshape_only][:1]
    database = _memory_database(workloads, [1e-9, 2e-9])
    monkeypatch.setattr(kernels, "check_kernel", lambda mod, target, reference: (False, math.inf))
    with pytest.warns(UserWarning, match="computes something else"):
        (choice,) = kernels.choose_kernels(workloads, database, target)
    assert (choice.source, choice.record_rank, choice.wrong_records) == ("untuned", None, 2)
    assert choice.latency_us == choice.untuned_us > 0 and choice.tuned_us is None
    assert len(kernels.chosen_database(workloads, [choice], database)) == 0


def test_a_record_that_cannot_be_checked_is_skipped_never_run(monkeypatch):
    """A record whose check raises (it no longer builds, say) counts as wrong: the next record is
    checked, and the failure is reported, not raised."""
    import tvm_latmodel.networks.kernels as kernels

    target = host_target()
    network = make_network("toy", ToyNet(), {})
    workloads = [w for w in distinct_workloads(prepare_network(network, plan="default", target=target).tasks)
                 if not w.reshape_only][:1]
    database = _memory_database(workloads, [1e-9, 2e-9])
    real, said = kernels.check_kernel, []

    def first_cannot_be_checked(mod, target, reference):
        if not said:
            said.append(None)
            raise RuntimeError("deliberately unbuildable record")
        return real(mod, target, reference)

    monkeypatch.setattr(kernels, "check_kernel", first_cannot_be_checked)
    lines = []
    with pytest.warns(UserWarning, match="fastest record computes something else"):
        (choice,) = kernels.choose_kernels(workloads, database, target, progress=lines.append)
    assert (choice.record_rank, choice.wrong_records) == (1, 1) and math.isnan(choice.mismatch_error)
    assert choice.tuned_us == pytest.approx(2e-3)
    assert any("could not check" in line and "deliberately unbuildable record" in line for line in lines)


# --- a workload tuning never reached runs the model's pick, not the naive loop nest -----------


@derived_object
class _ScoresByOrder(ms.cost_model.PyCostModel):
    """Scores the i-th candidate i: the last sampled is predicted fastest."""

    def load(self, path):
        pass

    def save(self, path):
        pass

    def update(self, context, candidates, results):
        pass

    def predict(self, context, candidates):
        return np.arange(len(candidates), dtype="float64")


def test_predicted_schedules_come_best_predicted_first():
    import tvm_latmodel.networks.kernels as kernels
    from tvm_latmodel.sampling import make_context, sample_schedules

    target, mod = host_target(), square_matmul(16)
    sampled = sample_schedules(mod, target, 6, seed=3, context=make_context(mod, target, 4))
    picked = kernels.predicted_schedules(mod, target, _ScoresByOrder(), samples=6, seed=3)
    assert len(picked) == len(sampled) == 6
    assert all(tvm_ffi.structural_equal(p.mod, s.mod) for p, s in zip(picked, reversed(sampled)))
    assert not tvm_ffi.structural_equal(picked[0].mod, picked[-1].mod)  # the order is not vacuous


def test_without_a_record_the_first_correct_pick_runs_and_is_applied(monkeypatch):
    """No record: pick(workload) is checked best predicted first, a wrong pick is skipped, the
    next is timed against the loop nest, and chosen_database applies it with that time."""
    import tvm_latmodel.networks.kernels as kernels
    from tvm_latmodel.sampling import sample_schedules

    target = host_target()
    workload = kernels.Workload("mm", square_matmul(32), 1, False, [])
    schedules = sample_schedules(workload.mod, target, 3, seed=0)
    real, checked = kernels.check_kernel, []

    def first_pick_is_wrong(mod, target, reference):
        checked.append(mod)
        return (False, 7.0) if len(checked) == 1 else real(mod, target, reference)

    monkeypatch.setattr(kernels, "check_kernel", first_pick_is_wrong)
    lines = []
    (choice,) = kernels.choose_kernels([workload], ms.database.MemoryDatabase(), target,
                                       pick=lambda w: schedules, progress=lines.append)
    assert (choice.pick_rank, choice.wrong_picks, choice.record_rank, choice.tuned_us) == (1, 1, None, None)
    assert len(checked) == 2 and choice.picked_us > 0 and choice.untuned_us > 0
    assert choice.source == ("predicted" if choice.picked_us <= choice.untuned_us else "untuned")
    assert any("pick 0 computes something else" in line for line in lines)
    assert "picked_trace" not in choice.to_json() and json.dumps(choice.to_json())
    choice.source = "predicted"  # whatever the timing said: what the database then applies
    chosen = kernels.chosen_database([workload], [choice], ms.database.MemoryDatabase(), target)
    record = chosen.query_tuning_record(workload.mod, target, "mm")
    assert [float(s) for s in record.run_secs] == [pytest.approx(choice.picked_us * 1e-6)]
    applied = chosen.query_schedule(workload.mod, target, "mm")
    assert tvm_ffi.structural_equal(applied.mod, schedules[1].mod)


def test_a_pick_that_fails_leaves_the_loop_nest_running():
    import tvm_latmodel.networks.kernels as kernels

    def broken(_workload):
        raise RuntimeError("model gone")

    target = host_target()
    workload = kernels.Workload("mm", square_matmul(16), 1, False, [])
    lines = []
    (choice,) = kernels.choose_kernels([workload], ms.database.MemoryDatabase(), target, pick=broken,
                                       progress=lines.append)
    assert (choice.source, choice.picked_us, choice.pick_rank) == ("untuned", None, None)
    assert choice.latency_us == choice.untuned_us > 0
    assert any("no predicted pick (RuntimeError: model gone)" in line for line in lines)


def test_when_every_pick_is_wrong_the_loop_nest_runs_and_the_wrong_picks_are_counted(monkeypatch):
    import tvm_latmodel.networks.kernels as kernels
    from tvm_latmodel.sampling import sample_schedules

    target = host_target()
    workload = kernels.Workload("mm", square_matmul(16), 1, False, [])
    schedules = sample_schedules(workload.mod, target, 3, seed=0)
    monkeypatch.setattr(kernels, "check_kernel", lambda mod, target, reference: (False, 2.0))
    (choice,) = kernels.choose_kernels([workload], ms.database.MemoryDatabase(), target, pick=lambda w: schedules)
    assert (choice.source, choice.pick_rank, choice.wrong_picks, choice.picked_us) == ("untuned", None, 3, None)
    assert choice.latency_us == choice.untuned_us > 0


def test_the_design_space_drops_repeated_reduction_schedules_before_anything_measures_them():
    """design_space's postprocessor fails the decompose_reduction bug and passes the right
    decomposition; every sampled schedule (planner, picks) comes from that space."""
    from tvm_latmodel.sampling import make_context, sample_schedules
    from tvm_latmodel.schedule_checks import RejectRepeatedReductions, design_space

    _, wrong, i = _normalise_by_sum()
    wrong.decompose_reduction(wrong.get_sblock("S"), i)
    _, right, _ = _normalise_by_sum()
    right.decompose_reduction(right.get_sblock("S"), right.get_loops(right.get_sblock("S"))[1])
    reject = RejectRepeatedReductions()
    assert reject.apply(wrong) is False and reject.apply(right) is True
    target = host_target()
    postprocs = list(make_context(square_matmul(8), target).space_generator.postprocs)
    assert postprocs[-1].apply(wrong) is False and postprocs[-1].apply(right) is True  # it, in the space
    assert len(postprocs) == len(ms.postproc.Postproc.create("llvm")) + 1
    assert design_space(tvm.target.Target("cuda")) == "post-order-apply"
    assert len(sample_schedules(square_matmul(8), target, 2, seed=0)) == 2


def test_a_wrong_record_with_the_known_bug_is_named_in_the_warning():
    import tvm_latmodel.networks.kernels as kernels

    target = host_target()
    mod, sch, i = _normalise_by_sum()
    sch.decompose_reduction(sch.get_sblock("S"), i)
    workload = kernels.Workload("norm", mod, 1, False, [])
    database = ms.database.MemoryDatabase()
    database.commit_tuning_record(ms.database.TuningRecord(
        sch.trace, database.commit_workload(mod), [1e-9], target, ms.arg_info.ArgInfo.from_prim_func(mod["main"])))
    with pytest.warns(UserWarning, match=r"reduction S is repeated 8x by loop i .*decompose_reduction"):
        (choice,) = kernels.choose_kernels([workload], database, target)
    assert (choice.source, choice.wrong_records) == ("untuned", 1)
