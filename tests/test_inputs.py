"""Inputs that cannot hurt: property-based tests of every reader of files.

Each reader is fed damaged copies of a valid file -- random truncations,
values of the wrong JSON type, NaN and infinities, huge and negative
numbers, unknown format versions, non-UTF-8 bytes, empty files, random
bytes -- and must either read it into something usable or refuse it with a
``ValueError`` whose message names the file. A bad line of a tuning log is
skipped with a ``ReplayWarning`` naming the file and line, and the good
lines are kept. Never a ``KeyError``, ``TypeError``, ``IndexError``,
``AttributeError``, XGBoost or TVM error from deep inside: any other
exception fails the test (and Hypothesis shrinks it to a minimal file).

The fixtures are small and real: a 16x16 matmul database written by TVM's
own ``JSONDatabase``, a hybrid model fitted on it and saved, hardware specs
from a target and a preset, and a GPU bundle of hand-scheduled CUDA
candidates (generating CUDA needs no GPU) with timer results for it.
"""

from __future__ import annotations

import copy
import gzip
import importlib.util
import json
import math
import os
import re
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import tvm
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tvm.s_tir import meta_schedule as ms

from tvm_latmodel import replay as rp
from tvm_latmodel.cli.main import build_parser
from tvm_latmodel.model.booster_check import check_xgboost_json
from tvm_latmodel.traces import check_trace_json
from tvm_latmodel.gpu.bundle import load_bundle, make_bundle, save_bundle, validate_bundle
from tvm_latmodel.gpu.importer import import_results, load_results
from tvm_latmodel.hardware import HardwareSpec
from tvm_latmodel.model.cost_model import HybridCostModel
from tvm_latmodel.sampling import make_context
from tvm_latmodel.targets import cuda_target
from tvm_latmodel.workloads import get_workload
from toys import gpu_softmax_schedule, square_matmul, tiled_matmul_schedule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 4}
N_RECORDS = 6

# deadline=None: one example loads TVM schedules or XGBoost (tens of ms, more
# on a loaded machine); database=None: no .hypothesis folder in the checkout.
_COMMON = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.data_too_large])


def _settings(n: int):
    return settings(max_examples=n, **_COMMON)


# ---------------------------------------------------------------------------
# Damage: strategies that break a valid JSON document or file
# ---------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")


class Raw(str):
    """A raw JSON literal put into the text as is (what json.dumps cannot write)."""


RAW_LITERALS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e999", "9" * 5000, "-" + "9" * 25,
                "[" * 3000 + "]" * 3000]

BAD_VALUES = st.one_of(
    st.sampled_from([None, True, False, 0, -1, -(2**31), 2**63, 2**64 + 1, 10**30, -(10**30), 1e308,
                     -1e308, 5e-324, -0.0, NAN, INF, -INF, "", "x", "NaN", [], {}, [None], [[]],
                     {"": None}, [1, 2, 3], {"format": 1}]),
    st.integers(),
    st.floats(),
    st.text(max_size=6),
    st.sampled_from(RAW_LITERALS).map(Raw),
)


def dumps(doc) -> str:
    """``json.dumps`` that also writes :class:`Raw` literals (NaN, 1e400, 5000 digits)."""
    raws: list[str] = []

    def sub(x):
        if isinstance(x, Raw):
            raws.append(str(x))
            return f"__raw_literal_{len(raws) - 1}__"
        if isinstance(x, dict):
            return {k: sub(v) for k, v in x.items()}
        if isinstance(x, list):
            return [sub(v) for v in x]
        return x

    text = json.dumps(sub(doc))
    for i, literal in enumerate(raws):
        text = text.replace(f'"__raw_literal_{i}__"', literal, 1)
    return text


def json_paths(doc, prefix=(), max_items: int = 3) -> list[tuple]:
    """Paths (keys and indices) into ``doc``, the root first. Of a list, only the
    first ``max_items`` elements are entered (long lists of alike values --
    training rows, trees, trace steps -- would otherwise drown the rest)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += json_paths(v, prefix + (k,), max_items)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:max_items]):
            out += json_paths(v, prefix + (i,), max_items)
    return out


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def mutated(draw, doc, paths=None):
    """A copy of ``doc`` with one change: a value replaced by a bad one, a key
    or element deleted, a number negated or blown up, a format version changed."""
    doc = copy.deepcopy(doc)
    paths = paths if paths is not None else json_paths(doc)
    path = draw(st.sampled_from(paths))
    op = draw(st.sampled_from(["replace", "replace", "delete", "number"]))
    old = _get(doc, path)
    if op == "number" and isinstance(old, (int, float)) and not isinstance(old, bool):
        new = draw(st.sampled_from([-old, -abs(old) - 1, old * 10**30, old + 2**64, old * 1e300 if old else 1e300,
                                    0, Raw("NaN"), Raw("1e400")]))
    elif op == "delete" and path:
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
        return doc
    else:
        new = draw(BAD_VALUES)
    if not path:
        return new
    _get(doc, path[:-1])[path[-1]] = new
    return doc


BAD_UTF8 = [b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xfe\xff", b"\xc0\xaf"]


@st.composite
def damage(draw, data: bytes):
    """``(kind, at, damaged)``: ``data`` truncated at ``at``, with a sequence that is not
    UTF-8 inserted at ``at``, emptied, or replaced by garbage."""
    kind = draw(st.sampled_from(["truncate", "truncate", "not_utf8", "empty", "garbage"]))
    if kind == "truncate":
        at = draw(st.integers(0, len(data) - 1))
        return kind, at, data[:at]
    if kind == "not_utf8":
        at = draw(st.integers(0, len(data)))
        return kind, at, data[:at] + draw(st.sampled_from(BAD_UTF8)) + data[at:]
    if kind == "empty":
        return kind, 0, b""
    return kind, 0, draw(st.binary(max_size=64))


def damaged_bytes(data: bytes):
    """Just the damaged bytes of :func:`damage`."""
    return damage(data).map(lambda d: d[2])


def refused_or_read(read, *names):
    """``read()``, or None when it refused with a ValueError whose message
    names one of ``names`` (the damaged file). Any other exception fails."""
    try:
        return read()
    except ValueError as err:
        message = str(err)
        assert any(str(n) in message for n in names), f"the message does not name {names}: {message}"
        assert not isinstance(err, (UnicodeError, json.JSONDecodeError)), f"a raw {type(err).__name__}"
        return None


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------


class ValidDatabase:
    """A MetaSchedule database of N_RECORDS 16x16 matmul schedules, and its text."""

    def __init__(self, directory):
        os.makedirs(directory, exist_ok=True)
        self.mod = square_matmul(16)
        db = ms.database.JSONDatabase(work_dir=str(directory))
        workload = db.commit_workload(self.mod)
        args_info = ms.arg_info.ArgInfo.from_prim_func(self.mod["main"])
        target = tvm.target.Target(TARGET)
        for n, (fi, fj) in enumerate([(2, 4), (4, 8), (1, 16), (8, 2), (16, 1), (2, 8)][:N_RECORDS]):
            sch = tiled_matmul_schedule(self.mod, fi, fj)
            secs = [1e-5 * (1 + n), 1.1e-5 * (1 + n)]
            db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, secs, target, args_info))
        self.dir = directory
        self.workload_bytes = (directory / rp.WORKLOAD_FILE).read_bytes()
        self.record_bytes = (directory / rp.RECORD_FILE).read_bytes()
        self.record_lines = self.record_bytes.decode().splitlines()
        assert len(self.record_lines) == N_RECORDS
        self.record_docs = [json.loads(t) for t in self.record_lines]
        self.record_paths = [json_paths(d) for d in self.record_docs]

    def copy_with(self, where, workload: bytes | None = None, records: bytes | None = None):
        os.makedirs(where, exist_ok=True)
        (where / rp.WORKLOAD_FILE).write_bytes(self.workload_bytes if workload is None else workload)
        (where / rp.RECORD_FILE).write_bytes(self.record_bytes if records is None else records)
        return where


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("inputs")


@pytest.fixture(scope="module")
def valid_db(scratch):
    return ValidDatabase(scratch / "valid_db")


class _Fresh:
    """A new empty directory under ``base`` for each Hypothesis example."""

    def __init__(self, base):
        self.base = base

    def __enter__(self):
        self.path = Path(tempfile.mkdtemp(dir=self.base))
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def _load(path, loader=rp.load_tasks):
    """``loader(path)`` with ReplayWarnings caught: ``(tasks or None, messages)``;
    None when it refused with a ValueError naming ``path``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tasks = refused_or_read(lambda: loader(path), path)
    others = [w for w in caught if not issubclass(w.category, rp.ReplayWarning)]
    assert not others, [str(w.message) for w in others]
    return tasks, [str(w.message) for w in caught]


