"""Stop 39: does LLVM hoist a recomputation out of a loop it does not depend on, and when?

Two kernels, built with TVM for the host and timed with time_evaluator (median of 5 repeats); beside each,
the work points program.summarize now gives the recomputed block (hoisted: counted once).

1. M[r] = max_k A[r, k] (k = 128), E[r, c] = exp(A[r, c] - M[r]) (1024 x 32): M computed at E's row loop r
   (once per row) or at its column loop c (32 times per row), its reduction loop unrolled or rolled.
2. M[r, j] = max_k A[r, k] * j (k = 4), S[r] = sum_j M[r, j], E[r, c] = exp(A[r, c] - S[r]) (256 x 32), M and
   S at r or at c, all their loops unrolled: M's row is J floats, below or at TVM's 1024-byte stack limit.

    python benchmarks/modes/hoist_licm_check_stop39.py
"""
import numpy as np
import tvm
from tvm import te

from tvm_latmodel.model.program import summarize
from tvm_latmodel.targets import host_target

DEV = tvm.cpu()


def _timed(sch, args):
    f = tvm.compile(sch.mod, target=host_target())
    t = f.mod.time_evaluator("main", DEV, number=50, repeat=5)(*args)
    return float(np.median(t.results)) * 1e6, {b.name: b.work_points for b in summarize(sch.mod, "cpu").blocks}


def row_max(where: str, unroll_k: bool, R=1024, K=128, C=32):
    a = te.placeholder((R, K), name="A")
    rk = te.reduce_axis((0, K), name="k")
    m = te.compute((R,), lambda r: te.max(a[r, rk], axis=rk), name="M")
    e = te.compute((R, C), lambda r, c: te.exp(a[r, c] - m[r]), name="E")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, e])}))
    r, c = sch.get_loops(sch.get_sblock("E"))
    sch.parallel(r)
    sch.compute_at(sch.get_sblock("M"), c if where == "c" else r)
    if unroll_k:
        sch.unroll(sch.get_loops(sch.get_sblock("M"))[-1])
    args = (tvm.runtime.tensor(np.random.rand(R, K).astype("float32"), DEV),
            tvm.runtime.tensor(np.zeros((R, C), "float32"), DEV))
    return _timed(sch, args)


def row_vector(where: str, J: int, R=256, K=4, C=32):
    a = te.placeholder((R, K + C), name="A")
    rk = te.reduce_axis((0, K), name="k")
    rj = te.reduce_axis((0, J), name="j")
    m = te.compute((R, J), lambda r, j: te.max(a[r, rk] * j.astype("float32"), axis=rk), name="M")
    s = te.compute((R,), lambda r: te.sum(m[r, rj], axis=rj), name="S")
    e = te.compute((R, C), lambda r, c: te.exp(a[r, c] - s[r]), name="E")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, e])}))
    r, c = sch.get_loops(sch.get_sblock("E"))
    sch.parallel(r)
    at = c if where == "c" else r
    sch.compute_at(sch.get_sblock("S"), at)
    sch.compute_at(sch.get_sblock("M"), at)
    for lp in sch.get_loops(sch.get_sblock("M"))[-2:]:
        sch.unroll(lp)
    sch.unroll(sch.get_loops(sch.get_sblock("S"))[-1])
    args = (tvm.runtime.tensor(np.random.rand(R, K + C).astype("float32"), DEV),
            tvm.runtime.tensor(np.zeros((R, C), "float32"), DEV))
    return _timed(sch, args)


def main():
    print(f"target {host_target()}")
    print("| kernel 1 | measured us | model: M work points |")
    print("|---|---|---|")
    for where, unroll in (("r", True), ("c", True), ("c", False), ("r", False)):
        us, pts = row_max(where, unroll)
        print(f"| M at {where}, k {'unrolled' if unroll else 'rolled'} | {us:.1f} | {pts['M']:.0f} |", flush=True)
    print()
    print("| kernel 2, M row bytes | at r: us | at c: us | c / r | model M points at r / at c |")
    print("|---|---|---|---|---|")
    for J in (64, 128, 255, 256, 512):
        (ur, pr), (uc, pc) = row_vector("r", J), row_vector("c", J)
        print(f"| {J * 4} | {ur:.1f} | {uc:.1f} | {uc / ur:.2f} | {pr['M']:.0f} / {pc['M']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
