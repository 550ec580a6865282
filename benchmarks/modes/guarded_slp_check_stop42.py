"""Stop 42, a lead (no model change): does LLVM's SLP vectorizer pack contiguous output-channel copies whose
shared input read sits under a padding guard?

conv1d ``O[l, co] += X[l + rl - 2, rc] * W[rl, rc, co]`` (24 x 32 -> 24 x 32, 5 taps), ``co_1`` (16 contiguous
copies) outside the unrolled taps ``rl`` and rows ``l_1`` (6), inside the rolled ``rc``: the shape of C1D_11's
record 10 (set 22). Without the guard the input is pre-padded (``XP[l + rl, rc]``); with it the read is
``if_then_else(2 <= l + rl < 26, X[...], 0)`` as TVM's padding inlines it. IR only, nothing timed.

    python benchmarks/modes/guarded_slp_check_stop42.py [MCPU]"""
import re
import sys
import warnings

import tvm
from tvm import te


def c1d(guard: bool):
    L, CI, CO, K = 24, 32, 32, 5
    x = te.placeholder((L, CI), name="X"); w = te.placeholder((K, CI, CO), name="W")
    rl = te.reduce_axis((0, K), name="rl"); rc = te.reduce_axis((0, CI), name="rc")
    if guard:
        def val(l):
            return tvm.tirx.if_then_else(tvm.tirx.all(l + rl >= 2, l + rl < L + 2),
                                         x[tvm.tirx.max(l + rl - 2, 0), rc], 0.0)
    else:
        x = te.placeholder((L + K - 1, CI), name="XP")

        def val(l):
            return x[l + rl, rc]
    o = te.compute((L, CO), lambda l, co: te.sum(val(l) * w[rl, rc, co], axis=[rl, rc]), name="O")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([x, w, o])}))
    b = sch.get_sblock("O")
    l, co, rrl, rrc = sch.get_loops(b)
    l0, l1 = sch.split(l, [None, 6]); co0, co1 = sch.split(co, [None, 16])
    sch.reorder(l0, co0, rrc, co1, rrl, l1)
    sch.decompose_reduction(b, rrc)
    for lp in (co1, rrl, l1):
        sch.unroll(lp)
    return sch.mod


def main(mcpu: str) -> None:
    warnings.simplefilter("ignore")
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": 2})
    for guard in (False, True):
        ll = tvm.compile(c1d(guard), target=target).mod.inspect_source("ll")
        packed = sum(int(x) for x in re.findall(r"call (?:fast )?<(\d+) x float> @llvm\.fmuladd", ll))
        scalar = len(re.findall(r"call (?:fast )?float @llvm\.fmuladd", ll))
        print(f"{mcpu}: {'guarded read' if guard else 'pre-padded input'}: {packed} packed FMA lanes, {scalar} scalar FMAs")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "rocketlake")
