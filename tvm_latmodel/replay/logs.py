"""Read MetaSchedule tuning databases line by line (trial order, line numbers kept).

A database directory holds ``database_workload.json`` and
``database_tuning_record.json`` (one JSON line per entry). Re-applying each
record's trace to its workload gives back the exact schedule, so a log can
be replayed without hardware. Bad lines (truncated, not UTF-8 or not JSON,
a missing workload, failed or non-finite ``run_secs``, arguments that are
not the workload's, a trace that no longer applies) are skipped with a
:class:`ReplayWarning` naming the file and line; the good records still
count, and each task says which lines were skipped.

A database a running tuner is still appending to can be read: a last line
without its newline that is not JSON is a line still being written; it is
skipped with one warning that says so, and counted.

A ``hardware.json`` (a spec as ``tvm-latmodel calibrate`` and
``scripts/record_logs.py`` write) in the database directory or the folder
above it names the machine that measured the records; each task carries it
(``Task.hardware``) so that the logs are scored with that machine's spec
wherever they are replayed.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..traces import check_trace_json
from ..latency import check_run_secs as _check_run_secs

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
#: The measuring machine's spec, in a database directory or the folder above it.
HARDWARE_FILE = "hardware.json"

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
    skipped_lines : dict of str to list of int
        For each of the database's two files (``database_workload.json``,
        ``database_tuning_record.json``), the lines (from 0) skipped as
        unreadable: not UTF-8 or not JSON, not a workload or record, an
        unknown workload, a bad target or args_info, a trace that no longer
        applies, an incomplete last line. The same for every task of one
        database; failed measurements are in ``failed_indices`` instead.
    incomplete_files : list of str
        Files of the database whose last line had no newline and was not
        JSON: a line still being written by a running tuner (skipped, and
        counted in ``skipped_lines``).
    hardware : HardwareSpec or None
        The spec of the machine that measured the records, from the
        ``hardware.json`` beside the database (see :func:`measuring_spec`);
        None when there is none, and models then derive one from ``target``.
    """

    name: str
    path: Path
    mod: Any
    target: Any
    records: list[Record]
    failed_indices: list[int] = field(default_factory=list)
    skipped_lines: dict[str, list[int]] = field(default_factory=dict)
    incomplete_files: list[str] = field(default_factory=list)
    hardware: Any = None
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
    """Warn about bad lines of one file, the first few one by one, then a count.

    Every skipped line is remembered (``lines``), shown or not; a failed
    measurement is warned about but is not a skipped line.
    """

    def __init__(self, path: Path):
        self.path = path
        self.lines: list[int] = []
        self.count = 0
        self.incomplete = False

    def __call__(self, line_no: int, message: str, skipped: bool = True) -> None:
        self.count += 1
        if skipped:
            self.lines.append(line_no)
        if self.count <= _MAX_LINE_WARNINGS:
            warnings.warn(f"{self.path}, line {line_no + 1}: {message}", ReplayWarning, stacklevel=3)

    def still_written(self, line_no: int, why: str) -> None:
        """The last line, without its newline and not JSON: always one warning of its own."""
        self.lines.append(line_no)
        self.incomplete = True
        self.count += 1
        warnings.warn(
            f"{self.path}, line {line_no + 1}: incomplete last line (no newline at the end and {why}): "
            "it looks like a line still being written by a running tuner; skipped",
            ReplayWarning,
            stacklevel=3,
        )

    def finish(self) -> None:
        shown = _MAX_LINE_WARNINGS + (1 if self.incomplete else 0)
        if self.count > shown:
            warnings.warn(
                f"{self.path}: {self.count - shown} more bad lines not shown "
                f"({self.count} in all)",
                ReplayWarning,
                stacklevel=3,
            )


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    first = next((t for t in text if t.strip()), type(err).__name__)
    return first if len(first) <= 300 else first[:297] + "..."


