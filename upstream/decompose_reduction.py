"""TVM 0.27: ``decompose_reduction`` hoists a reduction's init above a loop that repeats it.

``C[i] = A[i] / sum(A)``. ``compute_at`` puts the sum under ``i`` (recomputed
for every ``i``: redundant, still right). ``decompose_reduction`` at ``i`` is
accepted and places the init *above* ``i``, so every repeat adds to the
previous sum: ``C[i] = A[i] / ((i + 1) * sum(A))``. MetaSchedule's
``RewriteReductionBlock`` postprocessor makes this call, which is how
tuned softmax kernels came out wrong on this project's Zen 4.

    python upstream/decompose_reduction.py   # exit 0 and "reproduced" while the bug is there
"""

import sys

import numpy as np
import tvm
from tvm import te

a = te.placeholder((8,), name="A")
k = te.reduce_axis((0, 8), name="k")
s = te.compute((1,), lambda _: te.sum(a[k], axis=k), name="S")
c = te.compute((8,), lambda i: a[i] / s[0], name="C")
sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, c])}))
(i,) = sch.get_loops(sch.get_sblock("C"))
sch.compute_at(sch.get_sblock("S"), i)
sch.decompose_reduction(sch.get_sblock("S"), i)  # the init lands above loop i

x = np.random.default_rng(0).random(8).astype("float32")
out = tvm.runtime.tensor(np.zeros(8, "float32"))
tvm.compile(sch.mod, target="llvm")(tvm.runtime.tensor(x), out)
print("expected A / sum(A):   ", x / x.sum())
print("got:                   ", out.numpy())
bug = np.allclose(out.numpy(), x / (np.arange(1, 9) * x.sum()), rtol=1e-5)
print("reproduced: C[i] = A[i] / ((i + 1) * sum(A))" if bug else "not reproduced (fixed in this TVM?)")
sys.exit(0 if bug else 1)
