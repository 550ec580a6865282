import json, os
O = "/work/main/benchmarks/pretrained_stop28"
def m(path):
    t = json.load(open(path))["tasks"]
    return [sum(x[k] for x in t) / len(t) for k in ("spearman", "top1_score", "top5_score", "trials_to_5pct")], len(t)
def fmt(v): return " / ".join(f"{x:.3f}" for x in v)
rows = {}
for name in ("set2_analytical_0", "set2_A_0", "set2_C_0", "set1_A_0", "set1_C_0"):
    p = f"{O}/{name}.json"
    if os.path.exists(p):
        rows[name], n = m(p); print(f"| {name} | {n} | {fmt(rows[name])} |")
for X in ("A", "C"):
    s = [m(f"{O}/set2_{X}_16_s{k}.json")[0] for k in range(5) if os.path.exists(f"{O}/set2_{X}_16_s{k}.json")]
    if s:
        mean = [sum(v[i] for v in s) / len(s) for i in range(4)]
        rows[f"set2_{X}_16"] = mean
        print(f"| set2_{X}_16 ({len(s)} seeds) | {fmt(mean)} | top-1 {min(v[1] for v in s):.3f}–{max(v[1] for v in s):.3f} |")
if "set2_C_16" in rows and "set2_A_16" in rows:
    za, zc, ma, mc = rows["set2_A_0"], rows["set2_C_0"], rows["set2_A_16"], rows["set2_C_16"]
    ok = zc[1] >= za[1] and zc[2] >= za[2] - 0.01 and zc[3] <= za[3] + 0.5 and mc[1] >= ma[1] - 0.01 and mc[2] >= ma[2] - 0.01
    print(f"C vs A: zero-shot top-1 {zc[1]-za[1]:+.3f} top-5 {zc[2]-za[2]:+.3f} trials {zc[3]-za[3]:+.2f}; "
          f"16 shots top-1 {mc[1]-ma[1]:+.3f} top-5 {mc[2]-ma[2]:+.3f} -> {'C ships' if ok else 'A stays'}")
