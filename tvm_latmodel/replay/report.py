"""Output of a replay: a table, a JSON-lines dump, a PNG."""

from __future__ import annotations

import json
import os

import numpy as np

from .evaluate import METRIC_KEYS, ReplayReport

def format_table(report: ReplayReport) -> str:
    """A readable table of the report's per-task metrics and their mean."""
    head = ["task", "records", "spearman", "kendall", "pair_acc", "top1", "top5", "mape_%", "trials_5%"]

    def fmt(v, key):
        if v is None:
            return "-"
        if key in ("records", "trials_to_5pct"):
            return str(int(v))
        return f"{v:.1f}" if key == "mape" else f"{v:.3f}"

    rows = [[t.task + ("*" if t.in_pretraining else "")] + [fmt(getattr(t, k), k) for k in METRIC_KEYS]
            for t in report.tasks]
    mean = report.mean()
    rows.append(["mean"] + ["-" if mean[k] is None else f"{mean[k]:.1f}" if k in ("records", "trials_to_5pct", "mape")
                            else f"{mean[k]:.3f}" for k in METRIC_KEYS])
    widths = [max(len(r[c]) for r in [head] + rows) for c in range(len(head))]
    lines = [
        f"model {report.model}, shots {report.shots}" + (", leave-one-task-out transfer" if report.transfer else ""),
        "  ".join(h.ljust(w) if c == 0 else h.rjust(w) for c, (h, w) in enumerate(zip(head, widths))),
    ]
    for i, r in enumerate(rows):
        if i == len(rows) - 1:
            lines.append("-" * len(lines[1]))
        lines.append("  ".join(x.ljust(w) if c == 0 else x.rjust(w) for c, (x, w) in enumerate(zip(r, widths))))
    if any(t.in_pretraining for t in report.tasks):
        lines.append("* in the pretrained model's training data: reported apart, left out of the mean")
    return "\n".join(lines)


def write_dump(report: ReplayReport, path: str | os.PathLike) -> None:
    """One JSON line per held-out record: ``{"task", "index", "measured_s", "score"}``."""
    with open(path, "w", encoding="utf-8") as f:
        for row in report.predictions:
            f.write(json.dumps(row) + "\n")


def plot_report(report: ReplayReport, path: str | os.PathLike) -> None:
    """PNG: per task, predicted score vs measured latency (log x), and the
    simulated search's best latency found vs trials."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = [t.task for t in report.tasks]
    fig = Figure(figsize=(10, 3.0 * len(names) + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(names), 2, squeeze=False)
    by_task: dict[str, list[dict]] = {}
    for row in report.predictions:
        by_task.setdefault(row["task"], []).append(row)
    for (ax_s, ax_c), metrics in zip(axes, report.tasks):
        rows = by_task.get(metrics.task, [])
        ax_s.scatter([r["measured_s"] * 1e3 for r in rows], [r["score"] for r in rows], s=10, alpha=0.7)
        ax_s.set_xscale("log")
        ax_s.set_xlabel("measured latency (ms)")
        ax_s.set_ylabel("predicted score")
        ax_s.set_title(f"{metrics.task}: Spearman {metrics.spearman:.2f}, top-1 {metrics.top1_score:.2f}")
        search = report.searches[metrics.task]
        trials = np.arange(1, len(search.best_so_far_s) + 1)
        ax_c.step(trials, search.best_so_far_s * 1e3, where="post")
        ax_c.axvline(search.trials_to_target, color="gray", linestyle=":", label="within 5% of best")
        ax_c.set_yscale("log")
        ax_c.set_xlabel("schedules measured")
        ax_c.set_ylabel("best latency found (ms)")
        ax_c.set_title(f"simulated search: {search.trials_to_target} trials to 5%")
        ax_c.legend(loc="upper right", fontsize="small")
    fig.suptitle(f"replay: model {report.model}, shots {report.shots}" + (", transfer" if report.transfer else ""))
    fig.savefig(path, format="png", dpi=90)
