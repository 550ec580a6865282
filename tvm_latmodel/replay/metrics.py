"""Ranking metrics: pure functions of (scores, measured latencies).

Higher score = predicted faster. Tie-breaking is *worst case* everywhere:
among candidates whose scores tie, the model is assumed to pick the slowest
first (:func:`rank_order`), so a model cannot look good by scoring
everything alike.
"""

from __future__ import annotations

import numpy as np

def _as_pair(scores, latency_s) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    t = np.asarray(latency_s, dtype=np.float64).reshape(-1)
    if s.shape != t.shape:
        raise ValueError(f"{s.size} scores for {t.size} latencies")
    return s, t


def rank_order(scores, latency_s) -> np.ndarray:
    """Indices from the model's best pick to its worst, ties broken worst case.

    Sorted by score, highest first; among equal scores the *slowest*
    candidate comes first, so ties always count against the model.
    """
    s, t = _as_pair(scores, latency_s)
    return np.lexsort((-t, -s))


def spearman(scores, latency_s) -> float:
    """Spearman rank correlation of score with ``-latency`` (1 = perfect order).

    0.0 when either side is constant (no ranking information).
    """
    from scipy import stats

    s, t = _as_pair(scores, latency_s)
    if s.size < 2 or np.ptp(s) == 0 or np.ptp(t) == 0:
        return 0.0
    return float(stats.spearmanr(s, -t).statistic)


def kendall(scores, latency_s) -> float:
    """Kendall's tau-b of score with ``-latency``; 0.0 when either side is constant."""
    from scipy import stats

    s, t = _as_pair(scores, latency_s)
    if s.size < 2 or np.ptp(s) == 0 or np.ptp(t) == 0:
        return 0.0
    return float(stats.kendalltau(s, -t).statistic)


def pairwise_accuracy(scores, latency_s) -> float:
    """Fraction of pairs with different latency that the scores order correctly.

    A pair whose scores tie counts as half correct. 0.5 when no pair has
    different latencies.
    """
    s, t = _as_pair(scores, latency_s)
    correct = 0.0
    pairs = 0
    for start in range(0, s.size, 1024):  # rows in chunks: O(n^2) work, O(1024 n) memory
        ds = s[start : start + 1024, None] - s[None, :]
        dt = t[start : start + 1024, None] - t[None, :]
        faster = dt < 0  # row candidate measured faster than column candidate
        pairs += int(faster.sum())
        correct += float((faster & (ds > 0)).sum()) + 0.5 * float((faster & (ds == 0)).sum())
    return correct / pairs if pairs else 0.5


def top_k_score(scores, latency_s, k: int) -> float:
    """Best latency of all candidates / best latency among the model's top ``k``.

    1.0 is perfect. Ties with the ``k``-th pick are broken worst case
    (:func:`rank_order`).
    """
    s, t = _as_pair(scores, latency_s)
    if s.size == 0:
        raise ValueError("top_k_score of no candidates")
    picks = rank_order(s, t)[: max(1, int(k))]
    return float(t.min() / t[picks].min())


def mape_percent(predicted_s, latency_s) -> float:
    """Mean absolute percentage error of predicted latencies, in percent."""
    p, t = _as_pair(predicted_s, latency_s)
    return float(np.mean(np.abs(p - t) / t) * 100.0)
