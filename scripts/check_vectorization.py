#!/usr/bin/env python3
"""Check the model's auto-vectorization verdicts against LLVM's assembly.

For the first N records per log whose reduction block has no explicit
vectorized loop, it builds the schedule with TVM and counts packed
(``v{fmadd,mul,add,max}ps``) and scalar (``...ss``) arithmetic and the
lane-by-lane inserts (``vinsertps``) in the x86 assembly; the truth is set
by ``--truth`` (below). The model's verdict
is ``auto_vector_extent > 1`` of the reduction block. Prints the agreement
and the two kinds of error; the assembly counts are cached in
``--cache`` so another version of the model can be checked on the same
records without building them again.

    python scripts/check_vectorization.py 8 mytag C2D_1 GMM_1 DEP_0 ... [--list]

``--truth packed`` (the first version's truth) counts any packed
arithmetic, including SLP code that builds its vectors lane by lane
(``vinsertps``): vector instructions, scalar speed. ``--truth clean`` (the
default) asks for vector code that is fast: packed arithmetic, no scalar
arithmetic, and fewer ``vinsertps`` than packed instructions.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def asm_counts(mod, target) -> dict:
    """Packed and scalar multiply/add/max/FMA instructions, and ``vinsertps``,
    in the x86 assembly TVM builds for ``mod``."""
    import tvm

    asm = tvm.compile(mod, target=target).mod.inspect_source("asm")
    return {"packed": len(re.findall(r"v(fmadd\d+|mul|add|max)ps", asm)),
            "scalar": len(re.findall(r"v(fmadd\d+|mul|add|max)ss", asm)),
            "inserts": len(re.findall(r"vinsertps", asm))}


def vector_code(counts: dict, truth: str = "clean") -> bool:
    """Whether :func:`asm_counts` show vector code, by the ``--truth`` rule."""
    if truth == "packed":
        return counts["packed"] > 0
    return counts["packed"] > 0 and counts["scalar"] == 0 and counts["inserts"] < counts["packed"]


def main() -> None:
    from tvm_latmodel.fileformat import load_json, write_json
    from tvm_latmodel.model.program import summarize
    from tvm_latmodel.replay.logs import load_tasks

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("per_log", type=int)
    ap.add_argument("tag")
    ap.add_argument("logs", nargs="+", help="log directories (or names under tuning_logs/cpu)")
    ap.add_argument("--cache", default="/tmp/vec_truth_cache.json")
    ap.add_argument("--truth", choices=("clean", "packed"), default="clean")
    ap.add_argument("--list", action="store_true", help="print every disagreement")
    args = ap.parse_args()
    cache_path = args.cache
    try:
        cache = load_json(cache_path, "assembly-count cache") if os.path.exists(cache_path) else {}
    except ValueError as err:
        sys.exit(f"error: {err}; move it aside to start over")
    per_log, tag, logs = args.per_log, args.tag, args.logs
    rows = []
    for path in logs:
        (task,) = load_tasks(path if path.startswith("/") else f"/work/main/tuning_logs/cpu/{path}")
        n = 0
        for i, r in enumerate(task.records):
            ps = summarize(r.schedule.mod, "cpu")
            reds = [b for b in ps.blocks if b.reduce_level > 0 and b.ops_per_point > 0]
            if not reds or any(b.vector_extent > 1 for b in reds):
                continue
            key = f"{os.path.basename(path)}:{i}"
            if "inserts" not in cache.get(key, {}):
                cache[key] = asm_counts(r.schedule.mod, task.target)
                write_json(cache_path, cache)
            c = cache[key]
            truth = vector_code(c, args.truth)
            pred = any(b.auto_vector_extent > 1 for b in reds)
            rows.append((key, truth, pred))
            if args.list and truth != pred:
                print(f"  {key}: LLVM {'vector' if truth else 'scalar'} {c}, model credits "
                      f"{max(b.auto_vector_extent for b in reds)}")
            n += 1
            if n >= per_log:
                break
    tp = sum(t and p for _, t, p in rows); tn = sum((not t) and (not p) for _, t, p in rows)
    fp = sum((not t) and p for _, t, p in rows); fn = sum(t and (not p) for _, t, p in rows)
    print(f"{tag}: n={len(rows)} agree={(tp+tn)/max(1,len(rows)):.3f} tp={tp} tn={tn} fp(credited, scalar)={fp} fn(missed)={fn}")


if __name__ == "__main__":
    main()
