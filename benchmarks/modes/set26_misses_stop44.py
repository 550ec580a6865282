"""Stop 44 part 1: why the product needs many trials on SFM_11, TBG_8 and DIL_12 of set 26 (123 of its 179).

For each log: the analytical model's and the shipped product's predicted rank of every record within 5% of the
best, their predicted and measured latencies, and the analytical terms of the fastest record and of the
analytical model's top pick (the log's own ``hardware.json``). Run from the repository root:

    python benchmarks/modes/set26_misses_stop44.py [TASK ...] > benchmarks/modes/set26_misses_stop44.txt
"""
import sys
import warnings

import numpy as np

from tvm_latmodel.hardware import HardwareSpec
from tvm_latmodel.model.cost_model import HybridCostModel
from tvm_latmodel.model.modes import estimate, summarize
from tvm_latmodel.replay import find_databases, load_database
from tvm_latmodel.sampling import make_context

FOLDER = "tuning_logs/cpu-rocketlake-te"


def main(names) -> None:
    warnings.simplefilter("ignore")
    spec = HardwareSpec.load(f"{FOLDER}/hardware.json")
    for name in names:
        (db,) = find_databases(f"{FOLDER}/{name}")
        (task,) = load_database(db, name=name)
        cands, res = task.candidates(), task.results()
        meas = np.array([float(np.mean([float(x) for x in r.run_secs])) for r in res])
        best = int(meas.argmin())
        within = np.where(meas <= meas[best] * 1.05)[0]
        print(f"== {name}: {len(meas)} records, best {meas[best] * 1e6:.1f} us (record {best}), "
              f"{len(within)} within 5%")
        for label, kw in (("analytical", {"pretrained": None, "residual": False}), ("product", {})):
            m = HybridCostModel(target=task.target, hardware=spec, **kw)
            pred = m.predict_latency_s(make_context(task.mod, task.target), cands)
            order = list(np.argsort(pred, kind="stable"))
            print(f"  {label}: within-5% records at predicted rank (pred / measured us): " + ", ".join(
                f"{order.index(i)} ({pred[i] * 1e6:.0f} / {meas[i] * 1e6:.0f})" for i in within)
                + "; its top 5: " + ", ".join(f"{pred[i] * 1e6:.0f} / {meas[i] * 1e6:.0f}" for i in order[:5]))
        ests = [estimate(summarize(c.sch.mod, spec.kind), spec) for c in cands]
        top = int(np.argmin([e.latency_s for e in ests]))
        for label, i in (("fastest", best), ("analytical top pick", top)):
            terms = {k: round(v, 4) if isinstance(v, float) else v for k, v in ests[i].terms().items()}
            print(f"  terms of the {label} (record {i}, measured {meas[i] * 1e6:.1f} us): {terms}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["SFM_11", "TBG_8", "DIL_12"])
