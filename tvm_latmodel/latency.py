"""What a valid measured latency is: one definition for the whole package.

MetaSchedule writes ``run_secs = [1e10]`` for a candidate whose build or run
failed (:data:`FAILURE_SENTINEL_S`). A measurement is valid when every value
of its ``run_secs`` is a finite, positive number below
:data:`FAILURE_THRESHOLD_S` (no kernel runs for 30 years: anything that long
is a failure marker); its latency is their mean.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: MetaSchedule's ``run_secs`` value for a failed build or run.
FAILURE_SENTINEL_S = 1e10
#: Times at or above this are failure markers, not measurements.
FAILURE_THRESHOLD_S = 1e9


def check_run_secs(raw: Any) -> tuple[tuple[float, ...] | None, str | None]:
    """``(run_secs, None)`` if ``raw`` is a valid measurement, else ``(None, why)``.

    Parameters
    ----------
    raw
        A logged or returned ``run_secs``: a list of numbers.
    """
    if raw is None or (isinstance(raw, (list, tuple)) and not raw):
        return None, "empty run_secs (the candidate was never measured): counted as failed"
    if isinstance(raw, (str, bytes, dict)) or any(isinstance(x, (bool, str, bytes)) for x in _items(raw)):
        return None, f"run_secs must be a list of numbers, got {_short_json(raw)}"
    try:  # TVM hands over FloatImm arrays
        values = tuple(float(x) for x in raw)
    except OverflowError:  # an integer too large for a double
        return None, f"run_secs {_short_json(raw)} is not finite: counted as failed"
    except (TypeError, ValueError):
        return None, f"run_secs must be a list of numbers, got {_short_json(raw)}"
    if not values:
        return None, "empty run_secs (the candidate was never measured): counted as failed"
    if any(math.isnan(x) or math.isinf(x) for x in values):
        return None, f"run_secs {list(values)} is not finite: counted as failed"
    if any(x >= FAILURE_THRESHOLD_S for x in values):
        return None, "run_secs holds MetaSchedule's 1e10 failure sentinel (build or run failed): counted as failed"
    if any(x <= 0 for x in values):
        return None, f"run_secs {list(values)} is not positive: counted as failed"
    return values, None


def _items(raw: Any) -> tuple:
    try:
        return tuple(raw)
    except TypeError:
        return ()


def mean_latency_s(run_secs: Any) -> float | None:
    """Mean of a valid ``run_secs``, or None for a failed or malformed one."""
    values, _ = check_run_secs(run_secs)
    return None if values is None else sum(values) / len(values)


def valid_latency(result) -> float | None:
    """Mean run time of a MetaSchedule ``RunnerResult``, or None when it failed."""
    if result is None or getattr(result, "error_msg", None) is not None:
        return None
    return mean_latency_s(getattr(result, "run_secs", None))


def _short_json(raw: Any) -> str:
    try:
        return json.dumps(raw)[:80]
    except (TypeError, ValueError):
        pass
    try:
        return repr(raw)[:80]
    except ValueError:  # an int of more digits than Python will print
        return f"<{type(raw).__name__}>"
