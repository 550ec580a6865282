"""HybridCostModel: predictions, learning, persistence, failure handling, and
MetaSchedule tuning end to end (a few trials of a tiny matmul on this CPU)."""

import json
import warnings

import numpy as np
import pytest
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms

from tvm_latmodel.model.cost_model import HybridCostModel, valid_latency
from tvm_latmodel.model.residual import ResidualModel
from tvm_latmodel.sampling import make_context, sample_schedules

TARGET = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2})


def _matmul(n=128):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    r = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def _cands(schedules):
    return [ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(s.mod["main"])) for s in schedules]


def _result(secs):
    return ms.runner.RunnerResult(run_secs=secs, error_msg=None)


@pytest.fixture(scope="module")
def task():
    mod = _matmul()
    ctx = make_context(mod, TARGET, seed=1)
    schedules = sample_schedules(mod, TARGET, 24, seed=0, context=ctx)
    assert len(schedules) == 24
    return ctx, _cands(schedules)


def test_the_score_does_not_depend_on_which_schedule_is_seen_first(task):
    """Scores are the task's roofline bound (modes.task_bound_s) over the
    predicted latency: these schedules' own bounds differ (their
    intermediates do), yet two models shown them in opposite orders score
    every schedule the same, and a bare context's bound (from the first
    candidate) does not depend on which candidate that is."""
    ctx, cands = task
    own = {e.roofline_bound_s for e in HybridCostModel(pretrained=None, residual=False)._analytical(ctx, cands)}
    assert len(own) > 1
    forward = HybridCostModel(pretrained=None, residual=False).predict(ctx, cands)
    backward = HybridCostModel(pretrained=None, residual=False).predict(ctx, cands[::-1])[::-1]
    np.testing.assert_allclose(forward, backward, rtol=1e-12)
    bare = ms.TuneContext()
    assert HybridCostModel(pretrained=None)._bound(bare, cands) == HybridCostModel(pretrained=None)._bound(bare, cands[5:])


def test_zero_sample_scores_rank_a_good_schedule_above_a_naive_one():
    mod = _matmul()
    naive = tvm.s_tir.Schedule(mod)
    good = tvm.s_tir.Schedule(mod)
    i, j, k = good.get_loops(good.get_sblock("C"))
    i0, i1 = good.split(i, [16, 8])
    j0, j1 = good.split(j, [8, 16])
    good.reorder(i0, j0, i1, k, j1)
    good.parallel(i0)
    good.vectorize(j1)
    ctx = make_context(mod, TARGET)
    scores = HybridCostModel().predict(ctx, _cands([naive, good]))
    assert scores.shape == (2,) and np.all(np.isfinite(scores)) and np.all(scores > 0)
    assert scores[1] > 4 * scores[0]  # 8 parallel units x 16 lanes vs one scalar core


def test_predict_with_zero_samples_is_deterministic(task):
    ctx, cands = task
    a = HybridCostModel().predict(ctx, cands)
    b = HybridCostModel(seed=5).predict(ctx, cands)
    assert a.shape == (len(cands),) and np.all(a > 0)
    np.testing.assert_array_equal(a, b)
    assert len(np.unique(a)) > len(a) // 2  # few ties


def test_failed_results_are_counted_never_fitted(task):
    ctx, cands = task
    m = HybridCostModel(min_samples=4)
    bad = [ms.runner.RunnerResult(run_secs=None, error_msg="build failed"), _result([]), _result([1e10]),
           _result([float("nan")]), _result([-1.0]), _result([0.0])]
    m.update(ctx, cands[:6], bad)
    assert m.failed_count_ == 6 and m.X_ == [] and m.model_ is None
    assert [valid_latency(r) for r in bad] == [None] * 6
    assert valid_latency(_result([1e-3, 3e-3])) == pytest.approx(2e-3)


