"""Stop 40 (PROTOCOL_stop40.md): each record's analytical latency under the code on PYTHONPATH, to tell which
logs a change to the modes touches without computing any metric (no measured latency is read).

    PYTHONPATH=TREE python benchmarks/modes/analytical_dump_stop40.py OUT.json LOG_DIR ...

Each log is featurised with its folder's hardware.json (as replay does). Compare two dumps with --compare A B:
it prints, per log, how many records' predictions differ."""
import json
import os
import sys
import warnings


def dump(out, logs):
    import numpy as np
    from tvm_latmodel.hardware import HardwareSpec
    from tvm_latmodel.model.cost_model import HybridCostModel
    from tvm_latmodel.replay import load_database
    from tvm_latmodel.sampling import make_context

    import tvm_latmodel
    print(f"[dump] tvm_latmodel from {os.path.dirname(tvm_latmodel.__file__)}", file=sys.stderr)
    res = {}
    for log in logs:
        name = os.path.basename(log.rstrip("/"))
        spec_path = os.path.join(os.path.dirname(log.rstrip("/")), "hardware.json")
        spec = HardwareSpec.load(spec_path) if os.path.isfile(spec_path) else None
        (task,) = load_database(log, name=name)
        model = HybridCostModel(target=task.target, pretrained=None, hardware=spec)
        ests = model._analytical(make_context(task.mod, task.target), task.candidates())
        res[name] = [float(np.float64(e.latency_s)) for e in ests]
        print(f"[dump] {name}: {len(ests)} records", file=sys.stderr, flush=True)
    with open(out, "w") as f:
        json.dump(res, f)


def compare(a, b):
    A, B = json.load(open(a)), json.load(open(b))
    for name in sorted(A):
        diff = sum(1 for x, y in zip(A[name], B[name]) if x != y)
        print(f"{name}: {diff} of {len(A[name])} records' analytical predictions differ")


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    if sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        dump(sys.argv[1], sys.argv[2:])
