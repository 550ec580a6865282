"""TVM 0.27: ``reverse_compute_at`` of a padding block under its producer's tile writes only the interior.

``B = A + 1``, ``P = pad(B)`` by one 7 on each side (any value; 7 so that a
zero left in memory shows), ``C[j] = P[j] + P[j+1] + P[j+2]``.
Splitting ``B``'s loop and moving ``P`` under the outer loop with
``reverse_compute_at`` is accepted, but ``P`` is then computed only where it
reads ``B``: its two border elements are never written, and ``C`` reads
whatever memory holds there (zeros on fresh pages, so the bug can hide).
MetaSchedule's CPU rules do this to the padding between two fused convolutions.

    python upstream/reverse_compute_at_padding.py   # exit 0 and "reproduced" while the bug is there
"""

import sys

import numpy as np
import tvm
from tvm import te

a = te.placeholder((8,), name="A")
b = te.compute((8,), lambda i: a[i] + 1.0, name="B")
p = te.compute((10,), lambda j: tvm.tirx.if_then_else(tvm.tirx.all(j >= 1, j < 9), b[j - 1], 7.0), name="P")
c = te.compute((8,), lambda j: p[j] + p[j + 1] + p[j + 2], name="C")
mod = tvm.IRModule({"main": te.create_prim_func([a, c])})
sch = tvm.s_tir.Schedule(mod)
(i,) = sch.get_loops(sch.get_sblock("B"))
tile, _ = sch.split(i, [2, None])
sch.reverse_compute_at(sch.get_sblock("P"), tile)
print(sch.mod["main"].script())  # P's loop covers v_j = i_0 * 4 + 1 + ax0: 1..8, never 0 or 9

x = np.random.default_rng(0).random(8).astype("float32")


def run(m):
    """C for ``x`` (its output buffer filled with NaN first)."""
    f = tvm.compile(m, target="llvm")
    out = tvm.runtime.tensor(np.full(8, np.nan, "float32"))
    f(tvm.runtime.tensor(x), out)
    return out.numpy()


want = run(mod)
got = run(sch.mod)
print("untuned loop nest:", want)
print("scheduled:        ", got)
bug = not np.allclose(got, want, equal_nan=False)
print("reproduced: the border of C differs" if bug else "not reproduced (fixed in this TVM?)")
sys.exit(0 if bug else 1)