def test_residual_learns_and_save_load_round_trips(task, tmp_path):
    ctx, cands = task
    m = HybridCostModel(min_samples=8, seed=0, pretrained=None)
    before = m.predict(ctx, cands)
    # synthetic truth: the analytical estimate times a factor the model must learn
    est = m.predict_latency_s(ctx, cands)
    truth = est * np.linspace(0.5, 4.0, len(cands))
    m.update(ctx, cands[:16], [_result([float(t)]) for t in truth[:16]])
    assert m.fitted_on_ == 0  # the fit waits for the next prediction
    after = m.predict(ctx, cands)
    assert m.fitted_on_ == 16 and m.model_ is not None
    assert not np.allclose(before, after)
    # the learned correction moves predictions toward the truth on the training data
    err_before = np.abs(np.log(est[:16] / truth[:16])).mean()
    err_after = np.abs(np.log(m.predict_latency_s(ctx, cands[:16]) / truth[:16])).mean()
    assert err_after < 0.7 * err_before
    path = str(tmp_path / "model.json")
    m.save(path)
    doc = json.load(open(path))
    assert doc["format"] == "tvm-latmodel-hybrid" and doc["target_family"] == "cpu"
    m2 = HybridCostModel(pretrained=None)
    m2.load(path)
    np.testing.assert_array_equal(m2.predict(ctx, cands), after)
    # the training data round-trips too: a refit of the loaded model gives the same model
    assert m2.X_ == m.X_ and m2.log_measured_ == m.log_measured_ and m2.groups_ == m.groups_
    assert doc["n_samples"] == 16 and len(doc["trained_on"]) == 1
    m2.refit()
    np.testing.assert_allclose(m2.predict(ctx, cands), after, rtol=1e-6)


def test_adaptive_refit_waits_for_growth(task):
    ctx, cands = task
    m = HybridCostModel(min_samples=8, refit_growth=0.5, pretrained=None)
    est = m.predict_latency_s(ctx, cands)
    m.update(ctx, cands[:8], [_result([float(t)]) for t in est[:8]])
    m.predict(ctx, cands[:1])
    assert m.fitted_on_ == 8
    m.update(ctx, cands[8:11], [_result([float(t)]) for t in est[8:11]])
    m.predict(ctx, cands[:1])
    assert m.fitted_on_ == 8  # 11 < 8 * 1.5: no refit yet
    m.update(ctx, cands[11:13], [_result([float(t)]) for t in est[11:13]])
    m.predict(ctx, cands[:1])
    assert m.fitted_on_ == 13


def _saved_model(ctx, cands, tmp_path):
    """A model fitted on 6 samples, saved to tmp_path/m.json: (path, its JSON)."""
    m = HybridCostModel(min_samples=4, pretrained=None)
    est = m.predict_latency_s(ctx, cands)
    m.update(ctx, cands[:6], [_result([float(t)]) for t in est[:6]])
    m.refit()
    path = tmp_path / "m.json"
    m.save(str(path))
    return path, json.loads(path.read_text())


def test_bad_model_files(tmp_path, task):
    ctx, cands = task
    path, doc = _saved_model(ctx, cands, tmp_path)

    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(doc, format_version=99, package_version="9.9")))
    with pytest.raises(ValueError, match="other.json: hybrid model format version 99"):
        HybridCostModel().load(str(other))
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps(dict(doc, target_family="gpu")))
    with pytest.raises(ValueError, match="trained for a gpu target"):
        HybridCostModel(target=TARGET).load(str(gpu))
    with pytest.raises(ValueError, match="pretrained for a gpu target"):
        HybridCostModel(target=TARGET, pretrained=str(gpu))
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"\x80\x04\x95 pickle bytes")
    with pytest.raises(ValueError, match="junk.json: not a JSON model file"):
        HybridCostModel().load(str(junk))
    (tmp_path / "m.json.residual.json.xgb.json").unlink()
    with pytest.raises(ValueError, match="booster file .* is missing"):
        HybridCostModel().load(str(path))


def test_pretrained_residual_starts_the_model(task, tmp_path):
    ctx, cands = task
    donor = HybridCostModel(min_samples=4, pretrained=None)
    est = donor.predict_latency_s(ctx, cands)
    donor.update(ctx, cands, [_result([float(t) * 3]) for t in est])
    donor.refit()
    path = str(tmp_path / "pre.json")
    donor.save(path)
    fresh = HybridCostModel(pretrained=path)
    assert fresh.predict(ctx, cands).shape == (len(cands),)
    # the damped pretrained correction moves predictions toward 3x
    ratio = np.median(fresh.predict_latency_s(ctx, cands) / est)
    assert 1.2 < ratio < 3.5
    with pytest.raises(RuntimeError, match="not fitted"):
        ResidualModel().predict(np.zeros((1, 3)))


