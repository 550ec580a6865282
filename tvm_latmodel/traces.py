"""Check a MetaSchedule trace (as JSON) before TVM applies it.

TVM 0.27's ``Trace.apply_json_to_schedule`` trusts its input: a null
attribute or decision, a ``"None"`` random variable outside a split factor,
a negative decision index or a zero tile factor crash the process instead of
raising. :func:`check_trace_json` says what is wrong first (tuning logs,
GPU bundles and the GPU importer call it).
"""

from __future__ import annotations

from typing import Any

# Instruction attributes TVM reads as optional (JSON null allowed): (kind, index).
# Everywhere else a null attribute or decision makes TVM 0.27 dereference a
# null pointer while applying the trace (the process dies).
_TRACE_OPTIONAL_ATTRS = {("TransformLayout", 2)}  # pad_value


# Only these take None inputs (a split factor left for TVM to infer, written
# "None"); elsewhere a None random variable crashes TVM.
_OPTIONAL_FACTOR_INPUTS = ("Split", "LoopPartition")
# Their decisions are tile factors: a zero makes TVM divide by zero (SIGFPE).
_TILE_SAMPLERS = ("SamplePerfectTile", "SamplePartitionedTile")


def _holds_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, list):
        return any(_holds_null(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_null(v) for v in value.values())
    return False


def _holds_none_name(value: Any) -> bool:
    if value == "None":
        return True
    return isinstance(value, list) and any(_holds_none_name(v) for v in value)


def check_trace_json(trace: Any) -> str | None:
    """Why TVM cannot safely apply the JSON trace ``trace`` (``Trace.as_json``), or None.

    TVM checks most of a trace itself and raises; this catches what makes it
    crash the process instead (found by fuzzing TVM 0.27): a null input,
    attribute (other than the optional ones) or decision, a ``"None"`` input
    other than a split factor, a decision whose instruction index is
    negative, a tile factor of zero.
    It also checks the outer shape: ``[instructions, decisions]``, each
    instruction ``[kind, inputs, attrs, outputs]``, each decision ``[index,
    value]``.
    """
    if not (isinstance(trace, list) and len(trace) == 2 and all(isinstance(x, list) for x in trace)):
        return "a trace is [instructions, decisions]"
    insts, decisions = trace
    for i, inst in enumerate(insts):
        if not (isinstance(inst, list) and len(inst) == 4 and isinstance(inst[0], str)
                and all(isinstance(x, list) for x in inst[1:])):
            return f"instruction {i} is not [kind, inputs, attrs, outputs]"
        kind, inputs, attrs, outputs = inst
        if _holds_null(inputs):  # TVM writes a None input as the string "None"
            return f"instruction {i} ({kind}) has a null input"
        for j, value in enumerate(inputs):
            if _holds_none_name(value) and not (kind in _OPTIONAL_FACTOR_INPUTS and j >= 1):
                return f"instruction {i} ({kind}) has a None input {j}"
        for j, attr in enumerate(attrs):
            if _holds_null(attr) and (kind, j) not in _TRACE_OPTIONAL_ATTRS:
                return f"instruction {i} ({kind}) has a null attribute {j}"
        if not all(isinstance(o, str) for o in outputs):
            return f"instruction {i} ({kind}) has an output that is not a name"
    for d in decisions:
        if not (isinstance(d, list) and len(d) == 2 and isinstance(d[0], int) and not isinstance(d[0], bool)):
            return "a decision is [instruction index, value]"
        if not 0 <= d[0] < len(insts):
            return f"decision for instruction {d[0]}, of {len(insts)}"
        if _holds_null(d[1]):
            return f"the decision for instruction {d[0]} is null"
        kind = insts[d[0]][0]
        if kind in _TILE_SAMPLERS and not (
            isinstance(d[1], list) and all(isinstance(f, int) and not isinstance(f, bool) and f >= 1 for f in d[1])
        ):
            return f"the decision for instruction {d[0]} ({kind}) is not a list of positive tile factors"
    return None
