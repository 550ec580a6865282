"""Tests of tvm_latmodel.replay: metrics, loading (good and bad logs), the
simulated search, and the ``replay`` command end to end.

The fixture databases are written by TVM's own ``JSONDatabase`` (so the file
format is MetaSchedule's exactly) from hand-made schedules of two tiny
matmuls, with synthetic ``run_secs``: a real ``ms.tune_tir`` run costs
minutes on this machine and its builds time out under load.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import shutil
import warnings

import numpy as np
import pytest

import tvm  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

from tvm_latmodel import replay as rp  # noqa: E402
from tvm_latmodel.model.registry import make_model  # noqa: E402
from tvm_latmodel.cli import replay as replay_commands  # noqa: E402
from toys import square_matmul, tiled_matmul_schedule  # noqa: E402

TARGET = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 4}
N_RECORDS = 14
FACTORS = [1, 2, 4, 8, 16]


# ---------------------------------------------------------------------------
# Fixture databases
# ---------------------------------------------------------------------------




def _synthetic_latency_s(n: int, fi: int, fj: int, rng: np.random.Generator) -> float:
    # Best near an inner tile of 4 x 8; a little noise so no two are equal.
    shape = 1 + abs(math.log2(fi) - 2) + abs(math.log2(fj) - 3)
    return 1e-5 * (n / 32) ** 3 * shape * float(rng.uniform(0.97, 1.03))


def _write_database(directory, n: int, count: int, seed: int) -> list[float]:
    """A MetaSchedule JSONDatabase of ``count`` hand-made schedules; returns latencies."""
    os.makedirs(directory, exist_ok=True)
    mod = square_matmul(n)
    db = ms.database.JSONDatabase(work_dir=str(directory))
    workload = db.commit_workload(mod)
    args_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    target = tvm.target.Target(TARGET)
    rng = np.random.default_rng(seed)
    latencies = []
    for fi, fj in list(itertools.product(FACTORS, FACTORS))[:count]:
        sch = tiled_matmul_schedule(mod, fi, fj)
        lat = _synthetic_latency_s(n, fi, fj, rng)
        latencies.append(float(np.mean([lat, lat * 1.02])))
        db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, [lat, lat * 1.02], target, args_info))
    return latencies


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Two tasks, ``mm32`` and ``mm48``, under one folder."""
    root = tmp_path_factory.mktemp("logs")
    lat = {
        "mm32": _write_database(root / "mm32", 32, N_RECORDS, seed=0),
        "mm48": _write_database(root / "mm48", 48, N_RECORDS, seed=1),
    }
    return root, lat


def _copy(logs, tmp_path, name="mm32"):
    root, _ = logs
    dest = tmp_path / name
    shutil.copytree(root / name, dest)
    return dest


def _record_lines(db):
    return (db / rp.RECORD_FILE).read_text().splitlines()


def _write_lines(db, lines):
    (db / rp.RECORD_FILE).write_text("\n".join(lines) + "\n")


