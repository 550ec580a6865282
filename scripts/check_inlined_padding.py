#!/usr/bin/env python3
"""What the inlined padding of a fused conv -> conv kernel costs the second convolution.

A fused conv -> conv kernel has its intermediate padding inlined into the
second convolution (``fusion/padding.py``, the workaround for TVM 0.27's
``reverse_compute_at`` bug in ``upstream/``): the convolution then reads
``if_then_else(inside, x[...], 0)`` in its innermost loops, where a split
kernel reads a padded copy (``pad_temp``) without a condition. This script
tunes the same 3x3 convolution (+ bias + ReLU) both ways, with the same
trials, seeds and cost model, and compares the best measured latencies:

* ``materialised``: as TOPI writes it and TVM's split kernel has it
  (a ``pad_temp`` block, then the convolution);
* ``inlined``: ``pad_temp`` inlined into the convolution, as in the fused kernel.

The shapes are the second convolutions of transfuser's conv -> conv pairs
(``conv_conv0``: 32 -> 32 channels at 32x32; ``conv_conv2``: 64 -> 64 at 16x16).

    nice -n 5 python3 scripts/check_inlined_padding.py --trials 16 --seeds 0 1 2 --out benchmarks/inlined_padding
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SHAPES = {"transfuser conv_conv0, 2nd conv": (32, 32, 32), "transfuser conv_conv2, 2nd conv": (64, 64, 16)}


def conv_module(c_in: int, c_out: int, hw: int, inlined: bool):
    import tvm
    from tvm import te, topi

    x = te.placeholder((1, c_in, hw, hw), name="x")
    w = te.placeholder((c_out, c_in, 3, 3), name="w")
    b = te.placeholder((1, c_out, 1, 1), name="b")
    y = topi.nn.relu(topi.nn.conv2d_nchw(x, w, 1, 1, 1) + b)
    mod = tvm.IRModule({"main": te.create_prim_func([x, w, b, y])})
    if inlined:
        sch = tvm.s_tir.Schedule(mod)
        sch.compute_inline(sch.get_sblock("pad_temp"))
        mod = sch.mod
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--out", default="benchmarks/inlined_padding")
    args = ap.parse_args()

    from tvm_latmodel.targets import host_target
    from tvm_latmodel.tuning import tune_workload

    target = host_target()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.json")
    results = {}
    if os.path.exists(path):
        from tvm_latmodel.fileformat import load_json

        try:
            results = load_json(path, "results", strict=False)
        except ValueError as err:
            # stop before tuning anything: the file holds earlier runs' results
            sys.exit(f"error: {err}; move it aside to start over (nothing was overwritten)")
        if not isinstance(results, dict):
            sys.exit(f"error: {path}: not a results file of this script (a JSON object was expected); "
                     "move it aside to start over")
    for label, (c_in, c_out, hw) in SHAPES.items():
        for seed in args.seeds:
            for form in ("materialised", "inlined"):  # interleaved, so drift hits both
                key = f"{label} | {form} | t{args.trials} s{seed}"
                if key in results:
                    continue
                mod = conv_module(c_in, c_out, hw, form == "inlined")
                with tempfile.TemporaryDirectory() as work:
                    rep = tune_workload(mod, target, work_dir=work, trials=args.trials, cost_model="hybrid",
                                        seed=seed, workload_name=f"{label} {form} s{seed}", progress=True)
                results[key] = {"shape": label, "form": form, "seed": seed, "trials": args.trials,
                                "best_us": None if rep.best_latency_s is None else rep.best_latency_s * 1e6,
                                "trials_measured": rep.trials_measured, "trials_failed": rep.trials_failed}
                with open(path, "w") as f:
                    json.dump(results, f, indent=1)  # after each run: a stopped run resumes
    lines = [f"Target `{target}`; "
             f"{args.trials} trials per run, hybrid cost model.", "",
             "| kernel | seed | materialised pad (us) | inlined pad (us) | inlined / materialised |", "|---|---|---:|---:|---:|"]
    for label in SHAPES:
        ratios = []
        for seed in args.seeds:
            m = results.get(f"{label} | materialised | t{args.trials} s{seed}", {}).get("best_us")
            i = results.get(f"{label} | inlined | t{args.trials} s{seed}", {}).get("best_us")
            if m and i:
                ratios.append(i / m)
                lines.append(f"| {label} | {seed} | {m:.1f} | {i:.1f} | {i / m:.2f}x |")
        if ratios:
            gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            lines.append(f"| {label} | geometric mean | | | **{gm:.2f}x** ({min(ratios):.2f}-{max(ratios):.2f}) |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
