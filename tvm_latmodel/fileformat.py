"""Versioned JSON files: every file we write carries ``format``,
``format_version`` and ``package_version``, and reading one checks them.

This module is the one place that reads such a file and checks that header
(:func:`read_versioned_json`, :func:`check_header`; ``HardwareSpec`` and the
model files use both). Reading is strict, so that no malformed input gets
past it into the code that uses the values:

* the file must be UTF-8 JSON; ``NaN``, ``Infinity``, numbers that overflow
  a double and integers outside the 64-bit range are refused (we never write
  them, and downstream arithmetic would turn them into NaN scores);
* every error is a :class:`ValueError` whose message starts with the file's
  path (and gives the line where the JSON parser knows it).

:func:`check_fields` checks the types of named fields, so that a reader can
use ``meta["n"]`` or ``int(meta.get("n", 0))`` without a ``TypeError`` or a
``KeyError`` from deep inside.

Two libraries we hand file contents to trust their input and crash the
process (not raise) on some damaged ones; each has a check to run first:
:func:`tvm_latmodel.model.booster_check.check_xgboost_json` for XGBoost
boosters, :func:`tvm_latmodel.traces.check_trace_json` for MetaSchedule
traces (tuning logs, GPU bundles). :func:`load_json` is the plain strict
reader (bundles, timer results).
"""

from __future__ import annotations

import gzip
import json
import math
import numbers
import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import __version__

# Integers outside int64 cannot be meant: counts, sizes and indices in our
# files are far smaller, and TVM (which takes some of them) stores int64.
_MAX_ABS_INT = 2**63


class _Refused(ValueError):
    """A JSON literal the strict parser refuses (its text is kept for the message)."""

    def __init__(self, literal: str, why: str):
        super().__init__(why)
        self.literal = literal


def _refuse_constant(name: str):
    raise _Refused(name, f"{name} is not a number JSON allows (non-finite values are refused)")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(text, f"number {text[:40]} overflows a double")
    return value


def _int64(text: str) -> int:
    # Check the length before int(): Python refuses > 4300 digits with its own error.
    digits = text.lstrip("-")
    if len(digits) > 19 or abs(int(text)) >= _MAX_ABS_INT:
        shown = text if len(text) <= 40 else f"{text[:20]}...({len(digits)} digits)"
        raise _Refused(text, f"integer {shown} is outside the 64-bit range")
    return int(text)


def _line_of(text: str, literal: str) -> int | None:
    pos = text.find(literal)
    return None if pos < 0 else text.count("\n", 0, pos) + 1


def _noun(what: str) -> str:
    return "model" if what.endswith("model") else what


def parse_json(text: str, origin: str, strict: bool = True) -> Any:
    """Parse ``text`` as JSON; ``strict``: refuse what the module docstring lists.

    Not strict, ``NaN`` and ``Infinity`` are read (as Python's ``json`` does),
    for files whose writers record them (a timer's error statistics).

    Raises
    ------
    ValueError
        Starting with ``origin``, giving the line of the problem.
    """
    try:
        if not strict:
            return json.loads(text)
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_int64)
    except json.JSONDecodeError as err:
        raise ValueError(f"{origin}: line {err.lineno} column {err.colno}: not JSON: {err.msg}") from None
    except _Refused as err:
        line = _line_of(text, err.literal)
        at = f"line {line}: " if line is not None else ""
        raise ValueError(f"{origin}: {at}{err}") from None
    except RecursionError:
        raise ValueError(f"{origin}: not JSON this reader accepts: nested too deeply") from None
    except ValueError as err:  # Python refuses integers of more than 4300 digits
        raise ValueError(f"{origin}: not JSON this reader accepts: {str(err).split(';')[0]}") from None


