"""Stop 42 (PROTOCOL_stop42.md): does LLVM's loop vectorizer take a rolled loop with gathers, or does its SLP
vectorizer pack the unrolled channel copies inside it? On depthwise-conv kernels built by TVM.

``O[h, w, c] += P[h + rh, w + rw, c] * F[rh, rw, c]`` (NHWC, float32), the 8 channel copies ``c_1`` unrolled by
TVM inside a rolled spatial loop, every access strided along that loop:

  S  taps x rows: ``w_1`` (8) rolled around ``c_1`` (8), ``rw`` (taps), ``h_1`` (rows), all unrolled; no
     parallel loop, every buffer a parameter. Pointers in the loop: 8 x taps x rows loads of P, 8 x rows
     elements of O.
  D  DEP_17's shape: ``h_1`` (7) rolled around ``w_1`` (7), ``c_1`` (8), ``rw`` (5) (280 copies; P's copies
     overlap: 88 distinct elements, O 56), and a small one, ``h_1`` (8) around ``w_1`` (2), ``c_1``, ``rw``
     (3); with or without a parallel loop around it, the padding computed inside it (else before it, at the
     function's level), O staged in a cache written inside it.

LLVM's verdict from the optimised IR (``inspect_source("ll")``): gathers (``llvm.masked.gather`` calls),
packed (vector ``llvm.fmuladd``), or scalar. The model's, from ``summarize`` and the target's vector width
(``_slp_extent``): "gathers" where its SLP credit is withheld for a gathered loop, "packed N" where it credits
an N-wide vector extent, else scalar. ``tvm_latmodel`` is imported from the working directory (run it from a
tree's root to check that tree: the path is printed).

    python benchmarks/modes/gathers_or_slp_check_stop42.py [MCPU ...]"""
import os
import re
import sys
import warnings

sys.path.insert(0, os.getcwd())  # the tree it is run from, not the installed package
import tvm  # noqa: E402
from tvm import te  # noqa: E402

import tvm_latmodel  # noqa: E402
from tvm_latmodel.model.modes import _slp_extent  # noqa: E402
from tvm_latmodel.model.program import summarize  # noqa: E402
from tvm_latmodel.hardware.spec import HardwareSpec  # noqa: E402


def taps_rows(taps: int, rows: int):
    hh, ww, cc = 8, 16, 32
    p = te.placeholder((hh + taps - 1, ww + taps - 1, cc), name="P")
    f = te.placeholder((taps, taps, cc), name="F")
    rh = te.reduce_axis((0, taps), name="rh")
    rw = te.reduce_axis((0, taps), name="rw")
    o = te.compute((hh, ww, cc), lambda h, w, c: te.sum(p[h + rh, w + rw, c] * f[rh, rw, c], axis=[rh, rw]),
                   name="O")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([p, f, o])}))
    blk = sch.get_sblock("O")
    h, w, c, rrh, rrw = sch.get_loops(blk)
    h0, h1 = sch.split(h, [None, rows])
    w0, w1 = sch.split(w, [None, 8])
    c0, c1 = sch.split(c, [None, 8])
    sch.reorder(h0, w0, c0, rrh, w1, c1, rrw, h1)
    sch.decompose_reduction(blk, rrh)
    for lp in (c1, rrw, h1):
        sch.unroll(lp)
    return sch.mod


def dep17_shape(rows, cols, taps, chans, size, parallel, pad, cache):
    x = te.placeholder((size, size, chans), name="X")
    f = te.placeholder((taps, taps, chans), name="F")
    half = taps // 2
    p = te.compute((size + taps - 1, size + taps - 1, chans),
                   lambda a, b, c: tvm.tirx.if_then_else(
                       tvm.tirx.all(a >= half, a < size + half, b >= half, b < size + half),
                       x[a - half, b - half, c], 0.0), name="Pad")
    rh = te.reduce_axis((0, taps), name="rh")
    rw = te.reduce_axis((0, taps), name="rw")
    o = te.compute((size, size, chans), lambda h, w, c: te.sum(p[h + rh, w + rw, c] * f[rh, rw, c], axis=[rh, rw]),
                   name="O")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([x, f, o])}))
    blk = sch.get_sblock("O")
    staged = sch.cache_write(blk, 0, "global") if cache else None
    h, w, c, rrh, rrw = sch.get_loops(blk)
    h0, h1 = sch.split(h, [None, rows])
    w0, w1 = sch.split(w, [None, cols])
    c0, c1 = sch.split(c, [None, 8])
    sch.reorder(h0, w0, c0, rrh, h1, w1, c1, rrw)
    if staged is not None:
        sch.reverse_compute_at(staged, c0)
    if pad:
        sch.compute_at(sch.get_sblock("Pad"), h0)
    if parallel:
        sch.parallel(h0)
    sch.decompose_reduction(blk, rrh)
    for lp in (w1, c1, rrw):
        sch.unroll(lp)
    return sch.mod


def kernels():
    for taps, rows in ((3, 2), (13, 2), (14, 2), (15, 2), (7, 4)):
        yield f"S taps {taps} x rows {rows} ({8 * taps * rows} + {8 * rows} pointers)", taps_rows(taps, rows)
    for rows, cols, taps, chans, size in ((7, 7, 5, 120, 28), (8, 2, 3, 32, 16)):
        for parallel, pad, cache in ((False, False, False), (True, False, False), (True, True, False),
                                     (True, False, True), (True, True, True)):
            what = ", ".join(n for n, on in (("parallel", parallel), ("padding inside", pad), ("O staged", cache))
                             if on) or "no parallel loop"
            yield (f"D {rows} rows x {cols} cols x {taps} taps: {what}",
                   dep17_shape(rows, cols, taps, chans, size, parallel, pad, cache))


def llvm_verdict(ll: str) -> str:
    gathers = len(re.findall(r"call <\d+ x float> @llvm\.masked\.gather", ll))
    packed = sum(int(w) for w in re.findall(r"call (?:fast )?<(\d+) x float> @llvm\.fmuladd", ll))
    scalar = len(re.findall(r"call (?:fast )?float @llvm\.fmuladd", ll))
    if gathers:
        return f"gathers ({gathers})"
    return f"packed ({packed} lanes, {scalar} scalar)" if packed else f"scalar ({scalar})"


def model_verdict(mod, hw) -> str:
    b = {x.name: x for x in summarize(mod, "cpu").blocks}["O_update"]
    if b.slp_extent and not _slp_extent(b, hw):
        return "gathers"
    vec = max(b.auto_vector_extent, _slp_extent(b, hw))
    return f"packed {vec}" if vec > 1 else "scalar"


def agree(llvm: str, model: str) -> bool:
    return llvm.split()[0] == model.split()[0]


def main(mcpus) -> None:
    warnings.simplefilter("ignore")
    print(f"model: {tvm_latmodel.__file__}\n")
    for mcpu in mcpus:
        target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": 2})
        hw = HardwareSpec.from_target(target)
        print(f"### {mcpu} (vector_bits {hw.vector_bits})\n")
        print("| kernel | LLVM | model | agree |")
        print("|---|---|---|---|")
        n = ok = 0
        for name, mod in kernels():
            llvm = llvm_verdict(tvm.compile(mod, target=target).mod.inspect_source("ll"))
            model = model_verdict(mod, hw)
            n += 1
            ok += agree(llvm, model)
            print(f"| {name} | {llvm} | {model} | {'yes' if agree(llvm, model) else 'no'} |", flush=True)
        print(f"\n{ok}/{n} agree on {mcpu}\n")


if __name__ == "__main__":
    main(sys.argv[1:] or ["rocketlake", "znver3"])
