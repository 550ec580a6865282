"""The judge's per-task intervals (scripts/judge_shipped_change.py), by hand."""

import importlib.util
import os

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _judge():
    spec = importlib.util.spec_from_file_location("judge_shipped_change_t",
                                                  os.path.join(ROOT, "scripts", "judge_shipped_change.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_paired_interval_by_hand():
    j = _judge()
    # Three tasks in common (c only on the new side: not paired). Spearman deltas 0.1, 0.2, 0.3:
    # mean 0.2, sd 0.1, t(0.975, 2) = 4.302653, half = 4.302653 * 0.1 / sqrt(3) = 0.248414.
    old = {"a": np.array([0.5, 0.0, 1.0, 4.0]), "b": np.array([0.4, 1.0, 1.0, 2.0]), "d": np.array([0.1, 0.5, 0.5, 9.0])}
    new = {"a": np.array([0.6, 0.0, 1.0, 3.0]), "b": np.array([0.6, 1.0, 1.0, 2.0]), "d": np.array([0.4, 0.5, 0.5, 7.0]),
           "c": np.array([9.0, 9.0, 9.0, 9.0])}
    (sm, slo, shi), (tm, tlo, thi), _, (rm, rlo, rhi) = j.paired_interval(old, new)
    assert sm == pytest.approx(0.2)
    assert (slo, shi) == pytest.approx((0.2 - 0.248414, 0.2 + 0.248414), abs=1e-6)
    assert (tm, tlo, thi) == (0.0, 0.0, 0.0)  # no task moved: a point
    # trials deltas -1, 0, -2: mean -1, sd 1, half = 4.302653 / sqrt(3) = 2.484138
    assert (rm, rlo, rhi) == pytest.approx((-1.0, -3.484138, 1.484138), abs=1e-6)


def test_paired_interval_needs_two_tasks():
    j = _judge()
    with pytest.raises(ValueError, match="1 task"):
        j.paired_interval({"a": np.zeros(4), "b": np.zeros(4)}, {"a": np.ones(4)})


def test_rule_t_by_hand():
    j = _judge()
    zero = (0.0, 0.0, 0.0)
    flat = [zero] * 4
    # A Spearman gain clear of zero, head metrics inside their spread: adopt.
    gain = [(0.04, 0.01, 0.07), (0.03, -0.05, 0.11), zero, (-0.5, -1.5, 0.5)]
    assert j.rule_t(flat, gain, flat) == ("ADOPT", "gain")
    # The same gain, but the shots arm's top-1 clearly worse: refuse.
    worse = [zero, (-0.05, -0.09, -0.01), zero, zero]
    assert j.rule_t(flat, gain, worse) == ("REFUSE", "gain; harm: shots top1_score")
    # Zero-shot trials clearly up (worse) is harm too; a Spearman interval touching 0 is no gain.
    spans = [(0.02, -0.001, 0.04), zero, zero, (1.0, 0.2, 1.8)]
    assert j.rule_t(flat, spans, flat) == ("REFUSE", "no gain; harm: zero-shot trials_to_5pct")
    # An analytical gain counts only if the product's Spearman does not fall by more than 0.01.
    a_gain = [(0.03, 0.01, 0.05), zero, zero, zero]
    assert j.rule_t(a_gain, [(-0.02, -0.03, -0.01), zero, zero, zero], flat)[0] == "REFUSE"
    assert j.rule_t(a_gain, [(-0.005, -0.02, 0.01), zero, zero, zero], flat) == ("ADOPT", "gain")


def test_rule_h_by_hand():
    j = _judge()
    zero = (0.0, 0.0, 0.0)
    flat = [zero] * 4
    # No Spearman gain, but the product's zero-shot trials clearly down: R_t refuses, R_h adopts.
    fewer = [(-0.004, -0.012, 0.004), zero, zero, (-2.0, -3.5, -0.5)]
    assert j.rule_t(flat, fewer, flat) == ("REFUSE", "no gain")
    assert j.rule_h(flat, fewer, flat) == ("ADOPT", "head gain: zero-shot trials_to_5pct")
    # The analytical top-1 clearly up counts too.
    up = [zero, (0.1, 0.02, 0.18), zero, zero]
    assert j.rule_h(up, flat, flat) == ("ADOPT", "head gain: analytical top1_score")
    # A head gain does not outweigh harm, nor a zero-shot Spearman mean falling by more than 0.01.
    worse = [zero, (-0.05, -0.09, -0.01), zero, zero]
    assert j.rule_h(flat, fewer, worse) == ("REFUSE", "no gain; harm: shots top1_score")
    sliding = [(-0.02, -0.04, 0.0), zero, zero, (-2.0, -3.5, -0.5)]
    assert j.rule_h(flat, sliding, flat) == ("REFUSE", "no gain")
    # Intervals touching 0 are no gain.
    assert j.rule_h(flat, [zero, (0.1, -0.01, 0.2), zero, (-1.0, -2.0, 0.0)], flat) == ("REFUSE", "no gain")
