"""Stop 45 part 3: V15 against HEAD on sets 27 + 28 pooled (44 tasks), by rule R_h (and R_t beside it).

Reads the replays of ``benchmarks/judge_v15_set27_stop45`` and ``benchmarks/judge_v15_set28_stop45`` (made by
``scripts/judge_shipped_change.py``; set 27's old side copied from ``judge_set27_stop44``), pools the per-task
deltas of both sets (task names differ between sets; the 16-shot arm averaged over seeds per task first) and
prints each arm's mean delta with its 95% t-interval over the tasks, for the pool and for each set alone, and the
verdicts. Only the pooled verdict decides (``PROTOCOL_stop45.md`` part 3). From the repository root:

    python benchmarks/modes/judge_pooled_stop45.py > benchmarks/modes/judge_pooled_stop45.md
"""
import glob
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from judge_shipped_change import KEYS, paired_interval, per_task, rule_h, rule_t  # noqa: E402

SETS = (("27", "judge_v15_set27_stop45"), ("28", "judge_v15_set28_stop45"))
ARMS = (("analytical, zero shots", "analytical_old_0", "analytical_new_0"),
        ("product, zero shots", "A_old_0", "C_new_0"),
        ("product, 16 shots (5 seeds)", "A_old_16_s*", "C_new_16_s*"))


def sides(sets, old_tag, new_tag):
    old, new = {}, {}
    for name, d in sets:
        f = lambda tag: sorted(glob.glob(os.path.join(ROOT, "benchmarks", d, f"set{name}_{tag}.json")))  # noqa: E731
        o, n = f(old_tag), f(new_tag)
        if not o or len(o) != len(n):
            raise SystemExit(f"{d}: {len(o)} old and {len(n)} new replays for {old_tag}")
        old.update(per_task(o))
        new.update(per_task(n))
    return old, new


def report(label, sets):
    print(f"\n## {label}\n")
    print("| arm | tasks | old S / top-1 / top-5 / trials | new | " + " | ".join(f"delta {k}" for k in KEYS) + " |")
    print("|---|---|---|---|" + "---|" * len(KEYS))
    ivs = []
    for arm, old_tag, new_tag in ARMS:
        old, new = sides(sets, old_tag, new_tag)
        iv = paired_interval(old, new)
        ivs.append(iv)
        mean = lambda side: " / ".join(f"{sum(side[t][i] for t in side) / len(side):.3f}" for i in range(len(KEYS)))  # noqa: E731
        print(f"| {arm} | {len(set(old) & set(new))} | {mean(old)} | {mean(new)} | "
              + " | ".join(f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]" for m, lo, hi in iv) + " |")
    print(f"\n- R_h: {' '.join(rule_h(*ivs))}; R_t: {' '.join(rule_t(*ivs))}")


def main():
    print("# V15 (stop 43's frozen patch) against HEAD, residual held fixed (shipped R1): sets 27 + 28")
    print("\nCells: mean over tasks; deltas new - old with a 95% t-interval over the tasks. "
          "Only the pooled verdict decides (PROTOCOL_stop45 part 3).")
    report("Pooled, sets 27 + 28 (the decision)", SETS)
    for s in SETS:
        report(f"Set {s[0]} alone (reported, does not decide)", (s,))


if __name__ == "__main__":
    main()
