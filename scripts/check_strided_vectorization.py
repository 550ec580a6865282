#!/usr/bin/env python3
"""What LLVM does with an innermost loop along which accesses are strided.

Builds small hand schedules (max pooling and depthwise-style reductions,
NHWC, the channel loop outermost so the loop left innermost moves by a
whole row of channels) for the given CPU and counts gathers, scatters,
interleaved-load shuffles (``vpermt2ps`` with AVX-512; ``vshufps``,
``vpermps``, ``vperm2f128``, ``vunpck*`` otherwise) and packed/scalar
arithmetic in the assembly, beside the model's verdict
(``auto_vector_extent``, ``vector_gathers``) for the same block. Stop 28's
refused mode was checked against it; stop 30's
(``program._interleaved_auto_vector``: complete interleave groups along a
rolled serial loop) takes only the cases where LLVM packs without gathers.

    python scripts/check_strided_vectorization.py [--mcpu znver4]
"""
import argparse
import re

import tvm
from tvm import te

from tvm_latmodel.model.program import summarize


def pool(w, unroll_body):
    x = te.placeholder((4, 16, w), name="X")
    rh = te.reduce_axis((0, 2), name="rh")
    rw = te.reduce_axis((0, 2), name="rw")
    y = te.compute((4, 8, w // 2), lambda n, i, j: te.max(x[n, 2 * i + rh, 2 * j + rw], axis=[rh, rw]), name="Y")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([x, y])}))
    n, i, j, rh, rw = sch.get_loops(sch.get_sblock("Y"))
    if unroll_body:
        sch.parallel(sch.fuse(n, i))
        sch.unroll(j)
    sch.unroll(rh)
    sch.unroll(rw)
    return sch.mod


def channels_outer(width, op, k):
    x = te.placeholder((10, width + k - 1, 64), name="X")
    wt = te.placeholder((k, k, 64), name="W")
    kh = te.reduce_axis((0, k), name="kh")
    kw = te.reduce_axis((0, k), name="kw")
    if op == "fma":
        f = lambda h, ww, c: te.sum(x[h + kh, ww + kw, c] * wt[kh, kw, c], axis=[kh, kw])  # noqa: E731
    elif op == "sum":
        f = lambda h, ww, c: te.sum(x[h + kh, ww + kw, c], axis=[kh, kw])  # noqa: E731
    else:
        f = lambda h, ww, c: te.max(x[h + kh, ww + kw, c], axis=[kh, kw])  # noqa: E731
    y = te.compute((8, width, 64), f, name="Y")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([x, wt, y] if op == "fma" else [x, y])}))
    h, ww, c, a, b = sch.get_loops(sch.get_sblock("Y"))
    sch.reorder(c, h, ww, a, b)
    return sch.mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mcpu", default="znver4")
    args = ap.parse_args()
    target = tvm.target.Target({"kind": "llvm", "mcpu": args.mcpu, "num-cores": 2})
    cases = [(f"pool 2x2/2, width {w}, taps unrolled{', body unrolled in the parallel loop' if u else ''}",
              pool(w, u)) for w in (16, 64) for u in (False, True)]
    cases += [(f"{op} over {k}x{k} taps, channels outermost, {width} columns", channels_outer(width, op, k))
              for width in (8, 32) for op in ("fma", "sum", "max") for k in (2, 3)]
    print(f"mcpu {args.mcpu}, TVM {tvm.__version__}\n")
    print("| case | gathers | scatters | shuffles | packed | scalar | model: auto_vector_extent, gathers |")
    print("|---|---|---|---|---|---|---|")
    for label, mod in cases:
        asm = tvm.compile(mod, target=target).mod.inspect_source("asm")
        n = {k: len(re.findall(p, asm)) for k, p in (
            ("g", r"vgather"), ("s", r"vscatter"), ("p", r"vpermt2ps|vshufps|vpermps|vperm2f128|vunpck"),
            ("packed", r"v(fmadd\d+|mul|add|max)ps"), ("scalar", r"v(fmadd\d+|mul|add|max)ss"))}
        (b,) = summarize(mod, "cpu").blocks
        print(f"| {label} | {n['g']} | {n['s']} | {n['p']} | {n['packed']} | {n['scalar']} | "
              f"{b.auto_vector_extent}, {b.vector_gathers} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
