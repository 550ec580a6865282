"""Stop 41 (PROTOCOL_stop41.md): which loops LLVM has unrolled when its vectorizers run, on kernels built by TVM.

Each kernel is built twice: once with its inner loops unrolled by TVM (``sch.unroll``), once left to LLVM. The
optimised IR (``inspect_source("ll")``) gives the multiply-adds LLVM emitted packed (lanes) and scalar; the model's
verdict is the ``auto_vector_extent`` of the update block and the unroll flags of its loops, from the
``tvm_latmodel`` imported (run it from a tree's root to check that tree: the path is printed).

  M  matmul C[i, j] += A[i, k] * B[k, j], 128 x 256 x 1024: j (128, contiguous) rolled around k_1 (8) and i_3
     (16) (XFM_4's record 59, Zen 4 log)
  D  depthwise NHWC 3x3: c_1 (8 channels, contiguous) rolled around rh (3), rw (3), w_1 (8) (DEP_0's record 88)
  T  the tap kernel of stop 40 (``O[y, x] += P[y + r, x] * W[r]``, 3 taps rolled around 42 copies of y that TVM
     unrolls): the tap loop is LLVM's to unroll, x (16) then innermost

Assembly only, nothing is timed.

    python benchmarks/modes/unroll_before_vectorizers_check_stop41.py [MCPU]"""
import os
import re
import sys
import warnings

sys.path.insert(0, os.getcwd())  # the tree it is run from, not the installed package
import tvm  # noqa: E402
from tvm import te  # noqa: E402

import tvm_latmodel  # noqa: E402
from tvm_latmodel.model.program import summarize  # noqa: E402


def matmul(tvm_unroll: bool):
    a = te.placeholder((128, 1024), name="A")
    b = te.placeholder((1024, 256), name="B")
    k = te.reduce_axis((0, 1024), name="k")
    c = te.compute((128, 256), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b, c])}))
    blk = sch.get_sblock("C")
    i, j, kk = sch.get_loops(blk)
    i0, i2, i3 = sch.split(i, [None, 2, 16])
    j0, j2 = sch.split(j, [None, 128])
    k0, k1 = sch.split(kk, [None, 8])
    sch.reorder(i0, j0, k0, i2, j2, k1, i3)
    sch.parallel(sch.fuse(i0, j0))
    sch.decompose_reduction(blk, k0)
    if tvm_unroll:
        sch.unroll(i3)
    return sch.mod, "C_update"


def depthwise(tvm_unroll: bool):
    p = te.placeholder((18, 18, 32), name="P")
    f = te.placeholder((3, 3, 32), name="F")
    rh = te.reduce_axis((0, 3), name="rh")
    rw = te.reduce_axis((0, 3), name="rw")
    o = te.compute((16, 16, 32), lambda h, w, c: te.sum(p[h + rh, w + rw, c] * f[rh, rw, c], axis=[rh, rw]),
                   name="O")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([p, f, o])}))
    blk = sch.get_sblock("O")
    h, w, c, rrh, rrw = sch.get_loops(blk)
    w0, w1 = sch.split(w, [None, 8])
    c0, c1 = sch.split(c, [None, 8])
    sch.reorder(h, w0, c0, c1, rrh, rrw, w1)
    sch.reverse_compute_at(sch.cache_write(blk, 0, "global"), c1)
    sch.decompose_reduction(blk, rrh)
    if tvm_unroll:
        for lp in (rrh, rrw, w1):
            sch.unroll(lp)
    return sch.mod, "O_update"


def taps(tvm_unroll: bool):
    p = te.placeholder((45, 16), name="P")
    wt = te.placeholder((3,), name="W")
    r = te.reduce_axis((0, 3), name="r")
    o = te.compute((42, 16), lambda y, x: te.sum(p[y + r, x] * wt[r], axis=r), name="O")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([p, wt, o])}))
    blk = sch.get_sblock("O")
    y, x, rr = sch.get_loops(blk)
    sch.reorder(x, rr, y)
    sch.decompose_reduction(blk, x)
    sch.unroll(y)  # always: the tap loop around it is LLVM's
    if tvm_unroll:
        sch.unroll(rr)
    return sch.mod, "O_update"


def fma_counts(ll: str) -> tuple[int, int]:
    packed = sum(int(w) for w in re.findall(r"call (?:fast )?<(\d+) x float> @llvm\.fmuladd", ll))
    scalar = len(re.findall(r"call (?:fast )?float @llvm\.fmuladd", ll))
    return packed, scalar


def main(mcpu: str) -> None:
    warnings.simplefilter("ignore")
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": 2})
    print(f"model: {tvm_latmodel.__file__}; target {mcpu}\n")
    print("| kernel | inner loops unrolled by | LLVM: packed lanes / scalar FMAs | model: vector extent | model: loops (extent, unrolled by) |")
    print("|---|---|---|---|---|")
    for name, build in (("M", matmul), ("D", depthwise), ("T", taps)):
        for tvm_unroll in (True, False):
            mod, blk = build(tvm_unroll)
            packed, scalar = fma_counts(tvm.compile(mod, target=target).mod.inspect_source("ll"))
            b = {x.name: x for x in summarize(mod, "cpu").blocks}[blk]
            loops = ", ".join(f"{lp.extent}{'/' + lp.unrolled_by if lp.unrolled_by else ''}" for lp in b.loops)
            print(f"| {name} | {'TVM' if tvm_unroll else 'LLVM'} | {packed} / {scalar} | {b.auto_vector_extent} | {loops} |",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "znver4")
