#!/usr/bin/env python3
"""Judge a change to the modes (or the residual) on a held-out set, by the
rule the protocols of stops 28-29 use, old code against new, side by side.

    python scripts/judge_shipped_change.py --old /tmp/snapA --new /tmp/snapB \\
        --old-model OLD/tvm_latmodel/model/pretrained/cpu-x86.json --new-model C.json \\
        --out benchmarks/pretrained_stop29_p2 --name set5 LOG_DIR ...

``--old``/``--new`` are source trees (e.g. ``git archive HEAD`` and the same
with the change applied); each replay runs ``tvm-latmodel replay`` with that
tree first on ``PYTHONPATH``. ``--old-model`` is the shipped residual as it is,
``--new-model`` the one refitted on the new terms
(``train_shipped_model.py ... -o C.json`` run in the new tree), or the
shipped file again to judge the mode with the residual held fixed (stop 30
part 4: a refit on a machine other than the shipped file's moves the
product by more than most modes do). Replays:

* the analytical model alone, zero shots, old and new;
* the product (hybrid with its residual), zero shots, old and new;
* the product at ``--shots`` (16) for each of ``--seeds`` (0-4; the option
  takes every argument after it, so give the logs before it).

Each replay's JSON goes to ``--out`` and is kept: a rerun skips the replays
already done (resumable). Then the rule, on the set's means:

* analytical, new vs old: Spearman and top-1 not lower, top-5 at least
  old - 0.01, trials to 5% at most old + 0.5;
* product, zero shots: top-1 not lower (or by at most ``--top1-tolerance``), Spearman and top-5 at least
  old - 0.01, trials at most old + 0.5; at ``--shots``: top-1 and top-5 at least old - 0.01.
  (Spearman was named by the protocols from stop 35 on and checked by hand;
  the script checks it since stop 37.)

It prints the table and the verdict and writes them to ``summary.md``, with,
for each delta, its 95% interval over the set's tasks (:func:`paired_interval`:
the per-task deltas' mean +- t sd / sqrt(n); the 16-shot arm averages each
task over the seeds first). The intervals inform; the verdict is the rule
above (``benchmarks/modes/PROTOCOL_stop44.md`` part 2 proposes one that uses
them and measures it on the past judges; its verdict is printed too, :func:`rule_t`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
from scipy import stats

KEYS = ("spearman", "top1_score", "top5_score", "trials_to_5pct")


def _replay(root: str, out: str, args: list[str]) -> None:
    if os.path.exists(out) and os.path.getsize(out) > 0:
        return
    env = dict(os.environ, PYTHONPATH=root)
    t0 = time.time()
    with open(out + ".tmp", "w") as f:
        subprocess.run([sys.executable, "-W", "ignore", "-m", "tvm_latmodel.cli.main", "replay", *args, "--json"],
                       cwd=root, env=env, stdout=f, check=True)
    os.replace(out + ".tmp", out)
    print(f"[judge] {os.path.basename(out)} in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)


def _means(path: str) -> tuple[list[float], int]:
    tasks = json.load(open(path))["tasks"]
    return [sum(t[k] for t in tasks) / len(tasks) for k in KEYS], len(tasks)


def per_task(paths: list[str]) -> dict[str, np.ndarray]:
    """{task: its KEYS} from replay JSONs, averaged over the files (seeds)."""
    rows: dict[str, list] = {}
    for path in paths:
        for t in json.load(open(path))["tasks"]:
            rows.setdefault(t["task"], []).append([t[k] for k in KEYS])
    return {name: np.mean(v, axis=0) for name, v in rows.items()}


def paired_interval(old: dict[str, np.ndarray], new: dict[str, np.ndarray], level: float = 0.95):
    """Per KEY: (mean delta, low, high) over the tasks both sides scored,
    new minus old, with a Student-t interval (``level``) over the tasks.
    Raises ``ValueError`` when the sides share fewer than two tasks."""
    names = sorted(set(old) & set(new))
    if len(names) < 2:
        raise ValueError(f"paired_interval: {len(names)} task(s) in common, need 2 or more")
    d = np.array([new[n] - old[n] for n in names])
    mean = d.mean(axis=0)
    half = stats.t.ppf(0.5 + level / 2, len(names) - 1) * d.std(axis=0, ddof=1) / np.sqrt(len(names))
    return [(float(m), float(m - h), float(m + h)) for m, h in zip(mean, half)]


def _rule(analytical, zero_shot, shots, head_path: bool) -> tuple[str, str]:
    """:func:`rule_t` (``head_path`` False) or :func:`rule_h` (True)."""
    s, t1, tr = KEYS.index("spearman"), KEYS.index("top1_score"), KEYS.index("trials_to_5pct")
    z, a = zero_shot[s], analytical[s]
    gain = (z[1] > 0 and a[0] >= -0.01) or (a[1] > 0 and z[0] >= -0.01)
    harms = []
    for arm, label, keys in ((analytical, "analytical", KEYS[1:]), (zero_shot, "zero-shot", KEYS[1:]),
                             (shots, "shots", KEYS[1:3])):
        for k in keys:
            _, lo, hi = arm[KEYS.index(k)]
            if (lo > 0) if k == "trials_to_5pct" else (hi < 0):
                harms.append(f"{label} {k}")
    why = "gain" if gain else "no gain"
    if head_path and not gain and not harms and min(a[0], z[0]) >= -0.01:
        heads = [f"{label} {k}" for arm, label in ((analytical, "analytical"), (zero_shot, "zero-shot"))
                 for k, clear in (("top1_score", arm[t1][1] > 0), ("trials_to_5pct", arm[tr][2] < 0)) if clear]
        if heads:
            gain, why = True, "head gain: " + ", ".join(heads)
    why += "; harm: " + ", ".join(harms) if harms else ""
    return ("ADOPT" if gain and not harms else "REFUSE"), why


def rule_t(analytical, zero_shot, shots) -> tuple[str, str]:
    """Rule R_t (``benchmarks/modes/PROTOCOL_stop44.md`` part 2) on three arms' :func:`paired_interval` results:
    gain = the product's or the analytical zero-shot Spearman interval above 0 (the other's mean delta >= -0.01);
    harm = an interval of analytical or zero-shot top-1, top-5, trials, or of the shots arm's top-1, top-5,
    entirely on the worse side of 0. Returns (``ADOPT`` or ``REFUSE``, why)."""
    return _rule(analytical, zero_shot, shots, head_path=False)


def rule_h(analytical, zero_shot, shots) -> tuple[str, str]:
    """Rule R_h (``benchmarks/modes/PROTOCOL_stop45.md`` part 3): :func:`rule_t` with a second way to show a
    gain, for a change aimed at the head: the product's or the analytical zero-shot top-1 interval above 0, or
    its trials-to-5% interval below 0, with both zero-shot Spearman mean deltas >= -0.01. Harm as in R_t.
    Returns (``ADOPT`` or ``REFUSE``, why)."""
    return _rule(analytical, zero_shot, shots, head_path=True)


def _fmt(v) -> str:
    return " / ".join(f"{x:.3f}" for x in v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--old-model", required=True)
    ap.add_argument("--new-model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="set")
    ap.add_argument("--shots", type=int, default=16)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    ap.add_argument("--top1-tolerance", type=float, default=0.0,
                    help="the product's zero-shot top-1 may fall by this much (stop 31: 0.01 for a refit)")
    args = ap.parse_args()
    logs = [os.path.abspath(p) for p in args.logs]
    os.makedirs(args.out, exist_ok=True)
    o = lambda tag: os.path.join(args.out, f"{args.name}_{tag}.json")  # noqa: E731

    _replay(args.old, o("analytical_old_0"), ["--model", "analytical", *logs])
    if os.path.realpath(args.old) == os.path.realpath(args.new):
        # One tree on both sides (a refit judged alone): the analytical
        # model is the same, so its replay is not run twice.
        if not os.path.exists(o("analytical_new_0")):
            shutil.copyfile(o("analytical_old_0"), o("analytical_new_0"))
    else:
        _replay(args.new, o("analytical_new_0"), ["--model", "analytical", *logs])
    _replay(args.old, o("A_old_0"), ["--model", "hybrid", "--pretrained", args.old_model, *logs])
    _replay(args.new, o("C_new_0"), ["--model", "hybrid", "--pretrained", args.new_model, *logs])
    for s in args.seeds:
        for root, model, tag in ((args.old, args.old_model, "A_old"), (args.new, args.new_model, "C_new")):
            _replay(root, o(f"{tag}_{args.shots}_s{s}"),
                    ["--model", "hybrid", "--pretrained", model, "--shots", str(args.shots), "--seed", str(s), *logs])

    lines = [f"# {args.name}: old `{args.old}` + `{args.old_model}` vs new `{args.new}` + `{args.new_model}`", "",
             "Spearman / top-1 / top-5 / trials to 5%, means over the set's tasks.", "",
             "| replay | tasks | S / top-1 / top-5 / trials |", "|---|---|---|"]
    rows = {}
    for tag in ("analytical_old_0", "analytical_new_0", "A_old_0", "C_new_0"):
        rows[tag], n = _means(o(tag))
        lines.append(f"| {tag} | {n} | {_fmt(rows[tag])} |")
    for tag in ("A_old", "C_new"):
        scored = [_means(o(f"{tag}_{args.shots}_s{s}")) for s in args.seeds]
        per_seed = [v for v, _ in scored]
        rows[tag] = [sum(v[i] for v in per_seed) / len(per_seed) for i in range(len(KEYS))]
        lines.append(f"| {tag}_{args.shots} ({len(per_seed)} seeds; top-1 {min(v[1] for v in per_seed):.3f}-"
                     f"{max(v[1] for v in per_seed):.3f}) | {scored[0][1]} | {_fmt(rows[tag])} |")
    a, b = rows["analytical_old_0"], rows["analytical_new_0"]
    ok1 = b[0] >= a[0] and b[1] >= a[1] and b[2] >= a[2] - 0.01 and b[3] <= a[3] + 0.5
    za, zc, ma, mc = rows["A_old_0"], rows["C_new_0"], rows["A_old"], rows["C_new"]
    ok2 = (zc[1] >= za[1] - args.top1_tolerance and zc[0] >= za[0] - 0.01 and zc[2] >= za[2] - 0.01
           and zc[3] <= za[3] + 0.5 and mc[1] >= ma[1] - 0.01 and mc[2] >= ma[2] - 0.01)
    lines += ["", f"- analytical: Spearman {b[0] - a[0]:+.3f}, top-1 {b[1] - a[1]:+.3f}, top-5 {b[2] - a[2]:+.3f}, "
              f"trials {b[3] - a[3]:+.2f}: {'passes' if ok1 else 'fails'}",
              f"- product: zero-shot Spearman {zc[0] - za[0]:+.3f}, top-1 {zc[1] - za[1]:+.3f}, top-5 {zc[2] - za[2]:+.3f}, trials "
              f"{zc[3] - za[3]:+.2f}; {args.shots} shots top-1 {mc[1] - ma[1]:+.3f}, top-5 {mc[2] - ma[2]:+.3f}: "
              f"{'passes' if ok2 else 'fails'}",
              f"- verdict: {'ADOPT' if ok1 and ok2 else 'REFUSE'}", "",
              "Per-task deltas, new - old: mean [95% t-interval over the tasks] (informative; the verdict is the rule above).",
              "", "| comparison | " + " | ".join(KEYS) + " |", "|---|" + "---|" * len(KEYS)]
    arms = (("analytical, zero shots", [o("analytical_old_0")], [o("analytical_new_0")]),
            ("product, zero shots", [o("A_old_0")], [o("C_new_0")]),
            (f"product, {args.shots} shots", [o(f"A_old_{args.shots}_s{s}") for s in args.seeds],
             [o(f"C_new_{args.shots}_s{s}") for s in args.seeds]))
    intervals = []
    for label, old_paths, new_paths in arms:
        iv = paired_interval(per_task(old_paths), per_task(new_paths))
        intervals.append(iv)
        lines.append(f"| {label} | " + " | ".join(f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]" for m, lo, hi in iv) + " |")
    verdict_t, why = rule_t(*intervals)
    verdict_h, why_h = rule_h(*intervals)
    lines += ["", f"- rule R_t (PROTOCOL_stop44 part 2: a Spearman gain clear of the task spread, no head metric "
              f"clearly worse): {verdict_t} ({why})",
              f"- rule R_h (PROTOCOL_stop45 part 3: R_t, or a zero-shot top-1 / trials gain clear of the task "
              f"spread): {verdict_h} ({why_h})"]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