_WARNING = re.compile(r"^(?P<file>.+?), line (?P<line>\d+): (?P<why>.+)$", re.S)
_SUMMARY = re.compile(r"^(?P<file>.+?): \d+ more bad lines not shown \((?P<total>\d+) in all\)$")


def _check_log(db, tasks, messages) -> dict:
    """What every load of a (damaged) database must satisfy; returns {line: why} of the warnings.

    Every warning names a file of the database and a line; every non-blank
    line of the record file is exactly one of: a record, a failed
    measurement, a skipped line (warned about); records hold valid
    measurements and rebuilt schedules.
    """
    files = {str(db / rp.WORKLOAD_FILE), str(db / rp.RECORD_FILE)}
    warned: dict[str, dict[int, str]] = {f: {} for f in files}
    totals: dict[str, int] = {}  # files with more bad lines than are shown one by one
    for m in messages:
        if "empty tuning database" in m:
            continue
        got = _SUMMARY.match(m)
        if got and got["file"] in files:
            totals[got["file"]] = int(got["total"])
            continue
        got = _WARNING.match(m)
        assert got and got["file"] in files, f"warning does not name a database file and line: {m}"
        warned[got["file"]][int(got["line"]) - 1] = got["why"]
    if tasks is None:
        return warned[str(db / rp.RECORD_FILE)]
    assert len(tasks) <= 1
    for task in tasks:
        kept = [r.index for r in task.records]
        assert kept == sorted(set(kept))
        skipped = task.skipped_lines[rp.RECORD_FILE]
        assert not set(kept) & set(task.failed_indices) and not set(kept) & set(skipped)
        assert not set(task.failed_indices) & set(skipped)
        for name, bad in ((rp.RECORD_FILE, set(skipped) | set(task.failed_indices)),
                          (rp.WORKLOAD_FILE, set(task.skipped_lines[rp.WORKLOAD_FILE]))):
            shown = set(warned[str(db / name)])
            if str(db / name) in totals:  # the first ones one by one, then a count of all
                assert shown <= bad and len(bad) == totals[str(db / name)]
            else:
                assert shown == bad
        lines = (db / rp.RECORD_FILE).read_bytes().split(b"\n")
        assert len(kept) + len(task.failed_indices) + len(skipped) == sum(1 for t in lines if t.strip())
        for r in task.records:
            assert r.run_secs and all(math.isfinite(s) and 0 < s < 1e9 for s in r.run_secs)
            assert isinstance(r.schedule.mod, tvm.IRModule)
        assert str(task.target.kind.name) == "llvm"
    return warned[str(db / rp.RECORD_FILE)]


# ---------------------------------------------------------------------------
# Tuning logs
# ---------------------------------------------------------------------------


@_settings(100)
@given(data=st.data())
def test_log_with_one_record_line_damaged(valid_db, scratch, data):
    """A record line with a bad value anywhere: skipped (or still valid); the other lines are kept."""
    k = data.draw(st.integers(0, N_RECORDS - 1), label="line")
    doc = data.draw(mutated(valid_db.record_docs[k], valid_db.record_paths[k]), label="record")
    lines = list(valid_db.record_lines)
    lines[k] = dumps(doc)
    with _Fresh(scratch) as tmp:
        db = valid_db.copy_with(tmp / "db", records=("\n".join(lines) + "\n").encode())
        tasks, messages = _load(db)
        warned = _check_log(db, tasks, messages)
        assert set(warned) <= {k} | {i for i, why in warned.items() if "differs from" in why}
        if tasks is None:  # only when no line is left: the damaged line was the only one
            pytest.fail(f"a database with {N_RECORDS - 1} good lines was refused: {messages}")
        (task,) = tasks
        kept = {r.index for r in task.records}
        assert set(range(k)) <= kept, "a valid record before the damaged line was lost"
        # after it, a line is lost only when the damaged line changed the task's target
        assert set(range(k + 1, N_RECORDS)) - kept <= {i for i, why in warned.items() if "differs from" in why}


@_settings(80)
@given(data=st.data())
def test_log_file_bytes_damaged(valid_db, scratch, data):
    """Either file truncated, with bytes that are not UTF-8, emptied or garbage."""
    which = data.draw(st.sampled_from([rp.RECORD_FILE, rp.WORKLOAD_FILE]), label="file")
    original = valid_db.record_bytes if which == rp.RECORD_FILE else valid_db.workload_bytes
    kind, at, damaged = data.draw(damage(original), label="damage")
    with _Fresh(scratch) as tmp:
        db = valid_db.copy_with(tmp / "db", **{"records" if which == rp.RECORD_FILE else "workload": damaged})
        tasks, messages = _load(db)
        warned = _check_log(db, tasks, messages)
        if which != rp.RECORD_FILE:
            return
        kept = {r.index for r in tasks[0].records} if tasks else set()
        if kind == "truncate":  # the complete lines before the cut are kept
            complete = damaged.count(b"\n")
            assert set(range(complete)) <= kept
            # a cut just before a newline leaves a complete JSON line: a record
            if damaged.rsplit(b"\n", 1)[-1].strip() and original[len(damaged)] != ord("\n"):
                assert complete in warned and "still being written" in warned[complete]
                assert tasks is None or tasks[0].incomplete_files == [rp.RECORD_FILE]
        elif kind == "not_utf8":  # only the line the bad bytes went into is lost
            bad_line = original[:at].count(b"\n")
            assert set(range(N_RECORDS)) - {bad_line} <= kept
            assert bad_line in warned and ("not UTF-8" in warned[bad_line] or "still being written" in warned[bad_line])


@_settings(30)
@given(cut=st.integers(min_value=1, max_value=10_000))
def test_log_being_appended_uses_complete_lines(valid_db, scratch, cut):
    """A tuner appending a line while replay reads: the half line is skipped with one
    warning that says it looks like a line still being written, and counted."""
    doc = copy.deepcopy(valid_db.record_docs[0])
    doc[1][1] = [4.2e-05]
    new_line = json.dumps(doc, separators=(",", ":"))
    cut = min(cut, len(new_line))
    with _Fresh(scratch) as tmp:
        db = valid_db.copy_with(tmp / "db", records=valid_db.record_bytes + new_line[:cut].encode())
        tasks, messages = _load(db)
        (task,) = tasks
        if cut == len(new_line):  # complete JSON, only the newline missing: a record
            assert [r.index for r in task.records] == list(range(N_RECORDS + 1))
            assert messages == [] and task.incomplete_files == []
            return
        assert [r.index for r in task.records] == list(range(N_RECORDS))
        assert task.skipped_lines == {rp.WORKLOAD_FILE: [], rp.RECORD_FILE: [N_RECORDS]}
        assert task.incomplete_files == [rp.RECORD_FILE]
        assert len(messages) == 1
        assert messages[0].startswith(f"{db / rp.RECORD_FILE}, line {N_RECORDS + 1}: incomplete last line")
        assert "still being written" in messages[0]


