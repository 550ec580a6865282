"""Does a 512-bit FMA run at twice the FLOP rate of a 256-bit one on this CPU?

AVX-512 doubles the lanes of an instruction, but not every CPU doubles its
FMA datapath: AMD Zen 4 executes a 512-bit operation on its 256-bit pipes
("double pumping"), so its FP32 peak per cycle is the same as with AVX2.
This script answers the question by measurement, on one core, with the
register-blocked FMA micro-kernel of ``calibrate`` built twice for the host
(``llvm -mcpu=<host>``): once with 8-lane (256-bit) and once with 16-lane
(512-bit) vectors, the same FLOP count, timed interleaved so that other
load on the machine hits both alike. It also counts ``zmm`` and ``ymm`` FMA
instructions in each kernel's assembly, to show which width LLVM emitted.

    python scripts/check_vector_width.py [--rounds 15] [--out FILE.json]

The ratio (GFLOP/s at 512 bits over GFLOP/s at 256 bits) is ~2 where
512-bit FMAs run at full width (Intel server cores with two 512-bit FMA
units) and ~1 where they are split into two 256-bit halves (Zen 4).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import numpy as np
    import tvm

    from tvm_latmodel.hardware.calibrate import _FMA_COL_VECTORS, _FMA_DEPTH, _FMA_ROWS, _fma_func
    from tvm_latmodel.targets import host_target

    target = host_target()
    flops_goal = 2e9  # about 0.1 s per run at 20 GFLOP/s
    kernels = {}
    for lanes in (8, 16):
        cols = _FMA_COL_VECTORS * lanes
        per_repeat = 2.0 * _FMA_DEPTH * _FMA_ROWS * cols
        repeats = max(1, math.ceil(flops_goal / per_repeat))
        f = _fma_func(1, _FMA_DEPTH, _FMA_ROWS, lanes, repeats)
        lib = tvm.compile(tvm.IRModule({"main": f}), target=target)
        asm = lib.mod.imports[0].inspect_source("asm") if lib.mod.imports else lib.mod.inspect_source("asm")
        fmas = re.findall(r"\bvfmadd\w*\s+[^\n]*", asm)
        kernels[lanes] = {
            "fn": lib["main"], "flops": per_repeat * repeats,
            "args": (tvm.runtime.tensor(np.full((1, _FMA_DEPTH, _FMA_ROWS), 0.5, "float32")),
                     tvm.runtime.tensor(np.full((1, _FMA_DEPTH, cols), 0.5, "float32")),
                     tvm.runtime.empty((1, _FMA_ROWS, cols), "float32")),
            "zmm_fma": sum("zmm" in x for x in fmas), "ymm_fma": sum("ymm" in x for x in fmas),
            "times_s": [],
        }
    for k in kernels.values():  # warm up
        k["fn"](*k["args"])
    for _ in range(args.rounds):
        for k in kernels.values():
            t0 = time.perf_counter()
            k["fn"](*k["args"])
            k["times_s"].append(time.perf_counter() - t0)
    report = {"target": str(target), "rounds": args.rounds}
    for lanes, k in kernels.items():
        best = min(k["times_s"])
        report[f"{lanes * 32}bit"] = {
            "lanes": lanes, "zmm_fma_instructions": k["zmm_fma"], "ymm_fma_instructions": k["ymm_fma"],
            "best_gflops": k["flops"] / best / 1e9,
            "median_gflops": k["flops"] / statistics.median(k["times_s"]) / 1e9,
        }
    report["ratio_512_over_256_best"] = report["512bit"]["best_gflops"] / report["256bit"]["best_gflops"]
    report["ratio_512_over_256_median"] = report["512bit"]["median_gflops"] / report["256bit"]["median_gflops"]
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
