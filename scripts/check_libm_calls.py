#!/usr/bin/env python3
"""Which TVM intrinsics become scalar libm calls on this CPU, and what one costs.

For each function (exp, log, tanh, sigmoid, erf, pow, and sqrt, rsqrt and an
FMA for comparison) a 1-D elementwise PrimFunc is vectorized by 8 with TVM's
own schedule primitives, compiled for the host with ``tvm.compile``, and
then:

* its assembly is searched for calls (``callq expf@PLT``) and for 256-bit
  vector instructions (``ymm``): a libm call keeps the loop scalar;
* it is timed single-threaded with ``time_evaluator`` (median of 7 repeats of
  200 runs) over ``--n`` float32 elements: nanoseconds and core cycles per
  element, cycles at the frequency the host reports.

This is the source of ``HardwareSpec.libm_call_cycles`` and of
``tvm_latmodel.model.indexing.LIBM_CALLS``.

    python scripts/check_libm_calls.py --out benchmarks/modes/libm_calls.md
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def measure(n: int = 4096) -> list[dict]:
    import tvm
    from tvm import te

    from tvm_latmodel.hardware.calibrate import elementwise_func
    from tvm_latmodel.hardware.spec import _host_freq_ghz
    from tvm_latmodel.targets import host_target

    target = host_target()
    freq = _host_freq_ghz()
    fns = {"exp": te.exp, "log": te.log, "tanh": te.tanh, "sigmoid": te.sigmoid, "erf": te.erf,
           "pow": lambda x: te.power(x, 1.7), "sqrt": te.sqrt, "rsqrt": te.rsqrt, "fma": lambda x: x * 1.5 + 2.0}
    dev = tvm.cpu()
    a = tvm.runtime.tensor(np.random.default_rng(0).random(n).astype("float32") + 0.5, dev)
    b = tvm.runtime.tensor(np.zeros(n, "float32"), dev)
    rows = []
    for name, fn in fns.items():
        mod = tvm.IRModule({"main": elementwise_func(n, 8, fn)})
        lib = tvm.compile(mod, target=target)
        asm = lib.mod.inspect_source("asm")
        calls = sorted({m.group(1) for m in re.finditer(r"call\w*\s+([\w@.]+)", asm)}
                       - {"main_compute_"})
        calls = [c for c in calls if "tvm" not in c.lower()]
        ymm = sum(1 for line in asm.splitlines() if "ymm" in line and not line.lstrip().startswith("."))
        t = lib.mod.time_evaluator("main", dev, number=200, repeat=7)(a, b)
        ns = float(np.median(t.results)) * 1e9 / n
        rows.append({"function": name, "calls": calls, "ymm_instructions": ymm, "ns_per_element": ns,
                     "cycles_per_element": ns * freq})
        print(f"{name:8s} calls {calls}  ymm {ymm:4d}  {ns:6.2f} ns/element  {ns * freq:6.1f} cycles",
              flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4096, help="elements per run")
    ap.add_argument("--out", default=None, help="write a markdown table here")
    args = ap.parse_args()
    from tvm_latmodel.hardware.spec import _host_freq_ghz
    from tvm_latmodel.targets import host_target

    rows = measure(args.n)
    if args.out:
        lines = [f"Target: `{host_target()}`, {_host_freq_ghz():.3f} GHz, {args.n} float32 elements, "
                 "vectorized by 8, one thread.", "",
                 "| function | calls in the assembly | ymm instructions | ns / element | cycles / element |",
                 "|---|---|---:|---:|---:|"]
        for r in rows:
            lines.append(f"| {r['function']} | {', '.join(r['calls']) or 'none'} | {r['ymm_instructions']} "
                         f"| {r['ns_per_element']:.2f} | {r['cycles_per_element']:.1f} |")
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
