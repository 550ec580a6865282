"""Stop 44 part 2 (PROTOCOL_stop44.md): rule R_t — per-task 95% t-intervals of the judge's deltas — measured on
every committed judge with both sides' replays (``benchmarks/judge_set*_stop*``) and on stop 43's 16 null changes
(``benchmarks/judge_null_stop43``, old side HEAD's replays of sets 22 and 23). No replay is run; nothing is decided.

R_t: gain = the product's or the analytical zero-shot Spearman interval above 0 (the other's mean delta >= -0.01);
harm = an interval of a head metric (analytical / product zero-shot top-1, top-5, trials; 16-shot top-1, top-5)
entirely on the worse side of 0. Adopt = gain and no harm.

    python benchmarks/modes/judge_intervals_stop44.py > benchmarks/modes/judge_intervals_stop44.md
"""
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from judge_shipped_change import KEYS, paired_interval, per_task, rule_t  # noqa: E402

HEAD_OF_NULLS = {"22": "judge_set22_stop42", "23": "judge_set23_stop43"}


def arms(old_dir, new_dir, name):
    """{arm: [(mean, low, high) per KEY]} for the three arms of a judge."""
    f = lambda d, tag: os.path.join(ROOT, "benchmarks", d, f"set{name}_{tag}.json")  # noqa: E731
    seeds = lambda d, tag: sorted(glob.glob(f(d, f"{tag}_16_s*")))  # noqa: E731
    old_m, new_m = seeds(old_dir, "A_old"), seeds(new_dir, "C_new")
    old_0, new_0 = per_task([f(old_dir, "A_old_0")]), per_task([f(new_dir, "C_new_0")])
    return {"analytical": paired_interval(per_task([f(old_dir, "analytical_old_0")]), per_task([f(new_dir, "analytical_new_0")])),
            "zero-shot": paired_interval(old_0, new_0),
            "16 shots": paired_interval(per_task(old_m), per_task(new_m)),
            "_seeds": (len(old_m), len(new_m)),
            "_n": len(set(old_0) & set(new_0))}


def rule_t_of(a):
    return rule_t(a["analytical"], a["zero-shot"], a["16 shots"])


def old_verdict(d):
    m = re.search(r"verdict: (\w+)", open(os.path.join(ROOT, "benchmarks", d, "summary.md")).read())
    return m.group(1) if m else "?"


def cell(iv):
    m, lo, hi = iv
    return f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def main():
    rows = []
    for d in sorted(glob.glob(os.path.join(ROOT, "benchmarks", "judge_set*_stop*"))):
        d = os.path.basename(d)
        name = re.match(r"judge_set(\d+)_", d).group(1)
        rows.append((d, "candidate", arms(d, d, name), old_verdict(d)))
    for d in sorted(glob.glob(os.path.join(ROOT, "benchmarks", "judge_null_stop43", "set*_s*"))):
        b = os.path.basename(d)
        name = b.split("_")[0][3:]
        rel = os.path.join("judge_null_stop43", b)
        rows.append((rel, "null", arms(HEAD_OF_NULLS[name], rel, name), old_verdict(rel)))
    s, t1, t5, tr = (KEYS.index(k) for k in KEYS)
    print("| judge | kind | tasks | old rule | R_t | why | analytical S | zero-shot S | zero-shot top-1 | zero-shot top-5 "
          "| zero-shot trials | 16-shot top-1 | 16-shot top-5 | 16-shot seeds |")
    print("|---|" + "---|" * 13)
    tally = {}
    for d, kind, a, old in rows:
        new, why = rule_t_of(a)
        tally.setdefault(kind, []).append((old, new))
        print(f"| {d} | {kind} | {a['_n']} | {old} | {new} | {why} | {cell(a['analytical'][s])} | {cell(a['zero-shot'][s])} | "
              f"{cell(a['zero-shot'][t1])} | {cell(a['zero-shot'][t5])} | {cell(a['zero-shot'][tr])} | "
              f"{cell(a['16 shots'][t1])} | {cell(a['16 shots'][t5])} | {a['_seeds'][0]}/{a['_seeds'][1]} |")
    print()
    for kind, v in tally.items():
        print(f"- {kind}: {len(v)} comparisons; old rule adopts {sum(o == 'ADOPT' for o, _ in v)}, "
              f"R_t adopts {sum(n == 'ADOPT' for _, n in v)}; they disagree on {sum(o != n for o, n in v)}.")
    print("\nCells: mean delta (new - old) [95% t-interval over the set's tasks]; the 16-shot arm averages each task "
          "over the seeds on each side first.")


if __name__ == "__main__":
    main()