def _broken(seed=3):
    """A model whose analytical part raises on every CPU candidate: it was
    given GPU hardware, so summarizing an unbound CPU schedule fails."""
    from tvm_latmodel.hardware import HardwareSpec

    return HybridCostModel(hardware=HardwareSpec.from_preset("h200"), seed=seed)


def test_a_model_that_raises_falls_back_with_one_warning(task):
    ctx, cands = task
    m = _broken()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        s1 = m.predict(ctx, cands)
        s2 = m.predict(ctx, cands)
        m.update(ctx, cands[:2], [_result([1e-3]), _result([2e-3])])
    assert s1.shape == (len(cands),) and np.all(np.isfinite(s1))
    assert not np.array_equal(s1, s2)  # random fallback, seeded generator
    msgs = [str(w.message) for w in rec if "HybridCostModel" in str(w.message)]
    assert len([x for x in msgs if "analytical model failed" in x]) == 1
    assert len([x for x in msgs if "update failed" in x]) == 1


@pytest.mark.slow
def test_tune_end_to_end_writes_a_database_tvm_compiles(tmp_path):
    """MetaSchedule tunes with cost_model=HybridCostModel() and TVM compiles the result."""
    from tvm_latmodel.measure import local_builder, local_runner

    mod = _matmul(64)
    host = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    db = ms.tune_tir(mod, host, str(tmp_path), max_trials_global=4, num_trials_per_iter=4,
                     cost_model=HybridCostModel(), builder=local_builder(), runner=local_runner(1, 1, 0), seed=1)
    lines = (tmp_path / "database_tuning_record.json").read_text().splitlines()
    assert len(lines) == 4
    sch = ms.tir_integration.compile_tir(db, mod, host)
    assert sch is not None
    lib = tvm.compile(sch.mod, target=host)
    a = np.random.rand(64, 64).astype("float32")
    b = np.random.rand(64, 64).astype("float32")
    dev = tvm.cpu()
    c = tvm.runtime.tensor(np.zeros((64, 64), "float32"), dev)
    lib["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4)


@pytest.mark.slow
def test_tuning_survives_a_broken_model(tmp_path):
    from tvm_latmodel.measure import local_builder, local_runner

    mod = _matmul(32)
    host = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ms.tune_tir(mod, host, str(tmp_path), max_trials_global=2, num_trials_per_iter=2,
                    cost_model=_broken(), builder=local_builder(), runner=local_runner(1, 1, 0), seed=1)
    assert len((tmp_path / "database_tuning_record.json").read_text().splitlines()) == 2


@pytest.mark.slow
def test_tune_workload_stops_early_and_reports_trials_saved(tmp_path):
    """--stop-within: a huge tolerance stops after the first round of 2."""
    from tvm_latmodel.tuning import read_records, tune_workload

    host = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    rep = tune_workload(_matmul(32), host, work_dir=str(tmp_path), trials=8, cost_model="analytical",
                        stop_within=1e6, round_trials=2, progress=False)
    assert rep.trials_measured == 2 and rep.trials_saved == 6
    assert "within" in rep.stopped_early
    assert rep.best_latency_s is not None and rep.best_latency_s > rep.roofline_bound_s
    assert len(read_records(str(tmp_path))) == 2 and len(rep.curve) == 2


def test_pretrained_of_another_family_is_ignored_with_a_warning(task, tmp_path):
    """No target at construction: the mismatch shows at the first call."""
    ctx, cands = task
    path, doc = _saved_model(ctx, cands, tmp_path)
    path.write_text(json.dumps(dict(doc, target_family="gpu")))
    m = HybridCostModel(pretrained=str(path))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        scores = m.predict(ctx, cands)
    assert m.pretrained_model_ is None
    assert any("pretrained for gpu targets" in str(w.message) for w in rec)
    np.testing.assert_array_equal(scores, HybridCostModel(pretrained=None).predict(ctx, cands))


def test_a_bare_tune_context_ranks_with_the_host_hardware(task):
    """TVM's own cost-model tests call predict/update with ``TuneContext()``:
    no target, no module. The model ranks with the host's spec, not at random."""
    _, cands = task
    bare = ms.TuneContext()
    assert bare.target is None and bare.mod is None
    m = HybridCostModel(pretrained=None)
    a, b = m.predict(bare, cands), m.predict(bare, cands)
    np.testing.assert_array_equal(a, b)  # a ranking, not random draws
    assert len(np.unique(a)) > len(a) // 2
    from tvm_latmodel.targets import host_target

    host_ctx = make_context(_matmul(), host_target())
    host = HybridCostModel(pretrained=None).predict(host_ctx, cands)
    np.testing.assert_allclose(a, host, rtol=1e-9)  # the same ranking as a context on the host
    m.update(bare, cands[:10], [_result([1e-3 * (i + 1)]) for i in range(10)])  # never raises
    assert len(m.X_) == 10 and m.failed_count_ == 0


def test_the_shipped_residual_starts_the_default_model(task):
    from tvm_latmodel.model.cost_model import shipped_model_path

    ctx, cands = task
    path = shipped_model_path("cpu")
    if path is None:
        pytest.skip("no shipped model for this machine's family")
    m = HybridCostModel(target=TARGET)
    assert m.pretrained_model_ is not None and len(m.pretrained_workloads_) >= 13
    off = HybridCostModel(target=TARGET, pretrained=None)
    assert off.pretrained_model_ is None
    assert not np.array_equal(m.predict(ctx, cands), off.predict(ctx, cands))
    assert HybridCostModel(target=TARGET, residual=False).pretrained_model_ is None


def test_per_task_evidence_weights(task):
    """Two tasks in one model: each task's residual weight counts its own samples."""
    ctx, cands = task
    other_mod = _matmul(64)
    other_ctx = make_context(other_mod, TARGET, seed=1)
    other = _cands(sample_schedules(other_mod, TARGET, 12, seed=1, context=other_ctx))
    m = HybridCostModel(min_samples=4, evidence_half=16.0, pretrained_weight=0.5, pretrained=None)
    est = m.predict_latency_s(other_ctx, other)
    m.update(other_ctx, other, [_result([float(t) * 2]) for t in est])
    m.predict(ctx, cands[:2])  # fits lazily
    key = m._task_key(ctx)
    assert m.fitted_on_ == 12 and m.fitted_counts_.get(key, 0) == 0
    # no own samples: the other task's data counts as pretraining (weight 0.5)
    assert m.residual_weight(key) == pytest.approx(0.5)
    assert m.residual_weight(m._task_key(other_ctx)) == pytest.approx(12 / 28 + (1 - 12 / 28) * 0.0)
    est2 = m.predict_latency_s(ctx, cands)
    m.update(ctx, cands[:16], [_result([float(t)]) for t in est2[:16]])
    m.predict(ctx, cands[:2])
    own = 16 / 32
    assert m.residual_weight(key) == pytest.approx(own + (1 - own) * 0.5)


def test_background_feature_extraction_matches_the_extractor_and_the_sequential_path(task):
    """predict extracts TVM's features in a thread while the analytical model
    runs: same rows as the synchronous extractor, cache filled and counted
    in the calling thread, and the same scores as the sequential path
    (predict_latency_s) on a fresh cache."""
    from tvm_latmodel.model import cost_model as cm
    from tvm_latmodel.model.features import CachedPerStoreFeature

    ctx, cands = task
    a, b = CachedPerStoreFeature(), CachedPerStoreFeature()
    pending = a.features_async(ctx, cands)
    sync = b.features(ctx, cands)
    got = pending.result()
    assert len(got) == len(cands) and all(np.array_equal(x, y) for x, y in zip(got, sync))
    assert (a.misses_, a.hits_, len(a.cache_)) == (len(cands), 0, len(cands))
    again = a.features_async(ctx, cands).result()  # all cached: no thread
    assert a.hits_ == len(cands) and all(x is y for x, y in zip(again, got))

    def fresh_model():
        # own residual on 8 candidates: predict then mixes cache hits and misses
        m = HybridCostModel(pretrained=None, min_samples=4)
        m._extractor = CachedPerStoreFeature()
        m.update(ctx, cands[:8], [_result([1e-3 * (i + 1)]) for i in range(8)])
        return m

    saved = cm._ESTIMATES
    try:
        cm._ESTIMATES = cm.LRUCache(1000)
        threaded = fresh_model().predict(ctx, cands)
        cm._ESTIMATES = cm.LRUCache(1000)
        m = fresh_model()
        sequential = m._bound(ctx, cands) / m.predict_latency_s(ctx, cands)
    finally:
        cm._ESTIMATES = saved
    assert m._residual_active() and m.model_ is not None
    np.testing.assert_array_equal(threaded, sequential)


@pytest.mark.parametrize("objective", ["reg:squarederror", "reg:headweighted", "rank:pairwise", "rank:ndcg"])
def test_residual_predict_is_the_booster_margin(objective):
    """ResidualModel.predict (in-place prediction, no DMatrix) gives exactly
    the booster's margin on a DMatrix, sign-flipped for the ranking objectives."""
    import xgboost as xgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 7)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    la = rng.normal(size=300)
    lm = la + np.nan_to_num(X[:, 0]) * 0.3 + rng.normal(0, 0.1, 300)
    m = ResidualModel(objective=objective, n_estimators=30).fit(X, la, lm, groups=np.arange(300) % 3)
    ref = m.booster_.predict(xgb.DMatrix(X), output_margin=True).astype(np.float64)
    np.testing.assert_array_equal(m.predict(X), -ref if objective.startswith("rank:") else ref)
    assert m.predict(X[:0]).shape == (0,)