def _load_warned(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tasks = rp.load_tasks(path)
    return tasks, [str(w.message) for w in caught if issubclass(w.category, rp.ReplayWarning)]


# ---------------------------------------------------------------------------
# Metrics on hand-made arrays
# ---------------------------------------------------------------------------


def test_spearman_and_kendall_hand_computed():
    latency = [1.0, 2.0, 3.0, 4.0]
    assert rp.spearman([4, 3, 2, 1], latency) == pytest.approx(1.0)
    assert rp.spearman([1, 2, 3, 4], latency) == pytest.approx(-1.0)
    # ranks of score vs -latency: one adjacent swap, d^2 = 1 + 1:
    # rho = 1 - 6 * 2 / (4 * (16 - 1)) = 0.8; tau = (5 - 1) / 6
    assert rp.spearman([4, 3, 1, 2], latency) == pytest.approx(0.8)
    assert rp.kendall([4, 3, 1, 2], latency) == pytest.approx(4 / 6)
    # a constant scorer carries no ranking information
    assert rp.spearman([1, 1, 1, 1], latency) == 0.0
    assert rp.kendall([1, 1, 1, 1], latency) == 0.0


def test_pairwise_accuracy_with_ties():
    latency = [1.0, 2.0, 3.0]
    assert rp.pairwise_accuracy([3, 2, 1], latency) == pytest.approx(1.0)
    assert rp.pairwise_accuracy([1, 2, 3], latency) == pytest.approx(0.0)
    # pairs (0,1) tie -> 0.5, (0,2) correct -> 1, (1,2) correct -> 1: 2.5 / 3
    assert rp.pairwise_accuracy([5, 5, 1], latency) == pytest.approx(2.5 / 3)
    # pairs with equal latency are not counted: only (0,2) and (1,2), both right
    assert rp.pairwise_accuracy([2, 1, 0], [1.0, 1.0, 3.0]) == pytest.approx(1.0)
    assert rp.pairwise_accuracy([1, 1, 1], latency) == pytest.approx(0.5)


def test_top_k_score_ties_count_against_the_model():
    latency = np.array([1.0, 2.0, 4.0, 8.0])
    assert rp.top_k_score([4, 3, 2, 1], latency, 1) == pytest.approx(1.0)
    assert rp.top_k_score([1, 2, 3, 4], latency, 1) == pytest.approx(1 / 8)
    # all tied: the worst candidate is taken first
    assert rp.top_k_score([0, 0, 0, 0], latency, 1) == pytest.approx(1 / 8)
    assert rp.top_k_score([0, 0, 0, 0], latency, 3) == pytest.approx(1 / 2)
    # the clear winner (score 9) measured 2.0; the best (1.0) ties in score
    # with a slower one (4.0), which is picked first
    assert rp.top_k_score([5, 9, 5, 0], latency, 1) == pytest.approx(1 / 2)
    assert rp.top_k_score([5, 9, 5, 0], latency, 2) == pytest.approx(1 / 2)  # picks 2.0 and 4.0
    assert rp.top_k_score([5, 9, 5, 0], latency, 3) == pytest.approx(1.0)
    assert rp.top_k_score([1, 2], [3.0, 1.0], 5) == pytest.approx(1.0)  # k beyond n


def test_rank_order_worst_case_ties():
    assert list(rp.rank_order([1, 1, 2], [1.0, 3.0, 2.0])) == [2, 1, 0]


def test_mape_percent():
    assert rp.mape_percent([1.1, 1.8], [1.0, 2.0]) == pytest.approx(10.0)


class _ToyModel:
    """Scores toy candidates (pool indices) by a fixed table; records updates."""

    def __init__(self, scores):
        self.scores = np.asarray(scores, dtype=float)
        self.updates = []

    def update(self, context, candidates, results):
        self.updates.append(list(candidates))
        assert all(r.run_secs is not None for r in results)

    def predict(self, context, candidates):
        return self.scores[list(candidates)]


def test_simulated_search_perfect_and_adversarial():
    latency = np.linspace(1.0, 2.0, 40)  # index 0 is the best; 1.05 covers indices 0 and 1
    run_secs = [[x] for x in latency]
    pool = list(range(40))
    perfect = rp.simulate_search(_ToyModel(-latency), None, pool, run_secs)
    assert perfect.trials_to_target == 1
    model = _ToyModel(latency)  # ranks the best last
    adversarial = rp.simulate_search(model, None, pool, run_secs, batch_size=16)
    # batches of 16, 16, then the last 8 in worst-first order: index 1 is 7th of them
    assert adversarial.trials_to_target == 16 + 16 + 7
    assert [len(u) for u in model.updates] == [16, 16]
    # the curve runs to the end of the last batch measured
    assert len(adversarial.best_so_far_s) == 40
    assert adversarial.best_so_far_s[38] == pytest.approx(latency[1])
    assert adversarial.best_so_far_s[31] == pytest.approx(latency[8])
    # all scores tied: worst-case tie-breaking is adversarial too
    assert rp.simulate_search(_ToyModel(np.zeros(40)), None, pool, run_secs).trials_to_target == 39
    # shots already holding a good schedule: the shots are the trials
    shots = rp.simulate_search(_ToyModel(latency), None, pool, run_secs, measured=[5, 0, 9])
    assert shots.trials_to_target == 3
    assert shots.measured_order == [5, 0, 9]


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def test_load_tasks_keeps_order_target_and_schedules(logs):
    root, lat = logs
    tasks, warned = _load_warned(root)
    assert warned == []
    assert [t.name for t in tasks] == ["mm32", "mm48"]
    task = tasks[0]
    assert [r.index for r in task.records] == list(range(N_RECORDS))
    np.testing.assert_allclose(task.latencies_s, lat["mm32"], rtol=1e-6)
    # the target is the records', not this machine's
    assert str(task.target.attrs["mcpu"]) == "skylake-avx512"
    assert int(task.target.attrs["num-cores"]) == 4
    # the rebuilt schedule is the logged one: record 7 splits i by 2 and j by 4
    rebuilt = task.records[7].schedule
    expected = tvm.s_tir.Schedule(task.mod)
    task.records[7].trace.apply_to_schedule(expected, remove_postproc=False)
    tvm.ir.assert_structural_equal(rebuilt.mod, expected.mod)
    extents = [int(rebuilt.get(lp).extent) for lp in rebuilt.get_loops(rebuilt.get_sblock("C"))]
    assert extents == [16, 8, 32, 2, 4]
    assert task.candidates() is task.candidates()  # built once


def test_bad_lines_warn_with_file_and_line_and_good_records_count(logs, tmp_path):
    db = _copy(logs, tmp_path)
    lines = _record_lines(db)
    good = json.loads(lines[0])
    bad = {}

    def variant(run_secs):
        obj = json.loads(lines[0])
        obj[1][1] = run_secs
        return json.dumps(obj)

    bad[1] = lines[1][: len(lines[1]) // 2]  # truncated
    bad[2] = "this is not json"
    missing = json.loads(lines[2])
    missing[0] = 7
    bad[3] = json.dumps(missing)
    bad[4] = variant([float("nan")])  # json.dumps writes NaN, which json.loads reads
    bad[5] = variant([-1e-4, 1e-4])
    bad[6] = variant([1e10])
    bad[7] = variant([])
    bad[8] = variant([float("inf")])
    broken = json.loads(lines[8])
    broken[1][0] = json.loads(json.dumps(broken[1][0]).replace('["C", "main"]', '["no_such_block", "main"]'))
    bad[9] = json.dumps(broken)
    assert good[1][0] != broken[1][0]
    for i, text in bad.items():
        lines[i] = text
    _write_lines(db, lines)

    tasks, warned = _load_warned(db)
    assert len(tasks) == 1
    assert [r.index for r in tasks[0].records] == [0] + list(range(10, N_RECORDS))
    assert tasks[0].failed_indices == [4, 5, 6, 7, 8]
    assert len(warned) == len(bad)
    path = str(db / rp.RECORD_FILE)
    expect = {
        1: "not valid JSON",
        2: "not valid JSON",
        3: "workload index 7",
        4: "not finite",
        5: "not positive",
        6: "1e10 failure sentinel",
        7: "empty run_secs",
        8: "not finite",
        9: "trace no longer applies",
    }
    for (i, needle), message in zip(sorted(expect.items()), warned):
        assert message.startswith(f"{path}, line {i + 1}:"), message
        assert needle in message, message


def test_bad_lines_in_the_cli_go_to_stderr_and_the_rest_is_scored(logs, tmp_path, capsys):
    db = _copy(logs, tmp_path)
    lines = _record_lines(db)
    lines[3] = lines[3][:40]
    _write_lines(db, lines)
    assert _run_cli([str(db), "--model", "random", "--json"]) == 0
    out, err = capsys.readouterr()
    assert f"warning: {db / rp.RECORD_FILE}, line 4: not valid JSON" in err
    doc = json.loads(out)
    assert doc["tasks"][0]["records"] == N_RECORDS - 1


def test_empty_database_and_no_database_are_errors(logs, tmp_path):
    db = _copy(logs, tmp_path)
    (db / rp.RECORD_FILE).write_text("")
    with pytest.raises(ValueError, match=re.escape(f"{db}: empty tuning database")):
        rp.load_tasks(db)
    # all records failed is empty too
    failed = _copy(logs, tmp_path, "mm48")
    lines = [json.loads(t) for t in _record_lines(failed)]
    for obj in lines:
        obj[1][1] = [1e10]
    _write_lines(failed, [json.dumps(o) for o in lines])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rp.ReplayWarning)
        with pytest.raises(ValueError, match="empty tuning database"):
            rp.load_tasks(failed)
    nothing = tmp_path / "nothing_here"
    nothing.mkdir()
    (nothing / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=re.escape(f"{nothing}: no MetaSchedule tuning database found")):
        rp.load_tasks(nothing)
    with pytest.raises(FileNotFoundError, match="no_such_dir"):
        rp.load_tasks(tmp_path / "no_such_dir")
    half = tmp_path / "half"
    half.mkdir()
    shutil.copy(db / rp.WORKLOAD_FILE, half / rp.WORKLOAD_FILE)
    with pytest.raises(ValueError, match=f"{rp.RECORD_FILE} is missing"):
        rp.load_tasks(half)
    # in a folder, an empty database is skipped with a warning, the others load
    (tmp_path / "ok").mkdir()
    shutil.copytree(logs[0] / "mm32", tmp_path / "ok" / "mm32")
    shutil.copytree(db, tmp_path / "ok" / "empty")
    tasks, warned = _load_warned(tmp_path / "ok")
    assert [t.name for t in tasks] == ["mm32"]
    assert any("empty tuning database" in w for w in warned)


def test_cli_error_for_path_without_database(tmp_path, capsys):
    from tvm_latmodel.cli import main as cli

    (tmp_path / "x").mkdir()
    parser = _parser()
    args = parser.parse_args(["replay", str(tmp_path / "x"), "--model", "random"])
    with pytest.raises(ValueError, match="no MetaSchedule tuning database"):
        args.func(args)
    assert "tvm_latmodel.cli.replay" in cli._SUBCOMMAND_MODULES


# ---------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------


def _parser():
    parser = argparse.ArgumentParser(prog="tvm-latmodel")
    sub = parser.add_subparsers(dest="command", required=True)
    replay_commands.add_parser(sub)
    return parser


def _run_cli(argv):
    args = _parser().parse_args(["replay", *argv])
    return args.func(args)


def _check_shape(doc, model, shots, n_records):
    assert set(doc) == {"model", "shots", "tasks", "mean"}
    assert doc["model"] == model and doc["shots"] == shots
    keys = {"records", "spearman", "kendall", "pairwise_accuracy", "top1_score", "top5_score", "mape", "trials_to_5pct"}
    assert [t["task"] for t in doc["tasks"]] == ["mm32", "mm48"]
    for t in doc["tasks"]:
        assert set(t) == keys | {"task"}
        assert t["records"] == n_records and isinstance(t["records"], int)
        assert isinstance(t["trials_to_5pct"], int) and 1 <= t["trials_to_5pct"] <= N_RECORDS
        assert t["mape"] is None
        for k in ("spearman", "kendall"):
            assert -1.0 <= t[k] <= 1.0
        assert 0.0 <= t["pairwise_accuracy"] <= 1.0
        assert 0.0 < t["top1_score"] <= t["top5_score"] <= 1.0
    assert set(doc["mean"]) == keys
    assert doc["mean"]["mape"] is None
    for k in keys - {"mape"}:
        assert doc["mean"][k] == pytest.approx(np.mean([t[k] for t in doc["tasks"]]))


def test_replay_random_json_dump_plot(logs, tmp_path, capsys):
    root, lat = logs
    dump, plot = tmp_path / "dump.jsonl", tmp_path / "plot.png"
    argv = [str(root), "--model", "random", "--seed", "3", "--json", "--dump", str(dump), "--plot", str(plot)]
    assert _run_cli(argv) == 0
    out, _ = capsys.readouterr()
    doc = json.loads(out)  # exactly one JSON object on stdout
    _check_shape(doc, "random", 0, N_RECORDS)
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    assert [(r["task"], r["index"]) for r in rows] == [(t, i) for t in ("mm32", "mm48") for i in range(N_RECORDS)]
    for r in rows:
        assert set(r) == {"task", "index", "measured_s", "score"}
        assert r["measured_s"] == pytest.approx(lat[r["task"]][r["index"]], rel=1e-6)
    # the dumped scores are the ones the metrics were computed from
    mm32 = [r for r in rows if r["task"] == "mm32"]
    assert doc["tasks"][0]["spearman"] == pytest.approx(
        rp.spearman([r["score"] for r in mm32], [r["measured_s"] for r in mm32])
    )
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # seeded: the same run gives the same numbers; another seed differs
    assert _run_cli(argv[:-4]) == 0
    assert json.loads(capsys.readouterr()[0]) == doc
    assert _run_cli([str(root), "--model", "random", "--seed", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr()[0]) != doc
    assert _run_cli([str(root / "mm32"), str(root / "mm48"), "--model", "random", "--transfer", "--json"]) == 0
    _check_shape(json.loads(capsys.readouterr()[0]), "random", 0, N_RECORDS)


def test_replay_xgb_with_shots(logs, tmp_path, capsys):
    root, _ = logs
    dump = tmp_path / "dump.jsonl"
    assert _run_cli([str(root), "--model", "xgb", "--shots", "4", "--json", "--dump", str(dump)]) == 0
    doc = json.loads(capsys.readouterr()[0])
    _check_shape(doc, "xgb", 4, N_RECORDS - 4)
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    evaluator = rp.ReplayEvaluator(shots=4, seed=0)
    tasks = rp.load_tasks(root)
    for task in tasks:
        shots = {task.records[i].index for i in evaluator.shot_indices(task)}
        assert len(shots) == 4
        held = [r["index"] for r in rows if r["task"] == task.name]
        assert sorted(held) == sorted(set(range(N_RECORDS)) - shots)
    # the readable table
    assert _run_cli([str(root), "--model", "random", "--shots", "2"]) == 0
    table = capsys.readouterr()[0]
    assert "spearman" in table and "mm48" in table and table.splitlines()[-1].startswith("mean")


class _SpyModel:
    """Records what the evaluator gives it; scores by a hidden latency table."""

    log: list = []

    def __init__(self, name):
        self.name = name

    def update(self, context, candidates, results):
        shape = [int(x) for x in ms.arg_info.ArgInfo.from_prim_func(context.mod["main"])[0].shape]
        _SpyModel.log.append((self.name, shape, len(candidates)))

    def predict(self, context, candidates):
        return np.zeros(len(candidates))

    def predict_latency_s(self, context, candidates):
        return np.full(len(candidates), 1e-4)


def test_transfer_gives_every_other_task_with_its_own_context(logs):
    root, _ = logs
    tasks = rp.load_tasks(root)
    _SpyModel.log = []
    report = rp.ReplayEvaluator(transfer=True, shots=2).evaluate(tasks, lambda t: _SpyModel(t.name), model_name="spy")
    first = _SpyModel.log[:2]
    # model for mm32: all 14 of mm48 (in mm48's context), then 2 shots of mm32 in its own
    assert first[0] == ("mm32", [48, 48], N_RECORDS)
    assert first[1] == ("mm32", [32, 32], 2)
    assert ("mm48", [32, 32], N_RECORDS) in _SpyModel.log
    assert ("mm48", [48, 48], 2) in _SpyModel.log
    assert report.transfer and [t.records for t in report.tasks] == [N_RECORDS - 2] * 2
    # a model that predicts latency gets a MAPE; constant scores give the worst case
    assert all(t.mape is not None and t.mape > 0 for t in report.tasks)
    assert all(t.spearman == 0.0 and t.pairwise_accuracy == pytest.approx(0.5) for t in report.tasks)


def test_transfer_featurises_each_task_with_its_own_machines_spec(logs):
    """``--transfer`` over logs of two machines: the hybrid scoring one task
    learns the other's records as that task's machine gives them (its own
    ``hardware.json`` spec), not under the scored task's spec."""
    import dataclasses

    from tvm_latmodel.hardware import HardwareSpec
    from tvm_latmodel.model.cost_model import HybridCostModel
    from tvm_latmodel.sampling import make_context

    root, _ = logs
    wide = HardwareSpec.from_target(tvm.target.Target({"kind": "llvm", "mcpu": "znver4", "num-cores": 2}))
    narrow = HardwareSpec.from_target(tvm.target.Target({"kind": "llvm", "mcpu": "znver3", "num-cores": 2}))
    mm32, mm48 = rp.load_tasks(root)
    tasks = [dataclasses.replace(mm32, hardware=wide), dataclasses.replace(mm48, hardware=narrow)]
    made = []

    def factory(t):
        made.append(HybridCostModel(target=t.target, hardware=t.hardware, pretrained=None))
        return made[-1]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rp.ReplayEvaluator(transfer=True, shots=2).evaluate(tasks, factory, model_name="hybrid", only=["mm32"])

        def rows(task, spec):
            m = HybridCostModel(target=task.target, hardware=spec, pretrained=None)
            m.update(make_context(task.mod, task.target, 1), task.candidates(), task.results())
            return m.X_, m.log_analytical_

        own, scored_spec = rows(tasks[1], narrow), rows(tasks[1], wide)
    assert own != scored_spec  # the two specs give mm48 other inputs
    scored = made[0]
    n = len(tasks[1].records)
    assert (scored.X_[:n], scored.log_analytical_[:n]) == own
    # then mm32's two shots, under its own spec
    shots = rp.ReplayEvaluator(transfer=True, shots=2).shot_indices(tasks[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mm32_rows = rows(tasks[0], wide)[1]
    assert scored.log_analytical_[n:] == [mm32_rows[i] for i in shots]


def test_only_scores_the_named_task_but_transfers_from_all(logs):
    root, _ = logs
    tasks = rp.load_tasks(root)
    _SpyModel.log = []
    report = rp.ReplayEvaluator(transfer=True, shots=2).evaluate(
        tasks, lambda t: _SpyModel(t.name), model_name="spy", only=["mm48"])
    assert [t.task for t in report.tasks] == ["mm48"]
    # mm32 was not scored, but its records trained mm48's model
    assert {name for name, _, _ in _SpyModel.log} == {"mm48"}
    assert ("mm48", [32, 32], N_RECORDS) in _SpyModel.log


def test_make_model_names_and_pretrained():
    assert type(make_model("xgb", seed=1)).__name__ == "XGBModel"
    assert type(make_model("random", seed=1)).__name__ == "SeededRandomModel"
    with pytest.raises(ValueError, match="unknown model"):
        make_model("nope")
    with pytest.raises(ValueError, match="pretrained"):
        make_model("xgb", pretrained="model.tar")


@pytest.mark.parametrize("name", ["hybrid", "analytical"])
def test_replay_hybrid_models(logs, capsys, name):
    root, _ = logs
    assert _run_cli([str(root), "--model", name, "--json"]) == 0
    doc = json.loads(capsys.readouterr()[0])
    assert doc["model"] == name and len(doc["tasks"]) == 2


def _spec_file(path, **changes):
    """A hardware.json for TARGET's CPU with ``changes`` (a lab machine's spec)."""
    import dataclasses

    from tvm_latmodel.hardware import HardwareSpec

    spec = dataclasses.replace(HardwareSpec.from_target(tvm.target.Target(TARGET)), **changes)
    spec.save(str(path))
    return HardwareSpec.load(str(path))


def test_a_folder_glob_passes_over_the_spec_beside_the_databases(logs, tmp_path):
    """``folder/*`` names the ``hardware.json`` beside the databases too: it
    is their spec, not a database, so loading goes on with the databases
    (and they carry the spec); the spec alone loads nothing, with an error
    naming it; any other stray file is still an error."""
    root = tmp_path / "lab"
    _copy(logs, root, "mm32")
    _copy(logs, root, "mm48")
    spec = _spec_file(root / "hardware.json", name="lab box", extra={"mcpu": "skylake-avx512"})
    globbed = sorted(str(p) for p in root.iterdir())
    assert globbed[0].endswith("hardware.json")
    assert rp.find_databases(root / "hardware.json") == []
    tasks = rp.load_tasks(globbed)
    assert [t.name for t in tasks] == ["mm32", "mm48"] and [t.hardware for t in tasks] == [spec, spec]
    with pytest.raises(ValueError, match=r"no tuning database in .*hardware\.json"):
        rp.load_tasks([str(root / "hardware.json")])
    (root / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="notes.txt: not a MetaSchedule tuning database"):
        rp.load_tasks([str(root / "notes.txt")])


def test_replay_scores_a_log_with_the_spec_beside_it(logs, tmp_path, monkeypatch):
    """A ``hardware.json`` in the database's folder or the one above is the
    measuring machine's spec: the task carries it, replay hands it to the
    model, the model predicts with it (its scores differ from the defaults'),
    and ``train`` fits with it; a database with none keeps ``from_target``."""
    import tvm_latmodel.replay.evaluate as evaluate
    from tvm_latmodel.model.cost_model import train_on_tasks
    from tvm_latmodel.sampling import make_context

    root = tmp_path / "lab"
    _copy(logs, root, "mm32")
    _copy(logs, root, "mm48")
    # A slow clock and a small L1: another machine than from_target's guess.
    spec = _spec_file(root / "hardware.json", name="lab box", extra={"mcpu": "skylake-avx512", "freq_ghz": 1.2},
                      peak_gflops=20.0)
    tasks = rp.load_tasks(root)
    assert [t.hardware for t in tasks] == [spec, spec]
    # the database's own folder wins over the one above
    own = _spec_file(root / "mm48" / "hardware.json", name="mm48 box", extra={"mcpu": "skylake-avx512"})
    assert [t.hardware.name for t in rp.load_tasks(root)] == ["lab box", "mm48 box"] and own.name == "mm48 box"
    (root / "mm48" / "hardware.json").unlink()
    plain = rp.load_tasks(logs[0])
    assert [t.hardware for t in plain] == [None, None]

    given = []
    real = evaluate.make_model
    monkeypatch.setattr(evaluate, "make_model", lambda *a, **kw: given.append(kw.get("hardware")) or real(*a, **kw))
    rp.replay(str(root), model="analytical")
    assert given and all(h == spec for h in given)

    from tvm_latmodel.hardware import HardwareSpec

    task = tasks[0]
    cands = task.candidates()
    scores = {}
    for label, hw, expected in (("lab", task.hardware, spec),
                                ("defaults", None, HardwareSpec.from_target(task.target))):
        m = make_model("analytical", target=task.target, hardware=hw)
        scores[label] = np.asarray(m.predict(make_context(task.mod, task.target), cands))
        assert m._hardware(task.target) == expected
    assert spec != HardwareSpec.from_target(task.target)
    assert not np.allclose(scores["lab"], scores["defaults"])

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the logs' spec is used: nothing to warn about
        fitted = train_on_tasks(tasks, progress=False)
    assert fitted.hardware == spec


@pytest.mark.parametrize("content, message", [
    ("not json", "hardware.json"),
    ("mcpu", "describes a znver3 .*measured for skylake-avx512"),
    ("gpu", "a gpu spec cannot describe the llvm target"),
])
def test_a_bad_spec_beside_a_log_is_an_error_naming_the_file(logs, tmp_path, content, message):
    from tvm_latmodel.hardware import HardwareSpec

    db = _copy(logs, tmp_path, "mm32")
    path = tmp_path / "hardware.json"
    if content == "not json":
        path.write_text("{not json")
    elif content == "mcpu":
        _spec_file(path, extra={"mcpu": "znver3"})
    else:
        HardwareSpec.from_preset("h100").save(str(path))
    with pytest.raises(ValueError, match=message) as err:
        rp.load_tasks(db)
    assert str(path) in str(err.value)
