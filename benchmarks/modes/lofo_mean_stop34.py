"""Stop 34, part 1 (PROTOCOL_stop34.md): leave-one-family-out over the 185 development logs. S: the
shipped-style residual (fitted on the re-measured logs), N: fitted on every development log, E: the mean of
S's and N's corrections. Zero-shot, pretrained_weight W (env, default 0.5), objective reg:headweighted.
Run from the repository root: python benchmarks/modes/lofo_mean_stop34.py (CACHE: head_residual_study.py
feature cache folder)."""
import sys, os, json
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lofo_ship_stop33 import load, lofo, report

W = float(os.environ.get("W", 0.5))
data, names, feats, folder = load(os.environ.get("DEV_LIST", "benchmarks/modes/dev185_stop34.txt"),
                                  os.environ.get("CACHE", "/tmp/s33/hs/cache"))
rows = lofo(data, names, feats, folder, W, combine=lambda cs, cn: {"E": 0.5 * (cs + cn)})
json.dump(rows, open(f"benchmarks/modes/lofo_mean_stop34_W{W}.json", "w"))
report(rows, [(("remeasured-znver4",), "54 remeasured"), (("cpu-znver4-net", "cpu-znver3-net"), "all nets")],
       ("analytical", "S", "N", "E"))