def test_canonical_rows_order_tied_buffer_slots_by_content():
    """TVM sorts the five group-2 buffer slots by lines, bytes, then name with
    an unstable sort: two same-named buffers that tie come out in either
    order. The hybrid orders such ties by the slots' values."""
    from tvm_latmodel.model.features import canonical_rows, per_store_sums

    def slot(kind, bytes_, lines, unique):
        s = np.zeros(18)
        s[kind] = 1.0  # access type one-hot: read, write, read-write
        s[3], s[4], s[5] = bytes_, unique, lines
        return s

    a = slot(0, 20.0, 14.0, 10.0)  # read, fewer unique bytes
    b = slot(0, 20.0, 14.0, 16.0)  # read, ties with a on lines and bytes
    c = slot(1, 22.0, 15.0, 12.0)  # the write: more lines, sorted first by TVM
    head = np.arange(57, dtype=float)
    tail = np.ones(164 - 57 - 90)

    def row(*slots):
        slots = list(slots) + [np.zeros(18)] * (5 - len(slots))
        return np.concatenate([head, *slots, tail])

    one, other = np.array([row(c, a, b)]), np.array([row(c, b, a)])
    expected = row(c, b, a)  # the tie ordered by content, descending: b's unique bytes 16 > 10
    np.testing.assert_array_equal(canonical_rows(one)[0], expected)
    np.testing.assert_array_equal(canonical_rows(other)[0], expected)
    assert canonical_rows(one) is not one and one[0, 57 + 18 + 4] == 10.0  # input left alone
    untied = np.array([row(c, a)])
    assert canonical_rows(untied) is untied  # no tie: nothing copied
    sums = per_store_sums([one, other, np.zeros((0, 164))])
    np.testing.assert_array_equal(sums[0], sums[1])
    np.testing.assert_array_equal(sums[2], np.zeros(164))