def _parse_json_line(text: str) -> tuple[Any, str | None]:
    # NaN and Infinity are read (a run_secs of NaN is a failed measurement,
    # said so by its own check); what Python refuses is reported, not raised.
    try:
        return json.loads(text), None
    except json.JSONDecodeError as err:
        return None, f"not valid JSON ({err.msg} at column {err.colno}; truncated line?)"
    except RecursionError:
        return None, "not valid JSON this reader accepts (nested too deeply)"
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        return None, f"not valid JSON this reader accepts ({_short(err)})"


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise ValueError(f"{path}: cannot read the tuning database file: {err.strerror or err}") from None


def _json_lines(path: Path, raw: bytes, warn: _LineWarner) -> Iterator[tuple[int, Any]]:
    """``(line number from 0, parsed JSON)`` of every good non-blank line of ``raw``.

    A line that is not UTF-8 or not JSON is reported to ``warn``; so is an
    incomplete last line (no newline at the end, not JSON), as still being
    written.
    """
    parts = raw.split(b"\n")
    open_end = parts[-1] != b""  # the last line has no newline
    if not open_end:
        parts.pop()
    last = len(parts) - 1
    for i, line in enumerate(parts):
        line = line.rstrip(b"\r")
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as err:
            why = f"not UTF-8 text (byte {line[err.start:err.start + 1]!r} at column {err.start + 1})"
        else:
            obj, why = _parse_json_line(text)
            if why is None:
                yield i, obj
                continue
        if open_end and i == last:
            warn.still_written(i, why)
        else:
            warn(i, why)


