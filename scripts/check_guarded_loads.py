#!/usr/bin/env python3
"""Does a guarded load stop LLVM's loop vectorizer on real schedules?

Step 1 of ``benchmarks/modes/PROTOCOL_stop17.md``. For every log given, up to
``--per-log`` records (file order) whose reduction block has no explicit
vectorized loop and that the analytical model credits with a loop LLVM
vectorizes by itself (``auto_vector_extent > 1``) are built with TVM for the
log's own target, and their x86 assembly is classified by
``scripts/check_vectorization.py``'s functions (``clean``: packed arithmetic, no scalar
arithmetic, fewer ``vinsertps`` than packed instructions). The records are
split by whether the reduction block's stored value holds a guarded load
(an ``if_then_else`` that loads memory in a branch: TVM's LLVM backend emits
it as a conditional branch and a phi, ``codegen_llvm.cc``,
``builtin::if_then_else``; a ``Select`` evaluates both sides and does not
count).

Result of the stop 17 run (``benchmarks/modes/guarded_loads.json``): outside
T2D 13 of 16 guarded records were scalar, 73 of 271 unguarded ones too; the
rule "no auto-vectorization under a guarded load" passed this step and was
then reverted on its ranking (BENCHMARKS.md, stop 17).

    python scripts/check_guarded_loads.py tuning_logs/cpu/* tuning_logs/cpu-znver4/* \\
        --out benchmarks/modes/guarded_loads.json

Assembly counts are kept in ``--out`` as they are made, so a stopped run
resumes where it stopped.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from check_vectorization import asm_counts, vector_code  # noqa: E402 - this folder's sibling script


def _has_load(expr) -> bool:
    name = type(expr).__name__
    if name in ("BufferLoad", "TensorLoad"):  # (0.27 shows a parameter's load as a TensorLoad)
        return True
    return any(_has_load(c) for c in _children(expr))


def _children(expr) -> list:
    name = type(expr).__name__
    if name == "Cast":
        return [expr.value]
    if name == "Select":
        return [expr.condition, expr.true_value, expr.false_value]
    if name == "Call":
        return list(expr.args)
    if hasattr(expr, "a") and hasattr(expr, "b"):
        return [expr.a, expr.b]
    return []


def guarded_loads(expr) -> int:
    """``if_then_else`` calls in ``expr`` with a load in a branch."""
    own = 0
    if type(expr).__name__ == "Call" and str(getattr(expr.op, "name", "")).endswith("if_then_else"):
        args = list(expr.args)
        own = int(len(args) == 3 and (_has_load(args[1]) or _has_load(args[2])))
    return own + sum(guarded_loads(c) for c in _children(expr))


def stored_values(stmt, out: dict) -> dict:
    """Block name -> the value its single store writes (leaf blocks only)."""
    name = type(stmt).__name__
    if name in ("SBlockRealize", "BlockRealize"):
        blk = stmt.block
        if type(blk.body).__name__ == "BufferStore":
            out[str(blk.name_hint)] = blk.body.value
        else:
            stored_values(blk.body, out)
        return out
    if name == "SeqStmt":
        for s in stmt.seq:
            stored_values(s, out)
        return out
    for attr in ("body", "then_case", "else_case", "block"):
        child = getattr(stmt, attr, None)
        if child is not None:
            stored_values(child, out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="log directories")
    ap.add_argument("--per-log", type=int, default=8)
    ap.add_argument("--out", required=True, help="JSON of every record's assembly counts (resumable)")
    args = ap.parse_args()

    from tvm_latmodel.fileformat import load_json, write_json
    from tvm_latmodel.model.program import summarize
    from tvm_latmodel.replay.logs import family_of, load_tasks

    out = {"rows": {}}
    if os.path.exists(args.out):
        try:
            out = load_json(args.out, "assembly counts")
        except ValueError as err:
            sys.exit(f"error: {err}; move it aside to start over (nothing was overwritten)")
        if not isinstance(out, dict) or not isinstance(out.get("rows"), dict):
            sys.exit(f"error: {args.out}: not this script's output (no 'rows' object); move it aside to start over")
    rows = out["rows"]
    t0 = time.time()
    for n, path in enumerate(args.logs, 1):
        name = "/".join(os.path.normpath(path).split(os.sep)[-2:])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (task,) = load_tasks(path)
        kept = 0
        for i, r in enumerate(task.records):
            if kept >= args.per_log:
                break
            mod = r.schedule.mod
            blocks = summarize(mod, "cpu").blocks
            reds = [b for b in blocks if b.reduce_level > 0 and b.ops_per_point > 0]
            if not reds or any(b.vector_extent > 1 for b in reds):
                continue
            if not any(b.auto_vector_extent > 1 for b in reds):
                continue
            kept += 1
            key = f"{name}:{i}"
            if key not in rows:
                values = stored_values(mod["main"].body, {})
                rows[key] = {"guarded": any(guarded_loads(values[b.name]) > 0 for b in reds),
                             "credited": max(b.auto_vector_extent for b in reds),
                             **asm_counts(mod, task.target)}
                write_json(args.out, out, indent=1)
        print(f"[{n}/{len(args.logs)}] {name}: {kept} records ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)

    def tally(keys):
        scalar = sum(not vector_code(rows[k]) for k in keys)
        return f"{scalar} of {len(keys)} scalar" + (f" ({scalar / len(keys):.0%})" if keys else "")

    def family(key):  # "cpu/C2D_1:12" -> "C2D"
        return family_of(key.rsplit(":", 1)[0])

    for label, pick in (("outside T2D", lambda k: family(k) != "T2D"), ("T2D", lambda k: family(k) == "T2D")):
        ks = [k for k in rows if pick(k)]
        g = [k for k in ks if rows[k]["guarded"]]
        u = [k for k in ks if not rows[k]["guarded"]]
        print(f"{label}: guarded {tally(g)}; not guarded {tally(u)}")
        for fam in sorted({family(k) for k in g}):
            print(f"  {fam}: guarded {tally([k for k in g if family(k) == fam])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
