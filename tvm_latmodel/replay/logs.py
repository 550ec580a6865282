"""Read MetaSchedule tuning databases line by line (trial order, line numbers kept).

A database directory holds ``database_workload.json`` and
``database_tuning_record.json`` (one JSON line per entry). Re-applying each
record's trace to its workload gives back the exact schedule, so a log can
be replayed without hardware. Bad lines (truncated or non-JSON, a missing
workload, failed or non-finite ``run_secs``, a trace that no longer applies)
are skipped with a :class:`ReplayWarning` naming the file and line; the good
records still count.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..latency import check_run_secs as _check_run_secs

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"

# Per database file, at most this many bad-line warnings are shown one by one;
# the rest are summed up in one more warning.
_MAX_LINE_WARNINGS = 20


class ReplayWarning(UserWarning):
    """A bad line in a tuning database, skipped; the message names file and line."""


@dataclass(eq=False)
class Record:
    """One measured candidate of a tuning log.

    Parameters
    ----------
    index : int
        Line number in ``database_tuning_record.json``, counting from 0.
    schedule : tvm.s_tir.Schedule
        The schedule rebuilt from the record's trace.
    run_secs : tuple of float
        The logged measurements, in seconds (all finite and positive).
    args_info : list of ms.arg_info.ArgInfo
        The kernel's arguments, as logged.
    """

    index: int
    schedule: Any
    run_secs: tuple[float, ...]
    args_info: list

    @property
    def trace(self):
        """The schedule's trace (``tvm.s_tir.Trace``)."""
        return self.schedule.trace

    @property
    def latency_s(self) -> float:
        """Measured latency in seconds: the mean of ``run_secs``."""
        return float(np.mean(self.run_secs))


@dataclass(eq=False)
class Task:
    """The valid records of one workload of one tuning database.

    Parameters
    ----------
    name : str
        The database's directory name (with ``[i]`` appended for workload
        ``i`` when one database holds several workloads).
    path : pathlib.Path
        The database directory.
    mod : tvm.IRModule
        The workload.
    target : tvm.target.Target
        The target the records were measured on (from the records, not from
        the machine replaying them).
    records : list of Record
        Valid records in file order.
    failed_indices : list of int
        Lines of this workload that were skipped (failed runs, bad values).
    """

    name: str
    path: Path
    mod: Any
    target: Any
    records: list[Record]
    failed_indices: list[int] = field(default_factory=list)
    _candidates: list | None = field(default=None, repr=False)
    _results: list | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def latencies_s(self) -> np.ndarray:
        """Measured latency of every record, seconds."""
        return np.array([r.latency_s for r in self.records], dtype=np.float64)

    def candidates(self) -> list:
        """``ms.MeasureCandidate`` of every record, built once and cached."""
        if self._candidates is None:
            from tvm.s_tir import meta_schedule as ms

            self._candidates = [ms.MeasureCandidate(r.schedule, r.args_info) for r in self.records]
        return self._candidates

    def results(self) -> list:
        """``ms.runner.RunnerResult`` of every record (its logged ``run_secs``), cached."""
        if self._results is None:
            self._results = [_runner_result(r.run_secs) for r in self.records]
        return self._results


def _runner_result(run_secs: Sequence[float]):
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.RunnerResult(run_secs=[float(s) for s in run_secs], error_msg=None)


class _LineWarner:
    """Warn about bad lines of one file, the first few one by one, then a count."""

    def __init__(self, path: Path):
        self.path = path
        self.count = 0

    def __call__(self, line_no: int, message: str) -> None:
        self.count += 1
        if self.count <= _MAX_LINE_WARNINGS:
            warnings.warn(f"{self.path}, line {line_no + 1}: {message}", ReplayWarning, stacklevel=3)

    def finish(self) -> None:
        if self.count > _MAX_LINE_WARNINGS:
            warnings.warn(
                f"{self.path}: {self.count - _MAX_LINE_WARNINGS} more bad lines not shown "
                f"({self.count} in all)",
                ReplayWarning,
                stacklevel=3,
            )


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    first = next((t for t in text if t.strip()), type(err).__name__)
    return first if len(first) <= 300 else first[:297] + "..."