def test_replay_command_says_how_many_lines_it_skipped(valid_db, scratch, capsys):
    db = valid_db.copy_with(scratch / "appending",
                            records=valid_db.record_bytes + valid_db.record_lines[1][:57].encode())
    args = build_parser().parse_args(["replay", str(db), "--model", "random", "--json"])
    assert args.func(args) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["tasks"][0]["records"] == N_RECORDS
    assert f"{db / rp.RECORD_FILE}, line {N_RECORDS + 1}: incomplete last line" in err
    assert "still being written" in err
    assert f"{db}: used {N_RECORDS} records; skipped 1 unreadable line (1 of {rp.RECORD_FILE})" in err


def test_log_bad_lines_are_skipped_and_counted(valid_db, scratch):
    """Hand-picked holes the property tests found, one line each."""
    lines = list(valid_db.record_lines)
    doc = valid_db.record_docs[0]
    lines[1] = lines[1][:10] + "\xff\xfe" + lines[1][10:]  # written as latin-1 below: not UTF-8
    lines[2] = json.dumps([0, [doc[1][0], [10**400], doc[1][2], doc[1][3]]])  # run_secs overflow a double
    lines[3] = json.dumps([True, doc[1]])  # a bool is not a workload index
    lines[4] = json.dumps([0, [doc[1][0], doc[1][1], doc[1][2], [["TENSOR", "float32", [16, -16]]] * 3]])
    crash = copy.deepcopy(doc)
    crash[1][0][0][0][2][1] = None  # GetSBlock's function name: TVM 0.27 dereferences the null (SIGSEGV)
    lines[5] = json.dumps(crash)
    raw = "\n".join(lines).encode("latin-1") + b"\n" + b"[0, [" + b"9" * 5000 + b"]]\n"
    db = valid_db.copy_with(scratch / "holes", records=raw)
    tasks, messages = _load(db)
    (task,) = tasks
    assert [r.index for r in task.records] == [0]
    assert task.failed_indices == [2]
    assert task.skipped_lines[rp.RECORD_FILE] == [1, 3, 4, 5, 6]
    whys = _check_log(db, tasks, messages)
    assert "not UTF-8" in whys[1] and "not finite" in whys[2] and "not a tuning record" in whys[3]
    assert "not the workload's arguments" in whys[4] and "not a trace TVM can apply" in whys[5]
    assert "not valid JSON" in whys[6]


def test_many_bad_lines_are_shown_then_counted(valid_db, scratch):
    raw = valid_db.record_bytes + b"".join(b"garbage %d\n" % i for i in range(25)) + b"[0, [1"
    db = valid_db.copy_with(scratch / "many", records=raw)
    tasks, messages = _load(db)
    (task,) = tasks
    assert len(task) == N_RECORDS
    assert task.skipped_lines[rp.RECORD_FILE] == list(range(N_RECORDS, N_RECORDS + 26))
    assert len(messages) == 20 + 1 + 1  # 20 shown, the incomplete last line, a count of the rest
    assert any("still being written" in m for m in messages)
    assert messages[-1] == f"{db / rp.RECORD_FILE}: 5 more bad lines not shown (26 in all)"
    _check_log(db, tasks, messages)


# Traces that crashed TVM 0.27's Trace.apply_json_to_schedule (SIGSEGV, SIGFPE,
# abort) when fuzzed: each must be refused before TVM sees it.
_GET = ["GetSBlock", [], ["C", "main"], ["b0"]]
_LOOPS = ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]]
_TILE = ["SamplePerfectTile", ["l1"], [2, 16], ["v4", "v5"]]
_CRASHING_TRACES = [
    [[["GetSBlock", [], ["C", None], ["b0"]]], []],                 # null attribute
    [[["GetSBlock", [], ["C", [None]], ["b0"]]], []],               # null inside an attribute
    [[_GET, _LOOPS, ["Parallel", ["l1"], [None], []]], []],         # a null attribute too many
    [[_GET, _LOOPS, ["Annotate", ["None", 64], ["pragma"], []]], []],  # a None random variable
    [[_GET, _LOOPS, ["Fuse", ["l1", "None"], [1], ["l4"]]], []],
    [[_GET, _LOOPS, ["Annotate", [None, 64], ["pragma"], []]], []],  # a null input
    [[_GET, _LOOPS, _TILE], [[-1, [4, 4]]]],                        # negative decision index: abort()
    [[_GET, _LOOPS, _TILE], [[2, None]]],                           # null decision
    [[_GET, _LOOPS, _TILE], [[2, [16, 0]]]],                        # tile factor 0: division by zero
]


@pytest.mark.parametrize("trace", _CRASHING_TRACES)
def test_traces_that_crash_tvm_are_refused(trace):
    assert check_trace_json(trace) is not None


def test_valid_traces_pass_the_trace_check(valid_db):
    for doc in valid_db.record_docs:
        assert check_trace_json(doc[1][0]) is None
    layout = [[_GET, ["TransformLayout", ["b0", "{}"], [0, 0, None, 0], []]], []]  # pad_value=None is fine
    assert check_trace_json(layout) is None
    assert check_trace_json([[_GET, _LOOPS, _TILE, ["Split", ["l1", "None", "v5"], [1, 0], ["l6", "l7"]]],
                             [[2, [4, 4]]]]) is None


# ---------------------------------------------------------------------------
# Hardware specs
# ---------------------------------------------------------------------------

_SPEC_DOCS = None


def _spec_docs():
    global _SPEC_DOCS
    if _SPEC_DOCS is None:
        docs = [HardwareSpec.from_target(tvm.target.Target(TARGET)).to_dict(),
                HardwareSpec.from_preset("h200").to_dict()]
        _SPEC_DOCS = [(d, json_paths(d)) for d in json.loads(json.dumps(docs))]
    return _SPEC_DOCS


def _assert_usable_spec(spec: HardwareSpec) -> None:
    assert spec.kind in ("cpu", "gpu") and isinstance(spec.name, str)
    numbers = [spec.parallel_units, spec.vector_bits, spec.peak_gflops, spec.launch_overhead_s]
    numbers += [v for m in spec.memory for v in (m.size_bytes, m.bandwidth_gbps)]
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in numbers)
    assert spec.parallel_units >= 1 and spec.lanes(32) >= 1 and spec.peak_gflops > 0 and spec.memory
    assert all(m.size_bytes > 0 and m.bandwidth_gbps > 0 for m in spec.memory)
    doc = json.loads(json.dumps(spec.to_dict(), allow_nan=False))
    assert HardwareSpec.from_dict(doc) == spec


@_settings(200)
@given(data=st.data())
def test_hardware_spec_file_damaged(scratch, data):
    doc, paths = data.draw(st.sampled_from(_spec_docs()), label="spec")
    if data.draw(st.booleans(), label="json damage"):
        content = dumps(data.draw(mutated(doc, paths), label="doc")).encode()
    else:
        content = data.draw(damaged_bytes(json.dumps(doc, indent=1).encode()), label="bytes")
    with _Fresh(scratch) as tmp:
        path = tmp / "spec.json"
        path.write_bytes(content)
        spec = refused_or_read(lambda: HardwareSpec.load(str(path)), path)
        if spec is not None:
            _assert_usable_spec(spec)


def test_hardware_spec_with_nan_in_extra_is_refused():
    """Found by the property test below: a NaN inside ``extra`` loaded, and
    the spec could then not be saved again."""
    doc, _ = _spec_docs()[0]
    doc = json.loads(json.dumps(doc))
    doc["spec"]["extra"]["mcpu"] = float("nan")
    with pytest.raises(ValueError, match=r"^model.json: .*extra must be JSON data with finite numbers"):
        HardwareSpec.from_dict(doc, origin="model.json")


@_settings(200)
@given(data=st.data())
def test_hardware_spec_from_dict_damaged(data):
    doc, paths = data.draw(st.sampled_from(_spec_docs()), label="spec")
    bad = data.draw(mutated(doc, paths), label="doc")
    bad = json.loads(json.dumps(bad)) if not isinstance(bad, Raw) else bad  # a Raw is a str here
    spec = refused_or_read(lambda: HardwareSpec.from_dict(bad, origin="model.json"), "model.json")
    if spec is not None:
        _assert_usable_spec(spec)


