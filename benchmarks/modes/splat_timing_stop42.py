"""Stop 42 part 2 (splat_lane_built_dev_stop42.md): the check's matmul (Z[i, j] += X[i, k] * Y[k, j], 64 x 256 x
96, ``i`` unrolled 2 or 4, ``j`` vectorized 16, 24, 32, 48 or 96 wide) timed on one thread, the minimum of 7
repeats of 200 runs; X[i, k] is broadcast along the vector loop. Run with TVM_NUM_THREADS=1:

    TVM_NUM_THREADS=1 python benchmarks/modes/splat_timing_stop42.py"""
import warnings
import numpy as np
import tvm
from tvm import te
warnings.simplefilter("ignore")
def mm(width, copies=2, K=256, M=64, N=96):
    x = te.placeholder((M, K), name="X"); y = te.placeholder((K, N), name="Y")
    k = te.reduce_axis((0, K), name="k")
    z = te.compute((M, N), lambda i, j: te.sum(x[i, k] * y[k, j], axis=k), name="Z")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([x, y, z])}))
    blk = sch.get_sblock("Z")
    i, j, kk = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, copies]); j0, j1 = sch.split(j, [None, width])
    sch.reorder(i0, j0, kk, i1, j1)
    sch.unroll(i1); sch.vectorize(j1)
    sch.decompose_reduction(blk, kk)
    return sch.mod, (M, K, N)
t = tvm.target.Target({"kind": "llvm", "mcpu": "rocketlake", "num-cores": 1})
dev = tvm.cpu()
for copies in (2, 4):
    for width in (16, 24, 32, 48, 96):
        mod, (M, K, N) = mm(width, copies)
        f = tvm.compile(mod, target=t)
        a = tvm.runtime.tensor(np.random.rand(M, K).astype("float32"), dev)
        b = tvm.runtime.tensor(np.random.rand(K, N).astype("float32"), dev)
        c = tvm.runtime.tensor(np.zeros((M, N), "float32"), dev)
        ev = f.mod.time_evaluator("main", dev, number=200, repeat=7)
        s = min(ev(a, b, c).results)
        print(f"copies {copies} width {width}: {s*1e6:.2f} us, {s/(M*N*K)*1e12:.1f} ps per FMA", flush=True)
