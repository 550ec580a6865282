"""Stop 43 part 2 (PROTOCOL_stop43.md): the spread of the judge's deltas under null changes, and where the
candidates judged at stops 42-43 fall in it.

Reads the null changes' replays (``benchmarks/judge_null_stop43/set<N>_s<sigma>_<salt>/``, made by
``null_change_judge_stop43.sh``) and HEAD's replays of the same sets (``judge_set22_stop42``,
``judge_set23_stop43``), and the candidates' judges: V11 (set 22, ``judge_set22_stop42``), V15 (set 23,
``judge_set23_stop43``), R1 (set 24, ``judge_set24_stop43``; no null changes were run on set 24: compared with
the nulls of both other sets). Deltas are the judge's: means over the set's tasks, new minus old, the 16-shot
ones averaged over seeds 0-4.

    python benchmarks/modes/null_spread_stop43.py [--sigma 0.02]
"""
import argparse
import glob
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import judge_shipped_change as judge  # noqa: E402
HEAD = {"22": "judge_set22_stop42", "23": "judge_set23_stop43"}
CANDIDATES = {"V11": ("22", "judge_set22_stop42"), "V15": ("23", "judge_set23_stop43"),
              "R1": ("24", "judge_set24_stop43")}
COLUMNS = ["analytical S", "analytical top-1", "analytical top-5", "analytical trials",
           "zero-shot S", "zero-shot top-1", "zero-shot top-5", "zero-shot trials", "16-shot top-1", "16-shot top-5"]


def _means(path):
    """The judge's means over the set's tasks (``judge_shipped_change._means``), as an array."""
    return np.array(judge._means(path)[0])


def deltas(old_dir, new_dir, name):
    f = lambda d, tag: os.path.join(ROOT, "benchmarks", d, f"set{name}_{tag}.json")  # noqa: E731
    a = _means(f(new_dir, "analytical_new_0")) - _means(f(old_dir, "analytical_old_0"))
    z = _means(f(new_dir, "C_new_0")) - _means(f(old_dir, "A_old_0"))
    m = (np.mean([_means(f(new_dir, f"C_new_16_s{s}")) for s in range(5)], axis=0)
         - np.mean([_means(f(old_dir, f"A_old_16_s{s}")) for s in range(5)], axis=0))
    return np.concatenate([a, z, m[1:3]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sigma", default="0.02")
    args = ap.parse_args()
    nulls = {}
    for d in sorted(glob.glob(os.path.join(ROOT, "benchmarks", "judge_null_stop43", f"set*_s{args.sigma}_*"))):
        name = os.path.basename(d).split("_")[0][3:]
        nulls.setdefault(name, []).append(deltas(HEAD[name], os.path.join("judge_null_stop43", os.path.basename(d)), name))
    print(f"null changes at sigma {args.sigma}: " + ", ".join(f"set {k}: {len(v)}" for k, v in nulls.items()))
    print("\n| delta | " + " | ".join(f"set {k}: mean (sd) [min, max]" for k in nulls) + " | "
          + " | ".join(CANDIDATES) + " |")
    print("|---|" + "---|" * (len(nulls) + len(CANDIDATES)))
    cand = {c: deltas(d, d, s) for c, (s, d) in CANDIDATES.items()}
    for i, col in enumerate(COLUMNS):
        cells = []
        for v in nulls.values():
            x = np.array([r[i] for r in v])
            cells.append(f"{x.mean():+.3f} ({x.std(ddof=1):.3f}) [{x.min():+.3f}, {x.max():+.3f}]")
        pooled = np.array([r[i] for v in nulls.values() for r in v])
        sd = pooled.std(ddof=1)
        cc = [f"{cand[c][i]:+.3f} (z {(cand[c][i] - pooled.mean()) / sd:+.1f})" if sd > 0 else f"{cand[c][i]:+.3f}"
              for c in CANDIDATES]
        print(f"| {col} | " + " | ".join(cells) + " | " + " | ".join(cc) + " |")
    print("\nz: the candidate's delta against the mean and standard deviation of every null change above (both sets).")


if __name__ == "__main__":
    main()
