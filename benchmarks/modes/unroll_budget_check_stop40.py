"""Stop 40 part 2 (PROTOCOL_stop40.md): the model's full-unroll verdicts against LLVM's, on kernels built by TVM.

A rolled loop ``r`` of T trips around c copies unrolled by TVM, ``x`` (16) outside, the init decomposed:
  A  ``O[y, x] += P[y + r, x] * W[r]``  (the weight shared by the copies; the rule was written on this one)
  B  ``O[y, x] += P[y + r, x] * W[r, y]`` (a weight per copy; checked after the rule was written)
LLVM fully unrolled ``r`` when the optimised IR (``inspect_source("ll")``) has no ``for_body_r`` block that
branches back to itself. Compared with the verdict of the ``tvm_latmodel`` imported (run it from a tree's root
to check that tree: the path is printed). Assembly only, nothing is timed.

    python benchmarks/modes/unroll_budget_check_stop40.py [MCPU]"""
import os
import re
import sys
import warnings

sys.path.insert(0, os.getcwd())  # the tree it is run from, not the installed package
import tvm  # noqa: E402
from tvm import te  # noqa: E402

import tvm_latmodel  # noqa: E402
from tvm_latmodel.model.program import summarize  # noqa: E402


def kernel(trips: int, copies: int, weight_per_copy: bool):
    p = te.placeholder((copies + trips, 16), name="P")
    w = te.placeholder((trips, copies) if weight_per_copy else (trips,), name="W")
    r = te.reduce_axis((0, trips), name="r")
    o = te.compute((copies, 16), lambda y, x: te.sum(p[y + r, x] * (w[r, y] if weight_per_copy else w[r]), axis=r),
                   name="O")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([p, w, o])}))
    blk = sch.get_sblock("O")
    y, x, rr = sch.get_loops(blk)
    sch.reorder(x, rr, y)
    sch.decompose_reduction(blk, x)
    sch.unroll(y)
    return sch.mod


CASES = {
    "A": [(T, c) for T in (2, 3, 4, 6, 8) for c in (4, 8, 14, 21, 28, 42, 64)]
    + [(10, 4), (10, 8), (10, 12), (10, 14), (10, 15), (11, 8), (11, 12), (11, 13), (12, 11), (12, 12), (16, 8),
       (16, 9), (24, 5), (24, 6), (32, 4), (48, 2), (48, 3), (64, 2), (72, 1), (74, 1), (76, 1), (100, 1)],
    "B": [(T, c) for T, cs in ((3, (16, 24, 32, 40)), (6, (8, 12, 16, 20)), (10, (6, 8, 10)), (16, (3, 4, 5, 6)),
                               (32, (2, 3))) for c in cs],
}


def main(mcpu: str) -> None:
    warnings.simplefilter("ignore")
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": 2})
    print(f"model: {tvm_latmodel.__file__}; target {mcpu}\n")
    print("| kernel | trips | copies | LLVM | model |\n|---|---|---|---|---|")
    for kind, cases in CASES.items():
        agree = 0
        for trips, copies in cases:
            mod = kernel(trips, copies, kind == "B")
            ll = tvm.compile(mod, target=target).mod.inspect_source("ll")
            llvm = not re.search(r"^for_body_r[.0-9]*:.*preds = [^\n]*%for_body_r\b", ll, re.M)
            block = {b.name: b for b in summarize(mod, "cpu").blocks}["O_update"]
            model = block.loops[1].unrolled_by == "llvm"
            agree += llvm == model
            print(f"| {kind} | {trips} | {copies} | {'unrolled' if llvm else 'rolled'} | "
                  f"{'unrolled' if model else 'rolled'}{'' if llvm == model else ' (differs)'} |", flush=True)
        print(f"\nkernel {kind}: the model agrees with LLVM on {agree} of {len(cases)}\n", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "rocketlake")