def test_spec_header_is_checked_in_one_place(scratch):
    """format / format_version / package_version: the same check and message for
    a spec file and a spec dict embedded in another file."""
    good = HardwareSpec.from_preset("t4").to_dict()
    for change, needle in [({"format_version": True}, "format version True"),
                           ({"format_version": 1.0}, "format version 1.0"),
                           ({"package_version": 3}, "package_version must be"),
                           ({"format": None}, "not a tvm-latmodel hardware spec")]:
        bad = {**good, **change}
        with pytest.raises(ValueError, match=re.escape("embedded.json: ") + ".*" + re.escape(needle)):
            HardwareSpec.from_dict(bad, origin="embedded.json")
        path = scratch / "header.json"
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=re.escape(f"{path}: ") + ".*" + re.escape(needle)):
            HardwareSpec.load(str(path))


# ---------------------------------------------------------------------------
# Model files
# ---------------------------------------------------------------------------


class SavedModel:
    """A hybrid model fitted on the valid database and saved: its three files."""

    def __init__(self, db: ValidDatabase, folder):
        (task,) = rp.load_tasks(db.dir)
        self.context = make_context(task.mod, task.target)
        self.candidates = task.candidates()[:3]
        model = HybridCostModel(min_samples=4, seed=0, pretrained=None)
        model.update(self.context, task.candidates(), task.results())
        model.refit()
        assert model.model_ is not None, "the fixture model must have a fitted residual"
        os.makedirs(folder, exist_ok=True)
        self.path = folder / "m.json"
        model.save(str(self.path))
        self.files = sorted(p.name for p in folder.iterdir())
        assert self.files == ["m.json", "m.json.residual.json", "m.json.residual.json.xgb.json"], self.files
        self.bytes = {name: (folder / name).read_bytes() for name in self.files}
        self.docs = {name: json.loads(b) for name, b in self.bytes.items()}
        self.paths = {name: json_paths(d) for name, d in self.docs.items()}
        self.scores = model.predict(self.context, self.candidates)


@pytest.fixture(scope="module")
def saved_model(valid_db, scratch):
    return SavedModel(valid_db, scratch / "model")


def _load_model(path, how: str):
    if how == "load":
        model = HybridCostModel()
        model.load(str(path))
        return model
    return HybridCostModel(pretrained=str(path))


