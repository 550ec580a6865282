#!/usr/bin/env python3
"""Two ``head_residual_study.py`` results side by side (before / after a model change).

Means over tasks (for shots > 0, each task's mean over seeds first) of
Spearman, top-1, top-5 and rank_5pct per objective and shot count, over the
tasks outside ``--apart`` (the families a change was found on) and over
those apart, then per family at 0 shots.

    python scripts/compare_head_studies.py benchmarks/head_study/stop16-lofo-psf+terms.json \\
        benchmarks/head_study/stop17-lofo-psf+terms.json --apart T2D
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

METRICS = ("spearman", "top1", "top5", "rank_5pct")


def per_task(rows):
    """{(objective, shots): {task: {metric: mean over seeds}}} and task -> family."""
    acc = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    family = {}
    for r in rows:
        family[r["task"]] = r["family"]
        for m in METRICS:
            acc[(r["objective"], r["shots"])][r["task"]][m].append(r[m])
    return ({k: {t: {m: sum(v) / len(v) for m, v in ms.items()} for t, ms in tasks.items()}
             for k, tasks in acc.items()}, family)


def mean(tasks: dict, names) -> tuple:
    names = [n for n in names if n in tasks]
    if not names:
        return None
    return tuple(sum(tasks[n][m] for n in names) / len(names) for m in METRICS), len(names)


def fmt(x) -> str:
    if x is None:
        return "-"
    (s, t1, t5, r), n = x
    return f"{s:.3f} / {t1:.3f} / {t5:.3f} / {r:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--apart", nargs="*", default=[], help="families reported apart")
    args = ap.parse_args()
    runs = []
    for path in (args.before, args.after):
        with open(path) as f:
            runs.append(per_task(json.load(f)["rows"]))
    (b, fam), (a, fam_a) = runs
    fam.update(fam_a)
    apart = set(args.apart)
    rest = sorted(t for t in fam if fam[t] not in apart)
    set_apart = sorted(t for t in fam if fam[t] in apart)
    print(f"Spearman / top-1 / top-5 / rank_5pct, mean over tasks; {len(rest)} tasks outside "
          f"{', '.join(sorted(apart)) or '(none)'}, {len(set_apart)} apart\n")
    print("| objective | shots | tasks | before | after |")
    print("|---|---|---|---|---|")
    for key in sorted(set(b) | set(a), key=lambda k: (k[1], k[0])):
        for label, names in (("outside", rest), ("apart", set_apart)):
            if not names:
                continue
            print(f"| {key[0]} | {key[1]} | {label} | {fmt(mean(b.get(key, {}), names))} | "
                  f"{fmt(mean(a.get(key, {}), names))} |")
    print("\nPer family, 0 shots (top-1 / top-5 / rank_5pct), before -> after:\n")
    objectives = sorted({k[0] for k in a if k[1] == 0})
    print("| family | " + " | ".join(objectives) + " |")
    print("|---|" + "---|" * len(objectives))
    for f_ in sorted(set(fam.values())):
        names = [t for t in fam if fam[t] == f_]
        cells = []
        for o in objectives:
            x, y = mean(b.get((o, 0), {}), names), mean(a.get((o, 0), {}), names)
            short = lambda z: "-" if z is None else f"{z[0][1]:.2f} / {z[0][2]:.2f} / {z[0][3]:.1f}"
            cells.append(f"{short(x)} -> {short(y)}")
        print(f"| {f_} ({len(names)}) | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
