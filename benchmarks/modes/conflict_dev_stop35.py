"""Stop 35, part 2 (PROTOCOL_stop35.md): the analytical model alone with and without cache-set conflicts
(``MemoryLevel.sets``; without = every level's sets 0, which is the model before the change), zero-shot, on
the 194 development logs. Each log's spec is ``HardwareSpec.from_target`` of its own target (the Zen 3's
sysfs sets for L1 and L2 on this host; 64 L1 sets and no L2 sets for the Zen 4's logs). Run from the
repository root, with the change applied (it was dropped: ``git apply
benchmarks/modes/set_conflicts_refused.patch``): python benchmarks/modes/conflict_dev_stop35.py [DEV_LIST];
rows go to conflict_dev_stop35.json."""
import dataclasses, os, sys, warnings
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.path.insert(0, ".")
from compacted_dev_stop34 import compare
from tvm_latmodel.hardware import HardwareSpec
from tvm_latmodel.model import program
from tvm_latmodel.model.modes import estimate


def _score(task):
    """Log latencies with every level's sets 0 (old) and as the spec has them (new); one summary per record."""
    new = HardwareSpec.from_target(task.target)
    old = dataclasses.replace(new, memory=tuple(dataclasses.replace(m, sets=0) for m in new.memory))
    sums = [program.summarize(c.sch.mod, "cpu") for c in task.candidates()]
    return {label: np.log(np.maximum([estimate(s, hw).latency_s for s in sums], 1e-12))
            for label, hw in (("old", old), ("new", new))}


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    compare(open(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/modes/dev194_stop34.txt").read().split(),
            _score, "benchmarks/modes/conflict_dev_stop35.json")
