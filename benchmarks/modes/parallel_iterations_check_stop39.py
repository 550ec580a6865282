"""Stop 39 lead check (no change made): Same total work, more parallel iterations: does a parallel iteration cost something the model does not charge?
C[i] = A[i] * B[i] + A[i] over N floats; the loop split into P parallel iterations of N/P, the inner part vectorized
(16 lanes) or not; also the same with the parallel loop fused from two loops (index recovery by // and %)."""
import numpy as np, tvm
from tvm import te
from tvm_latmodel.targets import host_target
from tvm_latmodel.hardware import HardwareSpec
from tvm_latmodel.model.program import summarize
from tvm_latmodel.model.modes import estimate
DEV = tvm.cpu(); N = 1 << 18
hw = HardwareSpec.from_target(host_target())  # the spec a HybridCostModel() builds for the host
def kernel(P, fused, vec):
    a = te.placeholder((N,), name="A"); b = te.placeholder((N,), name="B")
    c = te.compute((N,), lambda i: a[i] * b[i] + a[i], name="C")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b, c])}))
    (i,) = sch.get_loops(sch.get_sblock("C"))
    if fused:
        p0, p1, inner = sch.split(i, [2, P // 2, N // P])
        p = sch.fuse(p0, p1)
    else:
        p, inner = sch.split(i, [P, N // P])
    sch.parallel(p)
    if vec:
        io, ii = sch.split(inner, [None, 16]); sch.vectorize(ii)
    return sch
args = [tvm.runtime.tensor(np.random.rand(N).astype("float32"), DEV) for _ in range(2)] + [tvm.runtime.tensor(np.zeros(N, "float32"), DEV)]
print(f"target {host_target()}, N = {N}")
print("| P | fused | vectorized | measured us | model us |")
print("|---|---|---|---|---|")
for vec in (True, False):
    for fused in (False, True):
        for P in (2, 16, 128, 1024, 8192):
            sch = kernel(P, fused, vec)
            f = tvm.compile(sch.mod, target=host_target())
            t = f.mod.time_evaluator("main", DEV, number=200, repeat=5)(*args)
            model = estimate(summarize(sch.mod, "cpu"), hw).latency_s
            print(f"| {P} | {fused} | {vec} | {np.median(t.results)*1e6:.1f} | {model*1e6:.1f} |", flush=True)
