"""Stop 40 lead (no rule): FCV_8 records (development log, recorded on the Zen 4) built and timed on this machine:
AVX-512 gathers, packed and scalar FMAs in the assembly, the median of 5 repeats (number 3, min_repeat_ms 50),
and the analytical model with this CPU's spec. Run from anywhere: python benchmarks/modes/gather_fcv8_check_stop40.py"""
import os, re, warnings; warnings.simplefilter("ignore")
import numpy as np, tvm
from tvm_latmodel.replay import load_database
from tvm_latmodel.model.cost_model import HybridCostModel
from tvm_latmodel.hardware import HardwareSpec
from tvm_latmodel.sampling import make_context
from tvm_latmodel.targets import host_target
db = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tuning_logs", "cpu-znver4-net", "FCV_8")
(task,) = load_database(db, name="FCV_8")
target = host_target()
cands = task.candidates()
hw = HardwareSpec.from_target(target)
m = HybridCostModel(target=target, pretrained=None, hardware=hw)
ests = m._analytical(make_context(task.mod, target), cands)
PK, SC = r'vfmadd\w*ps', r'vfmadd\w*ss'
for i in [52, 49, 13, 0]:
    mod = cands[i].sch.mod
    lib = tvm.compile(mod, target=target)
    asm = lib.mod.inspect_source("asm")
    args = [tvm.runtime.tensor(np.random.rand(*a.shape).astype(a.dtype), tvm.cpu()) for a in cands[i].args_info]
    t = lib.mod.time_evaluator("main", tvm.cpu(), number=3, repeat=5, min_repeat_ms=50)(*args)
    g, pk, sc = len(re.findall(r'vgather', asm)), len(re.findall(PK, asm)), len(re.findall(SC, asm))
    print(f"rec {i}: gathers {g}, packed FMA {pk}, scalar FMA {sc}; "
          f"measured here {np.median(t.results)*1e6:.0f} us; model (this CPU's spec) {ests[i].latency_s*1e6:.0f} us; logged on Zen 4 {task.latencies_s[i]*1e6:.0f} us", flush=True)