def load_json(path: str | os.PathLike, what: str = "file", strict: bool = True) -> Any:
    """Read ``path`` (gzip-compressed when its name ends in ``.gz``) as JSON.

    Parameters
    ----------
    path : path
        The file.
    what : str
        What the file should be, for messages (``"hardware spec"``, ``"GPU bundle"``).
    strict : bool
        Refuse NaN, Infinity and out-of-range numbers (see :func:`parse_json`).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        Naming the file: unreadable (a directory, a broken gzip stream), not
        UTF-8, not (strict) JSON.
    """
    path = str(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such {what} file")
    if os.path.isdir(path):
        raise ValueError(f"{path}: is a directory, not a {what} file")
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                raw = fh.read()
        else:
            with open(path, "rb") as fh:
                raw = fh.read()
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        raise ValueError(f"{path}: cannot read the {what} file: {err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ValueError(
            f"{path}: not a JSON {_noun(what)} file: not UTF-8 text, so not JSON "
            f"(byte {raw[err.start:err.start + 1]!r} at line {line}, offset {err.start})"
        ) from None
    if not text.strip():
        raise ValueError(f"{path}: not a JSON {_noun(what)} file: the file is empty, not JSON")
    try:
        return parse_json(text, path, strict)
    except ValueError as err:
        raise ValueError(f"{err} (not a JSON {_noun(what)} file)") from None


def check_header(data: Any, origin: str, fmt: str, version: int, what: str) -> dict:
    """Check the ``format``, ``format_version`` and ``package_version`` of ``data``.

    The one check of a versioned file's header: :func:`read_versioned_json`
    and :meth:`HardwareSpec.from_dict` (for specs embedded in model files)
    both use it.

    Parameters
    ----------
    data
        The parsed file.
    origin : str
        The file (or ``"<dict>"``), for messages.
    fmt, version
        The expected ``format`` and ``format_version``.
    what : str
        What the file is (``"hybrid model"``), for messages.

    Returns
    -------
    dict
        ``data``.

    Raises
    ------
    ValueError
        Starting with ``origin``: not an object, another format, another
        format version, or a ``package_version`` that is not a string.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{origin}: not a tvm-latmodel {what} (a JSON {type(data).__name__}, "
                         f"not an object with format={fmt!r})")
    if data.get("format") != fmt:
        raise ValueError(f"{origin}: not a tvm-latmodel {what} (format {_shown(data.get('format'))} != {fmt!r})")
    got, written_by = data.get("format_version"), data.get("package_version")
    if not (isinstance(got, int) and not isinstance(got, bool)) or got != version:
        raise ValueError(f"{origin}: {what} format version {_shown(got)} is not the supported "
                         f"version {version} (written by tvm-latmodel {_shown(written_by)}, "
                         f"this is {__version__})")
    if not isinstance(written_by, str) or not written_by:
        raise ValueError(f"{origin}: {what}: package_version must be the version string of the "
                         f"tvm-latmodel that wrote it, got {_shown(written_by)}")
    return data


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------ field types


@dataclass(frozen=True)
class ListOf:
    """Field spec: a list whose every element matches ``item``."""

    item: Any


@dataclass(frozen=True)
class MapOf:
    """Field spec: an object whose every value matches ``value`` (any keys)."""

    value: Any


def _type_name(spec: Any) -> str:
    if isinstance(spec, ListOf):
        return f"a list of {_type_name(spec.item)}"
    if isinstance(spec, MapOf):
        return f"an object of {_type_name(spec.value)}"
    if isinstance(spec, tuple):
        return " or ".join(_type_name(s) for s in spec)
    if isinstance(spec, Mapping):
        return "an object"
    if spec is None:
        return "null"
    return {int: "an integer", float: "a finite number", str: "a string", bool: "true or false",
            dict: "an object", list: "a list"}.get(spec, getattr(spec, "__name__", str(spec)))


def _matches(value: Any, spec: Any) -> bool:
    """Whether ``value`` has the outer type of ``spec`` (elements are checked by _check_value)."""
    if isinstance(spec, ListOf):
        return isinstance(value, list)
    if isinstance(spec, MapOf):
        return isinstance(value, dict)
    if isinstance(spec, tuple):
        return any(_matches(value, s) for s in spec)
    if spec is None:
        return value is None
    if isinstance(spec, Mapping) or spec is dict:
        return isinstance(value, dict)
    if spec is bool:
        return isinstance(value, bool)
    if spec is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if spec is float:
        return (isinstance(value, numbers.Real) and not isinstance(value, bool)
                and math.isfinite(float(value)))
    return isinstance(value, spec)


def check_fields(data: dict, fields: Mapping[str, Any], origin: str, what: str, prefix: str = "") -> None:
    """Check the types of the fields of ``data`` named in ``fields``.

    Parameters
    ----------
    data : dict
        A parsed JSON object.
    fields : mapping
        Field name -> type spec: ``int`` (not a bool), ``float`` (a finite
        int or float), ``str``, ``bool``, ``list``, ``dict``, ``None``
        (null), ``ListOf(spec)`` (a list of such values), ``MapOf(spec)``
        (an object whose values are such), a tuple of specs (any of them),
        or a mapping (an object whose fields are checked in turn). A field
        that is absent is not checked (readers give defaults); write the
        name as ``"name!"`` to require it.
    origin, what : str
        The file and what it is, for messages.

    Raises
    ------
    ValueError
        ``"{origin}: bad {what}: field 'a.b[3]' must be ..., got ..."``.
    """
    for key, spec in fields.items():
        required = key.endswith("!")
        name = key[:-1] if required else key
        full = f"{prefix}{name}"
        if name not in data:
            if required:
                raise ValueError(f"{origin}: bad {what}: missing field {full!r}")
            continue
        _check_value(data[name], spec, full, origin, what)


def _check_value(value: Any, spec: Any, full: str, origin: str, what: str) -> None:
    if not _matches(value, spec):
        raise ValueError(f"{origin}: bad {what}: field {full!r} must be {_type_name(spec)}, got {_shown(value)}")
    if isinstance(spec, tuple):
        spec = next(s for s in spec if _matches(value, s))
    if isinstance(spec, ListOf):
        for i, item in enumerate(value):
            _check_value(item, spec.item, f"{full}[{i}]", origin, what)
    elif isinstance(spec, MapOf):
        for k, item in value.items():
            _check_value(item, spec.value, f"{full}.{k}", origin, what)
    elif isinstance(spec, Mapping):
        check_fields(value, spec, origin, what, prefix=f"{full}.")


def read_versioned_json(path: str, fmt: str, version: int, what: str,
                        fields: Mapping[str, Any] | None = None) -> dict:
    """Load ``path`` and check it is a ``fmt`` file of ``version``.

    Parameters
    ----------
    path : str
        The file.
    fmt, version
        The expected ``format`` and ``format_version``.
    what : str
        What the file is (``"hybrid model"``), for messages.
    fields : mapping, optional
        Field types to check (see :func:`check_fields`).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        Naming the file: unreadable, not UTF-8, not strict JSON (NaN,
        Infinity, out-of-range numbers), not a ``what``, another format
        version, or a field of the wrong type.
    """
    meta = check_header(load_json(path, what), str(path), fmt, version, what)
    if fields:
        check_fields(meta, fields, str(path), what)
    return meta


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` as it is (UTF-8, no newline translation),
    without ever leaving half a file.

    It goes to ``path.tmp`` first and is renamed over ``path`` once complete,
    so a run stopped mid-write keeps the previous ``path``; the folder is made
    if needed. If the write fails, the temporary file is removed and the
    error raised.
    """
    path = str(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    os.replace(tmp, path)


def write_json(path: str | os.PathLike, data: Any, indent: int | None = None) -> None:
    """Write ``data`` as JSON to ``path`` with :func:`write_text` (never half a
    file; data that cannot be serialised leaves ``path`` and its folder's
    files as they were)."""
    write_text(path, json.dumps(data, indent=indent))
