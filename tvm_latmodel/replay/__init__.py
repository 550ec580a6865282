"""Offline evaluation of cost models on MetaSchedule tuning logs.

* :mod:`.logs` reads databases (or folders holding several) line by line and
  rebuilds every schedule once (:func:`load_tasks`);
* :mod:`.metrics` are pure rank metrics with worst-case tie-breaking;
* :mod:`.search` drives a model through update/predict and re-runs a search
  over a logged pool (:func:`simulate_search`);
* :mod:`.evaluate` scores a model on tasks (:class:`ReplayEvaluator`,
  :func:`replay`), models built by name through
  :func:`tvm_latmodel.model.registry.make_model`;
* :mod:`.report` writes tables, dumps and plots.
"""

from .evaluate import METRIC_KEYS, ReplayEvaluator, ReplayReport, TaskMetrics, replay
from .logs import (RECORD_FILE, WORKLOAD_FILE, Record, ReplayWarning, Task, family_of, find_databases, load_database,
                   load_tasks)
from .metrics import kendall, mape_percent, pairwise_accuracy, rank_order, spearman, top_k_score
from .report import format_table, plot_report, write_dump
from .search import SearchResult, simulate_search

__all__ = [
    "METRIC_KEYS", "RECORD_FILE", "WORKLOAD_FILE", "Record", "ReplayEvaluator", "ReplayReport", "ReplayWarning",
    "SearchResult", "Task", "TaskMetrics", "family_of", "find_databases", "format_table", "kendall", "load_database",
    "load_tasks", "mape_percent", "pairwise_accuracy", "plot_report", "rank_order", "replay", "simulate_search",
    "spearman", "top_k_score", "write_dump",
]