def _parse_json_line(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except json.JSONDecodeError as err:
        return None, f"not valid JSON ({err.msg} at column {err.colno}; truncated line?)"


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text ({err})") from None


def load_database(directory: str | os.PathLike, *, name: str | None = None, progress: bool = False) -> list[Task]:
    """Load one tuning database directory.

    Parameters
    ----------
    directory : path
        Holds ``database_workload.json`` and ``database_tuning_record.json``.
    name : str, optional
        Task name (default: the directory's name).
    progress : bool
        Show a tqdm bar on stderr while schedules are rebuilt.

    Returns
    -------
    list of Task
        One per workload that has valid records, in workload order; empty if
        the database holds no valid record.

    Raises
    ------
    ValueError
        If one of the two files is missing.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms

    directory = Path(directory)
    name = name or directory.resolve().name
    wl_path, rec_path = directory / WORKLOAD_FILE, directory / RECORD_FILE
    for p in (wl_path, rec_path):
        if not p.is_file():
            raise ValueError(f"{directory}: not a MetaSchedule tuning database ({p.name} is missing)")

    workloads: dict[int, Any] = {}
    warn_wl = _LineWarner(wl_path)
    for i, text in enumerate(_read_lines(wl_path)):
        if not text.strip():
            continue
        obj, why = _parse_json_line(text)
        if why is None:
            try:
                workloads[i] = ms.database.Workload.from_json(obj)
            except Exception as err:  # TVM raises its own error types
                why = f"not a MetaSchedule workload ({_short(err)})"
        if why is not None:
            warn_wl(i, why)
    warn_wl.finish()

    warn = _LineWarner(rec_path)
    lines = _read_lines(rec_path)
    by_workload: dict[int, Task] = {}
    failed: dict[int, list[int]] = {}
    target_text: dict[int, str] = {}

    rows: Iterable = enumerate(lines)
    if progress:
        from tqdm import tqdm

        rows = tqdm(rows, total=len(lines), desc=f"load {name}", unit="rec", file=sys.stderr, leave=False)
    for i, text in rows:
        if not text.strip():
            continue
        obj, why = _parse_json_line(text)
        if why is not None:
            warn(i, why)
            continue
        if not (
            isinstance(obj, list)
            and len(obj) == 2
            and isinstance(obj[0], int)
            and isinstance(obj[1], list)
            and len(obj[1]) == 4
        ):
            warn(i, "not a tuning record: expected [workload_index, [trace, run_secs, target, args_info]]")
            continue
        wl_index, (trace_json, raw_secs, target_json, args_json) = obj
        if wl_index not in workloads:
            warn(i, f"workload index {wl_index} is not in {wl_path.name} (valid: {sorted(workloads)})")
            continue
        run_secs, why = _check_run_secs(raw_secs)
        if why is not None:
            warn(i, why)
            failed.setdefault(wl_index, []).append(i)
            continue
        try:
            target = tvm.target.Target(target_json)
        except Exception as err:
            warn(i, f"bad target {json.dumps(target_json)[:120]} ({_short(err)})")
            continue
        try:
            args_info = [ms.arg_info.ArgInfo.from_json(a) for a in args_json]
        except Exception as err:
            warn(i, f"bad args_info ({_short(err)})")
            continue
        mod = workloads[wl_index].mod
        try:
            # Equivalent to TuningRecord.from_json(...).trace.apply_to_schedule(
            # Schedule(mod), remove_postproc=False), with one rebuild instead of two.
            sch = tvm.s_tir.Schedule(mod)
            tvm.s_tir.schedule.Trace.apply_json_to_schedule(trace_json, sch)
        except Exception as err:
            warn(i, f"the trace no longer applies to the workload ({_short(err)})")
            continue
        text_t = str(target)
        if wl_index in target_text and text_t != target_text[wl_index]:
            warn(i, f"target {text_t} differs from this workload's earlier records ({target_text[wl_index]})")
            continue
        if wl_index not in by_workload:
            target_text[wl_index] = text_t
            by_workload[wl_index] = Task(name=name, path=directory, mod=mod, target=target, records=[])
        by_workload[wl_index].records.append(Record(i, sch, run_secs, args_info))
    warn.finish()

    tasks = [by_workload[k] for k in sorted(by_workload)]
    for k, task in zip(sorted(by_workload), tasks):
        task.failed_indices = failed.get(k, [])
        if len(tasks) > 1:
            task.name = f"{name}[{k}]"
    return tasks


def find_databases(path: str | os.PathLike) -> list[Path]:
    """Database directories at or under ``path`` (sorted).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If no database is found.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_file():
        if path.name in (WORKLOAD_FILE, RECORD_FILE):
            path = path.parent
        else:
            raise ValueError(f"{path}: not a MetaSchedule tuning database (give its directory)")
    if (path / RECORD_FILE).exists() or (path / WORKLOAD_FILE).exists():
        return [path]
    found = sorted({p.parent for p in path.rglob(RECORD_FILE)} | {p.parent for p in path.rglob(WORKLOAD_FILE)})
    if not found:
        raise ValueError(
            f"{path}: no MetaSchedule tuning database found (no {RECORD_FILE} and {WORKLOAD_FILE} in it or below)"
        )
    return found


def load_tasks(paths: str | os.PathLike | Sequence[str | os.PathLike], *, progress: bool = False) -> list[Task]:
    """Load tuning databases into tasks, rebuilding every schedule once.

    Parameters
    ----------
    paths : path or sequence of paths
        Database directories, or folders searched recursively for them.
    progress : bool
        Show tqdm bars on stderr.

    Returns
    -------
    list of Task
        In the order given (folders: sorted by path). Task names are made
        unique by prefixing parent folders where directory names collide.

    Raises
    ------
    ValueError
        A path with no database; a database given directly that holds no
        valid record; folders whose databases hold no valid record at all.
        (An empty database found inside a folder is skipped with a
        :class:`ReplayWarning`.)
    FileNotFoundError
        A path that does not exist.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise ValueError("no tuning database given")
    tasks: list[Task] = []
    seen: set[Path] = set()
    for given in paths:
        dirs = find_databases(given)
        # A database named directly (not found inside a folder) must hold records.
        direct = Path(given).is_file() or (len(dirs) == 1 and dirs[0] == Path(given))
        found = []
        for d in dirs:
            key = d.resolve()
            if key in seen:
                continue
            seen.add(key)
            loaded = load_database(d, progress=progress)
            if not loaded:
                msg = f"{d}: empty tuning database (no valid record in {RECORD_FILE})"
                if direct:
                    raise ValueError(msg)
                warnings.warn(msg + "; skipped", ReplayWarning, stacklevel=2)
            found.extend(loaded)
        if not found and not direct:
            raise ValueError(f"{given}: no tuning database under it holds a valid record")
        tasks.extend(found)
    _unique_names(tasks)
    return tasks


def _unique_names(tasks: list[Task]) -> None:
    names = [t.name for t in tasks]
    if len(set(names)) == len(names):
        return
    depth = 1
    while len(set(names)) < len(names) and depth < 64:
        depth += 1
        names = []
        for t in tasks:
            parts = t.path.resolve().parts[-depth:]
            suffix = t.name[len(t.path.resolve().name):]  # keep "[i]" of multi-workload databases
            names.append("/".join(parts) + suffix)
    for t, n in zip(tasks, names):
        t.name = n