def _check_model_damage(saved: SavedModel, scratch, name: str, content: bytes, how: str) -> None:
    """Load the model with file ``name`` replaced by ``content``: refused naming that
    file, or read into a model that scores the candidates with finite positive scores."""
    with _Fresh(scratch) as tmp:
        for other, raw in saved.bytes.items():
            (tmp / other).write_bytes(content if other == name else raw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            model = refused_or_read(lambda: _load_model(tmp / "m.json", how), tmp / name)
            if model is not None:
                scores = model.predict(saved.context, saved.candidates)
                assert scores.shape == (len(saved.candidates),)
                assert np.all(np.isfinite(scores)) and np.all(scores > 0), scores


MODEL_META, RESIDUAL_META, BOOSTER = "m.json", "m.json.residual.json", "m.json.residual.json.xgb.json"


@_settings(150)
@given(data=st.data())
def test_model_file_bytes_damaged(saved_model, scratch, data):
    """The model or residual file truncated, not UTF-8, empty or garbage."""
    name = data.draw(st.sampled_from([MODEL_META, RESIDUAL_META]), label="file")
    content = data.draw(damaged_bytes(saved_model.bytes[name]), label="bytes")
    how = data.draw(st.sampled_from(["load", "pretrained"]), label="how")
    _check_model_damage(saved_model, scratch, name, content, how)


_HEADER_KEYS = ("format", "format_version", "package_version")


@_settings(100)
@given(data=st.data())
def test_model_file_header_damaged(saved_model, scratch, data):
    """A model or residual file's format, version or package version wrong, or a raw
    NaN, Infinity, 1e400 or 5000-digit number anywhere in it."""
    name = data.draw(st.sampled_from([MODEL_META, RESIDUAL_META]), label="file")
    doc = copy.deepcopy(saved_model.docs[name])
    if data.draw(st.booleans(), label="header"):
        key = data.draw(st.sampled_from(_HEADER_KEYS), label="key")
        doc[key] = data.draw(BAD_VALUES | st.integers(2, 10**6), label="value")
    else:
        path = data.draw(st.sampled_from([p for p in saved_model.paths[name] if p]), label="path")
        _get(doc, path[:-1])[path[-1]] = Raw(data.draw(st.sampled_from(RAW_LITERALS[:6]), label="raw"))
    how = data.draw(st.sampled_from(["load", "pretrained"]), label="how")
    _check_model_damage(saved_model, scratch, name, dumps(doc).encode(), how)


@settings(max_examples=150, derandomize=True, phases=[Phase.explicit, Phase.reuse, Phase.generate], **_COMMON)
@given(data=st.data())
def test_model_files_damaged_anywhere(saved_model, scratch, data):
    """Any value of the model or residual file replaced, deleted or blown up, or the
    booster file truncated, not UTF-8 or garbage. (Derandomized: the same examples
    each run, so that the strict xfail is stable; not shrunk while it is expected
    to fail.)"""
    name = data.draw(st.sampled_from([MODEL_META, RESIDUAL_META, BOOSTER]), label="file")
    if name == BOOSTER:  # its structure is damaged in test_xgboost_check_*: unchecked, XGBoost crashes
        content = data.draw(damaged_bytes(saved_model.bytes[name]), label="bytes")
    else:
        content = dumps(data.draw(mutated(saved_model.docs[name], saved_model.paths[name]), label="doc")).encode()
    how = data.draw(st.sampled_from(["load", "pretrained"]), label="how")
    _check_model_damage(saved_model, scratch, name, content, how)


# One concrete case of each kind of hole the property test found in the model
# readers (file, path into it, value); each must be refused naming the file.
_MODEL_HOLE_CASES = [
    (MODEL_META, ("params",), []),                      # AttributeError: 'list' object has no attribute 'get'
    (MODEL_META, ("fitted_on",), {}),                   # TypeError from int()
    (MODEL_META, ("failed_count",), "x"),               # ValueError from int() without the file's name
    (MODEL_META, ("residual_file",), -1),               # TypeError from os.path.join
    (MODEL_META, ("fitted_counts",), True),             # AttributeError: 'bool' object has no attribute 'items'
    (MODEL_META, ("training", "X", 0, 0), [None]),      # TypeError from float()
    (MODEL_META, ("training", "groups"), 0),            # TypeError: 'int' object is not iterable
    (MODEL_META, ("trained_on",), 0),                   # TypeError: 'int' object is not iterable (pretrained)
    (RESIDUAL_META, ("n_samples",), "x"),               # ValueError from int() without the file's name
    (BOOSTER, None, b"\xff"),                          # RuntimeError (UnicodeDecodeError) from xgboost.compat
]


@pytest.mark.parametrize("name, path, value", _MODEL_HOLE_CASES)
def test_model_loader_hole(saved_model, scratch, name, path, value):
    if path is None:
        content = value + saved_model.bytes[name]
    else:
        doc = copy.deepcopy(saved_model.docs[name])
        _get(doc, path[:-1])[path[-1]] = value
        content = dumps(doc).encode()
    for how in ("load", "pretrained"):
        _check_model_damage(saved_model, scratch, name, content, how)


_BOOSTER_SEGFAULT = """
import sys
from tvm_latmodel.model.residual import ResidualModel
import numpy as np
try:
    model, _ = ResidualModel.load(sys.argv[1])
    model.predict(np.zeros((2, model.n_features_in_)))
except ValueError as err:
    print("refused:", err)
"""


def test_model_booster_out_of_range_is_refused_not_a_crash(saved_model, scratch):
    """A booster that splits on feature 10^9 makes XGBoost read out of bounds: the
    process dies (SIGSEGV) unless the loader checks it first (check_xgboost_json)."""
    import subprocess
    import sys

    folder = scratch / "segfault"
    folder.mkdir(exist_ok=True)
    for name in (RESIDUAL_META, BOOSTER):
        (folder / name).write_bytes(saved_model.bytes[name])
    doc = copy.deepcopy(saved_model.docs[BOOSTER])
    tree = next(t for t in doc["learner"]["gradient_booster"]["model"]["trees"] if len(t["split_indices"]) > 1)
    tree["split_indices"][0] = 10**9
    (folder / BOOSTER).write_text(json.dumps(doc))
    run = subprocess.run([sys.executable, "-c", _BOOSTER_SEGFAULT, str(folder / RESIDUAL_META)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"exit status {run.returncode}: {run.stderr[-500:]}"
    assert f"refused: {folder / BOOSTER}" in run.stdout


def _xgboost_runs(path, n_features: int) -> np.ndarray:
    import xgboost as xgb

    booster = xgb.Booster()
    booster.load_model(str(path))
    booster.set_param({"nthread": 1})
    return booster.predict(xgb.DMatrix(np.ones((3, n_features), dtype=np.float32)), output_margin=True)


@_settings(200)
@given(data=st.data())
def test_xgboost_check_guards_xgboost(saved_model, scratch, data):
    """booster_check.check_xgboost_json on a damaged booster: refused naming the file, or
    XGBoost loads it and predicts finite values (never a crash of the process)."""
    import xgboost as xgb

    n_features = saved_model.docs[BOOSTER]["learner"]["learner_model_param"]["num_feature"]
    if data.draw(st.booleans(), label="json damage"):
        content = dumps(data.draw(mutated(saved_model.docs[BOOSTER], saved_model.paths[BOOSTER]), label="doc"))
        content = content.encode()
    else:
        content = data.draw(damaged_bytes(saved_model.bytes[BOOSTER]), label="bytes")
    with _Fresh(scratch) as tmp:
        path = tmp / BOOSTER
        path.write_bytes(content)
        doc = refused_or_read(lambda: check_xgboost_json(path, num_features=int(n_features)), path)
        if doc is None:
            return
        try:
            out = _xgboost_runs(path, int(n_features))
        except xgb.core.XGBoostError:  # XGBoost's own, clean refusal of what it checks itself
            return
        assert np.all(np.isfinite(out)), out


# ---------------------------------------------------------------------------
# GPU bundles and timer results
# ---------------------------------------------------------------------------


def _load_timer():
    spec = importlib.util.spec_from_file_location("gpu_timer_inputs", os.path.join(ROOT, "scripts", "gpu_timer.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _gmm_schedule(mod, threads: int):
    sch = tvm.s_tir.Schedule(mod)
    b, i, j, _ = sch.get_loops(sch.get_sblock("Z"))
    bx, tx = sch.split(sch.fuse(b, i, j), [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


class GpuFiles:
    """A bundle of hand-scheduled GMM:0 and SFM:0 candidates, and timer results for it."""

    def __init__(self, folder):
        self.timer = _load_timer()
        extra = {"GMM:0": [_gmm_schedule(get_workload("GMM:0"), t) for t in (64, 128)],
                 "SFM:0": [gpu_softmax_schedule(get_workload("SFM:0"))]}
        bundle = make_bundle(["GMM:0", "SFM:0"], cuda_target("h200"), per_workload=0, extra_schedules=extra)
        self.bundle = json.loads(json.dumps(bundle))
        assert [len(w["candidates"]) for w in self.bundle["workloads"]] == [2, 1]
        os.makedirs(folder, exist_ok=True)
        self.bundle_path = folder / "bundle.json"
        save_bundle(self.bundle, self.bundle_path)
        self.bundle_bytes = self.bundle_path.read_bytes()
        self.bundle_gz = gzip.compress(self.bundle_bytes)
        self.bundle_paths = json_paths(self.bundle)
        self.results = {
            "format": self.timer.RESULTS_FORMAT,
            "version": self.timer.RESULTS_VERSION,
            "bundle_sha256": self.timer.file_sha256(str(self.bundle_path)),
            "workloads": [
                {"name": "GMM:0", "candidates": [
                    {"index": 0, "status": "ok", "times_s": [2e-5, 3e-5, 2.5e-5], "median_s": 2.5e-5,
                     "check": {"max_abs_err": NAN}},  # the timer may write NaN statistics
                    self.timer.failure_record(1, "compile_error", "ptxas error"),
                ]},
                {"name": "SFM:0", "candidates": [
                    {"index": 0, "status": "ok", "times_s": [1e-5, 1.2e-5]},
                ]},
            ],
        }
        self.results_text = json.dumps(self.results, indent=1)
        self.results_doc = json.loads(self.results_text)
        self.results_paths = json_paths(self.results_doc)


@pytest.fixture(scope="module")
def gpu_files(scratch):
    return GpuFiles(scratch / "gpu")


def test_gpu_fixture_imports(gpu_files, scratch):
    path = scratch / "results_ok.json"
    path.write_text(gpu_files.results_text)
    summary = import_results(gpu_files.bundle_path, path, scratch / "imported")
    assert summary.records == {"GMM:0": 1, "SFM:0": 1}
    for name in ("GMM:0", "SFM:0"):
        (task,) = rp.load_tasks(summary.work_dirs[name])
        assert len(task) == 1 and task.target.kind.name == "cuda"


@_settings(150)
@given(data=st.data())
def test_bundle_damaged(gpu_files, scratch, data):
    """A damaged bundle file is refused naming the file, or is one the TVM-less timer accepts too."""
    kind = data.draw(st.sampled_from(["json", "json", "bytes", "gzip"]), label="damage")
    if kind == "json":
        doc = data.draw(mutated(gpu_files.bundle, gpu_files.bundle_paths), label="doc")
        content, name = dumps(doc).encode(), "bundle.json"
    elif kind == "bytes":
        content, name = data.draw(damaged_bytes(gpu_files.bundle_bytes), label="bytes"), "bundle.json"
    else:
        content, name = data.draw(damaged_bytes(gpu_files.bundle_gz), label="gzip bytes"), "bundle.json.gz"
    with _Fresh(scratch) as tmp:
        path = tmp / name
        path.write_bytes(content)
        bundle = refused_or_read(lambda: load_bundle(path), path)
    if bundle is not None:
        validate_bundle(bundle, "again")
        gpu_files.timer.validate_bundle(bundle, "timer")  # what we accept, the timer accepts
    if kind == "json":  # the same check on the object, without a file
        refused_or_read(lambda: validate_bundle(doc, "where.json"), "where.json")


def test_bundle_mod_json_is_checked_before_tvm_parses_it(gpu_files, scratch):
    """TVM's JSON loader crashes on some damaged node graphs: a bundle carries the
    SHA-256 of each mod_json, and a damaged one is refused before TVM sees it."""
    doc = copy.deepcopy(gpu_files.bundle)
    wl = doc["workloads"][0]
    assert len(wl["mod_json_sha256"]) == 64
    graph = json.loads(wl["mod_json"])
    graph["nodes"][5] = {"type": "None"}  # one of the damages that crash tvm.ir.load_json
    wl["mod_json"] = json.dumps(graph)
    path = scratch / "damaged_mod.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=re.escape(f"{path}: workloads[0] (GMM:0): mod_json does not match")):
        load_bundle(path)


def _tvm_paths(bundle) -> list[tuple]:
    """Paths into the parts of a bundle that TVM parses: target, mod_json, traces, hashes."""
    out = []
    for p in json_paths(bundle, max_items=8):
        if p[:1] == ("target",) or (len(p) >= 3 and p[2] in ("mod_json", "mod_json_sha256", "workload_hash")) or (
            len(p) >= 5 and p[4] in ("trace", "mod_hash")
        ):
            out.append(p)
    return out


@_settings(40)
@given(data=st.data())
def test_import_with_damaged_tvm_content(gpu_files, scratch, data):
    """Damage where only TVM can tell (target, workload module, traces): import refuses naming the bundle."""
    paths = _tvm_paths(gpu_files.bundle)
    doc = data.draw(mutated(gpu_files.bundle, paths), label="doc")
    if isinstance(doc, dict) and doc.get("workloads") and data.draw(st.booleans(), label="mod_json cut"):
        wl = doc["workloads"][0]
        if isinstance(wl, dict) and isinstance(wl.get("mod_json"), str):
            wl["mod_json"] = wl["mod_json"][: data.draw(st.integers(0, len(wl["mod_json"]) - 1))]
            if data.draw(st.booleans(), label="drop its sha256"):  # as in a bundle written before it was added
                wl.pop("mod_json_sha256", None)
    results = {k: v for k, v in gpu_files.results.items() if k != "bundle_sha256"}
    with _Fresh(scratch) as tmp:
        bundle_path = tmp / "bundle.json"
        bundle_path.write_text(dumps(doc))
        results_path = tmp / "results.json"
        results_path.write_text(json.dumps(results))
        summary = refused_or_read(lambda: import_results(bundle_path, results_path, tmp / "db"), bundle_path)
        if summary is not None:
            assert sum(summary.records.values()) == 2


@_settings(80)
@given(data=st.data())
def test_results_damaged(gpu_files, scratch, data):
    """Damaged timer results: refused naming the file, or imported into databases replay reads cleanly."""
    if data.draw(st.booleans(), label="json damage"):
        content = dumps(data.draw(mutated(gpu_files.results_doc, gpu_files.results_paths), label="doc")).encode()
    else:
        content = data.draw(damaged_bytes(gpu_files.results_text.encode()), label="bytes")
    with _Fresh(scratch) as tmp:
        path = tmp / "results.json"
        path.write_bytes(content)
        res = refused_or_read(lambda: load_results(path), path)
        if res is None:
            return
        summary = refused_or_read(lambda: import_results(gpu_files.bundle_path, path, tmp / "db"), path)
        if summary is None:
            return
        for name, n in summary.records.items():
            if n:
                tasks, messages = _load(summary.work_dirs[name])
                assert messages == [] and len(tasks[0]) == n


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_inputs", os.path.join(ROOT, "scripts", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_offline_comparison_skips_shots_a_log_cannot_hold(tmp_path):
    """64 shots on a 64-record log leave nothing to score: that setting is
    skipped for that task (and said so in the table), not a crash."""
    oc = _load_script("offline_comparison")

    class _Task:
        name = "T_small"
        records = [object()] * 64

    r = oc.run_one([], _Task(), "random", 64, False, 0)
    assert "skipped" in r and "64 valid records" in r["skipped"]

    metrics = {k: 1.0 for k in oc.KEYS}
    results = {}
    for t in ("A", "B"):
        for m in ("analytical", "random"):
            results[(m, 0, False, t, 0)] = {"metrics": dict(metrics, spearman=0.5 if t == "A" else 0.1)}
            results[(m, 64, False, t, 0)] = ({"skipped": "too few"} if t == "B"
                                             else {"metrics": dict(metrics, spearman=0.9)})
    settings = [(0, False), (64, False)]
    table = oc.write_tables(str(tmp_path), settings, ("analytical", "random"), results, ["A", "B"], [0])
    rows = {tuple(c.strip() for c in line.split("|")[1:4]): line for line in table.splitlines()
            if line.startswith("| 0 shots") or line.startswith("| 64 shots")}
    assert "0.300" in rows[("0 shots", "analytical", "2")]  # mean of A and B
    assert "0.900" in rows[("64 shots", "analytical", "1")]  # A only
    assert "64 shots: not scored on B" in table
    assert oc._read_cached(str(tmp_path / "missing.json")) is None
    (tmp_path / "skip.json").write_text(json.dumps({"skipped": "too few"}))
    assert oc._read_cached(str(tmp_path / "skip.json")) == {"skipped": "too few"}


class _NamedTask:
    def __init__(self, name):
        self.name = name


def _tasks_scored_among(oc, monkeypatch, tasks, task) -> list[str]:
    """The names of the tasks ``oc.run_one`` hands the evaluator when it
    scores ``task`` with transfer (the evaluator is stopped there)."""
    import tvm_latmodel.replay as replay

    seen = []

    class _Ev:
        def __init__(self, **kw):
            pass

        def scorable(self, task):
            return True

        def evaluate(self, tasks, factory, model_name, only):
            seen.append([t.name for t in tasks])
            raise RuntimeError("stop here")

    monkeypatch.setattr(replay, "ReplayEvaluator", _Ev)
    with pytest.raises(RuntimeError, match="stop here"):
        oc.run_one(tasks, task, "random", 0, True, 0)
    return seen[0]


def test_offline_comparison_family_transfer_leaves_the_family_out(monkeypatch):
    """--transfer-scope family: the transfer pool of C2D_1 holds no C2D task
    (C2D_1 itself is only scored), leave-one-task-out keeps C2D_0; the two
    are cached under different setting names."""
    oc = _load_script("offline_comparison")
    tasks = [_NamedTask(n) for n in ("C2D_0", "C2D_1", "GMM_0", "C2DX_0")]
    seen = {}
    for scope in ("task", "family"):
        monkeypatch.setattr(oc, "_SCOPE", scope)
        seen[scope] = _tasks_scored_among(oc, monkeypatch, tasks, tasks[1])
    assert seen["task"] == ["C2D_0", "C2D_1", "GMM_0", "C2DX_0"]
    assert seen["family"] == ["C2D_1", "GMM_0", "C2DX_0"]
    assert oc._setting_name(0, True, 54, "family") != oc._setting_name(0, True, 54, "task")
    assert oc._setting_name(0, False, 54, "family") == oc._setting_name(0, False, 54)


def test_offline_comparison_pool_logs_are_the_whole_transfer_pool(monkeypatch):
    """--pool-logs: a scored log learns from the pool alone, never from the
    other scored logs (stop 35 gave XGBoost a held-out set's fellow logs,
    same family at other shapes); with the family scope its family leaves the
    pool too. Without a pool, every other task is the pool."""
    oc = _load_script("offline_comparison")
    # scored: DEP_6, DEP_7, GMM_5 (a fresh set); pool: DEP_0, GMM_0
    tasks = [_NamedTask(n) for n in ("DEP_6", "DEP_7", "GMM_5", "DEP_0", "GMM_0")]
    pool = frozenset({"DEP_0", "GMM_0"})
    seen = []
    for scope, with_pool in (("task", pool), ("family", pool), ("task", frozenset())):
        monkeypatch.setattr(oc, "_SCOPE", scope)
        monkeypatch.setattr(oc, "_POOL", with_pool)
        seen.append(_tasks_scored_among(oc, monkeypatch, tasks, tasks[0]))
    assert seen[0] == ["DEP_6", "DEP_0", "GMM_0"]
    assert seen[1] == ["DEP_6", "GMM_0"]
    assert seen[2] == ["DEP_6", "DEP_7", "GMM_5", "DEP_0", "GMM_0"]
    # the cache keys the pool each task learns from: the pool and the task, not every log
    assert oc.transfer_pool_size(["DEP_6", "DEP_7", "GMM_5"], pool) == 3
    assert oc.transfer_pool_size(["DEP_6", "DEP_7", "GMM_5"], frozenset()) == 3
    assert oc.transfer_pool_size(["DEP_6"] * 20, pool) == 3


def test_write_json_never_leaves_half_a_file(tmp_path):
    """The resumable scripts save their results with ``write_json``: data that
    cannot be written keeps the previous file whole and leaves no temporary."""
    from tvm_latmodel.fileformat import load_json, write_json

    path = tmp_path / "sub" / "results.json"
    write_json(path, {"a": [1, 2]}, indent=1)  # the folder is made
    assert load_json(path) == {"a": [1, 2]}
    with pytest.raises(TypeError):
        write_json(path, {"a": object()})
    assert load_json(path) == {"a": [1, 2]}
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.json"]


def test_export_remeasured_writes_the_new_times_and_refuses_a_changed_log(tmp_path):
    """``export_remeasured.py`` turns re-measured passes into a database of the
    re-measuring machine: same traces in the same order, latency the mean of
    the passes, a record failed in a pass failed; a log that changed since it
    was re-measured, or too few passes, is refused with the log's path."""
    ex = _load_script("export_remeasured")
    from tvm_latmodel.replay.logs import RECORD_FILE, WORKLOAD_FILE, load_tasks

    src = Path(ROOT) / "tuning_logs" / "cpu-znver4" / "C1D_3"
    log_dir = tmp_path / "logs" / "cpu-znver4" / "C1D_3"
    log_dir.mkdir(parents=True)
    (log_dir / WORKLOAD_FILE).write_bytes((src / WORKLOAD_FILE).read_bytes())
    lines = (src / RECORD_FILE).read_text().splitlines()[:4]
    failed = json.loads(lines[1])
    failed[1][1] = [1e10]
    lines[1] = json.dumps(failed)
    (log_dir / RECORD_FILE).write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match="line 2"):
        (task,) = load_tasks(log_dir)
    assert [r.index for r in task.records] == [0, 2, 3]
    machine = {"kind": "llvm", "mcpu": "znver4", "num-cores": 2, "keys": ["cpu"], "tag": ""}
    log = {"logged_s": [r.latency_s for r in task.records],
           "passes": [[1e-3, 2e-3, 3e-3], [3e-3, float("nan"), 5e-3]]}
    out = tmp_path / "out"
    s = ex.export_log(str(log_dir), log, machine, str(out / "C1D_3"), 2)
    assert (s["lines"], s["valid"], s["failed_here"]) == (4, 2, 1)
    with pytest.warns(UserWarning):
        (new,) = load_tasks(out / "C1D_3")
    assert [r.index for r in new.records] == [0, 3]
    assert np.allclose(new.latencies_s, [2e-3, 4e-3])
    assert new.target.attrs["mcpu"] == "znver4" and new.failed_indices == [1, 2]
    assert str(new.records[1].trace) == str(task.records[2].trace)
    assert (out / "C1D_3" / WORKLOAD_FILE).read_bytes() == (src / WORKLOAD_FILE).read_bytes()

    with pytest.raises(ValueError, match="1 re-measured pass"):
        ex.export_log(str(log_dir), dict(log, passes=log["passes"][:1]), machine, str(out / "x"), 2)
    with pytest.raises(ValueError, match=r"C1D_3: line 1 logged .* the log changed"):
        ex.export_log(str(log_dir), dict(log, logged_s=[9.0] + log["logged_s"][1:]), machine, str(out / "x"), 2)
    with pytest.raises(ValueError, match="the log changed"):
        ex.export_log(str(log_dir), dict(log, logged_s=log["logged_s"][:2]), machine, str(out / "x"), 2)


def test_export_remeasured_refuses_a_corrupt_or_foreign_file(tmp_path, monkeypatch):
    """A truncated re-measurement JSON, or one without ``machine``/``logs``,
    stops ``export_remeasured.py`` with a message naming the file; nothing is
    written."""
    import sys

    ex = _load_script("export_remeasured")
    out = tmp_path / "out"
    for content, expect in (('{"machine": "x", "logs": {', "not JSON"),
                            ('{"rows": {}}', "not remeasure_logs.py output"),
                            ('{"machine": "{\\"kind\\": \\"nope\\"}", "logs": {}}', "is not a TVM target")):
        bad = tmp_path / "bad.json"
        bad.write_text(content)
        monkeypatch.setattr(sys, "argv", ["export_remeasured.py", str(bad), "--out", str(out)])
        with pytest.raises(SystemExit) as exc:
            ex.main()
        assert str(bad) in str(exc.value) and expect in str(exc.value)
        assert not out.exists()


def test_export_remeasured_keeps_the_remeasuring_machines_spec(tmp_path, monkeypatch):
    """``export_remeasured.py --hardware``: the spec is copied to
    ``OUT/hardware.json``, so the databases load with it (``Task.hardware``)
    on any host; a spec of another CPU than the re-measuring machine stops
    the export with the file's name and nothing written."""
    import sys

    from tvm_latmodel.hardware import HardwareSpec
    from tvm_latmodel.replay.logs import RECORD_FILE, WORKLOAD_FILE, load_tasks

    ex = _load_script("export_remeasured")
    src = Path(ROOT) / "tuning_logs" / "cpu-znver4" / "C1D_3"
    root = tmp_path / "logs"
    log_dir = root / "cpu-znver4" / "C1D_3"
    log_dir.mkdir(parents=True)
    (log_dir / WORKLOAD_FILE).write_bytes((src / WORKLOAD_FILE).read_bytes())
    (log_dir / RECORD_FILE).write_text("\n".join((src / RECORD_FILE).read_text().splitlines()[:3]) + "\n")
    (task,) = load_tasks(log_dir)
    machine = {"kind": "llvm", "mcpu": "znver4", "num-cores": 2, "keys": ["cpu"], "tag": ""}
    remeasured = tmp_path / "re.json"
    remeasured.write_text(json.dumps({"machine": json.dumps(machine), "logs": {"cpu-znver4/C1D_3": {
        "logged_s": [r.latency_s for r in task.records], "passes": [[1e-3] * 3, [2e-3] * 3]}}}))
    spec_file = Path(ROOT) / "benchmarks" / "remeasure" / "znver4_hardware.json"
    out = tmp_path / "out"

    def run(spec):
        monkeypatch.setattr(sys, "argv", ["export_remeasured.py", str(remeasured), "--out", str(out),
                                          "--logs-root", str(root), "--hardware", str(spec)])
        return ex.main()

    other = tmp_path / "zen3.json"
    HardwareSpec.from_target(tvm.target.Target({"kind": "llvm", "mcpu": "znver3", "num-cores": 2})).save(str(other))
    with pytest.raises(SystemExit) as exc:
        run(other)
    assert str(other) in str(exc.value) and "znver3" in str(exc.value)
    assert not out.exists()
    assert run(spec_file) == 0
    assert (out / "hardware.json").read_bytes() == spec_file.read_bytes()
    (new,) = load_tasks(out / "C1D_3")
    assert new.hardware == HardwareSpec.load(str(spec_file))


def test_rescore_fusion_decisions_uses_the_latest_measurement(tmp_path, monkeypatch, capsys):
    """A group measured in two folders takes the later folder's gain; a
    decision file with no measurement is skipped; a measured group the
    planner no longer finds is listed as missing; a prediction file that is
    not a list is refused with its path."""
    rs = _load_script("rescore_fusion_decisions")

    def decision(folder, name, group, gain, then):
        d = tmp_path / folder / "decisions"
        d.mkdir(parents=True, exist_ok=True)
        row = {"network": "net", "group": f"{group}:lv1..lv2", "decision": then}
        if gain is not None:
            row.update(measured_gain_us=gain, measured_decision="fuse" if gain > 0 else "split")
        (d / f"{name}.json").write_text(json.dumps(row))

    decision("old", "a", "g0", -5.0, "split")   # superseded below
    decision("new", "a", "g0", 3.0, "split")    # fuse pays: "split" then was wrong
    decision("new", "b", "g1", -2.0, "split")
    decision("new", "c", "g2", None, "fuse")    # predicted only: not a measurement
    decision("new", "d", "g3", -1.0, "fuse")    # no current prediction
    preds = tmp_path / "pred"
    preds.mkdir()
    (preds / "net-s0.json").write_text(json.dumps([
        {"network": "net", "group": "g0:lv1..lv2", "decision": "fuse", "predicted_gain_us": 1.5},
        {"network": "net", "group": "g1:lv1..lv2", "decision": "fuse", "predicted_gain_us": 0.5},
        {"network": "net", "group": "g2:lv1..lv2", "decision": "split", "predicted_gain_us": -1.0}]))
    measured = rs.load_measured([str(tmp_path / "old"), str(tmp_path / "new")])
    assert measured[("net", "g0")] == ("new", 3.0, "fuse", "split")
    assert ("net", "g2") not in measured
    out = tmp_path / "rescore.md"
    monkeypatch.setattr(sys, "argv", ["rescore", str(preds), "--measured", str(tmp_path / "old"),
                                      str(tmp_path / "new"), "--out", str(out)])
    assert rs.main() == 0
    text = out.read_text()
    assert "Right now: 1 of 2; right when measured: 1 of 2." in text  # g0 right now, g1 right then
    assert "| net g0 | new | 3.0 | 1.5 | fuse | yes | no |" in text
    assert "not predicted now (planner found no such group): net g3" in text
    (preds / "net-s0.json").write_text(json.dumps({"not": "a list"}))
    with pytest.raises(SystemExit, match="net-s0.json: expected a list"):
        rs.load_predicted(str(preds))


def test_check_xgb_repeatability_names_a_missing_task(tmp_path, monkeypatch, capsys):
    """A folder with no task folders, or no task of the name asked for, is
    refused with the folder and the tasks it has; nothing is written."""
    cx = _load_script("check_xgb_repeatability")
    out = tmp_path / "out.json"
    empty = tmp_path / "empty"
    empty.mkdir()
    logs = tmp_path / "logs"
    shutil.copytree(os.path.join(ROOT, "tuning_logs", "cpu", "NRM_0"), logs / "NRM_0")
    for folder, expect in ((empty, f"{empty}: no task folders"), (logs, f"{logs}: no task C2D_1; there are NRM_0")):
        monkeypatch.setattr(sys, "argv", ["check", str(folder), "--task", "C2D_1", "--out", str(out)])
        with pytest.raises(SystemExit):
            cx.main()
        assert expect in capsys.readouterr().err
    assert not out.exists()


def test_bench_networks_goals_table_compares_with_the_stronger_xgboost():
    """The goals table divides the stronger (a) at T by each configuration
    at T and T/2; a row needs both (a) settings, a missing run shows '–',
    and failed runs and PyTorch eager are left out."""
    bn = _load_script("bench_networks")

    def run(config, trials, latency, seed=1):
        return {"network": "net", "config": config, "trials": trials, "seed": seed, "latency_us": latency}

    results = [run("a", 32, 300.0), run("a-nowarmup", 32, 200.0), run("b", 32, 100.0), run("c", 32, 160.0),
               run("b", 16, 250.0), {"network": "net", "config": "c", "trials": 16, "seed": 1, "failed": "rc 1"},
               {"network": "net", "config": "torch-eager", "latency_us": 1.0},
               run("a", 32, 50.0, seed=2)]  # seed 2 has no a-nowarmup: no row
    table = bn.goals_table(results)
    assert "| net | 1 | 32 | 200.0 | 2.00x | 1.25x | 0.80x | – | – |" in table
    assert "| net | 2 |" not in table


def test_head_study_psf_from_refuses_features_of_another_log(tmp_path):
    """--psf-from takes TVM's features from another cache only for the same
    log: a cache of an older log (other line count) is ignored and the
    features extracted; one whose rows do not match the records is refused
    with the folder and the task."""
    hs = _load_script("head_residual_study")
    logs = tmp_path / "logs"
    shutil.copytree(os.path.join(ROOT, "tuning_logs", "cpu", "NRM_0"), logs / "NRM_0")
    n_lines = sum(1 for line in open(logs / "NRM_0" / "database_tuning_record.json") if line.strip())
    other = tmp_path / "other"
    other.mkdir()
    np.savez(other / "NRM_0.npz", psf=np.zeros((3, 164)), n_lines=np.array(n_lines + 1), canonical=np.array(1))
    assert hs._cached(str(other), "NRM_0", n_lines) is None
    data = hs.featurise([str(logs)], str(tmp_path / "cache1"), str(other))
    assert data["NRM_0"]["psf"].shape[1] == 164 and data["NRM_0"]["psf"].any()
    np.savez(other / "NRM_0.npz", psf=np.zeros((3, 164)), n_lines=np.array(n_lines), canonical=np.array(1))
    with pytest.raises(SystemExit, match=f"{other}: NRM_0 has 3 feature rows for"):
        hs.featurise([str(logs)], str(tmp_path / "cache2"), str(other))


def test_head_study_refuses_a_cache_made_with_another_hardware_spec(tmp_path):
    """--hardware changes the analytical terms, so a cache computed with the
    target's defaults is refused (naming the file and both specs) rather
    than read as if it held the calibrated terms, and the other way round."""
    hs = _load_script("head_residual_study")
    logs = tmp_path / "logs"
    shutil.copytree(os.path.join(ROOT, "tuning_logs", "cpu", "NRM_0"), logs / "NRM_0")
    spec = os.path.join(ROOT, "benchmarks", "modes", "calibrated_znver4.json")
    cache = tmp_path / "cache"
    default = hs.featurise([str(logs)], str(cache))
    with pytest.raises(SystemExit, match=r"NRM_0.npz: analytical terms computed with hardware defaults, "
                                         r"not calibrated_znver4.json:[0-9a-f]{12}"):
        hs.featurise([str(logs)], str(cache), hardware=spec)
    other = tmp_path / "calibrated"
    calibrated = hs.featurise([str(logs)], str(other), str(cache), hardware=spec)
    assert not np.array_equal(calibrated["NRM_0"]["log_a"], default["NRM_0"]["log_a"])
    assert np.array_equal(calibrated["NRM_0"]["psf"], default["NRM_0"]["psf"])
    assert hs.featurise([str(logs)], str(other), hardware=spec)["NRM_0"]["log_a"].tolist() == \
        calibrated["NRM_0"]["log_a"].tolist()
    with pytest.raises(SystemExit, match="computed with hardware calibrated_znver4.json:.*, not defaults"):
        hs.featurise([str(logs)], str(other))


def test_head_study_gives_every_record_the_task_bound_and_adds_it_to_older_caches(tmp_path):
    """The study's residual features are relative to the task's roofline
    bound (modes.task_bound_s of the logged workload), as the cost model's
    are; a cache written before stop 26 (no ``task_bound``) gets it added,
    the same number, and is rewritten with it."""
    from tvm_latmodel.hardware import HardwareSpec
    from tvm_latmodel.model.modes import task_bound_s
    from tvm_latmodel.replay import load_database

    hs = _load_script("head_residual_study")
    logs = tmp_path / "logs"
    shutil.copytree(os.path.join(ROOT, "tuning_logs", "cpu", "NRM_0"), logs / "NRM_0")
    cache = tmp_path / "cache"
    fresh = hs.featurise([str(logs)], str(cache))["NRM_0"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (task,) = load_database(str(logs / "NRM_0"))
    bound = task_bound_s(task.mod, HardwareSpec.from_target(task.target))
    assert float(fresh["task_bound"]) == pytest.approx(bound, rel=1e-12)
    X = hs.features(fresh, "terms")
    np.testing.assert_allclose(X[:, 0], fresh["log_a"] - np.log(bound), rtol=1e-5, atol=1e-5)
    older = {k: v for k, v in np.load(cache / "NRM_0.npz").items() if k != "task_bound"}
    np.savez_compressed(cache / "NRM_0.npz", **older)
    again = hs.featurise([str(logs)], str(cache))["NRM_0"]
    assert float(again["task_bound"]) == float(fresh["task_bound"])
    assert "task_bound" in np.load(cache / "NRM_0.npz").files
