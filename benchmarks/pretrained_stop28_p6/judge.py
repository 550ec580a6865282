"""Stop 28 part 6's rule on fresh set 4 (PROTOCOL_stop28.md)."""
import json
import os

O = os.path.dirname(os.path.abspath(__file__))
KEYS = ("spearman", "top1_score", "top5_score", "trials_to_5pct")


def m(name):
    t = json.load(open(f"{O}/{name}.json"))["tasks"]
    return [sum(x[k] for x in t) / len(t) for k in KEYS], len(t)


def fmt(v):
    return " / ".join(f"{x:.3f}" for x in v)


rows = {}
for name in ("set4_analytical_old_0", "set4_analytical_new_0", "set4_A_old_0", "set4_C_new_0"):
    if os.path.exists(f"{O}/{name}.json"):
        rows[name], n = m(name)
        print(f"| {name} | {n} | {fmt(rows[name])} |")
for X in ("A_old", "C_new"):
    s = [m(f"set4_{X}_16_s{k}")[0] for k in range(5) if os.path.exists(f"{O}/set4_{X}_16_s{k}.json")]
    if s:
        rows[X + "_16"] = [sum(v[i] for v in s) / len(s) for i in range(4)]
        print(f"| set4_{X}_16 ({len(s)} seeds) | {fmt(rows[X + '_16'])} | top-1 "
              f"{min(v[1] for v in s):.3f}-{max(v[1] for v in s):.3f} |")
if "set4_analytical_new_0" in rows:
    a, b = rows["set4_analytical_old_0"], rows["set4_analytical_new_0"]
    ok1 = b[0] >= a[0] and b[1] >= a[1] and b[2] >= a[2] - 0.01 and b[3] <= a[3] + 0.5
    print(f"analytical: Spearman {b[0]-a[0]:+.3f} top-1 {b[1]-a[1]:+.3f} top-5 {b[2]-a[2]:+.3f} "
          f"trials {b[3]-a[3]:+.2f} -> {'passes' if ok1 else 'fails'}")
if "C_new_16" in rows and "A_old_16" in rows:
    za, zc, ma, mc = rows["set4_A_old_0"], rows["set4_C_new_0"], rows["A_old_16"], rows["C_new_16"]
    ok2 = zc[1] >= za[1] and zc[2] >= za[2] - 0.01 and zc[3] <= za[3] + 0.5 and mc[1] >= ma[1] - 0.01 \
        and mc[2] >= ma[2] - 0.01
    print(f"product: zero-shot top-1 {zc[1]-za[1]:+.3f} top-5 {zc[2]-za[2]:+.3f} trials {zc[3]-za[3]:+.2f}; "
          f"16 shots top-1 {mc[1]-ma[1]:+.3f} top-5 {mc[2]-ma[2]:+.3f} -> {'passes' if ok2 else 'fails'}")