def _is_index(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


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
        the database holds no valid record. Bad lines are skipped with a
        :class:`ReplayWarning` naming the file and line (see
        :attr:`Task.skipped_lines`).

    Raises
    ------
    ValueError
        If one of the two files is missing or cannot be read.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms

    directory = Path(directory)
    name = name or directory.resolve().name
    wl_path, rec_path = directory / WORKLOAD_FILE, directory / RECORD_FILE
    for p in (wl_path, rec_path):
        if not p.is_file():
            raise ValueError(f"{directory}: not a MetaSchedule tuning database ({p.name} is missing)")
    # Records first: a tuner commits a workload before its records, so every
    # record read here has its workload in the workload file read after it.
    rec_raw = _read_bytes(rec_path)
    wl_raw = _read_bytes(wl_path)

    workloads: dict[int, Any] = {}
    expected_args: dict[int, tuple[list, Any]] = {}
    warn_wl = _LineWarner(wl_path)
    for i, obj in _json_lines(wl_path, wl_raw, warn_wl):
        try:
            workloads[i] = ms.database.Workload.from_json(obj)
            args_info = ms.arg_info.ArgInfo.from_prim_func(workloads[i].mod["main"])
            expected_args[i] = (args_info, json.loads(json.dumps([a.as_json() for a in args_info])))
        except Exception as err:  # TVM raises its own error types
            workloads.pop(i, None)
            warn_wl(i, f"not a MetaSchedule workload ({_short(err)})")
    warn_wl.finish()

    warn = _LineWarner(rec_path)
    by_workload: dict[int, Task] = {}
    failed: dict[int, list[int]] = {}
    target_text: dict[int, str] = {}

    rows: Iterable = _json_lines(rec_path, rec_raw, warn)
    if progress:
        from tqdm import tqdm

        rows = tqdm(rows, total=rec_raw.count(b"\n"), desc=f"load {name}", unit="rec", file=sys.stderr,
                    leave=False)
    for i, obj in rows:
        if not (
            isinstance(obj, list)
            and len(obj) == 2
            and _is_index(obj[0])
            and isinstance(obj[1], list)
            and len(obj[1]) == 4
        ):
            warn(i, "not a tuning record: expected [workload_index, [trace, run_secs, target, args_info]]")
            continue
        wl_index, (trace_json, raw_secs, target_json, args_json) = obj
        if wl_index not in workloads:
            shown = wl_index if abs(wl_index) < 10**12 else "(a huge number)"
            warn(i, f"workload index {shown} is not in {wl_path.name} (valid: {sorted(workloads)})")
            continue
        run_secs, why = _check_run_secs(raw_secs)
        if why is not None:
            warn(i, why, skipped=False)
            failed.setdefault(wl_index, []).append(i)
            continue
        if not isinstance(target_json, (dict, str)):
            warn(i, f"bad target {_json_text(target_json)} (a target is a JSON object)")
            continue
        try:
            target = tvm.target.Target(target_json)
        except Exception as err:
            warn(i, f"bad target {_json_text(target_json)} ({_short(err)})")
            continue
        args_info, args_expected = expected_args[wl_index]
        if args_json != args_expected:
            warn(i, f"args_info {_json_text(args_json)} is not the workload's arguments "
                    f"{_json_text(args_expected)}")
            continue
        why = check_trace_json(trace_json)
        if why is not None:  # TVM would crash on it, not raise
            warn(i, f"not a trace TVM can apply ({why})")
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
        by_workload[wl_index].records.append(Record(i, sch, run_secs, list(args_info)))
    warn.finish()

    skipped = {WORKLOAD_FILE: list(warn_wl.lines), RECORD_FILE: list(warn.lines)}
    incomplete = [w.path.name for w in (warn_wl, warn) if w.incomplete]
    tasks = [by_workload[k] for k in sorted(by_workload)]
    for k, task in zip(sorted(by_workload), tasks):
        task.failed_indices = failed.get(k, [])
        task.skipped_lines = skipped
        task.incomplete_files = incomplete
        if len(tasks) > 1:
            task.name = f"{name}[{k}]"
    return tasks


def _json_text(value: Any, limit: int = 120) -> str:
    try:
        text = json.dumps(value)
    except ValueError:  # an int of more digits than Python prints
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def family_of(task_name: str) -> str:
    """A task's workload family: its log's name up to the first ``_``
    (``C2D_1`` and ``cpu/C2D_1`` -> ``C2D``), as the offline studies group
    logs for leave-one-family-out."""
    return task_name.split("/")[-1].split("_")[0]


def find_databases(path: str | os.PathLike) -> list[Path]:
    """Database directories at or under ``path`` (sorted). A ``hardware.json``
    given as a path (as ``folder/*`` gives the one beside the databases) is
    the databases' spec, not a database: none is found there, quietly.

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
        if path.name == HARDWARE_FILE:
            return []
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
            else:
                spec = measuring_spec(d, loaded[0].target)
                for t in loaded:
                    t.hardware = spec
            found.extend(loaded)
        if not found and not direct:
            raise ValueError(f"{given}: no tuning database under it holds a valid record")
        tasks.extend(found)
    if not tasks:
        raise ValueError(f"no tuning database in {', '.join(map(str, paths))}")
    _unique_names(tasks)
    return tasks


def measuring_spec(db_dir: str | os.PathLike, target):
    """The spec of the machine that measured the database at ``db_dir``:
    ``hardware.json`` in that directory, else in the folder above it (where
    ``record_logs.py`` writes one for all its databases), checked by
    :func:`spec_for_records`; None if neither has one."""
    db_dir = Path(db_dir)
    for path in (db_dir / HARDWARE_FILE, db_dir.parent / HARDWARE_FILE):
        if path.is_file():
            return spec_for_records(path, target, f"the records of {db_dir}")
    return None


def spec_for_records(path: str | os.PathLike, target, records: str):
    """The spec saved at ``path``, as the spec of ``records`` (named in the
    message) measured for ``target``.

    Raises
    ------
    ValueError
        Naming the file: not a hardware spec (see ``HardwareSpec.load``), a
        spec of another kind than ``target`` (CPU against GPU), or of
        another CPU than the ``mcpu`` the records were measured for.
    """
    from ..hardware import load_hardware

    spec = load_hardware(target, str(path))
    logged = str(target.attrs.get("mcpu", "") or "") if target.kind.name == "llvm" else ""
    described = str(spec.extra.get("mcpu", "") or "")
    if logged and described and logged != described:
        raise ValueError(f"{path}: describes a {described} ({spec.name}), but {records} "
                         f"were measured for {logged}")
    return spec


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
