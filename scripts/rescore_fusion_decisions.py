#!/usr/bin/env python3
"""Score the planner's current predictions against every measured fusion decision.

``measure_fusion_decisions.py`` measures a decision once (fused against
split, equal trials per kernel) and records the prediction of the model of
that day. The model changes; the measurements stay true. This script takes
the predictions of today's model (``measure_fusion_decisions.py
--predict-only --out DIR`` writes them to ``DIR/predictions/``) and scores
them against the measured gains in ``--measured`` folders (each with a
``decisions/`` subfolder). A group measured in several folders takes its
gain from the last folder named (the later measurement, on the newer
machine).

    python scripts/measure_fusion_decisions.py --networks avmnist mmimdb transfuser mobilenetv2 \\
        --predict-only --out benchmarks/fusion_decisions_stop20
    python scripts/rescore_fusion_decisions.py benchmarks/fusion_decisions_stop20/predictions \\
        --measured benchmarks/fusion_decisions benchmarks/fusion_decisions_stop13 \\
        benchmarks/fusion_decisions_stop15 --out benchmarks/fusion_decisions_stop20/rescore.md

A decision is right when it matches the decision measured
(``measured_decision``: fuse when fusing measured faster). Prints (and
with ``--out`` writes) a markdown table, the count right, and the Spearman
correlation of predicted with measured gains. A measured group with no
current prediction is listed as missing, never silently dropped.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _group(name: str) -> str:
    """``bottleneck10:lv33..lv35`` -> ``bottleneck10``."""
    return name.split(":", 1)[0]


def load_measured(folders: list[str]) -> dict:
    """(network, group) -> (folder name, measured gain us, measured decision, decision of its day)."""
    from tvm_latmodel.fileformat import load_json

    out = {}
    for folder in folders:
        files = sorted(glob.glob(os.path.join(folder, "decisions", "*.json")))
        if not files:
            sys.exit(f"error: {folder}: no decisions/*.json (is it a measure_fusion_decisions.py output?)")
        for path in files:
            d = load_json(path, "fusion decision")
            if d.get("measured_gain_us") is None:
                continue  # predicted only, or its measurement failed
            out[(d["network"], _group(d["group"]))] = (os.path.basename(os.path.normpath(folder)),
                                                       float(d["measured_gain_us"]), d["measured_decision"],
                                                       d.get("decision"))
    return out


def load_predicted(folder: str) -> dict:
    """(network, group) -> (predicted gain us, decision)."""
    from tvm_latmodel.fileformat import load_json

    files = sorted(glob.glob(os.path.join(folder, "*.json")))
    if not files:
        sys.exit(f"error: {folder}: no *.json predictions (measure_fusion_decisions.py --predict-only writes them)")
    out = {}
    for path in files:
        rows = load_json(path, "fusion predictions")
        if not isinstance(rows, list):
            sys.exit(f"error: {path}: expected a list of predictions")
        for r in rows:
            out[(r["network"], _group(r["group"]))] = (float(r["predicted_gain_us"]), r["decision"])
    return out


def spearman(a: list[float], b: list[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).correlation)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("predictions", help="folder of --predict-only outputs (NETWORK-sSEED.json)")
    ap.add_argument("--measured", nargs="+", required=True, help="measure_fusion_decisions.py output folders, oldest first")
    ap.add_argument("--out", help="write the table here (markdown)")
    args = ap.parse_args()

    measured = load_measured(args.measured)
    predicted = load_predicted(args.predictions)
    lines = ["| group | measured in | measured gain us | predicted gain us now | decision now | right now | right then |",
             "|---|---|---:|---:|---|---|---|"]
    right = right_then = 0
    pg, mg, missing = [], [], []
    for key in sorted(measured):
        folder, gain, truth, then = measured[key]
        name = f"{key[0]} {key[1]}"
        if key not in predicted:
            missing.append(name)
            continue
        p, decision = predicted[key]
        ok = decision == truth
        right += ok
        right_then += then == truth
        pg.append(p)
        mg.append(gain)
        lines.append(f"| {name} | {folder} | {gain:.1f} | {p:.1f} | {decision} | {'yes' if ok else '**no**'} | "
                     f"{'yes' if then == truth else 'no'} |")
    scored = len(pg)
    lines += ["", f"Right now: {right} of {scored}; right when measured: {right_then} of {scored}."]
    if scored >= 3:
        lines.append(f"Spearman of predicted with measured gains over the {scored}: {spearman(pg, mg):.2f}.")
    if missing:
        lines.append(f"Measured but not predicted now (planner found no such group): {', '.join(missing)}.")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