def test_the_residual_sees_the_same_rows_in_every_extraction():
    """On DEP_0's logged records TVM's PerStoreFeature swaps two tied buffer
    slots from one extraction to the next (3-4 of 128 records per run); the
    sums the residual reads must not move."""
    import os

    from tvm_latmodel.model.features import per_store_sums
    from tvm_latmodel.replay.logs import load_database

    log = os.path.join(os.path.dirname(__file__), "..", "tuning_logs", "cpu", "DEP_0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (task,) = load_database(log)
    ctx = ms.TuneContext(mod=task.mod, target=task.target, num_threads=1)
    extractor = ms.feature_extractor.PerStoreFeature()
    runs = [[a.numpy() for a in extractor.extract_from(ctx, task.candidates())] for _ in range(4)]
    sums = [per_store_sums(r) for r in runs]
    for s in sums[1:]:
        np.testing.assert_array_equal(s, sums[0])
    assert sums[0].shape == (len(task.candidates()), 164) and np.abs(sums[0]).sum() > 0


def test_a_fit_depends_on_the_measuring_machines_spec_not_on_the_host(monkeypatch):
    """``train_on_tasks(hardware=...)``: the same logs and spec give the same
    analytical inputs and bounds whichever CPU runs the fit; without a spec, a
    host that is not the logs' CPU gets default clock and caches, is warned,
    and fits other inputs (stop 30 measured that moving top-1 by 0.08)."""
    import dataclasses
    import os

    from tvm_latmodel.hardware import HardwareSpec
    from tvm_latmodel.model.cost_model import train_on_tasks
    from tvm_latmodel.replay import load_database

    log = os.path.join(os.path.dirname(__file__), "..", "tuning_logs", "cpu", "C1D_0")
    (task,) = load_database(log)
    task = dataclasses.replace(task, records=task.records[:24])
    logs_cpu = str(task.target.attrs["mcpu"])
    monkeypatch.setattr(tvm.target.codegen, "llvm_get_system_cpu", lambda: logs_cpu)
    measured_on = HardwareSpec.from_target(task.target)
    assert measured_on.source == "host"

    def fit(**kw):
        m = train_on_tasks([dataclasses.replace(task)], progress=False, **kw)
        return m.log_analytical_, m.bounds_

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the logs' own CPU: nothing to warn about
        here = fit()
    monkeypatch.setattr(tvm.target.codegen, "llvm_get_system_cpu", lambda: "another-cpu")
    with pytest.warns(UserWarning, match="not this host's CPU"):
        elsewhere = fit()
    assert elsewhere != here
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        given = fit(hardware=measured_on)
    assert given == here
    other = HardwareSpec.from_dict({**measured_on.to_dict(), "spec": {**measured_on.to_dict()["spec"],
                                                                      "extra": {"mcpu": "cortex-a72"}}})
    with pytest.warns(UserWarning, match="spec is of a cortex-a72"):
        fit(hardware=other)


def test_logs_of_two_machines_are_each_featurised_with_their_own_spec(tmp_path):
    """``train_on_machines``: each machine's records get the analytical
    inputs and bound of its own spec (what ``train_on_tasks`` gives them
    alone), the fit covers both, the file names no single spec, and a
    workload logged on both machines is refused. ``train_on_tasks`` splits
    tasks that carry different specs the same way."""
    import dataclasses
    import os

    from tvm_latmodel.hardware import HardwareSpec
    from tvm_latmodel.model.cost_model import HybridCostModel, train_on_machines, train_on_tasks
    from tvm_latmodel.replay import load_database

    root = os.path.join(os.path.dirname(__file__), "..", "tuning_logs", "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (a,) = load_database(os.path.join(root, "C1D_0"))
        (b,) = load_database(os.path.join(root, "GMM_0"))
    a, b = dataclasses.replace(a, records=a.records[:16]), dataclasses.replace(b, records=b.records[:16])
    wide = HardwareSpec.from_target(tvm.target.Target({"kind": "llvm", "mcpu": "znver4", "num-cores": 2}))
    narrow = HardwareSpec.from_target(tvm.target.Target({"kind": "llvm", "mcpu": "znver3", "num-cores": 2}))
    assert (wide.vector_bits, narrow.vector_bits) == (512, 256)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the logs' CPU is named by neither spec
        alone_a = train_on_tasks([a], hardware=wide, progress=False)
        alone_b = train_on_tasks([b], hardware=narrow, progress=False)
        both = train_on_machines([([a], wide), ([b], narrow)], progress=False)
    assert both.log_analytical_ == alone_a.log_analytical_ + alone_b.log_analytical_
    assert both.X_ == alone_a.X_ + alone_b.X_
    assert both.bounds_ == {**alone_a.bounds_, **alone_b.bounds_}
    assert both.fitted_on_ == 32 and both.model_ is not None
    # b under the other spec gets other inputs: the spec is per machine, not the first one's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b_wide = train_on_tasks([b], hardware=wide, progress=False)
    assert b_wide.log_analytical_ != alone_b.log_analytical_
    # `train` over two machines' folders: tasks carrying different specs
    # (their hardware.json) are split by spec the same way, not fitted with one
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = train_on_tasks([dataclasses.replace(a, hardware=wide), dataclasses.replace(b, hardware=narrow)],
                              progress=False)
    assert auto.log_analytical_ == both.log_analytical_ and auto.X_ == both.X_
    assert auto.bounds_ == both.bounds_
    path = str(tmp_path / "m.json")
    both.write(path, training_data=False)
    meta = json.load(open(path))
    assert meta["hardware"] is None and meta["target_family"] == "cpu"
    HybridCostModel(pretrained=path)._load_pretrained(path)  # usable as a pretrained residual
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="in the logs of two machines"):
            train_on_machines([([a], wide), ([a], narrow)], progress=False)
